//! HTTP/2 conformance: h2spec (RFC 9113 and RFC 7541, the 147 cases of `--strict`) against
//! the sans-I/O `h2` module in a minimal blocking server around `h2::Connection`, and
//! against both binaries: on the h2c port, and on the HTTP/1.1 port, where h2c by prior
//! knowledge shares it; curl as an independent client.

#[macro_use]
#[path = "common/mod.rs"]
mod common;
#[path = "h2/drain.rs"]
mod drain;
#[path = "h2/hostile.rs"]
mod hostile;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use ::gnosis::h2::{Connection, Limits};
use ::gnosis::http::{
    Answer, BufferPool, ContentType, Handler, HttpDate, Reply, Request, Ticket, Wire,
};
use ::gnosis::transport::test_pair;

/// h2spec, from the shared anchors beside the repository (`H2SPEC` names another).
fn h2spec() -> PathBuf {
    std::env::var_os("H2SPEC").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/anchors/tools/h2spec"),
        PathBuf::from,
    )
}

/// Answers every request at once, POST with its body, others with 1,000 bytes (h2spec's
/// negative-window case needs a few).
struct Echo(Vec<u8>);

impl Handler for Echo {
    fn handle<'a>(&'a mut self, request: &'a Request<'a>, _: Ticket) -> Reply<'a> {
        let body = match request.body.is_empty() {
            true => &self.0,
            false => request.body,
        };
        Reply::Now(Answer::ok(ContentType::Plain, body))
    }
}

/// Serves one connection with [`Echo`] until the connection is finished or the peer
/// leaves.
fn serve(mut socket: TcpStream) -> std::io::Result<()> {
    let date = HttpDate::new();
    let mut buffers = BufferPool::default();
    let mut connection = Connection::new(Limits::default(), Instant::now());
    let mut buffer = vec![0; 64 * 1024];
    let mut echo = Echo(vec![b'x'; 1000]);
    loop {
        connection.serve(&mut echo, (0, 0), &date, Instant::now(), &mut buffers);
        while !connection.unsent().is_empty() {
            let written = socket.write(connection.unsent())?;
            connection.mark_sent(written, Instant::now());
            if connection.has_backlog() {
                connection.process(&date, Instant::now(), &mut buffers, usize::MAX);
            }
        }
        connection.give_back_idle(&mut buffers);
        if connection.is_finished() {
            return Ok(());
        }
        if !connection.wants_input() {
            continue;
        }
        let read = socket.read(&mut buffer)?;
        if read == 0 {
            return Ok(());
        }
        connection
            .input(&mut buffers)
            .extend_from_slice(&buffer[..read]);
        connection.process(&date, Instant::now(), &mut buffers, usize::MAX);
    }
}

/// h2spec's report against `port` (cleartext), and whether it passed every case.
fn run_h2spec(port: u16) -> (bool, String) {
    run_h2spec_with(port, &[])
}

/// h2spec's report against `port` with `extra` options, and whether it passed every case.
fn run_h2spec_with(port: u16, extra: &[&str]) -> (bool, String) {
    let h2spec = h2spec();
    assert!(
        h2spec.exists(),
        "h2spec is needed at {} (or set H2SPEC)",
        h2spec.display()
    );
    let port = port.to_string();
    let output = Command::new(&h2spec)
        .args(["-h", "127.0.0.1", "-p", &port, "-o", "5", "--strict"])
        .args(extra)
        .output()
        .expect("h2spec runs");
    let report = String::from_utf8_lossy(&output.stdout).into_owned();
    (output.status.success(), report)
}

#[test]
fn h2spec_passes_every_strict_case() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for socket in listener.incoming().flatten() {
            socket.set_read_timeout(Some(Duration::from_secs(10))).ok();
            std::thread::spawn(move || serve(socket));
        }
    });
    let (passed, report) = run_h2spec(port);
    let summary = report.lines().last().unwrap_or_default();
    assert!(
        passed && summary.contains("147 tests, 147 passed"),
        "{report}"
    );
}

test_both_binaries!(gnosis, gnosis_uring;
    h2spec_passes_beside_http1,
    the_h2c_port_passes_every_case,
    h2_over_tls_passes_every_case_where_alpn_offers_it,
    grpc_get_sum_answers_over_h2c_and_tls,
    large_answers_past_the_budget_all_arrive,
);

/// On the HTTP/1.1 port, a connection whose first bytes are HTTP/2's preface speaks
/// HTTP/2: every case passes but one, whose "invalid preface" is an HTTP/1.1 request
/// there (answered 400, not GOAWAY).
fn h2spec_passes_beside_http1(binary: &str) {
    let server = common::Server::start(binary, &[]);
    let (_, report) = run_h2spec(server.port);
    let summary = report.lines().last().unwrap_or_default();
    let failed: Vec<_> = report
        .lines()
        .filter(|line| line.contains('×'))
        .map(|line| line.trim().to_string())
        .collect();
    assert!(summary.contains("147 tests, 146 passed"), "{report}");
    assert!(
        failed
            .iter()
            .all(|line| line.contains("Sends invalid connection preface")),
        "{failed:?}"
    );
}

/// The h2c port speaks HTTP/2 by prior knowledge only: every strict case passes, the
/// invalid preface included; curl gets `/baseline2` there over HTTP/2.
fn the_h2c_port_passes_every_case(binary: &str) {
    let server = common::Server::start(binary, &[]);
    let (passed, report) = run_h2spec(server.h2c_port);
    let summary = report.lines().last().unwrap_or_default();
    assert!(
        passed && summary.contains("147 tests, 147 passed"),
        "{report}"
    );
    let url = format!("http://127.0.0.1:{}/baseline2?a=19&b=23", server.h2c_port);
    let (version, body) = curl(&["--http2-prior-knowledge", &url]);
    assert_eq!((version.as_str(), body.as_str()), ("2", "42"));
}

/// A server with the test certificate (`transport::test_pair`) and no database to find.
fn start_with_tls(binary: &str) -> common::Server {
    let pair = test_pair();
    let env = [
        ("TLS_CERT", pair.cert.to_str().unwrap().to_string()),
        ("TLS_KEY", pair.key.to_str().unwrap().to_string()),
        ("PGHOST", "/nonexistent-gnosis-test-database".to_string()),
    ];
    common::Server::start_with_env(binary, &[], &env)
}

/// The h2 TLS port answers ALPN `h2` with HTTP/2: every strict case of h2spec over TLS
/// passes; curl speaks HTTP/2 there, and HTTP/1.1 when it offers only that. The HTTP/1.1
/// TLS port never answers `h2`.
fn h2_over_tls_passes_every_case_where_alpn_offers_it(binary: &str) {
    let server = start_with_tls(binary);
    let (passed, report) = run_h2spec_with(server.h2_tls_port, &["-t", "-k"]);
    let summary = report.lines().last().unwrap_or_default();
    assert!(
        passed && summary.contains("147 tests, 147 passed"),
        "{report}"
    );
    let url = |port: u16| format!("https://127.0.0.1:{port}/baseline2?a=40&b=2");
    let h2_tls = url(server.h2_tls_port);
    let answered = |args: &[&str]| {
        let (version, body) = curl(args);
        assert_eq!(body, "42", "{args:?}");
        version
    };
    assert_eq!(answered(&["-k", "--http2", &h2_tls]), "2");
    assert_eq!(answered(&["-k", "--http1.1", &h2_tls]), "1.1");
    assert_eq!(answered(&["-k", "--http2", &url(server.tls_port)]), "1.1");
}

/// h2load fetches a 300 KiB file 400 times, 16 streams at once on each of 4 connections,
/// over TLS and h2c, from one worker whose budget (1 MB) that overruns many times over: its
/// connections are paused for the budget, and every answer still arrives: what a paused
/// connection has written goes on being sealed and sent, and it reads on, so that with
/// RFC 9113's default windows (64 KiB, `-w 16 -W 16`) the WINDOW_UPDATEs that let its
/// answers go are read.
fn large_answers_past_the_budget_all_arrive(binary: &str) {
    let name = std::path::Path::new(binary).file_name().unwrap();
    let file = common::BigFile::new(&format!("h2-{}", name.to_str().unwrap()));
    let pair = test_pair();
    let env = [
        ("TLS_CERT", pair.cert.to_str().unwrap().to_string()),
        ("TLS_KEY", pair.key.to_str().unwrap().to_string()),
        ("PGHOST", "/nonexistent-gnosis-test-database".to_string()),
        file.env(),
    ];
    let extra = ["--threads", "1", "--max-buffered", "1000000"];
    let server = common::Server::start_with_env(binary, &extra, &env);
    let urls = [
        format!("https://127.0.0.1:{}/static/big.bin", server.h2_tls_port),
        format!("http://127.0.0.1:{}/static/big.bin", server.h2c_port),
    ];
    let windows = [&["-w", "30", "-W", "30"], &["-w", "16", "-W", "16"]];
    for (url, windows) in urls.iter().flat_map(|url| windows.map(|bits| (url, bits))) {
        let output = Command::new("timeout")
            .args(["60", "h2load", "-c", "4", "-m", "16", "-n", "400", url])
            .args(windows)
            .output()
            .expect("h2load runs (scripts/test.sh installs nghttp2-client)");
        let report = String::from_utf8_lossy(&output.stdout);
        assert!(
            report.contains("400 succeeded, 0 failed"),
            "{url} {windows:?}: {report}"
        );
        // h2load's traffic line: "..., <size> (<bytes>) data".
        let data = format!("({}) data", 400 * common::BigFile::LEN);
        assert!(report.contains(&data), "{url} {windows:?}: {report}");
    }
}

/// Runs curl with `args` (and a 10 s limit); returns the HTTP version it spoke and the body.
fn curl(args: &[&str]) -> (String, String) {
    let output = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-w", "\\n%{http_version}"])
        .args(args)
        .output()
        .expect("curl runs (scripts/test.sh installs it)");
    assert!(output.status.success(), "curl {args:?}: {output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let (body, version) = text.rsplit_once('\n').unwrap();
    (version.to_string(), body.to_string())
}

/// gRPC's unary `GetSum` as HttpArena calls it (nghttp, the request message `{a: 1, b: 2}`
/// with `te: trailers`), over h2c on the HTTP port and the h2c port and over TLS: the reply
/// `{result: 3}` and `grpc-status: 0`; a message cut short: no reply, `grpc-status: 13`.
/// Over HTTP/1.1, where gRPC does not run: 400.
fn grpc_get_sum_answers_over_h2c_and_tls(binary: &str) {
    let server = start_with_tls(binary);
    let path = "/benchmark.BenchmarkService/GetSum";
    let urls = [
        format!("http://127.0.0.1:{}{path}", server.port),
        format!("http://127.0.0.1:{}{path}", server.h2c_port),
        format!("https://127.0.0.1:{}{path}", server.h2_tls_port),
    ];
    // One folder per server: both binaries' tests run at once in this process.
    let dir = std::env::temp_dir().join(format!("gnosis-grpc-{}", server.port));
    std::fs::create_dir_all(&dir).unwrap();
    let request = dir.join("sum-request");
    std::fs::write(&request, [0, 0, 0, 0, 4, 0x08, 0x01, 0x10, 0x02]).unwrap();
    let truncated = dir.join("truncated");
    std::fs::write(&truncated, [0, 0, 0, 0, 4, 0x08, 0x01]).unwrap();
    for url in &urls {
        let (body, trailers) = nghttp_grpc(url, &request);
        assert_eq!(body, [0, 0, 0, 0, 2, 0x08, 0x03], "{url}");
        assert_eq!(trailers, ["grpc-status: 0"], "{url}");
        let (body, trailers) = nghttp_grpc(url, &truncated);
        assert!(body.is_empty(), "{url}: {body:?}");
        assert_eq!(
            trailers,
            ["grpc-status: 13", "grpc-message: truncated message"],
            "{url}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let mut http1 = server.connect();
    http1.send(
        format!(
            "POST {path} HTTP/1.1\r\nHost: a\r\nContent-Type: application/grpc\r\n\
             Content-Length: 9\r\n\r\n\0\0\0\0\x04\x08\x01\x10\x02"
        )
        .as_bytes(),
    );
    assert_eq!(http1.response().unwrap().status, 400);
}

/// Calls gRPC at `url` with nghttp (the body from `file`); returns the answer's body and
/// its trailers (nghttp's verbose log names each field received: the trailers are those
/// after the answer's first HEADERS frame).
fn nghttp_grpc(url: &str, file: &std::path::Path) -> (Vec<u8>, Vec<String>) {
    let run = |verbose: bool| {
        let output = Command::new("nghttp")
            .args(if verbose { &["-v"][..] } else { &[] })
            .args(["-t", "10", "-d"])
            .arg(file)
            .args([
                "-H",
                "content-type: application/grpc",
                "-H",
                "te: trailers",
                url,
            ])
            .output()
            .expect("nghttp runs (scripts/test.sh installs nghttp2-client)");
        assert!(output.status.success(), "nghttp {url}: {output:?}");
        output.stdout
    };
    let body = run(false);
    let log = String::from_utf8_lossy(&run(true)).into_owned();
    let after_head = log
        .split_once("; First response header")
        .map_or("", |(_, rest)| rest);
    let trailers = after_head
        .lines()
        .filter_map(|line| Some(line.split_once("recv (stream_id=")?.1.split_once(") ")?.1))
        .map(str::to_string)
        .collect();
    (body, trailers)
}
