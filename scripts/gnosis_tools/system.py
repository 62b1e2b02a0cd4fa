"""What every tool asks of this machine: ports and who holds them, processes, and the
`tfb-database` host name TFB's containers (and the anchors) connect to."""

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from . import ROOT

LOOPBACK = "127.0.0.1"
HOSTS_FILE = "/etc/hosts"
PG_SH = ROOT / "scripts" / "pg.sh"


class SetupError(Exception):
    """This machine is not ready for the run: it stops with a message, not a check's FAIL."""


def free_port():
    """A port on loopback that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def port_open(host, port):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def port_in_use(port):
    """None if nothing listens on `port` on any address, else who does (as far as /proc tells)."""
    listening = port_open(LOOPBACK, port)
    if not listening:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("0.0.0.0", port))
            except OSError:
                listening = True
    if not listening:
        return None
    owners = port_owners(port)
    return "by " + ", ".join(owners) if owners else "by a process this user cannot see"


def local_sockets(port):
    """(state, inode) of each TCP socket (IPv4 and IPv6) whose local port is `port`, from /proc/net."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local address "ADDR:PORT" in hex
            if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port:
                yield fields[3], fields[9]


def listening_inodes(port):
    """The inodes of the TCP sockets listening on `port` (state 0A is LISTEN)."""
    return {inode for state, inode in local_sockets(port) if state == "0A"}


def socket_inodes_of(pid):
    """The inodes of the sockets process `pid` holds open."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def read_proc_stat(pid):
    """(name, state, session id, utime + stime in clock ticks) of a process, all its threads included."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    # The name may contain spaces and parentheses: the other fields start after the last ')'.
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    return name, fields[0], int(fields[3]), int(fields[11]) + int(fields[12])


def port_owners(port):
    """`name[pid]` of the processes with a socket listening on `port`."""
    inodes = listening_inodes(port)
    owners = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and inodes & socket_inodes_of(entry):
            try:
                owners.append(f"{read_proc_stat(entry)[0]}[{entry}]")
            except (OSError, ValueError, IndexError):
                continue
    return owners


def served_by_alone(port, pid):
    """None if process `pid`, and it alone, listens on `port`; else why not. A check must not
    run against another server that happens to hold the port."""
    listening = listening_inodes(port)
    ours = socket_inodes_of(pid)
    if listening and listening <= ours:
        return None
    return (f"port {port} is not served by process {pid} alone ({len(listening)} listening "
            f"socket(s), {len(listening & ours)} of them its own): not checking another server")  # fmt: skip


def stop_process_group(process, grace_s=10):
    """SIGTERM to the group a process leads (started with start_new_session), SIGKILL after grace_s."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def log_tail(path, lines=8):
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.rstrip().splitlines()[-lines:])


def hosts_entry(hosts_text, name):
    """The address that an /etc/hosts text gives `name`, or None."""
    for line in hosts_text.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2 and name in words[1:]:
            return words[0]
    return None


def ensure_tfb_database_host(log, hosts_file=HOSTS_FILE):
    """`tfb-database` must name this machine, as in TFB's Docker network: add it if need be."""
    text = Path(hosts_file).read_text()
    address = hosts_entry(text, "tfb-database")
    if address is None:
        if os.geteuid() != 0:
            raise SetupError(
                f"tfb-database is not in {hosts_file}, and only root may add it: run "
                f"`echo '127.0.0.1 tfb-database' | sudo tee -a {hosts_file}`, then this again"
            )
        with open(hosts_file, "a") as f:
            f.write(("" if not text or text.endswith("\n") else "\n") + "127.0.0.1 tfb-database\n")
        log(f"--- added the line '127.0.0.1 tfb-database' to {hosts_file} (running as root); it stays there")
    elif not address.startswith("127."):
        raise SetupError(
            f"{hosts_file} sends tfb-database to {address}, not to this machine: "
            "the servers would use another database; remove or fix that line"
        )


def ensure_installed(command, package):
    """The command, installed from Debian's package if missing and this runs as root."""
    install_unless(lambda: shutil.which(command), command, package)


def ensure_file_installed(path, package):
    """A file a package provides (an nginx module), installed as ensure_installed installs."""
    install_unless(lambda: os.path.exists(path), path, package)


def install_unless(present, what, package):
    """Debian's `package`, installed with apt-get unless `present()` (as root only)."""
    if present():
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SetupError(f"{what} is missing: install it (Debian: apt-get install -y {package})")
    print(f"{what} is missing: installing {package} with apt-get", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", package], check=True, env=env)
    if not present():
        raise SetupError(f"apt-get install {package} did not provide {what}")


def pg_sh(action, env=None, capture=True):
    """`scripts/pg.sh ACTION`, with `env` added to the environment; its output captured, or shown."""
    output = {"capture_output": True, "text": True} if capture else {}
    try:
        return subprocess.run(["bash", str(PG_SH), action], env=dict(os.environ, **(env or {})), timeout=900, **output)
    except subprocess.TimeoutExpired:
        raise SetupError(f"scripts/pg.sh {action} did not finish in 15 minutes") from None


def exit_on_sigterm(signum, frame):
    """A SIGTERM handler that unwinds like Ctrl-C: what a tool started is stopped on the way out."""
    raise SystemExit(128 + signum)
