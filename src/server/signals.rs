//! The signals that end the server: SIGTERM, SIGINT and SIGQUIT each ask for a graceful
//! drain (nginx's `quit` is SIGQUIT; SIGTERM is what init systems and container runtimes
//! send, SIGINT a terminal's Ctrl-C); a second one, of any of the three, exits at once.
//!
//! They are blocked in every thread ([`block`], first thing in `main`, so that every thread
//! started after inherits the mask) and taken by one thread of their own with `sigwait`,
//! which tells each worker through its eventfd ([`Wakers`]): the workers wait on it with
//! their sockets (epoll) or have a poll on it in their ring (io_uring), so each wakes at
//! once, not at its next sweep.

use std::io;
use std::os::fd::OwnedFd;

use rustix::event::{eventfd, EventfdFlags};

use crate::sys;

const SIGNALS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGQUIT];

/// Blocks SIGTERM, SIGINT and SIGQUIT in the calling thread and so in every thread it
/// starts after: they stay pending until the signal thread ([`Wakers::listen`]) takes them.
/// Call it before any thread starts.
pub fn block() {
    sys::block_signals(&SIGNALS);
}

/// One eventfd per worker, written when the drain begins.
pub(super) struct Wakers(Vec<OwnedFd>);

impl Wakers {
    /// `workers` eventfds; each worker waits on its own (see [`Wakers::take`]).
    pub fn new(workers: usize) -> io::Result<Wakers> {
        let flags = EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK;
        let fds = (0..workers)
            .map(|_| eventfd(0, flags))
            .collect::<Result<_, _>>()?;
        Ok(Wakers(fds))
    }

    /// A copy of each eventfd, for the workers (the signal thread keeps the originals).
    pub fn take(&self) -> io::Result<Vec<OwnedFd>> {
        self.0.iter().map(|fd| fd.try_clone()).collect()
    }

    /// Starts the thread that takes the signals: the first wakes every worker to drain, a
    /// second exits the process at once with 128 + its number (as a shell reports a process
    /// killed by it).
    pub fn listen(self, drain_timeout: std::time::Duration) {
        let spawned = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let first = sys::wait_signal(&SIGNALS);
                crate::log!(
                    "{}: draining (finishing what is in flight within {} ms); another signal \
                     exits at once",
                    name(first),
                    drain_timeout.as_millis()
                );
                for fd in &self.0 {
                    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
                }
                let second = sys::wait_signal(&SIGNALS);
                crate::log!("{}: exiting at once", name(second));
                std::process::exit(128 + second);
            });
        if let Err(err) = spawned {
            crate::log!("cannot take signals ({err}): SIGTERM will not drain");
        }
    }
}

fn name(signal: libc::c_int) -> &'static str {
    match signal {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "SIGQUIT",
    }
}
