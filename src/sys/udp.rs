//! The UDP socket of QUIC, as the fast servers drive it: one per worker in a
//! `SO_REUSEPORT` group whose kernel program sends each packet to the worker named in its
//! connection ID ([`route_by_connection_id`]); datagrams received coalesced (`UDP_GRO`) and
//! sent in batches the kernel cuts (`UDP_SEGMENT`), with their ECN bits. rustix has no
//! ancillary data for these, so `recvmsg`, `sendmsg` and the options are libc's here.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use rustix::net::{sockopt, AddressFamily, SocketType};

use super::SOCKET_FLAGS;

// Linux's numbers, which the libc crate has for some targets only.
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;

/// The socket buffers asked for: HttpArena raises `rmem_max`/`wmem_max` to 7.5 MB for its
/// HTTP/3 profiles; elsewhere the kernel caps the request at those limits.
const SOCKET_BUFFER: libc::c_int = 7_500_000;

/// A non-blocking UDP socket on 0.0.0.0:`port`, in the port's `SO_REUSEPORT` group, with
/// coalesced receives, the TOS byte (ECN) of each datagram, and the Don't Fragment bit
/// set on what it sends (path MTU discovery probes with it).
pub fn udp_socket(port: u16) -> io::Result<OwnedFd> {
    let socket =
        rustix::net::socket_with(AddressFamily::INET, SocketType::DGRAM, SOCKET_FLAGS, None)?;
    sockopt::set_socket_reuseport(&socket, true)?;
    // Best effort: without them the socket still works, more slowly or without ECN.
    let _ = set_int_option(&socket, libc::SOL_SOCKET, libc::SO_RCVBUF, SOCKET_BUFFER);
    let _ = set_int_option(&socket, libc::SOL_SOCKET, libc::SO_SNDBUF, SOCKET_BUFFER);
    let _ = set_int_option(&socket, libc::SOL_UDP, UDP_GRO, 1);
    let _ = set_int_option(&socket, libc::IPPROTO_IP, libc::IP_RECVTOS, 1);
    let probe = libc::IP_PMTUDISC_PROBE;
    set_int_option(&socket, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, probe)?;
    let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
    rustix::net::bind(&socket, &any)?;
    Ok(socket)
}

/// Fails with `AddrInUse` when any UDP socket has `port`, even another `SO_REUSEPORT`
/// group that our own sockets would silently join.
pub fn ensure_udp_port_free(port: u16) -> io::Result<()> {
    let probe =
        rustix::net::socket_with(AddressFamily::INET, SocketType::DGRAM, SOCKET_FLAGS, None)?;
    let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
    Ok(rustix::net::bind(&probe, &any)?)
}

/// Has the kernel send each datagram arriving on `socket`'s `SO_REUSEPORT` group to the
/// socket of the worker its destination connection ID names: the ID's first byte, modulo
/// `workers` (the sockets' order in the group, which is the order they were bound). A
/// short header's ID starts at byte 1; a long header's at byte 6. A client's first
/// Initial names an ID of its own choosing, so it lands on the worker its first byte
/// happens to pick, as do its retransmissions: that worker answers with IDs of its own, or
/// with a Retry whose ID names a worker with fewer connections (`quic/spread.rs`).
pub fn route_by_connection_id(socket: impl AsFd, workers: usize) -> io::Result<()> {
    let workers = u32::try_from(workers.max(1)).unwrap_or(u32::MAX);
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let (ld_byte, jset, ret_a) = (
        libc::BPF_LD | libc::BPF_B | libc::BPF_ABS,
        libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K,
        libc::BPF_RET | libc::BPF_A,
    );
    let program = [
        op(ld_byte, 0, 0, 0),                      // A = first byte
        op(jset, 2, 0, 0x80),                      // long header? to 4
        op(ld_byte, 0, 0, 1),                      // A = the short header's ID, first byte
        op(libc::BPF_JMP | libc::BPF_JA, 0, 0, 1), // to 5
        op(ld_byte, 0, 0, 6),                      // A = the long header's ID, first byte
        op(libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K, 0, 0, workers),
        op(ret_a, 0, 0, 0),
    ];
    let filter = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // The kernel copies the program, which outlives the call.
    set_option(socket, libc::SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &filter)
}

/// What one receive brought: `len` bytes from `from`, datagrams of `segment` bytes each
/// (the last may be shorter) when the kernel coalesced several, and their ECN bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    pub len: usize,
    pub from: SocketAddr,
    pub segment: Option<usize>,
    pub ecn: u8,
}

/// Room for the ancillary data of a receive (a TOS byte and a GRO size) or a send (a GSO
/// size and a TOS byte), 8-byte aligned as `cmsghdr` wants.
#[repr(C, align(8))]
struct Control([u8; 64]);

/// Receives into `buf` (64 KiB holds whatever GRO coalesces); `None` when nothing waits.
pub fn receive_datagrams(socket: impl AsFd, buf: &mut [u8]) -> io::Result<Option<Received>> {
    // SAFETY: all-zero is a valid sockaddr_in, msghdr and iovec (null pointers, zero lengths).
    let mut from: libc::sockaddr_in = unsafe { zeroed() };
    let mut control = Control([0; 64]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_in).cast();
    msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len();
    // SAFETY: every pointer in `msg` points at a live local or at `buf`, with its length;
    // the kernel writes within those lengths.
    let len = unsafe { libc::recvmsg(socket.as_fd().as_raw_fd(), &mut msg, 0) };
    if len < 0 {
        let err = io::Error::last_os_error();
        return match err.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            _ => Err(err),
        };
    }
    let (mut segment, mut ecn) = (None, 0);
    // SAFETY: `msg` is as recvmsg left it: the CMSG macros walk its control buffer within
    // `msg_controllen`, and each header's data is read as the type its level and type say,
    // unaligned.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&msg);
        while !header.is_null() {
            let data = libc::CMSG_DATA(header);
            match ((*header).cmsg_level, (*header).cmsg_type) {
                (libc::SOL_UDP, UDP_GRO) => {
                    let size = data.cast::<libc::c_int>().read_unaligned();
                    segment = usize::try_from(size).ok();
                }
                (libc::IPPROTO_IP, libc::IP_TOS) => ecn = data.read() & 0b11,
                _ => {}
            }
            header = libc::CMSG_NXTHDR(&msg, header);
        }
    }
    let from = SocketAddr::V4(SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(from.sin_addr.s_addr)),
        u16::from_be(from.sin_port),
    ));
    let len = len as usize;
    let segment = segment.filter(|&size| size > 0 && size < len);
    Ok(Some(Received {
        len,
        from,
        segment,
        ecn,
    }))
}

/// Sends `bytes` to `to` as datagrams of `segment` bytes (one if `None`) with the ECN
/// bits `ecn`, in one call. `Ok(false)` when the socket's buffer is full.
pub fn send_datagrams(
    socket: impl AsFd,
    to: SocketAddr,
    bytes: &[u8],
    segment: Option<usize>,
    ecn: u8,
) -> io::Result<bool> {
    let SocketAddr::V4(to) = to else {
        return Err(io::ErrorKind::Unsupported.into());
    };
    let address = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: to.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*to.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let mut control = Control([0; 64]);
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    };
    // SAFETY: all-zero is a valid msghdr.
    let mut msg: libc::msghdr = unsafe { zeroed() };
    msg.msg_name = (&address as *const libc::sockaddr_in).cast_mut().cast();
    msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len();
    let segment = segment.filter(|&size| size < bytes.len());
    // SAFETY: the control buffer holds both headers (CMSG_SPACE of a u16 and of a c_int,
    // 16 + 16 bytes, within 64); CMSG_FIRSTHDR and CMSG_NXTHDR walk it within
    // `msg_controllen`, set to what was written before the send; the data written is the
    // type each option takes.
    unsafe {
        let mut used = 0;
        let mut header = libc::CMSG_FIRSTHDR(&msg);
        if let Some(size) = segment {
            (*header).cmsg_level = libc::SOL_UDP;
            (*header).cmsg_type = UDP_SEGMENT;
            (*header).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
            libc::CMSG_DATA(header)
                .cast::<u16>()
                .write_unaligned(size as u16);
            used += libc::CMSG_SPACE(size_of::<u16>() as u32) as usize;
            header = libc::CMSG_NXTHDR(&msg, header);
        }
        (*header).cmsg_level = libc::IPPROTO_IP;
        (*header).cmsg_type = libc::IP_TOS;
        (*header).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
        libc::CMSG_DATA(header)
            .cast::<libc::c_int>()
            .write_unaligned(libc::c_int::from(ecn));
        used += libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize;
        msg.msg_controllen = used;
    }
    // SAFETY: every pointer in `msg` points at a live local or at `bytes`, with its length.
    let sent = unsafe { libc::sendmsg(socket.as_fd().as_raw_fd(), &msg, 0) };
    if sent >= 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    match err.kind() {
        io::ErrorKind::WouldBlock => Ok(false),
        _ => Err(err),
    }
}

/// Sets an integer socket option.
pub(super) fn set_int_option(
    socket: impl AsFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    set_option(socket, level, name, &value)
}

/// Sets the socket option `name` of `level` to `value`, a value of the type the option takes.
fn set_option<T>(
    socket: impl AsFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: the descriptor is borrowed for the call, and the option's value is a live `T`
    // whose size is the length given; what it points to (a filter's program) is the
    // caller's to keep alive for the call.
    let done = unsafe {
        libc::setsockopt(
            socket.as_fd().as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    match done {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port no socket holds. (`udp_socket(0)` may be given a port that another
    /// `SO_REUSEPORT` socket of this user holds, and join its group: another test's, or
    /// another process's.)
    fn unused_port() -> u16 {
        let probe =
            rustix::net::socket_with(AddressFamily::INET, SocketType::DGRAM, SOCKET_FLAGS, None)
                .unwrap();
        rustix::net::bind(&probe, &SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).unwrap();
        let address = SocketAddr::try_from(rustix::net::getsockname(&probe).unwrap());
        address.unwrap().port()
    }

    fn bound_pair() -> (OwnedFd, OwnedFd, SocketAddr) {
        let port = unused_port();
        let server = udp_socket(port).unwrap();
        let client = udp_socket(unused_port()).unwrap();
        let to = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
        (server, client, to)
    }

    fn receive_all(socket: &OwnedFd) -> Vec<(Vec<u8>, Received)> {
        let mut buf = vec![0; 65_536];
        let mut got = Vec::new();
        for _ in 0..1000 {
            match receive_datagrams(socket, &mut buf).unwrap() {
                Some(received) => got.push((buf[..received.len].to_vec(), received)),
                None if got.is_empty() => std::thread::yield_now(),
                None => break,
            }
        }
        got
    }

    #[test]
    fn a_batch_goes_out_as_datagrams_of_its_segment_size() {
        let (server, client, to) = bound_pair();
        let bytes: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        assert!(send_datagrams(&client, to, &bytes, Some(1200), 0b10).unwrap());
        let got = receive_all(&server);
        // Coalesced again by GRO or one by one: the same bytes, in datagrams of 1,200.
        let joined: Vec<u8> = got.iter().flat_map(|(bytes, _)| bytes.clone()).collect();
        assert_eq!(joined, bytes);
        for (bytes, received) in &got {
            let segment = received.segment.unwrap_or(received.len);
            assert!(segment == 1200 || bytes.len() < 1200, "{received:?}");
            assert_eq!(received.ecn, 0b10);
            assert_eq!(received.from.ip(), to.ip());
        }
    }

    #[test]
    fn each_datagram_reaches_the_socket_its_connection_id_names() {
        let port = unused_port();
        let group = [udp_socket(port).unwrap(), udp_socket(port).unwrap()];
        route_by_connection_id(&group[0], 2).unwrap();
        let client = udp_socket(unused_port()).unwrap();
        let to = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
        for worker in [0u8, 1, 2, 3] {
            // A short header, then a long one, naming `worker` in the ID's first byte.
            let short = [0x40, worker, 9, 9, 9, 9, 9, 9, 9, 7];
            let mut long = vec![0xc0, 0, 0, 0, 1, 8, worker, 9, 9, 9, 9, 9, 9, 9];
            long.resize(40, 0);
            for datagram in [&short[..], &long[..]] {
                assert!(send_datagrams(&client, to, datagram, None, 0).unwrap());
                let got = receive_all(&group[usize::from(worker % 2)]);
                assert_eq!(got.len(), 1, "worker {worker}");
                assert_eq!(got[0].0, datagram);
                let mut buf = [0; 64];
                let other = &group[usize::from(1 - worker % 2)];
                assert_eq!(receive_datagrams(other, &mut buf).unwrap(), None);
            }
        }
    }

    #[test]
    fn nothing_waiting_is_none() {
        let (server, _, _) = bound_pair();
        let mut buf = vec![0; 2048];
        assert_eq!(receive_datagrams(&server, &mut buf).unwrap(), None);
    }
}
