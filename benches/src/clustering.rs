//! Clustering workloads (placeholder).
