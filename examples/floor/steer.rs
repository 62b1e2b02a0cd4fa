//! Where the floor's workers run and which connections each takes: the levers `--steer`
//! (worker i kept on the i-th CPU, its listener preferred for the connections whose packets
//! that CPU processes) and `--defer-accept`, for both backends.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

/// The CPUs this thread may run on, in order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = sched_getaffinity(None)?;
    Ok((0..CpuSet::MAX_CPU)
        .filter(|&cpu| set.is_set(cpu))
        .collect())
}

/// Keeps the calling thread on `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu);
    Ok(sched_setaffinity(None, &set)?)
}

/// Prefers `listener`, among its `SO_REUSEPORT` group, for the connections whose packets
/// `cpu` processes (`SO_INCOMING_CPU`; one no socket claims goes by the group's hash).
pub fn prefer_cpu(listener: &OwnedFd, cpu: usize) -> io::Result<()> {
    let cpu = u32::try_from(cpu).map_err(io::Error::other)?;
    Ok(rustix::net::sockopt::set_socket_incoming_cpu(
        listener, cpu,
    )?)
}

/// Wakes an accept only once the client's first data has arrived (`TCP_DEFER_ACCEPT`,
/// which rustix has no call for).
pub fn defer_accept(listener: &OwnedFd, seconds: libc::c_int) -> io::Result<()> {
    // SAFETY: a live descriptor and a live c_int of the size given.
    let done = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&raw const seconds).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    match done {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
