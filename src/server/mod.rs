//! The servers: per-thread event loops that move bytes between sockets and the app.

mod connection;
mod epoll;
mod uring;

pub use connection::{Connection, Handler, Reply, Ticket};
pub use uring::UringOptions;

use std::io;
use std::os::fd::OwnedFd;

use crate::app::App;
use crate::sys;

/// Binds one `SO_REUSEPORT` listener per thread up front, so that a taken port is reported
/// before any thread starts, and raises the open-files limit.
pub fn listeners(port: u16, threads: usize) -> io::Result<Vec<OwnedFd>> {
    sys::ensure_port_free(port)?;
    if let Err(err) = sys::raise_open_files_limit() {
        eprintln!("gnosis: could not raise the open-files limit: {err}");
    }
    (0..threads)
        .map(|_| sys::reuseport_listener(port))
        .collect()
}

/// Runs one epoll worker per listener, each with the app `new_app` makes on its thread,
/// until one fails.
pub fn run_epoll<F>(listeners: Vec<OwnedFd>, new_app: F) -> io::Result<()>
where
    F: Fn() -> App + Send + Sync + 'static,
{
    let new_app = std::sync::Arc::new(new_app);
    let workers: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, listener)| {
            let new_app = new_app.clone();
            std::thread::Builder::new()
                .name(format!("gnosis-{i}"))
                .spawn(move || epoll::Worker::new(listener, new_app())?.run())
        })
        .collect::<io::Result<_>>()?;
    for worker in workers {
        worker
            .join()
            .map_err(|_| io::Error::other("a worker thread panicked"))??;
    }
    Ok(())
}

/// Runs one io_uring worker per listener, each with its own ring and the app `new_app`
/// makes on its thread, until one fails; fails at once, naming the cause, when io_uring
/// cannot be used. The app must answer every request at once (no database): a response
/// written while a send is in flight would break the ring's ordering.
pub fn run_uring<F>(listeners: Vec<OwnedFd>, new_app: F, options: UringOptions) -> io::Result<()>
where
    F: Fn() -> App + Send + Sync + 'static,
{
    uring::run(listeners, new_app, options)
}
