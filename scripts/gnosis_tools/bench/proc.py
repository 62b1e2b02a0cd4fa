"""What /proc tells of the processes measured: their CPU ticks and memory, PostgreSQL's backends,
and the TCP connections opened."""

import os
from pathlib import Path

from ..system import read_proc_stat


# With --pin, the CPUs a server is started on (None: those this script has).
SERVER_CPUS = None


def pin(server_cpus, load_cpus):
    """Keeps the servers on `server_cpus`, and this script, with every load generator it starts,
    on `load_cpus` (a process inherits its parent's CPUs)."""
    global SERVER_CPUS
    SERVER_CPUS = server_cpus
    os.sched_setaffinity(0, load_cpus)
    # vortex starts a worker per core of the machine, each pinned by itself to its core (its
    # affinity.rs), whatever CPUs it was given: told how many it has, its workers stay on them.
    os.environ.setdefault("VORTEX_WORKERS", str(len(server_cpus)))


def server_preexec():
    """What a server's process runs before it execs: with --pin, moving to the servers' CPUs;
    without, nothing (None keeps subprocess's faster spawn)."""
    cpus = SERVER_CPUS
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def proc_stats():
    """(pid, read_proc_stat) of every process on the machine, but those that end meanwhile."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            yield int(entry), read_proc_stat(entry)
        except (OSError, ValueError, IndexError):
            continue  # the process ended while we looked


def postgres_cpu_ticks():
    """utime + stime of each PostgreSQL process on the machine (comm `postgres`), by pid: the
    backends the servers' queries run in, whichever cluster they use."""
    return {pid: ticks for pid, (name, _, _, ticks) in proc_stats() if name == "postgres"}


def ticks_since(before, after):
    """CPU ticks spent between two snapshots by the processes of the second: one that started
    in between counts whole; one that ended in between is lost (its time left /proc with it)."""
    return sum(max(0, ticks - before.get(pid, 0)) for pid, ticks in after.items())


def read_status_kib(pid, field):
    """A size field of /proc/PID/status, e.g. VmHWM: (peak RSS) or VmRSS:, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def thread_count(pid):
    """The threads of a process (num_threads of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    return int(text[text.rindex(")") + 2 :].split()[17])


def tcp_active_opens():
    """The TCP connections opened so far by this network namespace (Tcp ActiveOpens)."""
    lines = [line.split() for line in Path("/proc/net/snmp").read_text().splitlines() if line.startswith("Tcp:")]
    return int(lines[1][lines[0].index("ActiveOpens")])


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"
