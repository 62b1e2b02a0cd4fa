//! `GET /static/{name}` against both binaries over real sockets, from a directory the test
//! fills (`STATIC_DIR`): each type's Content-Type, the bytes on disk read again on every
//! request, HEAD, pipelined and large answers, and nothing outside the directory served
//! (`..` plain or percent-encoded, absolute paths, NUL, a symbolic link out of it).

use std::os::unix::fs::symlink;
use std::path::PathBuf;

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

test_both_binaries! {
    gnosis, gnosis_uring;
    files_are_read_from_disk_on_every_request_with_their_types,
    large_and_pipelined_answers_arrive_whole_and_in_order,
    nothing_outside_the_directory_is_served,
}
