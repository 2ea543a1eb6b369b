//! The QUIC application close codes of the profile (`PROTOCOL.md` §5,
//! "Closing"): a closed set, each with its reason phrase. A peer that
//! reads another code treats the close as a plain transport failure.

/// The application error code and reason phrase of a CONNECTION_CLOSE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseCode {
    /// `0`: the connection is done (the client's `done`, the server's
    /// `shutdown`).
    NoError,
    /// `1`, reason `going-away`: the carrier node is in lame-duck mode (a
    /// rolling restart) and takes no new connections. A client tries the
    /// next server it was given, or this one later; nothing sent on the
    /// closed connection was answered, so nothing was admitted by it.
    GoingAway,
}

impl CloseCode {
    /// Every code, in code order.
    pub const ALL: [CloseCode; 2] = [CloseCode::NoError, CloseCode::GoingAway];

    /// The QUIC application error code.
    pub const fn code(self) -> u32 {
        match self {
            CloseCode::NoError => 0,
            CloseCode::GoingAway => 1,
        }
    }

    /// The name, as the reason phrase of [`CloseCode::GoingAway`] spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            CloseCode::NoError => "no-error",
            CloseCode::GoingAway => "going-away",
        }
    }

    /// The code of `code`, `None` outside the set.
    pub fn from_code(code: u64) -> Option<CloseCode> {
        CloseCode::ALL
            .into_iter()
            .find(|c| u64::from(c.code()) == code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_close_codes_are_a_closed_set() {
        assert_eq!(CloseCode::from_code(0), Some(CloseCode::NoError));
        assert_eq!(CloseCode::from_code(1), Some(CloseCode::GoingAway));
        assert_eq!(CloseCode::from_code(2), None);
        assert_eq!(CloseCode::GoingAway.as_str(), "going-away");
        assert_eq!(CloseCode::GoingAway.code(), 1);
    }
}
