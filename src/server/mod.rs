//! The servers: per-thread workers that move bytes between sockets and the app.
//!
//! `core` is what every worker does whatever moves its bytes; `epoll` and `uring` are the
//! two ways of moving them. Each worker owns its listeners (`SO_REUSEPORT`: the HTTP port,
//! the h2c port and, with a certificate, the TLS one), its HTTP connections and its PostgreSQL
//! connections: nothing is shared between threads but the TLS configuration, read only.

mod core;
mod epoll;
mod supervisor;
mod uring;

pub use self::core::Limits;
pub use uring::UringOptions;

use self::core::Core;
use self::supervisor::supervise;
use crate::pg::Pool;
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

/// Binds, for each thread, one `SO_REUSEPORT` listener on each of `ports` (with what its
/// connections speak), up front, so that a taken port is reported (named) before any
/// thread starts; raises the open-files limit.
pub fn listeners(ports: &[(u16, Listening)], threads: usize) -> io::Result<Vec<Vec<Listener>>> {
    let on_port =
        |port: u16| move |err: io::Error| io::Error::new(err.kind(), format!("port {port}: {err}"));
    for &(port, _) in ports {
        sys::ensure_port_free(port).map_err(on_port(port))?;
    }
    if let Err(err) = sys::raise_open_files_limit() {
        crate::log!("could not raise the open-files limit: {err}");
    }
    (0..threads)
        .map(|_| {
            ports
                .iter()
                .map(|&(port, kind)| {
                    let socket = sys::reuseport_listener(port).map_err(on_port(port))?;
                    Ok(Listener { socket, kind })
                })
                .collect()
        })
        .collect()
}

/// Runs one epoll worker per thread's listeners, each with the service and database
/// connections `new_worker` makes on its thread, `limits` and the TLS listener's `tls`,
/// until one stops: returns its cause.
pub fn run_epoll<S, F>(
    listeners: Vec<Vec<Listener>>,
    new_worker: F,
    limits: Limits,
    tls: Option<Arc<TlsConfig>>,
) -> io::Result<()>
where
    S: Service,
    F: Fn() -> (S, Pool) + Send + Sync + 'static,
{
    supervise("gnosis", listeners, move |listeners, _| {
        let (service, pool) = new_worker();
        let core = Core::new(service, pool, limits).with_tls(tls.clone());
        match epoll::Worker::new(listeners, core) {
            Ok(worker) => worker.run(),
            Err(err) => err,
        }
    })
}

/// Runs one io_uring worker per thread's listeners, each with its own ring, the service
/// and database connections `new_worker` makes on its thread, `limits` and the TLS
/// listener's `tls`, until one stops: returns its cause, at once, naming it, when io_uring
/// cannot be used.
pub fn run_uring<S, F>(
    listeners: Vec<Vec<Listener>>,
    new_worker: F,
    limits: Limits,
    tls: Option<Arc<TlsConfig>>,
    options: UringOptions,
) -> io::Result<()>
where
    S: Service,
    F: Fn() -> (S, Pool) + Send + Sync + 'static,
{
    supervise("gnosis-uring", listeners, move |listeners, started| {
        // The ring is made on the thread that uses it (SINGLE_ISSUER).
        let (service, pool) = new_worker();
        let core = Core::new(service, pool, limits).with_tls(tls.clone());
        match uring::Worker::new(listeners, core, options) {
            Ok(worker) => {
                started.ready(format!("rings ready ({})", worker.setup().describe()));
                worker.run()
            }
            Err(err) => err,
        }
    })
}
