//! The servers: per-thread workers that move bytes between sockets and the app.
//!
//! `core` is what every worker does whatever moves its bytes; `epoll` and `uring` are the
//! two ways of moving them. Each worker owns its listener (`SO_REUSEPORT`), its HTTP
//! connections and its PostgreSQL connections: nothing is shared between threads.

mod core;
mod epoll;
mod timers;
mod uring;

pub use timers::Timers;
pub use uring::UringOptions;

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use crate::pg::Pool;
use crate::service::Service;
use crate::sys;

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
/// `new_worker` makes on its thread, until one fails.
pub fn run_epoll<S, F>(listeners: Vec<OwnedFd>, new_worker: F) -> io::Result<()>
where
    S: Service,
    F: Fn() -> (S, Pool) + Send + Sync + 'static,
{
    let new_worker = Arc::new(new_worker);
    let workers: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, listener)| {
            let new_worker = new_worker.clone();
            std::thread::Builder::new()
                .name(format!("gnosis-{i}"))
                .spawn(move || {
                    let (service, pool) = new_worker();
                    epoll::Worker::new(listener, service, pool)?.run()
                })
        })
        .collect::<io::Result<_>>()?;
    for worker in workers {
        worker
            .join()
            .map_err(|_| io::Error::other("a worker thread panicked"))??;
    }
    Ok(())
}

/// Runs one io_uring worker per listener, each with its own ring and the service and
/// database connections `new_worker` makes on its thread, until one fails; fails at once,
/// naming the cause, when io_uring cannot be used.
pub fn run_uring<S, F>(
    listeners: Vec<OwnedFd>,
    new_worker: F,
    options: UringOptions,
) -> io::Result<()>
where
    S: Service,
    F: Fn() -> (S, Pool) + Send + Sync + 'static,
{
    uring::run(listeners, new_worker, options)
}
