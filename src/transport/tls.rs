//! One TLS 1.3 session over rustls, sans I/O: ciphertext in from the backend, plaintext out
//! to the protocol above, the protocol's plaintext in, ciphertext out for the backend.
//!
//! The session starts with rustls's `Acceptor`, which reads the ClientHello before any
//! configuration is chosen, so that ALPN can name only what the client offered: the
//! configuration that speaks `http/1.1` when the client offers it, the one with no ALPN
//! otherwise (a plain `ServerConnection` with ALPN configured would refuse a client that
//! offers only `h2`). A listener that offers `h2` answers `h2` to a client that offers it,
//! and chooses as the others do for one that does not.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Instant;

use rustls::server::{Accepted, AcceptedAlert, Acceptor};
use rustls::{ServerConfig, ServerConnection};

use crate::http::{lent, BufferPool};

/// The ALPN name of HTTP/1.1.
pub const HTTP1: &[u8] = b"http/1.1";
/// The ALPN name of HTTP/2 over TLS.
pub const H2: &[u8] = b"h2";
/// The ALPN name of HTTP/3, over QUIC.
pub const H3: &[u8] = b"h3";

/// What rustls keeps of a session beyond our own ciphertext buffer, counted in the worker's
/// budget: its state, keys and buffers at rest, 7.6 KiB a connection as measured (RSS of
/// 800 idle connections after one request each). A record still arriving can add up to
/// 16 KiB for a moment; that is left out.
const SESSION_HOLDS: usize = 8 * 1024;

/// The configurations a TLS listener's sessions choose from by the client's ALPN offer.
pub struct TlsConfig {
    /// Answers ALPN with `h2`.
    h2: Arc<ServerConfig>,
    /// Answers ALPN with `http/1.1`.
    http1: Arc<ServerConfig>,
    /// Answers no ALPN (the client offered none, or none we speak).
    plain: Arc<ServerConfig>,
    /// QUIC's, which answers `h3` (and refuses a client that does not offer it, as
    /// RFC 9001 asks), with its transport limits.
    quic: Arc<quinn_proto::ServerConfig>,
}

impl TlsConfig {
    /// `config` without ALPN; its twins answer `http/1.1`, or `h2`, to a client that
    /// offers it.
    pub fn new(config: ServerConfig) -> Self {
        let answering = |name: &[u8]| {
            let mut config = config.clone();
            config.alpn_protocols = vec![name.to_vec()];
            Arc::new(config)
        };
        TlsConfig {
            h2: answering(H2),
            http1: answering(HTTP1),
            quic: crate::quic::server_config(&answering(H3)),
            plain: Arc::new(config),
        }
    }

    /// The configuration of QUIC's handshakes (HTTP/3).
    pub fn quic(&self) -> Arc<quinn_proto::ServerConfig> {
        self.quic.clone()
    }

    /// The configuration for a client's hello: `h2` if the listener offers it (`offer_h2`)
    /// and the client does, else `http/1.1` if the client offers it, else no ALPN.
    fn for_hello(&self, accepted: &Accepted, offer_h2: bool) -> Arc<ServerConfig> {
        let hello = accepted.client_hello();
        let offers = |name: &[u8]| {
            hello
                .alpn()
                .is_some_and(|mut names| names.any(|n| n == name))
        };
        if offer_h2 && offers(H2) {
            self.h2.clone()
        } else if offers(HTTP1) {
            self.http1.clone()
        } else {
            self.plain.clone()
        }
    }
}

/// Where a session is in its life, holding what rustls keeps for it there.
///
/// ```text
///  Hello ──ClientHello accepted──▶ Open ──close()──────────────▶ Closing
///    │  │                           │                               │
///    │  │                           │ the peer's close_notify       │ the peer's close_notify
///    │  │                           ▼                               ▼
///    │  │                       PeerClosed ──close()────────────▶ Closed
///    │  └─refused──▶ Failed(Refused(alert)) ──flush──▶ Failed(Alerted)
///    └─too much input──▶ Failed(Hello)
///
///  Open, Closing ──garbage, a bad record, too much input──▶ Failed(Session(session))
/// ```
///
/// Hello, Open and Closing read the peer's ciphertext; Closing, Closed and Failed have
/// nothing more to queue once their output is sent.
enum State {
    /// Waiting for the whole ClientHello; the listener offers `h2` by ALPN if `offer_h2`.
    Hello { acceptor: Acceptor, offer_h2: bool },
    /// The handshake, then records both ways.
    Open(ServerConnection),
    /// Our close_notify is queued; the peer's records are still read.
    Closing(ServerConnection),
    /// The peer sent close_notify: nothing more is read. Ours is not queued yet.
    PeerClosed(ServerConnection),
    /// close_notify both ways: nothing more is read, ours is queued.
    Closed(ServerConnection),
    /// Nothing more is read, plaintext is dropped, and what is left to send is the alert.
    Failed(Failure),
}

/// How a session failed, and what it holds of the alert to send.
// The session lives in a box of its own whatever its state: the variants' sizes cost nothing.
#[allow(clippy::large_enum_variant)]
enum Failure {
    /// The ClientHello was more than rustls would hold: no alert.
    Hello,
    /// rustls failed the session, and queued its alert in it.
    Session(ServerConnection),
    /// The ClientHello was refused, with this alert to send.
    Refused(AcceptedAlert),
    /// Refused, and the alert is in the output.
    Alerted,
}

/// One connection's TLS state. Boxed in its slot: a plain connection does not pay for it.
pub struct TlsSession {
    config: Arc<TlsConfig>,
    state: State,
    /// Ciphertext to send, lent from the worker's buffers while it has bytes.
    out: Vec<u8>,
    /// How much of `out` has been sent.
    sent: usize,
    /// The handshake must be over by then.
    handshake_by: Instant,
}

impl TlsSession {
    /// A session of a listener whose ALPN offers `h2` (then `http/1.1`) if `offer_h2`,
    /// else `http/1.1` only.
    pub fn new(config: Arc<TlsConfig>, offer_h2: bool, handshake_by: Instant) -> Box<Self> {
        Box::new(TlsSession {
            config,
            state: State::Hello {
                acceptor: Acceptor::default(),
                offer_h2,
            },
            out: Vec::new(),
            sent: 0,
            handshake_by,
        })
    }

    /// Takes `ciphertext` from the peer and appends what it decrypts to `plaintext`.
    /// Returns false once the peer will send no more: it sent close_notify, or the session
    /// failed (garbage, a refused ClientHello: the alert is then queued to be sent).
    pub fn receive(&mut self, mut ciphertext: &[u8], plaintext: &mut Vec<u8>) -> bool {
        while !ciphertext.is_empty() {
            let read = match &mut self.state {
                State::Hello { acceptor, .. } => acceptor.read_tls(&mut ciphertext),
                State::Open(session) | State::Closing(session) => session.read_tls(&mut ciphertext),
                State::PeerClosed(_) | State::Closed(_) | State::Failed(_) => break,
            };
            match read {
                Ok(_) => self.progress(plaintext),
                // rustls holds too much unprocessed input: a peer that cannot be served.
                Err(_) => self.fail(),
            }
        }
        matches!(
            self.state,
            State::Hello { .. } | State::Open(_) | State::Closing(_)
        )
    }

    /// Processes what rustls has read: the ClientHello, handshake messages, records.
    fn progress(&mut self, plaintext: &mut Vec<u8>) {
        if let State::Hello { acceptor, offer_h2 } = &mut self.state {
            let opened = match acceptor.accept() {
                Ok(None) => return,
                Ok(Some(accepted)) => {
                    let config = self.config.for_hello(&accepted, *offer_h2);
                    accepted.into_connection(config)
                }
                Err(refused) => Err(refused),
            };
            self.state = match opened {
                Ok(session) => State::Open(session),
                Err((_, alert)) => State::Failed(Failure::Refused(alert)),
            };
        }
        let (State::Open(session) | State::Closing(session)) = &mut self.state else {
            return;
        };
        // On an error rustls queues the alert to send; it is written out with the rest.
        match session.process_new_packets() {
            Ok(state) => {
                let mut reader = session.reader();
                while let Ok(chunk) = reader.fill_buf() {
                    if chunk.is_empty() {
                        break;
                    }
                    plaintext.extend_from_slice(chunk);
                    let len = chunk.len();
                    reader.consume(len);
                }
                if state.peer_has_closed() {
                    self.shift(|state| match state {
                        State::Open(session) => State::PeerClosed(session),
                        State::Closing(session) => State::Closed(session),
                        other => other,
                    });
                }
            }
            Err(_) => self.fail(),
        }
    }

    /// Nothing more is read, plaintext is dropped, and what rustls holds of the alert is
    /// what is left to send.
    fn fail(&mut self) {
        self.shift(|state| {
            State::Failed(match state {
                State::Hello { .. } => Failure::Hello,
                State::Open(session)
                | State::Closing(session)
                | State::PeerClosed(session)
                | State::Closed(session) => Failure::Session(session),
                State::Failed(failure) => failure,
            })
        });
    }

    /// Moves to the state `next` makes of the current one.
    fn shift(&mut self, next: impl FnOnce(State) -> State) {
        let state = std::mem::replace(&mut self.state, State::Failed(Failure::Alerted));
        self.state = next(state);
    }

    /// rustls's session, once the ClientHello is accepted, failed or not.
    fn session(&self) -> Option<&ServerConnection> {
        match &self.state {
            State::Open(session)
            | State::Closing(session)
            | State::PeerClosed(session)
            | State::Closed(session)
            | State::Failed(Failure::Session(session)) => Some(session),
            State::Hello { .. } | State::Failed(_) => None,
        }
    }

    /// Encrypts what it can of `plaintext` into the output and returns how many bytes it
    /// took: nothing while the handshake runs, nor while earlier ciphertext is unsent, so
    /// that the backlog of a client that does not read stays in the protocol's output,
    /// where its high-water mark and send timeout see it. After a failure plaintext is
    /// dropped (taken whole). Also queues what the handshake has to send.
    pub fn seal(&mut self, plaintext: &[u8], buffers: &mut BufferPool) -> usize {
        let taken = match &mut self.state {
            State::Failed(_) => plaintext.len(),
            State::Open(session)
            | State::Closing(session)
            | State::PeerClosed(session)
            | State::Closed(session)
                if !session.is_handshaking() && self.sent == self.out.len() =>
            {
                session.writer().write(plaintext).unwrap_or(0)
            }
            _ => 0,
        };
        self.flush(buffers);
        taken
    }

    /// Queues close_notify once: the protocol above is done and all of its output sealed.
    pub fn close(&mut self, buffers: &mut BufferPool) {
        if let State::Open(session) | State::PeerClosed(session) = &mut self.state {
            session.send_close_notify();
            self.shift(|state| match state {
                State::Open(session) => State::Closing(session),
                State::PeerClosed(session) => State::Closed(session),
                other => other,
            });
        }
        self.flush(buffers);
    }

    /// Moves what rustls has to send into the output (called only while the backend is not
    /// sending from it).
    fn flush(&mut self, buffers: &mut BufferPool) {
        match &mut self.state {
            State::Open(session)
            | State::Closing(session)
            | State::PeerClosed(session)
            | State::Closed(session)
            | State::Failed(Failure::Session(session))
                if session.wants_write() =>
            {
                let out = lent(&mut self.out, buffers);
                while session.wants_write() && session.write_tls(out).is_ok() {}
            }
            State::Failed(failure @ Failure::Refused(_)) => {
                if let Failure::Refused(mut alert) = std::mem::replace(failure, Failure::Alerted) {
                    let _ = alert.write_all(lent(&mut self.out, buffers));
                }
            }
            _ => {}
        }
    }

    /// The ciphertext to send.
    pub fn unsent(&self) -> &[u8] {
        &self.out[self.sent..]
    }

    /// `n` bytes of [`TlsSession::unsent`] went out; the output buffer goes back once it
    /// is all sent.
    pub fn sent(&mut self, n: usize, buffers: &mut BufferPool) {
        self.sent += n;
        if self.sent >= self.out.len() {
            self.sent = 0;
            buffers.give_back(std::mem::take(&mut self.out));
        }
    }

    /// Whether nothing is left to send once the protocol above is done: close_notify (or
    /// the alert of a failure) is queued and all of it is sent.
    pub fn is_closed(&self) -> bool {
        let queued = matches!(
            self.state,
            State::Closing(_) | State::Closed(_) | State::Failed(_)
        );
        queued && self.unsent().is_empty()
    }

    /// Whether the handshake is over and chose `h2`: the protocol above is HTTP/2.
    pub fn chose_h2(&self) -> bool {
        self.session()
            .is_some_and(|session| !session.is_handshaking() && session.alpn_protocol() == Some(H2))
    }

    /// Whether the handshake is unfinished past its deadline (a ClientHello too long to
    /// hold counts as unfinished).
    pub fn handshake_expired(&self, now: Instant) -> bool {
        let handshaking = match (&self.state, self.session()) {
            (_, Some(session)) => session.is_handshaking(),
            (State::Hello { .. } | State::Failed(Failure::Hello), None) => true,
            (_, None) => false,
        };
        handshaking && now > self.handshake_by
    }

    /// Buffer memory the session holds: its output and what rustls keeps.
    pub fn held(&self) -> usize {
        self.out.capacity() + SESSION_HOLDS
    }

    /// Gives its output buffer back: the connection is closed, and the kernel no longer
    /// sends from it.
    pub fn give_back(&mut self, buffers: &mut BufferPool) {
        buffers.give_back(std::mem::take(&mut self.out));
        self.sent = 0;
    }
}
