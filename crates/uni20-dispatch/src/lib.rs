//! uni20-dispatch (placeholder being built)
