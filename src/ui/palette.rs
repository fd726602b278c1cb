//! The series colours, shared by the charts and the legends and tables beside them.

/// Distinguishable on white, in order of use.
pub(crate) const PALETTE: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];
