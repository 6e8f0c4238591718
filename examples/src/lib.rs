#![doc = include_str!("../README.md")]
//!
//! ---
//!
//! This crate holds the embedding examples. Its library target exists so that
//! the README's Rust samples compile as doctests and so that the examples'
//! code can be tested (see `tests/`).

pub mod custom_bot;
