//! The static files against a real directory in the temporary folder: names refused before
//! any system call, files, directories, FIFOs and symbolic links on disk, and the responses.

use std::os::unix::fs::symlink;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::h1::framing_of;
use crate::http::HttpDate;
use std::fs::File;

/// A fresh directory of this test process, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "gnosis-static-unit-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `root/www` holding `app.js` and `sub/`, and `root/secret.txt` beside it.
fn site() -> (TempDir, PathBuf) {
    let root = TempDir::new();
    let www = root.0.join("www");
    std::fs::create_dir(&www).unwrap();
    std::fs::create_dir(www.join("sub")).unwrap();
    std::fs::write(www.join("app.js"), "let x = 1;\n").unwrap();
    std::fs::write(www.join("sub").join("inner.css"), "a{}").unwrap();
    std::fs::write(root.0.join("secret.txt"), "secret").unwrap();
    (root, www)
}

/// The status line and the body of `respond`'s answer to `method` for `name`.
fn answer(files: &mut StaticFiles, method: &str, name: &str) -> (String, Vec<u8>) {
    answer_accepting(files, method, name, None)
}

/// The same, to a request with `Accept-Encoding: accepts` if there is one.
fn answer_accepting(
    files: &mut StaticFiles,
    method: &str,
    name: &str,
    accepts: Option<&str>,
) -> (String, Vec<u8>) {
    let header = accepts.map_or(String::new(), |value| {
        format!("Accept-Encoding: {value}\r\n")
    });
    let request = format!("{method} /static/{name} HTTP/1.1\r\nHost: a\r\n{header}\r\n");
    let mut accept_encoding = AcceptEncoding::default();
    if let Some(value) = accepts {
        accept_encoding.read(value.as_bytes());
    }
    let mut out = b"an earlier response".to_vec();
    let answer = files.respond(name, accept_encoding);
    framing_of(request.as_bytes()).write(&mut out, &HttpDate::new(), &answer);
    let out = out
        .strip_prefix(b"an earlier response")
        .expect("what was in the output stays");
    let head_end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8(out[..head_end].to_vec()).unwrap();
    (head, out[head_end..].to_vec())
}

fn status(files: &mut StaticFiles, name: &str) -> Result<usize, Status> {
    files
        .open(name, AcceptEncoding::default())
        .map(|(file, _)| file.body.len)
}

#[test]
fn names_outside_plain_file_names_are_refused() {
    for name in ["app.js", "a", "A-b_c.d~e.css", "x..y", &"n".repeat(255)] {
        assert!(is_plain_name(name), "{name:?}");
    }
    let refused = [
        "",
        ".",
        "..",
        ".hidden",
        "../secret.txt",
        "..%2fsecret.txt",
        "%2e%2e",
        "sub/inner.css",
        "/etc/passwd",
        "a\0b",
        "a b",
        "a\\b",
        "caf\u{e9}.css",
        &"n".repeat(256),
    ];
    for name in refused {
        assert!(!is_plain_name(name), "{name:?}");
    }
}

#[test]
fn content_types_by_extension() {
    let cases = [
        ("reset.css", ContentType::Css),
        ("app.js", ContentType::JavaScript),
        ("APP.JS", ContentType::JavaScript),
        ("module.mjs", ContentType::JavaScript),
        ("manifest.json", ContentType::Json),
        ("header.html", ContentType::Html),
        ("logo.svg", ContentType::Svg),
        ("hero.webp", ContentType::Webp),
        ("bold.woff2", ContentType::Woff2),
        ("old.woff", ContentType::Woff),
        ("a.png", ContentType::Png),
        ("a.jpeg", ContentType::Jpeg),
        ("favicon.ico", ContentType::Icon),
        ("robots.txt", ContentType::Plain),
        ("app.js.gz", ContentType::Gzip),
        ("app.js.br", ContentType::OctetStream),
        ("README", ContentType::OctetStream),
        ("a.verylongextension", ContentType::OctetStream),
        ("a.", ContentType::OctetStream),
    ];
    for (name, expected) in cases {
        assert_eq!(content_type(name), expected, "{name}");
    }
}

#[test]
fn only_regular_files_inside_the_directory_open() {
    let (root, www) = site();
    symlink(root.0.join("secret.txt"), www.join("out.txt")).unwrap();
    symlink(www.join("app.js"), www.join("alias.js")).unwrap();
    symlink("/etc/passwd", www.join("passwd")).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(www.join("fifo"))
        .status()
        .unwrap();
    assert!(fifo.success());
    let mut files = StaticFiles::new(&www);
    assert_eq!(status(&mut files, "app.js"), Ok(11));
    let cases = [
        "missing.js",
        // A directory, symbolic links (out of it, or even within it), a FIFO (not waited on).
        "sub",
        "out.txt",
        "alias.js",
        "passwd",
        "fifo",
        "../secret.txt",
        "sub/inner.css",
    ];
    for name in cases {
        assert_eq!(
            status(&mut files, name).err(),
            Some(Status::NotFound),
            "{name}"
        );
    }
    // The name before does not linger in the path.
    assert_eq!(status(&mut files, "app.js"), Ok(11));
    assert_eq!(
        status(&mut StaticFiles::new(&root.0.join("none")), "app.js"),
        Err(Status::NotFound)
    );
}

#[test]
fn running_out_of_descriptors_is_not_a_missing_file() {
    let status = |errno| open_failure(&std::io::Error::from_raw_os_error(errno));
    assert_eq!(status(libc::EMFILE), Status::ServiceUnavailable);
    assert_eq!(status(libc::ENFILE), Status::ServiceUnavailable);
    for errno in [libc::ENOENT, libc::ELOOP, libc::EACCES, libc::ENOTDIR] {
        assert_eq!(status(errno), Status::NotFound, "{errno}");
    }
}

#[test]
fn a_file_over_the_limit_is_500_and_one_at_it_is_served() {
    let (_root, www) = site();
    let file = File::create(www.join("big.bin")).unwrap();
    file.set_len(MAX_FILE_LEN + 1).unwrap();
    let mut files = StaticFiles::new(&www);
    assert_eq!(
        status(&mut files, "big.bin").err(),
        Some(Status::InternalServerError)
    );
    file.set_len(MAX_FILE_LEN).unwrap();
    let (head, body) = answer(&mut files, "GET", "big.bin");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Content-Length: 1048576\r\n"), "{head}");
    assert_eq!(body.len() as u64, MAX_FILE_LEN);
}

#[test]
fn get_and_head_answer_with_the_file_and_its_type() {
    let (_root, www) = site();
    let mut files = StaticFiles::new(&www);
    let (head, body) = answer(&mut files, "GET", "app.js");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Content-Type: application/javascript\r\n"));
    assert!(head.contains("Content-Length: 11\r\n"));
    assert_eq!(body, b"let x = 1;\n");

    let (head, body) = answer(&mut files, "HEAD", "app.js");
    assert!(head.contains("Content-Length: 11\r\n"), "{head}");
    assert!(body.is_empty());

    let (head, body) = answer(&mut files, "GET", "missing.css");
    assert!(head.starts_with("HTTP/1.1 404 Not Found\r\n"), "{head}");
    assert!(head.contains("Content-Type: text/plain\r\n"));
    assert_eq!(body, b"Not Found");

    std::fs::write(www.join("empty.css"), "").unwrap();
    let (head, body) = answer(&mut files, "GET", "empty.css");
    assert!(
        head.contains("Content-Type: text/css\r\nContent-Length: 0\r\n"),
        "{head}"
    );
    assert!(body.is_empty());
}

#[test]
fn a_read_takes_the_length_opened_whatever_room_the_buffer_has() {
    let (_root, www) = site();
    let mut files = StaticFiles::new(&www);
    let file = files.open("app.js", AcceptEncoding::default()).unwrap().0;
    let mut out = Vec::with_capacity(1 << 16);
    out.extend_from_slice(b"head");
    Body::File(file.body).write_to(&mut out).unwrap();
    assert_eq!(out, b"headlet x = 1;\n");

    // The file grew after it was opened: its length no longer matches the head's.
    let file = files.open("app.js", AcceptEncoding::default()).unwrap().0;
    std::fs::write(www.join("app.js"), "let x = 12;\n").unwrap();
    let mut out = Vec::with_capacity(1 << 16);
    assert_eq!(
        Body::File(file.body).write_to(&mut out),
        Err(Status::InternalServerError)
    );
    // It shrank.
    let file = files.open("app.js", AcceptEncoding::default()).unwrap().0;
    std::fs::write(www.join("app.js"), "").unwrap();
    assert_eq!(
        Body::File(file.body).write_to(&mut Vec::new()),
        Err(Status::InternalServerError)
    );
}

#[test]
fn a_sidecar_answers_in_the_coding_the_request_prefers() {
    let (_root, www) = site();
    std::fs::write(www.join("app.js.br"), "BR").unwrap();
    std::fs::write(www.join("app.js.gz"), "GZIP").unwrap();
    let mut files = StaticFiles::new(&www);
    // (Accept-Encoding, body, Content-Encoding).
    let cases: [(Option<&str>, &str, Option<&str>); 9] = [
        (None, "let x = 1;\n", None),
        (Some("br;q=1, gzip;q=0.8"), "BR", Some("br")),
        (Some("gzip, deflate, br"), "BR", Some("br")),
        (Some("gzip"), "GZIP", Some("gzip")),
        (Some("br;q=0.5, GZIP"), "GZIP", Some("gzip")),
        (Some("br;q=0, gzip;q=0"), "let x = 1;\n", None),
        (Some("deflate, zstd"), "let x = 1;\n", None),
        (Some(""), "let x = 1;\n", None),
        (Some("gzip;q=0.5, identity"), "let x = 1;\n", None),
    ];
    for (accepts, expected, coding) in cases {
        let (head, body) = answer_accepting(&mut files, "GET", "app.js", accepts);
        assert!(
            head.starts_with("HTTP/1.1 200 OK\r\n"),
            "{accepts:?} {head}"
        );
        assert_eq!(String::from_utf8(body).unwrap(), expected, "{accepts:?}");
        assert!(
            head.contains("Content-Type: application/javascript\r\n"),
            "{head}"
        );
        let length = format!("Content-Length: {}\r\n", expected.len());
        assert!(head.contains(&length), "{accepts:?} {head}");
        assert_encoding(&head, coding);
        // With a sidecar or not, the answer depends on Accept-Encoding.
        assert!(head.contains("Vary: Accept-Encoding\r\n"), "{head}");
    }
    // HEAD: the sidecar's head, no body.
    let (head, body) = answer_accepting(&mut files, "HEAD", "app.js", Some("br"));
    assert!(head.contains("Content-Encoding: br\r\n"), "{head}");
    assert!(head.contains("Content-Length: 2\r\n"), "{head}");
    assert!(body.is_empty());
    // A sidecar asked for by its name is a file like any other: as it is, no coding.
    let (head, body) = answer_accepting(&mut files, "GET", "app.js.br", Some("br"));
    assert!(
        head.contains("Content-Type: application/octet-stream\r\n"),
        "{head}"
    );
    assert!(
        !head.contains("Content-Encoding") && !head.contains("Vary"),
        "{head}"
    );
    assert_eq!(body, b"BR");
}

#[test]
fn a_sidecar_not_there_or_not_servable_leaves_the_next_choice() {
    let (root, www) = site();
    std::fs::write(www.join("only-gz.css"), "a{}").unwrap();
    std::fs::write(www.join("only-gz.css.gz"), "GZIP").unwrap();
    // A symbolic link, a directory, one over the limit: not served, as the file would not be.
    std::fs::write(www.join("linked.css"), "b{}").unwrap();
    symlink(root.0.join("secret.txt"), www.join("linked.css.br")).unwrap();
    std::fs::write(www.join("linked.css.gz"), "GZIP").unwrap();
    std::fs::write(www.join("dir.css"), "c{}").unwrap();
    std::fs::create_dir(www.join("dir.css.br")).unwrap();
    std::fs::write(www.join("big.css"), "d{}").unwrap();
    File::create(www.join("big.css.br"))
        .unwrap()
        .set_len(MAX_FILE_LEN + 1)
        .unwrap();
    // Types that do not compress are never negotiated, whatever lies beside them.
    std::fs::write(www.join("hero.webp"), "webp").unwrap();
    std::fs::write(www.join("hero.webp.br"), "BR").unwrap();
    // A sidecar without its file: served to those that accept it (as nginx does), 404 to
    // the others.
    std::fs::write(www.join("gone.css.br"), "BR").unwrap();
    let mut files = StaticFiles::new(&www);
    let both = Some("br;q=1, gzip;q=0.8");
    // (name, body, Content-Encoding, Vary).
    let cases: [(&str, &str, Option<&str>, bool); 6] = [
        ("only-gz.css", "GZIP", Some("gzip"), true),
        ("linked.css", "GZIP", Some("gzip"), true),
        ("dir.css", "c{}", None, true),
        ("big.css", "d{}", None, true),
        ("hero.webp", "webp", None, false),
        ("gone.css", "BR", Some("br"), true),
    ];
    for (name, expected, coding, vary) in cases {
        let (head, body) = answer_accepting(&mut files, "GET", name, both);
        assert_eq!(String::from_utf8(body).unwrap(), expected, "{name} {head}");
        assert_encoding(&head, coding);
        assert_eq!(head.contains("Vary: Accept-Encoding\r\n"), vary, "{head}");
    }
    let (head, _) = answer_accepting(&mut files, "GET", "gone.css", None);
    assert!(head.starts_with("HTTP/1.1 404 Not Found\r\n"), "{head}");
    // A name too long once suffixed is no sidecar: the file itself.
    let long = format!("{}.css", "n".repeat(251));
    std::fs::write(www.join(&long), "e{}").unwrap();
    let (head, body) = answer_accepting(&mut files, "GET", &long, both);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert_eq!(body, b"e{}");
}

/// `head` says `Content-Encoding: {coding}`, or no Content-Encoding at all.
fn assert_encoding(head: &str, coding: Option<&str>) {
    match coding {
        Some(coding) => assert!(
            head.contains(&format!("Content-Encoding: {coding}\r\n")),
            "{head}"
        ),
        None => assert!(!head.contains("Content-Encoding"), "{head}"),
    }
}
