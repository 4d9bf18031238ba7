//! # Guide (documentation only)
//!
//! TODO
