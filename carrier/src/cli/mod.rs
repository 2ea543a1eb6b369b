//! The operator commands of `rltp-carrier`, over `rltp-server`: `serve`,
//! `migrate`, `backup`, `restore`, `admin`, and the binary's own
//! `completions` and `man`. The client commands and the plumbing every
//! command shares (exit statuses, [`Failure`], [`finish`], [`output`]) are
//! `rltp-cli`'s.

pub mod admin;
pub mod backup;
pub mod docs;
pub mod migrate;
pub mod restore;
pub mod serve;

pub use rltp_cli::{Failure, exit, finish, output};
