//! # rltp-party: the party side of the RLTP Delivery Contract, sans-IO
//!
//! A sender seals a document to its counterpart's `rkid` and deposits it;
//! the counterpart's collect runs the §6.2 pipeline, commits the effect, the
//! completed-effect cache entry and a `delivery-ack/0.1` in one
//! transaction; the acknowledgement travels back as an ordinary document;
//! the sender's pipeline checks it against its sent-register (§4.2) and
//! moves its status to `delivered` (§6.1). This crate is every rule of that
//! chain as functions of (state, input, `now`), with randomness injected:
//! no sockets, no files, no clock.
//!
//! | module | what | spec |
//! |---|---|---|
//! | [`relationship`] | pair context, carrier nonces, own and counterpart card; the serialisable record | Identity §5.1–§5.2, §6.1, §7a |
//! | [`card`] | contact cards: verify (schema, keys, binding, signature), sign | Encounter 6, Identity §8.4 |
//! | [`hint`] | the delivery-hint grammar (decided in `PROTOCOL.md` §14) | Encounter RLTP-ENC-6080/6090 |
//! | [`schema`] | the vendored schema closure, offline by `$id` | §3 |
//! | [`document`] | stage 4 parse/digest, stage 5 profile, the document builder | §3, §5 |
//! | [`registry`] | the type registry and the acknowledgement class rule | §4, §4.4 |
//! | [`consistency`] | stage 8 for credential deliveries and bundles | §4.1, §4.3 |
//! | [`bundle`] | the application's Encounter seam for bundles | §4.1, §6.2 stage 9 |
//! | [`ack`] | acknowledgements of both proof classes | §4.2, §4.4 |
//! | [`sender`] | sent-register entries, §4.2 consistency, the status trias | §4.2, §6.1 |
//! | [`store`] | the party store trait, one-transaction commit, retention; [`store::MemStore`] | §4.2, §6.2, §7 |
//! | [`locks`] | the stage-9 lock set, taken atomically | §6.2 stage 9 |
//! | [`keyring`] | arrival tuples and tombstones by `rkid` | §5, §4.4 |
//! | [`pipeline`] | stages 1–9 in order | §6.2 |
//! | [`disposition`] | the closed disposition set, spelled as the contract spells it | §6.2 |

pub mod ack;
pub mod bundle;
pub mod card;
pub mod consistency;
pub mod disposition;
pub mod document;
pub mod hint;
pub mod keyring;
pub mod locks;
pub mod pipeline;
pub mod registry;
pub mod relationship;
pub mod schema;
pub mod sender;
pub mod store;

pub use disposition::{Disposition, FailReason, Stage};
pub use pipeline::{Arrival, Critical, Outcome, Pending, Receiver, Step};
