//! The run state as changelog records hold it: the serde impls of every persisted engine type,
//! kept here so that the record format is written down in one place and the engine holds no
//! serde code of its own. Binary records (version 5) are these shapes in MessagePack, with
//! structs as arrays of fields in declaration order; the JSON versions 1 to 4 are read by the
//! same impls, which accept each older shape.
//!
//! The engine's persisted fields are crate-visible for this module; nothing else writes them.
//! Where a record is the type's fields as they are, a remote definition (`…Def`) lists them:
//! the order of that list is the order of a binary record.

/// `Serialize` and `Deserialize` for an engine type through its remote definition.
macro_rules! through_remote {
    ($ty:ty, $def:ident) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                $def::serialize(self, s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $def::deserialize(d)
            }
        }
    };
}
mod budget;
mod containers;
mod content;
mod context;
mod cycle;
mod detectors;
mod failure;
mod handoff;
mod keelwave;
mod meta;
mod neardup;
mod policy;
mod progress;
mod repeat;
mod rollup;
mod run;
mod signature;
mod stall;
mod window;
