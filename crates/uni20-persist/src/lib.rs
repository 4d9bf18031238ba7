//! uni20-persist (placeholder being built)
