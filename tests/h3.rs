//! HTTP/3 over QUIC on both binaries, with clients that share no code with gnosis:
//! aioquic (QUIC, HTTP/3 and QPACK in Python, `scripts/gnosis_tools/h3_client.py`) for what an answer
//! holds, and HttpArena's own load generator (`h2load-h3`: ngtcp2 and nghttp3) for many
//! requests on many connections.

#[macro_use]
#[path = "common/mod.rs"]
mod common;

use std::io::BufRead;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

/// h2load built with HTTP/3, from the shared anchors beside the repository (`H2LOAD_H3`
/// names another).
fn h2load_h3() -> PathBuf {
    std::env::var_os("H2LOAD_H3").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/anchors/tools/h2load-h3"),
        PathBuf::from,
    )
}

/// The aioquic client (`get` and `spread`).
fn h3_client() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/gnosis_tools/h3_client.py")
}

fn file_name(binary: &str) -> &str {
    std::path::Path::new(binary)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
}

/// aioquic's answers to `requests` (`METHOD:PATH[:BODY]`) on one connection to `port`.
fn aioquic(server: &common::Server, requests: &[&str]) -> Value {
    h3_client_json(server, "get", requests)
}

/// What `h3_client.py MODE PORT ARGS` printed (a JSON line), once it exited 0.
fn h3_client_json(server: &common::Server, mode: &str, args: &[&str]) -> Value {
    let output = Command::new("python3")
        .arg(h3_client())
        .args([mode, &server.h3_port.to_string()])
        .args(args)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let sockets = Command::new("ss")
        .args(["-uapn"])
        .output()
        .map(|o| o.stdout);
    assert!(
        output.status.success(),
        "aioquic failed: {stdout}\n{}\nserver: {}\nUDP sockets: {}",
        String::from_utf8_lossy(&output.stderr),
        server.log(),
        String::from_utf8_lossy(&sockets.unwrap_or_default()),
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|err| panic!("{err}: {stdout}"))
}

/// The value of header `name` in an answer of [`aioquic`]'s.
fn header<'a>(answer: &'a Value, name: &str) -> Option<&'a str> {
    answer["headers"]
        .as_array()?
        .iter()
        .find(|pair| pair[0] == name)
        .and_then(|pair| pair[1].as_str())
}

/// Routes answer over HTTP/3 as over the other protocols: the status, the body, the
/// general headers; a file's body whole; 404 for what is not there; ALPN `h3`. (Not HEAD:
/// aioquic refuses an answer whose content-length its DATA does not match, which RFC 9114
/// 4.1.2 allows for HEAD; `h3`'s own tests cover it.)
fn answers_over_http3(binary: &str) {
    let files = common::BigFile::new(&format!("h3-{}", file_name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &[]);
    let got = aioquic(
        &server,
        &[
            "GET:/baseline2?a=40&b=2",
            "GET:/nothing-here",
            "GET:/static/big.bin",
        ],
    );
    assert_eq!(got["alpn"], "h3", "{got}");
    let answers = got["answers"].as_array().unwrap();
    let sum = &answers[0];
    assert_eq!(header(sum, ":status"), Some("200"), "{sum}");
    assert_eq!(sum["body"], "42");
    assert_eq!(header(sum, "content-type"), Some("text/plain"));
    assert_eq!(header(sum, "server"), Some("gnosis"));
    let date = header(sum, "date").expect("a date");
    httpdate::parse_http_date(date).expect("an HTTP date");
    assert_eq!(header(sum, "content-length"), Some("2"));
    assert_eq!(header(&answers[1], ":status"), Some("404"));
    let file = &answers[2];
    assert_eq!(header(file, ":status"), Some("200"));
    let body: Vec<u8> = file["body"]
        .as_str()
        .unwrap()
        .chars()
        .map(|c| c as u8)
        .collect();
    let expected: Vec<u8> = (0..common::BigFile::LEN).map(|i| (i % 251) as u8).collect();
    assert!(body == expected, "{} bytes", body.len());
    assert!(got["closed"].is_null(), "{got}");
}

/// HttpArena's load generator over HTTP/3 (its baseline-h3 command, smaller): every
/// request of 8 connections with 16 streams each answered 2xx, none failed.
fn h2load_h3_gets_every_answer(binary: &str) {
    let h2load = h2load_h3();
    assert!(
        h2load.exists(),
        "h2load-h3 is needed at {} (or set H2LOAD_H3)",
        h2load.display()
    );
    let files = common::BigFile::new(&format!("h2load-{}", file_name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &[]);
    let url = format!("https://localhost:{}/baseline2?a=1&b=1", server.h3_port);
    let output = Command::new(&h2load)
        .args([
            "--alpn-list=h3",
            &url,
            "-n",
            "4000",
            "-c",
            "8",
            "-m",
            "16",
            "-t",
            "1",
        ])
        .output()
        .expect("h2load-h3 runs");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        report.contains("4000 succeeded, 0 failed, 0 errored, 0 timeout")
            && report.contains("status codes: 4000 2xx"),
        "{report}\n{}",
        server.log()
    );
}

/// A signal while an answer is in the works (`/delay/1500`, sent with one answered at once):
/// the client is told (GOAWAY), the answer arrives whole, the connection then closes with
/// H3_NO_ERROR, and the process exits 0 long before its drain deadline.
fn a_signal_drains_http3_and_exits_0(binary: &str) {
    let files = common::BigFile::new(&format!("h3-drain-{}", file_name(binary)));
    let mut server = common::Server::start_with_tls(binary, &files, &["--drain-timeout", "60000"]);
    let mut client = Command::new("python3")
        .args([h3_client().as_os_str(), "get".as_ref()])
        .arg(server.h3_port.to_string())
        .args(["GET:/baseline2?a=1&b=1", "GET:/delay/1500"])
        .env("H3_TELL_FIRST", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut lines = std::io::BufReader::new(client.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "first answered");
    server.signal(libc::SIGTERM);
    let got: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(client.wait().unwrap().success());
    let delayed = &got["answers"][1];
    assert_eq!(header(delayed, ":status"), Some("200"), "{got}");
    assert_eq!(delayed["body"], "1500");
    assert_eq!(got["closed"]["error_code"], 0x100, "{got}");
    let status = server.exit_status(std::time::Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", server.log());
}

/// The headers of curl's answer to `args`, lowercase, and its HTTP version.
fn curl_head(args: &[&str]) -> (String, String) {
    let output = Command::new("curl")
        .args(["-sSk", "--max-time", "10", "-D", "-", "-o", "/dev/null"])
        .args(["-w", "%{http_version}"])
        .args(args)
        .output()
        .expect("curl runs (scripts/test.sh installs it)");
    assert!(output.status.success(), "curl {args:?}: {output:?}");
    let text = String::from_utf8(output.stdout).unwrap().to_lowercase();
    let (head, version) = text.rsplit_once("\r\n\r\n").unwrap();
    (head.to_string(), version.to_string())
}

/// The first answer of a connection over TLS tells of HTTP/3 (`Alt-Svc`, RFC 7838), as
/// browsers need to find it (each curl here is a connection of its own):
/// HTTP/1.1 on the TLS port, HTTP/2 and HTTP/1.1 on the h2 port; cleartext answers do
/// not, nor any once HTTP/3 is off (`--h3-port 0`).
fn answers_over_tls_name_http3(binary: &str) {
    let files = common::BigFile::new(&format!("alt-svc-{}", file_name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &[]);
    let field = format!("alt-svc: h3=\":{}\"; ma=86400", server.h3_port);
    let tls = format!("https://127.0.0.1:{}/json", server.tls_port);
    let h2 = format!("https://127.0.0.1:{}/json", server.h2_tls_port);
    let plain = format!("http://127.0.0.1:{}/json", server.port);
    for (args, version) in [
        (vec!["--http1.1", &tls], "1.1"),
        (vec!["--http2", &h2], "2"),
        (vec!["--http1.1", &h2], "1.1"),
    ] {
        let (head, got) = curl_head(&args);
        assert_eq!(got, version, "{args:?}");
        assert!(head.lines().any(|line| line == field), "{args:?}: {head}");
    }
    let (head, _) = curl_head(&[&plain]);
    assert!(!head.contains("alt-svc"), "{head}");
    // Once per connection: curl takes both answers on one.
    for version in ["--http1.1", "--http2"] {
        let (heads, _) = curl_head(&[version, &h2, "-o", "/dev/null", &h2]);
        assert_eq!(heads.matches("\r\n\r\n").count(), 1, "two answers: {heads}");
        assert_eq!(heads.matches("alt-svc").count(), 1, "{heads}");
    }
    drop(server);
    let server = common::Server::start_with_tls(binary, &files, &["--h3-port", "0"]);
    let tls = format!("https://127.0.0.1:{}/json", server.h2_tls_port);
    let (head, _) = curl_head(&["--http2", &tls]);
    assert!(head.starts_with("http/2 200"), "{head}");
    assert!(!head.contains("alt-svc"), "{head}");
}

/// New connections are shared evenly by the workers, whatever worker each client's first
/// Initial happens to reach (its random connection ID picks it): 32 connections opened one
/// after another over 4 workers, 8 each, as the server's connection IDs say (their first
/// byte names the worker: `src/quic/cid.rs`).
fn connections_spread_evenly_over_the_workers(binary: &str) {
    let files = common::BigFile::new(&format!("spread-{}", file_name(binary)));
    let server = common::Server::start_with_tls(binary, &files, &["--threads", "4"]);
    let counts = h3_client_json(&server, "spread", &["32"]);
    assert_eq!(counts, serde_json::json!({"0": 8, "1": 8, "2": 8, "3": 8}));
}

test_both_binaries!(
    gnosis,
    gnosis_uring;
    answers_over_http3,
    connections_spread_evenly_over_the_workers,
    answers_over_tls_name_http3,
    h2load_h3_gets_every_answer,
    a_signal_drains_http3_and_exits_0,
);
