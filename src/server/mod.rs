//! The servers: per-thread workers that move bytes between sockets and the app.
//!
//! `core` is what every worker does whatever moves its bytes; `epoll` and `uring` are the
//! two ways of moving them. Each worker owns its listener (`SO_REUSEPORT`), its HTTP
//! connections and its PostgreSQL connections: nothing is shared between threads.

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
use std::io;
use std::os::fd::OwnedFd;

/// Binds one `SO_REUSEPORT` listener per thread up front, so that a taken port is reported
/// before any thread starts, and raises the open-files limit.
pub fn listeners(port: u16, threads: usize) -> io::Result<Vec<OwnedFd>> {
    sys::ensure_port_free(port)?;
    if let Err(err) = sys::raise_open_files_limit() {
        crate::log!("could not raise the open-files limit: {err}");
    }
    (0..threads)
        .map(|_| sys::reuseport_listener(port))
        .collect()
}

/// Runs one epoll worker per listener, each with the service and database connections
/// `new_worker` makes on its thread and `limits`, until one stops: returns its cause.
pub fn run_epoll<S, F>(listeners: Vec<OwnedFd>, new_worker: F, limits: Limits) -> io::Result<()>
where
    S: Service,
    F: Fn() -> (S, Pool) + Send + Sync + 'static,
{
    supervise("gnosis", listeners, move |listener, _| {
        let (service, pool) = new_worker();
        match epoll::Worker::new(listener, Core::new(service, pool, limits)) {
            Ok(worker) => worker.run(),
            Err(err) => err,
        }
    })
}

/// Runs one io_uring worker per listener, each with its own ring, the service and
/// database connections `new_worker` makes on its thread and `limits`, until one stops:
/// returns its cause, at once, naming it, when io_uring cannot be used.
pub fn run_uring<S, F>(
    listeners: Vec<OwnedFd>,
    new_worker: F,
    limits: Limits,
    options: UringOptions,
) -> io::Result<()>
where
    S: Service,
    F: Fn() -> (S, Pool) + Send + Sync + 'static,
{
    supervise("gnosis-uring", listeners, move |listener, started| {
        // The ring is made on the thread that uses it (SINGLE_ISSUER).
        let (service, pool) = new_worker();
        match uring::Worker::new(listener, Core::new(service, pool, limits), options) {
            Ok(worker) => {
                started.ready(format!("rings ready ({})", worker.setup().describe()));
                worker.run()
            }
            Err(err) => err,
        }
    })
}
