//! Agents (in progress).
