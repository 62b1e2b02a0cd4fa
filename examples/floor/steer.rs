//! Where the floor's workers run and which connections each takes: the levers `--steer`
//! (worker i kept on the i-th CPU, its listener preferred for the connections whose packets
//! that CPU processes) and `--defer-accept`, for both backends.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// The CPUs this thread may run on, in order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is an empty set, which the kernel fills; CPU_ISSET reads
    // within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect())
    }
}

/// Keeps the calling thread on `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Prefers `listener`, among its `SO_REUSEPORT` group, for the connections whose packets
/// `cpu` processes (`SO_INCOMING_CPU`; one no socket claims goes by the group's hash).
pub fn prefer_cpu(listener: &OwnedFd, cpu: usize) -> io::Result<()> {
    set_int(
        listener,
        libc::SOL_SOCKET,
        libc::SO_INCOMING_CPU,
        cpu as libc::c_int,
    )
}

/// Wakes an accept only once the client's first data has arrived (`TCP_DEFER_ACCEPT`).
pub fn defer_accept(listener: &OwnedFd, seconds: libc::c_int) -> io::Result<()> {
    set_int(listener, libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT, seconds)
}

fn set_int(
    socket: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: a live descriptor and a live c_int of the size given.
    let done = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&raw const value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    match done {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
