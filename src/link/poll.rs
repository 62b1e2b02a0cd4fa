//! Moving any link's bytes with plain system calls, for tests and start-up work: a [`Socket`]
//! per link does what its link orders and reads and sends as poll(2) says it can;
//! [`Socket::wait`] polls many at once. What `pg::blocking::Driver` does for a PostgreSQL
//! link, for a link of any connection, whatever its events are delivered to.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use super::{Driven, Link, Order};
use crate::sys::{self, Readiness};

/// A link's socket, if it has one.
#[derive(Debug, Default)]
pub struct Socket {
    fd: Option<OwnedFd>,
    /// The connect of `fd` is under way.
    connecting: bool,
}

impl Socket {
    pub fn new() -> Socket {
        Socket::default()
    }

    /// Whether to wait for the socket to be writable: a connect under way, or bytes unsent.
    pub fn wants_write<C: super::Conn>(&self, link: &Link<C>) -> bool {
        self.fd.is_some() && (self.connecting || link.has_unsent())
    }

    /// Does what the link orders (connect, close), then sends what it can: after the link's
    /// connection was given work, and after every event and timer.
    pub fn settle<C: Driven<K>, K>(&mut self, link: &mut Link<C>, now: Instant, sink: &mut K) {
        while let Some(order) = link.order(now, sink) {
            match order {
                Order::Connect(address) => match sys::connect_nonblocking(&address) {
                    Ok(fd) => {
                        self.fd = Some(fd);
                        self.connecting = true;
                    }
                    Err(error) => link.connected(Err(error), now, sink),
                },
                Order::Close => {
                    // Nothing but this socket refers to the descriptor.
                    self.fd = None;
                    self.connecting = false;
                    link.closed();
                }
            }
        }
        self.send(link, now, sink);
    }

    /// Acts on what [`Socket::wait`] saw the socket ready for, then settles.
    pub fn ready<C: Driven<K>, K>(
        &mut self,
        link: &mut Link<C>,
        readiness: Readiness,
        now: Instant,
        sink: &mut K,
    ) {
        if readiness.writable {
            self.finish_connect(link, now, sink);
        }
        if readiness.readable {
            self.read(link, now, sink);
        }
        self.settle(link, now, sink);
    }

    /// Waits up to `timeout` for any of `sockets` (each with whether to watch it for
    /// writable: [`Socket::wants_write`]), and says what each is ready for; a socket
    /// without a descriptor is never ready. Sleeps when none has one.
    pub fn wait(sockets: &[(&Socket, bool)], timeout: Duration) -> io::Result<Vec<Readiness>> {
        let watched: Vec<_> = sockets
            .iter()
            .filter_map(|(socket, write)| Some((socket.fd.as_ref()?.as_fd(), *write)))
            .collect();
        if watched.is_empty() {
            std::thread::sleep(timeout);
            return Ok(vec![Readiness::default(); sockets.len()]);
        }
        let mut ready = sys::poll_sockets(&watched, timeout)?.into_iter();
        let spread = sockets.iter().map(|(socket, _)| match socket.fd {
            Some(_) => ready.next().unwrap_or_default(),
            None => Readiness::default(),
        });
        Ok(spread.collect())
    }

    fn finish_connect<C: Driven<K>, K>(&mut self, link: &mut Link<C>, now: Instant, sink: &mut K) {
        let Some(fd) = self.fd.as_ref().filter(|_| self.connecting) else {
            return;
        };
        self.connecting = false;
        let result = sys::take_socket_error(fd);
        link.connected(result, now, sink);
    }

    /// Reads until the socket is empty, handing each read to the link.
    fn read<C: Driven<K>, K>(&mut self, link: &mut Link<C>, now: Instant, sink: &mut K) {
        if self.connecting {
            // Readable before connected: the connect failed, and SO_ERROR says why.
            return self.finish_connect(link, now, sink);
        }
        loop {
            // None once the socket is no longer the connection's (it failed, say).
            let (Some(fd), Some(buffer)) = (&self.fd, link.read_buffer(false)) else {
                return;
            };
            let room = buffer.len();
            match sys::receive(fd, buffer) {
                Ok(n) => {
                    link.filled(n, now, sink);
                    // EOF, or a short read emptied the socket.
                    if n < room {
                        return;
                    }
                }
                Err(error) => match error.kind() {
                    io::ErrorKind::WouldBlock => return,
                    io::ErrorKind::Interrupted => {}
                    _ => return link.failed(error, now, sink),
                },
            }
        }
    }

    fn send<C: Driven<K>, K>(&mut self, link: &mut Link<C>, now: Instant, sink: &mut K) {
        let Some(fd) = self.fd.as_ref().filter(|_| !self.connecting) else {
            return;
        };
        loop {
            let unsent = link.unsent();
            if unsent.is_empty() {
                return;
            }
            match sys::send(fd, unsent) {
                Ok(0) => return,
                Ok(n) => link.sent(n),
                Err(error) => match error.kind() {
                    io::ErrorKind::WouldBlock => return,
                    io::ErrorKind::Interrupted => {}
                    _ => return link.failed(error, now, sink),
                },
            }
        }
    }
}
