//! A fault-injecting TCP proxy on 127.0.0.1 for tests: it forwards both ways between its
//! clients and one upstream address, and on command holds every connection open while
//! forwarding nothing (a hung peer), resets every connection, or resets new connections as
//! soon as they are accepted (a peer that is down). Std threads and real sockets; every loop
//! looks at its flags at least every 20 ms, so commands act at once and dropping the proxy
//! stops it within a bounded time.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_millis(20);

pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    upstream: SocketAddr,
    stop: AtomicBool,
    paused: AtomicBool,
    /// Only the upstream's replies are held.
    replies_held: AtomicBool,
    /// What clients sent upstream since recording started, while `recording`.
    recording: AtomicBool,
    recorded: Mutex<Vec<u8>>,
    refusing: AtomicBool,
    accepted: AtomicUsize,
    connections: Mutex<Vec<Connection>>,
}

/// Which way a pump copies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    ToUpstream,
    ToClient,
}

/// One proxied connection: both sockets (clones of the pumps' own) and the two pumps.
struct Connection {
    client: TcpStream,
    upstream: TcpStream,
    /// Set to make both pumps stop (and so close their sockets).
    done: Arc<AtomicBool>,
    pumps: Vec<JoinHandle<()>>,
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1 and forwards every connection to
    /// 127.0.0.1:`upstream_port`.
    pub fn start(upstream_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the proxy");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            upstream: SocketAddr::from(([127, 0, 0, 1], upstream_port)),
            stop: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            replies_held: AtomicBool::new(false),
            recording: AtomicBool::new(false),
            recorded: Mutex::new(Vec::new()),
            refusing: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            connections: Mutex::new(Vec::new()),
        });
        let acceptor = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("proxy-accept".into())
                .spawn(move || accept_loop(listener, &shared))
                .unwrap()
        };
        Proxy {
            port,
            shared,
            acceptor: Some(acceptor),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Holds every connection, present and future, open but forwards nothing either way (a
    /// silent, hung peer). New connections are still accepted and connected upstream.
    pub fn pause(&self) {
        self.shared.paused.store(true, Ordering::SeqCst);
    }

    /// Forwards again, starting with whatever the pause held back.
    /// Holds what the upstream sends (the clients' bytes still go through) and records what
    /// the clients send from now on, until [`Proxy::release_replies`].
    pub fn hold_replies_and_record(&self) {
        self.shared.recorded.lock().unwrap().clear();
        self.shared.recording.store(true, Ordering::SeqCst);
        self.shared.replies_held.store(true, Ordering::SeqCst);
    }

    /// What the clients sent since [`Proxy::hold_replies_and_record`].
    pub fn recorded(&self) -> Vec<u8> {
        self.shared.recorded.lock().unwrap().clone()
    }

    /// Lets the upstream's replies through again and stops recording.
    pub fn release_replies(&self) {
        self.shared.recording.store(false, Ordering::SeqCst);
        self.shared.replies_held.store(false, Ordering::SeqCst);
    }

    pub fn resume(&self) {
        self.shared.paused.store(false, Ordering::SeqCst);
    }

    /// While set, every new connection is reset (RST) as soon as it is accepted, as by a
    /// database that is down; existing connections are left alone (see `reset_all`).
    pub fn set_refusing(&self, refusing: bool) {
        self.shared.refusing.store(refusing, Ordering::SeqCst);
    }

    /// Resets (RST) every connection on both sides, and returns once they are closed.
    pub fn reset_all(&self) {
        let connections = std::mem::take(&mut *self.shared.connections.lock().unwrap());
        for connection in &connections {
            // With a zero linger time the last close sends RST instead of FIN; the pumps
            // hold the last descriptors and close them when they see `done`.
            super::reset_on_close(&connection.client);
            super::reset_on_close(&connection.upstream);
            connection.done.store(true, Ordering::SeqCst);
        }
        for connection in connections {
            drop((connection.client, connection.upstream));
            for pump in connection.pumps {
                let _ = pump.join();
            }
        }
    }

    /// Connections accepted since the start (including reset ones).
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections currently proxied (both sockets open).
    pub fn open(&self) -> usize {
        let mut connections = self.shared.connections.lock().unwrap();
        connections.retain(|c| {
            !c.done.load(Ordering::SeqCst) && !c.pumps.iter().all(JoinHandle::is_finished)
        });
        connections.len()
    }

    /// Waits until more than `count` connections have been accepted; false after `timeout`.
    pub fn wait_for_accepted(&self, count: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.accepted() <= count {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let connections = std::mem::take(&mut *self.shared.connections.lock().unwrap());
        for connection in &connections {
            connection.done.store(true, Ordering::SeqCst);
        }
        for connection in connections {
            for pump in connection.pumps {
                let _ = pump.join();
            }
        }
    }
}

fn accept_loop(listener: TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(err) if err.kind() == ErrorKind::WouldBlock => {
                // Forget connections whose both directions have ended, closing them.
                shared
                    .connections
                    .lock()
                    .unwrap()
                    .retain(|c| !c.pumps.iter().all(JoinHandle::is_finished));
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(_) => continue,
        };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        if shared.refusing.load(Ordering::SeqCst) {
            super::reset_on_close(&client);
            continue;
        }
        let upstream = match TcpStream::connect_timeout(&shared.upstream, Duration::from_secs(2)) {
            Ok(upstream) => upstream,
            Err(_) => {
                super::reset_on_close(&client);
                continue;
            }
        };
        let _ = client.set_nodelay(true);
        let _ = upstream.set_nodelay(true);
        let done = Arc::new(AtomicBool::new(false));
        let pumps = [
            (&client, &upstream, Direction::ToUpstream),
            (&upstream, &client, Direction::ToClient),
        ]
        .into_iter()
        .map(|(from, to, direction)| {
            let (from, to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
            let (shared, done) = (shared.clone(), done.clone());
            std::thread::Builder::new()
                .name("proxy-pump".into())
                .spawn(move || pump(from, to, direction, &shared, &done))
                .unwrap()
        })
        .collect();
        shared.connections.lock().unwrap().push(Connection {
            client,
            upstream,
            done,
            pumps,
        });
    }
}

/// Copies `from` to `to` until either side ends, a reset or the proxy's end; holds off while
/// the proxy is paused (or, for replies, held). An EOF is passed on as a half-close.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    direction: Direction,
    shared: &Shared,
    done: &AtomicBool,
) {
    let _ = from.set_read_timeout(Some(TICK));
    let _ = to.set_write_timeout(Some(TICK));
    let stopped = || done.load(Ordering::SeqCst) || shared.stop.load(Ordering::SeqCst);
    let holding = || {
        shared.paused.load(Ordering::SeqCst)
            || (direction == Direction::ToClient && shared.replies_held.load(Ordering::SeqCst))
    };
    let mut buf = vec![0u8; 64 * 1024];
    'pumping: while !stopped() {
        if holding() {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => n,
            Err(err) if is_timeout(&err) => continue,
            Err(_) => break,
        };
        if direction == Direction::ToUpstream && shared.recording.load(Ordering::SeqCst) {
            shared.recorded.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        let mut sent = 0;
        while sent < n {
            if stopped() {
                break 'pumping;
            }
            if holding() {
                // Paused mid-copy: hold the rest too.
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            match to.write(&buf[sent..n]) {
                Ok(0) => break 'pumping,
                Ok(k) => sent += k,
                Err(err) if is_timeout(&err) => {}
                Err(_) => break 'pumping,
            }
        }
    }
    // A broken side: break the other one too, unless a reset or the end already decides.
    if !stopped() {
        done.store(true, Ordering::SeqCst);
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    }
}

fn is_timeout(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}
