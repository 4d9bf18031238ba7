//! uni20 facade (placeholder being built)
