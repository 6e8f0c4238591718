#![doc = include_str!("../../README.md")]
//!
//! ---
//!
//! This crate holds the embedding examples (`examples/*.rs`); its library
//! target exists so that the README's Rust samples compile as doctests.
