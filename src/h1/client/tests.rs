use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;
use crate::h1::{Chunked, Parsed};
use crate::http::{Method, Version, MAX_BODY};

// Requests.

const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));

fn forward<'a>(method: &'a str, target: &'a str, body: &'a [u8]) -> Forward<'a> {
    Forward {
        method: method.as_bytes(),
        target: target.as_bytes(),
        version: Version::Http11,
        client: CLIENT,
        https: false,
        body,
    }
}

/// The request written with `fields`, as text.
fn written(forward: &Forward<'_>, fields: &[(&str, &str)]) -> Result<String, WriteError> {
    let fields = fields
        .iter()
        .map(|&(name, value)| (name.as_bytes(), value.as_bytes()));
    let mut out = b"before".to_vec();
    let result = forward.write(fields, &mut out);
    if result.is_err() {
        assert_eq!(out, b"before", "nothing written");
    }
    result.map(|()| String::from_utf8(out.split_off(6)).unwrap())
}

#[test]
fn a_request_is_written_with_its_end_to_end_fields_and_the_proxys_own() {
    let text = written(
        &forward("POST", "/submit?x=1", b"hello"),
        &[
            ("Accept", "*/*"),
            ("Host", "example.com:8080"),
            ("Content-Type", " text/plain "),
            ("Content-Length", "5"),
            ("Via", "1.1 other"),
        ],
    )
    .unwrap();
    assert_eq!(
        text,
        "POST /submit?x=1 HTTP/1.1\r\nHost: example.com:8080\r\nAccept: */*\r\n\
Content-Type: text/plain\r\nVia: 1.1 other\r\nVia: 1.1 gnosis\r\nX-Forwarded-For: 192.0.2.7\r\n\
X-Forwarded-Proto: http\r\nContent-Length: 5\r\n\r\nhello"
    );
    // The server's own parser reads it as it was meant.
    let Parsed::Complete {
        request,
        len,
        keep_alive,
    } = crate::h1::parse(text.as_bytes(), MAX_BODY, &Chunked::default())
    else {
        panic!("{text}");
    };
    assert_eq!(
        (request.method, request.path, request.query, request.body),
        (Method::Post, "/submit", "x=1", &b"hello"[..])
    );
    assert_eq!((len, keep_alive), (text.len(), true));
}

#[test]
fn via_names_the_clients_protocol_and_the_forwarded_fields_its_address_and_scheme() {
    let mut request = forward("GET", "*", b"");
    request.method = b"OPTIONS";
    request.version = Version::Http2;
    request.client = IpAddr::V6(Ipv6Addr::LOCALHOST);
    request.https = true;
    let text = written(
        &request,
        &[
            ("host", "a"),
            ("X-Forwarded-For", "6.6.6.6"),
            ("x-forwarded-proto", "http"),
        ],
    )
    .unwrap();
    assert_eq!(
        text,
        "OPTIONS * HTTP/1.1\r\nHost: a\r\nVia: 2 gnosis\r\nX-Forwarded-For: ::1\r\n\
X-Forwarded-Proto: https\r\n\r\n"
    );
    for (version, via) in [
        (Version::Http10, "1.0"),
        (Version::Http11, "1.1"),
        (Version::Http3, "3"),
    ] {
        request.version = version;
        let text = written(&request, &[("Host", "a")]).unwrap();
        assert!(
            text.contains(&format!("\r\nVia: {via} gnosis\r\n")),
            "{text}"
        );
    }
}

#[test]
fn hop_by_hop_fields_and_those_connection_names_are_not_forwarded() {
    let text = written(
        &forward("GET", "/", b""),
        &[
            ("Host", "a"),
            ("Connection", "keep-alive, X-Secret,,"),
            ("Keep-Alive", "timeout=5"),
            ("Proxy-Connection", "keep-alive"),
            ("TE", "trailers"),
            ("Trailer", "X-T"),
            ("Upgrade", "websocket"),
            ("x-secret", "1"),
            ("Expect", "100-continue"),
            ("connection", "X-Other"),
            ("X-Other", "2"),
            ("X-Kept", "3"),
        ],
    )
    .unwrap();
    assert_eq!(
        text,
        "GET / HTTP/1.1\r\nHost: a\r\nX-Kept: 3\r\nVia: 1.1 gnosis\r\n\
X-Forwarded-For: 192.0.2.7\r\nX-Forwarded-Proto: http\r\n\r\n"
    );
    // Host is never hop-by-hop, nor are the fields this proxy writes.
    let text = written(
        &forward("GET", "/", b""),
        &[("Host", "a"), ("Connection", "Host, X-Forwarded-For, Via")],
    )
    .unwrap();
    assert!(
        text.starts_with(
            "GET / HTTP/1.1\r\nHost: a\r\nVia: 1.1 gnosis\r\nX-Forwarded-For: 192.0.2.7\r\n"
        ),
        "{text}"
    );
}

#[test]
fn content_length_is_the_bodys_and_written_when_there_is_one() {
    let length = |body: &[u8], fields: &[(&str, &str)]| {
        let text = written(&forward("POST", "/", body), fields).unwrap();
        text.split("\r\n")
            .find_map(|line| line.strip_prefix("Content-Length: "))
            .map(str::to_string)
    };
    assert_eq!(length(b"", &[("Host", "a")]), None);
    assert_eq!(length(b"abc", &[("Host", "a")]).as_deref(), Some("3"));
    // The client's own, whatever it says, is replaced.
    assert_eq!(
        length(b"abc", &[("Host", "a"), ("Content-Length", "999")]).as_deref(),
        Some("3")
    );
    // A body announced, even empty, is framed; a chunked one is sent with its length.
    assert_eq!(
        length(b"", &[("Host", "a"), ("Content-Length", "0")]).as_deref(),
        Some("0")
    );
    assert_eq!(
        length(b"ab", &[("Host", "a"), ("Transfer-Encoding", "chunked")]).as_deref(),
        Some("2")
    );
}

#[test]
fn what_could_end_a_line_or_confuse_the_upstream_is_refused() {
    use WriteError::{FieldName, FieldValue, Host, Method, Target};
    let host = ("Host", "a");
    let fields: [(&[(&str, &str)], WriteError); 15] = [
        (&[host, ("X-A", "a\r\nX-B: b")], FieldValue),
        (&[host, ("X-A", "a\rb")], FieldValue),
        (&[host, ("X-A", "a\nb")], FieldValue),
        (&[host, ("X-A", "a\0b")], FieldValue),
        // A field that would be dropped is checked too.
        (
            &[host, ("Keep-Alive", "\r\n\r\nGET /admin HTTP/1.1")],
            FieldValue,
        ),
        (&[host, ("X-A\r\nX-B", "b")], FieldName),
        (&[host, ("X-A: b\r\nX-C", "c")], FieldName),
        (&[host, ("X A", "b")], FieldName),
        (&[host, ("", "b")], FieldName),
        (&[host, ("X-A:", "b")], FieldName),
        (&[], Host),
        (&[host, ("host", "a")], Host),
        (&[("Host", "a b")], Host),
        (&[("Host", "a/b")], Host),
        (&[("Host", "user@a")], Host),
    ];
    for (fields, error) in fields {
        let request = forward("GET", "/", b"");
        assert_eq!(written(&request, fields), Err(error), "{fields:?}");
    }
    let lines = [
        ("GET /admin HTTP/1.1\r\n", "/", Method),
        ("GET /", "/", Method),
        ("", "/", Method),
        ("CONNECT", "/", Method),
        ("GET", "/ HTTP/1.1\r\nHost: b\r\n\r\nGET /", Target),
        ("GET", "/a b", Target),
        ("GET", "/a\tb", Target),
        ("GET", "/\u{e9}", Target),
        ("GET", "", Target),
        ("GET", "http://a/", Target),
    ];
    for (method, target, error) in lines {
        let request = forward(method, target, b"");
        assert_eq!(
            written(&request, &[host]),
            Err(error),
            "{method:?} {target:?}"
        );
    }
}
