//! End to end with real git and cargo (see below).
