//! `GET /static/{name}` against both binaries over real sockets, from a directory the test
//! fills (`STATIC_DIR`): each type's Content-Type, the bytes on disk read again on every
//! request, HEAD, pipelined and large answers, nothing outside the directory served
//! (`..` plain or percent-encoded, absolute paths, NUL, a symbolic link out of it), and
//! precompressed sidecars chosen by Accept-Encoding over HTTP/1.1 and HTTP/2, plain and TLS
//! (raw requests, and curl --compressed as an independent client).

use std::io::{Read, Write};
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::process::Command;

use ::gnosis::transport::test_pair;

use crate::common::{assert_general_headers, Client, Server};

/// `root/www`, the served directory, and `root/secret.txt` beside it; removed when dropped.
struct Site {
    root: PathBuf,
}

impl Site {
    fn new(test: &str) -> Site {
        let root =
            std::env::temp_dir().join(format!("gnosis-static-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("www").join("sub")).unwrap();
        std::fs::write(root.join("secret.txt"), "secret").unwrap();
        std::fs::write(root.join("www").join("sub").join("inner.css"), "a{}").unwrap();
        Site { root }
    }

    fn www(&self) -> PathBuf {
        self.root.join("www")
    }

    fn write(&self, name: &str, bytes: &[u8]) {
        std::fs::write(self.www().join(name), bytes).unwrap();
    }

    fn start(&self, binary: &str) -> Server {
        let env = [
            ("PGHOST", "/nonexistent-gnosis-test-database".to_string()),
            ("STATIC_DIR", self.www().to_str().unwrap().to_string()),
        ];
        Server::start_with_env(binary, &[], &env)
    }

    /// With the test certificate: the TLS listeners too (HTTP/1.1, and `h2` by ALPN).
    fn start_with_tls(&self, binary: &str) -> Server {
        let pair = test_pair();
        let env = [
            ("PGHOST", "/nonexistent-gnosis-test-database".to_string()),
            ("STATIC_DIR", self.www().to_str().unwrap().to_string()),
            ("TLS_CERT", pair.cert.to_str().unwrap().to_string()),
            ("TLS_KEY", pair.key.to_str().unwrap().to_string()),
        ];
        Server::start_with_env(binary, &[], &env)
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The types of HttpArena's 20 files (and its precompressed `.gz` ones), a few more, and
/// bytes for an unknown extension.
const TYPES: [(&str, &str); 14] = [
    ("reset.css", "text/css"),
    ("app.js", "application/javascript"),
    ("manifest.json", "application/json"),
    ("header.html", "text/html; charset=utf-8"),
    ("logo.svg", "image/svg+xml"),
    ("hero.webp", "image/webp"),
    ("bold.woff2", "font/woff2"),
    ("app.js.gz", "application/gzip"),
    ("app.js.br", "application/octet-stream"),
    ("photo.JPG", "image/jpeg"),
    ("icon.png", "image/png"),
    ("favicon.ico", "image/x-icon"),
    ("robots.txt", "text/plain"),
    ("LICENSE", "application/octet-stream"),
];

/// Bytes of every value, different for each file.
fn contents(index: usize, len: usize) -> Vec<u8> {
    (0..len).map(|at| (at * 7 + index * 13) as u8).collect()
}

fn files_are_read_from_disk_on_every_request_with_their_types(binary: &str) {
    let site = Site::new(&format!("types-{}", binary.len()));
    for (index, (name, _)) in TYPES.iter().enumerate() {
        site.write(name, &contents(index, 100 + index * 1000));
    }
    site.write("empty.css", b"");
    let server = site.start(binary);
    let mut client = server.connect();
    for (index, (name, content_type)) in TYPES.iter().enumerate() {
        let response = client.get(&format!("/static/{name}"));
        assert_eq!(response.status, 200, "{name}");
        assert_general_headers(&response, content_type);
        assert!(
            response.body == contents(index, 100 + index * 1000),
            "{name}"
        );
    }
    let empty = client.get("/static/empty.css");
    assert_eq!((empty.status, empty.body.len()), (200, 0));

    // Changed on disk: the next answer is the new file (nothing cached).
    site.write("app.js", b"let changed = true;\n");
    let response = client.get("/static/app.js");
    assert_eq!(response.text(), "let changed = true;\n");
    std::fs::remove_file(site.www().join("app.js")).unwrap();
    assert_eq!(client.get("/static/app.js").status, 404);

    // HEAD: the same head, no body: read the raw head, then the response after it.
    client.send(b"HEAD /static/reset.css HTTP/1.1\r\nHost: a\r\n\r\n");
    client.send(b"GET /static/manifest.json HTTP/1.1\r\nHost: a\r\n\r\n");
    let head = client.raw_head();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains("Content-Type: text/css\r\nContent-Length: 100\r\n"),
        "{head}"
    );
    assert_eq!(client.response().unwrap().body, contents(2, 2100));
}

fn large_and_pipelined_answers_arrive_whole_and_in_order(binary: &str) {
    let site = Site::new(&format!("large-{}", binary.len()));
    // Above the 256 KiB a connection's output holds before it stops answering: sent in
    // many pieces. Then exactly the 1 MiB limit, and one byte over it.
    let large = contents(1, 600 * 1024);
    site.write("vendor.js", &large);
    site.write("small.css", b"b{}");
    let limit = std::fs::File::create(site.www().join("limit.bin")).unwrap();
    limit.set_len(1024 * 1024).unwrap();
    let over = std::fs::File::create(site.www().join("over.bin")).unwrap();
    over.set_len(1024 * 1024 + 1).unwrap();
    let server = site.start(binary);
    let mut client = server.connect();
    let get = |name: &str| format!("GET /static/{name} HTTP/1.1\r\nHost: a\r\n\r\n");
    let pipelined = [
        get("vendor.js"),
        get("small.css"),
        get("vendor.js"),
        get("missing.css"),
        get("limit.bin"),
        get("over.bin"),
        get("small.css"),
    ];
    client.send(pipelined.concat().as_bytes());
    let statuses_and_lengths: Vec<(u16, usize)> = (0..pipelined.len())
        .map(|index| {
            let response = client.response().unwrap();
            if index == 0 || index == 2 {
                assert!(response.body == large, "answer {index}");
            }
            (response.status, response.body.len())
        })
        .collect();
    let expected = [
        (200, large.len()),
        (200, 3),
        (200, large.len()),
        (404, 9),
        (200, 1024 * 1024),
        (500, 21),
        (200, 3),
    ];
    assert_eq!(statuses_and_lengths, expected);
}

fn nothing_outside_the_directory_is_served(binary: &str) {
    let site = Site::new(&format!("escape-{}", binary.len()));
    site.write("app.js", b"ok");
    symlink(site.root.join("secret.txt"), site.www().join("escape.txt")).unwrap();
    symlink("/etc/passwd", site.www().join("passwd")).unwrap();
    let server = site.start(binary);
    let mut client = server.connect();
    let refused = [
        "/static/../secret.txt",
        "/static/%2e%2e/secret.txt",
        "/static/..%2fsecret.txt",
        "/static/%2E%2E%2Fsecret.txt",
        "/static/..%5csecret.txt",
        "/static/.%2e/secret.txt",
        "/static//etc/passwd",
        "/static/%2fetc%2fpasswd",
        "/static/app.js%00.css",
        "/static/escape.txt",
        "/static/passwd",
        "/static/sub",
        "/static/sub/inner.css",
        "/static/",
        "/static/.",
        "/static/nonexistent.txt",
    ];
    for target in refused {
        let response = client.get(target);
        assert_eq!(
            (response.status, response.text()),
            (404, "Not Found"),
            "{target}"
        );
    }
    let post = "POST /static/app.js HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";
    client.send(post.as_bytes());
    assert_eq!(client.response().unwrap().status, 405);
    // The same connection still serves.
    assert_eq!(client.get("/static/app.js").text(), "ok");
    // A raw NUL in the target is no request at all: 400 and close.
    let mut raw = Client::connect(server.port);
    raw.send(b"GET /static/app.js\0 HTTP/1.1\r\nHost: a\r\n\r\n");
    assert_eq!(raw.response().unwrap().status, 400);
}

/// Text that compresses, different for each seed.
fn text(seed: usize, lines: usize) -> Vec<u8> {
    (0..lines)
        .flat_map(|line| {
            format!(".rule-{seed}-{} {{ margin: {line}px; }}\n", line % 37).into_bytes()
        })
        .collect()
}

fn brotli(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut writer = brotli::CompressorWriter::new(&mut out, 4096, 9, 22);
    writer.write_all(bytes).unwrap();
    drop(writer);
    out
}

fn unbrotli(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::Decompressor::new(bytes, 4096)
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// A site as HttpArena's: `app.js` with both sidecars (60 KiB, answered in many pieces),
/// `reset.css` with only `.gz`, `logo.svg` with none, and `hero.webp` with a `.br` beside
/// it that is never served (images are not negotiated).
fn precompressed_site(test: &str, binary: &str) -> (Site, [(&'static str, Vec<u8>); 4]) {
    let site = Site::new(&format!("{test}-{}", binary.len()));
    let files = [
        ("app.js", text(1, 1500)),
        ("reset.css", text(2, 100)),
        ("logo.svg", text(3, 10)),
        ("hero.webp", contents(4, 5000)),
    ];
    for (name, bytes) in &files {
        site.write(name, bytes);
    }
    site.write("app.js.br", &brotli(&files[0].1));
    site.write("app.js.gz", &gzip(&files[0].1));
    site.write("reset.css.gz", &gzip(&files[1].1));
    site.write("hero.webp.br", b"never served");
    (site, files)
}

/// A request for `/static/{name}` with `Accept-Encoding: accepts` if there is one.
fn request(method: &str, name: &str, accepts: Option<&str>) -> Vec<u8> {
    let header = accepts.map_or(String::new(), |value| {
        format!("Accept-Encoding: {value}\r\n")
    });
    format!("{method} /static/{name} HTTP/1.1\r\nHost: a\r\n{header}\r\n").into_bytes()
}

/// Raw HTTP/1.1: the sidecar's own bytes, with Content-Encoding, the file's Content-Type,
/// the sidecar's length and Vary; the plain file without the header or when no sidecar in
/// an accepted coding is there; HEAD alike; `X.br` by its own name as it is.
fn sidecars_answer_by_accept_encoding_over_http1(binary: &str) {
    let (site, files) = precompressed_site("sidecars", binary);
    let server = site.start(binary);
    let mut client = server.connect();
    let arena = Some("br;q=1, gzip;q=0.8");
    let decoded = |coding: Option<&str>, body: &[u8]| match coding {
        Some("br") => unbrotli(body),
        Some("gzip") => gunzip(body),
        _ => body.to_vec(),
    };
    // (file index, Accept-Encoding, the coding answered, Vary).
    let cases: [(usize, Option<&str>, Option<&str>, bool); 10] = [
        (0, arena, Some("br"), true),
        (0, Some("gzip, deflate"), Some("gzip"), true),
        (0, Some("br;q=0.5, gzip"), Some("gzip"), true),
        (0, Some("br;q=0, gzip;q=0"), None, true),
        (0, None, None, true),
        (1, arena, Some("gzip"), true),
        (1, Some("br"), None, true),
        (2, arena, None, true),
        (3, arena, None, false),
        (3, None, None, false),
    ];
    for (index, accepts, coding, vary) in cases {
        let (name, original) = &files[index];
        client.send(&request("GET", name, accepts));
        let response = client.response().unwrap();
        let what = format!("{name} {accepts:?}: {:?}", response.headers);
        assert_eq!(response.status, 200, "{what}");
        assert_eq!(response.header("content-encoding"), coding, "{what}");
        let vary_header = response.header("vary");
        assert_eq!(vary_header, vary.then_some("Accept-Encoding"), "{what}");
        let sidecar = match coding {
            Some("br") => site.www().join(format!("{name}.br")),
            Some(_) => site.www().join(format!("{name}.gz")),
            None => site.www().join(name),
        };
        assert!(response.body == std::fs::read(sidecar).unwrap(), "{what}");
        assert!(decoded(coding, &response.body) == *original, "{what}");
        let content_type = [
            "application/javascript",
            "text/css",
            "image/svg+xml",
            "image/webp",
        ];
        let mut plain = response;
        plain.headers.retain(|(name, _)| name != "content-encoding");
        assert_general_headers(&plain, content_type[index]);
    }
    // HEAD: the sidecar's head, then the next answer on the connection.
    client.send(&request("HEAD", "app.js", arena));
    client.send(&request("GET", "reset.css", None));
    let head = client.raw_head();
    let length = format!("Content-Length: {}\r\n", brotli(&files[0].1).len());
    assert!(head.contains("Content-Encoding: br\r\n"), "{head}");
    assert!(head.contains(&length), "{head}");
    assert!(client.response().unwrap().body == files[1].1);
    // A sidecar by its own name: a file of unknown type, as it is.
    client.send(&request("GET", "app.js.br", arena));
    let response = client.response().unwrap();
    assert_eq!(response.header("content-encoding"), None);
    assert_eq!(
        response.header("content-type"),
        Some("application/octet-stream")
    );
    assert!(unbrotli(&response.body) == files[0].1);
}

/// curl, with and without `--compressed` (`Accept-Encoding: deflate, gzip, br, zstd`), over
/// HTTP/1.1 plain and TLS, h2c on both ports and h2 over TLS: the body it decodes is the
/// file, and says `content-encoding` only when asked.
fn curl_gets_every_file_whole_with_and_without_compression(binary: &str) {
    let (site, files) = precompressed_site("curl", binary);
    let server = site.start_with_tls(binary);
    let bases = [
        (format!("http://127.0.0.1:{}", server.port), "--http1.1"),
        (
            format!("https://127.0.0.1:{}", server.tls_port),
            "--http1.1",
        ),
        (
            format!("http://127.0.0.1:{}", server.port),
            "--http2-prior-knowledge",
        ),
        (
            format!("http://127.0.0.1:{}", server.h2c_port),
            "--http2-prior-knowledge",
        ),
        (
            format!("https://127.0.0.1:{}", server.h2_tls_port),
            "--http2",
        ),
    ];
    let expected_coding = ["br", "gzip", "", ""];
    for (base, version) in &bases {
        for (index, (name, original)) in files.iter().enumerate() {
            for compressed in [true, false] {
                let url = format!("{base}/static/{name}");
                let mut args = vec!["-k", version, &url];
                if compressed {
                    args.push("--compressed");
                }
                let (headers, body) = curl(&args);
                let what = format!("{args:?}: {headers}");
                assert!(headers.starts_with("HTTP/"), "{what}");
                let coding = header(&headers, "content-encoding").unwrap_or_default();
                let expected = if compressed {
                    expected_coding[index]
                } else {
                    ""
                };
                assert_eq!(coding, expected, "{what}");
                assert!(body == *original, "{what}");
            }
        }
    }
}

/// HttpArena's static-h2 load as it runs it: h2load with `Accept-Encoding: br;q=1,
/// gzip;q=0.8` on every request, over h2c and TLS; each answer is the `.br` sidecar (h2load
/// counts the DATA bytes), or the `.gz` one where there is no `.br`.
fn h2load_with_arenas_header_gets_the_sidecars(binary: &str) {
    let (site, files) = precompressed_site("h2load", binary);
    let server = site.start_with_tls(binary);
    let urls = [
        format!("http://127.0.0.1:{}", server.h2c_port),
        format!("https://127.0.0.1:{}", server.h2_tls_port),
    ];
    let sidecars = [
        ("app.js", brotli(&files[0].1).len()),
        ("reset.css", gzip(&files[1].1).len()),
    ];
    for (base, (name, len)) in urls.iter().flat_map(|url| sidecars.map(|file| (url, file))) {
        let url = format!("{base}/static/{name}");
        let output = Command::new("timeout")
            .args(["60", "h2load", "-c", "2", "-m", "4", "-n", "40", &url])
            .args(["-H", "Accept-Encoding: br;q=1, gzip;q=0.8"])
            .output()
            .expect("h2load runs (scripts/test.sh installs nghttp2-client)");
        let report = String::from_utf8_lossy(&output.stdout);
        assert!(report.contains("40 succeeded, 0 failed"), "{url}: {report}");
        let data = format!("({}) data", 40 * len);
        assert!(report.contains(&data), "{url}: {data} {report}");
    }
}

/// Runs curl with `args` (10 s at most), the headers written before the body; returns the
/// head and the body as curl decoded it.
fn curl(args: &[&str]) -> (String, Vec<u8>) {
    let output = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-D", "-"])
        .args(args)
        .output()
        .expect("curl runs (scripts/test.sh installs it)");
    assert!(output.status.success(), "curl {args:?}: {output:?}");
    let end = output
        .stdout
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let head = String::from_utf8(output.stdout[..end].to_vec()).unwrap();
    (head, output.stdout[end..].to_vec())
}

/// A header's value in a head as curl writes it, the name in any case.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (field, value) = line.split_once(':')?;
        field.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

test_both_binaries! {
    gnosis, gnosis_uring;
    files_are_read_from_disk_on_every_request_with_their_types,
    large_and_pipelined_answers_arrive_whole_and_in_order,
    nothing_outside_the_directory_is_served,
    sidecars_answer_by_accept_encoding_over_http1,
    curl_gets_every_file_whole_with_and_without_compression,
    h2load_with_arenas_header_gets_the_sidecars,
}
