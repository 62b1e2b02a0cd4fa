//! One worker's Redis pool driven with bytes: the links' orders carried out by hand, the
//! server's replies handed in as a socket would deliver them.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use super::*;
use crate::link::Order;

/// What the sink saw, owned, by token.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// A reply as its RESP bytes' meaning: a bulk string's bytes, `nil`, `+OK`, `:1`.
    Reply(u64, String),
    Error(u64, String),
    Failed(u64, Failure),
}

fn reply(token: u64, text: &str) -> Seen {
    Seen::Reply(token, text.to_string())
}

fn failed(token: u64, failure: Failure) -> Seen {
    Seen::Failed(token, failure)
}

fn seen(token: u64, event: Event<'_>) -> Seen {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    match event {
        Event::Reply(Value::Null) => Seen::Reply(token, "nil".into()),
        Event::Reply(Value::Integer(n)) => Seen::Reply(token, format!(":{n}")),
        Event::Reply(Value::Simple(bytes)) => Seen::Reply(token, format!("+{}", text(bytes))),
        Event::Reply(Value::Bulk(bytes)) => Seen::Reply(token, text(bytes)),
        Event::Reply(other) => Seen::Reply(token, format!("{other:?}")),
        Event::Error(message) => Seen::Error(token, text(message)),
        Event::Failed(failure) => Seen::Failed(token, failure),
    }
}

type Dyn<'s> = &'s mut dyn FnMut(u64, Event<'_>);

struct Bench {
    redis: Redis,
    now: Instant,
    seen: Vec<Seen>,
}

fn address() -> Address {
    Address::Tcp(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 6379))
}

fn one_connection() -> Settings {
    Settings {
        connections: 1,
        ..Settings::default()
    }
}

impl Bench {
    fn new(settings: Settings) -> Bench {
        Bench::with_session(&Session::default(), settings)
    }

    fn with_session(session: &Session, settings: Settings) -> Bench {
        Bench {
            redis: Redis::new(address(), session, settings),
            now: Instant::now(),
            seen: Vec::new(),
        }
    }

    fn on_link<T>(
        &mut self,
        index: usize,
        f: impl FnOnce(&mut Link, &mut Around<'_, Dyn<'_>>) -> T,
    ) -> T {
        let seen = &mut self.seen;
        let mut sink = |token, event: Event<'_>| seen.push(super::tests::seen(token, event));
        let mut sink: Dyn<'_> = &mut sink;
        self.redis.on_link(index, &mut sink, f)
    }

    /// Carries out link `index`'s orders: a connect ends as `connect` says.
    fn sync(&mut self, index: usize, connect: io::Result<()>) -> Vec<Order> {
        let now = self.now;
        let mut orders = Vec::new();
        let mut connect = Some(connect);
        while let Some(order) = self.on_link(index, |link, around| link.order(now, around)) {
            orders.push(order.clone());
            match order {
                Order::Connect(_) => {
                    let Some(result) = connect.take() else { break };
                    self.on_link(index, |link, around| link.connected(result, now, around));
                }
                Order::Close => self.redis.link_mut(index).closed(),
            }
        }
        orders
    }

    fn connect(&mut self, index: usize) {
        self.sync(index, Ok(()));
    }

    /// Everything link `index` has to send, reported sent.
    fn sent(&mut self, index: usize) -> String {
        let link = self.redis.link_mut(index);
        let bytes = link.unsent().to_vec();
        link.sent(bytes.len());
        String::from_utf8(bytes).unwrap()
    }

    fn receive(&mut self, index: usize, bytes: &[u8]) {
        let now = self.now;
        self.on_link(index, |link, around| link.receive(bytes, now, around));
    }

    fn timers(&mut self) {
        let seen = &mut self.seen;
        let mut sink = |token, event: Event<'_>| seen.push(super::tests::seen(token, event));
        self.redis.on_timers(self.now, &mut sink);
    }

    fn take(&mut self) -> Vec<Seen> {
        std::mem::take(&mut self.seen)
    }
}

#[test]
fn pipelined_replies_are_matched_to_their_commands_in_order() {
    let mut bench = Bench::new(one_connection());
    let now = bench.now;
    // Written while the connection opens, sent once it is open.
    bench.redis.get(1, b"item:1", now).unwrap();
    let ttl = Duration::from_secs(1);
    bench
        .redis
        .set_px(2, b"item:1", b"{\"id\":1}", ttl, now)
        .unwrap();
    bench.redis.del(3, b"item:1", now).unwrap();
    bench.redis.command(4, &[b"PING"], now).unwrap();
    assert_eq!(bench.sent(0), "");
    bench.connect(0);
    assert!(bench.redis.link(0).conn().is_open());
    assert_eq!(
        bench.sent(0),
        "*2\r\n$3\r\nGET\r\n$6\r\nitem:1\r\n\
         *5\r\n$3\r\nSET\r\n$6\r\nitem:1\r\n$8\r\n{\"id\":1}\r\n$2\r\nPX\r\n$4\r\n1000\r\n\
         *2\r\n$3\r\nDEL\r\n$6\r\nitem:1\r\n\
         *1\r\n$4\r\nPING\r\n"
    );
    // Replies split anywhere.
    bench.receive(0, b"$-1\r\n+OK\r");
    assert_eq!(bench.take(), [reply(1, "nil")]);
    bench.receive(0, b"\n:1\r\n+PO");
    assert_eq!(bench.take(), [reply(2, "+OK"), reply(3, ":1")]);
    bench.receive(0, b"NG\r\n");
    assert_eq!(bench.take(), [reply(4, "+PONG")]);
    assert_eq!(bench.redis.link(0).conn().in_flight(), 0);
    // Open: the next goes out at once.
    bench.redis.get(5, b"item:1", now).unwrap();
    assert_eq!(bench.sent(0), "*2\r\n$3\r\nGET\r\n$6\r\nitem:1\r\n");
    bench.receive(0, b"$8\r\n{\"id\":1}\r\n");
    assert_eq!(bench.take(), [reply(5, "{\"id\":1}")]);
}

#[test]
fn an_error_reply_fails_its_command_only() {
    let mut bench = Bench::new(one_connection());
    let now = bench.now;
    bench.connect(0);
    bench.redis.command(1, &[b"INCR", b"text"], now).unwrap();
    bench.redis.get(2, b"text", now).unwrap();
    bench.sent(0);
    bench.receive(
        0,
        b"-ERR value is not an integer or out of range\r\n$2\r\nhi\r\n",
    );
    assert_eq!(
        bench.take(),
        [
            Seen::Error(1, "ERR value is not an integer or out of range".into()),
            reply(2, "hi")
        ]
    );
    assert!(bench.redis.link(0).conn().is_open());
}

#[test]
fn a_connection_lost_mid_pipeline_fails_what_it_held_and_the_next_command_reconnects() {
    let mut bench = Bench::new(one_connection());
    let now = bench.now;
    bench.connect(0);
    for token in 1..=3 {
        bench.redis.get(token, b"k", now).unwrap();
    }
    bench.sent(0);
    bench.receive(0, b"$1\r\na\r\n$1\r\n");
    bench.receive(0, b"");
    // The first answered; the rest failed, none sent again.
    assert_eq!(
        bench.take(),
        [
            reply(1, "a"),
            failed(2, Failure::Unavailable),
            failed(3, Failure::Unavailable)
        ]
    );
    assert!(bench.redis.link(0).conn().is_idle());
    // A lost connection is no failed connect: no backoff.
    bench.redis.get(4, b"k", now).unwrap();
    assert_eq!(
        bench.sync(0, Ok(())),
        [Order::Close, Order::Connect(address())]
    );
    assert_eq!(bench.sent(0), "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    bench.receive(0, b"$1\r\nb\r\n");
    assert_eq!(bench.take(), [reply(4, "b")]);

    // A reset fails them the same way.
    bench.redis.get(5, b"k", now).unwrap();
    bench.sent(0);
    let reset = io::Error::from(io::ErrorKind::ConnectionReset);
    bench.on_link(0, |link, around| link.failed(reset, now, around));
    assert_eq!(bench.take(), [failed(5, Failure::Unavailable)]);
}

#[test]
fn a_command_unanswered_in_time_fails_and_closes_its_connection() {
    let settings = Settings {
        command_timeout: Duration::from_millis(100),
        ..one_connection()
    };
    let mut bench = Bench::new(settings);
    bench.connect(0);
    let now = bench.now;
    bench.redis.get(1, b"k", now).unwrap();
    bench
        .redis
        .get(2, b"k", now + Duration::from_millis(50))
        .unwrap();
    bench.sent(0);
    assert_eq!(
        bench.redis.deadline(),
        Some(now + Duration::from_millis(100))
    );
    bench.now += Duration::from_millis(99);
    bench.timers();
    assert_eq!(bench.take(), []);
    bench.now += Duration::from_millis(1);
    bench.timers();
    // The second, not late yet, fails with it: its reply could not be told from the first's.
    assert_eq!(
        bench.take(),
        [
            failed(1, Failure::TimedOut),
            failed(2, Failure::Unavailable)
        ]
    );
    assert_eq!(bench.sync(0, Ok(()))[0], Order::Close);
    assert_eq!(bench.redis.deadline(), None);
    // The late reply never reaches the next connection's commands.
    bench.receive(0, b"$1\r\nlate\r\n");
    assert_eq!(bench.take(), []);
}

#[test]
fn auth_and_select_go_first_and_commands_wait_for_them() {
    let url = RedisUrl::parse("redis://:secret@cache/2").unwrap();
    let mut bench = Bench::with_session(&url.session, one_connection());
    let now = bench.now;
    bench.redis.get(1, b"k", now).unwrap();
    bench.connect(0);
    assert!(!bench.redis.link(0).conn().is_open());
    assert_eq!(
        bench.sent(0),
        "*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n"
    );
    bench.redis.get(2, b"k", now).unwrap();
    // Nothing more until both are answered.
    bench.receive(0, b"+OK\r\n");
    assert_eq!(bench.sent(0), "");
    bench.receive(0, b"+OK\r\n$1\r\n");
    let get = "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    assert_eq!(bench.sent(0), get.repeat(2));
    // A reply already in (the server cannot have sent it, but the read goes on).
    bench.receive(0, b"x\r\n$-1\r\n");
    assert_eq!(bench.take(), [reply(1, "x"), reply(2, "nil")]);
}

#[test]
fn a_refused_auth_fails_the_commands_and_backs_off() {
    let url = RedisUrl::parse("redis://:wrong@cache").unwrap();
    let mut bench = Bench::with_session(&url.session, one_connection());
    let now = bench.now;
    bench.redis.get(1, b"k", now).unwrap();
    bench.connect(0);
    bench.sent(0);
    bench.receive(0, b"-WRONGPASS invalid username-password pair\r\n");
    assert_eq!(bench.take(), [failed(1, Failure::SetupRefused)]);
    assert_eq!(bench.redis.get(2, b"k", now), Err(Refused::Unavailable));
    bench.now += Duration::from_millis(100);
    assert_eq!(bench.redis.get(3, b"k", bench.now), Ok(()));
}

#[test]
fn a_refused_connect_backs_off_until_the_server_is_back() {
    let mut bench = Bench::new(one_connection());
    let refused = || Err(io::ErrorKind::ConnectionRefused.into());
    bench.redis.get(1, b"k", bench.now).unwrap();
    bench.sync(0, refused());
    assert_eq!(bench.take(), [failed(1, Failure::Unavailable)]);
    assert_eq!(
        bench.redis.get(2, b"k", bench.now),
        Err(Refused::Unavailable)
    );
    bench.now += Duration::from_millis(100);
    bench.redis.get(3, b"k", bench.now).unwrap();
    bench.sync(0, refused());
    assert_eq!(bench.take(), [failed(3, Failure::Unavailable)]);
    // Doubled: 200 ms now.
    bench.now += Duration::from_millis(199);
    assert_eq!(
        bench.redis.get(4, b"k", bench.now),
        Err(Refused::Unavailable)
    );
    bench.now += Duration::from_millis(1);
    bench.redis.get(5, b"k", bench.now).unwrap();
    bench.connect(0);
    bench.sent(0);
    bench.receive(0, b"$1\r\nz\r\n");
    assert_eq!(bench.take(), [reply(5, "z")]);
}

#[test]
fn a_connect_past_its_deadline_fails_like_a_refused_one() {
    let mut bench = Bench::new(one_connection());
    bench.redis.get(1, b"k", bench.now).unwrap();
    let now = bench.now;
    assert!(matches!(
        bench.on_link(0, |link, around| link.order(now, around)),
        Some(Order::Connect(_))
    ));
    bench.now += Duration::from_secs(1);
    assert_eq!(bench.redis.deadline(), Some(bench.now));
    bench.timers();
    assert_eq!(bench.take(), [failed(1, Failure::TimedOut)]);
    assert_eq!(
        bench.redis.get(2, b"k", bench.now),
        Err(Refused::Unavailable)
    );
}

#[test]
fn garbage_or_a_reply_to_nothing_closes_the_connection() {
    let mut bench = Bench::new(one_connection());
    let now = bench.now;
    bench.connect(0);
    bench.redis.get(1, b"k", now).unwrap();
    bench.redis.get(2, b"k", now).unwrap();
    bench.sent(0);
    bench.receive(0, b"$-1\r\nHTTP/1.1 200 OK\r\n");
    assert_eq!(
        bench.take(),
        [
            reply(1, "nil"),
            failed(2, Failure::Protocol(DecodeError::UnknownType(b'H')))
        ]
    );
    bench.redis.get(3, b"k", now).unwrap();
    bench.sync(0, Ok(()));
    bench.sent(0);
    bench.receive(0, b"$-1\r\n:1\r\n");
    assert_eq!(bench.take(), [reply(3, "nil")]);
    assert!(bench.redis.link(0).conn().is_idle());
}

#[test]
fn a_reply_over_the_limit_fails_without_growing_the_input() {
    let settings = Settings {
        limits: Limits {
            max_len: 1024,
            ..Limits::default()
        },
        ..one_connection()
    };
    let mut bench = Bench::new(settings);
    let now = bench.now;
    bench.connect(0);
    bench.redis.get(1, b"k", now).unwrap();
    bench.sent(0);
    bench.receive(0, b"$1000000\r\n");
    assert_eq!(
        bench.take(),
        [failed(1, Failure::Protocol(DecodeError::TooLarge))]
    );
    // A reply that never ends: refused once past the limit.
    bench.redis.get(2, b"k", now).unwrap();
    bench.sync(0, Ok(()));
    bench.sent(0);
    bench.receive(0, &[b'+'; 1000]);
    assert_eq!(bench.take(), []);
    bench.receive(0, &[b'+'; 100]);
    assert_eq!(
        bench.take(),
        [failed(2, Failure::Protocol(DecodeError::TooLarge))]
    );
}

#[test]
fn resp3_pushes_and_attributes_are_no_commands_replies() {
    let mut bench = Bench::new(one_connection());
    let now = bench.now;
    bench.connect(0);
    bench.redis.get(1, b"k", now).unwrap();
    bench.sent(0);
    bench.receive(
        0,
        b">2\r\n+invalidate\r\n*1\r\n+k\r\n|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n",
    );
    assert_eq!(bench.take(), [reply(1, "v")]);
}

#[test]
fn a_full_connection_refuses_commands() {
    let settings = Settings {
        max_in_flight: 2,
        queue_bytes: 1 << 20,
        ..one_connection()
    };
    let mut bench = Bench::new(settings);
    let now = bench.now;
    bench.redis.get(1, b"k", now).unwrap();
    bench.redis.get(2, b"k", now).unwrap();
    assert_eq!(bench.redis.get(3, b"k", now), Err(Refused::Busy));
    // By bytes: a value the size of the queue fills it.
    let settings = Settings {
        queue_bytes: 100,
        ..one_connection()
    };
    let mut bench = Bench::new(settings);
    let ttl = Duration::from_secs(1);
    bench.redis.set_px(1, b"k", &[b'x'; 100], ttl, now).unwrap();
    assert_eq!(bench.redis.get(2, b"k", now), Err(Refused::Busy));
}

#[test]
fn a_keys_commands_all_go_to_one_connection() {
    let settings = Settings {
        connections: 4,
        ..Settings::default()
    };
    let mut bench = Bench::new(settings);
    let now = bench.now;
    for index in 0..4 {
        bench.connect(index);
    }
    let ttl = Duration::from_secs(1);
    for id in 0..64u64 {
        let key = format!("item:{id}");
        bench
            .redis
            .set_px(id * 2, key.as_bytes(), b"old", ttl, now)
            .unwrap();
        bench.redis.del(id * 2 + 1, key.as_bytes(), now).unwrap();
    }
    let mut used = 0;
    for index in 0..4 {
        let sent = bench.sent(index);
        used += usize::from(!sent.is_empty());
        // Each SET is followed by its own key's DEL, on the same connection.
        let keys: Vec<&str> = sent
            .split("\r\n")
            .filter(|line| line.starts_with("item:"))
            .collect();
        for pair in keys.chunks(2) {
            assert_eq!(pair[0], pair[1]);
        }
    }
    // And the keys spread over the connections.
    assert_eq!(used, 4);
}
