//! The machine without a database: a scripted server's bytes in, what the connection writes
//! and delivers out, and the clock moved by hand.

use super::failure::{BACKOFF_MAX, BACKOFF_MAX_PERMANENT, BACKOFF_MIN, MAX_REASONS_LOGGED};
use super::setup::LOGGED_ONCE;
use super::startup::REPREPARE_MIN;
use super::*;
use crate::pg::auth;
use crate::pg::protocol::script::{self, frontend};
use crate::pg::protocol::{
    EncodeError, Jsonb, Message, BOOL_OID, INT4_OID, INT8_OID, JSONB_OID, TEXT_OID,
};
use crate::pg::target::{Config, Host};
use proptest::prelude::*;
use std::io;
use std::time::Duration;

static STATEMENTS: &[Statement] = &[
    Statement {
        name: "pair",
        sql: "SELECT $1::int4, 2",
        param_types: &[INT4_OID],
    },
    Statement {
        name: "touch",
        sql: "UPDATE t SET x = 1",
        param_types: &[],
    },
];
static PAIR: &Statement = &STATEMENTS[0];
static TOUCH: &Statement = &STATEMENTS[1];

fn target(user: &str, password: &str) -> Arc<Target> {
    target_on(Host::Unix("/nonexistent".into()), user, password, false)
}

/// A Unix socket or a TCP address: nothing to resolve, no helper thread.
fn target_on(host: Host, user: &str, password: &str, allow_cleartext: bool) -> Arc<Target> {
    Target::new(Config {
        host,
        port: 5432,
        user: user.into(),
        password: password.into(),
        database: "hello_world".into(),
        allow_cleartext,
    })
}

fn refused() -> DbError {
    DbError::Io(io::Error::from_raw_os_error(libc::ECONNREFUSED).into())
}

/// A connection, the time it believes it is, and every event it delivered as text.
struct Script {
    conn: PgConn,
    now: Instant,
    events: Vec<(u64, String)>,
}

fn record(events: &mut Vec<(u64, String)>) -> impl Sink + '_ {
    |token, event| {
        let text = match event {
            Event::Row(row) => {
                let values: Vec<String> = (0..row.len())
                    .map(|i| row.int4(i).map_or("?".into(), |v| v.to_string()))
                    .collect();
                format!("row {}", values.join(","))
            }
            Event::Done => "done".into(),
            Event::Failed(error) => format!("failed {error}"),
        };
        events.push((token, text));
    }
}

impl Script {
    fn new(password: &str) -> Script {
        Script::with_options(password, Options::default())
    }

    fn with_options(password: &str, options: Options) -> Script {
        let now = Instant::now();
        Script {
            conn: PgConn::new(target("tester", password), STATEMENTS, options, now),
            now,
            events: Vec::new(),
        }
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
    }

    /// As a driver would: into the read buffer, a few KiB at a time.
    fn receive(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(MIN_READ_ROOM) {
            self.conn.read_buffer()[..chunk.len()].copy_from_slice(chunk);
            let events = &mut record(&mut self.events);
            self.conn.filled(chunk.len(), self.now, events);
        }
    }

    fn timer(&mut self) {
        self.conn.on_timer(self.now, &mut record(&mut self.events));
    }

    fn fail(&mut self, error: DbError) {
        self.conn
            .transport_failed(error, self.now, &mut record(&mut self.events));
    }

    fn query(&mut self, statement: &Statement, value: i32, token: u64) {
        let params = [Param::Int4(value)];
        let params = if std::ptr::eq(statement, PAIR) {
            &params[..]
        } else {
            &[]
        };
        self.conn.query(statement, params, token, self.now).unwrap();
    }

    fn output(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.conn.take_output(&mut out);
        out
    }

    fn take_events(&mut self) -> Vec<(u64, String)> {
        std::mem::take(&mut self.events)
    }

    /// Connect, connected: returns the StartupMessage's body.
    fn connect(&mut self) -> Vec<u8> {
        assert_eq!(self.conn.step(), Step::Connect);
        self.conn.connecting(self.now);
        assert_eq!(self.conn.step(), Step::Connecting);
        self.conn.connected(self.now);
        assert_eq!(self.conn.step(), Step::Io);
        let messages = frontend(&self.output(), true);
        assert_eq!(messages.len(), 1);
        messages[0].1.clone()
    }

    /// After authentication: the server's greeting, the Parse/Describe/Sync check, and the
    /// answers to them.
    fn finish_startup(&mut self) {
        let mut greeting = script::parameter_status("server_version", "17.0");
        greeting.extend(script::backend_key_data());
        greeting.extend(script::ready());
        self.receive(&greeting);
        assert!(!self.conn.is_ready());
        let tags: Vec<u8> = frontend(&self.output(), false)
            .iter()
            .map(|m| m.0)
            .collect();
        assert_eq!(tags, b"PDSPDS", "each statement in its own Sync group");
        let mut answers = described(&[INT4_OID], Some(&[INT4_OID, INT4_OID]));
        answers.extend(described(&[], None));
        self.receive(&answers);
        assert!(self.conn.is_ready());
        assert_eq!(self.conn.deadline(), None, "nothing to wait for");
    }

    /// Start-up with trust authentication.
    fn start(&mut self) {
        self.connect();
        self.receive(&script::auth_ok());
        self.finish_startup();
    }

    /// One query answered: proves the connection.
    fn prove(&mut self) {
        self.query(TOUCH, 0, 999);
        self.output();
        self.receive(&answer(&[]));
        assert_eq!(self.take_events(), [(999, "done".to_string())]);
    }

    /// Fails the attempt under way (refused) and returns the pause before the next one.
    fn refuse(&mut self) -> Duration {
        self.fail(refused());
        assert_eq!(self.conn.step(), Step::Idle);
        self.conn.deadline().unwrap() - self.now
    }

    /// Moves the clock to the next attempt and starts it.
    fn next_attempt(&mut self) {
        self.now = self.conn.deadline().unwrap();
        self.timer();
        assert_eq!(self.conn.step(), Step::Connect);
    }
}

/// The answer to one statement's Parse/Describe/Sync: its parameter and result types
/// (`None`: it returns no rows).
fn described(params: &[u32], columns: Option<&[u32]>) -> Vec<u8> {
    let mut bytes = script::parse_complete();
    bytes.extend(script::parameter_description(params));
    bytes.extend(columns.map_or_else(script::no_data, script::row_description));
    bytes.extend(script::ready());
    bytes
}

/// A query's answer: BindComplete, the rows, CommandComplete, ReadyForQuery.
fn answer(rows: &[&[i32]]) -> Vec<u8> {
    let mut bytes = script::bind_complete();
    for row in rows {
        bytes.extend(script::data_row(row));
    }
    bytes.extend(script::command_complete("SELECT 1"));
    bytes.extend(script::ready());
    bytes
}

fn cstrings(body: &[u8]) -> Vec<String> {
    body.split(|&b| b == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

#[test]
fn trust_start_up_then_parse_and_describe_every_statement_once() {
    let mut s = Script::new("unused");
    assert_eq!(s.conn.generation(), 0);
    let startup = s.connect();
    assert_eq!(&startup[..4], &196_608i32.to_be_bytes());
    let fields = cstrings(&startup[4..]);
    assert!(fields.windows(2).any(|w| w == ["user", "tester"]));
    assert!(fields.windows(2).any(|w| w == ["database", "hello_world"]));
    // The start-up deadline runs from `connecting`.
    assert_eq!(s.conn.deadline(), Some(s.now + DEFAULT_TIMEOUT));
    s.receive(&script::auth_ok());
    s.finish_startup();
    assert_eq!(s.conn.last_error().map(|e| e.to_string()), None);
}

#[test]
fn cleartext_password() {
    let mut s = Script::new("open sesame");
    s.connect();
    s.receive(&script::auth_cleartext());
    let messages = frontend(&s.output(), false);
    assert_eq!(messages, [(b'p', b"open sesame\0".to_vec())]);
    s.receive(&script::auth_ok());
    s.finish_startup();
}

/// A NUL in the password cannot be sent: the connection fails with an error retrying will
/// not fix, and writes no PasswordMessage.
#[test]
fn a_password_with_a_nul_fails_the_connection_unsent() {
    let mut s = Script::new("open\0sesame");
    s.connect();
    s.receive(&script::auth_cleartext());
    assert_eq!(s.output(), b"");
    assert_eq!(s.conn.step(), Step::Idle);
    let error = s.conn.last_error().unwrap();
    assert!(matches!(
        error,
        DbError::Encode(EncodeError::Nul("password"))
    ));
    assert!(error.is_permanent());
}

/// What a connection over TCP sends when asked for the password in clear, with the opt-in
/// or without it.
fn cleartext_over_tcp(allow_cleartext: bool) -> (Vec<(u8, Vec<u8>)>, Script) {
    let tcp = Host::Tcp("127.0.0.1".into());
    let mut s = Script::new("");
    s.conn = PgConn::new(
        target_on(tcp, "tester", "open sesame", allow_cleartext),
        STATEMENTS,
        Options::default(),
        s.now,
    );
    s.connect();
    s.receive(&script::auth_cleartext());
    (frontend(&s.output(), false), s)
}

#[test]
fn cleartext_over_tcp_only_with_the_opt_in() {
    let (sent, s) = cleartext_over_tcp(false);
    assert_eq!(sent, []);
    assert_eq!(s.conn.step(), Step::Idle);
    let error = s.conn.last_error().unwrap();
    assert!(
        matches!(error, DbError::Auth(_)) && error.is_permanent(),
        "{error}"
    );
    assert!(
        error.to_string().contains("GNOSIS_ALLOW_CLEARTEXT"),
        "{error}"
    );

    let (sent, _) = cleartext_over_tcp(true);
    assert_eq!(sent, [(b'p', b"open sesame\0".to_vec())]);
}

/// A server (or a machine in the middle) that begins SCRAM, then asks for the password in
/// clear or as MD5, or starts SASL again, gets nothing.
#[test]
fn no_cleartext_or_md5_once_sasl_has_begun() {
    for (downgrade, said) in [
        (script::auth_cleartext(), "after SCRAM-SHA-256 had begun"),
        (
            script::auth_md5([1, 2, 3, 4]),
            "after SCRAM-SHA-256 had begun",
        ),
        (script::auth_sasl(&["SCRAM-SHA-256"]), "began SASL twice"),
    ] {
        let mut s = Script::new("pencil");
        scram_until_server_first(&mut s, b"downgrade", 4096);
        s.receive(&downgrade);
        assert_eq!(s.output(), b"");
        assert_eq!(s.conn.step(), Step::Idle);
        let error = s.conn.last_error().unwrap().to_string();
        assert!(error.contains(said), "{error}");
    }
}

#[test]
fn md5_password() {
    let mut s = Script::new("secret");
    s.connect();
    s.receive(&script::auth_md5([1, 2, 3, 4]));
    let expected = auth::md5_password("tester", "secret", [1, 2, 3, 4]);
    let messages = frontend(&s.output(), false);
    assert_eq!(messages, [(b'p', format!("{expected}\0").into_bytes())]);
    s.receive(&script::auth_ok());
    s.finish_startup();
}

/// Plays SCRAM's server up to the server-first message; returns (client-first,
/// server-first).
fn scram_until_server_first(s: &mut Script, salt: &[u8], iterations: u32) -> (String, String) {
    s.connect();
    s.receive(&script::auth_sasl(&["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"]));
    let messages = frontend(&s.output(), false);
    let [(b'p', body)] = &messages[..] else {
        panic!("{messages:?}")
    };
    let mechanism_end = body.iter().position(|&b| b == 0).unwrap();
    assert_eq!(&body[..mechanism_end], b"SCRAM-SHA-256");
    let client_first = String::from_utf8(body[mechanism_end + 5..].to_vec()).unwrap();
    let nonce = client_first.split("r=").nth(1).unwrap();
    let salt = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, salt);
    let server_first = format!("r={nonce}server-part,s={salt},i={iterations}");
    (client_first, server_first)
}

#[test]
fn scram_key_is_derived_off_the_callers_thread_then_the_exchange_completes() {
    let salt = b"scram_key_is_derived_off_thread";
    let mut s = Script::new("pencil");
    let began = s.now;
    let (client_first, server_first) = scram_until_server_first(&mut s, salt, 4096);
    s.receive(&script::sasl_continue(&server_first));
    // Nothing derived on this thread: no answer yet, and a poll a few ms away.
    assert!(!s.conn.has_output());
    let poll = s.conn.deadline().unwrap();
    assert!(
        poll <= s.now + Duration::from_millis(10),
        "{:?}",
        poll - s.now
    );
    let started = Instant::now();
    while !s.conn.has_output() {
        assert!(started.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(2));
        s.now = s.conn.deadline().unwrap();
        s.timer();
    }
    let messages = frontend(&s.output(), false);
    let client_final = String::from_utf8(messages[0].1.clone()).unwrap();
    let server_final = auth::scram_server_final(
        "pencil",
        salt,
        4096,
        &client_first,
        &server_first,
        &client_final,
    )
    .unwrap();
    // The poll is over; the start-up deadline still holds.
    assert_eq!(s.conn.deadline(), Some(began + DEFAULT_TIMEOUT));
    s.receive(&script::sasl_final(&server_final));
    s.receive(&script::auth_ok());
    s.finish_startup();
}

#[test]
fn scram_with_the_wrong_server_signature_is_refused_for_good() {
    let salt = b"scram_wrong_server_signature";
    let mut s = Script::new("pencil");
    let (_, server_first) = scram_until_server_first(&mut s, salt, 4096);
    s.receive(&script::sasl_continue(&server_first));
    while !s.conn.has_output() {
        std::thread::sleep(Duration::from_millis(2));
        s.now = s.conn.deadline().unwrap();
        s.timer();
    }
    s.output();
    s.receive(&script::sasl_final(
        "v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    ));
    assert_eq!(s.conn.step(), Step::Idle);
    let error = s.conn.last_error().unwrap();
    assert!(
        matches!(error, DbError::Auth(_)) && error.is_permanent(),
        "{error}"
    );
}

#[test]
fn scram_iterations_over_the_cap_are_refused_without_deriving_anything() {
    let mut s = Script::new("pencil");
    let (_, server_first) = scram_until_server_first(&mut s, b"too-many", 10_000_000);
    let started = Instant::now();
    s.receive(&script::sasl_continue(&server_first));
    assert!(started.elapsed() < Duration::from_millis(100));
    assert_eq!(s.conn.step(), Step::Idle);
    let error = s.conn.last_error().unwrap();
    let text = error.to_string();
    assert!(
        text.contains("10000000") && text.contains("1000000"),
        "{text}"
    );
    assert!(matches!(error, DbError::Auth(_)) && error.is_permanent());
}

/// A statement is known by reference: one of another list, even with the same name and
/// text, is refused with nothing written, and the connection carries on.
#[test]
fn a_statement_the_connection_did_not_prepare_is_refused() {
    static OTHER: Statement = Statement {
        name: "pair",
        sql: "SELECT $1::int4, 2",
        param_types: &[INT4_OID],
    };
    let mut s = Script::new("");
    s.start();
    assert_eq!(
        s.conn.query(&OTHER, &[Param::Int4(1)], 7, s.now),
        Err(QueryError::NotPrepared("pair"))
    );
    assert_eq!(s.output(), b"");
    assert_eq!(s.conn.queued(), 0);
    s.prove();
}

/// Start-up up to the Parse/Describe/Sync groups, which the server answers with `answers`.
fn start_answering(s: &mut Script, answers: &[u8]) {
    s.connect();
    s.receive(&script::auth_ok());
    s.receive(&script::ready());
    s.output();
    s.receive(answers);
}

/// The answer to a statement's group when the database lacks its table.
fn undefined_table(table: &str) -> Vec<u8> {
    let mut bytes = script::error(
        "ERROR",
        "42P01",
        &format!("relation \"{table}\" does not exist"),
    );
    bytes.extend(script::ready());
    bytes
}

/// A database without the table of one statement (its Parse refused with 42P01, the server
/// skipping to that group's Sync): the connection becomes ready with the other statement, a
/// query on the missing one is refused at once with nothing written, and the line that says
/// so is logged once, however many connections and reconnects find it.
#[test]
fn a_statement_the_database_cannot_prepare_is_unavailable_and_the_others_serve() {
    let table = "table_only_this_test_lacks";
    let mut answers = described(&[INT4_OID], Some(&[INT4_OID, INT4_OID]));
    answers.extend(undefined_table(table));
    let logged = || {
        LOGGED_ONCE
            .lock()
            .unwrap()
            .iter()
            .filter(|line| line.contains(table))
            .cloned()
            .collect::<Vec<_>>()
    };
    let mut s = Script::new("");
    start_answering(&mut s, &answers);
    assert!(s.conn.is_ready());
    assert_eq!(s.conn.last_error().map(ToString::to_string), None);
    assert_eq!(
        s.conn.query(TOUCH, &[], 7, s.now),
        Err(QueryError::Unavailable("touch"))
    );
    assert_eq!(s.output(), b"");
    assert_eq!(s.conn.queued(), 0);
    s.query(PAIR, 5, 8);
    s.output();
    s.receive(&answer(&[&[5, 2]]));
    assert_eq!(
        s.take_events(),
        [(8, "row 5,2".to_string()), (8, "done".to_string())]
    );
    let lines = logged();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(&format!("touch (relation \"{table}\" does not exist)")),
        "{lines:?}"
    );
    assert!(!lines[0].contains("pair"), "{lines:?}");

    // The same connection again after a loss, and another connection: nothing new logged.
    s.fail(refused());
    s.next_attempt();
    start_answering(&mut s, &answers);
    assert!(s.conn.is_ready());
    let mut other = Script::new("");
    start_answering(&mut other, &answers);
    assert!(other.conn.is_ready());
    assert_eq!(logged(), lines);
}

/// A statement found unavailable is prepared again after `REPREPARE_MIN`, queued behind the
/// queries in flight like one of them; refused again, the pause doubles; once its table is
/// there (a schema loaded after the server started) it serves, and nothing is tried again.
#[test]
fn an_unavailable_statement_is_prepared_again_until_its_table_is_there() {
    let mut answers = described(&[INT4_OID], Some(&[INT4_OID, INT4_OID]));
    answers.extend(undefined_table("t"));
    let mut s = Script::new("");
    start_answering(&mut s, &answers);
    assert_eq!(s.conn.deadline(), Some(s.now + REPREPARE_MIN));
    s.query(PAIR, 1, 1);
    s.output();

    s.advance(REPREPARE_MIN);
    s.timer();
    let tags: Vec<u8> = frontend(&s.output(), false)
        .iter()
        .map(|(tag, _)| *tag)
        .collect();
    assert_eq!(
        tags, b"PDS",
        "a Parse, a Describe and a Sync for touch alone"
    );
    assert_eq!(s.conn.queued(), 2);
    // The query before it is answered first, to its own token; then the refusal.
    s.receive(&answer(&[&[1, 2]]));
    s.receive(&undefined_table("t"));
    assert_eq!(
        s.take_events(),
        [(1, "row 1,2".to_string()), (1, "done".to_string())]
    );
    assert!(s.conn.is_ready());
    assert_eq!(
        s.conn.query(TOUCH, &[], 2, s.now),
        Err(QueryError::Unavailable("touch"))
    );
    assert_eq!(s.conn.deadline(), Some(s.now + 2 * REPREPARE_MIN));

    s.advance(2 * REPREPARE_MIN);
    s.timer();
    assert_eq!(frontend(&s.output(), false).len(), 3);
    s.receive(&described(&[], None));
    assert_eq!(s.conn.deadline(), None, "nothing left to prepare");
    s.query(TOUCH, 0, 3);
    s.output();
    let mut updated = script::bind_complete();
    updated.extend(script::command_complete("UPDATE 1"));
    updated.extend(script::ready());
    s.receive(&updated);
    assert_eq!(s.take_events(), [(3, "done".to_string())]);
}

/// A lost connection forgets a preparation under way: the next start-up prepares afresh.
#[test]
fn a_preparation_again_under_way_is_dropped_with_the_connection() {
    let mut answers = described(&[INT4_OID], Some(&[INT4_OID, INT4_OID]));
    answers.extend(undefined_table("t"));
    let mut s = Script::new("");
    start_answering(&mut s, &answers);
    s.advance(REPREPARE_MIN);
    s.timer();
    s.output();
    s.fail(refused());
    assert_eq!(s.conn.queued(), 0);
    assert!(s.take_events().is_empty(), "no token to fail");
    s.next_attempt();
    let mut answers = described(&[INT4_OID], Some(&[INT4_OID, INT4_OID]));
    answers.extend(described(&[], None));
    start_answering(&mut s, &answers);
    assert!(s.conn.is_ready());
    assert_eq!(s.conn.deadline(), None);
    s.query(TOUCH, 0, 4);
}

/// While preparing, an error that is not about what the database has (here, out of memory)
/// fails the start-up as before, and so does a group that ends without a description or an
/// error (a broken server); the next attempt is scheduled.
#[test]
fn other_preparation_failures_fail_the_start_up() {
    let mut out_of_memory = script::error("ERROR", "53200", "out of memory");
    out_of_memory.extend(script::ready());
    let mut undescribed = script::parse_complete();
    undescribed.extend(script::ready());
    for (answers, expected) in [
        (out_of_memory, "preparing statement pair: out of memory"),
        (undescribed, "no description of statement pair"),
    ] {
        let mut s = Script::new("");
        start_answering(&mut s, &answers);
        assert_eq!(s.conn.step(), Step::Idle);
        let error = s.conn.last_error().unwrap().to_string();
        assert!(error.contains(expected), "{error}");
    }
}

#[test]
fn pipelined_queries_are_answered_in_order_and_an_error_fails_only_its_query() {
    let mut s = Script::new("");
    s.start();
    for (token, value) in [(10, 1), (11, 0), (12, 3)] {
        s.query(PAIR, value, token);
    }
    assert_eq!(s.conn.queued(), 3);
    let tags: Vec<u8> = frontend(&s.output(), false).iter().map(|m| m.0).collect();
    assert_eq!(tags, b"BESBESBES", "each query its own Bind/Execute/Sync");
    let mut bytes = answer(&[&[1, 2]]);
    bytes.extend(script::bind_complete());
    bytes.extend(script::error("ERROR", "22012", "division by zero"));
    bytes.extend(script::ready());
    bytes.extend(script::notice("just so you know"));
    bytes.extend(answer(&[&[3, 2]]));
    // Cut anywhere, the answers come out the same.
    for piece in bytes.chunks(7) {
        s.receive(piece);
    }
    assert_eq!(
        s.take_events(),
        [
            (10, "row 1,2".to_string()),
            (10, "done".to_string()),
            (11, "failed ERROR 22012: division by zero".to_string()),
            (12, "row 3,2".to_string()),
            (12, "done".to_string()),
        ]
    );
    assert!(s.conn.is_ready());
    assert_eq!(s.conn.queued(), 0);
}

/// The floors of the receive low-water mark never ask for more bytes than are sure to come,
/// before the oldest request is answered and in all, wherever the answers are cut, even when
/// they are the least there can be (no row, a Bind refused with an error).
#[test]
fn the_low_water_floors_never_exceed_what_is_owed() {
    let mut s = Script::new("");
    s.start();
    assert_eq!(s.conn.read_low_water(), None, "nothing awaited: no mark");
    for token in [7, 7, 7, 8] {
        s.query(PAIR, 1, token);
    }
    s.output();
    let empty = || {
        let tag = script::command_complete("SELECT 0");
        [script::bind_complete(), tag, script::ready()].concat()
    };
    let refused = [script::error("ERROR", "22P02", ""), script::ready()].concat();
    let first = [empty(), refused, empty()].concat();
    let all = [first.clone(), empty()].concat();
    let floors = s.conn.read_low_water().expect("request 7 is awaited");
    assert!(
        floors.request > first.len() / 2,
        "the mark is worth having: {floors:?} for {} bytes",
        first.len()
    );
    for (i, byte) in all.iter().enumerate() {
        let floors = s.conn.read_low_water().expect("awaited");
        let owed_first = first.len().saturating_sub(i);
        if owed_first > 0 {
            assert!(
                floors.request <= owed_first,
                "{floors:?}, {owed_first} owed"
            );
        }
        assert!(
            floors.owed <= all.len() - i,
            "{floors:?}, {} owed",
            all.len() - i
        );
        s.receive(&[*byte]);
    }
    assert_eq!(s.take_events().len(), 4, "every query answered");
    assert_eq!(s.conn.read_low_water(), None);
}

#[test]
fn a_fatal_error_loses_every_query_and_the_connection() {
    let mut s = Script::new("");
    s.start();
    let generation = s.conn.generation();
    for token in 0..3 {
        s.query(PAIR, 1, token);
    }
    s.receive(&script::error(
        "FATAL",
        "57P01",
        "terminating connection due to administrator command",
    ));
    let events = s.take_events();
    assert_eq!(events.len(), 3);
    assert!(events
        .iter()
        .all(|(_, e)| e == "failed connection to the database lost"));
    assert_eq!(s.conn.step(), Step::Idle);
    assert_ne!(s.conn.generation(), generation);
    assert!(matches!(s.conn.last_error(), Some(DbError::Server { code, .. }) if code == "57P01"));
    assert_eq!(
        s.conn.query(PAIR, &[Param::Int4(1)], 9, s.now),
        Err(QueryError::NotConnected)
    );
}

#[test]
fn the_oldest_querys_deadline_fails_every_query_held_with_timeout() {
    let mut s = Script::new("");
    s.start();
    s.query(PAIR, 1, 1);
    s.advance(Duration::from_secs(1));
    s.query(PAIR, 2, 2);
    let first_deadline = s.now - Duration::from_secs(1) + DEFAULT_TIMEOUT;
    assert_eq!(s.conn.deadline(), Some(first_deadline));
    s.now = first_deadline - Duration::from_millis(1);
    s.timer();
    assert!(s.take_events().is_empty());
    let generation = s.conn.generation();
    s.now = first_deadline;
    s.timer();
    assert_eq!(
        s.take_events(),
        [
            (1, "failed timed out".to_string()),
            (2, "failed timed out".to_string()),
        ]
    );
    assert_eq!(s.conn.step(), Step::Idle);
    assert_ne!(s.conn.generation(), generation);
    // Replaced: the next attempt is scheduled.
    assert!(s.conn.deadline().is_some_and(|at| at > s.now));
}

#[test]
fn a_row_header_without_its_body_is_caught_by_the_querys_deadline() {
    let mut s = Script::new("");
    s.start();
    s.query(PAIR, 1, 7);
    let row = script::data_row(&[1, 2]);
    s.receive(&script::bind_complete());
    s.receive(&row[..6]);
    assert!(s.take_events().is_empty());
    s.advance(DEFAULT_TIMEOUT);
    s.timer();
    assert_eq!(s.take_events(), [(7, "failed timed out".to_string())]);
    assert_eq!(s.conn.step(), Step::Idle);
}

#[test]
fn the_start_up_deadline_covers_connect_and_a_silent_server() {
    // The connect never finishes.
    let mut s = Script::new("");
    s.conn.connecting(s.now);
    s.advance(DEFAULT_TIMEOUT - Duration::from_millis(1));
    s.timer();
    assert_eq!(s.conn.step(), Step::Connecting);
    s.advance(Duration::from_millis(1));
    s.timer();
    assert_eq!(s.conn.step(), Step::Idle);
    assert!(matches!(s.conn.last_error(), Some(DbError::Timeout)));

    // Connected, but the server never answers the StartupMessage: the same deadline.
    let mut s = Script::new("");
    s.connect();
    s.advance(DEFAULT_TIMEOUT);
    s.timer();
    assert_eq!(s.conn.step(), Step::Idle);
    assert!(matches!(s.conn.last_error(), Some(DbError::Timeout)));
}

#[test]
fn backoff_doubles_with_jitter_to_its_cap_and_resets_only_once_a_query_is_answered() {
    let mut s = Script::new("");
    let within = |pause: Duration, base: Duration| {
        let (low, high) = (base.mul_f64(0.8), base.mul_f64(1.2));
        assert!(
            low <= pause && pause <= high,
            "{pause:?} not within {low:?}..{high:?}"
        );
    };
    let mut base = BACKOFF_MIN;
    for _ in 0..8 {
        s.conn.connecting(s.now);
        within(s.refuse(), base);
        base = (base * 2).min(BACKOFF_MAX);
        s.next_attempt();
    }
    assert_eq!(base, BACKOFF_MAX);
    // A good start-up alone does not reset it: the server may fail every query.
    s.start();
    s.fail(DbError::closed());
    within(s.conn.deadline().unwrap() - s.now, BACKOFF_MAX);
    s.next_attempt();
    s.start();
    s.prove();
    s.fail(DbError::closed());
    within(s.conn.deadline().unwrap() - s.now, BACKOFF_MIN);
}

#[test]
fn jitter_spreads_pauses_over_plus_minus_twenty_percent() {
    let mut backoff = Backoff::new();
    let pauses: Vec<Duration> = (0..2000)
        .map(|_| {
            backoff.reset();
            backoff.next(false)
        })
        .collect();
    let (low, high) = (BACKOFF_MIN.mul_f64(0.8), BACKOFF_MIN.mul_f64(1.2));
    assert!(pauses.iter().all(|p| (low..=high).contains(p)));
    // Not all the same: some in each fifth of the range.
    for fifth in 0..5 {
        let from = low + (high - low) * fifth / 5;
        let to = low + (high - low) * (fifth + 1) / 5;
        assert!(pauses.iter().any(|p| (from..=to).contains(p)), "{fifth}");
    }
    // Permanent errors allow a longer cap.
    let mut backoff = Backoff::new();
    let longest = (0..20).map(|_| backoff.next(true)).max().unwrap();
    assert!(longest >= BACKOFF_MAX_PERMANENT.mul_f64(0.8) && longest > BACKOFF_MAX * 2);
}

#[test]
fn wanted_brings_the_next_attempt_forward_but_never_within_100ms_of_the_last() {
    let mut s = Script::new("");
    // Grow the backoff: each attempt refused.
    for _ in 0..6 {
        s.conn.connecting(s.now);
        s.refuse();
        s.next_attempt();
    }
    let attempt = s.now;
    s.conn.connecting(s.now);
    let pause = s.refuse();
    assert!(pause > Duration::from_millis(500));
    s.advance(Duration::from_millis(10));
    s.conn.wanted();
    assert_eq!(s.conn.deadline(), Some(attempt + MIN_ATTEMPT_GAP));
    s.next_attempt();

    // Much later than 100 ms after the last attempt: at once.
    let attempt = s.now;
    s.conn.connecting(s.now);
    s.refuse();
    s.advance(Duration::from_millis(300));
    s.conn.wanted();
    assert_eq!(s.conn.deadline(), Some(attempt + MIN_ATTEMPT_GAP));
    s.timer();
    assert_eq!(s.conn.step(), Step::Connect);

    // A pause shorter than the gap is left alone.
    let mut s = Script::new("");
    let attempt = s.now;
    s.conn.connecting(s.now);
    let pause = s.refuse();
    assert!(pause < MIN_ATTEMPT_GAP);
    s.conn.wanted();
    assert_eq!(s.conn.deadline(), Some(attempt + pause));
}

#[test]
fn wanted_does_not_hurry_after_a_permanent_error_or_a_lost_connection() {
    let mut s = Script::new("");
    s.connect();
    s.receive(&script::error(
        "FATAL",
        "28P01",
        "password authentication failed for user \"tester\"",
    ));
    let retry = s.conn.deadline();
    s.conn.wanted();
    assert_eq!(s.conn.deadline(), retry);

    let mut s = Script::new("");
    s.start();
    s.fail(DbError::closed());
    let retry = s.conn.deadline();
    s.conn.wanted();
    assert_eq!(s.conn.deadline(), retry);

    // A server refusing during start-up because it is starting: hurried.
    let mut s = Script::new("");
    for _ in 0..4 {
        s.conn.connecting(s.now);
        s.refuse();
        s.next_attempt();
    }
    let attempt = s.now;
    s.connect();
    s.receive(&script::error(
        "FATAL",
        "57P03",
        "the database system is starting up",
    ));
    s.conn.wanted();
    assert_eq!(s.conn.deadline(), Some(attempt + MIN_ATTEMPT_GAP));
}

#[test]
fn park_gives_the_connection_up_until_unpark() {
    let mut s = Script::new("");
    s.start();
    s.query(PAIR, 1, 5);
    s.output();
    let generation = s.conn.generation();
    s.conn.park(&mut record(&mut s.events));
    assert_eq!(
        s.take_events(),
        [(5, "failed connection to the database lost".to_string())]
    );
    assert!(s.conn.is_parked());
    assert_eq!(s.conn.step(), Step::Idle);
    assert_ne!(s.conn.generation(), generation);
    assert_eq!(s.conn.deadline(), None);
    // A goodbye for the driver to send before closing.
    assert_eq!(frontend(&s.output(), false), [(b'X', Vec::new())]);
    s.advance(Duration::from_secs(60));
    s.timer();
    s.conn.wanted();
    assert_eq!(s.conn.step(), Step::Idle);
    s.conn.unpark(s.now);
    assert!(!s.conn.is_parked());
    s.start();
}

#[test]
fn goodbye_only_on_a_connected_socket() {
    let mut s = Script::new("");
    s.conn.goodbye();
    assert!(!s.conn.has_output());
    s.start();
    s.conn.goodbye();
    assert_eq!(frontend(&s.output(), false), [(b'X', Vec::new())]);
}

#[test]
fn take_output_swaps_into_an_empty_buffer_and_appends_to_a_full_one() {
    let mut s = Script::new("");
    s.start();
    s.query(TOUCH, 0, 1);
    let mut out = Vec::with_capacity(1 << 20);
    let spare = out.as_ptr();
    s.conn.take_output(&mut out);
    assert!(!s.conn.has_output());
    assert_ne!(out.as_ptr(), spare, "swapped, not copied");
    let first = out.len();
    s.query(TOUCH, 0, 2);
    s.conn.take_output(&mut out);
    assert_eq!(out.len(), 2 * first);
}

#[test]
fn a_message_larger_than_the_read_buffer_is_received_whole() {
    let options = Options {
        max_message_len: 1 << 20,
        ..Options::default()
    };
    let mut s = Script::with_options("", options);
    s.start();
    s.query(PAIR, 1, 3);
    let values: Vec<i32> = (0..40_000).collect();
    let mut bytes = script::bind_complete();
    bytes.extend(script::data_row(&values));
    bytes.extend(script::command_complete("SELECT 1"));
    bytes.extend(script::ready());
    assert!(bytes.len() > 4 * READ_BUF_INITIAL);
    // As a driver reads: into read_buffer, as much as fits.
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let room = s.conn.read_buffer();
        assert!(!room.is_empty());
        let n = room.len().min(rest.len()).min(10_000);
        room[..n].copy_from_slice(&rest[..n]);
        rest = &rest[n..];
        s.conn.filled(n, s.now, &mut record(&mut s.events));
    }
    let events = s.take_events();
    assert_eq!(events.len(), 2);
    // Two columns described: the rest read as errors, but every one is there.
    assert!(events[0].1.starts_with("row 0,1,?,"));
    assert_eq!(events[0].1.matches(',').count(), values.len() - 1);
    assert_eq!(events[1].1, "done");
}

#[test]
fn a_message_over_the_limit_is_refused_before_the_buffer_grows_for_it() {
    let mut s = Script::new("");
    s.start();
    s.query(PAIR, 1, 3);
    let mut header = script::bind_complete();
    header.push(b'D');
    header.extend_from_slice(&(64u32 << 20).to_be_bytes());
    s.receive(&header);
    assert_eq!(
        s.take_events(),
        [(3, "failed connection to the database lost".to_string())]
    );
    assert_eq!(s.conn.step(), Step::Idle);
    assert!(
        s.conn.read_buf.len() <= READ_BUF_INITIAL,
        "{}",
        s.conn.read_buf.len()
    );
    let error = s.conn.last_error().unwrap().to_string();
    assert!(error.contains("longer than the limit"), "{error}");
}

/// With `options`, a query answering `fits` rows is answered, and the next one, answering
/// one row more, fails with `failure` and the connection is replaced.
fn one_row_past_the_cap(options: Options, fits: usize, failure: &str) {
    let mut s = Script::with_options("", options);
    s.start();
    s.query(PAIR, 1, 1);
    s.query(PAIR, 2, 2);
    s.receive(&answer(&vec![&[1, 1][..]; fits]));
    assert_eq!(
        s.take_events().len(),
        fits + 1,
        "the rows and done: at the cap"
    );
    s.receive(&answer(&vec![&[1, 1][..]; fits + 1]));
    let events = s.take_events();
    assert_eq!(events.len(), fits + 1, "{events:?}");
    assert_eq!(
        events[fits],
        (2, format!("failed protocol error: {failure}"))
    );
    assert_eq!(s.conn.step(), Step::Idle);
}

#[test]
fn a_query_answering_more_rows_than_the_cap_fails_and_the_connection_is_replaced() {
    let options = Options {
        max_rows: 3,
        ..Options::default()
    };
    one_row_past_the_cap(options, 3, "a query answered more than 3 rows");
}

#[test]
fn a_query_answering_more_bytes_than_the_cap_fails_too() {
    // Each two-int4 row is 2 + 2 x (4 + 4) = 18 bytes: two fit in 40, three do not.
    let options = Options {
        max_result_bytes: 40,
        ..Options::default()
    };
    one_row_past_the_cap(options, 2, "a query answered more than 40 bytes of rows");
}

#[test]
fn bytes_after_the_connection_is_dropped_are_ignored() {
    let mut s = Script::new("");
    s.start();
    s.fail(DbError::closed());
    s.receive(&answer(&[&[1, 2]]));
    assert!(s.take_events().is_empty());
    s.conn.filled(5, s.now, &mut record(&mut s.events));
    assert_eq!(s.conn.step(), Step::Idle);
    // And a driver reporting its old socket's failure while Idle changes nothing.
    let retry = s.conn.deadline();
    s.fail(refused());
    assert_eq!(s.conn.deadline(), retry);
}

#[test]
fn the_log_says_each_change_once_and_counts_repeats() {
    let target = target("u", "hunter2");
    let mut log = FailureLog::default();
    let start = Instant::now();
    let refused = || failure_kind(&refused());
    let line = log
        .failed(&target, refused(), "Connection refused", false, start)
        .unwrap();
    assert!(
        line.contains("failed (Connection refused); retrying"),
        "{line}"
    );
    assert!(!line.contains("hunter2"));
    // The same failure every 100 ms for a minute: counted, not logged.
    let mut at = start;
    for _ in 0..599 {
        at += Duration::from_millis(100);
        assert_eq!(
            log.failed(&target, refused(), "Connection refused", false, at),
            None
        );
    }
    // A minute after the last line: one summary.
    at += Duration::from_millis(100);
    let summary = log
        .failed(&target, refused(), "Connection refused", false, at)
        .unwrap();
    assert!(
        summary.contains("still failing") && summary.contains("601 failed attempts in 60 s"),
        "{summary}"
    );
    // A new kind of failure is a change: logged once.
    let timeout = failure_kind(&DbError::Timeout);
    at += Duration::from_millis(100);
    assert!(log
        .failed(&target, timeout.clone(), "start-up not done", false, at)
        .is_some());
    at += Duration::from_millis(100);
    assert_eq!(
        log.failed(&target, timeout, "start-up not done", false, at),
        None
    );
    let back = log.recovered(&target, at).unwrap();
    assert!(
        back.contains("re-established after 603 failed attempts"),
        "{back}"
    );
    assert_eq!(log.recovered(&target, at), None, "once");
    // A proven connection lost: says so, and counts no attempt for it.
    let lost = log
        .failed(&target, failure_kind(&DbError::closed()), "eof", true, at)
        .unwrap();
    assert!(lost.contains("lost (eof); reconnecting"), "{lost}");
    assert!(log
        .recovered(&target, at)
        .unwrap()
        .contains("after 0 failed attempts"));
}

#[test]
fn flapping_between_kinds_of_failure_is_bounded_too() {
    let target = target("u", "p");
    let mut log = FailureLog::default();
    let mut at = Instant::now();
    let mut lines = 0;
    for i in 0..10_000 {
        at += Duration::from_millis(100);
        let kind = format!("kind {}", i % 50);
        lines += usize::from(log.failed(&target, kind, "why", false, at).is_some());
    }
    // 1000 s of failures: the kinds logged once each up to the cap, then a line a minute.
    assert!(lines <= MAX_REASONS_LOGGED + 1000 / 60 + 1, "{lines}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Nothing the server sends makes the connection panic, in any phase.
    #[test]
    fn server_bytes_never_panic(
        phase in 0..3u8,
        pieces in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..6),
    ) {
        let mut s = Script::new("p");
        match phase {
            0 => { s.connect(); }
            1 => {
                s.connect();
                s.receive(&script::auth_ok());
                s.receive(&script::ready());
            }
            _ => {
                s.start();
                s.query(PAIR, 1, 1);
                s.query(TOUCH, 1, 2);
            }
        }
        for piece in pieces {
            s.receive(&piece);
            s.output();
        }
        s.advance(DEFAULT_TIMEOUT);
        s.timer();
    }
}

/// A DataRow of the given binary columns (`None`: NULL), as a `Row` of the given types.
fn with_row(types: &[u32], columns: &[Option<&[u8]>], check: impl FnOnce(Row<'_>)) {
    let bytes = script::raw_row(columns);
    let Ok(Some((Message::DataRow(data), _))) = protocol::decode(&bytes) else {
        panic!("not a DataRow");
    };
    check(Row { data, types });
}

#[test]
fn row_columns_are_read_as_their_described_types() {
    let types = [BOOL_OID, INT8_OID, JSONB_OID, INT4_OID, TEXT_OID];
    let columns: [Option<&[u8]>; 5] = [
        Some(&[1]),
        Some(&(1i64 << 40).to_be_bytes()),
        Some(b"\x01{\"score\": 4}"),
        Some(&7i32.to_be_bytes()),
        Some("é".as_bytes()),
    ];
    with_row(&types, &columns, |row| {
        assert!(row.get::<bool>(0).unwrap());
        assert_eq!(row.get::<i64>(1).unwrap(), 1 << 40);
        assert_eq!(row.get::<Jsonb>(2).unwrap(), Jsonb(r#"{"score": 4}"#));
        assert_eq!((row.int4(3).unwrap(), row.text(4).unwrap()), (7, "é"));
    });
}

#[test]
fn a_column_of_another_type_or_length_or_null_is_an_error() {
    let types = [BOOL_OID, INT8_OID, JSONB_OID, INT4_OID];
    let columns: [Option<&[u8]>; 4] = [Some(&[1, 0]), Some(&[0; 4]), Some(b"\x02{}"), None];
    with_row(&types, &columns, |row| {
        let error = |result: Result<(), DbError>| result.unwrap_err().to_string();
        // The type the statement described decides, whatever the bytes would fit.
        assert!(error(row.get::<i32>(0).map(drop)).contains("column 0 is not int4"));
        assert!(error(row.get::<i64>(3).map(drop)).contains("column 3 is not int8"));
        assert!(error(row.get::<&str>(2).map(drop)).contains("column 2 is not text"));
        assert!(error(row.get::<bool>(0).map(drop)).contains("column 0: bool not one byte"));
        assert!(error(row.get::<i64>(1).map(drop)).contains("column 1: int8 of the wrong size"));
        assert!(error(row.get::<Jsonb>(2).map(drop)).contains("column 2: jsonb of an unknown"));
        assert!(error(row.int4(3).map(drop)).contains("column 3 is NULL"));
        assert!(error(row.get::<bool>(4).map(drop)).contains("column 4 is not bool"));
    });
}
