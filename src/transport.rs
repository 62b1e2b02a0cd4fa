//! What a connection's bytes go through between the socket and its protocol: nothing
//! (plain), or a TLS session. No I/O: the backends hand the core what they received and send
//! what the core says is unsent; only the core sees a transport.
//!
//! The protocol above (HTTP/1.1's `Connection`, HTTP/2 when ALPN chose `h2`, or a
//! WebSocket) reads plaintext and writes plaintext whatever the transport. Kernel TLS
//! would be one more variant: the session's keys handed to the socket after the handshake,
//! the bytes then moving as for a plain connection.

mod certs;
#[cfg(any(test, feature = "test-kit"))]
mod test_client;
#[cfg(any(test, feature = "test-kit"))]
mod test_pair;
mod tls;

pub use certs::{from_env, listener_config, load, CERT_PATH, KEY_PATH};
#[cfg(any(test, feature = "test-kit"))]
pub use test_client::{certificate, client_config};
#[cfg(any(test, feature = "test-kit"))]
pub use test_pair::{test_pair, TestPair};
pub use tls::{TlsConfig, TlsSession, H2, HTTP1};

/// What a listener's connections get: their transport, and how their protocol is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Listening {
    /// Cleartext: HTTP/1.1, or HTTP/2 when the first bytes are its preface.
    Http,
    /// Cleartext HTTP/2 by prior knowledge (h2c) only.
    H2c,
    /// TLS, HTTP/1.1 (ALPN `http/1.1` or none; never `h2`).
    Tls,
    /// TLS, HTTP/2 when the client offers ALPN `h2`, else HTTP/1.1 as on [`Listening::Tls`].
    H2Tls,
    /// QUIC, HTTP/3: a UDP socket, whose datagrams the worker's QUIC endpoint takes.
    Quic,
}

impl Listening {
    /// Whether its connections start with a TLS handshake.
    pub fn is_tls(self) -> bool {
        matches!(self, Listening::Tls | Listening::H2Tls)
    }
}

/// A connection's transport. The TLS session is boxed so that a plain connection's slot
/// stays small.
pub enum Transport {
    Plain,
    Tls(Box<TlsSession>),
}

impl Transport {
    /// Buffer memory it holds beyond its protocol's, for the worker's budget.
    pub fn held(&self) -> usize {
        match self {
            Transport::Plain => 0,
            Transport::Tls(tls) => tls.held(),
        }
    }

    /// Whether it has nothing left to send once its protocol is done (a TLS session:
    /// close_notify, or a failure's alert, sent).
    pub fn is_closed(&self) -> bool {
        match self {
            Transport::Plain => true,
            Transport::Tls(tls) => tls.is_closed(),
        }
    }
}
