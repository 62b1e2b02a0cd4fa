//! Thin, safe wrappers over the socket, epoll and rlimit system calls gnosis makes.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn check_len(ret: libc::ssize_t) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

fn set_int_option(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` outlives the call and its size is passed alongside.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn ipv4_any(port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: libc::INADDR_ANY.to_be(),
        },
        sin_zero: [0; 8],
    }
}

fn tcp_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked before it is owned.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind(fd: &OwnedFd, port: u16) -> io::Result<()> {
    let addr = ipv4_any(port);
    // SAFETY: `addr` is a valid sockaddr_in and its size is passed alongside.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Fails with `AddrInUse` when anything listens on `port`, even another `SO_REUSEPORT`
/// group that our own listeners would silently join.
pub fn ensure_port_free(port: u16) -> io::Result<()> {
    let probe = tcp_socket()?;
    set_int_option(probe.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    bind(&probe, port)
}

/// A non-blocking listener on 0.0.0.0:`port` that shares the port with the other workers.
pub fn reuseport_listener(port: u16) -> io::Result<OwnedFd> {
    let fd = tcp_socket()?;
    set_int_option(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    set_int_option(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    bind(&fd, port)?;
    // The kernel caps the backlog at net.core.somaxconn.
    // SAFETY: listen(2) on a socket we own.
    check(unsafe { libc::listen(fd.as_raw_fd(), 65_535) })?;
    Ok(fd)
}

/// Raises the open-files soft limit to the hard limit, so that tens of thousands of
/// connections fit; returns the new soft limit.
pub fn raise_open_files_limit() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit to fill and then to read.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) })?;
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) })?;
    }
    Ok(limit.rlim_cur)
}

/// Accepts one pending connection as non-blocking with `TCP_NODELAY`; `Ok(None)` when
/// there is none.
pub fn accept(listener: &OwnedFd) -> io::Result<Option<OwnedFd>> {
    // SAFETY: accept4(2) without an address; the result is checked before it is owned.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return match err.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            _ => Err(err),
        };
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    set_nodelay(&fd)?;
    Ok(Some(fd))
}

/// Sends small responses at once instead of waiting to coalesce them (Nagle).
pub fn set_nodelay(socket: &OwnedFd) -> io::Result<()> {
    set_int_option(socket.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
}

/// Reads into the spare capacity of `buf` (at least `min_spare` bytes of it), appending
/// what arrived. `Ok(0)` is end of stream.
pub fn read_into(fd: &OwnedFd, buf: &mut Vec<u8>, min_spare: usize) -> io::Result<usize> {
    buf.reserve(min_spare);
    let spare = buf.capacity() - buf.len();
    // SAFETY: the kernel writes at most `spare` bytes into the vector's spare capacity,
    // and only the bytes it reports written become part of the vector.
    let n = check_len(unsafe {
        libc::read(
            fd.as_raw_fd(),
            buf.as_mut_ptr().add(buf.len()).cast(),
            spare,
        )
    })?;
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// Sends what it can of `data`; never raises SIGPIPE.
pub fn send(fd: RawFd, data: &[u8]) -> io::Result<usize> {
    // SAFETY: `data` is valid for reads of its length.
    check_len(unsafe { libc::send(fd, data.as_ptr().cast(), data.len(), libc::MSG_NOSIGNAL) })
}

/// Receives what fits into `buf`; `Ok(0)` is end of stream.
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of its length.
    check_len(unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) })
}

/// Ends our sending side (the peer sees EOF after the last byte) while still reading.
pub fn shutdown_write(fd: &OwnedFd) {
    // SAFETY: shutdown(2) on a socket we own; failure only means it is already gone.
    unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_WR) };
}

/// Ends both directions: operations still pending on the socket (io_uring's) complete.
pub fn shutdown_both(fd: &OwnedFd) {
    // SAFETY: shutdown(2) on a socket we own; failure only means it is already gone.
    unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
}

/// Errors of accept(2) that mean the process or system is out of descriptors or memory:
/// retrying at once would fail the same way.
pub fn is_out_of_descriptors(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

pub struct Epoll {
    fd: OwnedFd,
}

pub const READABLE: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
pub const WRITABLE: u32 = libc::EPOLLOUT as u32;

impl Epoll {
    pub fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1(2); the result is checked before it is owned.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn control(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event { events, u64: token };
        // SAFETY: `event` is valid for the duration of the call.
        check(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut event) }).map(drop)
    }

    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.control(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    /// Waits for events, filling `events` from the start; returns how many arrived.
    pub fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> io::Result<usize> {
        // SAFETY: the kernel writes at most `events.len()` entries.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as libc::c_int,
                timeout_ms,
            )
        };
        match check(n) {
            Ok(n) => Ok(n as usize),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(err) => Err(err),
        }
    }
}
