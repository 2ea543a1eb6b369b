//! proof (in progress)
