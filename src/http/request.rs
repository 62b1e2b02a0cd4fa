use std::mem::MaybeUninit;

use super::Status;

/// The largest request head (request line and headers) accepted; larger gets 414 or 431.
pub const MAX_HEAD: usize = 8 * 1024;
/// The largest request body accepted; no route takes one, so larger gets 413.
pub const MAX_BODY: usize = 8 * 1024;
/// More header lines than this gets 431.
const MAX_HEADERS: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Other,
}

/// A parsed request, borrowing from the connection's read buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: Method,
    /// The path without the query string.
    pub path: &'a str,
    /// What follows the `?`, or "".
    pub query: &'a str,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// HTTP/1.0 wants `Connection: keep-alive` echoed when it asked for it.
    pub http10: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A whole request, body included, was `len` bytes at the front of the buffer.
    Complete { request: Request<'a>, len: usize },
    /// More bytes are needed.
    Partial,
    /// The request cannot be served: answer with this status and close.
    Invalid(Status),
}

/// Parses the request at the front of `buf`.
pub fn parse(buf: &[u8]) -> Parsed<'_> {
    let mut headers = [const { MaybeUninit::<httparse::Header>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    // The head must fit in MAX_HEAD bytes, however much has arrived: the answer must not
    // depend on how the bytes were split into reads.
    let head = &buf[..buf.len().min(MAX_HEAD)];
    let head_len = match req.parse_with_uninit_headers(head, &mut headers) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if head.len() == MAX_HEAD => {
            // No end of line yet: it is the request line, so the target, that is too long.
            return match head.contains(&b'\n') {
                true => Parsed::Invalid(Status::HeaderTooLarge),
                false => Parsed::Invalid(Status::UriTooLong),
            };
        }
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(httparse::Error::TooManyHeaders) => return Parsed::Invalid(Status::HeaderTooLarge),
        Err(_) => return Parsed::Invalid(Status::BadRequest),
    };
    // httparse only completes with all three set.
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Parsed::Invalid(Status::BadRequest);
    };
    let http10 = minor == 0;

    let mut keep_alive = !http10;
    let mut content_length: Option<usize> = None;
    let mut chunked = false;
    let mut has_host = false;
    for header in req.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case("connection") {
            for token in header.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case(b"keep-alive") && http10 {
                    keep_alive = true;
                }
            }
        } else if name.eq_ignore_ascii_case("content-length") {
            let Some(length) = parse_content_length(header.value) else {
                return Parsed::Invalid(Status::BadRequest);
            };
            // Repeated Content-Length headers must agree (RFC 9112, 6.3).
            if content_length.is_some_and(|seen| seen != length) {
                return Parsed::Invalid(Status::BadRequest);
            }
            content_length = Some(length);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = true;
        } else if name.eq_ignore_ascii_case("host") {
            has_host = true;
        }
    }
    // Both framing headers at once is the classic request-smuggling shape: refuse it.
    if chunked && content_length.is_some() {
        return Parsed::Invalid(Status::BadRequest);
    }
    if chunked {
        return Parsed::Invalid(Status::NotImplemented);
    }
    if !has_host && !http10 {
        return Parsed::Invalid(Status::BadRequest);
    }
    let body_len = content_length.unwrap_or(0);
    if body_len > MAX_BODY {
        return Parsed::Invalid(Status::PayloadTooLarge);
    }
    let len = head_len + body_len;
    if buf.len() < len {
        return Parsed::Partial;
    }

    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        _ => Method::Other,
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Parsed::Complete {
        request: Request {
            method,
            path,
            query,
            keep_alive,
            http10,
        },
        len,
    }
}

/// Digits only: no sign, no spaces inside, no overflow.
fn parse_content_length(value: &[u8]) -> Option<usize> {
    let value = value.trim_ascii();
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRK_REQUEST: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\nAccept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7\r\nConnection: keep-alive\r\n\r\n";

    fn complete(buf: &[u8]) -> (Request<'_>, usize) {
        match parse(buf) {
            Parsed::Complete { request, len } => (request, len),
            other => panic!("expected a complete request, got {other:?}"),
        }
    }

    #[test]
    fn parses_a_load_generator_request() {
        let (request, len) = complete(WRK_REQUEST);
        assert_eq!(len, WRK_REQUEST.len());
        assert_eq!(request.method, Method::Get);
        assert_eq!(request.path, "/plaintext");
        assert_eq!(request.query, "");
        assert!(request.keep_alive);
        assert!(!request.http10);
    }

    #[test]
    fn splits_the_query_string() {
        let (request, _) = complete(b"GET /queries?queries=20&x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(request.path, "/queries");
        assert_eq!(request.query, "queries=20&x=1");
    }

    #[test]
    fn pipelined_requests_come_out_one_at_a_time_in_order() {
        let paths = ["/plaintext", "/json", "/nothing", "/plaintext?x"];
        let mut buf = Vec::new();
        for path in paths {
            buf.extend_from_slice(format!("GET {path} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
        }
        let mut rest = &buf[..];
        for path in paths {
            let (request, len) = complete(rest);
            assert_eq!(request.path, path.split('?').next().unwrap());
            rest = &rest[len..];
        }
        assert!(rest.is_empty());
    }

    #[test]
    fn every_split_point_is_partial_until_the_last_byte() {
        let two = [WRK_REQUEST, WRK_REQUEST].concat();
        for cut in 0..WRK_REQUEST.len() {
            assert_eq!(parse(&two[..cut]), Parsed::Partial, "cut at {cut}");
        }
        for cut in WRK_REQUEST.len()..two.len() {
            let (_, len) = complete(&two[..cut]);
            assert_eq!(len, WRK_REQUEST.len(), "cut at {cut}");
        }
    }

    #[test]
    fn http10_closes_unless_it_asks_for_keep_alive() {
        let (request, _) = complete(b"GET /json HTTP/1.0\r\n\r\n");
        assert!(request.http10);
        assert!(!request.keep_alive);
        let (request, _) = complete(b"GET /json HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(request.keep_alive);
    }

    #[test]
    fn connection_close_is_honoured_among_other_tokens() {
        let (request, _) =
            complete(b"GET /json HTTP/1.1\r\nHost: a\r\nConnection: TE, close\r\n\r\n");
        assert!(!request.keep_alive);
    }

    #[test]
    fn a_body_is_consumed_and_not_taken_for_the_next_request() {
        let buf = b"POST /json HTTP/1.1\r\nHost: a\r\nContent-Length: 30\r\n\r\nGET /plaintext HTTP/1.1\r\n\r\n...GET /json HTTP/1.1\r\nHost: a\r\n\r\n";
        let (request, len) = complete(buf);
        assert_eq!(request.method, Method::Other);
        let (next, _) = complete(&buf[len..]);
        assert_eq!(next.path, "/json");
        let head = b"POST /json HTTP/1.1\r\nHost: a\r\nContent-Length: 30\r\n\r\n";
        assert_eq!(parse(&buf[..head.len() + 29]), Parsed::Partial);
    }

    #[test]
    fn malformed_requests_are_400() {
        let cases: &[&[u8]] = &[
            b"\x00\x01\x02garbage\r\n\r\n",
            b"GET /json HTTP/9.9\r\nHost: a\r\n\r\n",
            b"GET /json\r\n\r\n",
            b"GET /json HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n",
            b"GET /json HTTP/1.1\r\nHost: a\x00b\r\n\r\n",
            b"GET /json HTTP/1.1\r\n\r\n",
            b"GET /json HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
            b"GET /json HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            b"GET /json HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            b"POST /json HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        ];
        for case in cases {
            assert_eq!(
                parse(case),
                Parsed::Invalid(Status::BadRequest),
                "{}",
                String::from_utf8_lossy(case)
            );
        }
    }

    #[test]
    fn chunked_bodies_are_not_implemented() {
        let buf = b"POST /json HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        assert_eq!(parse(buf), Parsed::Invalid(Status::NotImplemented));
    }

    #[test]
    fn oversized_targets_are_414_heads_431_and_bodies_413() {
        let mut target = b"GET /".to_vec();
        target.resize(100 * 1024, b'a');
        assert_eq!(parse(&target), Parsed::Invalid(Status::UriTooLong));
        target.extend_from_slice(b" HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(parse(&target), Parsed::Invalid(Status::UriTooLong));

        let mut long = b"GET /json HTTP/1.1\r\nHost: a\r\nX-Long: ".to_vec();
        long.resize(MAX_HEAD + 10, b'a');
        assert_eq!(parse(&long), Parsed::Invalid(Status::HeaderTooLarge));
        long.extend_from_slice(b"\r\n\r\n");
        assert_eq!(parse(&long), Parsed::Invalid(Status::HeaderTooLarge));

        let mut many = b"GET /json HTTP/1.1\r\nHost: a\r\n".to_vec();
        for i in 0..MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(parse(&many), Parsed::Invalid(Status::HeaderTooLarge));

        let big_body = format!(
            "POST /json HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert_eq!(
            parse(big_body.as_bytes()),
            Parsed::Invalid(Status::PayloadTooLarge)
        );
    }
}
