//! constants (in progress)
