//! json (in progress)
