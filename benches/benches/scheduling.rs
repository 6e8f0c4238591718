//! scheduling bench (placeholder)
fn main() {}
