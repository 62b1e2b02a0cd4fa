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
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{free_port, rss_kib, BigFile, Server};
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
        let mut command = Command::new("python3");
        command.arg(script).arg(port.to_string());
        Upstream {
            child: listening(command, "upstream.py"),
            port,
        }
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

/// `command` started, once it printed `listening` (it accepts then).
fn listening(mut command: Command, what: &str) -> Child {
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "listening", "{what} did not start");
    child
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
    h3_with(port, requests, "")
}

/// What `h3_client.py get PORT REQUEST...` printed, each request with the field lines
/// `fields` (`name: value`, one a line).
fn h3_with(port: u16, requests: &[&str], fields: &str) -> Value {
    h3_env(port, requests, &[("H3_HEADERS", fields)])
}

/// What `h3_client.py get PORT REQUEST...` printed, run with `env`.
fn h3_env(port: u16, requests: &[&str], env: &[(&str, &str)]) -> Value {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/gnosis_tools/h3_client.py");
    let output = Command::new("python3")
        .envs(env.iter().copied())
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
    // Both backends learn the client's address as they accept it (io_uring's edge with a
    // single-shot accept that writes it).
    assert_eq!(field(&fields, "x-forwarded-for"), ["127.0.0.1"]);
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

    // An absolute-form target (RFC 9112 3.2.2): its path goes on, its authority as Host.
    let (status, _, body) = exchange(
        server.port,
        "GET http://absolute.test/echo/abs?q=1 HTTP/1.1\r\nHost: other.test\r\n\
         Connection: close\r\n\r\n",
    );
    assert_eq!(status, 200, "{body}");
    let echo: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(echo["target"], "/echo/abs?q=1");
    assert_eq!(field(&echoed_fields(&echo), "host"), ["absolute.test"]);

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
    // QUIC learns the client's address from its datagrams, on both backends.
    assert_eq!(
        field(&echoed_fields(&echo), "x-forwarded-for"),
        ["127.0.0.1"]
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
/// response never reaches anyone); a reset mid-answer is 502 or cut short; an answer later than
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
    // Its head with a part of its body may have been passed on before the reset: then the
    // answer is cut short (closed short of its Content-Length), never whole.
    let (status, head, body) = get(server.port, "/reset");
    assert!(
        status == 502 || (status == 200 && body.len() < 100),
        "{head}"
    );
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

/// `scripts/gnosis_tools/authsvc.py` (HttpArena's auth service's contract) on a free port,
/// with its secret, killed when dropped.
struct AuthService {
    child: Child,
    port: u16,
}

const SECRET: &str = "edge-test-secret";

impl AuthService {
    fn start() -> AuthService {
        let port = free_port();
        let mut command = Command::new("python3");
        command
            .args(["-m", "gnosis_tools.authsvc"])
            .env("PYTHONPATH", Self::tools())
            .env("JWT_SECRET", SECRET)
            .env("AUTHSVC_LISTEN", format!("127.0.0.1:{port}"));
        AuthService {
            child: listening(command, "authsvc.py"),
            port,
        }
    }

    fn tools() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts")
    }

    /// A token for user `sub` signed with `secret`.
    fn token(secret: &str, sub: &str) -> String {
        let output = Command::new("python3")
            .args([
                "-c",
                "import sys; from gnosis_tools.authsvc import token; \
                 print(token(sys.argv[1], sys.argv[2]))",
                secret,
                sub,
            ])
            .env("PYTHONPATH", Self::tools())
            .output()
            .expect("python3 runs");
        String::from_utf8(output.stdout).unwrap().trim().to_string()
    }
}

impl Drop for AuthService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The edge with an auth service before its upstream for `/api/`: a request with a valid
/// token reaches the upstream with the service's X-User-Id (a client's own dropped), over
/// HTTP/1.1, HTTP/2 and HTTP/3, pipelined and with a body; one without, or with a bad one,
/// is 401 and never reaches the upstream; paths outside /api/ are not asked about.
fn an_auth_service_guards_its_paths(binary: &str) {
    let upstream = Upstream::start();
    let auth = AuthService::start();
    let statics = BigFile::new("edge-auth");
    let auth_target = format!("127.0.0.1:{}/_auth", auth.port);
    let extra = ["--auth", &auth_target, "--auth-prefix", "/api/"];
    let server = edge(binary, &upstream.address(), &statics, &extra);
    let token = AuthService::token(SECRET, "42");
    let bearer = format!("Authorization: Bearer {token}");

    let (status, head, body) = exchange(
        server.port,
        &format!(
            "POST /api/echo?x=1 HTTP/1.1\r\nHost: a\r\n{bearer}\r\nX-User-Id: 1\r\n\
             Content-Length: 5\r\nConnection: close\r\n\r\nhello"
        ),
    );
    assert_eq!(status, 200, "{head}");
    let echo: Value = serde_json::from_str(&body).unwrap();
    let fields = echoed_fields(&echo);
    assert_eq!(field(&fields, "x-user-id"), ["42"]);
    assert_eq!(
        (&echo["target"], &echo["body"]),
        (&"/api/echo?x=1".into(), &"hello".into())
    );

    // Pipelined, each asked about in turn, answered in order.
    let mut requests = String::new();
    for i in 0..20 {
        requests.push_str(&format!(
            "GET /api/echo/{i} HTTP/1.1\r\nHost: a\r\n{bearer}\r\n\r\n"
        ));
    }
    requests.push_str("GET /api/echo/last HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let (_, _, body) = exchange(server.port, &requests);
    let answered: Vec<_> = body.match_indices("\"target\": \"/api/echo/").collect();
    assert_eq!(answered.len(), 20);
    assert!(body.ends_with("Unauthorized"), "{body}");

    let served = upstream.served();
    let forged = AuthService::token("another-secret", "42");
    for authorization in [
        "",
        "Authorization: Bearer invalid.token.here\r\n",
        &format!("Authorization: Bearer {forged}\r\n"),
    ] {
        for method in ["GET", "POST"] {
            let request = format!(
                "{method} /api/echo HTTP/1.1\r\nHost: a\r\n{authorization}X-User-Id: 42\r\n\
                 Content-Length: 2\r\nConnection: close\r\n\r\n{{}}"
            );
            assert_eq!(exchange(server.port, &request).0, 401, "{request}");
        }
    }
    // One more: the first count's own request.
    assert_eq!(
        upstream.served(),
        served + 1,
        "a request the service refused was forwarded"
    );

    // Outside the prefix: not asked about, and no client says who it is.
    let (status, _, body) = exchange(
        server.port,
        "GET /echo HTTP/1.1\r\nHost: a\r\nX-User-Id: 42\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 200);
    let echo: Value = serde_json::from_str(&body).unwrap();
    assert!(field(&echoed_fields(&echo), "x-user-id").is_empty());

    let base = format!("https://127.0.0.1:{}", server.h2_tls_port);
    let header = format!("authorization: Bearer {token}");
    let (version, status, _, body) =
        curl(&["--http2", "-H", &header, &format!("{base}/api/echo/h2")]);
    assert_eq!((version.as_str(), status), ("2", 200));
    let echo: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(field(&echoed_fields(&echo), "x-user-id"), ["42"]);
    let (_, status, _, _) = curl(&["--http2", &format!("{base}/api/echo/h2")]);
    assert_eq!(status, 401);

    let got = h3_with(server.h3_port, &["GET:/api/echo/h3"], &header);
    let answer = &got["answers"][0];
    assert_eq!(h3_header(answer, ":status"), Some("200"), "{got}");
    let echo: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
    assert_eq!(field(&echoed_fields(&echo), "x-user-id"), ["42"]);
    let got = h3(server.h3_port, &["GET:/api/echo/h3"]);
    assert_eq!(
        h3_header(&got["answers"][0], ":status"),
        Some("401"),
        "{got}"
    );
}

/// An auth service's 403 is the client's; its other answers, its silence past the timeout
/// and its absence are 503: the request is never passed on without its yes.
fn an_auth_service_that_fails_lets_nothing_through(binary: &str) {
    let upstream = Upstream::start();
    let statics = BigFile::new("edge-auth-fails");
    let down = format!("127.0.0.1:{}/_auth", free_port());
    let cases = [
        (format!("{}/deny?status=403", upstream.address()), 403),
        (format!("{}/deny?status=500", upstream.address()), 503),
        (format!("{}/deny?status=302", upstream.address()), 503),
        (format!("{}/hang", upstream.address()), 503),
        (down, 503),
    ];
    for (auth, expected) in cases {
        let extra = ["--auth", &auth, "--upstream-timeout", "1000"];
        let server = edge(binary, &upstream.address(), &statics, &extra);
        let served = upstream.served();
        let (status, _, _) = get(server.port, "/echo");
        assert_eq!(status, expected, "{auth}");
        // The auth service's own requests are upstream.py's here; none other came.
        let asked = match auth.starts_with(&upstream.address()) {
            true => 1,
            false => 0,
        };
        assert_eq!(upstream.served(), served + 1 + asked, "{auth}: passed on");
    }
}

/// The body upstream.py's /big and /big-chunked send: 16-byte lines, each its index in
/// hexadecimal.
fn big_body(len: usize) -> String {
    (0..len / 16).map(|i| format!("{i:015x}\n")).collect()
}

/// A chunked body decoded (no extensions, no trailers, as gnosis writes it); `None` if it
/// does not end with its last chunk.
fn dechunk(mut body: &str) -> Option<String> {
    let mut decoded = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let size = usize::from_str_radix(size, 16).ok()?;
        if size == 0 {
            return (rest == "\r\n").then_some(decoded);
        }
        decoded.push_str(rest.get(..size)?);
        body = rest.get(size..)?.strip_prefix("\r\n")?;
    }
}

/// The edge passes on bodies as they arrive, past the 8 MiB it once buffered whole: 32 MiB
/// over HTTP/1.1 (with the upstream's Content-Length, or chunked when the upstream chunked
/// it) and HTTP/2, 12 MiB over HTTP/3 (aioquic is slower), byte for byte.
fn streams_bodies_past_what_was_buffered_whole_over_each_protocol(binary: &str) {
    let upstream = Upstream::start();
    let statics = BigFile::new("edge-big");
    let server = edge(binary, &upstream.address(), &statics, &[]);
    let len = 32 << 20;
    let expected = big_body(len);
    for path in ["/big", "/big-chunked"] {
        let target = format!("{path}?bytes={len}");
        let request = format!("GET {target} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        let (status, head, body) = exchange(server.port, &request);
        assert_eq!(status, 200, "{head}");
        let body = match path {
            "/big" => {
                assert_eq!(values(&head, "content-length"), [len.to_string()], "{head}");
                body
            }
            _ => {
                assert_eq!(values(&head, "transfer-encoding"), ["chunked"], "{head}");
                dechunk(&body).expect("a whole chunked body")
            }
        };
        assert!(
            body == expected,
            "{path} over HTTP/1.1: {} bytes",
            body.len()
        );
        let url = format!("https://127.0.0.1:{}{target}", server.h2_tls_port);
        let (version, status, _, body) = curl(&["--http2", &url]);
        assert_eq!((version.as_str(), status), ("2", 200));
        assert!(body == expected, "{path} over HTTP/2: {} bytes", body.len());
    }
    let len = 12 << 20;
    let expected = big_body(len);
    let requests = [
        format!("GET:/big?bytes={len}"),
        format!("GET:/big-chunked?bytes={len}"),
    ];
    let requests: Vec<&str> = requests.iter().map(String::as_str).collect();
    let answers = h3_env(server.h3_port, &requests, &[("H3_TIMEOUT", "300")]);
    for answer in answers["answers"].as_array().unwrap() {
        assert_eq!(h3_header(answer, ":status"), Some("200"));
        let body = answer["body"].as_str().unwrap();
        assert!(body == expected, "over HTTP/3: {} bytes", body.len());
    }
}

/// Reads `stream` until what it read holds `marker`; returns what it read.
fn read_until(stream: &mut impl Read, marker: &str) -> String {
    let mut seen = Vec::new();
    let mut buffer = [0; 4096];
    while !String::from_utf8_lossy(&seen).contains(marker) {
        let n = stream.read(&mut buffer).unwrap();
        assert!(
            n > 0,
            "closed before {marker:?}: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buffer[..n]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// curl over HTTP/2 to `url`, its body written as it comes (`-N`) to a pipe the test reads.
/// aioquic's client (`h3_client.py`) to upstream.py's `path` (/gate or /gate-reset) through
/// the edge's HTTP/3 on `h3_port`: its gate opened once the client has seen the first part
/// (`H3_SIGNAL`). What the client printed.
fn h3_through_gate(h3_port: u16, path: &str) -> Value {
    let gate = tempfile(&format!("gate-h3{}", path.replace('/', "-")));
    let signal = format!("{} first part", gate.display());
    let request = format!("GET:{path}?file={}", gate.display());
    let answers = h3_env(h3_port, &[&request], &[("H3_SIGNAL", &signal)]);
    let _ = std::fs::remove_file(&gate);
    answers
}

/// curl over HTTP/2 to upstream.py's `path` (/gate or /gate-reset) through the edge on
/// `h2_tls_port`: its gate opened once curl has printed the first part. What curl printed,
/// and how it ended.
fn curl_through_gate(h2_tls_port: u16, path: &str) -> (String, Output) {
    let gate = tempfile(&format!("gate-h2{}", path.replace('/', "-")));
    let url = format!(
        "https://127.0.0.1:{h2_tls_port}{path}?file={}",
        gate.display()
    );
    let mut curl = Command::new("curl")
        .args(["-sS", "-k", "-N", "--http2", "--max-time", "60", &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("curl runs");
    let mut out = curl.stdout.take().unwrap();
    let mut seen = read_until(&mut out, "first part");
    std::fs::write(&gate, "").unwrap();
    out.read_to_string(&mut seen).unwrap();
    let output = curl.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&gate);
    (seen, output)
}

/// A body the upstream sends a first part of, then the rest only once the client has seen
/// that part (upstream.py's /gate waits for a file the test makes then): the head and the
/// first part were passed on before the upstream's end, over each protocol. Ordering only:
/// however slow the machine, the upstream cannot finish before the client saw the start.
fn the_first_bytes_of_a_slow_body_reach_the_client_before_its_end(binary: &str) {
    let upstream = Upstream::start();
    let statics = BigFile::new("edge-gate");
    let server = edge(binary, &upstream.address(), &statics, &[]);

    let gate = tempfile("gate-h1");
    let target = format!("/gate?file={}", gate.display());
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let request = format!("GET {target} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut seen = read_until(&mut stream, "first part");
    std::fs::write(&gate, "").unwrap();
    stream.read_to_string(&mut seen).unwrap();
    let (head, body) = seen.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(values(head, "transfer-encoding"), ["chunked"], "{head}");
    assert_eq!(
        dechunk(body).as_deref(),
        Some("first part\nthe rest\n"),
        "{seen}"
    );
    let _ = std::fs::remove_file(&gate);

    let (seen, output) = curl_through_gate(server.h2_tls_port, "/gate");
    assert!(output.status.success());
    assert_eq!(seen, "first part\nthe rest\n");

    let answers = h3_through_gate(server.h3_port, "/gate");
    let answer = &answers["answers"][0];
    assert_eq!(h3_header(answer, ":status"), Some("200"), "{answers}");
    assert_eq!(answer["body"], "first part\nthe rest\n", "{answers}");
}

/// The edge on one worker with `conns` upstream connections and deadlines far off: a test
/// waits on the upstream's state, however long that takes.
fn patient_edge(binary: &str, upstream: &Upstream, statics: &BigFile, conns: u64) -> Server {
    let conns = conns.to_string();
    let far = [
        "--send-timeout",
        "600000",
        "--upstream-timeout",
        "600000",
        "--threads",
        "1",
        "--upstream-conns",
        &conns,
    ];
    edge(binary, &upstream.address(), statics, &far)
}

/// The bytes the kernel holds on the established TCP connections to `port`, at both ends:
/// what waits to be sent (or acknowledged) where `port` is the local one, and what waits to be
/// read where it is the remote one (`tx_queue` and `rx_queue` of /proc/net/tcp and tcp6).
fn queued_towards(port: u16) -> u64 {
    const ESTABLISHED: &str = "01";
    let port_of = |address: &str| u16::from_str_radix(address.rsplit(':').next()?, 16).ok();
    let mut queued = 0;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [_, local, remote, state, queues, ..] = fields[..] else {
                continue;
            };
            let (tx, rx) = queues.split_once(':').unwrap();
            let (tx, rx) = (
                u64::from_str_radix(tx, 16).unwrap(),
                u64::from_str_radix(rx, 16).unwrap(),
            );
            if state != ESTABLISHED {
                continue;
            }
            if port_of(local) == Some(port) {
                queued += tx;
            }
            if port_of(remote) == Some(port) {
                queued += rx;
            }
        }
    }
    queued
}

/// A client that does not read a 256 MiB answer: the edge stops reading the upstream once a
/// window of it waits (upstream.py notes when its sends find no room), holding a few MiB, not
/// the body; other clients are served meanwhile, a large answer too, though the one worker
/// keeps a single upstream connection (another opens beside the one held); and the client
/// gets the whole body once it reads.
fn a_client_that_does_not_read_holds_a_bounded_part_of_its_answer(binary: &str) {
    let upstream = Upstream::start();
    let statics = BigFile::new("edge-slow");
    let server = patient_edge(binary, &upstream, &statics, 1);
    assert_eq!(get(server.port, "/other").0, 200);
    let before = rss_kib(server.pid());
    let len: usize = 256 << 20;
    let mut slow = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let request =
        format!("GET /zeros?bytes={len} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    slow.write_all(request.as_bytes()).unwrap();
    let started = Instant::now();
    while get(upstream.port, "/stalled").2 != "yes" {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the upstream never stalled"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let grown = rss_kib(server.pid()).saturating_sub(before);
    assert!(
        grown < 48 * 1024,
        "the edge grew by {grown} KiB for a client not reading"
    );
    let (status, _, body) = get(server.port, "/other");
    assert_eq!((status, body.as_str()), (200, "hello from upstream"));
    let (status, _, body) = get(server.port, &format!("/big?bytes={}", 4 << 20));
    assert!(status == 200 && body == big_body(4 << 20), "{status}");
    slow.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut answer = Vec::new();
    slow.read_to_end(&mut answer).unwrap();
    let at = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert_eq!(answer.len() - at, len);
    assert!(answer[at..].iter().all(|&byte| byte == 0));
}

/// A worker over its budget (`--max-buffered` 64 KiB, less than one pipe holds) pauses
/// the connection that holds the most: its piped body still moves to its output under its
/// lowered mark, so the answer comes whole, over HTTP/1.1 and HTTP/2, rather than stalling
/// until the upstream's stall timer (2 s here) cuts it.
fn a_connection_paused_for_the_budget_still_streams_its_body(binary: &str) {
    let upstream = Upstream::start();
    let statics = BigFile::new("edge-paused");
    let extra = [
        "--max-buffered",
        "65536",
        "--upstream-timeout",
        "2000",
        "--threads",
        "1",
    ];
    let server = edge(binary, &upstream.address(), &statics, &extra);
    let len = 8 << 20;
    let expected = big_body(len);
    let target = format!("/big?bytes={len}");
    let (status, head, body) = get(server.port, &target);
    assert_eq!(status, 200, "{head}");
    assert!(body == expected, "over HTTP/1.1: {} bytes", body.len());
    let url = format!("https://127.0.0.1:{}{target}", server.h2_tls_port);
    let (version, status, _, body) = curl(&["--http2", &url]);
    assert_eq!((version.as_str(), status), ("2", 200));
    assert!(body == expected, "over HTTP/2: {} bytes", body.len());
}

/// Clients that do not read their answers: each holds in the edge what its pipe may (a window,
/// and the read under way when the window filled) and what its connection's unsent output may
/// (256 KiB, HTTP/1.1's mark), however much the upstream has sent. The edge holds what the
/// upstream sent less what the kernel holds on both sides (sockets' buffers, which autotuning
/// grows to MiBs): a backend that reads on past a full window (a multishot receive draining
/// the socket into completions before its cancel lands) holds hundreds of KiB more per client.
/// Several clients, so that what each holds past its bound adds up.
fn clients_that_do_not_read_hold_a_window_and_a_read_each(binary: &str) {
    const CLIENTS: u64 = 8;
    const WINDOW: u64 = 256 << 10;
    const UNSENT: u64 = 256 << 10;
    // A read (io_uring's are at most 64 KiB) and the answers' heads, with room to spare.
    const READ_AND_SLACK: u64 = 72 << 10;
    let upstream = Upstream::start();
    let statics = BigFile::new("edge-held");
    // An upstream connection each.
    let server = patient_edge(binary, &upstream, &statics, CLIENTS);
    let request = format!("GET /zeros?bytes={} HTTP/1.1\r\nHost: a\r\n\r\n", 64 << 20);
    let clients: Vec<TcpStream> = (0..CLIENTS)
        .map(|_| {
            let mut client = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
            client.write_all(request.as_bytes()).unwrap();
            client
        })
        .collect();
    // Settled once the upstream has sent nothing for a second (each answer stalls after a
    // window and the sockets' buffers at least).
    let started = Instant::now();
    let mut sent = 0;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now: u64 = get(upstream.port, "/zeros-sent").2.parse().unwrap();
        if now == sent && sent >= CLIENTS * (WINDOW + UNSENT) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the upstream never stalled"
        );
        sent = now;
    }
    let in_kernel = queued_towards(upstream.port) + queued_towards(server.port);
    let held = sent.saturating_sub(in_kernel);
    let bound = CLIENTS * (WINDOW + UNSENT + READ_AND_SLACK);
    assert!(
        held < bound,
        "the edge holds {held} bytes of {CLIENTS} answers, over {bound} (the upstream sent \
         {sent}, the kernel holds {in_kernel})"
    );
    drop(clients);
}

/// The upstream resets its connection within a body whose head was passed on (upstream.py's
/// /gate-reset resets once the client has seen its first part): the client never gets what
/// looks like a whole answer. HTTP/1.1 closes short of the Content-Length, HTTP/2 resets the
/// stream (INTERNAL_ERROR), HTTP/3 too (H3_INTERNAL_ERROR).
fn an_upstream_reset_within_a_body_is_never_a_whole_answer(binary: &str) {
    let upstream = Upstream::start();
    let statics = BigFile::new("edge-cut");
    let server = edge(binary, &upstream.address(), &statics, &[]);

    let gate = tempfile("cut-h1");
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let request = format!(
        "GET /gate-reset?file={} HTTP/1.1\r\nHost: a\r\n\r\n",
        gate.display()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut seen = read_until(&mut stream, "first part");
    std::fs::write(&gate, "").unwrap();
    // Closed (not kept alive, though the request did not ask for the close), short.
    let _ = stream.read_to_string(&mut seen);
    let (head, body) = seen.split_once("\r\n\r\n").unwrap();
    assert_eq!(values(head, "content-length"), ["100000"], "{head}");
    assert_eq!(body, "first part\n");
    let _ = std::fs::remove_file(&gate);

    let (seen, output) = curl_through_gate(server.h2_tls_port, "/gate-reset");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "curl took it for whole: {seen}");
    assert!(stderr.contains("INTERNAL_ERROR"), "{stderr}");
    assert_eq!(seen, "first part\n");

    let answers = h3_through_gate(server.h3_port, "/gate-reset");
    let answer = &answers["answers"][0];
    assert_eq!(answer["reset"], 0x102, "H3_INTERNAL_ERROR: {answers}");

    // The edge goes on serving.
    assert_eq!(get(server.port, "/other").0, 200);
}

test_both_binaries!(gnosis, gnosis_uring;
    forwards_each_protocols_requests_with_their_fields,
    passes_on_answers_framed_each_way,
    requests_past_what_the_connections_carry_wait_their_turn,
    serves_static_files_itself,
    upstream_faults_fail_their_request_alone,
    a_down_upstream_is_502_at_once_and_served_again_when_back,
    fronts_gnosis_itself,
    an_auth_service_guards_its_paths,
    an_auth_service_that_fails_lets_nothing_through,
    streams_bodies_past_what_was_buffered_whole_over_each_protocol,
    the_first_bytes_of_a_slow_body_reach_the_client_before_its_end,
    a_client_that_does_not_read_holds_a_bounded_part_of_its_answer,
    clients_that_do_not_read_hold_a_window_and_a_read_each,
    an_upstream_reset_within_a_body_is_never_a_whole_answer,
    a_connection_paused_for_the_budget_still_streams_its_body,
);
