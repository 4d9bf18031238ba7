//! uni20-worker (placeholder being built)
