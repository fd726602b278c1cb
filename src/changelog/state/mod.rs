//! The run state as changelog records hold it: the serde impls of every persisted engine type,
//! kept here so that the record format is written down in one place and the engine holds no
//! serde code of its own. Binary records (version 5) are these shapes in MessagePack, with
//! structs as arrays of fields in declaration order; the JSON versions 1 to 4 are read by the
//! same impls, which accept each older shape.
//!
//! The engine's persisted fields are crate-visible for this module; nothing else writes them.
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
