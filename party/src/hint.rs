//! Delivery hints: where a party's queue can be reached (`PROTOCOL.md`
//! §14, decided here; Encounter RLTP-ENC-6080/6090 leave the grammar open
//! and bound a card to at most 8 hints of at most 512 characters).
//!
//! ```text
//! hint      = transport "://" host ":" port [ "#" pin ]
//! transport = "rltp+quic" / "rltp+tls"
//! host      = dns-name / ipv4 / "[" ipv6 "]"      -- each in its one canonical spelling
//! port      = 1..65535, decimal, no leading zero
//! pin       = "sha256/" base64(SHA-256(DER SubjectPublicKeyInfo))   -- 44 characters, padded
//! ```
//!
//! A hint names a carrier **endpoint** and how to authenticate it — never
//! the carrier identifier `C`, a control principal or anything derived from
//! them (Identity §7a.5(3): the principal is never social). The grammar
//! leaves no room for one: no user-info, path or query exists in it. A
//! depositor needs only the endpoint, the pin and the `rkid` (§5a.1, §5a.4).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Encounter RLTP-ENC-6080: at most 8 hints per card.
pub const MAX_HINTS: usize = 8;
/// Encounter RLTP-ENC-6090: at most 512 characters per hint.
pub const MAX_HINT_CHARS: usize = 512;
/// The pin's prefix: the HPKP SHA-256 SPKI form `serve` prints (PROTOCOL.md §5).
pub const PIN_PREFIX: &str = "sha256/";

/// How a depositor reaches the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// QUIC with TLS 1.3, ALPN `rltp-carrier/1` (PROTOCOL.md §5): `rltp+quic`.
    Quic,
    /// The same frames over TLS 1.3 on TCP: `rltp+tls`. A depositor without
    /// that binding skips the hint.
    Tls,
}

impl Transport {
    /// The scheme spelling.
    pub const fn scheme(self) -> &'static str {
        match self {
            Transport::Quic => "rltp+quic",
            Transport::Tls => "rltp+tls",
        }
    }
}

/// The endpoint's host, in its one spelling.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// A DNS name: lower-case LDH labels of 1–63 characters, at most 253
    /// characters in all, no trailing dot.
    Name(String),
    /// An IPv4 literal in dotted-decimal without leading zeros.
    V4(Ipv4Addr),
    /// An IPv6 literal in RFC 5952 form, bracketed in the hint.
    V6(Ipv6Addr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::V4(ip) => write!(f, "{ip}"),
            Host::V6(ip) => write!(f, "[{ip}]"),
        }
    }
}

/// Why a string is not a delivery hint of this grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HintError {
    /// Longer than [`MAX_HINT_CHARS`].
    #[error("a hint is at most 512 characters, this one has {0}")]
    TooLong(usize),
    /// The scheme is not `rltp+quic` or `rltp+tls`.
    #[error("unknown transport: the hint does not start with rltp+quic:// or rltp+tls://")]
    Transport,
    /// No `:port`, or a port outside 1–65535 or with a leading zero.
    #[error("the port is not a decimal 1..65535 without a leading zero")]
    Port,
    /// The host is not a canonical DNS name, IPv4 or bracketed IPv6 literal.
    #[error("the host is not a canonical dns name, ipv4 or [ipv6] literal")]
    Host,
    /// The fragment is not `sha256/` + padded base64 of 32 bytes.
    #[error("the pin is not sha256/ + base64 of 32 bytes")]
    Pin,
}

/// One parsed delivery hint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeliveryHint {
    /// How to connect.
    pub transport: Transport,
    /// Where.
    pub host: Host,
    /// The UDP (QUIC) or TCP (TLS) port.
    pub port: u16,
    /// The SHA-256 of the endpoint's DER SubjectPublicKeyInfo; `None` means
    /// the endpoint presents a CA-issued certificate for `host`.
    pub pin: Option<[u8; 32]>,
}

impl DeliveryHint {
    /// `host:port` as the client's `--server` takes it.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The pin as `serve` prints it (`sha256/…`), if any.
    pub fn pin_text(&self) -> Option<String> {
        self.pin
            .map(|pin| format!("{PIN_PREFIX}{}", STANDARD.encode(pin)))
    }
}

impl fmt::Display for DeliveryHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.transport.scheme(), self.address())?;
        match self.pin_text() {
            Some(pin) => write!(f, "#{pin}"),
            None => Ok(()),
        }
    }
}

impl FromStr for DeliveryHint {
    type Err = HintError;

    /// Parses one hint; only the canonical spelling is accepted (the
    /// result's `Display` gives back the input byte for byte).
    fn from_str(s: &str) -> Result<DeliveryHint, HintError> {
        let chars = s.chars().count();
        if chars > MAX_HINT_CHARS {
            return Err(HintError::TooLong(chars));
        }
        let (transport, rest) = [Transport::Quic, Transport::Tls]
            .into_iter()
            .find_map(|t| {
                s.strip_prefix(t.scheme())
                    .and_then(|r| r.strip_prefix("://"))
                    .map(|r| (t, r))
            })
            .ok_or(HintError::Transport)?;
        let (authority, pin) = match rest.split_once('#') {
            Some((authority, pin)) => (authority, Some(parse_pin(pin)?)),
            None => (rest, None),
        };
        let (host, port) = authority.rsplit_once(':').ok_or(HintError::Port)?;
        let hint = DeliveryHint {
            transport,
            host: parse_host(host)?,
            port: parse_port(port)?,
            pin,
        };
        if hint.to_string() != s {
            return Err(HintError::Host);
        }
        Ok(hint)
    }
}

fn parse_pin(pin: &str) -> Result<[u8; 32], HintError> {
    let b64 = pin.strip_prefix(PIN_PREFIX).ok_or(HintError::Pin)?;
    let bytes = STANDARD.decode(b64).map_err(|_| HintError::Pin)?;
    let pin: [u8; 32] = bytes.try_into().map_err(|_| HintError::Pin)?;
    if STANDARD.encode(pin) != b64 {
        return Err(HintError::Pin);
    }
    Ok(pin)
}

fn parse_port(port: &str) -> Result<u16, HintError> {
    if port.is_empty() || port.starts_with('0') || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HintError::Port);
    }
    port.parse::<u16>().map_err(|_| HintError::Port)
}

fn parse_host(host: &str) -> Result<Host, HintError> {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6.parse().map(Host::V6).map_err(|_| HintError::Host);
    }
    if let Ok(v4) = host.parse::<Ipv4Addr>() {
        return Ok(Host::V4(v4));
    }
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    let all_numeric = host.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    if host.len() <= 253 && !all_numeric && host.split('.').all(label_ok) {
        Ok(Host::Name(host.to_owned()))
    } else {
        Err(HintError::Host)
    }
}

/// The hints of a card a depositor can use, in the card's order (its
/// preference order): hints this grammar does not parse are skipped, never
/// an error — another implementation's card may carry a transport this one
/// does not speak, and its signature still binds them.
pub fn usable(hints: &[String]) -> Vec<DeliveryHint> {
    hints.iter().filter_map(|h| h.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PIN: &str = "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";

    #[test]
    fn canonical_hints_round_trip() {
        for s in [
            "rltp+quic://carrier.example:4433",
            &format!("rltp+quic://127.0.0.1:4433#{PIN}"),
            &format!("rltp+tls://[2001:db8::1]:443#{PIN}"),
            "rltp+tls://localhost:1",
        ] {
            let hint: DeliveryHint = s.parse().unwrap();
            assert_eq!(hint.to_string(), s);
        }
        let hint: DeliveryHint = format!("rltp+quic://127.0.0.1:4433#{PIN}").parse().unwrap();
        assert_eq!(hint.address(), "127.0.0.1:4433");
        assert_eq!(hint.pin_text().as_deref(), Some(PIN));
    }

    #[test]
    fn every_other_spelling_is_refused() {
        let cases = [
            ("https://carrier.example:443", HintError::Transport),
            ("rltp+quic://carrier.example", HintError::Port),
            ("rltp+quic://carrier.example:0", HintError::Port),
            ("rltp+quic://carrier.example:04433", HintError::Port),
            ("rltp+quic://carrier.example:65536", HintError::Port),
            ("rltp+quic://Carrier.example:4433", HintError::Host),
            ("rltp+quic://carrier.example.:4433", HintError::Host),
            ("rltp+quic://user@carrier.example:4433", HintError::Host),
            ("rltp+quic://did:key:z6Mk:4433", HintError::Host),
            ("rltp+quic://[2001:DB8::1]:4433", HintError::Host),
            ("rltp+quic://[2001:db8:0::1]:4433", HintError::Host),
            ("rltp+quic://010.0.0.1:4433", HintError::Host),
            ("rltp+quic://carrier.example:4433/path", HintError::Port),
            (
                "rltp+quic://carrier.example:4433#sha256/AAAA",
                HintError::Pin,
            ),
            ("rltp+quic://carrier.example:4433#sha1/AAAA", HintError::Pin),
        ];
        for (s, expected) in cases {
            assert_eq!(s.parse::<DeliveryHint>(), Err(expected), "{s}");
        }
        let long = format!("rltp+quic://{}.example:1", "a".repeat(600));
        assert_eq!(long.parse::<DeliveryHint>(), Err(HintError::TooLong(622)));
    }

    #[test]
    fn unparsable_hints_of_a_card_are_skipped_in_order() {
        let hints = vec![
            "rltp+ws://carrier.example:443".to_owned(),
            "rltp+tls://b.example:443".to_owned(),
            "rltp+quic://a.example:4433".to_owned(),
        ];
        let usable: Vec<String> = usable(&hints).iter().map(ToString::to_string).collect();
        assert_eq!(
            usable,
            ["rltp+tls://b.example:443", "rltp+quic://a.example:4433"]
        );
    }
}
