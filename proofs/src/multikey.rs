//! multikey (in progress)
