//! The `orchestrator` binary.
fn main() {}
