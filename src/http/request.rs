use std::mem::MaybeUninit;

use super::Status;

/// The largest request head (request line and headers) accepted; larger gets 414 or 431.
/// Chunked trailers are held to the same size.
pub const MAX_HEAD: usize = 8 * 1024;
/// The default largest request body (`--max-body`); larger gets 413 and the connection
/// closes. A body is answered only once all of it is in the connection's input, so this
/// bounds what one connection can make the server hold: 4,096 connections sending the
/// largest head and body at once hold under 300 MiB. HttpArena's bodies are a few digits.
pub const MAX_BODY: usize = 64 * 1024;
/// More header lines than this gets 431.
const MAX_HEADERS: usize = 64;
/// A chunk-size line (size and extensions) longer than this is refused with 400.
const MAX_CHUNK_LINE: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Other,
}

/// A parsed request, borrowing from the connection's read buffer (and, for a chunked body,
/// from the [`Chunked`] it was decoded into).
#[derive(Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: Method,
    /// The path without the query string.
    pub path: &'a str,
    /// What follows the `?`, or "".
    pub query: &'a str,
    /// The body's bytes, de-chunked; empty without one.
    pub body: &'a [u8],
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
    /// More bytes are needed: the head is in, the body has not begun, and the client waits
    /// for `100 Continue` before it sends it (`Expect: 100-continue`).
    ExpectsContinue,
    /// The request cannot be served: answer with this status and close.
    Invalid(Status),
}

/// A chunked body decoded so far: the data of its complete chunks, and how many bytes of its
/// encoding they took. Kept from one read to the next while the request is incomplete, so
/// that a body arriving a chunk at a time is decoded once, not again on every read.
#[derive(Debug, Default)]
pub struct Chunked {
    data: Vec<u8>,
    encoded: usize,
}

impl Chunked {
    /// Forgets the request decoded so far: the next parse begins a new one.
    pub fn clear(&mut self) {
        self.data.clear();
        self.encoded = 0;
    }

    /// Whether a body is decoded in part.
    pub fn in_progress(&self) -> bool {
        self.encoded > 0
    }
}

/// How the body is framed.
enum Framing {
    Length(usize),
    Chunked,
}

/// Parses the request at the front of `buf`. A body longer than `max_body` is refused with
/// 413. A `Content-Length` body is handed out where it lies in `buf`; a chunked one is
/// decoded into `chunked`, which must be the one given for the same request before (after
/// [`Parsed::Partial`]) or cleared.
pub fn parse<'a>(buf: &'a [u8], max_body: usize, chunked: &'a mut Chunked) -> Parsed<'a> {
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
    let mut transfer_encodings = 0;
    let mut says_chunked = false;
    let mut has_host = false;
    let mut expects_continue = false;
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
            transfer_encodings += 1;
            says_chunked = header.value.trim_ascii().eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case("host") {
            has_host = true;
        } else if name.eq_ignore_ascii_case("expect") {
            expects_continue = header
                .value
                .trim_ascii()
                .eq_ignore_ascii_case(b"100-continue");
        }
    }
    // Only one coding is understood, chunked, alone and once: anything else (another
    // coding, chunked twice or not last, chunked in HTTP/1.0, both framing headers at
    // once) leaves the body's end in doubt, the shape of request smuggling (RFC 9112, 6.1).
    let framing = match (transfer_encodings, content_length) {
        (0, length) => Framing::Length(length.unwrap_or(0)),
        (1, None) if says_chunked && !http10 => Framing::Chunked,
        _ => return Parsed::Invalid(Status::BadRequest),
    };
    if !has_host && !http10 {
        return Parsed::Invalid(Status::BadRequest);
    }
    let arrived = &buf[head_len..];
    let (body, len) = match framing {
        Framing::Length(length) if length > max_body => {
            return Parsed::Invalid(Status::PayloadTooLarge)
        }
        Framing::Length(length) if arrived.len() < length => {
            return match expects_continue && arrived.is_empty() && !http10 {
                true => Parsed::ExpectsContinue,
                false => Parsed::Partial,
            }
        }
        Framing::Length(length) => (&arrived[..length], head_len + length),
        Framing::Chunked => match decode_chunked(arrived, max_body, chunked) {
            Err(status) => return Parsed::Invalid(status),
            Ok(None) if expects_continue && arrived.is_empty() => return Parsed::ExpectsContinue,
            Ok(None) => return Parsed::Partial,
            Ok(Some(chunked_len)) => (&chunked.data[..], head_len + chunked_len),
        },
    };

    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        _ => Method::Other,
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Parsed::Complete {
        request: Request {
            method,
            path,
            query,
            body,
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

/// Decodes the chunked body at the front of `buf` (RFC 9112, 7.1) into `chunked`, from
/// where it got to: the length of its encoding once the last chunk and the trailers are
/// in, `None` while more is needed. Chunk extensions are skipped, trailer fields read and dropped. Every line
/// must end in CRLF: a bare LF in the framing is where two parsers can disagree.
fn decode_chunked(
    buf: &[u8],
    max_body: usize,
    chunked: &mut Chunked,
) -> Result<Option<usize>, Status> {
    let mut at = chunked.encoded;
    loop {
        let Some(line) = line_at(buf, at, MAX_CHUNK_LINE, Status::BadRequest)? else {
            return Ok(None);
        };
        let size = chunk_size(line).ok_or(Status::BadRequest)?;
        at += line.len() + 2;
        if size > max_body - chunked.data.len() {
            return Err(Status::PayloadTooLarge);
        }
        if size == 0 {
            break;
        }
        let Some(data) = buf.get(at..at + size + 2) else {
            return Ok(None);
        };
        if !data.ends_with(b"\r\n") {
            return Err(Status::BadRequest);
        }
        chunked.data.extend_from_slice(&data[..size]);
        at += size + 2;
        chunked.encoded = at;
    }
    // The trailer section: field lines up to an empty line, held to the head's limit.
    let trailers_start = at;
    loop {
        let room = MAX_HEAD - (at - trailers_start);
        let Some(line) = line_at(buf, at, room, Status::HeaderTooLarge)? else {
            return Ok(None);
        };
        at += line.len() + 2;
        if line.is_empty() {
            return Ok(Some(at));
        }
    }
}

/// The line at `buf[at..]` without its CRLF, once it is in; `too_long` if it is longer
/// than `max` with its CRLF, 400 if it does not end in CRLF.
fn line_at(buf: &[u8], at: usize, max: usize, too_long: Status) -> Result<Option<&[u8]>, Status> {
    let rest = &buf[at..];
    let window = &rest[..rest.len().min(max)];
    match window.iter().position(|&b| b == b'\n') {
        Some(end) if end > 0 && window[end - 1] == b'\r' => Ok(Some(&window[..end - 1])),
        Some(_) => Err(Status::BadRequest),
        None if window.len() == max => Err(too_long),
        None => Ok(None),
    }
}

/// A chunk-size line's size: hexadecimal digits, then nothing or extensions after
/// optional blanks and a `;`. No sign, no leading blanks, no overflow.
fn chunk_size(line: &[u8]) -> Option<usize> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let rest = line[digits..].trim_ascii_start();
    if digits == 0 || !(rest.is_empty() || rest[0] == b';') || rest.contains(&b'\r') {
        return None;
    }
    let digits = std::str::from_utf8(&line[..digits]).ok()?;
    usize::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `parse` with the default body limit, from scratch.
    fn parse(buf: &[u8]) -> Parsed<'_> {
        super::parse(buf, MAX_BODY, Box::leak(Box::default()))
    }

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
        assert_eq!(request.method, Method::Post);
        let (next, _) = complete(&buf[len..]);
        assert_eq!(next.path, "/json");
        let head = b"POST /json HTTP/1.1\r\nHost: a\r\nContent-Length: 30\r\n\r\n";
        assert_eq!(parse(&buf[..head.len() + 29]), Parsed::Partial);
    }

    fn assert_all_bad_requests(cases: &[&[u8]]) {
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
        assert_all_bad_requests(cases);
    }

    const CHUNKED_HEAD: &[u8] =
        b"POST /sum HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";

    fn chunked(encoding: &[u8]) -> Vec<u8> {
        [CHUNKED_HEAD, encoding].concat()
    }

    #[test]
    fn a_content_length_body_is_handed_out_where_it_lies() {
        let buf = b"POST /sum?a=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n20GET";
        let (request, len) = complete(buf);
        assert_eq!((request.method, request.body), (Method::Post, &b"20"[..]));
        assert_eq!(len, buf.len() - 3);
        assert!(std::ptr::eq(request.body.as_ptr(), &buf[len - 2]));
    }

    #[test]
    fn chunked_bodies_are_decoded_with_extensions_and_trailers_dropped() {
        let buf = chunked(b"2;name=value\r\n20\r\n1 ; x\r\n5\r\nA\r\n000000000a\r\n0\r\nX-Trailer: t\r\nX-Other: u\r\n\r\nGET");
        let (request, len) = complete(&buf);
        assert_eq!(request.body, b"205000000000a");
        assert_eq!(len, buf.len() - 3);
    }

    #[test]
    fn a_chunked_body_cut_anywhere_is_partial_until_its_last_byte() {
        let buf = chunked(b"3\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\n");
        for cut in 0..buf.len() {
            assert_eq!(parse(&buf[..cut]), Parsed::Partial, "cut at {cut}");
        }
        assert_eq!(complete(&buf).0.body, b"abcde");
    }

    #[test]
    fn a_chunked_body_arriving_in_pieces_is_decoded_from_where_it_got_to() {
        let buf = chunked(b"3\r\nabc\r\n2;x\r\nde\r\n1\r\nf\r\n0\r\n\r\nGET");
        let mut state = Chunked::default();
        let mut decoded_at = Vec::new();
        for cut in 0..buf.len() - 3 {
            assert_eq!(
                super::parse(&buf[..cut], MAX_BODY, &mut state),
                Parsed::Partial
            );
            decoded_at.push(state.data.len());
        }
        // Each chunk is decoded once, when its last byte is in.
        assert!(decoded_at.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(decoded_at.last(), Some(&6));
        match super::parse(&buf, MAX_BODY, &mut state) {
            Parsed::Complete { request, len } => {
                assert_eq!((request.body, len), (&b"abcdef"[..], buf.len() - 3));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_chunked_framing_is_400_and_too_much_413() {
        let cases: &[(&[u8], Status)] = &[
            (b"x\r\nabc\r\n0\r\n\r\n", Status::BadRequest),
            (b"-3\r\nabc\r\n0\r\n\r\n", Status::BadRequest),
            (b" 3\r\nabc\r\n0\r\n\r\n", Status::BadRequest),
            (b"3x\r\nabc\r\n0\r\n\r\n", Status::BadRequest),
            (b"3\nabc\r\n0\r\n\r\n", Status::BadRequest),
            (b"3\r\nabcd\r\n0\r\n\r\n", Status::BadRequest),
            (b"3\r\nabc\r\n0\r\n\n", Status::BadRequest),
            (b"fffffffffffffffffffff\r\n", Status::BadRequest),
            (b"10001\r\n", Status::PayloadTooLarge),
            (b"8000\r\n", Status::Ok),
        ];
        for &(encoding, status) in cases {
            let buf = chunked(encoding);
            let expected = match status {
                Status::Ok => Parsed::Partial,
                status => Parsed::Invalid(status),
            };
            assert_eq!(
                parse(&buf),
                expected,
                "{}",
                String::from_utf8_lossy(encoding)
            );
        }
        let mut long_extension = chunked(b"1;");
        long_extension.resize(long_extension.len() + MAX_CHUNK_LINE, b'x');
        assert_eq!(parse(&long_extension), Parsed::Invalid(Status::BadRequest));
        let mut long_trailers = chunked(b"0\r\nX: ");
        long_trailers.resize(long_trailers.len() + MAX_HEAD, b'x');
        assert_eq!(
            parse(&long_trailers),
            Parsed::Invalid(Status::HeaderTooLarge)
        );
        // Many small chunks add up past the limit too.
        let many = chunked(&b"1\r\na\r\n".repeat(MAX_BODY + 1));
        assert_eq!(parse(&many), Parsed::Invalid(Status::PayloadTooLarge));
    }

    #[test]
    fn transfer_codings_other_than_chunked_alone_are_400() {
        let cases: &[&[u8]] = &[
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n",
        ];
        assert_all_bad_requests(cases);
    }

    #[test]
    fn expect_100_continue_is_reported_until_the_body_begins() {
        let head =
            b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
        assert_eq!(parse(head), Parsed::ExpectsContinue);
        assert_eq!(parse(&[&head[..], b"2"].concat()), Parsed::Partial);
        assert_eq!(complete(&[&head[..], b"20"].concat()).0.body, b"20");
        let chunked_head = b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(parse(chunked_head), Parsed::ExpectsContinue);
        // Too large is answered at once, without inviting the body.
        let too_large = format!(
            "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert_eq!(
            parse(too_large.as_bytes()),
            Parsed::Invalid(Status::PayloadTooLarge)
        );
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
