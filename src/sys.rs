//! Thin, safe wrappers over the socket, epoll and rlimit system calls gnosis makes.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::Duration;

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
    // Accepted sockets inherit it (Linux copies the listener's options), so no accept
    // needs a setsockopt of its own: io_uring's direct descriptors could not take one.
    set_nodelay(&fd)?;
    // The kernel caps the backlog at net.core.somaxconn.
    // SAFETY: listen(2) on a socket we own.
    check(unsafe { libc::listen(fd.as_raw_fd(), 65_535) })?;
    Ok(fd)
}

/// Raises the open-files soft limit to the hard limit, so that tens of thousands of
/// connections fit; returns the new soft limit.
pub fn raise_open_files_limit() -> io::Result<u64> {
    let mut limit = open_files_rlimit()?;
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: `limit` is a valid rlimit to read.
        check(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) })?;
    }
    Ok(limit.rlim_cur)
}

/// The open-files soft limit.
pub fn open_files_limit() -> io::Result<u64> {
    Ok(open_files_rlimit()?.rlim_cur)
}

fn open_files_rlimit() -> io::Result<libc::rlimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit to fill.
    check(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) })?;
    Ok(limit)
}

/// Accepts one pending connection as non-blocking (with `TCP_NODELAY`, from the
/// listener); `Ok(None)` when there is none.
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
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
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

/// Where a client socket connects: a Unix socket's path or a TCP address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Address::Unix(path) => write!(f, "unix socket {}", path.display()),
            Address::Tcp(addr) => write!(f, "tcp {addr}"),
        }
    }
}

/// TCP keepalive for client sockets: a peer that vanishes without a FIN or RST (a dead host,
/// a dropped network path) is noticed by the kernel within about 25 s of silence (10 s idle,
/// then 3 probes 5 s apart) rather than the 2 h default.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
pub const KEEPALIVE_PROBES: libc::c_int = 3;
/// Sent data left unacknowledged this long fails the socket (TCP_USER_TIMEOUT), so a peer that
/// stops acknowledging while we send is noticed too, and sooner than by retransmission's ~15 min.
pub const USER_TIMEOUT: Duration = Duration::from_secs(15);

/// A non-blocking, close-on-exec stream socket with its connect started: `Ok` also when the
/// connect is still in progress (EINPROGRESS); wait for writable, then [`take_socket_error`].
/// TCP sockets get `TCP_NODELAY` and the keepalive and user timeout above.
pub fn connect_nonblocking(address: &Address) -> io::Result<OwnedFd> {
    let family = match address {
        Address::Unix(_) => libc::AF_UNIX,
        Address::Tcp(SocketAddr::V4(_)) => libc::AF_INET,
        Address::Tcp(SocketAddr::V6(_)) => libc::AF_INET6,
    };
    // SAFETY: plain socket(2); the result is checked before it is owned.
    let fd = check(unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    if let Address::Tcp(_) = address {
        set_nodelay(&socket)?;
        set_keepalive(&socket)?;
    }
    let (storage, len) = socket_address(address)?;
    // SAFETY: `storage` holds a valid socket address of `len` bytes.
    let rc = unsafe {
        libc::connect(
            socket.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(err);
        }
    }
    Ok(socket)
}

fn set_keepalive(socket: &OwnedFd) -> io::Result<()> {
    let fd = socket.as_raw_fd();
    let secs = |d: Duration| d.as_secs() as libc::c_int;
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    set_int_option(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_KEEPIDLE,
        secs(KEEPALIVE_IDLE),
    )?;
    set_int_option(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_KEEPINTVL,
        secs(KEEPALIVE_INTERVAL),
    )?;
    set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT, KEEPALIVE_PROBES)?;
    set_int_option(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_USER_TIMEOUT,
        USER_TIMEOUT.as_millis() as libc::c_int,
    )
}

/// The C form of `address`, and its length.
fn socket_address(address: &Address) -> io::Result<(libc::sockaddr_storage, libc::socklen_t)> {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match address {
        Address::Unix(path) => {
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_un.
            let addr = unsafe {
                &mut *(&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_un>()
            };
            let bytes = path.as_os_str().as_encoded_bytes();
            // One byte is kept for the terminating NUL.
            if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "unusable socket path",
                ));
            }
            addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (dst, &src) in addr.sun_path.iter_mut().zip(bytes) {
                *dst = src as libc::c_char;
            }
            std::mem::size_of::<libc::sockaddr_un>()
        }
        Address::Tcp(SocketAddr::V4(v4)) => {
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            let addr = unsafe {
                &mut *(&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>()
            };
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_port = v4.port().to_be();
            addr.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            std::mem::size_of::<libc::sockaddr_in>()
        }
        Address::Tcp(SocketAddr::V6(v6)) => {
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            let addr = unsafe {
                &mut *(&mut storage as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            addr.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            addr.sin6_port = v6.port().to_be();
            addr.sin6_flowinfo = v6.flowinfo();
            addr.sin6_addr.s6_addr = v6.ip().octets();
            addr.sin6_scope_id = v6.scope_id();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    Ok((storage, len as libc::socklen_t))
}

/// The outcome of a non-blocking connect (SO_ERROR), once the socket is writable.
pub fn take_socket_error(socket: &OwnedFd) -> io::Result<()> {
    let mut error: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `error` and `len` are valid for getsockopt's out-parameters.
    check(unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut error as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    match error {
        0 => Ok(()),
        code => Err(io::Error::from_raw_os_error(code)),
    }
}

/// Reads what has arrived into `buf`, without blocking. `Ok(0)` is end of stream.
pub fn receive(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    check_len(unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) })
}

/// What `poll_socket` saw: readable also covers hang-up and error, which a read reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Readiness {
    pub readable: bool,
    pub writable: bool,
}

/// Waits up to `timeout` for `socket` to become readable (always watched) or writable (when
/// `want_write`); an interrupted wait returns nothing ready.
pub fn poll_socket(socket: &OwnedFd, want_write: bool, timeout: Duration) -> io::Result<Readiness> {
    let mut pollfd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN | if want_write { libc::POLLOUT } else { 0 },
        revents: 0,
    };
    // Rounded up, so that a wait for a deadline does not wake just before it.
    let millis = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd.
    match check(unsafe { libc::poll(&mut pollfd, 1, millis) }) {
        Ok(_) => {}
        Err(err) if err.kind() == io::ErrorKind::Interrupted => return Ok(Readiness::default()),
        Err(err) => return Err(err),
    }
    let revents = pollfd.revents;
    Ok(Readiness {
        readable: revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0,
        // A failed connect reports POLLERR/POLLHUP without POLLOUT; SO_ERROR then says why.
        writable: revents & (libc::POLLOUT | libc::POLLHUP | libc::POLLERR) != 0,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::os::unix::net::UnixListener;

    fn int_option(socket: &OwnedFd, level: libc::c_int, name: libc::c_int) -> libc::c_int {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `value` and `len` are valid out-parameters.
        let rc = unsafe {
            libc::getsockopt(
                socket.as_raw_fd(),
                level,
                name,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        value
    }

    /// Waits for the connect to end and returns its outcome.
    fn finish(socket: &OwnedFd) -> io::Result<()> {
        let ready = poll_socket(socket, true, Duration::from_secs(10))?;
        assert!(ready.writable);
        take_socket_error(socket)
    }

    #[test]
    fn accepted_connections_have_nodelay_from_the_listener() {
        let listener = reuseport_listener(0).unwrap();
        let port = TcpListener::from(listener.try_clone().unwrap())
            .local_addr()
            .unwrap()
            .port();
        let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let accepted = poll_socket(&listener, false, Duration::from_secs(10))
            .and_then(|_| accept(&listener))
            .unwrap()
            .expect("a connection waits");
        assert_eq!(
            int_option(&accepted, libc::IPPROTO_TCP, libc::TCP_NODELAY),
            1
        );
    }

    #[test]
    fn tcp_connects_non_blocking_with_nodelay_and_keepalive() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let socket = connect_nonblocking(&Address::Tcp(listener.local_addr().unwrap())).unwrap();
        finish(&socket).unwrap();
        let (level, tcp) = (libc::SOL_SOCKET, libc::IPPROTO_TCP);
        assert_eq!(int_option(&socket, tcp, libc::TCP_NODELAY), 1);
        assert_eq!(int_option(&socket, level, libc::SO_KEEPALIVE), 1);
        assert_eq!(int_option(&socket, tcp, libc::TCP_KEEPIDLE), 10);
        assert_eq!(int_option(&socket, tcp, libc::TCP_KEEPINTVL), 5);
        assert_eq!(int_option(&socket, tcp, libc::TCP_KEEPCNT), 3);
        assert_eq!(int_option(&socket, tcp, libc::TCP_USER_TIMEOUT), 15_000);
        // SAFETY: fcntl(2) F_GETFL/F_GETFD on a socket we own.
        let (flags, fd_flags) = unsafe {
            (
                libc::fcntl(socket.as_raw_fd(), libc::F_GETFL),
                libc::fcntl(socket.as_raw_fd(), libc::F_GETFD),
            )
        };
        assert!(flags & libc::O_NONBLOCK != 0 && fd_flags & libc::FD_CLOEXEC != 0);

        // Bytes both ways; nothing there is WouldBlock, not a wait.
        let (mut peer, _) = listener.accept().unwrap();
        let mut buf = [0u8; 16];
        let err = receive(socket.as_raw_fd(), &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(send(socket.as_raw_fd(), b"ping").unwrap(), 4);
        std::io::Write::write_all(&mut peer, b"pong").unwrap();
        assert!(
            poll_socket(&socket, false, Duration::from_secs(10))
                .unwrap()
                .readable
        );
        assert_eq!(receive(socket.as_raw_fd(), &mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], b"pong");
        // Read before closing: unread data would make the close a reset.
        std::io::Read::read_exact(&mut peer, &mut buf[..4]).unwrap();
        drop(peer);
        assert!(
            poll_socket(&socket, false, Duration::from_secs(10))
                .unwrap()
                .readable
        );
        assert_eq!(
            receive(socket.as_raw_fd(), &mut buf).unwrap(),
            0,
            "end of stream"
        );
    }

    #[test]
    fn a_refused_tcp_connect_is_reported_by_so_error_or_at_once() {
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let outcome = connect_nonblocking(&Address::Tcp(port)).and_then(|s| finish(&s));
        assert_eq!(
            outcome.unwrap_err().raw_os_error(),
            Some(libc::ECONNREFUSED)
        );
    }

    #[test]
    fn unix_sockets_connect_by_path() {
        let dir = std::env::temp_dir().join(format!("gnosis-sys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(".s.PGSQL.1");
        let _ = std::fs::remove_file(&path);
        let _listener = UnixListener::bind(&path).unwrap();
        let socket = connect_nonblocking(&Address::Unix(path.clone())).unwrap();
        finish(&socket).unwrap();
        let missing = connect_nonblocking(&Address::Unix(dir.join("missing")));
        assert_eq!(missing.unwrap_err().kind(), io::ErrorKind::NotFound);
        let long = Address::Unix(PathBuf::from("/".repeat(200)));
        assert_eq!(
            connect_nonblocking(&long).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
