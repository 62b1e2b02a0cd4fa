//! The servers: per-thread event loops that move bytes between sockets and the app.

mod connection;
mod epoll;
mod sys;
mod uring;

pub use connection::{Connection, Handler};
pub use uring::UringOptions;

use std::io;
use std::os::fd::OwnedFd;

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

/// Runs one epoll worker per listener, each with its own handler, until one fails.
pub fn run_epoll<H, F>(listeners: Vec<OwnedFd>, new_handler: F) -> io::Result<()>
where
    H: Handler,
    F: Fn() -> H + Send + Sync + 'static,
{
    let new_handler = std::sync::Arc::new(new_handler);
    let workers: Vec<_> = listeners
        .into_iter()
        .enumerate()
        .map(|(i, listener)| {
            let new_handler = new_handler.clone();
            std::thread::Builder::new()
                .name(format!("gnosis-{i}"))
                .spawn(move || epoll::Worker::new(listener, new_handler())?.run())
        })
        .collect::<io::Result<_>>()?;
    for worker in workers {
        worker
            .join()
            .map_err(|_| io::Error::other("a worker thread panicked"))??;
    }
    Ok(())
}

/// Runs one io_uring worker per listener, each with its own ring and handler, until one
/// fails; fails at once, naming the cause, when io_uring cannot be used.
pub fn run_uring<H, F>(
    listeners: Vec<OwnedFd>,
    new_handler: F,
    options: UringOptions,
) -> io::Result<()>
where
    H: Handler,
    F: Fn() -> H + Send + Sync + 'static,
{
    uring::run(listeners, new_handler, options)
}
