//! The closed set of QUIC application error codes of the wire profile
//! (`PROTOCOL.md` §5, `ERRORS.md`): what a `CONNECTION_CLOSE` (application
//! variant) or a stream's `STOP_SENDING` carries. One table: a code's
//! number, its name and its retriable flag are written here and nowhere
//! else; every close in the server and the client names a member.

use crate::closed_set::closed_set;

closed_set! {
    /// QUIC application error codes, by name (`as_str`); [`CloseCode::code`]
    /// is the number on the wire.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum CloseCode {
        /// `0`: no error. The connection ended on purpose (reason `shutdown`
        /// from a draining server after its in-flight operations finished,
        /// `done` from a client), or, as `STOP_SENDING`, the server will not
        /// read the rest of a stream it has answered.
        NoError = "no-error";
        /// `1`, reason `going-away`: the carrier node is in lame-duck mode
        /// (a rolling restart) and takes no new connections. A client tries
        /// the next server it was given, or this one later; nothing sent on
        /// the closed connection was answered, so nothing was admitted by
        /// it.
        GoingAway = "going-away", retriable;
    }
}

impl CloseCode {
    /// The number on the wire.
    pub const fn code(self) -> u32 {
        match self {
            CloseCode::NoError => 0,
            CloseCode::GoingAway => 1,
        }
    }

    /// The member whose number is `code`, if any.
    pub fn from_code(code: u64) -> Option<CloseCode> {
        CloseCode::ALL
            .into_iter()
            .find(|member| u64::from(member.code()) == code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_parse_back() {
        for member in CloseCode::ALL {
            assert_eq!(CloseCode::from_code(u64::from(member.code())), Some(member));
            assert_eq!(CloseCode::from_wire(member.as_str()), Some(member));
        }
        assert_eq!(CloseCode::NoError.code(), 0);
        assert_eq!(CloseCode::GoingAway.code(), 1);
        assert_eq!(CloseCode::GoingAway.as_str(), "going-away");
        assert_eq!(CloseCode::from_code(2), None);
        assert_eq!(CloseCode::from_code(7), None);
    }
}
