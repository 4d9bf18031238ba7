//! uni20-async (placeholder being built)
