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
            plain: Arc::new(config),
        }
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

enum Stage {
    /// Waiting for the whole ClientHello.
    Hello(Acceptor),
    Open(ServerConnection),
    /// The ClientHello was refused, with this alert to send.
    Refused(AcceptedAlert),
    /// Refused, and the alert is in the output.
    Over,
}

/// One connection's TLS state. Boxed in its slot: a plain connection does not pay for it.
pub struct TlsSession {
    config: Arc<TlsConfig>,
    /// The listener offers `h2` by ALPN.
    offer_h2: bool,
    stage: Stage,
    /// Ciphertext to send, lent from the worker's buffers while it has bytes.
    out: Vec<u8>,
    /// How much of `out` has been sent.
    sent: usize,
    /// The handshake must be over by then.
    handshake_by: Instant,
    /// The peer sent close_notify, or the session failed: nothing more will be read.
    input_closed: bool,
    /// The session failed: what is left to send is the alert; plaintext is dropped.
    failed: bool,
    close_notify_queued: bool,
}

impl TlsSession {
    /// A session of a listener whose ALPN offers `h2` (then `http/1.1`) if `offer_h2`,
    /// else `http/1.1` only.
    pub fn new(config: Arc<TlsConfig>, offer_h2: bool, handshake_by: Instant) -> Box<Self> {
        Box::new(TlsSession {
            config,
            offer_h2,
            stage: Stage::Hello(Acceptor::default()),
            out: Vec::new(),
            sent: 0,
            handshake_by,
            input_closed: false,
            failed: false,
            close_notify_queued: false,
        })
    }

    /// Takes `ciphertext` from the peer and appends what it decrypts to `plaintext`.
    /// Returns false once the peer will send no more: it sent close_notify, or the session
    /// failed (garbage, a refused ClientHello: the alert is then queued to be sent).
    pub fn receive(&mut self, mut ciphertext: &[u8], plaintext: &mut Vec<u8>) -> bool {
        while !ciphertext.is_empty() && !self.input_closed {
            let read = match &mut self.stage {
                Stage::Hello(acceptor) => acceptor.read_tls(&mut ciphertext),
                Stage::Open(session) => session.read_tls(&mut ciphertext),
                Stage::Refused(_) | Stage::Over => break,
            };
            match read {
                Ok(_) => self.progress(plaintext),
                // rustls holds too much unprocessed input: a peer that cannot be served.
                Err(_) => self.fail(),
            }
        }
        !self.input_closed
    }

    /// Processes what rustls has read: the ClientHello, handshake messages, records.
    fn progress(&mut self, plaintext: &mut Vec<u8>) {
        if let Stage::Hello(acceptor) = &mut self.stage {
            let opened = match acceptor.accept() {
                Ok(None) => return,
                Ok(Some(accepted)) => {
                    let config = self.config.for_hello(&accepted, self.offer_h2);
                    accepted.into_connection(config)
                }
                Err(refused) => Err(refused),
            };
            match opened {
                Ok(session) => self.stage = Stage::Open(session),
                Err((_, alert)) => {
                    self.stage = Stage::Refused(alert);
                    return self.fail();
                }
            }
        }
        let Stage::Open(session) = &mut self.stage else {
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
                    self.input_closed = true;
                }
            }
            Err(_) => self.fail(),
        }
    }

    fn fail(&mut self) {
        self.input_closed = true;
        self.failed = true;
    }

    /// Encrypts what it can of `plaintext` into the output and returns how many bytes it
    /// took: nothing while the handshake runs, nor while earlier ciphertext is unsent, so
    /// that the backlog of a client that does not read stays in the protocol's output,
    /// where its high-water mark and send timeout see it. After a failure plaintext is
    /// dropped (taken whole). Also queues what the handshake has to send.
    pub fn seal(&mut self, plaintext: &[u8], buffers: &mut BufferPool) -> usize {
        let taken = match &mut self.stage {
            _ if self.failed => plaintext.len(),
            Stage::Open(session) if !session.is_handshaking() && self.sent == self.out.len() => {
                session.writer().write(plaintext).unwrap_or(0)
            }
            _ => 0,
        };
        self.flush(buffers);
        taken
    }

    /// Queues close_notify once: the protocol above is done and all of its output sealed.
    pub fn close(&mut self, buffers: &mut BufferPool) {
        if let Stage::Open(session) = &mut self.stage {
            if !self.close_notify_queued && !self.failed {
                session.send_close_notify();
                self.close_notify_queued = true;
            }
        }
        self.flush(buffers);
    }

    /// Moves what rustls has to send into the output (called only while the backend is not
    /// sending from it).
    fn flush(&mut self, buffers: &mut BufferPool) {
        match &mut self.stage {
            Stage::Open(session) if session.wants_write() => {
                let out = lent(&mut self.out, buffers);
                while session.wants_write() && session.write_tls(out).is_ok() {}
            }
            Stage::Refused(_) => {
                if let Stage::Refused(mut alert) = std::mem::replace(&mut self.stage, Stage::Over) {
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
        (self.close_notify_queued || self.failed) && self.unsent().is_empty()
    }

    /// Whether the handshake is over and chose `h2`: the protocol above is HTTP/2.
    pub fn chose_h2(&self) -> bool {
        match &self.stage {
            Stage::Open(session) => {
                !session.is_handshaking() && session.alpn_protocol() == Some(H2)
            }
            _ => false,
        }
    }

    /// Whether the handshake is unfinished past its deadline.
    pub fn handshake_expired(&self, now: Instant) -> bool {
        let handshaking = match &self.stage {
            Stage::Hello(_) => true,
            Stage::Open(session) => session.is_handshaking(),
            Stage::Refused(_) | Stage::Over => false,
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
