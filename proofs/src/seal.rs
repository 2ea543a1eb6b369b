//! seal (in progress)
