//! identity (in progress)
