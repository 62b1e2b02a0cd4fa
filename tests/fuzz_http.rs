//! Property tests of the HTTP request path: the parser and a whole connection (parser, app,
//! response writer) fed arbitrary bytes, valid pipelined traffic (with Content-Length and
//! chunked bodies) cut at arbitrary places, and chunked bodies decoded however they are
//! chunked and cut.
//! Run with a fixed number of cases in every test run; failures proptest finds are kept in
//! proptest-regressions/ and replayed first.

use std::sync::Arc;
use std::time::Instant;

use gnosis::app::world::WorldSnapshot;
use gnosis::app::App;
use gnosis::http::{parse, BufferPool, Chunked, Connection, HttpDate, Parsed, MAX_BODY};
use gnosis::pg::Pool;
use gnosis::service::{Context, Serving};
use gnosis::timers::Timers;
use proptest::prelude::*;

/// Feeds `chunks` one after another, answering after each; returns everything written.
/// There is no database: its routes answer 503.
fn serve(chunks: &[Vec<u8>], date: &HttpDate) -> Vec<u8> {
    let mut app = App::new(Arc::new(WorldSnapshot::default()), 16);
    let mut db = Pool::empty();
    let mut timers = Timers::default();
    let mut conn = Connection::new(0, Instant::now());
    let mut buffers = BufferPool::default();
    let mut written = Vec::new();
    for chunk in chunks {
        conn.input(&mut buffers).extend_from_slice(chunk);
        let now = Instant::now();
        let mut handler = Serving {
            service: &mut app,
            cx: Context {
                date,
                now,
                db: &mut db,
                timers: &mut timers,
            },
        };
        conn.process(&mut handler, date, now, &mut buffers);
        let unsent = conn.unsent().to_vec();
        conn.mark_sent(unsent.len(), now);
        conn.give_back_idle(&mut buffers);
        written.extend_from_slice(&unsent);
        if conn.is_finished() {
            break;
        }
    }
    written
}

/// Splits the output into responses, checking each is well formed; returns their statuses.
fn statuses(mut output: &[u8]) -> Vec<u16> {
    let mut found = Vec::new();
    while !output.is_empty() {
        let end = output
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a complete head")
            + 4;
        let head = std::str::from_utf8(&output[..end]).expect("an ASCII head");
        assert!(head.starts_with("HTTP/1.1 "), "{head}");
        let status: u16 = head[9..12].parse().expect("a status code");
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("Content-Length: "))
            .expect("a Content-Length")
            .parse()
            .expect("a number");
        assert!(head.contains("\r\nServer: gnosis\r\n") && head.contains("\r\nDate: "));
        assert!(
            output.len() >= end + length,
            "a body shorter than its Content-Length"
        );
        found.push(status);
        output = &output[end + length..];
    }
    found
}

fn request_strategy() -> impl Strategy<Value = String> {
    let target = prop::sample::select(vec![
        "/plaintext",
        "/json",
        "/json?x=1",
        "/nothing",
        "/db",
        "/queries?queries=3",
        "/baseline11?a=1&b=2",
        "/pipeline",
        "/json/3?m=2",
    ]);
    // No HEAD: its response announces a body it does not carry, which `statuses` cannot
    // tell from the outside (tests/http.rs covers HEAD).
    let method = prop::sample::select(vec!["GET", "GET", "POST", "PUT"]);
    let extra = prop::sample::select(vec![
        "",
        "Accept: */*\r\n",
        "Connection: keep-alive\r\n",
        "Content-Length: 3\r\n\r\nabc",
        "Content-Length: 2\r\n\r\n20",
        "Transfer-Encoding: chunked\r\n\r\n1;e=1\r\n4\r\n2\r\n20\r\n0\r\nX-T: v\r\n\r\n",
        "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "X-Empty:\r\n",
    ]);
    (method, target, extra).prop_map(|(method, target, extra)| {
        // A body header goes last: its body follows the blank line it brings.
        match extra.split_once("\r\n\r\n") {
            Some((header, body)) => {
                format!("{method} {target} HTTP/1.1\r\nHost: h\r\n{header}\r\n\r\n{body}")
            }
            None => format!("{method} {target} HTTP/1.1\r\nHost: h\r\n{extra}\r\n"),
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_parser_never_panics_and_never_overreads(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        if let Parsed::Complete { len, .. } = parse(&bytes, MAX_BODY, &mut Chunked::default()) {
            prop_assert!(len > 0 && len <= bytes.len());
        }
    }

    #[test]
    fn a_connection_answers_any_bytes_with_well_formed_responses(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..512), 1..8)
    ) {
        let date = HttpDate::new();
        statuses(&serve(&chunks, &date));
    }

    #[test]
    fn a_connection_answers_near_miss_requests_with_well_formed_responses(
        requests in prop::collection::vec(request_strategy(), 1..6),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    ) {
        let mut bytes = requests.concat().into_bytes();
        for (at, value) in flips {
            let index = at.index(bytes.len());
            bytes[index] = value;
        }
        let date = HttpDate::new();
        statuses(&serve(&[bytes], &date));
    }

    #[test]
    fn pipelined_requests_cut_anywhere_get_the_same_answers(
        requests in prop::collection::vec(request_strategy(), 1..10),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let whole = requests.concat().into_bytes();
        let mut points: Vec<usize> = cuts.iter().map(|cut| cut.index(whole.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut from = 0;
        for point in points.into_iter().chain([whole.len()]) {
            chunks.push(whole[from..point].to_vec());
            from = point;
        }
        let date = HttpDate::new();
        let at_once = serve(std::slice::from_ref(&whole), &date);
        prop_assert_eq!(statuses(&at_once).len(), requests.len());
        prop_assert_eq!(serve(&chunks, &date), at_once);
    }

    #[test]
    fn chunked_bodies_decode_however_they_are_chunked_and_cut(
        body in prop::collection::vec(any::<u8>(), 0..300),
        sizes in prop::collection::vec(1..40usize, 1..20),
        extensions in prop::collection::vec(prop::sample::select(vec!["", ";a", ";a=b ; c=\"d\"", " ;x"]), 1..20),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut request = b"POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        let mut rest = &body[..];
        let mut n = 0;
        while !rest.is_empty() {
            let (chunk, after) = rest.split_at(sizes[n % sizes.len()].min(rest.len()));
            let extension = extensions[n % extensions.len()];
            request.extend_from_slice(format!("{:X}{extension}\r\n", chunk.len()).as_bytes());
            request.extend_from_slice(chunk);
            request.extend_from_slice(b"\r\n");
            rest = after;
            n += 1;
        }
        request.extend_from_slice(b"0\r\nX-Trailer: 1\r\n\r\n");
        let mut decoded = Chunked::default();
        match parse(&request, MAX_BODY, &mut decoded) {
            Parsed::Complete { request: parsed, len } => {
                prop_assert_eq!(parsed.body, &body[..]);
                prop_assert_eq!(len, request.len());
            }
            other => prop_assert!(false, "{:?}", other),
        }
        let cut = cut.index(request.len());
        decoded.clear();
        let partial = parse(&request[..cut], MAX_BODY, &mut decoded);
        prop_assert_eq!(partial, Parsed::Partial);
    }
}
