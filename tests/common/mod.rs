//! The one scaffold of the integration test crates (tests/*/main.rs and tests/budget.rs):
//! start a real server binary on a free port and talk HTTP/1.1 to it over real sockets; a
//! private PostgreSQL cluster of a test's own (`cluster`), a fake server (`fake_pg`), a
//! fault-injecting proxy (`proxy`), and the client's own helpers (`pg`).
#![allow(dead_code)] // each test crate uses its own subset

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const LOAD_GENERATOR_HEADERS: &str = "Host: localhost\r\nAccept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7\r\nConnection: keep-alive\r\n";

/// Makes each listed `fn name(binary: &str)` a test of both servers: `$gnosis::name` runs
/// it against `gnosis`, `$gnosis_uring::name` against `gnosis-uring`.
#[macro_export]
macro_rules! test_both_binaries {
    ($gnosis:ident, $gnosis_uring:ident; $($test:ident),+ $(,)?) => {
        mod $gnosis {
            $(
                #[test]
                fn $test() {
                    super::$test(env!("CARGO_BIN_EXE_gnosis"))
                }
            )+
        }
        mod $gnosis_uring {
            $(
                #[test]
                fn $test() {
                    super::$test(env!("CARGO_BIN_EXE_gnosis-uring"))
                }
            )+
        }
    };
}

/// A server process that is killed when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    /// The h2c listener's port, and the TLS listener's (bound when there is a certificate):
    /// free ports too, so that parallel tests never meet on a default one.
    pub h2c_port: u16,
    pub tls_port: u16,
    pub h2_tls_port: u16,
    /// HTTP/3's UDP port (served when there is a certificate).
    pub h3_port: u16,
    /// The server's stderr, shown when the test fails.
    log: std::path::PathBuf,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A folder for a server's `STATIC_DIR` holding `big.bin`, 300 KiB (HttpArena's largest
/// static file is that size); removed when dropped.
pub struct BigFile {
    pub dir: std::path::PathBuf,
}

impl BigFile {
    pub const LEN: usize = 300 * 1024;

    pub fn new(name: &str) -> BigFile {
        let dir = std::env::temp_dir().join(format!("gnosis-big-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bytes: Vec<u8> = (0..Self::LEN).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.join("big.bin"), bytes).unwrap();
        BigFile { dir }
    }

    pub fn env(&self) -> (&'static str, String) {
        ("STATIC_DIR", self.dir.to_str().unwrap().to_string())
    }
}

impl Drop for BigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The ports of a server's listeners beside `--port`, each free.
pub struct OtherPorts {
    pub h2c: u16,
    pub tls: u16,
    pub h2_tls: u16,
    pub h3: u16,
}

impl OtherPorts {
    /// Free ports, apart from each other and from `taken` (two probes in a row may get the
    /// same port back, and a server given one port twice would share it between listeners).
    pub fn free_besides(taken: u16) -> OtherPorts {
        let mut ports = vec![taken];
        let mut next = || loop {
            let port = free_port();
            if !ports.contains(&port) {
                ports.push(port);
                return port;
            }
        };
        OtherPorts {
            h2c: next(),
            tls: next(),
            h2_tls: next(),
            h3: free_udp_port(),
        }
    }

    pub fn free() -> OtherPorts {
        Self::free_besides(0)
    }

    /// The options that name them.
    pub fn args(&self) -> Vec<String> {
        [
            ("--h2c-port", self.h2c),
            ("--tls-port", self.tls),
            ("--h2-tls-port", self.h2_tls),
            ("--h3-port", self.h3),
        ]
        .into_iter()
        .flat_map(|(flag, port)| [flag.to_string(), port.to_string()])
        .collect()
    }
}

impl Server {
    /// Starts `binary --port <free port> --threads 2 <extra>`, every other listener on a free
    /// port too (`extra` may name its own), and waits until it accepts.
    pub fn start(binary: &str, extra: &[&str]) -> Server {
        Self::start_with_env(binary, extra, &[])
    }

    /// Starts it with the test certificate (so TLS, HTTP/2 over TLS and HTTP/3 are served),
    /// `static_dir`'s files, no database, and `extra`.
    pub fn start_with_tls(binary: &str, static_dir: &BigFile, extra: &[&str]) -> Server {
        let pair = gnosis::transport::test_pair();
        let env = [
            ("TLS_CERT", pair.cert.to_str().unwrap().to_string()),
            ("TLS_KEY", pair.key.to_str().unwrap().to_string()),
            ("PGHOST", "/nonexistent-gnosis-test-database".to_string()),
            static_dir.env(),
        ];
        Self::start_with_env(binary, extra, &env)
    }

    pub fn start_with_env(binary: &str, extra: &[&str], env: &[(&str, String)]) -> Server {
        Self::start_full(binary, extra, env, None)
    }

    /// `start_with_env` with the server's open-files limit (soft and hard) set to
    /// `max_open_files`, so that running out of descriptors can be tested cheaply.
    pub fn start_with_open_files_limit(
        binary: &str,
        extra: &[&str],
        env: &[(&str, String)],
        max_open_files: u64,
    ) -> Server {
        Self::start_full(binary, extra, env, Some(max_open_files))
    }

    /// Starts the server on free ports; again on others while one of them was taken
    /// meanwhile (a free port is one of the ephemeral range, which any client's connection
    /// on this machine may take as its own).
    fn start_full(
        binary: &str,
        extra: &[&str],
        env: &[(&str, String)],
        max_open_files: Option<u64>,
    ) -> Server {
        for _ in 0..5 {
            match Self::try_start(binary, extra, env, max_open_files) {
                Ok(server) => return server,
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("{binary} exited at start-up:\n{log}"),
            }
        }
        panic!("{binary}: five sets of free ports were all taken before it listened");
    }

    /// The server once it listens, or its log if it exited first.
    fn try_start(
        binary: &str,
        extra: &[&str],
        env: &[(&str, String)],
        max_open_files: Option<u64>,
    ) -> Result<Server, String> {
        let port = free_port();
        let others = OtherPorts::free_besides(port);
        let log = std::env::temp_dir().join(format!("gnosis-test-{port}.log"));
        let mut command = Command::new(binary);
        command
            .args(["--port", &port.to_string(), "--threads", "2"])
            .args(others.args())
            .args(extra)
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("creating the server log"));
        if let Some(limit) = max_open_files {
            use std::os::unix::process::CommandExt;
            let limit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            // SAFETY: setrlimit is async-signal-safe and touches only the child.
            unsafe {
                command.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::last_os_error())
                    }
                });
            }
        }
        let child = command
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {binary}: {err}"));
        let mut server = Server {
            child,
            port,
            h2c_port: others.h2c,
            tls_port: others.tls,
            h2_tls_port: others.h2_tls,
            h3_port: others.h3,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        // Connected, and to this child: another process may hold the port (the free port
        // was taken meanwhile) or a connect may meet itself, and then this child exits.
        let pid = server.pid();
        while TcpStream::connect(("127.0.0.1", port)).is_err() || !listens_on(pid, port) {
            if let Some(status) = server.child.try_wait().unwrap() {
                return Err(format!("{status}\n{}", server.log()));
            }
            assert!(
                Instant::now() < deadline,
                "{binary} did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn connect(&self) -> Client {
        Client::connect(self.port)
    }

    /// The descriptors the server holds, counting also the connections on its port that it
    /// holds as io_uring direct descriptors (gnosis-uring's file table), which /proc/PID/fd
    /// does not list. A socket the process has let go of has inode 0 in /proc/net/tcp.
    pub fn held_descriptors(&self) -> usize {
        let fds = self.descriptors();
        fds.len() + direct_sockets(&tcp_sockets(), &fds, self.port).count()
    }

    /// The server's entries in /proc/PID/fd only, and what each points at.
    pub fn descriptors(&self) -> Vec<(u32, String)> {
        descriptor_targets(self.pid()).unwrap()
    }

    /// Waits until [`Server::held_descriptors`] has stayed the same for `quiet` (sampled
    /// every 50 ms) and returns it; panics after `within`.
    pub fn settled_descriptors(&self, quiet: Duration, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        let mut count = self.held_descriptors();
        let mut since = Instant::now();
        while since.elapsed() < quiet {
            assert!(
                Instant::now() < deadline,
                "the descriptor count of {} did not settle within {within:?}:\n{}",
                self.pid(),
                self.describe_descriptors()
            );
            std::thread::sleep(Duration::from_millis(50));
            let now = self.held_descriptors();
            if now != count {
                (count, since) = (now, Instant::now());
            }
        }
        count
    }

    /// What the server holds, one a line: each descriptor, and for TCP sockets their state
    /// and ports, then the connections on its port held as direct descriptors; to tell what
    /// lingers when a count is off.
    pub fn describe_descriptors(&self) -> String {
        let pid = self.pid();
        let Ok(fds) = descriptor_targets(pid) else {
            return format!("(no /proc/{pid}/fd)");
        };
        let tcp = tcp_sockets();
        let detail = |target: &str| {
            tcp.iter()
                .find(|socket| socket.target() == target)
                .map(TcpSocket::describe)
                .unwrap_or_default()
        };
        let mut lines: Vec<(u32, String)> = fds
            .iter()
            .map(|(fd, target)| (*fd, format!("{fd} -> {target}{}", detail(target))))
            .collect();
        lines.sort();
        lines
            .into_iter()
            .map(|(_, line)| line)
            .chain(
                direct_sockets(&tcp, &fds, self.port)
                    .map(|socket| format!("direct -> {}{}", socket.target(), socket.describe())),
            )
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits until each of `routes`, in turn, answers 200 on one keep-alive connection,
    /// polling every 50 ms; panics once `within` has passed for them all, or at once if the
    /// connection breaks (a server that drops it is not getting ready).
    pub fn wait_until_ok(&self, routes: &[&str], within: Duration) {
        let started = Instant::now();
        let mut client = self.connect();
        for route in routes {
            loop {
                let response = client.try_get(route).unwrap_or_else(|err| {
                    panic!("{route}: {err} after waiting {:?}", started.elapsed())
                });
                if response.status == 200 {
                    break;
                }
                assert!(
                    started.elapsed() < within,
                    "{route} did not answer 200 within {within:?}: still {} after {:?}",
                    response.status,
                    started.elapsed()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Sends `signal` to the server process.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child, which has not been reaped.
        assert_eq!(
            unsafe { libc::kill(self.child.id() as libc::pid_t, signal) },
            0
        );
    }

    /// How the process ended; panics if it has not within `within`.
    pub fn exit_status(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "still running after {within:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// What the server has written to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!("--- server log ({}) ---\n{log}", self.log.display());
        }
        let _ = std::fs::remove_file(&self.log);
    }
}

#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a UTF-8 body")
    }
}

pub struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Client::from_stream(stream)
    }

    pub fn from_stream(stream: TcpStream) -> Client {
        Client {
            reader: BufReader::new(stream),
        }
    }

    pub fn send(&mut self, raw: &[u8]) {
        self.reader.get_mut().write_all(raw).unwrap();
    }

    /// Sends a load-generator-style GET.
    pub fn get(&mut self, target: &str) -> HttpResponse {
        self.try_get(target).unwrap()
    }

    /// `get` that reports a broken connection instead of panicking.
    pub fn try_get(&mut self, target: &str) -> io::Result<HttpResponse> {
        self.reader
            .get_mut()
            .write_all(get_request(target).as_bytes())?;
        self.response()
    }

    /// Reads one response (framed by Content-Length).
    pub fn response(&mut self) -> io::Result<HttpResponse> {
        read_response(&mut self.reader)
    }

    /// True when the server closed the connection (EOF or reset) within `timeout`.
    pub fn is_closed_by_server(&mut self, timeout: Duration) -> bool {
        self.reader
            .get_ref()
            .set_read_timeout(Some(timeout))
            .unwrap();
        let mut byte = [0u8; 1];
        let result = self.reader.read(&mut byte);
        self.reader
            .get_ref()
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        match result {
            Ok(0) => true,
            Ok(_) => false,
            Err(err) => !matches!(
                err.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ),
        }
    }

    /// The next response's head, read byte by byte up to its blank line: for the answer to
    /// a HEAD, whose Content-Length announces a body that is not sent.
    pub fn raw_head(&mut self) -> String {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            self.stream().read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        String::from_utf8(head).unwrap()
    }

    pub fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }
}

/// Reads one response (framed by Content-Length, or a 204) from `reader`.
pub fn read_response(reader: &mut impl BufRead) -> io::Result<HttpResponse> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "closed before a response",
        ));
    }
    let mut parts = line.trim_end().splitn(3, ' ');
    assert_eq!(parts.next(), Some("HTTP/1.1"), "status line {line:?}");
    let status = parts
        .next()
        .and_then(|s| s.parse().ok())
        .expect("a status code");
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        assert!(
            line.ends_with("\r\n"),
            "header line {line:?} must end in CRLF"
        );
        if line == "\r\n" {
            break;
        }
        let (name, value) = line.trim_end().split_once(": ").expect("name: value");
        headers.push((name.to_ascii_lowercase(), value.to_string()));
    }
    // A 204 has no body, whatever its fields say (RFC 9112 6.3), and needs no length.
    let length: usize = match status {
        204 => 0,
        _ => headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map(|(_, v)| v.parse().expect("a numeric Content-Length"))
            .expect("a Content-Length header"),
    };
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

/// Raises this process's open-files soft limit to at least `needed`, failing the test
/// clearly when the hard limit does not allow it.
pub fn raise_open_files_limit(needed: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid rlimit to fill.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    assert!(
        limit.rlim_max >= needed,
        "the test needs {needed} open files, the hard limit is {} (raise it with ulimit -Hn)",
        limit.rlim_max
    );
    if limit.rlim_cur < needed {
        limit.rlim_cur = needed;
        // SAFETY: `limit` is a valid rlimit to read.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    }
}

pub fn get_request(target: &str) -> String {
    format!("GET {target} HTTP/1.1\r\n{LOAD_GENERATOR_HEADERS}\r\n")
}

/// Asserts the headers every TFB response needs.
pub fn assert_general_headers(response: &HttpResponse, content_type: &str) {
    assert_eq!(response.header("server"), Some("gnosis"));
    let date = response.header("date").expect("a Date header");
    httpdate::parse_http_date(date).unwrap_or_else(|_| panic!("Date {date:?} is not an HTTP date"));
    assert!(
        date.ends_with(" GMT") && date.len() == 29,
        "Date {date:?} is not IMF-fixdate"
    );
    assert_eq!(response.header("content-type"), Some(content_type));
    assert_eq!(
        response
            .header("content-length")
            .map(|v| v.parse::<usize>().unwrap()),
        Some(response.body.len())
    );
    assert!(response.header("transfer-encoding").is_none());
    assert!(response.header("content-encoding").is_none());
}

/// Makes closing `stream` send a reset (RST) instead of a FIN.
pub fn reset_on_close(stream: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and a linger value of the size given.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

pub mod cluster;
pub mod fake_pg;
pub mod h2;
pub mod pg;
pub mod proxy;
pub mod redis;
pub mod tls;

/// The CPU time (user + system) process `pid` has used, in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name may hold spaces: fields are counted after its closing parenthesis.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    // utime and stime are fields 14 and 15 of stat(5), 12 and 13 after the name and state.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks as f64 / per_second
}

/// Whether process `pid` holds a TCP socket listening on `port`.
pub fn listens_on(pid: u32, port: u16) -> bool {
    // None while the process is starting or already gone.
    let fds = descriptor_targets(pid).unwrap_or_default();
    tcp_sockets()
        .iter()
        .any(|socket| socket.state == LISTEN && socket.local_port == port && socket.held_in(&fds))
}

/// Process `pid`'s descriptors and what each points at (`socket:[inode]`, a path, ...).
fn descriptor_targets(pid: u32) -> io::Result<Vec<(u32, String)>> {
    let entries = std::fs::read_dir(format!("/proc/{pid}/fd"))?;
    Ok(entries
        .flatten()
        .map(|entry| {
            let fd = entry.file_name().to_string_lossy().parse().unwrap_or(0);
            let target = std::fs::read_link(entry.path())
                .map(|target| target.display().to_string())
                .unwrap_or_default();
            (fd, target)
        })
        .collect())
}

/// Of the TCP sockets `tcp`, those on local `port` that some process holds but not through
/// a descriptor of `fds`: the listeners and the connections are the server's, the clients'
/// sockets have other local ports.
fn direct_sockets<'a>(
    tcp: &'a [TcpSocket],
    fds: &'a [(u32, String)],
    port: u16,
) -> impl Iterator<Item = &'a TcpSocket> {
    tcp.iter().filter(move |socket| {
        socket.local_port == port && socket.inode != "0" && !socket.held_in(fds)
    })
}

const LISTEN: usize = 10;

/// One line of /proc/net/tcp or /proc/net/tcp6.
struct TcpSocket {
    state: usize,
    local_port: u16,
    remote_port: u16,
    inode: String,
}

impl TcpSocket {
    /// How /proc/PID/fd names this socket.
    fn target(&self) -> String {
        format!("socket:[{}]", self.inode)
    }

    /// Whether one of these descriptors is this socket.
    fn held_in(&self, fds: &[(u32, String)]) -> bool {
        let target = self.target();
        fds.iter().any(|(_, held)| *held == target)
    }

    fn describe(&self) -> String {
        const STATES: [&str; 12] = [
            "?",
            "ESTABLISHED",
            "SYN_SENT",
            "SYN_RECV",
            "FIN_WAIT1",
            "FIN_WAIT2",
            "TIME_WAIT",
            "CLOSE",
            "CLOSE_WAIT",
            "LAST_ACK",
            "LISTEN",
            "CLOSING",
        ];
        format!(
            " tcp {} local :{} remote :{}",
            STATES.get(self.state).unwrap_or(&"?"),
            self.local_port,
            self.remote_port
        )
    }
}

/// The TCP sockets of the machine, each once: /proc/net/tcp is read in chunks while other
/// sockets come and go, and a socket can then be listed twice (seen here under load: 5 of 54
/// reads), which made a server look as if it held more connections than it does.
fn tcp_sockets() -> Vec<TcpSocket> {
    let port = |address: &str| {
        address
            .rsplit(':')
            .next()
            .and_then(|hex| u16::from_str_radix(hex, 16).ok())
            .unwrap_or(0)
    };
    let mut seen = std::collections::HashSet::new();
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    Some(TcpSocket {
                        state: usize::from_str_radix(fields.get(3)?, 16).ok()?,
                        local_port: port(fields.get(1)?),
                        remote_port: port(fields.get(2)?),
                        inode: fields.get(9)?.to_string(),
                    })
                })
                .collect::<Vec<_>>()
        })
        .filter(|socket| socket.inode == "0" || seen.insert(socket.inode.clone()))
        .collect()
}

/// The resident set size of process `pid`.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches(" kB").parse().ok())
        .unwrap()
}
