//! The sans-IO carrier engine: the §5a.3 state table, r1–r5, s1–s6,
//! metering and the §5a.9 horizons, over a [`rltp_storage::Store`] and a
//! [`clock::Clock`].

pub mod clock;
pub mod table;
pub mod verdict;
