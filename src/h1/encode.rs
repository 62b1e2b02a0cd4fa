//! An answer written as HTTP/1.1 text (RFC 9112): the status line, the fields, the body.

use crate::http::{
    AltSvc, Answer, ContentType, FieldLines, HttpDate, Method, Request, Status, Version,
};

/// What an HTTP/1.1 answer must say of its connection and whether its body goes: read from
/// its request. Small and `Copy`, so that an answer that waits for the database carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Framing {
    keep_alive: bool,
    http10: bool,
    head_only: bool,
    /// Where the connection's server also answers over HTTP/3 (a connection over TLS).
    alt_svc: Option<AltSvc>,
    /// The body is chunked: a piped one whose length is not known when its head goes.
    chunked: bool,
}

impl Framing {
    pub fn to(request: &Request<'_>, keep_alive: bool, alt_svc: Option<AltSvc>) -> Self {
        Framing {
            keep_alive,
            http10: request.version == Version::Http10,
            head_only: request.method == Method::Head,
            alt_svc,
            chunked: false,
        }
    }

    /// For a request that could not be parsed: the connection closes after it.
    pub fn closing() -> Self {
        Framing {
            keep_alive: false,
            http10: false,
            head_only: false,
            alt_svc: None,
            chunked: false,
        }
    }

    /// The same, saying `Connection: close` (the server drains).
    pub fn closing_after(self) -> Self {
        Framing {
            keep_alive: false,
            ..self
        }
    }

    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// Appends `answer` to `out`: status line, fields, body (not for HEAD). A body that
    /// cannot be read (a file that changed) is answered with the error instead.
    pub fn write(self, out: &mut Vec<u8>, date: &HttpDate, answer: &Answer<'_>) {
        let start = out.len();
        self.write_head(out, date, answer);
        if self.head_only || answer.status == Status::SwitchingProtocols {
            return;
        }
        if let Err(status) = answer.body.write_to(out) {
            out.truncate(start);
            self.write(out, date, &Answer::error(status));
        }
    }

    /// Writes the head of `answer`, whose body is piped (an upstream's, arriving), and says
    /// how its body follows, if it has one (not for a HEAD, a 204 or a 304): with its
    /// `Content-Length` when known (the upstream's, or the whole body's once it is in);
    /// else chunked (`true`), or to an HTTP/1.0 client, which knows no chunks, up to the
    /// close (the framing then closes the connection after it).
    pub fn write_piped_head(
        &mut self,
        out: &mut Vec<u8>,
        date: &HttpDate,
        answer: &Answer<'_>,
    ) -> Option<bool> {
        let body = !self.head_only && !answer.bodiless();
        let known = answer.content_length(false).is_some();
        self.chunked = body && !known && !self.http10;
        // To HTTP/1.0 it ends at the close, so a failure within it cannot be told from its
        // end (nginx has the same limit).
        self.keep_alive &= known || !body || !self.http10;
        self.write_head(out, date, answer);
        body.then_some(self.chunked)
    }

    /// The status line and the fields of `answer`. A `101` has no content and says
    /// `Connection: Upgrade`.
    fn write_head(self, out: &mut Vec<u8>, date: &HttpDate, answer: &Answer<'_>) {
        let status = answer.status;
        match status_line(status) {
            Some(line) => out.extend_from_slice(line),
            None => write_status_line(out, status),
        }
        for (name, value) in answer.head_fields() {
            write_field(out, name, value);
        }
        if status == Status::SwitchingProtocols {
            out.extend_from_slice(b"Connection: Upgrade\r\n\r\n");
            return;
        }
        if answer.content_type == ContentType::InFields {
            return self.write_forwarded(out, date, answer);
        }
        out.extend_from_slice(b"Server: gnosis\r\nDate: ");
        out.extend_from_slice(date.as_bytes());
        out.extend_from_slice(b"\r\nContent-Type: ");
        out.extend_from_slice(answer.content_type.value());
        out.extend_from_slice(b"\r\nContent-Length: ");
        out.extend_from_slice(itoa::Buffer::new().format(answer.body.len()).as_bytes());
        self.write_end(out, answer);
    }

    /// The head of an answer whose fields say its content type (a forwarded answer), after
    /// its status line: its fields as they came, but the connection's and
    /// `Content-Length`; `Server` and `Date` unless they said them; the `Content-Length`
    /// the answer says, if any; then what every answer ends with.
    fn write_forwarded(self, out: &mut Vec<u8>, date: &HttpDate, answer: &Answer<'_>) {
        for (name, value) in answer.forwarded_fields() {
            FieldLines::push(out, name, value);
        }
        let adds = answer.adds();
        if adds.server {
            out.extend_from_slice(b"Server: gnosis\r\n");
        }
        if adds.date {
            FieldLines::push(out, b"Date", date.as_bytes());
        }
        if let Some(length) = answer.content_length(self.head_only) {
            let mut digits = itoa::Buffer::new();
            FieldLines::push(out, b"Content-Length", digits.format(length).as_bytes());
        } else if self.chunked {
            FieldLines::push(out, b"Transfer-Encoding", b"chunked");
        }
        // The end begins each of its lines with the CRLF that ends the one before.
        out.truncate(out.len() - 2);
        self.write_end(out, answer);
    }

    /// The last lines of a head, each after the CRLF that ends the line before: the
    /// content coding, `Alt-Svc`, the connection's; then the empty line.
    fn write_end(self, out: &mut Vec<u8>, answer: &Answer<'_>) {
        if let Some(coding) = answer.encoding.coding {
            out.extend_from_slice(b"\r\nContent-Encoding: ");
            out.extend_from_slice(coding.token());
        }
        if answer.encoding.vary {
            out.extend_from_slice(b"\r\nVary: Accept-Encoding");
        }
        if let Some(alt_svc) = self.alt_svc {
            out.extend_from_slice(b"\r\nAlt-Svc: ");
            out.extend_from_slice(alt_svc.value().as_bytes());
        }
        if !self.keep_alive {
            out.extend_from_slice(b"\r\nConnection: close");
        } else if self.http10 {
            out.extend_from_slice(b"\r\nConnection: keep-alive");
        }
        out.extend_from_slice(b"\r\n\r\n");
    }
}

/// The framing of the request at the front of `raw`, for tests that write answers as
/// HTTP/1.1 would.
#[cfg(test)]
pub(crate) fn framing_of(raw: &[u8]) -> Framing {
    match super::parse(raw, crate::http::MAX_BODY, &Default::default()) {
        super::Parsed::Complete {
            request,
            keep_alive,
            ..
        } => Framing::to(&request, keep_alive, None),
        other => panic!("{other:?}"),
    }
}

/// The status line of a status named by [`Status`].
fn status_line(status: Status) -> Option<&'static [u8]> {
    Some(match status {
        Status::SwitchingProtocols => b"HTTP/1.1 101 Switching Protocols\r\n",
        Status::Ok => b"HTTP/1.1 200 OK\r\n",
        Status::BadRequest => b"HTTP/1.1 400 Bad Request\r\n",
        Status::NotFound => b"HTTP/1.1 404 Not Found\r\n",
        Status::MethodNotAllowed => b"HTTP/1.1 405 Method Not Allowed\r\n",
        Status::PayloadTooLarge => b"HTTP/1.1 413 Content Too Large\r\n",
        Status::UnsupportedMediaType => b"HTTP/1.1 415 Unsupported Media Type\r\n",
        Status::UpgradeRequired => b"HTTP/1.1 426 Upgrade Required\r\n",
        Status::UriTooLong => b"HTTP/1.1 414 URI Too Long\r\n",
        Status::HeaderTooLarge => b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
        Status::InternalServerError => b"HTTP/1.1 500 Internal Server Error\r\n",
        Status::ServiceUnavailable => b"HTTP/1.1 503 Service Unavailable\r\n",
        Status::BadGateway => b"HTTP/1.1 502 Bad Gateway\r\n",
        Status::GatewayTimeout => b"HTTP/1.1 504 Gateway Timeout\r\n",
        Status::Other(_) => return None,
    })
}

/// The status line of any other code (an upstream's), with RFC 9110's reason if it names
/// one, else an empty reason (RFC 9112, 4: the space stays).
fn write_status_line(out: &mut Vec<u8>, status: Status) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(itoa::Buffer::new().format(status.code()).as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.reason().as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// A field line, its lowercase name capitalized as HTTP/1.1's tradition writes it
/// (`sec-websocket-accept`: `Sec-WebSocket-Accept`; the name is case-insensitive, but
/// some clients compare it as written).
fn write_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    let written: &[u8] = match name {
        b"allow" => b"Allow",
        b"upgrade" => b"Upgrade",
        b"sec-websocket-accept" => b"Sec-WebSocket-Accept",
        b"sec-websocket-version" => b"Sec-WebSocket-Version",
        other => other,
    };
    FieldLines::push(out, written, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{Body, Coding, ContentType, Encoding};

    fn written(framing: Framing, answer: Answer<'_>) -> String {
        let mut out = Vec::new();
        framing.write(&mut out, &HttpDate::new(), &answer);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn writes_every_required_header() {
        let date = HttpDate::new();
        let mut out = Vec::new();
        let framing = framing_of(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        framing.write(&mut out, &date, &Answer::ok(ContentType::Json, b"{}"));
        let expected = format!(
            "HTTP/1.1 200 OK\r\nServer: gnosis\r\nDate: {}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}",
            std::str::from_utf8(date.as_bytes()).unwrap()
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn says_close_and_keep_alive_when_it_must() {
        let cases: [(&[u8], &str); 3] = [
            (
                b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
                "Connection: close\r\n",
            ),
            (b"GET / HTTP/1.0\r\n\r\n", "Connection: close\r\n"),
            (
                b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
                "Connection: keep-alive\r\n",
            ),
        ];
        for (raw, header) in cases {
            let text = written(framing_of(raw), Answer::ok(ContentType::Plain, b"x"));
            assert!(text.contains(header), "{header}");
        }
    }

    #[test]
    fn names_http3_when_told_to() {
        let raw = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        let request = match super::super::parse(raw, 0, &Default::default()) {
            super::super::Parsed::Complete { request, .. } => request,
            other => panic!("{other:?}"),
        };
        let framing = Framing::to(&request, true, Some(AltSvc::h3(443)));
        let text = written(framing, Answer::ok(ContentType::Plain, b"x"));
        assert!(
            text.contains("\r\nAlt-Svc: h3=\":443\"; ma=86400\r\n"),
            "{text}"
        );
        let text = written(framing_of(raw), Answer::ok(ContentType::Plain, b"x"));
        assert!(!text.contains("Alt-Svc"), "{text}");
    }

    #[test]
    fn head_gets_the_headers_without_the_body() {
        let framing = framing_of(b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n");
        let text = written(framing, Answer::ok(ContentType::Plain, b"Hello, World!"));
        assert!(text.contains("Content-Length: 13\r\n"));
        assert!(text.ends_with("\r\n\r\n"));
    }

    #[test]
    fn an_encoding_is_written_as_its_fields() {
        let framing = framing_of(b"GET /static/a.css HTTP/1.1\r\nHost: a\r\n\r\n");
        for coding in [None, Some(Coding::Br), Some(Coding::Gzip)] {
            for vary in [false, true] {
                let mut answer = Answer::ok(ContentType::Css, b"1234567");
                answer.encoding = Encoding { coding, vary };
                let text = written(framing, answer);
                let named = coding.map(|coding| std::str::from_utf8(coding.token()).unwrap());
                let line = named.map(|name| format!("Content-Encoding: {name}\r\n"));
                assert_eq!(
                    text.contains("Content-Encoding"),
                    coding.is_some(),
                    "{text}"
                );
                assert!(line.is_none_or(|line| text.contains(&line)), "{text}");
                assert_eq!(text.contains("Vary: Accept-Encoding\r\n"), vary, "{text}");
                assert!(text.contains("Content-Length: 7\r\n"), "{text}");
                assert!(text.ends_with("\r\n\r\n1234567"), "{text}");
            }
        }
    }

    #[test]
    fn each_status_line_carries_its_code_and_reason() {
        for status in [
            Status::SwitchingProtocols,
            Status::Ok,
            Status::BadRequest,
            Status::NotFound,
            Status::MethodNotAllowed,
            Status::PayloadTooLarge,
            Status::UnsupportedMediaType,
            Status::UpgradeRequired,
            Status::UriTooLong,
            Status::HeaderTooLarge,
            Status::InternalServerError,
            Status::BadGateway,
            Status::ServiceUnavailable,
            Status::GatewayTimeout,
            Status::Other(201),
            Status::Other(299),
        ] {
            let mut line = Vec::new();
            match status_line(status) {
                Some(known) => line.extend_from_slice(known),
                None => write_status_line(&mut line, status),
            }
            let line = String::from_utf8_lossy(&line);
            let expected = format!("HTTP/1.1 {} {}\r\n", status.code(), status.reason());
            assert_eq!(line, expected);
        }
    }

    #[test]
    fn an_error_names_what_its_status_needs() {
        let text = written(Framing::closing(), Answer::error(Status::MethodNotAllowed));
        assert!(text.starts_with("HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\n"));
        assert!(text.ends_with("Connection: close\r\n\r\nMethod Not Allowed"));
        let text = written(Framing::closing(), Answer::error(Status::UpgradeRequired));
        assert!(text.starts_with(
            "HTTP/1.1 426 Upgrade Required\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
        ));
    }

    #[test]
    fn a_switch_is_a_head_alone_with_the_accept_value() {
        let framing = framing_of(b"GET /ws HTTP/1.1\r\nHost: a\r\n\r\n");
        let text = written(
            framing,
            Answer::switch_to_websocket(b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
        );
        assert_eq!(
            text,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nConnection: Upgrade\r\n\r\n"
        );
    }

    /// An upstream's fields as its response reader hands them over: names as it wrote
    /// them, a connection-specific field and its Content-Length among them.
    const UPSTREAM: &[u8] = b"Content-Type: application/json\r\nLocation: /items/7\r\n\
        Set-Cookie: a=1; Path=/\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n\
        Connection: keep-alive\r\nETag: \"x\"\r\n";

    fn forwarded<'a>(status: u16, fields: &'a [u8], body: &'a [u8]) -> Answer<'a> {
        Answer::forwarded(
            Status::from_code(status),
            FieldLines::new(fields, 0),
            Body::Bytes(body),
        )
    }

    #[test]
    fn a_forwarded_answer_is_written_with_its_fields_as_they_came() {
        let date = HttpDate::new();
        let mut out = Vec::new();
        let framing = framing_of(b"POST /items HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
        framing.write(&mut out, &date, &forwarded(201, UPSTREAM, b"{}"));
        let expected = format!(
            "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nLocation: /items/7\r\n\
             Set-Cookie: a=1; Path=/\r\nSet-Cookie: b=2\r\nETag: \"x\"\r\nServer: gnosis\r\n\
             Date: {}\r\nContent-Length: 2\r\n\r\n{{}}",
            std::str::from_utf8(date.as_bytes()).unwrap()
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn a_forwarded_answer_frames_its_body_itself_and_keeps_the_upstreams_date_and_server() {
        let fields = b"date: Tue, 01 Jan 2030 00:00:00 GMT\r\nSERVER: upstream\r\n\
            Transfer-Encoding: chunked\r\nKeep-Alive: timeout=5\r\nUpgrade: h2c\r\n\
            Content-Length: 99\r\n";
        let framing = framing_of(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        let text = written(framing, forwarded(200, fields, b"abc"));
        assert_eq!(
            text,
            "HTTP/1.1 200 OK\r\ndate: Tue, 01 Jan 2030 00:00:00 GMT\r\nSERVER: upstream\r\n\
             Content-Length: 3\r\nConnection: close\r\n\r\nabc"
        );
        // No fields at all, and a code RFC 9110 does not name: an empty reason.
        let text = written(
            framing_of(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
            forwarded(299, b"", b""),
        );
        assert!(
            text.starts_with("HTTP/1.1 299 \r\nServer: gnosis\r\nDate: "),
            "{text}"
        );
        assert!(text.ends_with("\r\nContent-Length: 0\r\n\r\n"), "{text}");
    }

    #[test]
    fn a_forwarded_heads_or_304s_length_is_the_upstreams_and_a_204_has_none() {
        let head = framing_of(b"HEAD /a HTTP/1.1\r\nHost: a\r\n\r\n");
        let text = written(head, forwarded(200, UPSTREAM, b""));
        assert!(text.ends_with("\r\nContent-Length: 2\r\n\r\n"), "{text}");
        assert_eq!(text.matches("Content-Length").count(), 1, "{text}");
        let get = framing_of(b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n");
        let text = written(
            get,
            forwarded(304, b"ETag: \"x\"\r\nContent-Length: 1234\r\n", b""),
        );
        assert!(
            text.starts_with("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n"),
            "{text}"
        );
        assert!(text.ends_with("\r\nContent-Length: 1234\r\n\r\n"), "{text}");
        // Without the upstream's length, none is said; a 204 never says one.
        let text = written(head, forwarded(200, b"ETag: \"x\"\r\n", b""));
        assert!(!text.contains("Content-Length"), "{text}");
        let text = written(get, forwarded(204, b"Content-Length: 0\r\n", b""));
        assert!(text.starts_with("HTTP/1.1 204 No Content\r\n"), "{text}");
        assert!(
            !text.contains("Content-Length") && text.ends_with("\r\n\r\n"),
            "{text}"
        );
        // A static file's HEAD, for comparison: the length of what a GET would get.
        let text = written(head, Answer::ok(ContentType::Plain, b"12345"));
        assert!(text.ends_with("\r\nContent-Length: 5\r\n\r\n"), "{text}");
    }
}
