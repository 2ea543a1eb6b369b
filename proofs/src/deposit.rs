//! The protocol vocabulary every layer above this crate shares: a
//! deposit's identity ([`DepositId`], §5a.5 s3, §5a.8) and the carrier's
//! instants ([`Ms`]). They live here, in the pure core, so that the wire
//! codec, the client library, the engine and the store all name the same
//! types without depending on one another.

/// Milliseconds since the Unix epoch: every instant the carrier decides
/// on (issue, admission, horizons, §5a.8/§5a.9). The engine never reads a
/// clock; its caller passes `now` in these units.
pub type Ms = u64;

/// A deposit's identity: SHA-256 of its sealed-envelope bytes (§5a.5 s3
/// byte identity, §5a.8 `conclude`, §6.1 status). On the wire it is the
/// sha2-256 multihash in `u` multibase
/// ([`crate::encoding::digest_multibase`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DepositId(pub [u8; 32]);

impl DepositId {
    /// The id of envelope `bytes`.
    pub fn of(bytes: &[u8]) -> DepositId {
        DepositId(crate::encoding::sha256(bytes))
    }

    /// The wire form: `u` + base64url(`0x12 0x20` ‖ digest), 47 characters.
    pub fn to_multibase(&self) -> String {
        let mut multihash = [0u8; 34];
        multihash[..2].copy_from_slice(&crate::encoding::SHA256_MULTIHASH_PREFIX);
        multihash[2..].copy_from_slice(&self.0);
        crate::encoding::multibase_u(&multihash)
    }

    /// Parses an id as a person may type it (`u` or `z` multibase sha2-256
    /// multihash: the CLI's arguments). On the wire use
    /// [`DepositId::from_wire`].
    ///
    /// # Errors
    /// [`crate::encoding::EncodingError`] for anything else.
    pub fn parse(s: &str) -> Result<DepositId, crate::encoding::EncodingError> {
        crate::encoding::parse_digest_multibase(s).map(DepositId)
    }

    /// Parses the wire form, its one spelling (`PROTOCOL.md` §7: `u`
    /// multibase, 47 characters, as [`DepositId::to_multibase`] writes it).
    ///
    /// # Errors
    /// [`crate::encoding::EncodingError::MultibasePrefix`] for any other
    /// prefix (a `z` id included); otherwise as [`DepositId::parse`].
    pub fn from_wire(s: &str) -> Result<DepositId, crate::encoding::EncodingError> {
        match s.chars().next() {
            Some('u') => DepositId::parse(s),
            other => Err(crate::encoding::EncodingError::MultibasePrefix(other)),
        }
    }
}
