//! The one bounded memo the engine uses for pure functions of short texts (tool names, agent
//! names, error texts). A memo is owned by its partition's engine and lent to each step, so what
//! it holds depends only on the events that partition applied, never on which thread ran them;
//! and since it only ever returns what the function would, outputs do not depend on it at all.
use hashbrown::HashTable;

/// Entries `E` found by hash and equality; cleared whole when it reaches its capacity, so a
/// hostile stream of distinct keys costs a rebuild now and then, never memory.
pub(crate) struct Memo<E> {
    table: HashTable<E>,
    cap: usize,
}

impl<E> Memo<E> {
    pub(crate) const fn new(cap: usize) -> Self {
        Self {
            table: HashTable::new(),
            cap,
        }
    }

    /// The entry under `hash` that `eq` accepts, else the one `make` builds (stored first).
    /// `rehash` gives an entry's hash, as `hash` was computed.
    pub(crate) fn get_or_insert_with(
        &mut self,
        hash: u64,
        eq: impl FnMut(&E) -> bool,
        make: impl FnOnce() -> E,
        rehash: impl Fn(&E) -> u64,
    ) -> &E {
        match self.table.find_entry(hash, eq) {
            Ok(found) => found.into_mut(),
            Err(absent) => {
                let table = absent.into_table();
                if table.len() >= self.cap {
                    table.clear();
                }
                table.insert_unique(hash, make(), rehash).into_mut()
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }
}

impl<E> std::fmt::Debug for Memo<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Memo({}/{})", self.table.len(), self.cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_the_stored_entry_and_clears_when_full() {
        let mut m: Memo<(u64, u64)> = Memo::new(2);
        let made = std::cell::Cell::new(0);
        let mut get = |k: u64| {
            m.get_or_insert_with(
                k,
                |e| e.0 == k,
                || {
                    made.set(made.get() + 1);
                    (k, k * 10)
                },
                |e| e.0,
            )
            .1
        };
        assert_eq!(get(1), 10);
        assert_eq!(get(1), 10);
        assert_eq!(get(2), 20);
        // Full: the third key clears the memo before it is stored, so 1 is made again.
        assert_eq!(get(3), 30);
        assert_eq!(get(1), 10);
        assert_eq!(made.get(), 4);
        assert_eq!(m.len(), 2);
    }
}
