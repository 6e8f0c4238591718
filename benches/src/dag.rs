//! DAG workloads (placeholder).
