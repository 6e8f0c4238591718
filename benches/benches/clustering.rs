//! clustering bench (placeholder)
fn main() {}
