//! RFC 6455's opening handshake (section 4.2), server side: whether a request may switch,
//! and the `101` that switches it.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use sha1::{Digest, Sha1};

use crate::http::{Upgrade, Version};

/// Appended to the client's key before hashing (RFC 6455, 1.3).
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Why a request to the WebSocket endpoint is not switched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It does not ask to upgrade to WebSocket at all (a plain GET): 426, naming it.
    NotAnUpgrade,
    /// A version other than 13: 426 with `Sec-WebSocket-Version: 13`.
    Version,
    /// It asks, but badly (no `Connection: Upgrade`, a key that is not 16 bytes in base64,
    /// HTTP/1.0): 400.
    Malformed,
}

/// `Sec-WebSocket-Accept`'s value: base64 of SHA-1 of the key and the GUID, 28 characters.
pub type Accept = [u8; 28];

/// Checks a GET's headers, and that it is HTTP/1.1's; the value of `Sec-WebSocket-Accept`
/// if it may switch.
pub fn check(upgrade: &Upgrade<&[u8]>, version: Version) -> Result<Accept, Refusal> {
    if !upgrade.websocket && upgrade.key.is_none() {
        return Err(Refusal::NotAnUpgrade);
    }
    if upgrade.version != Some(b"13") {
        return Err(Refusal::Version);
    }
    let Some(key) = upgrade.key.filter(|key| is_key(key)) else {
        return Err(Refusal::Malformed);
    };
    if !upgrade.websocket || !upgrade.connection_upgrade || version != Version::Http11 {
        return Err(Refusal::Malformed);
    }
    Ok(accept(key))
}

/// A nonce of 16 bytes in base64 (RFC 6455, 4.1).
fn is_key(key: &[u8]) -> bool {
    let mut nonce = [0; 18];
    key.len() == 24 && STANDARD.decode_slice(key, &mut nonce) == Ok(16)
}

fn accept(key: &[u8]) -> Accept {
    let digest = Sha1::new().chain_update(key).chain_update(GUID).finalize();
    let mut accept = [0; 28];
    // 20 bytes are 28 characters of base64: the buffer is exactly large enough.
    let written = STANDARD.encode_slice(digest, &mut accept);
    debug_assert_eq!(written, Ok(28));
    accept
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"dGhlIHNhbXBsZSBub25jZQ==";

    fn asking() -> Upgrade<&'static [u8]> {
        Upgrade {
            connection_upgrade: true,
            websocket: true,
            key: Some(KEY),
            version: Some(b"13"),
        }
    }

    #[test]
    fn the_rfc_example_is_accepted_with_its_accept_value() {
        let accept = check(&asking(), Version::Http11).unwrap();
        assert_eq!(&accept, b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn refusals() {
        let plain = Upgrade::default();
        assert_eq!(check(&plain, Version::Http11), Err(Refusal::NotAnUpgrade));
        for version in [None, Some(&b"8"[..]), Some(b"")] {
            let headers = Upgrade {
                version,
                ..asking()
            };
            assert_eq!(check(&headers, Version::Http11), Err(Refusal::Version));
        }
        // 15 bytes, 17 bytes, not base64, repeated (read as empty), none.
        for key in [
            Some(&b"AAAAAAAAAAAAAAAAAAAA"[..]),
            Some(b"AAAAAAAAAAAAAAAAAAAAAAA="),
            Some(b"AAAAAAAAAAAAAAAAAAAAAA=="[..23].as_ref()),
            Some(b"!AAAAAAAAAAAAAAAAAAAAA=="),
            Some(b""),
            None,
        ] {
            let headers = Upgrade { key, ..asking() };
            assert_eq!(
                check(&headers, Version::Http11),
                Err(Refusal::Malformed),
                "{key:?}"
            );
        }
        let without_connection = Upgrade {
            connection_upgrade: false,
            ..asking()
        };
        assert_eq!(
            check(&without_connection, Version::Http11),
            Err(Refusal::Malformed)
        );
        assert_eq!(check(&asking(), Version::Http10), Err(Refusal::Malformed));
        assert_eq!(check(&asking(), Version::Http2), Err(Refusal::Malformed));
    }
}
