//! encoding (in progress)
