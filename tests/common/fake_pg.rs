//! A scriptable fake PostgreSQL server for tests: the real server binary connects to it over
//! TCP (`env()` gives the PG* variables) and it speaks enough of the v3 protocol for gnosis:
//! start-up with AuthenticationOk or SASL SCRAM-SHA-256, ParameterStatus, BackendKeyData and
//! ReadyForQuery; Parse/Describe/Sync answered with ParseComplete, ParameterDescription and a
//! RowDescription of (int4, int4) for the world selects, (int4, text) for fortunes or NoData
//! for the update; Bind/Execute/Sync answered with BindComplete, DataRows (binary), and
//! CommandComplete and ReadyForQuery. A `Behaviour` makes every connection misbehave in one
//! way (the hostile ones misbehave on the fortunes query only, which the cache loader never
//! sends). Each connection is a thread with blocking sockets that looks at the stop flag every
//! 20 ms, so dropping the fake stops it within a bounded time.

use std::collections::HashMap;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use gnosis::pg::protocol::{script, INT4_OID, TEXT_OID};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

const TICK: Duration = Duration::from_millis(20);
/// Above this many iterations the fake does not verify the client's proof (it would take it
/// as long as the client): it answers the client-final message with a password failure.
const SCRAM_VERIFY_LIMIT: u32 = 100_000;
const SALT: &[u8] = b"gnosis-fake-salt";

pub const USER: &str = "fakeuser";
pub const PASSWORD: &str = "fakepass";

/// How every connection of the fake behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Trust authentication and correct answers.
    Normal,
    /// SASL SCRAM-SHA-256 with this iteration count, then correct answers.
    ScramIterations(u32),
    /// A good start-up (statements prepared), then a FATAL error on the first query and the
    /// connection closed, like a backend terminated by an administrator.
    FailFirstQuery,
    /// A good start-up (statements prepared), then silence: queries are read and never
    /// answered, and the connection is held open.
    StallAfterStartup,
    /// A good start-up; the first query gets its BindComplete, then a DataRow's tag and
    /// length and never its body; the connection is held open.
    DataRowHeaderOnly,
    /// Asks for the password in clear text (and checks it), then correct answers.
    Cleartext,
    /// Begins SASL SCRAM-SHA-256, then, once the client's first message is in, asks for the
    /// password in clear text: a downgrade by a machine in the middle.
    CleartextAfterSasl,
    /// The same downgrade to MD5.
    Md5AfterSasl,
    /// Fortunes are answered with a DataRow claiming 60 MiB, then zeros for as long as the
    /// client reads them.
    HugeMessage,
    /// Fortunes are answered with a million rows, for as long as the client reads them.
    RowFlood,
    /// Fortunes are answered with an ErrorResponse whose message holds a newline, a forged
    /// log line and a terminal escape sequence.
    ControlCharsInError,
}

/// The text of `Behaviour::ControlCharsInError`'s error message.
pub const FORGED_ERROR: &str = "fortune broke\ngnosis: all is well\x1b[2J\x1b[31m";

pub struct FakePg {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    behaviour: Behaviour,
    stop: AtomicBool,
    accepted: AtomicUsize,
    /// Bind messages received (queries started), over all connections.
    queries: AtomicUsize,
    /// Per statement name: how many connections sent a Parse for it.
    prepared: Mutex<HashMap<String, usize>>,
    sessions: Mutex<Vec<JoinHandle<()>>>,
    /// Per connection that has ended: every byte it sent during start-up (authentication
    /// included).
    startups: Mutex<Vec<Vec<u8>>>,
}

impl FakePg {
    pub fn start(behaviour: Behaviour) -> FakePg {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the fake PostgreSQL");
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            behaviour,
            stop: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            queries: AtomicUsize::new(0),
            prepared: Mutex::new(HashMap::new()),
            sessions: Mutex::new(Vec::new()),
            startups: Mutex::new(Vec::new()),
        });
        let acceptor = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("fake-pg-accept".into())
                .spawn(move || accept_loop(listener, &shared))
                .unwrap()
        };
        FakePg {
            port,
            shared,
            acceptor: Some(acceptor),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The PG* variables that point a server at the fake, over TCP.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("PGHOST", "127.0.0.1".to_string()),
            ("PGPORT", self.port.to_string()),
            ("PGUSER", USER.to_string()),
            ("PGPASSWORD", PASSWORD.to_string()),
            ("PGDATABASE", "hello_world".to_string()),
        ]
    }

    /// TCP connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Connections that got as far as preparing `statement` (gnosis's workers prepare
    /// "world", its cache loader "all_worlds").
    pub fn prepared(&self, statement: &str) -> usize {
        let prepared = self.shared.prepared.lock().unwrap();
        prepared.get(statement).copied().unwrap_or(0)
    }

    /// Per connection that has ended: what the client sent before its start-up ended.
    pub fn startups(&self) -> Vec<Vec<u8>> {
        self.shared.startups.lock().unwrap().clone()
    }

    /// Queries (Bind messages) received so far.
    pub fn queries(&self) -> usize {
        self.shared.queries.load(Ordering::SeqCst)
    }
}

impl Drop for FakePg {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        for session in std::mem::take(&mut *self.shared.sessions.lock().unwrap()) {
            let _ = session.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                shared.accepted.fetch_add(1, Ordering::SeqCst);
                let shared_for_session = shared.clone();
                let session = std::thread::Builder::new()
                    .name("fake-pg-session".into())
                    .spawn(move || {
                        let mut session = Session::new(stream, &shared_for_session);
                        // Any error ends the session: the socket closes when dropped.
                        let _ = session.run();
                        let recorded = std::mem::take(&mut session.recorded);
                        shared_for_session.startups.lock().unwrap().push(recorded);
                    })
                    .unwrap();
                let mut sessions = shared.sessions.lock().unwrap();
                sessions.retain(|s| !s.is_finished());
                sessions.push(session);
            }
            Err(err) if err.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(2))
            }
            Err(_) => {}
        }
    }
}

/// What a prepared statement returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `SELECT id, randomnumber FROM world [WHERE id = $1]`: (int4, int4).
    World,
    /// `SELECT id, message FROM fortune`: (int4, text).
    Fortunes,
    /// Anything else (the UPDATE): no rows.
    NoRows,
}

struct Statement {
    kind: Kind,
    param_types: Vec<u32>,
}

struct Session<'a> {
    stream: TcpStream,
    shared: &'a Shared,
    out: Vec<u8>,
    statements: HashMap<String, Statement>,
    /// The statement and first int4 parameter of the unnamed portal.
    portal: Option<(Kind, Option<i32>, bool)>,
    rng: u64,
    /// Start-up is over: bytes read are no longer recorded.
    started: bool,
    /// The bytes read until then.
    recorded: Vec<u8>,
}

/// Why a session ended early: the peer left, or the fake is being dropped.
fn ended() -> io::Error {
    io::Error::new(ErrorKind::ConnectionAborted, "session ended")
}

impl<'a> Session<'a> {
    fn new(stream: TcpStream, shared: &'a Shared) -> Session<'a> {
        let _ = stream.set_read_timeout(Some(TICK));
        let _ = stream.set_nodelay(true);
        Session {
            stream,
            shared,
            out: Vec::new(),
            statements: HashMap::new(),
            portal: None,
            started: false,
            recorded: Vec::new(),
            rng: 0x9e37_79b9_7f4a_7c15 ^ shared.accepted.load(Ordering::SeqCst) as u64,
        }
    }

    /// Reads exactly `buf.len()` bytes, looking at the stop flag between reads.
    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        let mut filled = 0;
        while filled < buf.len() {
            if self.shared.stop.load(Ordering::SeqCst) {
                return Err(ended());
            }
            match self.stream.read(&mut buf[filled..]) {
                Ok(0) => return Err(ended()),
                Ok(n) => {
                    if !self.started {
                        self.recorded.extend_from_slice(&buf[filled..filled + n]);
                    }
                    filled += n
                }
                Err(err)
                    if matches!(
                        err.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// One frontend message: its tag and body.
    fn message(&mut self) -> io::Result<(u8, Vec<u8>)> {
        let mut head = [0u8; 5];
        self.read_exact(&mut head)?;
        let len = u32::from_be_bytes(head[1..5].try_into().unwrap()) as usize;
        if !(4..=1 << 20).contains(&len) {
            return Err(io::Error::new(ErrorKind::InvalidData, "bad message length"));
        }
        let mut body = vec![0u8; len - 4];
        self.read_exact(&mut body)?;
        Ok((head[0], body))
    }

    fn flush(&mut self) -> io::Result<()> {
        let out = std::mem::take(&mut self.out);
        self.stream.write_all(&out)
    }

    /// Writes `out` then `more()` until `more` has nothing left, the peer stops reading for
    /// good (an error) or the fake stops; never blocks for longer than a tick at a time.
    fn flood(&mut self, mut more: impl FnMut(&mut Vec<u8>) -> bool) -> io::Result<()> {
        self.stream.set_write_timeout(Some(TICK))?;
        let mut out = std::mem::take(&mut self.out);
        let mut at = 0;
        loop {
            if at == out.len() {
                out.clear();
                at = 0;
                if !more(&mut out) {
                    return Ok(());
                }
            }
            if self.shared.stop.load(Ordering::SeqCst) {
                return Err(ended());
            }
            match self.stream.write(&out[at..]) {
                Ok(n) => at += n,
                Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(err) => return Err(err),
            }
        }
    }

    /// Reads and drops everything until the peer leaves or the fake stops: a hung server.
    fn stall(&mut self) -> io::Result<()> {
        let mut sink = [0u8; 4096];
        loop {
            self.read_exact(&mut sink[..1])?;
        }
    }

    fn run(&mut self) -> io::Result<()> {
        self.startup()?;
        let mut queries_seen = 0usize;
        loop {
            let (tag, body) = self.message()?;
            let mut r = Body::new(&body);
            match tag {
                b'P' => {
                    let name = r.cstr()?.to_string();
                    let sql = r.cstr()?.to_ascii_lowercase();
                    let count = r.u16()?;
                    let param_types = (0..count).map(|_| r.u32()).collect::<io::Result<_>>()?;
                    let kind = if sql.contains("update") {
                        Kind::NoRows
                    } else if sql.contains("fortune") {
                        Kind::Fortunes
                    } else if sql.contains("world") {
                        Kind::World
                    } else {
                        Kind::NoRows
                    };
                    *self
                        .shared
                        .prepared
                        .lock()
                        .unwrap()
                        .entry(name.clone())
                        .or_default() += 1;
                    self.statements
                        .insert(name, Statement { kind, param_types });
                    self.out.extend(script::parse_complete());
                }
                b'D' => {
                    let _what = r.u8()?;
                    let name = r.cstr()?;
                    let statement = self
                        .statements
                        .get(name)
                        .ok_or_else(|| io::Error::new(ErrorKind::InvalidData, "no statement"))?;
                    let params = script::parameter_description(&statement.param_types);
                    let kind = statement.kind;
                    self.out.extend(params);
                    match kind {
                        Kind::World => self
                            .out
                            .extend(script::row_description(&[INT4_OID, INT4_OID])),
                        Kind::Fortunes => self
                            .out
                            .extend(script::row_description(&[INT4_OID, TEXT_OID])),
                        Kind::NoRows => self.out.extend(script::no_data()),
                    }
                }
                b'B' => {
                    self.shared.queries.fetch_add(1, Ordering::SeqCst);
                    queries_seen += 1;
                    if queries_seen == 1 {
                        match self.shared.behaviour {
                            Behaviour::FailFirstQuery => {
                                self.flush()?;
                                self.out.extend(script::error(
                                    "FATAL",
                                    "57P01",
                                    "terminating connection due to administrator command",
                                ));
                                return self.flush();
                            }
                            Behaviour::StallAfterStartup => {
                                self.flush()?;
                                return self.stall();
                            }
                            _ => {}
                        }
                    }
                    let _portal = r.cstr()?;
                    let name = r.cstr()?.to_string();
                    let formats = r.u16()?;
                    for _ in 0..formats {
                        r.u16()?;
                    }
                    let params = r.u16()?;
                    let mut first_int4 = None;
                    for i in 0..params {
                        let len = r.u32()? as i32;
                        if len > 0 {
                            let value = r.bytes(len as usize)?;
                            if i == 0 && len == 4 {
                                first_int4 = Some(i32::from_be_bytes(value.try_into().unwrap()));
                            }
                        }
                    }
                    let kind = self
                        .statements
                        .get(&name)
                        .ok_or_else(|| io::Error::new(ErrorKind::InvalidData, "no statement"))?
                        .kind;
                    self.portal = Some((kind, first_int4, params > 0));
                    self.out.extend(script::bind_complete());
                }
                b'E' => {
                    if queries_seen == 1 && self.shared.behaviour == Behaviour::DataRowHeaderOnly {
                        // A two-column row's length, and nothing after it.
                        self.out.push(b'D');
                        self.out.extend_from_slice(&22u32.to_be_bytes());
                        self.flush()?;
                        return self.stall();
                    }
                    let (kind, id, has_params) = self
                        .portal
                        .take()
                        .ok_or_else(|| io::Error::new(ErrorKind::InvalidData, "no portal"))?;
                    if kind == Kind::Fortunes {
                        match self.shared.behaviour {
                            Behaviour::HugeMessage => {
                                let claimed = 60usize << 20;
                                self.out.push(b'D');
                                self.out.extend_from_slice(&(claimed as u32).to_be_bytes());
                                let mut left = claimed - 4;
                                self.flood(|out| {
                                    let n = left.min(64 << 10);
                                    out.resize(n, 0);
                                    left -= n;
                                    n > 0
                                })?;
                                return self.stall();
                            }
                            Behaviour::RowFlood => {
                                let mut batches = 1_000;
                                self.flood(|out| {
                                    for id in 1..=1_000i32 {
                                        out.extend(script::raw_row(&[
                                            Some(&id.to_be_bytes()),
                                            Some(b"flood"),
                                        ]));
                                    }
                                    batches -= 1;
                                    batches > 0
                                })?;
                                return self.stall();
                            }
                            Behaviour::ControlCharsInError => {
                                self.out
                                    .extend(script::error("ERROR", "XX000", FORGED_ERROR));
                                continue;
                            }
                            _ => {}
                        }
                    }
                    let rows = match kind {
                        Kind::World if has_params => {
                            let number = self.random_number();
                            self.out.extend(script::raw_row(&[
                                Some(&id.unwrap_or(1).to_be_bytes()),
                                Some(&number.to_be_bytes()),
                            ]));
                            1
                        }
                        Kind::World => {
                            for id in 1..=10_000i32 {
                                let number = self.random_number();
                                self.out.extend(script::raw_row(&[
                                    Some(&id.to_be_bytes()),
                                    Some(&number.to_be_bytes()),
                                ]));
                            }
                            10_000
                        }
                        Kind::Fortunes => {
                            for (id, message) in [
                                (1i32, "fortune: No such file or directory"),
                                (2, "A computer program does what you tell it to do, not what you want it to do."),
                            ] {
                                self.out.extend(script::raw_row(&[Some(&id.to_be_bytes()), Some(message.as_bytes())]));
                            }
                            2
                        }
                        Kind::NoRows => 0,
                    };
                    let tag = match kind {
                        Kind::NoRows => format!("UPDATE {rows}"),
                        _ => format!("SELECT {rows}"),
                    };
                    self.out.extend(script::command_complete(&tag));
                }
                b'C' => {
                    self.out.extend(script::message(b'3', &[]));
                }
                b'S' => {
                    self.out.extend(script::ready());
                    self.flush()?;
                }
                b'H' => self.flush()?,
                b'X' => return Ok(()),
                b'Q' => {
                    self.out.extend(script::error(
                        "ERROR",
                        "0A000",
                        "the fake takes no simple queries",
                    ));
                    self.out.extend(script::ready());
                    self.flush()?;
                }
                _ => {
                    self.out
                        .extend(script::error("FATAL", "08P01", "unexpected message"));
                    return self.flush();
                }
            }
        }
    }

    fn random_number(&mut self) -> i32 {
        // xorshift: any number in 1..=10000 will do.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % 10_000) as i32 + 1
    }

    /// The start-up packet (refusing SSL and GSS encryption), authentication, then the usual
    /// parameters and ReadyForQuery.
    fn startup(&mut self) -> io::Result<()> {
        loop {
            let mut head = [0u8; 8];
            self.read_exact(&mut head)?;
            let len = u32::from_be_bytes(head[0..4].try_into().unwrap()) as usize;
            let code = u32::from_be_bytes(head[4..8].try_into().unwrap());
            if !(8..=10_000).contains(&len) {
                return Err(io::Error::new(
                    ErrorKind::InvalidData,
                    "bad start-up length",
                ));
            }
            let mut rest = vec![0u8; len - 8];
            self.read_exact(&mut rest)?;
            match code {
                // SSLRequest, GSSENCRequest: not here.
                80_877_103 | 80_877_104 => self.stream.write_all(b"N")?,
                196_608 => break,
                _ => return Err(io::Error::new(ErrorKind::InvalidData, "unknown protocol")),
            }
        }
        match self.shared.behaviour {
            Behaviour::ScramIterations(iterations) => {
                let proven = self.scram(iterations)?;
                if !proven {
                    return Err(ended());
                }
            }
            Behaviour::Cleartext => self.cleartext()?,
            Behaviour::CleartextAfterSasl | Behaviour::Md5AfterSasl => {
                self.out.extend(script::auth_sasl(&["SCRAM-SHA-256"]));
                self.flush()?;
                self.message()?;
                if self.shared.behaviour == Behaviour::Md5AfterSasl {
                    self.out.extend(script::auth_md5([1, 2, 3, 4]));
                    self.flush()?;
                    self.message()?;
                    return Err(ended());
                }
                self.cleartext()?
            }
            _ => {}
        }
        self.started = true;
        self.out.extend(script::auth_ok());
        for (name, value) in [
            ("server_version", "15.0 (gnosis fake)"),
            ("server_encoding", "UTF8"),
            ("client_encoding", "UTF8"),
            ("DateStyle", "ISO, MDY"),
            ("integer_datetimes", "on"),
            ("standard_conforming_strings", "on"),
        ] {
            self.out.extend(script::parameter_status(name, value));
        }
        self.out.extend(script::backend_key_data());
        self.out.extend(script::ready());
        self.flush()
    }

    /// AuthenticationCleartextPassword, and the password checked.
    fn cleartext(&mut self) -> io::Result<()> {
        self.out.extend(script::auth_cleartext());
        self.flush()?;
        let (tag, body) = self.message()?;
        if tag != b'p' || body != format!("{PASSWORD}\0").as_bytes() {
            self.out.extend(script::error(
                "FATAL",
                "28P01",
                "password authentication failed",
            ));
            self.flush()?;
            return Err(ended());
        }
        Ok(())
    }

    /// SCRAM-SHA-256 (RFC 5802/7677) as PostgreSQL does it; returns false once it has
    /// answered with a password failure.
    fn scram(&mut self, iterations: u32) -> io::Result<bool> {
        self.out.extend(script::auth_sasl(&["SCRAM-SHA-256"]));
        self.flush()?;

        let (tag, body) = self.message()?;
        let mut r = Body::new(&body);
        if tag != b'p' || r.cstr()? != "SCRAM-SHA-256" {
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                "expected SASLInitialResponse",
            ));
        }
        let len = r.u32()? as usize;
        let client_first = std::str::from_utf8(r.bytes(len)?)
            .map_err(|_| io::Error::new(ErrorKind::InvalidData, "client-first not UTF-8"))?
            .to_string();
        let client_first_bare = client_first
            .strip_prefix("n,,")
            .ok_or_else(|| io::Error::new(ErrorKind::InvalidData, "channel binding asked"))?;
        let client_nonce = client_first_bare
            .split(',')
            .find_map(|attr| attr.strip_prefix("r="))
            .ok_or_else(|| io::Error::new(ErrorKind::InvalidData, "no client nonce"))?;
        let nonce = format!("{client_nonce}fakeServerNonce{}", self.random_number());
        let server_first = format!("r={nonce},s={},i={iterations}", BASE64.encode(SALT));
        self.out.extend(script::sasl_continue(&server_first));
        self.flush()?;

        let (tag, body) = self.message()?;
        if tag != b'p' {
            return Err(io::Error::new(
                ErrorKind::InvalidData,
                "expected SASLResponse",
            ));
        }
        let client_final = String::from_utf8(body)
            .map_err(|_| io::Error::new(ErrorKind::InvalidData, "client-final not UTF-8"))?;
        let (without_proof, proof) = client_final
            .rsplit_once(",p=")
            .ok_or_else(|| io::Error::new(ErrorKind::InvalidData, "no proof"))?;
        let password_failed = |out: &mut Vec<u8>| {
            out.extend(script::error(
                "FATAL",
                "28P01",
                &format!("password authentication failed for user \"{USER}\""),
            ))
        };
        if iterations > SCRAM_VERIFY_LIMIT {
            password_failed(&mut self.out);
            self.flush()?;
            return Ok(false);
        }
        let salted = hi(PASSWORD.as_bytes(), SALT, iterations);
        let client_key = hmac(&salted, b"Client Key");
        let stored_key: [u8; 32] = Sha256::digest(client_key).into();
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = hmac(&stored_key, auth_message.as_bytes());
        let expected: Vec<u8> = client_key
            .iter()
            .zip(signature)
            .map(|(a, b)| a ^ b)
            .collect();
        if BASE64.decode(proof).ok().as_deref() != Some(&expected[..])
            || !without_proof.contains(&format!("r={nonce}"))
        {
            password_failed(&mut self.out);
            self.flush()?;
            return Ok(false);
        }
        let server_key = hmac(&salted, b"Server Key");
        let server_signature = hmac(&server_key, auth_message.as_bytes());
        let server_final = format!("v={}", BASE64.encode(server_signature));
        self.out.extend(script::sasl_final(&server_final));
        Ok(true)
    }
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

/// PBKDF2-HMAC-SHA-256 with one block: SCRAM's Hi().
fn hi(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let keyed = HmacSha256::new_from_slice(password).expect("HMAC takes any key");
    let mut mac = keyed.clone();
    mac.update(salt);
    mac.update(&1u32.to_be_bytes());
    let mut u: [u8; 32] = mac.finalize().into_bytes().into();
    let mut result = u;
    for _ in 1..iterations {
        let mut mac = keyed.clone();
        mac.update(&u);
        u = mac.finalize().into_bytes().into();
        for (r, x) in result.iter_mut().zip(u) {
            *r ^= x;
        }
    }
    result
}

/// A cursor over a frontend message's body.
struct Body<'b> {
    bytes: &'b [u8],
}

impl<'b> Body<'b> {
    fn new(bytes: &'b [u8]) -> Body<'b> {
        Body { bytes }
    }

    fn short() -> io::Error {
        io::Error::new(ErrorKind::InvalidData, "message too short")
    }

    fn bytes(&mut self, n: usize) -> io::Result<&'b [u8]> {
        if self.bytes.len() < n {
            return Err(Self::short());
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u8(&mut self) -> io::Result<u8> {
        Ok(self.bytes(1)?[0])
    }

    fn u16(&mut self) -> io::Result<u16> {
        Ok(u16::from_be_bytes(self.bytes(2)?.try_into().unwrap()))
    }

    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_be_bytes(self.bytes(4)?.try_into().unwrap()))
    }

    fn cstr(&mut self) -> io::Result<&'b str> {
        let end = self
            .bytes
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(Self::short)?;
        let text = std::str::from_utf8(&self.bytes[..end])
            .map_err(|_| io::Error::new(ErrorKind::InvalidData, "not UTF-8"))?;
        self.bytes = &self.bytes[end + 1..];
        Ok(text)
    }
}
