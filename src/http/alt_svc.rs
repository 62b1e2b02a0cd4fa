//! The `Alt-Svc` field (RFC 7838) that the first answer of a connection over TLS carries
//! when HTTP/3 is served: a browser reaches a server over TCP first, and learns from it that
//! the same origin answers over QUIC on a UDP port (and remembers it for `ma` seconds).

/// How long a client may remember the alternative: a day, as nginx's and Caddy's examples.
const MAX_AGE: &[u8] = b"\"; ma=86400";

/// HTTP/3 on UDP port `port` of the same host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AltSvc {
    port: u16,
}

impl AltSvc {
    pub fn h3(port: u16) -> Self {
        AltSvc { port }
    }

    /// The field's value: `h3=":PORT"; ma=86400`.
    pub fn value(self) -> AltSvcValue {
        let mut value = AltSvcValue {
            bytes: [0; 24],
            len: 0,
        };
        for part in [
            &b"h3=\":"[..],
            itoa::Buffer::new().format(self.port).as_bytes(),
            MAX_AGE,
        ] {
            value.bytes[value.len..value.len + part.len()].copy_from_slice(part);
            value.len += part.len();
        }
        value
    }
}

/// [`AltSvc::value`], on the stack: at most 21 bytes.
pub struct AltSvcValue {
    bytes: [u8; 24],
    len: usize,
}

impl AltSvcValue {
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_port_and_a_day() {
        assert_eq!(
            AltSvc::h3(8443).value().as_bytes(),
            b"h3=\":8443\"; ma=86400"
        );
        assert_eq!(AltSvc::h3(65535).value().as_bytes().len(), 21);
    }
}
