//! `closed_set!`: one table per closed set of spellings (verdicts, error
//! codes, statuses, operations), from which the enum, its exact spelling
//! ([`Display`](std::fmt::Display), `as_str`), its parser (`from_wire`),
//! its retriable flag and the list of all its members are generated — the
//! pattern of quinn's `errors!` table: a spelling is written once.
//!
//! A row is `Variant = "spelling"`, followed by `, retriable` when the
//! member is one of the carrier's own retriable limits (§4.4 guarantee 2).
//! A variant may carry `u64` fields (the held generation of
//! `refused(stale-generation)`); in `ALL` and in what `from_wire` returns
//! they are 0, since the set is closed over spellings and the wire carries
//! such data beside the spelling.

/// Generates a closed set from its table (see the module docs).
macro_rules! closed_set {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident $({ $($(#[$fmeta:meta])* $field:ident : u64),+ $(,)? })?
                    = $spelling:literal $(, $retriable:ident)?;
            )+
        }
    ) => {
        $(#[$meta])*
        pub enum $name {
            $(
                $(#[$vmeta])*
                $variant $({ $($(#[$fmeta])* $field: u64),+ })?,
            )+
        }

        impl $name {
            /// Every member, in the order of its table (data fields 0).
            pub const ALL: [$name; closed_set!(@count $($variant)+)] = [
                $( $name::$variant $({ $($field: 0),+ })? ),+
            ];

            /// The exact wire spelling.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant { .. } => $spelling, )+
                }
            }

            /// Whether this member is retriable: the same request presented
            /// later may get another answer (§4.4 guarantee 2).
            pub const fn retriable(self) -> bool {
                match self {
                    $( $name::$variant { .. } => closed_set!(@flag $($retriable)?), )+
                }
            }

            /// Parses the exact spelling (data fields 0).
            pub fn from_wire(text: &str) -> Option<$name> {
                $name::ALL.into_iter().find(|member| member.as_str() == text)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
    (@flag retriable) => { true };
    (@flag) => { false };
    (@count) => { 0 };
    (@count $head:ident $($tail:ident)*) => { 1 + closed_set!(@count $($tail)*) };
}

pub(crate) use closed_set;
