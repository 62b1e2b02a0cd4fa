//! QUIC (RFC 9000) for HTTP/3: one endpoint per worker over its UDP socket, sans I/O as
//! every protocol here. `quinn_proto` is the QUIC state machine; `endpoint.rs` drives it
//! (datagrams in, each to its connection; batches out; each connection's deadline in the
//! worker's timers), `cid.rs` makes connection IDs that route every packet to its
//! connection's worker, `spread.rs` shares new connections evenly among the workers,
//! `outbox.rs` holds the batches to send, `peer.rs` one connection.

mod cid;
mod endpoint;
mod outbox;
mod peer;
mod spread;

pub use endpoint::{Bounds, Endpoint, Serve, QUIC_SLOT};
pub use outbox::{Batch, Outbox};
pub use spread::Spread;

use std::sync::Arc;
use std::time::Duration;

use quinn_proto::crypto::rustls::QuicServerConfig;
use quinn_proto::{IdleTimeout, ServerConfig, TransportConfig, VarInt};

/// Request streams a client may have open at once: HttpArena's h3 load opens 64 on each
/// connection (h2load `-m 64`); as HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS.
pub const MAX_REQUEST_STREAMS: u32 = 100;
/// Its unidirectional streams: HTTP/3's control stream and QPACK's two, and room for
/// reserved (grease) stream types a client may open and we ignore.
const MAX_UNI_STREAMS: u32 = 8;

/// The QUIC server configuration over `tls` (TLS 1.3, ALPN `h3`), shared by the workers:
/// its Retry token key is one, so a token minted by one worker is taken by another.
pub fn server_config(tls: &Arc<rustls::ServerConfig>) -> Arc<ServerConfig> {
    let crypto = QuicServerConfig::try_from(tls.clone())
        .expect("a TLS 1.3 configuration with AES-128-GCM, as certs.rs makes, suits QUIC");
    Arc::new(ServerConfig::with_crypto(Arc::new(crypto)))
}

/// What a connection's answers may hold in quinn-proto's buffers, sent or not, until the peer
/// acknowledges them: past it, a file's body is read no further. 1 MiB keeps a 1 Gbit/s
/// path of 8 ms busy; without it quinn-proto's default lets 64 connections of 64 streams of
/// HttpArena's files (static-h3) hold 1.3 GB.
pub(crate) const SEND_WINDOW: u64 = 1024 * 1024;

/// What a client may send ahead of what HTTP/3 has read, on a connection: quinn-proto
/// holds at most that for a connection that stops reading because it holds its share of
/// the worker's budget (`Peer::serve`). Its default has no bound. 1 MiB lets an upload
/// go at 1 MiB per round trip.
const RECEIVE_WINDOW: u32 = 1024 * 1024;

/// `config` (its TLS and its token key) with the transport's limits: a connection silent
/// for `idle` is closed (as `--idle-timeout` closes a TCP one).
pub fn with_idle_timeout(config: &ServerConfig, idle: Duration) -> Arc<ServerConfig> {
    let mut transport = TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(VarInt::from_u32(MAX_REQUEST_STREAMS))
        .max_concurrent_uni_streams(VarInt::from_u32(MAX_UNI_STREAMS))
        .receive_window(VarInt::from_u32(RECEIVE_WINDOW))
        .stream_receive_window(VarInt::from_u32(RECEIVE_WINDOW))
        .send_window(SEND_WINDOW)
        .max_idle_timeout(IdleTimeout::try_from(idle).ok());
    let mut config = config.clone();
    config.transport_config(Arc::new(transport));
    Arc::new(config)
}

#[cfg(test)]
mod tests;
