//! One worker's upstream driven with bytes: the links' orders carried out by hand, the
//! upstream's responses handed in as a socket would deliver them.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use super::*;
use crate::http::{FieldLines, Flow, Origin, Request, Version, WINDOW};
use crate::link::Order;

/// What the sink saw, by token: a response whose body came whole with its head, its status
/// and body; the head of one whose body goes on arriving; the end of that body, whole or cut
/// short (what was taken of it); or a failure.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Response(u64, u16, Vec<u8>),
    Began(u64, u16),
    Cut(u64, Vec<u8>),
    /// The last word on a body its client had left.
    Ended(u64),
    Failed(u64, Failure),
}

/// A client of the upstream's responses: it notes what it is given, and takes the bodies
/// as they arrive unless `stalled`.
#[derive(Default)]
struct Client {
    seen: Vec<Seen>,
    /// The bodies arriving: token, status, pipe, what was taken of it.
    arriving: Vec<(u64, u16, Pipe, Vec<u8>)>,
    stalled: bool,
}

impl Client {
    fn event(&mut self, token: u64, event: Event<'_>) {
        match event {
            Event::Response(response) if response.body.flow() != Flow::Open => {
                let body = taken(&response.body);
                self.seen.push(Seen::Response(token, response.status, body));
            }
            Event::Response(response) => {
                self.seen.push(Seen::Began(token, response.status));
                self.arriving
                    .push((token, response.status, response.body, Vec::new()));
                self.take(token);
            }
            Event::Moved { last } => {
                self.take(token);
                if !last {
                    return;
                }
                let Some(at) = self.arriving.iter().position(|a| a.0 == token) else {
                    return self.seen.push(Seen::Ended(token));
                };
                let (_, status, pipe, mut body) = self.arriving.remove(at);
                match pipe.flow() {
                    Flow::Ended => {
                        body.extend(taken(&pipe));
                        self.seen.push(Seen::Response(token, status, body));
                    }
                    _ => self.seen.push(Seen::Cut(token, body)),
                }
            }
            Event::Failed(failure) => self.seen.push(Seen::Failed(token, failure)),
        }
    }

    /// Takes what waits of `token`'s body, unless stalled.
    fn take(&mut self, token: u64) {
        if self.stalled {
            return;
        }
        if let Some((_, _, pipe, body)) = self.arriving.iter_mut().find(|a| a.0 == token) {
            body.extend(taken(pipe));
        }
    }

    /// Takes what waits of every body arriving.
    fn take_all(&mut self) {
        for (_, _, pipe, body) in &mut self.arriving {
            body.extend(taken(pipe));
        }
    }
}

/// What waits in `pipe`, taken.
fn taken(pipe: &Pipe) -> Vec<u8> {
    let mut bytes = Vec::new();
    pipe.take(|waiting| {
        bytes.extend_from_slice(waiting);
        waiting.len()
    });
    bytes
}

/// A sink that hands what it is given to `client`.
fn recorder(client: &mut Client) -> impl FnMut(u64, Event<'_>) + '_ {
    |token, event| client.event(token, event)
}

struct Bench {
    upstream: Upstream,
    now: Instant,
    client: Client,
}

fn address() -> Address {
    Address::Tcp(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080))
}

fn request(method: &'static [u8]) -> Forward<'static> {
    Forward {
        method,
        target: b"/x",
        version: Version::Http11,
        client: Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
        https: false,
        body: b"",
    }
}

const HOST: [(&[u8], &[u8]); 1] = [(b"Host", b"up")];

impl Bench {
    fn new(settings: Settings) -> Bench {
        Bench {
            upstream: Upstream::new(address(), settings),
            now: Instant::now(),
            client: Client::default(),
        }
    }

    fn forward(&mut self, token: u64, method: &'static [u8]) -> Result<(), Refused> {
        self.upstream
            .forward(token, &request(method), HOST, self.now)
    }

    fn on_link<T>(
        &mut self,
        index: usize,
        f: impl FnOnce(&mut Link, &mut Around<'_, Dyn<'_>>) -> T,
    ) -> T {
        let mut sink = recorder(&mut self.client);
        let mut sink: Dyn<'_> = &mut sink;
        self.upstream.on_link(index, self.now, &mut sink, f)
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
                Order::Close => self.upstream.link_mut(index).closed(),
            }
        }
        orders
    }

    fn connect(&mut self, index: usize) {
        self.sync(index, Ok(()));
        assert!(self.upstream.link(index).conn().is_open());
    }

    /// Everything link `index` has to send, reported sent.
    fn sent(&mut self, index: usize) -> String {
        let link = self.upstream.link_mut(index);
        let bytes = link.unsent().to_vec();
        link.sent(bytes.len());
        String::from_utf8(bytes).unwrap()
    }

    fn receive(&mut self, index: usize, bytes: &[u8]) {
        let now = self.now;
        self.on_link(index, |link, around| link.receive(bytes, now, around));
    }

    fn timers(&mut self) {
        self.upstream
            .on_timers(self.now, &mut recorder(&mut self.client));
    }

    fn take(&mut self) -> Vec<Seen> {
        std::mem::take(&mut self.client.seen)
    }
}

fn ok(token: u64, body: &str) -> Seen {
    Seen::Response(token, 200, body.as_bytes().to_vec())
}

/// One connection, and none opened beside it while it streams a body.
fn one_connection() -> Settings {
    Settings {
        connections: 1,
        streams: 0,
        ..Settings::default()
    }
}

#[test]
fn pipelined_responses_are_matched_to_their_requests_in_order() {
    let mut bench = Bench::new(one_connection());
    for token in 1..=3 {
        bench.forward(token, b"GET").unwrap();
    }
    bench.connect(0);
    let sent = bench.sent(0);
    assert_eq!(sent.matches("GET /x HTTP/1.1\r\nHost: up\r\n").count(), 3);
    assert!(sent.contains("X-Forwarded-For: 10.0.0.1\r\n"));
    bench.receive(
        0,
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX-A: b\r\n\r\na\
          HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb",
    );
    // The third's head, split.
    bench.receive(0, b"HTTP/1.1 200 OK\r\nContent-");
    assert_eq!(bench.take(), [ok(1, "a"), ok(2, "b")]);
    bench.receive(0, b"Length: 1\r\n\r\nc");
    assert_eq!(bench.take(), [ok(3, "c")]);
    assert_eq!(bench.upstream.link(0).conn().in_flight(), 0);
}

#[test]
fn a_response_hands_out_its_fields() {
    let mut bench = Bench::new(one_connection());
    bench.forward(1, b"GET").unwrap();
    bench.connect(0);
    bench.sent(0);
    let mut fields = Vec::new();
    let bytes =
        b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\nConnection: x\r\nX: y\r\nX-A: b\r\n\r\nhi";
    let now = bench.now;
    let mut sink = |token, event: Event<'_>| {
        if let Event::Response(response) = event {
            assert_eq!(
                (token, response.status, taken(&response.body)),
                (1, 201, b"hi".to_vec())
            );
            fields = response
                .fields
                .iter()
                .map(|(n, v)| (n.to_vec(), v.to_vec()))
                .collect();
        }
    };
    bench.upstream.on_link(0, now, &mut sink, |link, around| {
        link.receive(bytes, now, around)
    });
    // Connection and what it names are hop-by-hop.
    assert_eq!(
        fields,
        [
            (b"Content-Length".to_vec(), b"2".to_vec()),
            (b"X-A".to_vec(), b"b".to_vec())
        ]
    );
}

#[test]
fn chunked_close_delimited_and_interim_responses_are_passed_on_as_they_arrive() {
    let mut bench = Bench::new(one_connection());
    bench.forward(1, b"GET").unwrap();
    bench.forward(2, b"HEAD").unwrap();
    bench.forward(3, b"GET").unwrap();
    bench.connect(0);
    bench.sent(0);
    bench.receive(
        0,
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n\
          HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
    );
    // The interim one dropped, the head passed on with what came of the body.
    assert_eq!(bench.take(), [Seen::Began(1, 200)]);
    assert_eq!(bench.client.arriving[0].3, b"abc");
    bench.receive(0, b"2\r\nde\r\n0\r\n\r\n");
    assert_eq!(bench.take(), [ok(1, "abcde")]);
    // HEAD: no body whatever Content-Length says; then a body to the close.
    bench.receive(
        0,
        b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nHTTP/1.1 200 OK\r\n\r\nto the end",
    );
    assert_eq!(bench.take(), [ok(2, ""), Seen::Began(3, 200)]);
    bench.receive(0, b"");
    assert_eq!(bench.take(), [ok(3, "to the end")]);
    // Closed quietly: the next request opens it again.
    assert!(bench.upstream.link(0).conn().is_idle());
    bench.forward(4, b"GET").unwrap();
    assert_eq!(
        bench.sync(0, Ok(())),
        [Order::Close, Order::Connect(address())]
    );
}

#[test]
fn a_response_that_is_not_keep_alive_closes_and_the_connection_reopens() {
    let mut bench = Bench::new(one_connection());
    bench.forward(1, b"GET").unwrap();
    bench.forward(2, b"GET").unwrap();
    bench.forward(3, b"POST").unwrap();
    bench.connect(0);
    bench.sent(0);
    bench.receive(
        0,
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\na",
    );
    // The GET sent after it goes again, the POST fails.
    assert_eq!(
        bench.take(),
        [ok(1, "a"), Seen::Failed(3, Failure::Unavailable)]
    );
    assert_eq!(
        bench.sync(0, Ok(())),
        [Order::Close, Order::Connect(address())]
    );
    let sent = bench.sent(0);
    assert_eq!(sent.matches("GET /x").count(), 1);
    bench.receive(0, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb");
    assert_eq!(bench.take(), [ok(2, "b")]);
}

#[test]
fn the_upstreams_close_resends_idempotent_requests_once_and_fails_a_post() {
    let mut bench = Bench::new(one_connection());
    bench.forward(1, b"GET").unwrap();
    bench.forward(2, b"POST").unwrap();
    bench.forward(3, b"PUT").unwrap();
    bench.connect(0);
    bench.sent(0);
    // The keep-alive race: closed as the requests went out.
    bench.receive(0, b"");
    assert_eq!(bench.take(), [Seen::Failed(2, Failure::Unavailable)]);
    bench.sync(0, Ok(()));
    let sent = bench.sent(0);
    assert!(sent.starts_with("GET /x") && sent.contains("PUT /x") && !sent.contains("POST"));
    // Closed again: they were sent once more already.
    bench.receive(0, b"");
    assert_eq!(
        bench.take(),
        [
            Seen::Failed(1, Failure::Unavailable),
            Seen::Failed(3, Failure::Unavailable)
        ]
    );
}

#[test]
fn a_reset_within_a_body_passed_on_cuts_it_short_and_resends_the_rest() {
    let mut bench = Bench::new(one_connection());
    bench.forward(1, b"GET").unwrap();
    bench.forward(2, b"GET").unwrap();
    bench.connect(0);
    bench.sent(0);
    bench.receive(0, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab");
    let now = bench.now;
    let reset = io::Error::from(io::ErrorKind::ConnectionReset);
    bench.on_link(0, |link, around| link.failed(reset, now, around));
    assert_eq!(
        bench.take(),
        [Seen::Began(1, 200), Seen::Cut(1, b"ab".to_vec())]
    );
    bench.sync(0, Ok(()));
    assert_eq!(bench.sent(0).matches("GET /x").count(), 1);
}

#[test]
fn a_smuggled_second_response_closes_the_connection_and_is_never_passed_on() {
    let mut bench = Bench::new(one_connection());
    bench.forward(1, b"GET").unwrap();
    bench.forward(2, b"POST").unwrap();
    bench.connect(0);
    bench.sent(0);
    // Two Content-Lengths that disagree.
    bench.receive(
        0,
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 30\r\n\r\na\
          HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb",
    );
    assert_eq!(
        bench.take(),
        [
            Seen::Failed(1, Failure::Unavailable),
            Seen::Failed(2, Failure::Unavailable)
        ]
    );
    assert_eq!(
        bench.sync(0, Err(io::ErrorKind::ConnectionRefused.into()))[0],
        Order::Close
    );
}

#[test]
fn bytes_no_request_awaits_close_the_connection() {
    let mut bench = Bench::new(one_connection());
    bench.forward(1, b"GET").unwrap();
    bench.connect(0);
    bench.sent(0);
    bench.receive(
        0,
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na\
          HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb",
    );
    assert_eq!(bench.take(), [ok(1, "a")]);
    assert!(bench.upstream.link(0).conn().is_idle());
}

#[test]
fn a_request_unanswered_in_time_fails_with_504_via_the_timers() {
    let settings = Settings {
        response_timeout: Duration::from_secs(1),
        ..one_connection()
    };
    let mut bench = Bench::new(settings);
    bench.forward(1, b"GET").unwrap();
    bench.connect(0);
    bench.sent(0);
    let deadline = bench.upstream.deadline().unwrap();
    assert_eq!(deadline, bench.now + Duration::from_secs(1));
    bench.now = deadline;
    bench.timers();
    assert_eq!(bench.take(), [Seen::Failed(1, Failure::TimedOut)]);
    assert_eq!(bench.sync(0, Ok(()))[0], Order::Close);
    assert_eq!(bench.upstream.deadline(), None);
}

/// The GETs of `tokens` pipelined on connection 0 of a bench with `settings`, and the head
/// of the first's response, with `len` bytes of body announced.
fn streaming(settings: Settings, len: usize, tokens: &[u64]) -> Bench {
    let mut bench = Bench::new(settings);
    for &token in tokens {
        bench.forward(token, b"GET").unwrap();
    }
    bench.connect(0);
    bench.sent(0);
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\n\r\n");
    bench.receive(0, head.as_bytes());
    bench
}

/// Hands link 0 `piece` while it wants to be read; returns how much it took.
fn feed(bench: &mut Bench, piece: &[u8], most: usize) -> usize {
    let mut given = 0;
    while given < most && bench.upstream.link(0).wants_input() {
        bench.receive(0, piece);
        given += piece.len();
    }
    given
}

#[test]
fn a_body_is_passed_on_as_it_arrives_and_not_read_past_a_window_its_client_leaves() {
    let len = 4 * WINDOW;
    let mut bench = streaming(one_connection(), len, &[1, 2]);
    assert_eq!(bench.take(), [Seen::Began(1, 200)]);
    bench.client.stalled = true;
    let piece = [7u8; 16 * 1024];
    // Read up to a window (the read that reaches it taken whole), then no more.
    let given = feed(&mut bench, &piece, len);
    assert_eq!(given, WINDOW);
    assert!(!bench.upstream.link(0).wants_input());
    assert!(bench.upstream.link_mut(0).read_buffer(false).is_none());
    // Streaming, it takes no new request: the next opens no pipelining behind it.
    assert!(!bench.upstream.link(0).conn().accepting());
    // The client takes it: read again, to the end.
    bench.client.take_all();
    assert!(bench.upstream.link(0).wants_input());
    bench.client.stalled = false;
    let rest = feed(&mut bench, &piece, len - given);
    assert_eq!(given + rest, len);
    let seen = bench.take();
    assert!(matches!(&seen[..], [Seen::Response(1, 200, body)] if body.len() == len));
    // The GET behind it was sent again once the pipe was full, here for want of another
    // connection: the first answer is dropped, the second is its client's.
    assert_eq!(bench.sent(0).matches("GET /x").count(), 1);
    bench.receive(0, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na");
    assert_eq!(bench.take(), []);
    bench.receive(0, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb");
    assert_eq!(bench.take(), [ok(2, "b")]);
}

#[test]
fn a_body_neither_sent_nor_taken_for_the_timeout_is_cut_and_those_behind_it_resent() {
    let settings = Settings {
        response_timeout: Duration::from_secs(1),
        ..one_connection()
    };
    let mut bench = streaming(settings, 4 * WINDOW, &[1]);
    bench.client.stalled = true;
    feed(&mut bench, &[7u8; 16 * 1024], 4 * WINDOW);
    bench.take();
    // Taken by its deadline: it moves, and its deadline with it.
    bench.now += Duration::from_secs(1);
    bench.client.take_all();
    bench.timers();
    assert_eq!(bench.take(), []);
    // A request meanwhile waits in the queue, not behind the body.
    bench.now += Duration::from_millis(500);
    bench.forward(2, b"GET").unwrap();
    assert_eq!(bench.upstream.queued(), 1);
    // Then nothing moves either way: cut short, the connection closed, the GET sent on the
    // next one.
    bench.now += Duration::from_millis(500);
    bench.timers();
    let seen = bench.take();
    assert!(matches!(&seen[..], [Seen::Cut(1, body)] if body.len() == WINDOW));
    assert_eq!(
        bench.sync(0, Ok(())),
        [Order::Close, Order::Connect(address())]
    );
    assert_eq!(bench.sent(0).matches("GET /x").count(), 1);
    assert_eq!(bench.upstream.queued(), 0);
}

#[test]
fn a_connection_streaming_to_a_slow_client_has_another_open_in_its_place_until_it_ends() {
    let settings = Settings {
        streams: 2,
        ..one_connection()
    };
    let mut bench = streaming(settings, 2 * WINDOW, &[1]);
    // While its client keeps up, a body holds its connection briefly: the next request
    // waits for it.
    bench.forward(2, b"GET").unwrap();
    assert_eq!(bench.upstream.queued(), 1);
    // Its client falls behind, its pipe fills: the request opens connection 1.
    bench.client.stalled = true;
    feed(&mut bench, &[7u8; 16 * 1024], 2 * WINDOW);
    assert_eq!(bench.upstream.queued(), 0);
    bench.connect(1);
    bench.sent(1);
    // That one streams too: connection 2 opens in its place, and takes requests.
    bench.receive(
        1,
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", 2 * WINDOW).as_bytes(),
    );
    while bench.upstream.link(1).wants_input() {
        bench.receive(1, &[8u8; 16 * 1024]);
    }
    bench.forward(3, b"GET").unwrap();
    bench.connect(2);
    bench.sent(2);
    bench.receive(2, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nc");
    bench.forward(4, b"GET").unwrap();
    bench.sent(2);
    assert_eq!(bench.upstream.link(2).conn().in_flight(), 1);
    bench.receive(2, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nd");
    let seen = bench.take();
    assert_eq!(seen[2..], [ok(3, "c"), ok(4, "d")]);
    // The first body ends: its connection takes requests again, one too many with
    // connection 2, and closes, having nothing in flight; connection 2 stays.
    bench.client.stalled = false;
    bench.client.take_all();
    feed(&mut bench, &[7u8; 16 * 1024], WINDOW);
    assert!(
        matches!(&bench.take()[..], [Seen::Response(1, 200, body)] if body.len() == 2 * WINDOW)
    );
    assert_eq!(bench.sync(0, Ok(())), [Order::Close]);
    assert!(bench.upstream.link(0).conn().is_idle());
    assert!(bench.upstream.link(2).conn().is_open());
}

#[test]
fn requests_behind_a_body_its_client_reads_slowly_go_elsewhere_or_time_out_alone() {
    let settings = Settings {
        response_timeout: Duration::from_secs(1),
        streams: 1,
        ..one_connection()
    };
    let mut bench = streaming(settings, 2 * WINDOW, &[1]);
    // Pipelined behind the body's request before its head came.
    bench.forward(2, b"GET").unwrap();
    bench.forward(3, b"POST").unwrap();
    bench.sent(0);
    bench.client.stalled = true;
    let given = feed(&mut bench, &[7u8; 16 * 1024], 2 * WINDOW);
    // Its pipe full, the GET is sent again on another connection and answered there; the
    // POST, which may not be sent twice, waits.
    bench.connect(1);
    assert_eq!(bench.sent(1).matches("GET /x").count(), 1);
    bench.receive(1, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb");
    assert_eq!(bench.take(), [Seen::Began(1, 200), ok(2, "b")]);
    // The client takes some in time: its body goes on, the POST past its deadline fails
    // alone.
    bench.now += Duration::from_secs(1);
    bench.client.take_all();
    bench.timers();
    assert_eq!(bench.take(), [Seen::Failed(3, Failure::TimedOut)]);
    assert!(bench.upstream.link(0).conn().is_open());
    // The body ends whole; the responses behind it are read and dropped.
    bench.client.stalled = false;
    feed(&mut bench, &[7u8; 16 * 1024], 2 * WINDOW - given);
    bench.receive(
        0,
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx\
          HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\ny",
    );
    let seen = bench.take();
    assert!(matches!(&seen[..], [Seen::Response(1, 200, body)] if body.len() == 2 * WINDOW));
    assert_eq!(bench.upstream.link(0).conn().in_flight(), 0);
}

#[test]
fn a_body_its_client_left_is_read_and_dropped_and_the_next_response_follows() {
    let mut bench = streaming(one_connection(), 2 * WINDOW, &[1, 2]);
    bench.take();
    // The client goes away: its end of the pipe with it.
    bench.client.arriving.clear();
    let given = feed(&mut bench, &[7u8; 64 * 1024], 2 * WINDOW);
    assert_eq!(given, 2 * WINDOW, "read past what its pipe would hold");
    bench.receive(0, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb");
    // Its last word comes all the same (its token is free again), then the next answer.
    assert_eq!(bench.take(), [Seen::Ended(1), ok(2, "b")]);
}

#[test]
fn a_refused_connect_fails_at_once_and_backs_off_until_the_upstream_is_back() {
    let mut bench = Bench::new(Settings::default());
    bench.forward(1, b"POST").unwrap();
    let refused = || Err(io::ErrorKind::ConnectionRefused.into());
    bench.sync(0, refused());
    // Never sent, so even a POST could go elsewhere; but every connection may wait.
    assert_eq!(bench.take(), [Seen::Failed(1, Failure::Unavailable)]);
    assert_eq!(bench.forward(2, b"GET"), Err(Refused::Unavailable));
    bench.now += Duration::from_millis(100);
    bench.forward(3, b"GET").unwrap();
    let index = (0..4)
        .find(|&i| !bench.upstream.link(i).conn().is_idle())
        .unwrap();
    bench.sync(index, refused());
    assert_eq!(bench.take(), [Seen::Failed(3, Failure::Unavailable)]);
    // Doubled: 200 ms now.
    bench.now += Duration::from_millis(199);
    assert_eq!(bench.forward(4, b"GET"), Err(Refused::Unavailable));
    bench.now += Duration::from_millis(1);
    bench.forward(5, b"GET").unwrap();
    let index = (0..4)
        .find(|&i| !bench.upstream.link(i).conn().is_idle())
        .unwrap();
    bench.connect(index);
    bench.sent(index);
    bench.receive(index, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz");
    assert_eq!(bench.take(), [ok(5, "z")]);
    // Back: no backoff.
    bench.forward(6, b"GET").unwrap();
}

#[test]
fn a_connect_past_its_deadline_fails_like_a_refused_one() {
    let mut bench = Bench::new(one_connection());
    bench.forward(1, b"GET").unwrap();
    let now = bench.now;
    assert!(matches!(
        bench.on_link(0, |link, around| link.order(now, around)),
        Some(Order::Connect(_))
    ));
    bench.now += Duration::from_secs(2);
    assert_eq!(bench.upstream.deadline(), Some(bench.now));
    bench.timers();
    assert_eq!(bench.take(), [Seen::Failed(1, Failure::Unavailable)]);
}

#[test]
fn requests_go_to_the_least_busy_connection_then_queue_then_are_refused() {
    let settings = Settings {
        connections: 2,
        depth: 2,
        queue_bytes: 1,
        ..Settings::default()
    };
    let mut bench = Bench::new(settings);
    bench.connect(0);
    // Not written, nothing of it on the connection.
    assert!(matches!(
        bench.upstream.forward(
            7,
            &request(b"GET"),
            [(&b"Host"[..], &b"a\nb"[..])],
            bench.now
        ),
        Err(Refused::Invalid(_))
    ));
    assert_eq!(bench.upstream.link(0).conn().in_flight(), 0);
    bench.forward(1, b"GET").unwrap();
    // Connection 0 is busy: connection 1 opens for the next.
    bench.forward(2, b"GET").unwrap();
    bench.connect(1);
    bench.forward(3, b"GET").unwrap();
    bench.forward(4, b"GET").unwrap();
    let counts = |bench: &Bench| [0, 1].map(|i| bench.upstream.link(i).conn().in_flight());
    assert_eq!(counts(&bench), [2, 2]);
    bench.forward(5, b"GET").unwrap();
    assert_eq!(bench.upstream.queued(), 1);
    assert_eq!(bench.forward(6, b"GET"), Err(Refused::Busy));
    // A response makes room: the queued request goes out on that connection.
    bench.sent(0);
    bench.receive(0, b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na");
    assert_eq!(bench.take(), [ok(1, "a")]);
    assert_eq!(bench.upstream.queued(), 0);
    assert_eq!(counts(&bench), [2, 2]);
    assert_eq!(bench.sent(0).matches("GET /x").count(), 1);
}

#[test]
fn a_queued_request_past_its_deadline_times_out() {
    let settings = Settings {
        connections: 1,
        depth: 1,
        response_timeout: Duration::from_secs(1),
        ..Settings::default()
    };
    let mut bench = Bench::new(settings);
    bench.connect(0);
    bench.forward(1, b"GET").unwrap();
    bench.now += Duration::from_millis(500);
    bench.forward(2, b"GET").unwrap();
    assert_eq!(bench.upstream.queued(), 1);
    bench.now += Duration::from_millis(500);
    bench.timers();
    // The first timed out (its connection closed); the second goes on a new one.
    assert_eq!(bench.take(), [Seen::Failed(1, Failure::TimedOut)]);
    assert_eq!(bench.upstream.queued(), 0);
    bench.now += Duration::from_millis(500);
    bench.timers();
    assert_eq!(bench.take(), [Seen::Failed(2, Failure::TimedOut)]);
}

/// A proxy with an auth service before its upstream, one connection each: link 0 is the
/// upstream's, link 1 the auth service's.
struct Gate {
    proxy: Proxy,
    now: Instant,
    client: Client,
}

impl Gate {
    fn new() -> Gate {
        let auth = AuthSettings {
            address: Address::Tcp(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9090)),
            path: "/_auth".to_string(),
            prefix: "/api/".to_string(),
            grants: vec!["X-User-Id".to_string()],
        };
        let settings = one_connection();
        Gate {
            proxy: Proxy::new(ProxySettings {
                address: address(),
                settings,
                auth: Some((auth, settings)),
            }),
            now: Instant::now(),
            client: Client::default(),
        }
    }

    fn forward(&mut self, token: u64, path: &'static str, lines: &'static [u8]) {
        let request = Request {
            method: crate::http::Method::Post,
            method_bytes: b"POST",
            version: Version::Http11,
            path,
            target: path,
            authority: b"a",
            fields: Default::default(),
            field_lines: FieldLines::new(lines, 0),
            body: b"hello",
        };
        let origin = Origin {
            client: None,
            https: true,
        };
        self.proxy
            .forward_request(token, &request, origin, self.now)
            .unwrap();
    }

    fn on_link<T>(
        &mut self,
        index: usize,
        f: impl FnOnce(&mut Link, &mut Around<'_, Dyn<'_>>) -> T,
    ) -> T {
        self.proxy
            .on_link(index, self.now, &mut recorder(&mut self.client), f)
    }

    /// Link `index` connected, and all it has to send, reported sent.
    fn sent(&mut self, index: usize) -> String {
        let now = self.now;
        while let Some(order) = self.on_link(index, |link, around| link.order(now, around)) {
            match order {
                Order::Connect(_) => {
                    self.on_link(index, |link, around| link.connected(Ok(()), now, around))
                }
                Order::Close => self.proxy.link_mut(index).closed(),
            }
        }
        let link = self.proxy.link_mut(index);
        let bytes = link.unsent().to_vec();
        link.sent(bytes.len());
        String::from_utf8(bytes).unwrap()
    }

    fn receive(&mut self, index: usize, bytes: &[u8]) {
        let now = self.now;
        self.on_link(index, |link, around| link.receive(bytes, now, around));
    }
}

#[test]
fn a_held_request_goes_on_with_the_granted_fields_only_after_the_services_yes() {
    let mut gate = Gate::new();
    let lines = b"Host: a\r\nAuthorization: Bearer t\r\nX-User-Id: 1\r\nCookie: c=1\r\n";
    gate.forward(7, "/api/x", lines);
    assert_eq!(gate.sent(0), "", "sent before the service said yes");
    let asked = gate.sent(1);
    assert!(asked.starts_with(
        "GET /_auth HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer t\r\nCookie: c=1\r\n"
    ));
    assert!(asked.contains("X-Forwarded-Method: POST\r\nX-Forwarded-Uri: /api/x\r\n"));
    assert!(!asked.contains("X-User-Id") && !asked.contains("hello"));

    gate.receive(
        1,
        b"HTTP/1.1 200 OK\r\nX-User-Id: 42\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(gate.client.seen, []);
    let forwarded = gate.sent(0);
    assert!(forwarded.starts_with("POST /api/x HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer t\r\n"));
    assert_eq!(forwarded.matches("X-User-Id").count(), 1);
    assert!(
        forwarded.ends_with("Content-Length: 5\r\nX-User-Id: 42\r\n\r\nhello"),
        "{forwarded}"
    );

    // A no is the client's; any other answer is 503; neither reaches the upstream.
    gate.forward(8, "/api/y", lines);
    gate.forward(9, "/api/z", lines);
    gate.sent(1);
    gate.receive(
        1,
        b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n\
          HTTP/1.1 302 Found\r\nLocation: /login\r\nContent-Length: 0\r\n\r\n",
    );
    assert_eq!(
        gate.client.seen,
        [
            Seen::Failed(8, Failure::Denied(401)),
            Seen::Failed(9, Failure::AuthUnavailable)
        ]
    );
    assert_eq!(gate.sent(0), "");

    // Outside the prefix: straight on, the client's X-User-Id dropped.
    gate.forward(10, "/public/x", lines);
    let forwarded = gate.sent(0);
    assert!(
        forwarded.starts_with("POST /public/x HTTP/1.1\r\n") && !forwarded.contains("X-User-Id")
    );
}
