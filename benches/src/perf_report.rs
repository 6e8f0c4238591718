//! perf-report
fn main() {}
