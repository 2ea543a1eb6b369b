//! envelope (in progress)
