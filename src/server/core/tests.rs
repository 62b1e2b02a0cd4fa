//! The core without sockets: a scripted backend tells it what arrived, went out or failed,
//! and the tests check what it asks of the backend.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use super::*;
use crate::http::{Answer, ContentType, Reply, Request, Status, Ticket, TIMEOUTS};
use crate::pg::pool::Threads;
use crate::pg::protocol::script;
use crate::pg::protocol::INT4_OID;
use crate::pg::target::{Config, Host};
use crate::pg::{Address, Options, Statement, Target};
use crate::service::Finished;

static STATEMENTS: &[Statement] = &[Statement {
    name: "one",
    sql: "SELECT 1",
    param_types: &[],
}];

/// Answers `/db` from the database (one query, its row count as the body), `/redis` from
/// Redis (`GET k`, the value as the body) and anything else at once.
#[derive(Default)]
struct TestService {
    waiting: Vec<(Ticket, usize)>,
    accept: crate::ws::handshake::Accept,
    /// The requests waiting for Redis, by token, and the last value's copy.
    waiting_for_redis: Vec<Ticket>,
    value: Vec<u8>,
}

impl Service for TestService {
    fn handle<'a>(
        &'a mut self,
        request: &'a Request<'a>,
        ticket: Ticket,
        cx: &mut Context<'_>,
    ) -> Reply<'a> {
        if request.path == "/ws" {
            let upgrade = &request.fields.upgrade;
            self.accept = crate::ws::handshake::check(upgrade, request.version).unwrap();
            return Reply::Now(Answer::switch_to_websocket(&self.accept));
        }
        if let (Some(redis), "/redis") = (cx.redis.as_deref_mut(), request.path) {
            let token = self.waiting_for_redis.len() as u64;
            redis.get(token, b"k", cx.now).unwrap();
            self.waiting_for_redis.push(ticket);
            return Reply::Later;
        }
        if request.path != "/db" {
            return Reply::Now(Answer::ok(ContentType::Plain, b"now"));
        }
        let token = self.waiting.len() as u64;
        let queued = cx
            .db
            .pick(cx.now)
            .is_some_and(|pg| pg.query(&STATEMENTS[0], &[], token, cx.now).is_ok());
        match queued {
            true => {
                self.waiting.push((ticket, 0));
                Reply::Later
            }
            false => Reply::Now(Answer::error(Status::ServiceUnavailable)),
        }
    }

    fn on_redis_event(
        &mut self,
        token: u64,
        event: crate::redis::Event<'_>,
        _: &mut Pool,
    ) -> Option<Finished<'_>> {
        let ticket = *self.waiting_for_redis.get(token as usize)?;
        let crate::redis::Event::Reply(crate::redis::Value::Bulk(value)) = event else {
            return None;
        };
        self.value = value.to_vec();
        Some(Finished {
            ticket,
            answer: Answer::ok(ContentType::Plain, &self.value),
        })
    }

    /// Echoes, as the app's `/ws` does.
    fn on_message(&mut self, message: crate::ws::Message<'_>, out: &mut Vec<u8>) {
        crate::ws::frame::write(out, message.opcode, message.payload);
    }

    /// Sets no timers.
    fn on_timer(&mut self, _ticket: Ticket, _token: u64) -> Option<Finished<'_>> {
        None
    }

    fn on_database_event(
        &mut self,
        token: u64,
        event: Event<'_>,
        _: Option<&mut crate::redis::Redis>,
    ) -> Option<Finished<'_>> {
        let (ticket, rows) = self.waiting.get_mut(token as usize)?;
        match event {
            Event::Row(_) => {
                *rows += 1;
                None
            }
            Event::Done | Event::Failed(_) => Some(Finished {
                ticket: *ticket,
                answer: Answer::ok(ContentType::Plain, [b"0 rows", b"1 rows"][(*rows).min(1)]),
            }),
        }
    }
}

const ADDRESS: &str = "127.0.0.1:5432";

/// A core with one database connection to [`ADDRESS`] (a literal: nothing to resolve).
fn core(connect_timeout: Duration) -> Core<TestService, u32> {
    limited_core(connect_timeout, Limits::default())
}

fn limited_core(connect_timeout: Duration, limits: Limits) -> Core<TestService, u32> {
    let target = Target::new(Config {
        host: Host::Tcp("127.0.0.1".into()),
        port: 5432,
        user: "u".into(),
        password: String::new(),
        database: "d".into(),
        allow_cleartext: false,
    });
    let options = Options {
        connect_timeout,
        ..Options::default()
    };
    let threads = Arc::new(Threads::default());
    let pool = Pool::new(&target, STATEMENTS, &options, 1, &threads, Instant::now());
    Core::new(TestService::default(), pool, limits)
}

fn connect_order() -> LinkOrder {
    LinkOrder::Connect(Address::Tcp(ADDRESS.parse().unwrap()))
}

/// What the scripted server answers to the start-up: trust, then the statement prepared.
fn startup_answers() -> Vec<u8> {
    let mut answers = script::auth_ok();
    answers.extend(script::ready());
    answers.extend(script::parse_complete());
    answers.extend(script::parameter_description(&[]));
    answers.extend(script::row_description(&[INT4_OID]));
    answers.extend(script::ready());
    answers
}

/// Everything the link has to send, reported sent.
fn send_all(core: &mut Core<TestService, u32>) -> Vec<u8> {
    let bytes = core.link_unsent(0).to_vec();
    core.link_sent(0, bytes.len());
    bytes
}

/// A core whose link is connected and ready for queries.
fn ready_core() -> Core<TestService, u32> {
    let mut core = core(Duration::from_secs(5));
    assert_eq!(core.link_order(0), Some(connect_order()));
    core.link_connected(0, Ok(()));
    assert!(!send_all(&mut core).is_empty(), "the StartupMessage");
    core.link_received(0, &startup_answers());
    assert!(core.worker.pool.link(0).conn().is_ready());
    send_all(&mut core);
    core
}

#[test]
fn a_slot_stays_small() {
    // Every connection ever open at once keeps its slot: it must stay far below the
    // buffers an idle connection no longer holds (16,384 slots, the default cap: 4 MiB).
    // 232 bytes, 8 for the transport (a TLS session is boxed, a plain connection's
    // transport is the null pointer's niche) and 16 for the client's address (17 bytes, in
    // the padding's room). The protocol's tag is a word of its own, since two variants
    // carry HTTP/1.1's connection (reading its version, and settled).
    assert_eq!(std::mem::size_of::<Transport>(), 8);
    assert!(
        std::mem::size_of::<slots::Slot<OwnedFd>>() <= 256,
        "{}",
        std::mem::size_of::<slots::Slot<OwnedFd>>()
    );
}

/// The race of issue 23: a receive is under way on a link's socket when the timers make
/// the link stale (its start-up deadline passes). The core orders the socket closed, takes
/// nothing it still delivers, and orders no new socket until the backend has reported the
/// old one closed: the backend closes it only once its receive has ended, so the
/// descriptor's number cannot go to another socket while the receive can still land there.
#[test]
fn a_stale_links_socket_is_replaced_only_after_the_backend_closed_it() {
    let mut core = core(Duration::from_millis(10));
    assert_eq!(core.link_order(0), Some(connect_order()));
    core.link_connected(0, Ok(()));
    send_all(&mut core);
    // The backend armed a receive; before it completes, the start-up deadline passes.
    core.worker.now += Duration::from_millis(20);
    core.on_timers();
    assert_eq!(core.link_order(0), Some(LinkOrder::Close));
    // The receive completes on the old socket: its bytes are not the connection's.
    core.link_received(0, &startup_answers());
    assert!(!core.worker.pool.link(0).conn().is_ready());
    assert!(core.link_unsent(0).is_empty());
    // The backoff ends: the connection wants a socket, but the old one is not closed yet.
    core.worker.now = core.next_wake();
    core.on_timers();
    assert_eq!(
        core.worker.pool.link(0).conn().step(),
        crate::pg::Step::Connect
    );
    assert_eq!(core.link_order(0), None);
    assert_eq!(core.link_order(0), None);
    core.link_closed(0);
    assert_eq!(core.link_order(0), Some(connect_order()));
}

/// A refused connect fails the connection (its queries, a backoff) and the socket is
/// ordered closed; the next connect comes after the backoff.
#[test]
fn a_refused_connect_closes_the_socket_and_backs_off() {
    let mut core = core(Duration::from_secs(5));
    assert_eq!(core.link_order(0), Some(connect_order()));
    let refused = io::Error::from_raw_os_error(libc::ECONNREFUSED);
    core.link_connected(0, Err(refused));
    assert_eq!(core.link_order(0), Some(LinkOrder::Close));
    core.link_closed(0);
    assert_eq!(core.link_order(0), None, "backing off");
    assert!(core.worker.pool.link(0).conn().last_error().is_some());
    core.worker.now = core.next_wake();
    core.on_timers();
    assert_eq!(core.link_order(0), Some(connect_order()));
}

/// The bytes handed to the backend stay as they are until it reports them sent, while the
/// connection queues more (io_uring sends from them).
#[test]
fn unsent_link_bytes_stay_put_until_reported_sent() {
    let mut core = ready_core();
    let slot = core.open(7, Listening::Http, None);
    core.received(slot, b"GET /db HTTP/1.1\r\nHost: a\r\n\r\n");
    core.advance(slot, true);
    let (first, len) = {
        let unsent = core.link_unsent(0);
        (unsent.as_ptr(), unsent.len())
    };
    assert!(len > 0, "the query");
    core.received(slot, b"GET /db HTTP/1.1\r\nHost: a\r\n\r\n");
    core.advance(slot, true);
    core.link_sent(0, 1);
    let unsent = core.link_unsent(0);
    assert_eq!(
        (unsent.as_ptr(), unsent.len()),
        (first.wrapping_add(1), len - 1)
    );
    core.link_sent(0, len - 1);
    assert_eq!(
        core.link_unsent(0).len(),
        len,
        "the second query, taken now"
    );
}

/// A `/db` request through the link driver: the request queues a query, the link sends
/// it, the answer arrives on the link, the response goes to the connection.
#[test]
fn a_db_request_goes_through_the_link_and_back() {
    let mut core = ready_core();
    let slot = core.open(7, Listening::Http, None);
    core.received(slot, b"GET /db HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(core.advance(slot, true), Next::Keep { read: true });
    assert!(core.unsent(slot).is_empty(), "waits for the database");
    let query = send_all(&mut core);
    let tags: Vec<u8> = script::frontend(&query, false)
        .iter()
        .map(|m| m.0)
        .collect();
    assert_eq!(tags, b"BES");
    let mut answer = script::bind_complete();
    answer.extend(script::data_row(&[1]));
    answer.extend(script::command_complete("SELECT 1"));
    answer.extend(script::ready());
    core.link_received(0, &answer);
    let mut completed = Vec::new();
    core.take_completed(&mut completed);
    assert_eq!(completed, [slot]);
    core.advance(slot, true);
    let response = String::from_utf8(core.unsent(slot).to_vec()).unwrap();
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(response.ends_with("\r\n\r\n1 rows"), "{response}");
}

/// Redis's links come after the pool's: a `/redis` request's GET goes out on link 1 once
/// it is connected, and the reply that arrives there answers the request.
#[test]
fn a_redis_request_goes_through_a_link_after_the_pools_and_back() {
    let mut core = ready_core();
    let redis_address = Address::Tcp("127.0.0.1:6379".parse().unwrap());
    let settings = crate::redis::Settings {
        connections: 1,
        ..crate::redis::Settings::default()
    };
    let redis = Redis::new(redis_address.clone(), &Default::default(), settings);
    core = core.with_redis(Some(redis));
    assert_eq!(core.links(), 2);
    assert_eq!(core.link_order(1), Some(LinkOrder::Connect(redis_address)));
    core.link_connected(1, Ok(()));
    let slot = core.open(7, Listening::Http, None);
    core.received(slot, b"GET /redis HTTP/1.1\r\nHost: a\r\n\r\n");
    core.advance(slot, true);
    assert!(core.unsent(slot).is_empty(), "waits for Redis");
    assert!(core.next_wake() <= core.now() + Duration::from_secs(1));
    let command = core.link_unsent(1).to_vec();
    assert_eq!(command, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    core.link_sent(1, command.len());
    assert!(core.link_unsent(0).is_empty(), "nothing for PostgreSQL");
    core.link_received(1, b"$5\r\nvalue\r\n");
    let mut completed = Vec::new();
    core.take_completed(&mut completed);
    assert_eq!(completed, [slot]);
    core.advance(slot, true);
    let response = String::from_utf8(core.unsent(slot).to_vec()).unwrap();
    assert!(response.ends_with("\r\n\r\nvalue"), "{response}");
}

/// The switch to WebSocket: a request waiting for the database, the upgrade and the
/// client's first frame, all in one read. The database's answer goes first, then the `101`,
/// then the echo; the session counts in the budget; the slot's next peer reads its version,
/// under a new generation.
#[test]
fn an_upgrade_waits_for_the_answers_before_it_and_takes_the_bytes_after_it() {
    let mut core = ready_core();
    let slot = core.open(7, Listening::Http, None);
    let upgrade = b"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
        Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    // "hi" as a text frame under the zero mask.
    let frame = [0x81, 0x82, 0, 0, 0, 0, b'h', b'i'];
    let read = [&b"GET /db HTTP/1.1\r\nHost: a\r\n\r\n"[..], upgrade, &frame].concat();
    core.received(slot, &read);
    assert_eq!(core.advance(slot, true), Next::Keep { read: false });
    assert!(
        core.unsent(slot).is_empty(),
        "the 101 waits behind the database"
    );
    send_all(&mut core);
    let mut answer = script::bind_complete();
    answer.extend(script::command_complete("SELECT 0"));
    answer.extend(script::ready());
    core.link_received(0, &answer);
    core.advance(slot, true);
    let sent = String::from_utf8_lossy(core.unsent(slot)).into_owned();
    let switch = sent.find("HTTP/1.1 101 Switching Protocols\r\n").unwrap();
    assert!(sent[..switch].starts_with("HTTP/1.1 200 OK") && sent[..switch].ends_with("0 rows"));
    let tail = b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nConnection: Upgrade\r\n\r\n\x81\x02hi";
    assert!(core.unsent(slot).ends_with(tail), "{sent:?}");
    assert!(matches!(
        core.slots.all[slot].protocol,
        Protocol::WebSocket(_)
    ));
    assert_counted(&core);
    let generation = core.generation(slot);
    let len = core.unsent(slot).len();
    assert!(!core.sent(slot, len), "nothing waits");
    // The peer leaves: nothing to answer, closed.
    core.received(slot, &[]);
    assert_eq!(core.advance(slot, true), Next::Close);
    assert_eq!(core.release(slot), Some(7));
    assert_counted(&core);
    let slot = core.open(8, Listening::Http, None);
    assert!(matches!(
        core.slots.all[slot].protocol,
        Protocol::ReadVersion(_)
    ));
    assert_eq!(core.generation(slot), generation.wrapping_add(1));
}

/// The database going away: the link's EOF fails the waiting request's query, the
/// response still comes, the socket is ordered closed.
#[test]
fn the_servers_eof_fails_the_query_and_closes_the_socket() {
    let mut core = ready_core();
    let slot = core.open(7, Listening::Http, None);
    core.received(slot, b"GET /db HTTP/1.1\r\nHost: a\r\n\r\n");
    core.advance(slot, true);
    send_all(&mut core);
    core.link_received(0, &[]);
    let mut completed = Vec::new();
    core.take_completed(&mut completed);
    assert_eq!(completed, [slot]);
    assert_eq!(core.link_order(0), Some(LinkOrder::Close));
}

/// An HTTP connection's life as a backend sees it: a request in, its response out, the
/// peer's EOF, close; an error answer lingers for the peer's EOF instead.
#[test]
fn http_connections_answer_linger_and_close() {
    let mut core = core(Duration::from_secs(5));
    let slot = core.open(3, Listening::Http, None);
    assert_eq!(core.socket(slot), Some(&3));
    core.received(slot, b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(core.advance(slot, true), Next::Keep { read: true });
    let len = core.unsent(slot).len();
    assert!(core.unsent(slot).ends_with(b"now"));
    assert!(!core.sent(slot, len), "nothing more to answer");
    core.received(slot, &[]);
    assert_eq!(core.advance(slot, true), Next::Close);
    assert_eq!(core.release(slot), Some(3));
    assert_eq!(core.socket(slot), None);

    let slot = core.open(4, Listening::Http, None);
    core.received(
        slot,
        b"GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n",
    );
    assert_eq!(core.advance(slot, true), Next::Keep { read: false });
    let len = core.unsent(slot).len();
    assert!(core.unsent(slot).starts_with(b"HTTP/1.1 400"));
    assert!(core.sent(slot, len), "finished: advance again");
    assert_eq!(core.advance(slot, true), Next::Linger);
    assert!(core.is_lingering(slot));
    core.received(slot, b"ignored");
    assert_eq!(
        core.buffered_input(slot),
        0,
        "a lingering connection drops its input"
    );
    core.received(slot, &[]);
    assert_eq!(core.advance(slot, true), Next::Close);
}

/// Bytes a client sends but never reads the answers to: enough requests that their answers
/// hold tens of KiB.
fn unread_requests() -> Vec<u8> {
    b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n".repeat(400)
}

/// The worker's count of what its connections hold is the sum of what each holds, as bytes
/// arrive, are answered, go out, and connections close.
fn assert_counted(core: &Core<TestService, u32>) {
    let held: usize = core
        .slots
        .all
        .iter()
        .filter(|slot| slot.socket.is_some())
        .map(|slot| slot.protocol.wire().held())
        .sum();
    assert_eq!(core.worker.budget.held(), held);
}

/// Past its budget the worker stops reading from the connections that hold more than their
/// share, and goes on reading from the others; a paused connection reads again once its
/// output drains, or, with nothing to drain, once the sweep finds the worker back under.
#[test]
fn past_the_budget_the_connections_holding_most_stop_reading() {
    let limits = Limits {
        max_buffered: 96 * 1024,
        ..Limits::default()
    };
    let mut core = limited_core(Duration::from_secs(5), limits.clone());
    let (a, b, small) = (
        core.open(1, Listening::Http, None),
        core.open(2, Listening::Http, None),
        core.open(3, Listening::Http, None),
    );
    for hog in [a, b] {
        core.received(hog, &unread_requests());
        core.advance(hog, true);
        assert_counted(&core);
    }
    assert!(
        core.worker.budget.held() > limits.max_buffered,
        "{}",
        core.worker.budget.held()
    );
    assert!(core.slots.all[a].held as usize > limits.max_buffered / 3);
    // Both hogs are paused, the small one is not.
    assert_eq!(core.advance(a, true), Next::Keep { read: false });
    assert!(core.read(b, |_, _| Ok(1)).is_none());
    core.received(small, b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(core.advance(small, true), Next::Keep { read: true });
    assert_counted(&core);

    // a's client reads everything: a holds nothing and reads again.
    let len = core.unsent(a).len();
    assert!(core.sent(a, len), "advance it again: it was paused");
    assert_eq!(core.advance(a, true), Next::Keep { read: true });
    assert_counted(&core);

    // a fills up again, b closes: a has nothing to drain, and the sweep wakes it.
    core.received(a, &unread_requests());
    core.advance(a, true);
    let b_holds = core.slots.all[b].held;
    core.received(b, &unread_requests());
    core.advance(b, true);
    assert!(core.slots.all[b].held >= b_holds);
    assert_eq!(core.advance(a, true), Next::Keep { read: false });
    assert_eq!(core.release(b), Some(2));
    assert_counted(&core);
    assert!(
        core.worker.budget.held() <= limits.max_buffered,
        "{}",
        core.worker.budget.held()
    );
    core.worker.now = core.worker.next_sweep;
    let mut found = Vec::new();
    assert!(core.sweep(|index, swept| found.push((index, swept))));
    assert_eq!(found, [(a, Swept::Resumable)]);
    assert_eq!(core.advance(a, true), Next::Keep { read: true });

    // Everything closed: nothing counted.
    core.release(a);
    core.release(small);
    assert_eq!(core.worker.budget.held(), 0);
}

/// A database answer written into a connection's line is counted too.
#[test]
fn responses_from_the_database_are_counted() {
    let mut core = ready_core();
    let slot = core.open(7, Listening::Http, None);
    core.received(
        slot,
        b"GET /db HTTP/1.1\r\nHost: a\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    core.advance(slot, true);
    assert_counted(&core);
    send_all(&mut core);
    let mut answer = script::bind_complete();
    answer.extend(script::data_row(&[1]));
    answer.extend(script::command_complete("SELECT 1"));
    answer.extend(script::ready());
    core.link_received(0, &answer);
    assert!(core.worker.budget.held() > 0);
    assert_counted(&core);
    core.advance(slot, true);
    let len = core.unsent(slot).len();
    core.sent(slot, len);
    assert_counted(&core);
    assert_eq!(core.worker.budget.held(), 0);
}

#[test]
fn the_worker_is_full_at_its_connection_cap() {
    let limits = Limits {
        max_conns: 2,
        ..Limits::default()
    };
    let mut core = limited_core(Duration::from_secs(5), limits);
    let first = core.open(1, Listening::Http, None);
    assert!(!core.is_full());
    core.open(2, Listening::Http, None);
    assert!(core.is_full());
    core.release(first);
    assert!(!core.is_full());
}

/// A TLS slot counts its session in the worker's budget; garbage instead of a ClientHello
/// gets its alert, then the slot closes; a handshake not finished by its deadline is swept.
#[test]
fn a_tls_slot_counts_its_session_and_closes_on_garbage_or_a_stalled_handshake() {
    let pair = crate::transport::test_pair();
    let config = crate::transport::load(&pair.cert, &pair.key).unwrap();
    let mut core = core(Duration::from_secs(5)).with_tls(Some(Arc::new(config)));
    let (garbage, stalled, plain) = (
        core.open(1, Listening::Tls, None),
        core.open(2, Listening::Tls, None),
        core.open(3, Listening::Http, None),
    );
    assert!(
        core.worker.budget.held() >= 2 * 8 * 1024,
        "{}",
        core.worker.budget.held()
    );

    core.received(garbage, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(core.advance(garbage, true), Next::Keep { read: false });
    let alert = core.unsent(garbage).to_vec();
    assert_eq!(alert.first(), Some(&21), "an alert record");
    assert!(
        core.sent(garbage, alert.len()),
        "advance it again: it is done"
    );
    assert_eq!(core.advance(garbage, true), Next::Close);
    core.release(garbage);

    core.received(stalled, &[22, 3, 1, 0]);
    assert_eq!(core.advance(stalled, true), Next::Keep { read: true });
    core.worker.now += TIMEOUTS.request + Duration::from_secs(1);
    let mut found = Vec::new();
    assert!(core.sweep(|index, swept| found.push((index, swept))));
    assert_eq!(found, [(stalled, Swept::Expired)]);
    assert!(core.socket(plain).is_some());
}

/// The protocol is chosen once: by the first bytes on the HTTP port (HTTP/2's preface, cut
/// anywhere, waits whole; anything else is HTTP/1.1), from the open on the h2c port; a
/// settled HTTP/1.1 connection never becomes HTTP/2, whatever it later receives.
#[test]
fn the_protocol_is_chosen_once_by_the_first_bytes_or_the_port() {
    let mut core = ready_core();
    let preface = crate::h2::PREFACE;
    for cut in 1..preface.len() {
        let slot = core.open(1, Listening::Http, None);
        core.received(slot, &preface[..cut]);
        core.advance(slot, true);
        assert!(matches!(
            core.slots.all[slot].protocol,
            Protocol::ReadVersion(_)
        ));
        core.received(slot, &preface[cut..]);
        core.advance(slot, true);
        assert!(matches!(core.slots.all[slot].protocol, Protocol::Http2(..)));
        core.release(slot);
    }

    let slot = core.open(2, Listening::Http, None);
    core.received(slot, b"GET /plaintext HTTP/1.1\r\nHost: a\r\n\r\n");
    core.advance(slot, true);
    assert!(matches!(core.slots.all[slot].protocol, Protocol::Http1(_)));
    let len = core.unsent(slot).len();
    core.sent(slot, len);
    // The preface after a request is no request: HTTP/1.1 refuses it.
    core.received(slot, preface);
    core.advance(slot, true);
    assert!(matches!(core.slots.all[slot].protocol, Protocol::Http1(_)));
    let answer = String::from_utf8_lossy(core.unsent(slot)).into_owned();
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    core.release(slot);

    // One byte that cannot begin the preface settles HTTP/1.1 before the request is whole.
    let slot = core.open(3, Listening::Http, None);
    core.received(slot, b"G");
    core.advance(slot, true);
    assert!(matches!(core.slots.all[slot].protocol, Protocol::Http1(_)));
    core.release(slot);

    let slot = core.open(4, Listening::H2c, None);
    assert!(matches!(core.slots.all[slot].protocol, Protocol::Http2(..)));
}
