//! custom bot
fn main() {}
