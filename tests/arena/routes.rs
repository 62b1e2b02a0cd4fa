//! HttpArena's HTTP profiles against both binaries over real sockets: baseline (GET, POST
//! with a Content-Length body and with a chunked one, random values, the validator's four
//! TCP-fragmented requests), `/baseline2`, pipelined, json (a dataset written by the test)
//! and async (`/delay`: not sooner than asked, in pipelined order, thousands held at once).

use std::io::Read;
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::common::{assert_general_headers, get_request, Client, HttpResponse, Server};
use serde_json::{json, Value};

/// Starts `binary` without a database (its connection attempts fail at once) and with
/// `DATASET_PATH` set to `dataset`.
fn start(binary: &str, dataset: &str) -> Server {
    let env = [
        ("PGHOST", "/nonexistent-gnosis-test-database".to_string()),
        ("DATASET_PATH", dataset.to_string()),
    ];
    Server::start_with_env(binary, &[], &env)
}

fn start_without_dataset(binary: &str) -> Server {
    start(binary, "/nonexistent-gnosis-test-dataset.json")
}

fn post(target: &str, body: &str) -> String {
    format!(
        "POST {target} HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// `body` as a chunked POST, cut into chunks of at most `size` bytes.
fn post_chunked(target: &str, body: &str, size: usize) -> String {
    let mut request = format!(
        "POST {target} HTTP/1.1\r\nHost: a\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    for chunk in body.as_bytes().chunks(size) {
        request.push_str(&format!("{:x}\r\n", chunk.len()));
        request.push_str(std::str::from_utf8(chunk).unwrap());
        request.push_str("\r\n");
    }
    request.push_str("0\r\n\r\n");
    request
}

fn answer(client: &mut Client, raw: &str) -> HttpResponse {
    client.send(raw.as_bytes());
    client.response().unwrap()
}

fn assert_plain(response: &HttpResponse, expected: &str) {
    assert_eq!((response.status, response.text()), (200, expected));
    assert_general_headers(response, "text/plain");
}

fn baseline_sums_get_post_and_chunked_bodies(binary: &str) {
    let server = start_without_dataset(binary);
    let mut client = server.connect();
    assert_plain(&client.get("/baseline11?a=13&b=42"), "55");
    assert_plain(
        &answer(&mut client, &post("/baseline11?a=13&b=42", "20")),
        "75",
    );
    let chunked = post_chunked("/baseline11?a=13&b=42", "20", 1);
    assert_plain(&answer(&mut client, &chunked), "75");
    let mut rng = fastrand::Rng::new();
    for _ in 0..50 {
        let (a, b, body) = (rng.i64(-999..1000), rng.i64(100..1000), rng.i64(..1 << 40));
        let target = format!("/baseline11?b={b}&x=y&a={a}");
        let sum = (a + b + body).to_string();
        assert_plain(&client.get(&target), &(a + b).to_string());
        assert_plain(
            &answer(&mut client, &post(&target, &body.to_string())),
            &sum,
        );
        let size = rng.usize(1..5);
        let chunked = post_chunked(&target, &body.to_string(), size);
        assert_plain(&answer(&mut client, &chunked), &sum);
    }
}

fn baseline2_sums_a_and_b(binary: &str) {
    let server = start_without_dataset(binary);
    let mut client = server.connect();
    assert_plain(&client.get("/baseline2?a=13&b=42"), "55");
    let mut rng = fastrand::Rng::new();
    for _ in 0..20 {
        let (a, b) = (rng.i64(-1 << 40..1 << 40), rng.i64(100..1000));
        assert_plain(
            &client.get(&format!("/baseline2?b={b}&a={a}")),
            &(a + b).to_string(),
        );
    }
    for target in [
        "/baseline2?a=1",
        "/baseline2?a=1&b=x",
        "/baseline2?a=1&b=1.5",
    ] {
        assert_eq!(client.get(target).status, 400, "{target}");
    }
    // GET only: HTTP/2's profiles send no body.
    assert_eq!(
        answer(&mut client, &post("/baseline2?a=1&b=2", "3")).status,
        405
    );
    assert_plain(&client.get("/baseline2?a=1&b=2"), "3");
}

/// The validator's four fragmented requests (scripts/validate.sh, "baseline TCP
/// fragmentation"): each piece its own write, 30 ms apart, `Connection: close`; the right
/// answer, then the server closes.
fn fragmented_requests_get_their_answer_then_close(binary: &str) {
    let server = start_without_dataset(binary);
    let post_head = "POST /baseline11?a=13&b=42 HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\n";
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "GET /baseli",
                "ne11?a=13&b=42 HTTP/1.1\r\n",
                "Host: localhost\r\nConnection: close\r\n\r\n",
            ],
            "55",
        ),
        (
            &[
                "GET /baseline11?a=13&b=42 HTTP/1.1\r\n",
                "Host: localhost\r\n",
                "User-Agent: arena-frag/1.0\r\n",
                "Connection: close\r\n\r\n",
            ],
            "55",
        ),
        (&[post_head, "20"], "75"),
        (&[post_head, "2", "0"], "75"),
    ];
    for (pieces, expected) in cases {
        let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut client = Client::from_stream(stream);
        for (i, piece) in pieces.iter().enumerate() {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(30));
            }
            client.send(piece.as_bytes());
        }
        let response = client.response().unwrap();
        assert_plain(&response, expected);
        assert_eq!(response.header("connection"), Some("close"));
        assert!(
            client.is_closed_by_server(Duration::from_secs(3)),
            "{pieces:?}"
        );
    }
}

fn sixteen_pipelined_pipeline_requests(binary: &str) {
    let server = start_without_dataset(binary);
    let mut client = server.connect();
    for _round in 0..3 {
        client.send(get_request("/pipeline").repeat(16).as_bytes());
        for _ in 0..16 {
            assert_plain(&client.response().unwrap(), "ok");
        }
    }
}

/// `count` items of the documented shape, with numbers that differ per item.
fn dataset(count: i64) -> Value {
    (1..=count)
        .map(|id| {
            let category = ["tools", "garden"][id as usize % 2];
            json!({
                "id": id,
                "name": format!("Item \"{id}\" \u{e9}"),
                "category": category,
                "price": 7 * id + 3,
                "quantity": 50 - id,
                "active": id % 3 != 0,
                "tags": (0..id % 4).map(|t| format!("tag{t}")).collect::<Vec<_>>(),
                "rating": {"score": id % 50, "count": 11 * id},
            })
        })
        .collect()
}

/// Writes `value` to a file of its own in the temporary directory.
fn write_temp(name: &str, value: &Value) -> PathBuf {
    let path = std::env::temp_dir().join(format!("gnosis-{}-{name}", std::process::id()));
    std::fs::write(&path, value.to_string()).unwrap();
    path
}

fn json_answers_the_first_items_with_their_totals(binary: &str) {
    let items = dataset(50);
    let name = std::path::Path::new(binary).file_name().unwrap();
    let path = write_temp(&format!("{}-dataset.json", name.to_str().unwrap()), &items);
    let server = start(binary, path.to_str().unwrap());
    let mut client = server.connect();
    let mut rng = fastrand::Rng::new();
    let pairs = [(1, 3), (5, 7), (12, 3), (22, 7), (31, 2), (50, 5), (50, -4)];
    let random = (0..5).map(|_| (rng.usize(1..=50), rng.i64(0..1000)));
    // The gateway profiles' /json/{count} says no m: 1.
    let gateway = [(50, 1), (7, 1)].into_iter();
    let targets = pairs
        .into_iter()
        .chain(random)
        .map(|(count, m)| (count, m, format!("/json/{count}?m={m}")))
        .chain(gateway.map(|(count, m)| (count, m, format!("/json/{count}"))));
    for (count, m, target) in targets {
        let response = client.get(&target);
        assert_eq!(response.status, 200, "{count} {m}");
        assert_general_headers(&response, "application/json");
        let mut expected: Vec<Value> = items.as_array().unwrap()[..count].to_vec();
        for item in &mut expected {
            let total = item["price"].as_i64().unwrap() * item["quantity"].as_i64().unwrap() * m;
            item["total"] = total.into();
        }
        let body: Value = serde_json::from_slice(&response.body).unwrap();
        assert_eq!(body, json!({"items": expected, "count": count}));
    }
    for target in [
        "/json/0?m=1",
        "/json/51?m=1",
        "/json/x?m=1",
        "/json/?m=1",
        "/json/5?m=",
        "/json/5?m=1.5",
        "/json/5?m=9223372036854775807",
        "/json/99999999999999999999999?m=1",
    ] {
        assert_eq!(client.get(target).status, 400, "{target}");
    }
    assert_eq!(client.get("/json/50?m=6").status, 200);
    drop(server);
    std::fs::remove_file(path).unwrap();
}

fn without_a_dataset_json_is_503_and_the_rest_serves(binary: &str) {
    let server = start_without_dataset(binary);
    let mut client = server.connect();
    assert_eq!(client.get("/json/5?m=1").status, 503);
    assert_plain(&client.get("/pipeline"), "ok");
    assert_eq!(client.get("/json").status, 200);
    assert!(server.log().contains("no dataset from"), "{}", server.log());
}

fn bad_input_gets_400_and_the_connection_goes_on(binary: &str) {
    let server = start_without_dataset(binary);
    let mut client = server.connect();
    let bad_gets = [
        "/baseline11?b=2",
        "/baseline11?a=&b=2",
        "/baseline11?a=x&b=2",
        "/baseline11?a=1.5&b=2",
        "/baseline11?a=1&b=99999999999999999999",
        "/baseline11?a=9223372036854775807&b=1",
        "/delay/x",
        "/delay/-1",
        "/delay/10001",
        "/delay/",
    ];
    for target in bad_gets {
        let response = client.get(target);
        assert_eq!(
            (response.status, response.text()),
            (400, "Bad Request"),
            "{target}"
        );
    }
    for body in ["x", "1 2", "0x10", "\u{e9}", "9223372036854775807"] {
        let response = answer(&mut client, &post("/baseline11?a=1&b=2", body));
        assert_eq!(response.status, 400, "{body}");
    }
    // A body of blanks is no body; blanks around a number are not part of it.
    assert_plain(&answer(&mut client, &post("/baseline11?a=1&b=2", " ")), "3");
    assert_plain(
        &answer(&mut client, &post("/baseline11?a=1&b=2", "4\n")),
        "7",
    );
    let put = "PUT /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\n5";
    assert_eq!(answer(&mut client, put).status, 405);
    assert_eq!(answer(&mut client, &post("/pipeline", "1")).status, 405);
    assert_plain(&client.get("/baseline11?a=1&b=2"), "3");
}

fn a_body_over_the_limit_is_413_and_closes(binary: &str) {
    let env = [("PGHOST", "/nonexistent-gnosis-test-database".to_string())];
    let server = Server::start_with_env(binary, &["--max-body", "8"], &env);
    let mut client = server.connect();
    assert_plain(
        &answer(&mut client, &post("/baseline11?a=1&b=2", "12345678")),
        "12345681",
    );
    let response = answer(&mut client, &post("/baseline11?a=1&b=2", "123456789"));
    assert_eq!(response.status, 413);
    assert!(client.is_closed_by_server(Duration::from_secs(3)));

    let mut client = server.connect();
    let chunked = post_chunked("/baseline11?a=1&b=2", "123456789", 4);
    assert_eq!(answer(&mut client, &chunked).status, 413);
    assert!(client.is_closed_by_server(Duration::from_secs(3)));
}

fn expect_100_continue_is_answered_before_the_body(binary: &str) {
    let server = start_without_dataset(binary);
    let mut client = server.connect();
    client.send(b"POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
    let mut interim = [0u8; 25];
    client.stream().read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    client.send(b"20");
    assert_plain(&client.response().unwrap(), "23");
    // A body sent with the head gets no 100 Continue, only the answer.
    let with_body = "POST /baseline11?a=1&b=2 HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n5";
    assert_plain(&answer(&mut client, with_body), "8");
}

fn delays_are_not_sooner_than_asked_and_keep_pipelined_order(binary: &str) {
    let server = start_without_dataset(binary);
    let mut client = server.connect();
    assert_plain(&client.get("/delay/0"), "0");
    let mut rng = fastrand::Rng::new();
    let asked = rng.u64(100..300);
    let started = Instant::now();
    assert_plain(&client.get(&format!("/delay/{asked}")), &asked.to_string());
    assert!(started.elapsed() >= Duration::from_millis(asked));

    // A long delay first, then quick answers and a short delay: all wait behind it, in order.
    let batch = [
        get_request("/delay/300"),
        get_request("/pipeline"),
        get_request("/delay/10"),
        post("/baseline11?a=1&b=2", "3"),
    ]
    .concat();
    let started = Instant::now();
    client.send(batch.as_bytes());
    for expected in ["300", "ok", "10", "6"] {
        assert_plain(&client.response().unwrap(), expected);
        assert!(started.elapsed() >= Duration::from_millis(300));
    }

    // Quick answers ahead of a delay leave at once, not with it.
    let batch = [get_request("/pipeline"), get_request("/delay/3000")].concat();
    let started = Instant::now();
    client.send(batch.as_bytes());
    assert_plain(&client.response().unwrap(), "ok");
    assert!(started.elapsed() < Duration::from_millis(2500));
    assert_plain(&client.response().unwrap(), "3000");
    assert!(started.elapsed() >= Duration::from_millis(3000));
}

/// Thousands of connections hold a delayed request each; half reset before it is due. The
/// rest get their answers, and connections opened meanwhile, which take the closed ones'
/// slots (and the same place in their line), wait for their own delays, not the closed
/// ones'.
fn thousands_of_held_delays_and_closed_ones_dropped(binary: &str) {
    const CONNECTIONS: usize = 3_000;
    crate::common::raise_open_files_limit(2 * CONNECTIONS as u64 + 3_000);
    let server = start_without_dataset(binary);
    // Warm up first: gnosis-uring's receive buffers (1,024 of 4 KiB per thread) are
    // touched one receive at a time, a fixed cost that is not the held requests'.
    let mut warm: Vec<Client> = (0..16).map(|_| server.connect()).collect();
    for _ in 0..256 {
        for client in &mut warm {
            assert_plain(&client.get("/delay/0"), "0");
        }
    }
    drop(warm);
    let rss_before = crate::common::rss_kib(server.pid());
    let request = get_request("/delay/1500");
    let started = Instant::now();
    let mut clients: Vec<Client> = (0..CONNECTIONS).map(|_| server.connect()).collect();
    for client in &mut clients {
        client.send(request.as_bytes());
    }
    // Let the server take them all in, then weigh what they hold.
    std::thread::sleep(Duration::from_millis(300));
    let per_held = (crate::common::rss_kib(server.pid()) - rss_before) * 1024 / CONNECTIONS as u64;
    eprintln!("{binary}: {per_held} bytes of RSS per held /delay request");
    // A slot, a place in line and a timer entry, no buffer: HttpArena's async profile
    // holds 32,000 of them.
    assert!(per_held < 4096, "{per_held} bytes per held request");
    let mut kept = Vec::new();
    let mut closed = Vec::new();
    for (i, client) in clients.into_iter().enumerate() {
        match i % 2 {
            0 => kept.push(client),
            _ => closed.push(client),
        }
    }
    // A reset, not a FIN: a half-closed client still gets its answer, so only a reset
    // frees the slot before the timer is due.
    for client in &closed {
        crate::common::reset_on_close(client.stream());
    }
    drop(closed);
    // A closed connection's timer, if delivered to the newcomer in its slot, would answer
    // the newcomer's own delayed request a second early.
    let mut newcomers: Vec<Client> = (0..CONNECTIONS / 2).map(|_| server.connect()).collect();
    for client in &mut newcomers {
        assert_plain(&client.get("/baseline11?a=1&b=2"), "3");
    }
    let newcomers_started = Instant::now();
    for client in &mut newcomers {
        client.send(get_request("/delay/2500").as_bytes());
    }
    for (i, mut client) in kept.into_iter().enumerate() {
        let response = client
            .response()
            .unwrap_or_else(|err| panic!("connection {i}: {err}"));
        assert_plain(&response, "1500");
    }
    assert!(started.elapsed() >= Duration::from_millis(1500));
    for client in &mut newcomers {
        assert_plain(&client.response().unwrap(), "2500");
    }
    assert!(newcomers_started.elapsed() >= Duration::from_millis(2500));
}

test_both_binaries! {
    gnosis, gnosis_uring;
    baseline_sums_get_post_and_chunked_bodies,
    baseline2_sums_a_and_b,
    fragmented_requests_get_their_answer_then_close,
    sixteen_pipelined_pipeline_requests,
    json_answers_the_first_items_with_their_totals,
    without_a_dataset_json_is_503_and_the_rest_serves,
    bad_input_gets_400_and_the_connection_goes_on,
    a_body_over_the_limit_is_413_and_closes,
    expect_100_continue_is_answered_before_the_body,
    delays_are_not_sooner_than_asked_and_keep_pipelined_order,
    thousands_of_held_delays_and_closed_ones_dropped,
}
