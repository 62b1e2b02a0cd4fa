//! The socket, epoll and rlimit system calls gnosis makes, over rustix.
//!
//! rustix gives each call a safe, typed signature (borrowed descriptors, checked buffers,
//! `Errno` results) and on Linux makes it directly, without libc's wrapper: the same calls
//! as before (`send` is one `sendto`, reads are `read` and `recvfrom`), and no `unsafe`
//! here but for what rustix lacks: one socket option (`set_receive_low_water`) and the
//! signal mask and `sigwait` of the graceful drain (`block_signals`, `wait_signal`). Two names differ
//! under strace: epoll's wait is `epoll_pwait` with no signal mask and the start-up client's
//! poll is `ppoll`, which the kernel runs as `epoll_wait` and `poll` (with a nanosecond
//! timeout).

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use rustix::buffer::spare_capacity;
use rustix::event::epoll::{self, EventData, EventFlags};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::{
    sockopt, AddressFamily, RecvFlags, SendFlags, Shutdown, SocketAddrUnix, SocketFlags, SocketType,
};
use rustix::process::{Resource, Rlimit};

mod udp;
pub use udp::{
    ensure_udp_port_free, receive_datagrams, route_by_connection_id, send_datagrams, udp_socket,
    Received,
};

/// Sockets are non-blocking and not inherited by child processes.
const SOCKET_FLAGS: SocketFlags = SocketFlags::NONBLOCK.union(SocketFlags::CLOEXEC);

fn stream_socket(family: AddressFamily) -> io::Result<OwnedFd> {
    let socket = rustix::net::socket_with(family, SocketType::STREAM, SOCKET_FLAGS, None)?;
    Ok(socket)
}

/// The port `socket` is bound to.
pub fn local_port(socket: impl AsFd) -> io::Result<u16> {
    let address = SocketAddr::try_from(rustix::net::getsockname(socket)?)
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    Ok(address.port())
}

fn bind_any(socket: &OwnedFd, port: u16) -> io::Result<()> {
    let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
    Ok(rustix::net::bind(socket, &any)?)
}

/// Fails with `AddrInUse` when anything listens on `port`, even another `SO_REUSEPORT`
/// group that our own listeners would silently join.
pub fn ensure_port_free(port: u16) -> io::Result<()> {
    let probe = stream_socket(AddressFamily::INET)?;
    sockopt::set_socket_reuseaddr(&probe, true)?;
    bind_any(&probe, port)
}

/// A non-blocking listener on 0.0.0.0:`port` that shares the port with the other workers.
pub fn reuseport_listener(port: u16) -> io::Result<OwnedFd> {
    let socket = stream_socket(AddressFamily::INET)?;
    sockopt::set_socket_reuseaddr(&socket, true)?;
    sockopt::set_socket_reuseport(&socket, true)?;
    bind_any(&socket, port)?;
    // Accepted sockets inherit it (Linux copies the listener's options), so no accept
    // needs a setsockopt of its own: io_uring's direct descriptors could not take one.
    set_nodelay(&socket)?;
    // The kernel caps the backlog at net.core.somaxconn.
    rustix::net::listen(&socket, 65_535)?;
    Ok(socket)
}

/// Fills `bytes` from the kernel's random generator (QUIC connection IDs).
pub fn fill_random(mut bytes: &mut [u8]) {
    while !bytes.is_empty() {
        match rustix::rand::getrandom(&mut *bytes, rustix::rand::GetRandomFlags::empty()) {
            Ok(filled) => bytes = &mut bytes[filled..],
            Err(Errno::INTR) => {}
            // Only a kernel without getrandom(2) (before 3.17) fails here.
            Err(err) => panic!("getrandom: {err}"),
        }
    }
}

/// Raises the open-files soft limit to the hard limit, so that tens of thousands of
/// connections fit; returns the new soft limit (`u64::MAX`: unlimited).
pub fn raise_open_files_limit() -> io::Result<u64> {
    let limit = rustix::process::getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        rustix::process::setrlimit(
            Resource::Nofile,
            Rlimit {
                current: limit.maximum,
                maximum: limit.maximum,
            },
        )?;
    }
    Ok(limit.maximum.unwrap_or(u64::MAX))
}

/// The open-files soft limit (`u64::MAX`: unlimited).
pub fn open_files_limit() -> io::Result<u64> {
    let limit = rustix::process::getrlimit(Resource::Nofile);
    Ok(limit.current.unwrap_or(u64::MAX))
}

/// Accepts one pending connection as non-blocking (with `TCP_NODELAY`, from the
/// listener), with the client's address; `Ok(None)` when there is none.
pub fn accept(listener: &OwnedFd) -> io::Result<Option<(OwnedFd, Option<IpAddr>)>> {
    match rustix::net::acceptfrom_with(listener, SOCKET_FLAGS) {
        Ok((socket, peer)) => {
            let ip = peer
                .and_then(|peer| SocketAddr::try_from(peer).ok())
                .map(|peer| peer.ip());
            Ok(Some((socket, ip)))
        }
        Err(Errno::AGAIN) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// Sends small responses at once instead of waiting to coalesce them (Nagle).
pub fn set_nodelay(socket: &OwnedFd) -> io::Result<()> {
    Ok(sockopt::set_tcp_nodelay(socket, true)?)
}

/// Reads into the spare capacity of `buf` (at least `min_spare` bytes of it), appending
/// what arrived. `Ok(0)` is end of stream.
pub fn read_into(fd: impl AsFd, buf: &mut Vec<u8>, min_spare: usize) -> io::Result<usize> {
    // Never no room: a read into none returns 0, which would look like end of stream.
    buf.reserve(min_spare.max(1));
    Ok(rustix::io::read(fd, spare_capacity(buf))?)
}

/// Asks the kernel not to report `socket` readable, nor to complete a receive waiting on
/// it, before `bytes` have arrived (`SO_RCVLOWAT`); its EOF and errors are reported
/// whatever the mark. rustix has no call for this option: libc's is the one `unsafe` here.
pub fn set_receive_low_water(socket: impl AsFd, bytes: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    udp::set_int_option(socket, libc::SOL_SOCKET, libc::SO_RCVLOWAT, value)
}

/// Sends what it can of `data`; never raises SIGPIPE.
pub fn send(socket: impl AsFd, data: &[u8]) -> io::Result<usize> {
    Ok(rustix::net::send(socket, data, SendFlags::NOSIGNAL)?)
}

/// Ends our sending side (the peer sees EOF after the last byte) while still reading.
pub fn shutdown_write(fd: &OwnedFd) {
    // Failure only means the connection is already gone.
    let _ = rustix::net::shutdown(fd, Shutdown::Write);
}

/// Ends both directions: operations still pending on the socket (io_uring's) complete.
pub fn shutdown_both(fd: &OwnedFd) {
    // Failure only means the connection is already gone.
    let _ = rustix::net::shutdown(fd, Shutdown::Both);
}

/// Errors of accept(2) that mean the process or system is out of descriptors or memory:
/// retrying at once would fail the same way.
pub fn is_out_of_descriptors(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error().map(Errno::from_raw_os_error),
        Some(Errno::MFILE | Errno::NFILE | Errno::NOBUFS | Errno::NOMEM)
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
pub const KEEPALIVE_PROBES: u32 = 3;
/// Sent data left unacknowledged this long fails the socket (TCP_USER_TIMEOUT), so a peer that
/// stops acknowledging while we send is noticed too, and sooner than by retransmission's ~15 min.
pub const USER_TIMEOUT: Duration = Duration::from_secs(15);

/// A non-blocking, close-on-exec stream socket with its connect started: `Ok` also when the
/// connect is still in progress (EINPROGRESS); wait for writable, then [`take_socket_error`].
/// TCP sockets get `TCP_NODELAY` and the keepalive and user timeout above.
pub fn connect_nonblocking(address: &Address) -> io::Result<OwnedFd> {
    let started = match address {
        Address::Unix(path) => {
            // Too long for sun_path, or with a NUL inside.
            let unusable = |_| io::Error::new(io::ErrorKind::InvalidInput, "unusable socket path");
            let path = SocketAddrUnix::new(path.as_path()).map_err(unusable)?;
            let socket = stream_socket(AddressFamily::UNIX)?;
            (rustix::net::connect(&socket, &path), socket)
        }
        Address::Tcp(addr) => {
            let family = match addr {
                SocketAddr::V4(_) => AddressFamily::INET,
                SocketAddr::V6(_) => AddressFamily::INET6,
            };
            let socket = stream_socket(family)?;
            set_nodelay(&socket)?;
            set_keepalive(&socket)?;
            (rustix::net::connect(&socket, addr), socket)
        }
    };
    match started {
        (Ok(()) | Err(Errno::INPROGRESS), socket) => Ok(socket),
        (Err(err), _) => Err(err.into()),
    }
}

fn set_keepalive(socket: &OwnedFd) -> io::Result<()> {
    sockopt::set_socket_keepalive(socket, true)?;
    sockopt::set_tcp_keepidle(socket, KEEPALIVE_IDLE)?;
    sockopt::set_tcp_keepintvl(socket, KEEPALIVE_INTERVAL)?;
    sockopt::set_tcp_keepcnt(socket, KEEPALIVE_PROBES)?;
    let user_timeout = u32::try_from(USER_TIMEOUT.as_millis()).unwrap_or(u32::MAX);
    Ok(sockopt::set_tcp_user_timeout(socket, user_timeout)?)
}

/// The outcome of a non-blocking connect (SO_ERROR), once the socket is writable.
pub fn take_socket_error(socket: &OwnedFd) -> io::Result<()> {
    Ok(sockopt::socket_error(socket)??)
}

/// Reads what has arrived into `buf`, without blocking. `Ok(0)` is end of stream.
pub fn receive(socket: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    let (received, _) = rustix::net::recv(socket, buf, RecvFlags::DONTWAIT)?;
    Ok(received)
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
    let mut interest = PollFlags::IN;
    interest.set(PollFlags::OUT, want_write);
    let mut pollfd = [PollFd::new(socket, interest)];
    // Nanoseconds (ppoll), so a wait for a deadline does not wake before it; a timeout too
    // long for a timespec waits for readiness alone.
    let timeout = Timespec::try_from(timeout).ok();
    match rustix::event::poll(&mut pollfd, timeout.as_ref()) {
        Ok(_) => {}
        Err(Errno::INTR) => return Ok(Readiness::default()),
        Err(err) => return Err(err.into()),
    }
    Ok(readiness(pollfd[0].revents()))
}

/// [`poll_socket`] for several sockets, each with its `want_write`: waits up to `timeout`
/// for any of them, and says what each is ready for, in their order.
pub fn poll_sockets(
    sockets: &[(BorrowedFd<'_>, bool)],
    timeout: Duration,
) -> io::Result<Vec<Readiness>> {
    let mut pollfds: Vec<PollFd<'_>> = sockets
        .iter()
        .map(|(socket, want_write)| {
            let mut interest = PollFlags::IN;
            interest.set(PollFlags::OUT, *want_write);
            PollFd::from_borrowed_fd(*socket, interest)
        })
        .collect();
    let timeout = Timespec::try_from(timeout).ok();
    match rustix::event::poll(&mut pollfds, timeout.as_ref()) {
        Ok(_) => Ok(pollfds
            .iter()
            .map(|pollfd| readiness(pollfd.revents()))
            .collect()),
        Err(Errno::INTR) => Ok(vec![Readiness::default(); sockets.len()]),
        Err(err) => Err(err.into()),
    }
}

fn readiness(revents: PollFlags) -> Readiness {
    let failed = PollFlags::HUP | PollFlags::ERR;
    Readiness {
        readable: revents.intersects(PollFlags::IN | failed),
        // A failed connect reports POLLERR/POLLHUP without POLLOUT; SO_ERROR then says why.
        writable: revents.intersects(PollFlags::OUT | failed),
    }
}

pub struct Epoll {
    fd: OwnedFd,
}

pub const READABLE: u32 = EventFlags::IN.union(EventFlags::RDHUP).bits();
pub const WRITABLE: u32 = EventFlags::OUT.bits();
/// A listener's interest: pending connections.
pub const ACCEPTABLE: u32 = EventFlags::IN.bits();
/// Reset or error: reported whatever the interest.
pub const HANGUP: u32 = EventFlags::HUP.union(EventFlags::ERR).bits();

/// The buffer [`Epoll::wait`] fills: each event's token and flags.
pub struct Events(Vec<epoll::Event>);

impl Events {
    pub fn with_capacity(capacity: usize) -> Self {
        Events(Vec::with_capacity(capacity))
    }

    /// The events of the last wait, as (token, flags).
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.0.iter().map(|&event| {
            // The event is packed: copy the fields out before using them.
            let (data, flags) = (event.data, event.flags);
            (data.u64(), flags.bits())
        })
    }
}

impl Epoll {
    pub fn new() -> io::Result<Self> {
        Ok(Epoll {
            fd: epoll::create(epoll::CreateFlags::CLOEXEC)?,
        })
    }

    pub fn add(&self, fd: impl AsFd, events: u32, token: u64) -> io::Result<()> {
        let flags = EventFlags::from_bits_retain(events);
        Ok(epoll::add(&self.fd, fd, EventData::new_u64(token), flags)?)
    }

    pub fn modify(&self, fd: impl AsFd, events: u32, token: u64) -> io::Result<()> {
        let flags = EventFlags::from_bits_retain(events);
        Ok(epoll::modify(
            &self.fd,
            fd,
            EventData::new_u64(token),
            flags,
        )?)
    }

    /// Waits up to `timeout_ms` (negative: for ever) for events, replacing those in
    /// `events`; an interrupted wait returns none.
    pub fn wait(&self, events: &mut Events, timeout_ms: i32) -> io::Result<()> {
        let timeout = u32::try_from(timeout_ms)
            .ok()
            .and_then(|ms| Timespec::try_from(Duration::from_millis(ms.into())).ok());
        events.0.clear();
        match epoll::wait(&self.fd, spare_capacity(&mut events.0), timeout.as_ref()) {
            Ok(_) | Err(Errno::INTR) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }
}

/// The set of `signals`.
fn signal_set(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set it is given; sigaddset adds signals to an
    // initialised set (an invalid number is refused, not undefined).
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        for &signal in signals {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// Blocks `signals` in the calling thread, and so in every thread it starts after: they
/// stay pending until [`wait_signal`] takes them. rustix has no call for the signal mask.
pub fn block_signals(signals: &[libc::c_int]) {
    let set = signal_set(signals);
    // SAFETY: the set is initialised; the old mask is not asked for.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// Takes the next of `signals` (blocked, see [`block_signals`]) from the pending set,
/// waiting for one.
pub fn wait_signal(signals: &[libc::c_int]) -> libc::c_int {
    let set = signal_set(signals);
    let mut signal = 0;
    loop {
        // SAFETY: the set is initialised and `signal` is a live c_int.
        if unsafe { libc::sigwait(&set, &mut signal) } == 0 {
            return signal;
        }
    }
}

/// The IP address in `address` (its first `len` bytes, as `accept` wrote them), if it is an
/// IPv4 or IPv6 one.
pub fn ip_of(address: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<IpAddr> {
    let fits = |size: usize| len as usize >= size;
    match libc::c_int::from(address.ss_family) {
        libc::AF_INET if fits(std::mem::size_of::<libc::sockaddr_in>()) => {
            // SAFETY: the family says it is a sockaddr_in, whose size the length covers,
            // inside a sockaddr_storage, which is large and aligned enough for any address.
            let v4 =
                unsafe { &*(address as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(IpAddr::from(v4.sin_addr.s_addr.to_ne_bytes()))
        }
        libc::AF_INET6 if fits(std::mem::size_of::<libc::sockaddr_in6>()) => {
            // SAFETY: as above, for a sockaddr_in6.
            let v6 = unsafe {
                &*(address as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            Some(IpAddr::from(v6.sin6_addr.s6_addr))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::os::unix::net::UnixListener;

    #[test]
    fn ip_of_reads_both_families_and_refuses_short_or_other_ones() {
        // SAFETY: all-zero bytes are a valid sockaddr_storage, and it holds either address.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let v4 = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 8080u16.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes([10, 1, 2, 3]),
            },
            sin_zero: [0; 8],
        };
        // SAFETY: a sockaddr_storage is large and aligned enough for a sockaddr_in.
        unsafe { std::ptr::write((&raw mut storage).cast(), v4) };
        let v4_len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        assert_eq!(ip_of(&storage, v4_len), Some(IpAddr::from([10, 1, 2, 3])));
        assert_eq!(ip_of(&storage, v4_len - 1), None);
        let v6 = libc::sockaddr_in6 {
            sin6_family: libc::AF_INET6 as libc::sa_family_t,
            sin6_port: 0,
            sin6_flowinfo: 0,
            sin6_addr: libc::in6_addr {
                s6_addr: [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            },
            sin6_scope_id: 0,
        };
        // SAFETY: and for a sockaddr_in6.
        unsafe { std::ptr::write((&raw mut storage).cast(), v6) };
        let v6_len = std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        assert_eq!(
            ip_of(&storage, v6_len),
            Some("2001:db8::1".parse::<IpAddr>().unwrap())
        );
        storage.ss_family = libc::AF_UNIX as libc::sa_family_t;
        assert_eq!(ip_of(&storage, v6_len), None);
    }

    const RDHUP: u32 = EventFlags::RDHUP.bits();

    /// Waits for the connect to end and returns its outcome.
    fn finish(socket: &OwnedFd) -> io::Result<()> {
        let ready = poll_socket(socket, true, Duration::from_secs(10))?;
        assert!(ready.writable);
        take_socket_error(socket)
    }

    #[test]
    fn accepted_connections_have_nodelay_from_the_listener_and_the_clients_address() {
        let listener = reuseport_listener(0).unwrap();
        let port = TcpListener::from(listener.try_clone().unwrap())
            .local_addr()
            .unwrap()
            .port();
        let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (accepted, peer) = poll_socket(&listener, false, Duration::from_secs(10))
            .and_then(|_| accept(&listener))
            .unwrap()
            .expect("a connection waits");
        assert!(sockopt::tcp_nodelay(&accepted).unwrap());
        assert_eq!(peer, Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    }

    #[test]
    fn tcp_connects_non_blocking_with_nodelay_and_keepalive() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let socket = connect_nonblocking(&Address::Tcp(listener.local_addr().unwrap())).unwrap();
        finish(&socket).unwrap();
        assert!(sockopt::tcp_nodelay(&socket).unwrap());
        assert!(sockopt::socket_keepalive(&socket).unwrap());
        assert_eq!(sockopt::tcp_keepidle(&socket).unwrap().as_secs(), 10);
        assert_eq!(sockopt::tcp_keepintvl(&socket).unwrap().as_secs(), 5);
        assert_eq!(sockopt::tcp_keepcnt(&socket).unwrap(), 3);
        assert_eq!(sockopt::tcp_user_timeout(&socket).unwrap(), 15_000);
        let cloexec = rustix::io::fcntl_getfd(&socket).unwrap();
        assert!(cloexec.contains(rustix::io::FdFlags::CLOEXEC));
        // Non-blocking: a plain read (no MSG_DONTWAIT) of nothing does not wait.
        let mut nothing = [0u8; 1];
        assert_eq!(rustix::io::read(&socket, &mut nothing), Err(Errno::AGAIN));

        // Bytes both ways; nothing there is WouldBlock, not a wait.
        let (mut peer, _) = listener.accept().unwrap();
        let mut buf = [0u8; 16];
        let err = receive(&socket, &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(send(&socket, b"ping").unwrap(), 4);
        std::io::Write::write_all(&mut peer, b"pong").unwrap();
        assert!(
            poll_socket(&socket, false, Duration::from_secs(10))
                .unwrap()
                .readable
        );
        assert_eq!(receive(&socket, &mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], b"pong");
        // Read before closing: unread data would make the close a reset.
        std::io::Read::read_exact(&mut peer, &mut buf[..4]).unwrap();
        drop(peer);
        assert!(
            poll_socket(&socket, false, Duration::from_secs(10))
                .unwrap()
                .readable
        );
        assert_eq!(receive(&socket, &mut buf).unwrap(), 0, "end of stream");
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
            Some(Errno::CONNREFUSED.raw_os_error())
        );
    }

    #[test]
    fn read_into_appends_what_arrived_then_reports_end_of_stream() {
        let (ours, mut peer) = std::os::unix::net::UnixStream::pair().unwrap();
        let ours = OwnedFd::from(ours);
        let mut buf = b"kept".to_vec();
        assert_eq!(buf.len(), buf.capacity());
        std::io::Write::write_all(&mut peer, b" and new").unwrap();
        // A full buffer asked for no room still gets some: not a read of 0 (end of stream).
        let first = read_into(&ours, &mut buf, 0).unwrap();
        assert!(first > 0);
        assert_eq!(read_into(&ours, &mut buf, 16).unwrap(), 8 - first);
        assert_eq!(buf, b"kept and new");
        drop(peer);
        assert_eq!(read_into(&ours, &mut buf, 16).unwrap(), 0);
        assert_eq!(buf, b"kept and new");
    }

    #[test]
    fn epoll_reports_each_token_with_its_events_as_registered() {
        let (first, mut first_peer) = std::os::unix::net::UnixStream::pair().unwrap();
        let (second, _second_peer) = std::os::unix::net::UnixStream::pair().unwrap();
        let epoll = Epoll::new().unwrap();
        let mut events = Events::with_capacity(8);
        epoll.add(&first, READABLE, 7).unwrap();
        epoll.add(&second, WRITABLE, 1 << 40).unwrap();
        std::io::Write::write_all(&mut first_peer, b"x").unwrap();
        epoll.wait(&mut events, 10_000).unwrap();
        let mut seen: Vec<(u64, u32)> = events.iter().collect();
        seen.sort_unstable();
        assert_eq!(seen, [(7, READABLE & !RDHUP), (1 << 40, WRITABLE)]);
        // No interest: nothing to report, and a wait with no timeout left returns at once.
        epoll.modify(&first, 0, 7).unwrap();
        epoll.modify(&second, 0, 1 << 40).unwrap();
        epoll.wait(&mut events, 0).unwrap();
        assert_eq!(events.iter().count(), 0);
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
