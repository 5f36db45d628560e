//! The SQLite store (placeholder until written).
