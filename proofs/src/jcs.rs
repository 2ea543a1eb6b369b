//! jcs (in progress)
