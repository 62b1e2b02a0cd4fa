//! gnosis as an edge (`--upstream`): the same binaries in front of an HTTP/1.1 server, over
//! real sockets. The upstreams are `upstream.py` (every way a response can be framed or go
//! wrong, by path) and gnosis itself; the clients curl (HTTP/1.1 and HTTP/2) and aioquic
//! (HTTP/3, `scripts/gnosis_tools/h3_client.py`).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, BigFile, Server};
use serde_json::Value;

/// `upstream.py` on a free port, killed when dropped.
struct Upstream {
    child: Child,
    port: u16,
}

impl Upstream {
    fn start() -> Upstream {
        Self::start_on(free_port())
    }

    fn start_on(port: u16) -> Upstream {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/edge/upstream.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "listening", "upstream.py did not start");
        Upstream { child, port }
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// How many requests it has read so far (its own /count is one more).
    fn served(&self) -> usize {
        let (_, _, body) = get(self.port, "/count");
        body.parse::<usize>().unwrap() - 1
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The edge in front of `upstream`, with TLS (so HTTP/2 over TLS and HTTP/3) and a static
/// folder of its own.
fn edge(binary: &str, upstream: &str, statics: &BigFile, extra: &[&str]) -> Server {
    let mut args = vec!["--upstream", upstream];
    args.extend_from_slice(extra);
    Server::start_with_tls(binary, statics, &args)
}

/// One request over a connection of its own, HTTP/1.1: (status, head, body).
fn get(port: u16, target: &str) -> (u16, String, String) {
    exchange(
        port,
        &format!("GET {target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"),
    )
}

/// Writes `request` and reads to the close: (status, head, body).
fn exchange(port: u16, request: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// curl with `args`: (HTTP version, status, head, body).
fn curl(args: &[&str]) -> (String, u16, String, String) {
    let head = tempfile("head");
    let output = Command::new("curl")
        .args(["-sS", "-k", "--max-time", "20", "-D"])
        .arg(&head)
        .args(["-w", "\n%{http_version} %{http_code}"])
        .args(args)
        .output()
        .expect("curl runs (scripts/test.sh installs it)");
    assert!(output.status.success(), "curl {args:?}: {output:?}");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, tail) = text.rsplit_once('\n').unwrap();
    let (version, status) = tail.split_once(' ').unwrap();
    let head_text = std::fs::read_to_string(&head).unwrap_or_default();
    let _ = std::fs::remove_file(&head);
    (
        version.to_string(),
        status.parse().unwrap(),
        head_text,
        body.to_string(),
    )
}

fn tempfile(what: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    std::env::temp_dir().join(format!(
        "gnosis-edge-test-{}-{what}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// The values of field `name` in a head, in order.
fn values(head: &str, name: &str) -> Vec<String> {
    head.lines()
        .filter_map(|line| line.split_once(':'))
        .filter(|(field, _)| field.trim().eq_ignore_ascii_case(name))
        .map(|(_, value)| value.trim().to_string())
        .collect()
}

/// The fields upstream.py's /echo saw, as (name lowercased, value).
fn echoed_fields(echo: &Value) -> Vec<(String, String)> {
    echo["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap().to_ascii_lowercase(),
                pair[1].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    fields
        .iter()
        .filter(|(field, _)| field == name)
        .map(|(_, value)| value.as_str())
        .collect()
}

/// What `h3_client.py get PORT REQUEST...` printed.
fn h3(port: u16, requests: &[&str]) -> Value {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/gnosis_tools/h3_client.py");
    let output = Command::new("python3")
        .arg(script)
        .args(["get", &port.to_string()])
        .args(requests)
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "aioquic: {output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

fn h3_header<'a>(answer: &'a Value, name: &str) -> Option<&'a str> {
    answer["headers"]
        .as_array()?
        .iter()
        .find(|pair| pair[0] == name)
        .and_then(|pair| pair[1].as_str())
}

/// A request over each protocol reaches the upstream with its method, target and end-to-end
/// fields, Host kept (HTTP/2's and HTTP/3's :authority as Host), the hop-by-hop ones and
/// the client's own X-Forwarded-* dropped, X-Forwarded-For, X-Forwarded-Proto and Via added;
/// a body goes with a Content-Length.
fn forwards_each_protocols_requests_with_their_fields(binary: &str) {
    let upstream = Upstream::start();
    let statics = BigFile::new("edge-forward");
    let server = edge(binary, &upstream.address(), &statics, &[]);

    let (status, _, body) = exchange(
        server.port,
        "POST /echo/a?b=1&c=%20 HTTP/1.1\r\nHost: example.test\r\nCookie: k=v\r\n\
         Authorization: Bearer t\r\nConnection: close, X-Hop\r\nX-Hop: gone\r\n\
         X-Forwarded-For: 6.6.6.6\r\nKeep-Alive: timeout=5\r\nContent-Length: 5\r\n\r\nhello",
    );
    assert_eq!(status, 200, "{body}");
    let echo: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(echo["method"], "POST");
    assert_eq!(echo["target"], "/echo/a?b=1&c=%20");
    assert_eq!(echo["body"], "hello");
    let fields = echoed_fields(&echo);
    assert_eq!(field(&fields, "host"), ["example.test"]);
    assert_eq!(field(&fields, "cookie"), ["k=v"]);
    assert_eq!(field(&fields, "authorization"), ["Bearer t"]);
    assert_eq!(field(&fields, "content-length"), ["5"]);
    // epoll's accept says the client's address; io_uring's multishot accept does not.
    let forwarded_for = match binary.ends_with("gnosis-uring") {
        true => vec![],
        false => vec!["127.0.0.1"],
    };
    assert_eq!(field(&fields, "x-forwarded-for"), forwarded_for);
    assert_eq!(field(&fields, "x-forwarded-proto"), ["http"]);
    assert_eq!(field(&fields, "via").len(), 1);
    for hop in ["x-hop", "keep-alive"] {
        assert!(
            field(&fields, hop).is_empty(),
            "{hop} passed on: {fields:?}"
        );
    }
    assert!(field(&fields, "connection")
        .iter()
        .all(|v| !v.contains("X-Hop")));

    let url = format!("https://127.0.0.1:{}/echo/h2?x=y", server.h2_tls_port);
    let (version, status, _, body) = curl(&["--http2", "-H", "X-Custom: 1", &url]);
    assert_eq!((version.as_str(), status), ("2", 200), "{body}");
    let echo: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (echo["method"].as_str(), echo["target"].as_str()),
        (Some("GET"), Some("/echo/h2?x=y"))
    );
    let fields = echoed_fields(&echo);
    assert_eq!(
        field(&fields, "host"),
        [format!("127.0.0.1:{}", server.h2_tls_port)]
    );
    assert_eq!(field(&fields, "x-custom"), ["1"]);
    assert_eq!(field(&fields, "x-forwarded-proto"), ["https"]);

    let got = h3(server.h3_port, &["GET:/echo/h3", "POST:/echo/h3post:abc"]);
    let answers = got["answers"].as_array().unwrap();
    assert_eq!(h3_header(&answers[0], ":status"), Some("200"), "{got}");
    let echo: Value = serde_json::from_str(answers[1]["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        (echo["method"].as_str(), echo["body"].as_str()),
        (Some("POST"), Some("abc"))
    );
    assert_eq!(field(&echoed_fields(&echo), "x-forwarded-proto"), ["https"]);
}

/// The upstream's status, fields and body reach the client whichever way the upstream framed
/// the body (a length, chunked, to its close), past interim answers; HEAD and 304 keep the
/// representation's length and send no body.
fn passes_on_answers_framed_each_way(binary: &str) {
    let upstream = Upstream::start();
    let statics = BigFile::new("edge-answers");
    let server = edge(binary, &upstream.address(), &statics, &[]);
    let h1 = |path: &str| format!("http://127.0.0.1:{}{path}", server.port);
    let h2 = |path: &str| format!("https://127.0.0.1:{}{path}", server.h2_tls_port);
    for (url, options) in [(h1("/created"), "--http1.1"), (h2("/created"), "--http2")] {
        let (_, status, head, body) = curl(&[options, &url]);
        assert_eq!((status, body.as_str()), (201, r#"{"id":7}"#), "{url}");
        assert_eq!(values(&head, "location"), ["/items/7"], "{head}");
        assert_eq!(
            values(&head, "set-cookie"),
            ["a=1; Path=/", "b=2; Path=/"],
            "{head}"
        );
        assert_eq!(
            values(&head, "content-type"),
            ["application/json"],
            "{head}"
        );
        assert_eq!(values(&head, "content-length"), ["8"], "{head}");
        assert_eq!(values(&head, "cache-control"), ["no-store"], "{head}");
    }
    for (path, expected) in [
        ("/chunked", "hello chunked!"),
        ("/close", "until the close"),
        ("/interim", "after"),
    ] {
        for (url, options) in [(h1(path), "--http1.1"), (h2(path), "--http2")] {
            let (_, status, head, body) = curl(&[options, &url]);
            assert_eq!((status, body.as_str()), (200, expected), "{url}: {head}");
            assert!(values(&head, "transfer-encoding").len() <= 1, "{head}");
        }
    }
    // To HEAD, the head alone (read to the close), with the representation's length.
    let (status, head, body) = exchange(
        server.port,
        "HEAD /head-length HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert_eq!((status, body.as_str()), (200, ""), "{head}");
    assert_eq!(values(&head, "content-length"), ["1234"], "{head}");
    for (url, options) in [
        (h1("/head-length"), "--http1.1"),
        (h2("/head-length"), "--http2"),
    ] {
        let (_, status, head, _) = curl(&[options, "-I", &url]);
        assert_eq!(status, 200, "{url}");
        assert_eq!(values(&head, "content-length"), ["1234"], "{url}: {head}");
        let (_, status, head, _) = curl(&[options, &url.replace("head-length", "not-modified")]);
        assert_eq!(status, 304, "{head}");
        assert_eq!(values(&head, "etag"), ["\"v1\""], "{head}");
    }
    // Pipelined over one connection, each answer in its place.
    let (status, _, body) = exchange(
        server.port,
        "GET /chunked HTTP/1.1\r\nHost: a\r\n\r\nGET /slow?ms=200 HTTP/1.1\r\nHost: a\r\n\r\n\
         GET /created HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 200);
    let chunked = body.find("hello").unwrap();
    let slow = body.find("slow").unwrap();
    let created = body.find(r#"{"id":7}"#).unwrap();
    assert!(chunked < slow && slow < created, "{body}");
}

/// More requests than the upstream connections carry at once (one connection, 16 deep) wait
/// their turn: 300 pipelined on one client connection are all answered, in order.
fn requests_past_what_the_connections_carry_wait_their_turn(binary: &str) {
    let upstream = Upstream::start();
    let statics = BigFile::new("edge-queue");
    let server = edge(
        binary,
        &upstream.address(),
        &statics,
        &["--upstream-conns", "1"],
    );
    let mut requests = String::new();
    for i in 0..300 {
        requests.push_str(&format!("GET /echo/{i} HTTP/1.1\r\nHost: a\r\n\r\n"));
    }
    requests.push_str("GET /echo/last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let (status, _, body) = exchange(server.port, &requests);
    assert_eq!(status, 200);
    let targets: Vec<&str> = body
        .match_indices("\"target\": \"")
        .map(|(at, found)| {
            let rest = &body[at + found.len()..];
            &rest[..rest.find('"').unwrap()]
        })
        .collect();
    let expected: Vec<String> = (0..300)
        .map(|i| format!("/echo/{i}"))
        .chain(["/echo/last".to_string()])
        .collect();
    assert_eq!(targets, expected);
}

/// /static/* is served from the edge's own folder, never forwarded; a missing file is 404.
fn serves_static_files_itself(binary: &str) {
    let upstream = Upstream::start();
    let statics = BigFile::new("edge-static");
    let server = edge(binary, &upstream.address(), &statics, &[]);
    let before = upstream.served();
    let output = Command::new("curl")
        .args([
            "-sk",
            "--http2",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{size_download}",
        ])
        .arg(format!(
            "https://127.0.0.1:{}/static/big.bin",
            server.h2_tls_port
        ))
        .output()
        .expect("curl runs");
    let expected = format!("200 {}", BigFile::LEN);
    assert_eq!(String::from_utf8_lossy(&output.stdout), expected);
    let (status, _, _) = get(server.port, "/static/nonexistent.txt");
    assert_eq!(status, 404);
    assert_eq!(
        upstream.served(),
        before + 1,
        "only /count reached the upstream"
    );
}

/// A response the upstream framed wrongly is never passed on (502, and a smuggled second
/// response never reaches anyone); a reset mid-answer is 502; an answer later than
/// --upstream-timeout is 504; each fails its own request only, and the next ones are served.
fn upstream_faults_fail_their_request_alone(binary: &str) {
    let upstream = Upstream::start();
    let statics = BigFile::new("edge-faults");
    let server = edge(
        binary,
        &upstream.address(),
        &statics,
        &["--upstream-timeout", "1000"],
    );
    assert_eq!(get(server.port, "/two-lengths").0, 502);
    let (status, _, body) = get(server.port, "/smuggle");
    assert_eq!((status, body.as_str()), (200, "first"));
    assert_eq!(get(server.port, "/reset").0, 502);
    let started = Instant::now();
    assert_eq!(get(server.port, "/hang").0, 504);
    assert!(started.elapsed() < Duration::from_secs(10));
    for _ in 0..20 {
        let (status, _, body) = get(server.port, "/other");
        assert_eq!((status, body.as_str()), (200, "hello from upstream"));
        assert!(!body.contains("smuggled"));
    }
}

/// With the upstream down, a request is answered 502 at once, not after a connect timeout;
/// once it is back on the same port, requests are served again without a restart.
fn a_down_upstream_is_502_at_once_and_served_again_when_back(binary: &str) {
    let port = free_port();
    let statics = BigFile::new("edge-down");
    let server = edge(binary, &format!("127.0.0.1:{port}"), &statics, &[]);
    for _ in 0..3 {
        let started = Instant::now();
        assert_eq!(get(server.port, "/x").0, 502);
        assert!(started.elapsed() < Duration::from_secs(3));
    }
    let upstream = Upstream::start_on(port);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _, body) = get(server.port, "/x");
        if status == 200 {
            assert_eq!(body, "hello from upstream");
            break;
        }
        assert!(Instant::now() < deadline, "not served again: {status}");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(upstream);
}

/// gnosis in front of gnosis: HttpArena's gateway routes through the edge, over HTTP/2.
fn fronts_gnosis_itself(binary: &str) {
    let dataset = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/dataset.json");
    let app = Server::start_with_env(
        binary,
        &[],
        &[
            ("PGHOST", "/nonexistent-gnosis-test-database".to_string()),
            ("DATASET_PATH", dataset.to_str().unwrap().to_string()),
        ],
    );
    let statics = BigFile::new("edge-gnosis");
    let server = edge(binary, &format!("127.0.0.1:{}", app.port), &statics, &[]);
    let base = format!("https://127.0.0.1:{}", server.h2_tls_port);
    let (version, status, head, body) = curl(&["--http2", &format!("{base}/baseline2?a=13&b=42")]);
    assert_eq!(
        (version.as_str(), status, body.as_str()),
        ("2", 200, "55"),
        "{head}"
    );
    let (_, status, head, body) = curl(&["--http2", &format!("{base}/json/5")]);
    assert_eq!(status, 200, "{head}");
    assert_eq!(values(&head, "content-type"), ["application/json"]);
    let json: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["count"], 5);
}

test_both_binaries!(gnosis, gnosis_uring;
    forwards_each_protocols_requests_with_their_fields,
    passes_on_answers_framed_each_way,
    requests_past_what_the_connections_carry_wait_their_turn,
    serves_static_files_itself,
    upstream_faults_fail_their_request_alone,
    a_down_upstream_is_502_at_once_and_served_again_when_back,
    fronts_gnosis_itself,
);
