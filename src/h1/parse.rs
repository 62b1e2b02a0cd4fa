use std::mem::MaybeUninit;

use super::message::{
    is_host, BodyFraming, ChunkError, ChunkedReader, FramingFields, Piece, MAX_HEAD, MAX_HEADERS,
};
use crate::http::{FieldLines, Fields, Method, Request, Status, Version};

/// The bytes a chunked body's framing may take beyond its data (size lines, extensions and
/// the CRLFs after the data), so that what a connection holds for a request stays within
/// the body limit plus a constant however the body is chunked: 1-byte chunks with 1 KiB
/// extensions would otherwise make the server hold a thousand times the body
/// (CVE-2023-39326's class). Past it, 413 and close. Trailers are held to [`MAX_HEAD`].
pub const MAX_CHUNK_FRAMING: usize = 16 * 1024;

/// The most bytes one request may take with a body of at most `max_body`: its head, its
/// body with the chunked framing's overhead, and trailers.
pub fn longest_request(max_body: usize) -> usize {
    MAX_HEAD + max_body + MAX_CHUNK_FRAMING + MAX_HEAD
}

/// What `parse` found. `Complete` is the large variant (a `Request`, 200 bytes) and the
/// one returned on every request served, written in place by the call: boxing it would
/// cost an allocation per request to save the stack of the rare others.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// A whole request, body included, was `len` bytes at the front of the buffer; the
    /// connection stays open after its answer if `keep_alive`.
    Complete {
        request: Request<'a>,
        len: usize,
        keep_alive: bool,
    },
    /// More bytes are needed.
    Partial,
    /// More bytes are needed: the head is in, the body has not begun, and the client waits
    /// for `100 Continue` before it sends it (`Expect: 100-continue`).
    ExpectsContinue,
    /// The head is in and announces a chunked body, which begins `body_at` bytes into the
    /// buffer: decode it in place with [`Chunked::decode`], then parse again.
    ChunkedBody { body_at: usize },
    /// The request cannot be served: answer with this status and close.
    Invalid(Status),
}

/// How far the chunked body of the request at the front of the input is decoded. The data
/// of each chunk is moved, in the input itself, down to the end of the data before it, so
/// that the body lies whole at the front of its place once the last chunk is in: no copy
/// elsewhere, no allocation. Kept from one read to the next while the body is incomplete,
/// so that a body arriving a chunk at a time is decoded once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Chunked {
    /// The body's bytes decoded so far, at the front of its place.
    decoded: u32,
    /// The bytes of its encoding taken so far (every complete chunk).
    encoded: u32,
    /// The last chunk and the trailers are in: `encoded` is the whole encoding.
    done: bool,
}

impl Chunked {
    /// Decodes in `body`, the bytes of the input from where the chunked body begins, as
    /// much as has arrived (RFC 9112, 7.1, read by `message::ChunkedReader`): `Ok(true)`
    /// once the last chunk and the trailers are in, `Ok(false)` while more is needed.
    /// Extensions are skipped, trailer fields checked and dropped.
    pub fn decode(&mut self, body: &mut [u8], max_body: usize) -> Result<bool, Status> {
        // A chunk is moved once it is all in, so the reader takes up again at the size line
        // after the last whole chunk (the trailers are read again until they end).
        let mut reader = ChunkedReader::default();
        let mut at = self.encoded as usize;
        let mut decoded = self.decoded as usize;
        loop {
            let piece = reader.next(&body[at..]).map_err(|error| match error {
                ChunkError::TrailersTooLarge => Status::HeaderTooLarge,
                _ => Status::BadRequest,
            })?;
            match piece {
                None => return Ok(false),
                Some(Piece::Size { size, len }) => {
                    at += len;
                    if size > max_body - decoded || at - decoded > MAX_CHUNK_FRAMING {
                        return Err(Status::PayloadTooLarge);
                    }
                    // Within the body limit, so `size + 2` does not overflow.
                    if size > 0 && body.len() - at < size + 2 {
                        return Ok(false);
                    }
                }
                Some(Piece::Data(len)) => {
                    body.copy_within(at..at + len, decoded);
                    decoded += len;
                    at += len;
                }
                Some(Piece::DataEnd) => {
                    at += 2;
                    // Both fit in u32: the input holds at most a head, the body limit and
                    // the framing limit, and the body limit is checked to be far below
                    // 4 GiB.
                    (self.decoded, self.encoded) = (decoded as u32, at as u32);
                }
                Some(Piece::Trailer(len)) => at += len,
                Some(Piece::End) => {
                    (self.encoded, self.done) = ((at + 2) as u32, true);
                    return Ok(true);
                }
            }
        }
    }
}

/// Parses the request at the front of `buf`. A body longer than `max_body` is refused with
/// 413. A `Content-Length` body is handed out where it lies in `buf`; a chunked one once
/// `chunked`, which must be the one given for the same request before or a new one, has
/// decoded it ([`Parsed::ChunkedBody`]).
pub fn parse<'a>(buf: &'a [u8], max_body: usize, chunked: &Chunked) -> Parsed<'a> {
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
    let Ok((absolute, origin_target)) = absolute_form(target) else {
        return Parsed::Invalid(Status::BadRequest);
    };

    let mut framing = FramingFields::default();
    let mut hosts = 0;
    let mut authority: &[u8] = b"";
    let mut expects_continue = false;
    let mut fields = Fields::default();
    for header in req.headers.iter() {
        let name = header.name;
        match framing.read(name, header.value) {
            Ok(true) => {}
            Err(_) => return Parsed::Invalid(Status::BadRequest),
            Ok(false) if name.eq_ignore_ascii_case("host") => {
                authority = header.value.trim_ascii();
                if !is_host(authority) {
                    return Parsed::Invalid(Status::BadRequest);
                }
                hosts += 1;
            }
            Ok(false) if name.eq_ignore_ascii_case("expect") => {
                expects_continue = header
                    .value
                    .trim_ascii()
                    .eq_ignore_ascii_case(b"100-continue");
            }
            Ok(false) => fields.read(name.as_bytes(), header.value, |value| value),
        }
    }
    fields.upgrade.connection_upgrade = framing.upgrade;
    let keep_alive = framing.keep_alive(http10);
    let length = match framing.body(http10) {
        Ok(BodyFraming::Unframed) => Some(0),
        Ok(BodyFraming::Length(length)) => Some(length),
        Ok(BodyFraming::Chunked) => None,
        Err(_) => return Parsed::Invalid(Status::BadRequest),
    };
    // HTTP/1.1 needs exactly one Host line; HTTP/1.0 at most one (RFC 9112, 3.2). An
    // absolute-form target's authority stands for it (3.2.2).
    if hosts > 1 || (hosts == 0 && !http10) {
        return Parsed::Invalid(Status::BadRequest);
    }
    if let Some(target_authority) = absolute {
        authority = target_authority;
    }
    let arrived = &buf[head_len..];
    let (body, len) = match length {
        Some(length) if length > max_body => return Parsed::Invalid(Status::PayloadTooLarge),
        Some(length) if arrived.len() < length => {
            return match expects_continue && arrived.is_empty() && !http10 {
                true => Parsed::ExpectsContinue,
                false => Parsed::Partial,
            }
        }
        Some(length) => (&arrived[..length], head_len + length),
        None if chunked.done => (
            &arrived[..chunked.decoded as usize],
            head_len + chunked.encoded as usize,
        ),
        None if expects_continue && arrived.is_empty() => return Parsed::ExpectsContinue,
        None => return Parsed::ChunkedBody { body_at: head_len },
    };

    let lines = FieldLines::new(field_lines(buf, target, head_len), 0);
    let target = origin_target;
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    Parsed::Complete {
        request: Request {
            method: Method::from_bytes(method.as_bytes()),
            method_bytes: method.as_bytes(),
            version: match http10 {
                true => Version::Http10,
                false => Version::Http11,
            },
            path,
            target,
            authority,
            fields,
            field_lines: lines,
            body,
        },
        len,
        keep_alive,
    }
}

/// A target in the absolute-form (`http://host/path?query`, RFC 9112 3.2.2), which a
/// server must accept though clients send it to proxies only: its authority, and the
/// origin-form target it stands for (`/` for an empty path). Any other target as it is.
/// An absolute-form whose authority is not a host, or that has a query but no path (its
/// origin-form, `/?query`, lies nowhere in the request), is refused.
fn absolute_form(target: &str) -> Result<(Option<&[u8]>, &str), ()> {
    if target.starts_with('/') {
        return Ok((None, target));
    }
    let Some((scheme, rest)) = target.split_once("://") else {
        return Ok((None, target));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Ok((None, target));
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, origin) = rest.split_at(authority_end);
    if authority.is_empty() || !is_host(authority.as_bytes()) || origin.starts_with('?') {
        return Err(());
    }
    let origin = if origin.is_empty() { "/" } else { origin };
    Ok((Some(authority.as_bytes()), origin))
}

/// The field lines of the head that ends `head_len` bytes into `buf`, whose request line
/// holds `target`: from the line after the request line to the empty line, not included.
/// httparse checked each (a token, a colon, a value without CR, LF or NUL; no obs-fold);
/// a line may end in a bare LF, which [`FieldLines`] reads as it reads CRLF.
fn field_lines<'a>(buf: &'a [u8], target: &str, head_len: usize) -> &'a [u8] {
    // The target lies in the request line (httparse skipped any empty line before it), so
    // the first LF after it ends that line.
    let target_end = target.as_ptr() as usize - buf.as_ptr() as usize + target.len();
    let head = &buf[..head_len];
    let start = match head[target_end..].iter().position(|&b| b == b'\n') {
        Some(at) => target_end + at + 1,
        None => head_len,
    };
    let end = match head.ends_with(b"\r\n") {
        true => head_len - 2,
        false => head_len - 1,
    };
    &head[start..end.max(start)]
}

#[cfg(test)]
mod tests {
    use super::super::message::MAX_CHUNK_LINE;
    use super::*;
    use crate::http::MAX_BODY;

    /// `parse` with the default body limit, from scratch, as a connection does it: a
    /// chunked body decoded in place (in a copy of `buf`), then parsed again.
    fn parse(buf: &[u8]) -> Parsed<'static> {
        parse_within(buf, MAX_BODY)
    }

    fn parse_within(buf: &[u8], max_body: usize) -> Parsed<'static> {
        let mut owned = buf.to_vec();
        let mut chunked = Chunked::default();
        if let Parsed::ChunkedBody { body_at } = super::parse(&owned, max_body, &chunked) {
            match chunked.decode(&mut owned[body_at..], max_body) {
                Err(status) => return Parsed::Invalid(status),
                Ok(false) => return Parsed::Partial,
                Ok(true) => {}
            }
        }
        super::parse(owned.leak(), max_body, &chunked)
    }

    const WRK_REQUEST: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\nAccept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7\r\nConnection: keep-alive\r\n\r\n";

    fn complete(buf: &[u8]) -> (Request<'_>, usize) {
        match parse(buf) {
            Parsed::Complete { request, len, .. } => (request, len),
            other => panic!("expected a complete request, got {other:?}"),
        }
    }

    /// Whether the connection stays open after the request at the front of `buf`.
    fn keeps_alive(buf: &[u8]) -> bool {
        match parse(buf) {
            Parsed::Complete { keep_alive, .. } => keep_alive,
            other => panic!("expected a complete request, got {other:?}"),
        }
    }

    #[test]
    fn a_request_carries_what_a_proxy_forwards() {
        let raw = b"\r\nPATCH /items/7?x=1 HTTP/1.1\r\nHost: example.com:8080 \r\n\
            Cookie: a=1\r\nX-Empty:\r\nContent-Length: 2\r\n\r\n{}";
        let (request, len) = complete(raw);
        assert_eq!(len, raw.len());
        assert_eq!(request.method, Method::Other);
        assert_eq!(request.method_bytes, b"PATCH");
        assert_eq!(request.target, "/items/7?x=1");
        assert_eq!((request.path, request.query()), ("/items/7", "x=1"));
        assert_eq!(request.authority, b"example.com:8080");
        let fields: Vec<_> = request.field_lines.iter().collect();
        assert_eq!(
            fields,
            [
                (&b"Host"[..], &b"example.com:8080"[..]),
                (b"Cookie", b"a=1"),
                (b"X-Empty", b""),
                (b"Content-Length", b"2"),
            ]
        );
        // Lines ending in a bare LF, and no field at all (HTTP/1.0: no authority).
        let (request, _) = complete(b"GET / HTTP/1.1\nHost: a\nX-A: b\n\n");
        assert!(request
            .field_lines
            .iter()
            .eq([(&b"Host"[..], &b"a"[..]), (b"X-A", b"b")]));
        let (request, _) = complete(b"GET /?q HTTP/1.0\r\n\r\n");
        assert!(request.field_lines.is_empty());
        assert_eq!((request.authority, request.target), (&b""[..], "/?q"));
        assert_eq!(request.query(), "q");
    }

    #[test]
    fn an_absolute_form_target_is_its_path_and_its_authority_stands_for_hosts() {
        let (request, _) =
            complete(b"GET HTTP://Example.com:8080/items/7?x=1 HTTP/1.1\r\nHost: other\r\n\r\n");
        assert_eq!((request.target, request.path), ("/items/7?x=1", "/items/7"));
        assert_eq!(request.authority, b"Example.com:8080");
        // The fields as they came.
        assert!(request
            .field_lines
            .iter()
            .eq([(&b"Host"[..], &b"other"[..])]));
        let (request, _) = complete(b"OPTIONS https://[::1] HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!((request.target, request.authority), ("/", &b"[::1]"[..]));
        // Host is still needed; a userinfo, no authority, or a query with no path: 400.
        for head in [
            &b"GET http://a/ HTTP/1.1\r\n\r\n"[..],
            b"GET http://user@a/ HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n",
            b"GET http://a?x HTTP/1.1\r\nHost: a\r\n\r\n",
        ] {
            assert_eq!(parse(head), Parsed::Invalid(Status::BadRequest), "{head:?}");
        }
    }

    #[test]
    fn parses_a_load_generator_request() {
        let (request, len) = complete(WRK_REQUEST);
        assert_eq!(len, WRK_REQUEST.len());
        assert_eq!(request.method, Method::Get);
        assert_eq!(request.path, "/plaintext");
        assert_eq!(request.query(), "");
        assert_eq!(request.version, Version::Http11);
        assert!(keeps_alive(WRK_REQUEST));
    }

    #[test]
    fn splits_the_query_string() {
        let (request, _) = complete(b"GET /queries?queries=20&x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(request.path, "/queries");
        assert_eq!(request.query(), "queries=20&x=1");
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
        assert_eq!(request.version, Version::Http10);
        assert!(!keeps_alive(b"GET /json HTTP/1.0\r\n\r\n"));
        assert!(keeps_alive(
            b"GET /json HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"
        ));
    }

    #[test]
    fn connection_close_is_honoured_among_other_tokens() {
        assert!(!keeps_alive(
            b"GET /json HTTP/1.1\r\nHost: a\r\nConnection: TE, close\r\n\r\n"
        ));
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
        let Parsed::Complete { request, len, .. } =
            super::parse(buf, MAX_BODY, &Chunked::default())
        else {
            panic!("a complete request");
        };
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
        let whole = chunked(b"3\r\nabc\r\n2;x\r\nde\r\n1\r\nf\r\n0\r\n\r\nGET");
        let body_at = CHUNKED_HEAD.len();
        // The input as a connection holds it: what has arrived, decoded in place as it goes.
        let mut input = Vec::new();
        let mut state = Chunked::default();
        let mut decoded_at = Vec::new();
        for &byte in &whole[..whole.len() - 3] {
            input.push(byte);
            match super::parse(&input, MAX_BODY, &state) {
                Parsed::Partial => continue,
                Parsed::ChunkedBody { body_at: at } => assert_eq!(at, body_at),
                other => panic!("{other:?}"),
            }
            let done = state.decode(&mut input[body_at..], MAX_BODY).unwrap();
            assert_eq!(done, input.len() == whole.len() - 3);
            decoded_at.push(state.decoded);
        }
        // Each chunk is decoded once, when its last byte is in, and moved into place.
        assert!(decoded_at.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(decoded_at.last(), Some(&6));
        input.extend_from_slice(b"GET");
        match super::parse(&input, MAX_BODY, &state) {
            Parsed::Complete { request, len, .. } => {
                assert_eq!((request.body, len), (&b"abcdef"[..], whole.len() - 3));
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
            (b"100001\r\n", Status::PayloadTooLarge),
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
    fn chunk_lines_are_read_as_the_grammar_says() {
        // Blanks only before a `;`, never trailing; no CR but the line's end.
        let bad: &[&[u8]] = &[
            b"3 \t\r\nabc\r\n0\r\n\r\n",
            b"3\r\r\nabc\r\n0\r\n\r\n",
            b"3\r;x\r\nabc\r\n0\r\n\r\n",
            b"3;\r\nabc\r\n0\r\n\r\n",
            b"3;x=\r\nabc\r\n0\r\n\r\n",
            b"3;x \r\nabc\r\n0\r\n\r\n",
            b"3;x=\"a\r\nabc\r\n0\r\n\r\n",
            b"3;x=a b\r\nabc\r\n0\r\n\r\n",
            b"3;x=\"\x01\"\r\nabc\r\n0\r\n\r\n",
            b"3\r\nabc\r\n0\r\nno colon\r\n\r\n",
            b"3\r\nabc\r\n0\r\n: no name\r\n\r\n",
            b"3\r\nabc\r\n0 \r\n\r\n",
        ];
        for encoding in bad {
            let buf = chunked(encoding);
            let parsed = parse(&buf);
            assert_eq!(
                parsed,
                Parsed::Invalid(Status::BadRequest),
                "{}",
                String::from_utf8_lossy(encoding)
            );
        }
        let good: &[&[u8]] = &[
            b"3 ;x\r\nabc\r\n0\r\n\r\n",
            b"3\t; x = y ;z\r\nabc\r\n0\r\n\r\n",
            b"3;x=\"a \\\" ;b\"\r\nabc\r\n0\r\n\r\n",
            b"3;x=\"\"\r\nabc\r\n0;y\r\nT:\r\nU: \tv\r\n\r\n",
        ];
        for encoding in good {
            assert_eq!(
                complete(&chunked(encoding)).0.body,
                b"abc",
                "{}",
                String::from_utf8_lossy(encoding)
            );
        }
    }

    #[test]
    fn chunk_framing_beyond_its_limit_is_413_however_small_the_body() {
        // 1-byte chunks with 1,000-byte extensions: 30 bytes of body in 30 KB.
        let mut extension = b";x=".to_vec();
        extension.resize(1000, b'e');
        let one = [&b"1"[..], &extension, b"\r\na\r\n"].concat();
        let buf = chunked(&one.repeat(30));
        assert_eq!(parse(&buf), Parsed::Invalid(Status::PayloadTooLarge));
        // Refused as soon as the framing passes the limit, not when the body ends.
        let cut = CHUNKED_HEAD.len() + MAX_CHUNK_FRAMING + one.len();
        assert_eq!(parse(&buf[..cut]), Parsed::Invalid(Status::PayloadTooLarge));
        // A body of the largest size in 1 KiB chunks is well within it.
        let kib = [&b"400;n=v\r\n"[..], &[b'k'; 1024], b"\r\n"].concat();
        let whole = chunked(&[&kib.repeat(MAX_BODY / 1024)[..], b"0\r\n\r\n"].concat());
        assert_eq!(complete(&whole).0.body.len(), MAX_BODY);
    }

    #[test]
    fn one_host_line_is_needed_and_it_must_be_a_host() {
        assert_all_bad_requests(&[
            b"GET / HTTP/1.1\r\nHost: p\r\nHost: q\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: p\r\nhost: p\r\n\r\n",
            b"GET / HTTP/1.0\r\nHost: p\r\nHost: q\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: user@a\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a:80x\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a%g0\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\"b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a{b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\\b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\xc3\xa9\r\n\r\n",
        ]);
        for host in [
            "a",
            "localhost:8080",
            "127.0.0.1",
            "[::1]:80",
            "",
            "x%41.y",
            "a:",
            // Every unreserved and sub-delim byte (RFC 3986, 2.2 and 2.3).
            "Az09-._~!$&'()*+,;=",
        ] {
            let buf = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
            complete(buf.as_bytes());
        }
    }

    #[test]
    fn connection_upgrade_is_read_among_the_connections_tokens() {
        let asks = |connection: &str| {
            let buf = format!("GET /ws HTTP/1.1\r\nHost: a\r\n{connection}\r\n\r\n");
            complete(buf.as_bytes()).0.fields.upgrade.connection_upgrade
        };
        assert!(asks("Connection: keep-alive, Upgrade"));
        assert!(asks("connection: close\r\nCONNECTION: upgrade"));
        assert!(!asks("Connection: keep-alive"));
        assert!(!asks("Upgrade: websocket"));
    }

    #[test]
    fn close_wins_over_keep_alive_wherever_each_stands() {
        for connection in [
            "close, keep-alive",
            "keep-alive, close",
            "keep-alive\r\nConnection: close",
            "close\r\nConnection: keep-alive",
        ] {
            for version in ["1.1", "1.0"] {
                let buf =
                    format!("GET / HTTP/{version}\r\nHost: a\r\nConnection: {connection}\r\n\r\n");
                assert!(!keeps_alive(buf.as_bytes()), "{buf}");
            }
        }
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

    #[test]
    fn accept_encoding_is_read_as_one_list_however_many_lines_it_takes() {
        use crate::http::Coding::{Br, Gzip};
        let tried = |raw: &[u8]| {
            complete(raw)
                .0
                .fields
                .accept_encoding
                .preferred()
                .collect::<Vec<_>>()
        };
        assert_eq!(tried(WRK_REQUEST), []);
        assert_eq!(
            tried(b"GET /static/a.css HTTP/1.1\r\nHost: a\r\naccept-ENCODING:  br;q=1, gzip;q=0.8 \r\n\r\n"),
            [Br, Gzip]
        );
        assert_eq!(
            tried(b"GET / HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip;q=0.9\r\nAccept: */*\r\nAccept-Encoding: br;q=0.5\r\n\r\n"),
            [Gzip, Br]
        );
    }
}
