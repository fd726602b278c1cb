use super::slots::Packed;
use super::store::Store;
use super::*;

fn call(i: u64) -> Call {
    Call::new(i, i, i, i, i, false)
}

#[test]
fn each_window_keeps_its_newest_calls() {
    let mut h = History::default();
    for i in 0..100 {
        h.push(call(i));
        h.join(STALL, 8);
        if i % 3 == 0 {
            h.join(REPEAT, 5);
        }
        h.settle();
    }
    let stall: Vec<u64> = h.members(STALL).map(|c| c.step).collect();
    assert_eq!(stall, (92..100).collect::<Vec<_>>());
    let repeat: Vec<u64> = h.members(REPEAT).map(|c| c.step).collect();
    assert_eq!(repeat, vec![87, 90, 93, 96, 99]);
    assert_eq!(h.view(STALL).len(), 8);
    assert_eq!(h.view(REPEAT).get(0).step, 87);
    // Nothing older than the oldest call a window holds.
    assert_eq!(h.calls.get(0).step, 87);
}

#[test]
fn calls_no_window_holds_do_not_pile_up() {
    let mut h = History::default();
    // One old call stays in a window while thousands of later ones leave theirs.
    h.push(call(0));
    h.join(REPEAT, 48);
    h.settle();
    for i in 1..10_000 {
        h.push(call(i));
        h.join(CYCLE, 4);
        h.settle();
        assert!(h.calls.len() <= 2 * 5 + 16 + 1, "{} calls", h.calls.len());
    }
    assert_eq!(h.members(REPEAT).map(|c| c.step).collect::<Vec<_>>(), [0]);
    assert_eq!(h.len(CYCLE), 4);
}

#[test]
fn leaving_keeps_the_order_of_the_rest() {
    let mut h = History::default();
    for i in 0..6 {
        h.push(call(i));
        h.join(REPEAT, 48);
        h.settle();
    }
    h.leave(REPEAT, |c| c.step % 2 == 1);
    let left: Vec<u64> = h.members(REPEAT).map(|c| c.step).collect();
    assert_eq!(left, [0, 2, 4]);
    assert_eq!(h.len(REPEAT), 3);
    // A listed view when the window is not the newest calls.
    assert_eq!(h.view(REPEAT).get(2).step, 4);
}

/// Calls are packed against a base step; steps before it, four billion past it, or work
/// past 26 bits must come back exactly as given.
#[test]
fn calls_come_back_exactly_whatever_their_steps_and_work() {
    let cases: [&[(u64, u64)]; 5] = [
        &[(10, 0), (11, 1), (12, 1)],
        // Out of order: an earlier step than the first one.
        &[(10, 0), (3, 1), (12, 2), (0, 2)],
        // Steps far apart: kept whole.
        &[(5, 0), (5 + (1 << 32), 1), (6, 1), (u64::MAX, 2)],
        // Work beyond 26 bits, and beyond 32.
        &[(1, 0), (2, (1 << 26) - 1), (3, 1 << 26), (4, u64::MAX)],
        &[(u64::MAX - 1, 0), (0, 0)],
    ];
    for calls in cases {
        let mut h = History::default();
        for &(step, work) in calls {
            h.push(Call::new(
                step,
                step ^ 1,
                step ^ 2,
                step ^ 3,
                work,
                step % 2 == 0,
            ));
            h.join(CYCLE, 64);
            h.settle();
        }
        let got: Vec<Call> = h.members(CYCLE).collect();
        let want: Vec<Call> = calls
            .iter()
            .map(|&(step, work)| {
                let mut c = Call::new(step, step ^ 1, step ^ 2, step ^ 3, work, step % 2 == 0);
                c.bits = CYCLE;
                c
            })
            .collect();
        assert_eq!(got, want, "{calls:?}");
        // Emptied, the history packs again from the next call's step.
        h.leave(CYCLE, |_| true);
        h.settle();
        h.push(call(7));
        assert!(
            matches!(h.calls, Store::Lean(Packed { base: 7, .. })),
            "{calls:?}"
        );
    }
}

/// Calls whose primary key is their action keep 24 bytes; the first that differs widens
/// the store, and every call still comes back exactly.
#[test]
fn a_call_with_its_own_primary_widens_the_store() {
    let mut h = History::default();
    let mut want = Vec::new();
    for i in 0..6u64 {
        let primary = if i == 3 { 99 } else { i * 7 };
        let mut c = Call::new(10 + i, i * 7, primary, i, i, false);
        h.push(c);
        h.join(CYCLE, 64);
        h.settle();
        c.bits = CYCLE;
        want.push(c);
        assert_eq!(matches!(h.calls, Store::Lean(_)), i < 3, "{i}");
    }
    assert!(matches!(h.calls, Store::Wide(_)));
    assert_eq!(h.members(CYCLE).collect::<Vec<_>>(), want);
    h.leave(CYCLE, |_| true);
    h.settle();
    h.push(call(1));
    assert!(matches!(h.calls, Store::Lean(_)));
}

#[test]
fn a_window_holds_at_most_max_window_calls() {
    let mut h = History::default();
    let n = MAX_WINDOW as u64 + 10;
    for i in 0..n {
        h.push(call(i));
        h.join(CYCLE, usize::MAX);
        h.settle();
    }
    assert_eq!(h.len(CYCLE), MAX_WINDOW);
    assert_eq!(h.members(CYCLE).next().map(|c| c.step), Some(10));
    assert_eq!(h.members(CYCLE).count(), MAX_WINDOW);
}
