//! The servers: per-thread workers that move bytes between sockets and the app.
//!
//! `core` is what every worker does whatever moves its bytes; `epoll` and `uring` are the
//! two ways of moving them. Each worker owns its listeners (`SO_REUSEPORT`: the HTTP port,
//! the h2c port and, with a certificate, the TLS one), its HTTP connections and its PostgreSQL
//! connections: nothing is shared between threads but the TLS configuration, read only.

mod core;
mod epoll;
mod signals;
mod supervisor;
mod udp;
mod uring;

pub use self::core::Limits;
pub use signals::block as block_signals;
pub use uring::UringOptions;

use self::core::Core;
use self::signals::Wakers;
use self::supervisor::supervise;
use crate::pg::Pool;
use crate::quic::Spread;
use crate::redis::Redis;
use crate::service::Service;
use crate::sys;
use crate::transport::{Listening, TlsConfig};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// A listening socket, and what its connections speak.
pub struct Listener {
    pub socket: OwnedFd,
    pub kind: Listening,
}

/// What `ports` are, for the start-up line: `8080 (http), 8443/udp (h3)`.
pub fn describe(ports: &[(u16, Listening)]) -> String {
    let name = |kind| match kind {
        Listening::Http => "http",
        Listening::H2c => "h2c",
        Listening::Tls => "http/1.1 over TLS",
        Listening::H2Tls => "h2 and http/1.1 over TLS",
        Listening::Quic => "h3",
    };
    let port = |&(port, kind): &(u16, Listening)| match kind {
        Listening::Quic => format!("{port}/udp ({})", name(kind)),
        _ => format!("{port} ({})", name(kind)),
    };
    ports.iter().map(port).collect::<Vec<_>>().join(", ")
}

/// Binds, for each thread, one `SO_REUSEPORT` listener on each of `ports` (with what its
/// connections speak), up front, so that a taken port is reported (named) before any
/// thread starts; raises the open-files limit.
pub fn listeners(ports: &[(u16, Listening)], threads: usize) -> io::Result<Vec<Vec<Listener>>> {
    let on_port =
        |port: u16| move |err: io::Error| io::Error::new(err.kind(), format!("port {port}: {err}"));
    if ports.is_empty() {
        let why =
            "no port: every port is 0, or only TLS ports are given and there is no certificate";
        return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    }
    for (i, &(port, kind)) in ports.iter().enumerate() {
        let tcp = |kind: Listening| kind != Listening::Quic;
        if ports[..i]
            .iter()
            .any(|&(other, k)| other == port && tcp(k) == tcp(kind))
        {
            let why = "named for two listeners (each needs a port of its own)";
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("port {port}: {why}"),
            ));
        }
        match kind {
            Listening::Quic => sys::ensure_udp_port_free(port),
            _ => sys::ensure_port_free(port),
        }
        .map_err(on_port(port))?;
    }
    if let Err(err) = sys::raise_open_files_limit() {
        crate::log!("could not raise the open-files limit: {err}");
    }
    let listeners: Vec<Vec<Listener>> = (0..threads)
        .map(|_| {
            ports
                .iter()
                .map(|&(port, kind)| {
                    let socket = match kind {
                        Listening::Quic => sys::udp_socket(port),
                        _ => sys::reuseport_listener(port),
                    };
                    let socket = socket.map_err(on_port(port))?;
                    Ok(Listener { socket, kind })
                })
                .collect::<io::Result<_>>()
        })
        .collect::<io::Result<_>>()?;
    // The group's sockets are in the order bound: worker i's is the i-th.
    let first_quic = listeners.first().and_then(|first| {
        first
            .iter()
            .find(|listener| listener.kind == Listening::Quic)
    });
    if let Some(quic) = first_quic {
        sys::route_by_connection_id(&quic.socket, threads)?;
    }
    Ok(listeners)
}

/// Each thread's listeners with the eventfd that tells its worker to drain, and the thread
/// that takes the signals started ([`block_signals`] must have been called first).
fn with_wakers(
    listeners: Vec<Vec<Listener>>,
    limits: &Limits,
) -> io::Result<Vec<(u8, Vec<Listener>, OwnedFd)>> {
    let wakers = Wakers::new(listeners.len())?;
    // A worker's index is the first byte of its QUIC connection IDs (`quic/cid.rs`).
    let inputs = (0..=u8::MAX)
        .zip(listeners)
        .zip(wakers.take()?)
        .map(|((index, listeners), wake)| (index, listeners, wake))
        .collect();
    wakers.listen(limits.drain_timeout);
    Ok(inputs)
}

/// Runs one epoll worker per thread's listeners, each with the service, database and Redis
/// connections `new_worker` makes on its thread, `limits` and the TLS listener's `tls`,
/// until one stops: returns its cause; or until a signal asked them to drain and they all
/// have.
pub fn run_epoll<S, F>(
    listeners: Vec<Vec<Listener>>,
    new_worker: F,
    limits: Limits,
    tls: Option<Arc<TlsConfig>>,
) -> io::Result<()>
where
    S: Service,
    F: Fn() -> (S, Pool, Option<Redis>) + Send + Sync + 'static,
{
    let inputs = with_wakers(listeners, &limits)?;
    let spread = Spread::new(inputs.len());
    supervise("gnosis", inputs, move |(index, listeners, wake), _| {
        let (service, pool, redis) = new_worker();
        let core = Core::new(service, pool, limits.clone()).with_redis(redis);
        let core = core.with_tls(tls.clone());
        let core = core.with_quic(index, &listeners, spread.clone());
        epoll::Worker::new(listeners, wake, core)?.run()
    })
}

/// Runs one io_uring worker per thread's listeners, each with its own ring, the service,
/// database and Redis connections `new_worker` makes on its thread, `limits` and the TLS
/// listener's `tls`, until one stops: returns its cause, at once, naming it, when io_uring
/// cannot be used; or until a signal asked them to drain and they all have.
pub fn run_uring<S, F>(
    listeners: Vec<Vec<Listener>>,
    new_worker: F,
    limits: Limits,
    tls: Option<Arc<TlsConfig>>,
    options: UringOptions,
) -> io::Result<()>
where
    S: Service,
    F: Fn() -> (S, Pool, Option<Redis>) + Send + Sync + 'static,
{
    let inputs = with_wakers(listeners, &limits)?;
    let spread = Spread::new(inputs.len());
    supervise(
        "gnosis-uring",
        inputs,
        move |(index, listeners, wake), started| {
            // The ring is made on the thread that uses it (SINGLE_ISSUER).
            let (service, pool, redis) = new_worker();
            let core = Core::new(service, pool, limits.clone()).with_redis(redis);
            let core = core.with_tls(tls.clone());
            let core = core.with_quic(index, &listeners, spread.clone());
            let worker = uring::Worker::new(listeners, wake, core, options)?;
            started.ready(format!("rings ready ({})", worker.setup().describe()));
            worker.run()
        },
    )
}
