//! uni20-dist (placeholder being built)
