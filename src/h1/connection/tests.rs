use super::*;

use crate::http::{ContentType, Pipe, Request};

/// Answers `/later` through a ticket, anything else at once with `now` and the body.
#[derive(Default)]
struct Tickets(Vec<Ticket>, Vec<u8>);

/// Takes bodies of up to 16 bytes.
const TEST_MAX_BODY: usize = 16;
/// The length of the answer to `/big`, as large as a `/cached-queries?count=500`.
const BIG: usize = 16 * 1024;
static BIG_BODY: [u8; BIG] = [b'b'; BIG];

impl Handler for Tickets {
    fn handle<'a>(&'a mut self, request: &'a Request<'a>, ticket: Ticket) -> Reply<'a> {
        if request.path == "/later" {
            self.0.push(ticket);
            return Reply::Later;
        }
        if request.path == "/big" {
            return Reply::Now(Answer::ok(ContentType::Plain, &BIG_BODY));
        }
        self.1.clear();
        self.1.extend_from_slice(b"now");
        self.1.extend_from_slice(request.body);
        Reply::Now(Answer::ok(ContentType::Plain, &self.1))
    }
}

fn holds_buffers(conn: &Connection) -> bool {
    conn.input.capacity() > 0
        || conn.output.capacity() > 0
        || conn.queue.iter().any(|queued| queued.bytes.capacity() > 0)
}

/// Sends everything, as a backend does once the kernel took it.
fn send_all(conn: &mut Connection, buffers: &mut BufferPool, now: Instant) -> Vec<u8> {
    let unsent = conn.unsent().to_vec();
    conn.mark_sent(unsent.len(), now);
    conn.give_back_idle(buffers);
    unsent
}

#[test]
fn buffers_are_held_only_while_bytes_are_in_flight() {
    let (date, now) = (HttpDate::new(), Instant::now());
    let mut buffers = BufferPool::default();
    let mut handler = Tickets::default();
    let mut conn = Connection::new(0, now);
    assert!(!holds_buffers(&conn));

    let request = b"GET /now HTTP/1.1\r\nHost: a\r\n\r\nGET /later HTTP/1.1\r\n";
    conn.input(&mut buffers).extend_from_slice(request);
    conn.process(&mut handler, TEST_MAX_BODY, &date, now, &mut buffers);
    conn.give_back_idle(&mut buffers);
    // Half a request waits in the input; a response waits to be sent.
    assert!(conn.input.capacity() > 0 && conn.unsent().ends_with(b"\r\n\r\nnow"));
    assert!(send_all(&mut conn, &mut buffers, now).ends_with(b"\r\n\r\nnow"));
    assert_eq!(conn.output.capacity(), 0);

    conn.input(&mut buffers)
        .extend_from_slice(b"Host: a\r\n\r\n");
    conn.process(&mut handler, TEST_MAX_BODY, &date, now, &mut buffers);
    conn.give_back_idle(&mut buffers);
    // A response in the works holds no buffer until it comes.
    assert!(!holds_buffers(&conn));
    assert_eq!(conn.queue.len(), 1);

    let ticket = handler.0.pop().unwrap();
    let answer = Answer::ok(ContentType::Plain, b"later");
    conn.complete(ticket, &answer, &date, now, &mut buffers);
    conn.collect(&date, &mut buffers, usize::MAX);
    assert!(send_all(&mut conn, &mut buffers, now).ends_with(b"later"));
    assert!(!holds_buffers(&conn));
    // Every buffer lent came back: the input's and the output's, the second of which
    // the waiting response borrowed when it came.
    assert_eq!(buffers.spare(), 2);
}

/// Feeds `chunks` one after another, processing after each and completing every ticket
/// in reverse order once all are in; returns everything sent and whether the
/// connection finished.
fn serve(chunks: &[&[u8]]) -> (Vec<u8>, bool) {
    // One date for every call: answers compared across calls must not differ by a second
    // that passed between them.
    static DATE: std::sync::OnceLock<HttpDate> = std::sync::OnceLock::new();
    let (date, now) = (DATE.get_or_init(HttpDate::new), Instant::now());
    let mut buffers = BufferPool::default();
    let mut handler = Tickets::default();
    let mut conn = Connection::new(0, now);
    let mut sent = Vec::new();
    for chunk in chunks {
        conn.input(&mut buffers).extend_from_slice(chunk);
        conn.process(&mut handler, TEST_MAX_BODY, date, now, &mut buffers);
        sent.extend(send_all(&mut conn, &mut buffers, now));
    }
    for (n, ticket) in handler.0.drain(..).enumerate().rev() {
        let body = format!("later{n}");
        conn.complete(
            ticket,
            &Answer::ok(ContentType::Plain, body.as_bytes()),
            date,
            now,
            &mut buffers,
        );
    }
    conn.collect(date, &mut buffers, usize::MAX);
    conn.process(&mut handler, TEST_MAX_BODY, date, now, &mut buffers);
    sent.extend(send_all(&mut conn, &mut buffers, now));
    (sent, conn.is_finished())
}

/// What was sent, each response head (written by the connection) shortened to its
/// status in brackets.
fn outline(sent: &[u8]) -> String {
    let mut text = String::from_utf8_lossy(sent).into_owned();
    while let Some(start) = text.find("HTTP/1.1 ") {
        let status = text[start + 9..start + 12].to_string();
        let end = text[start..]
            .find("\r\n\r\n")
            .map_or(text.len(), |end| start + end + 4);
        text.replace_range(start..end, &format!("[{status}]"));
    }
    text
}

const PIPELINE_WITH_BODIES: &[u8] = b"POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc\
GET /later HTTP/1.1\r\nHost: h\r\n\r\n\
POST /b HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2;x=y\r\nde\r\n1\r\nf\r\n0\r\nT: 1\r\n\r\n\
POST /later HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nGET \
PUT /c HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n";

#[test]
fn pipelined_requests_with_bodies_are_answered_in_order_however_they_are_cut() {
    let (whole, _) = serve(&[PIPELINE_WITH_BODIES]);
    assert_eq!(
        outline(&whole),
        "[200]nowabc[200]later0[200]nowdef[200]later1[200]now"
    );
    for cut in 0..PIPELINE_WITH_BODIES.len() {
        let (head, tail) = PIPELINE_WITH_BODIES.split_at(cut);
        assert_eq!(serve(&[head, tail]).0, whole, "cut at {cut}");
    }
    let bytes: Vec<&[u8]> = PIPELINE_WITH_BODIES.chunks(1).collect();
    assert_eq!(serve(&bytes).0, whole);
}

#[test]
fn a_body_over_the_limit_is_413_after_the_answers_before_it_and_ends_the_connection() {
    let big = format!(
        "GET /later HTTP/1.1\r\nHost: h\r\n\r\nPOST /x HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\n\r\nGET /after HTTP/1.1\r\nHost: h\r\n\r\n",
        TEST_MAX_BODY + 1
    );
    let (sent, finished) = serve(&[big.as_bytes()]);
    assert!(finished);
    assert_eq!(outline(&sent), "[200]later0[413]Content Too Large");

    let chunked = b"POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n123456789\r\n8\r\n12345678\r\n";
    let (sent, finished) = serve(&[chunked]);
    assert!(finished);
    assert_eq!(outline(&sent), "[413]Content Too Large");
    let exactly = b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 16\r\n\r\n0123456789abcdef";
    let (sent, finished) = serve(&[exactly]);
    assert_eq!(
        (outline(&sent), finished),
        ("[200]now0123456789abcdef".into(), false)
    );
}

#[test]
fn continue_is_sent_once_and_only_when_no_answer_waits_before_it() {
    let head = b"POST /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
    let (sent, _) = serve(&[head, b"", b"1", b"2"]);
    assert_eq!(outline(&sent), "[100][200]now12");
    // Behind a request still waiting, the 100 would overtake its answer: not sent.
    let behind = [&b"GET /later HTTP/1.1\r\nHost: h\r\n\r\n"[..], head].concat();
    let (sent, _) = serve(&[&behind, b"12"]);
    assert_eq!(outline(&sent), "[200]later0[200]now12");
}

/// One request waiting (for the database) and 63 answered at once behind it, on a
/// client that never reads: the answers in line count toward the high-water mark, so
/// the connection stops taking requests there, and the line moves to the output only up
/// to the mark.
#[test]
fn responses_in_line_count_toward_the_high_water_mark() {
    let (date, now) = (HttpDate::new(), Instant::now());
    let mut buffers = BufferPool::default();
    let mut handler = Tickets::default();
    let mut conn = Connection::new(0, now);
    let requests = [
        &b"GET /later HTTP/1.1\r\nHost: h\r\n\r\n"[..],
        &b"GET /big HTTP/1.1\r\nHost: h\r\n\r\n".repeat(63),
    ]
    .concat();
    conn.input(&mut buffers).extend_from_slice(&requests);
    conn.process(&mut handler, TEST_MAX_BODY, &date, now, &mut buffers);
    conn.give_back_idle(&mut buffers);
    let bound = OUTPUT_HIGH_WATER + BIG;
    assert!((conn.queued_len as usize) < bound, "{}", conn.queued_len);
    assert!(conn.queue.len() < 20, "{} answered", conn.queue.len());
    assert!(!conn.wants_input() && conn.buffered_input() > 0);
    // Holds the line's buffers (each grown to fit one answer) and the input.
    let held = conn.held();
    assert!(held < 2 * bound, "{held}");
    assert_eq!(held, conn.queued_capacity as usize + conn.input.capacity());

    let ticket = handler.0.pop().unwrap();
    conn.complete(
        ticket,
        &Answer::ok(ContentType::Plain, b"x"),
        &date,
        now,
        &mut buffers,
    );
    conn.collect(&date, &mut buffers, usize::MAX);
    conn.process(&mut handler, TEST_MAX_BODY, &date, now, &mut buffers);
    assert!(conn.unsent().len() < bound, "{}", conn.unsent().len());
    assert!(conn.output.unsent().len() + (conn.queued_len as usize) < 2 * bound);
    // Read at last, it gets every answer, in order.
    let mut sent = Vec::new();
    while !conn.unsent().is_empty() {
        sent.extend(send_all(&mut conn, &mut buffers, now));
        conn.collect(&date, &mut buffers, usize::MAX);
        conn.process(&mut handler, TEST_MAX_BODY, &date, now, &mut buffers);
    }
    let big = format!("[200]{}", "b".repeat(BIG));
    assert_eq!(outline(&sent), format!("[200]x{}", big.repeat(63)));
    assert_eq!((conn.queued_len, conn.queued_capacity), (0, 0));
    conn.give_back_idle(&mut buffers);
    assert_eq!(conn.held(), 0);
}

/// What is unsent at an instant must be sent within the send timeout: a client that
/// reads a byte a second is timed out, one that reads everything as it comes under
/// endless pipelined load never is (however long ago its first byte went out).
#[test]
fn unsent_output_must_be_sent_within_the_send_timeout() {
    let date = HttpDate::new();
    let start = Instant::now();
    let second = std::time::Duration::from_secs(1);
    let limits = Timeouts {
        request: 10 * second,
        idle: 1000 * second,
        send: 5 * second,
    };
    let request = b"GET /big HTTP/1.1\r\nHost: h\r\n\r\n".repeat(4);
    let mut buffers = BufferPool::default();
    let mut handler = Tickets::default();

    let mut fast = Connection::new(0, start);
    for tick in 0..100 {
        let now = start + tick * second;
        assert!(!fast.timed_out(now, &limits), "at {tick} s");
        fast.input(&mut buffers).extend_from_slice(&request);
        fast.process(&mut handler, TEST_MAX_BODY, &date, now, &mut buffers);
        // Two halves, a second apart: some output is always pending.
        let half = fast.unsent().len() / 2;
        fast.mark_sent(half, now);
        fast.mark_sent(fast.unsent().len(), now + second / 2);
    }

    let mut slow = Connection::new(1, start);
    slow.input(&mut buffers).extend_from_slice(&request);
    slow.process(&mut handler, TEST_MAX_BODY, &date, start, &mut buffers);
    let mut timed_out_at = None;
    for tick in 1..20 {
        let now = start + tick * second;
        slow.mark_sent(1, now);
        if slow.timed_out(now, &limits) {
            timed_out_at = Some(tick);
            break;
        }
    }
    assert_eq!(timed_out_at, Some(6));
}

/// A connection waiting for an answer the server owes it is not idle, however long the
/// answer takes; once it is sent the idle clock runs again.
#[test]
fn a_connection_owed_an_answer_is_not_idle() {
    let (date, start) = (HttpDate::new(), Instant::now());
    let second = std::time::Duration::from_secs(1);
    let limits = Timeouts {
        request: 10 * second,
        idle: 2 * second,
        send: 30 * second,
    };
    let mut buffers = BufferPool::default();
    let mut handler = Tickets::default();
    let mut conn = Connection::new(0, start);
    conn.input(&mut buffers)
        .extend_from_slice(b"GET /later HTTP/1.1\r\nHost: h\r\n\r\n");
    conn.process(&mut handler, TEST_MAX_BODY, &date, start, &mut buffers);
    assert!(!conn.timed_out(start + 60 * second, &limits));
    let answered = start + 61 * second;
    let ticket = handler.0.pop().unwrap();
    conn.complete(
        ticket,
        &Answer::ok(ContentType::Plain, b"late"),
        &date,
        answered,
        &mut buffers,
    );
    conn.collect(&date, &mut buffers, usize::MAX);
    send_all(&mut conn, &mut buffers, answered);
    assert!(!conn.timed_out(answered + second, &limits));
    assert!(conn.timed_out(answered + 3 * second, &limits));
}

/// The drain (the server stops): an idle connection is done at once, as one whose client
/// asked for the close; an answer in the works is the last and says `Connection: close`
/// (the request after it is dropped); a request still arriving is answered as the last.
#[test]
fn a_draining_connection_says_close_on_its_last_answer() {
    let (date, now) = (HttpDate::new(), Instant::now());
    let mut buffers = BufferPool::default();
    let mut handler = Tickets::default();
    let mut idle = Connection::new(0, now);
    idle.drain(&mut buffers);
    assert!(idle.is_finished() && idle.close_asked());

    let mut busy = Connection::new(0, now);
    let request = b"GET /later HTTP/1.1\r\nHost: a\r\n\r\n";
    busy.input(&mut buffers).extend_from_slice(request);
    busy.process(&mut handler, TEST_MAX_BODY, &date, now, &mut buffers);
    busy.input(&mut buffers)
        .extend_from_slice(b"GET /now HTTP/1.1\r\n");
    busy.drain(&mut buffers);
    busy.process(&mut handler, TEST_MAX_BODY, &date, now, &mut buffers);
    assert!(!busy.is_finished() && !busy.close_asked());
    let answer = Answer::ok(ContentType::Plain, b"later");
    busy.complete(handler.0.pop().unwrap(), &answer, &date, now, &mut buffers);
    busy.collect(&date, &mut buffers, usize::MAX);
    let sent = String::from_utf8(send_all(&mut busy, &mut buffers, now)).unwrap();
    assert!(
        sent.contains("Connection: close\r\n") && sent.ends_with("later"),
        "{sent}"
    );
    assert!(busy.is_finished());

    let mut arriving = Connection::new(0, now);
    arriving
        .input(&mut buffers)
        .extend_from_slice(b"GET /now HTTP/1.1\r\n");
    arriving.drain(&mut buffers);
    arriving.process(&mut handler, TEST_MAX_BODY, &date, now, &mut buffers);
    assert!(!arriving.is_finished());
    arriving
        .input(&mut buffers)
        .extend_from_slice(b"Host: a\r\n\r\n");
    arriving.drain(&mut buffers);
    arriving.process(&mut handler, TEST_MAX_BODY, &date, now, &mut buffers);
    let sent = String::from_utf8(send_all(&mut arriving, &mut buffers, now)).unwrap();
    assert!(
        sent.contains("Connection: close\r\n") && sent.ends_with("now"),
        "{sent}"
    );
    assert!(arriving.is_finished());
}

/// Two requests answered later, the first with a piped body (an upstream's, arriving): its
/// head at once, its body in chunks as it comes, the second answer only after its end.
fn piping(now: Instant) -> (Connection, Tickets, BufferPool, Pipe) {
    let requests = b"GET /later HTTP/1.1\r\nHost: a\r\n\r\nGET /later HTTP/1.1\r\nHost: a\r\n\r\n";
    piping_after(requests, now)
}

/// `requests` taken; the first of them answered later gets a piped body.
fn piping_after(requests: &[u8], now: Instant) -> (Connection, Tickets, BufferPool, Pipe) {
    let (date, mut buffers) = (HttpDate::new(), BufferPool::default());
    let mut handler = Tickets::default();
    let mut conn = Connection::new(0, now);
    conn.input(&mut buffers).extend_from_slice(requests);
    conn.process(&mut handler, TEST_MAX_BODY, &date, now, &mut buffers);
    let pipe = Pipe::default();
    let fields = crate::http::FieldLines::new(b"Content-Type: text/plain\r\n", 0);
    let body = crate::http::Body::Piped(pipe.clone());
    let answer = Answer::forwarded(Status::Ok, fields, body);
    conn.complete(handler.0[0], &answer, &date, now, &mut buffers);
    (conn, handler, buffers, pipe)
}

#[test]
fn a_piped_body_goes_in_chunks_as_it_comes_and_what_follows_waits_for_its_end() {
    let (date, now) = (HttpDate::new(), Instant::now());
    let (mut conn, handler, mut buffers, pipe) = piping(now);
    conn.complete(
        handler.0[1],
        &Answer::ok(ContentType::Plain, b"second"),
        &date,
        now,
        &mut buffers,
    );
    conn.collect(&date, &mut buffers, usize::MAX);
    let head = String::from_utf8(send_all(&mut conn, &mut buffers, now)).unwrap();
    assert!(
        head.ends_with("Transfer-Encoding: chunked\r\n\r\n"),
        "{head}"
    );
    assert!(!head.contains("Content-Length"), "{head}");
    pipe.push(b"hello, ");
    assert!(conn.has_backlog());
    conn.collect(&date, &mut buffers, usize::MAX);
    assert_eq!(send_all(&mut conn, &mut buffers, now), b"7\r\nhello, \r\n");
    // Nothing more yet: nothing to do, and the answer behind waits.
    assert!(!conn.has_backlog());
    pipe.push(b"world");
    pipe.end();
    conn.collect(&date, &mut buffers, usize::MAX);
    let rest = String::from_utf8(send_all(&mut conn, &mut buffers, now)).unwrap();
    assert!(
        rest.starts_with("5\r\nworld\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n"),
        "{rest}"
    );
    assert!(rest.ends_with("second"));
    assert!(conn.queue.is_empty() && !conn.is_finished());
}

#[test]
fn a_piped_body_that_fails_closes_the_connection_without_its_last_chunk() {
    let (date, now) = (HttpDate::new(), Instant::now());
    let (mut conn, _, mut buffers, pipe) = piping(now);
    pipe.push(b"part");
    conn.collect(&date, &mut buffers, usize::MAX);
    pipe.fail();
    conn.collect(&date, &mut buffers, usize::MAX);
    let sent = String::from_utf8(send_all(&mut conn, &mut buffers, now)).unwrap();
    assert!(sent.ends_with("\r\n\r\n4\r\npart\r\n"), "{sent}");
    // The request behind is dropped with the connection, which is done.
    assert!(conn.is_finished());
}

/// The upstream fails within a body whose head is still in line (the output was at its
/// mark): nothing of the answer went, so it is a 502, whole, as when the upstream fails
/// before its head; the connection goes on.
#[test]
fn a_piped_body_that_fails_before_its_head_went_is_a_502() {
    let (date, now) = (HttpDate::new(), Instant::now());
    let (mut conn, handler, mut buffers, pipe) = piping(now);
    pipe.push(b"part");
    conn.collect(&date, &mut buffers, 0);
    assert!(conn.unsent().is_empty(), "held at the mark");
    pipe.fail();
    conn.collect(&date, &mut buffers, usize::MAX);
    let sent = String::from_utf8(send_all(&mut conn, &mut buffers, now)).unwrap();
    assert!(sent.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{sent}");
    assert!(!sent.contains("200 OK") && !sent.contains("part"), "{sent}");
    let answer = Answer::ok(ContentType::Plain, b"second");
    conn.complete(handler.0[1], &answer, &date, now, &mut buffers);
    conn.collect(&date, &mut buffers, usize::MAX);
    assert!(send_all(&mut conn, &mut buffers, now).ends_with(b"second"));
    assert!(!conn.is_finished());
}

#[test]
fn a_piped_body_waiting_counts_toward_the_connections_mark() {
    let (date, now) = (HttpDate::new(), Instant::now());
    let (mut conn, _, mut buffers, pipe) = piping(now);
    let held = conn.held();
    pipe.push(&vec![0; OUTPUT_HIGH_WATER]);
    assert!(conn.held() >= held + OUTPUT_HIGH_WATER);
    assert!(!conn.has_room(OUTPUT_HIGH_WATER));
    // Taken up to the mark, the rest waits in the pipe.
    conn.collect(&date, &mut buffers, usize::MAX);
    assert!(pipe.waiting() > 0 && pipe.waiting() < OUTPUT_HIGH_WATER);
}

/// A piped answer reaches the front of the line while the output is at its mark: its head
/// waits there, and must go once the output drains, whether or not more of its body came
/// (a long poll's may not come for minutes).
#[test]
fn a_piped_answers_head_held_at_the_mark_goes_once_the_output_drains() {
    let (date, now) = (HttpDate::new(), Instant::now());
    let requests = b"GET /big HTTP/1.1\r\nHost: a\r\n\r\nGET /later HTTP/1.1\r\nHost: a\r\n\r\n";
    let (mut conn, _, mut buffers, _pipe) = piping_after(requests, now);
    conn.collect(&date, &mut buffers, BIG);
    assert!(
        conn.unsent().ends_with(&BIG_BODY),
        "the head waits behind /big"
    );
    send_all(&mut conn, &mut buffers, now);
    assert!(conn.has_backlog());
    conn.collect(&date, &mut buffers, BIG);
    let head = String::from_utf8(send_all(&mut conn, &mut buffers, now)).unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
}
