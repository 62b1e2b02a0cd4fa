use super::request::Method;
use super::{Coding, HttpDate, Request, Status};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentType {
    Plain,
    Json,
    Html,
    /// Bytes as they came (`/echo`), and a static file of a type not named here.
    OctetStream,
    // Static files (`/static/{name}`), by their extension.
    Css,
    JavaScript,
    Svg,
    Webp,
    Png,
    Jpeg,
    Gif,
    Avif,
    Icon,
    Woff2,
    Woff,
    Xml,
    Wasm,
    Gzip,
    /// gRPC's messages (over HTTP/2 only).
    Grpc,
}

impl ContentType {
    /// The `Content-Type` value.
    pub fn value(self) -> &'static [u8] {
        match self {
            ContentType::Plain => b"text/plain",
            ContentType::Json => b"application/json",
            ContentType::Html => b"text/html; charset=utf-8",
            ContentType::OctetStream => b"application/octet-stream",
            ContentType::Css => b"text/css",
            // HttpArena's validator wants this name (RFC 9239 prefers text/javascript).
            ContentType::JavaScript => b"application/javascript",
            ContentType::Svg => b"image/svg+xml",
            ContentType::Webp => b"image/webp",
            ContentType::Png => b"image/png",
            ContentType::Jpeg => b"image/jpeg",
            ContentType::Gif => b"image/gif",
            ContentType::Avif => b"image/avif",
            ContentType::Icon => b"image/x-icon",
            ContentType::Woff2 => b"font/woff2",
            ContentType::Woff => b"font/woff",
            ContentType::Xml => b"application/xml",
            ContentType::Wasm => b"application/wasm",
            ContentType::Gzip => b"application/gzip",
            ContentType::Grpc => b"application/grpc",
        }
    }
}

/// What an answer says of its content coding (a static file's, negotiated by
/// `Accept-Encoding`): its `Content-Encoding`, and whether it carries `Vary:
/// Accept-Encoding`. Neither, for every other answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Encoding {
    pub coding: Option<Coding>,
    pub vary: bool,
}

/// [`Encoding::vary`] in its byte.
const VARY: u8 = 0x80;

impl Encoding {
    /// In one byte, for a [`StreamAnswer`]: the coding in the low bits, [`VARY`].
    fn byte(self) -> u8 {
        let coding = match self.coding {
            None => 0,
            Some(Coding::Br) => 1,
            Some(Coding::Gzip) => 2,
        };
        coding | if self.vary { VARY } else { 0 }
    }

    fn from_byte(byte: u8) -> Option<Encoding> {
        let coding = match byte & !VARY {
            0 => None,
            1 => Some(Coding::Br),
            2 => Some(Coding::Gzip),
            _ => return None,
        };
        Some(Encoding {
            coding,
            vary: byte & VARY != 0,
        })
    }
}

/// How to answer one request: what the response must say about the connection, and
/// whether the body is sent; or that it answers an HTTP/2 stream. Small and `Copy`, so a
/// response that waits for the database can carry it along.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    keep_alive: bool,
    http10: bool,
    head_only: bool,
    /// The answer of an HTTP/2 stream: written as a [`StreamAnswer`], which the HTTP/2
    /// connection frames (HEAD, framing and the connection are its business).
    stream: bool,
}

/// An HTTP/2 stream's answer as [`Response::write`] (or [`StreamAnswer::write`], with
/// trailers) writes it: the status, the content type, its encoding and the trailers in a
/// few bytes, then
/// the body, so that the same application answers either protocol and the HTTP/2 side takes
/// the parts as they are, not from an HTTP/1.1 text. Trailers (gRPC's `grpc-status`) exist
/// only here: HTTP/1.1's answers have none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamAnswer<'a> {
    pub status: u16,
    pub content_type: &'a [u8],
    pub encoding: Encoding,
    pub trailers: Trailers<'a>,
    pub body: &'a [u8],
}

/// An answer's trailer fields as written: each name and value after its length (a byte).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trailers<'a>(&'a [u8]);

/// The most trailer fields an answer has (gRPC's `grpc-status` and `grpc-message`).
pub const MAX_TRAILERS: usize = 2;

impl<'a> Trailers<'a> {
    /// The fields, names in lowercase, in the order written.
    pub fn fields(self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
        let mut rest = self.0;
        std::iter::from_fn(move || {
            let name = take_short(&mut rest)?;
            let value = take_short(&mut rest)?;
            Some((name, value))
        })
    }
}

/// Takes a length byte and that many bytes from the front of `bytes`.
fn take_short<'a>(bytes: &mut &'a [u8]) -> Option<&'a [u8]> {
    let (&len, rest) = bytes.split_first()?;
    let (taken, rest) = rest.split_at_checked(len as usize)?;
    *bytes = rest;
    Some(taken)
}

/// Appends `bytes` after its length (a byte); the names and values written here are the
/// app's own and short: longer ones are cut at 255 bytes.
fn put_short(out: &mut Vec<u8>, bytes: &[u8]) {
    let bytes = &bytes[..bytes.len().min(255)];
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

impl StreamAnswer<'_> {
    /// Appends a whole answer with `trailers` (at most [`MAX_TRAILERS`], names in
    /// lowercase) for an HTTP/2 stream.
    pub fn write(
        out: &mut Vec<u8>,
        status: Status,
        content_type: ContentType,
        trailers: &[(&[u8], &[u8])],
        body: &[u8],
    ) {
        StreamAnswer::write_head(out, status, content_type, Encoding::default(), trailers);
        out.extend_from_slice(body);
    }

    /// Appends the answer's head: status (2 bytes), the content type's length (1 byte) and
    /// value, the encoding (1 byte), the trailers' length (2 bytes) and fields; the body
    /// follows.
    fn write_head(
        out: &mut Vec<u8>,
        status: Status,
        content_type: ContentType,
        encoding: Encoding,
        trailers: &[(&[u8], &[u8])],
    ) {
        out.extend_from_slice(&status.code().to_be_bytes());
        put_short(out, content_type.value());
        out.push(encoding.byte());
        let at = out.len();
        out.extend_from_slice(&[0, 0]);
        for (name, value) in &trailers[..trailers.len().min(MAX_TRAILERS)] {
            put_short(out, name);
            put_short(out, value);
        }
        let len = (out.len() - at - 2) as u16;
        out[at..at + 2].copy_from_slice(&len.to_be_bytes());
    }

    /// The answer written at the front of `bytes`, if it was.
    pub fn read(bytes: &[u8]) -> Option<StreamAnswer<'_>> {
        let (&[high, low], mut rest) = bytes.split_first_chunk::<2>()?;
        let content_type = take_short(&mut rest)?;
        let (&encoding, rest) = rest.split_first()?;
        let encoding = Encoding::from_byte(encoding)?;
        let (&[len_high, len_low], rest) = rest.split_first_chunk::<2>()?;
        let len = u16::from_be_bytes([len_high, len_low]) as usize;
        let (trailers, body) = rest.split_at_checked(len)?;
        Some(StreamAnswer {
            status: u16::from_be_bytes([high, low]),
            content_type,
            encoding,
            trailers: Trailers(trailers),
            body,
        })
    }
}

impl Response {
    pub fn to(request: &Request<'_>) -> Self {
        Response {
            keep_alive: request.keep_alive,
            http10: request.http10,
            head_only: request.method == Method::Head,
            stream: false,
        }
    }

    /// For a request that could not be parsed: the connection closes after it.
    pub fn closing() -> Self {
        Response {
            keep_alive: false,
            http10: false,
            head_only: false,
            stream: false,
        }
    }

    /// For a request of an HTTP/2 stream.
    pub fn stream() -> Self {
        Response {
            keep_alive: true,
            http10: false,
            head_only: false,
            stream: true,
        }
    }

    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// Appends a whole response to `out`: status line, headers, body; for an HTTP/2
    /// stream, a [`StreamAnswer`].
    pub fn write(
        &self,
        out: &mut Vec<u8>,
        date: &HttpDate,
        status: Status,
        content_type: ContentType,
        body: &[u8],
    ) {
        let encoding = Encoding::default();
        if self.write_head(out, date, status, content_type, encoding, body.len()) {
            out.extend_from_slice(body);
        }
    }

    /// Appends the status line and headers of a response whose body is `body_len` bytes
    /// (in `encoding`), and says whether the body goes out after them (not for HEAD): the
    /// caller then appends exactly `body_len` bytes, from wherever it reads them. For an
    /// HTTP/2 stream, the head of a [`StreamAnswer`], always followed by the body.
    pub fn write_head(
        &self,
        out: &mut Vec<u8>,
        date: &HttpDate,
        status: Status,
        content_type: ContentType,
        encoding: Encoding,
        body_len: usize,
    ) -> bool {
        if self.stream {
            StreamAnswer::write_head(out, status, content_type, encoding, &[]);
            return true;
        }
        out.extend_from_slice(status.line());
        out.extend_from_slice(b"Server: gnosis\r\nDate: ");
        out.extend_from_slice(date.as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(b"Content-Type: ");
        out.extend_from_slice(content_type.value());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(b"Content-Length: ");
        out.extend_from_slice(itoa::Buffer::new().format(body_len).as_bytes());
        if let Some(coding) = encoding.coding {
            out.extend_from_slice(b"\r\nContent-Encoding: ");
            out.extend_from_slice(coding.token());
        }
        if encoding.vary {
            out.extend_from_slice(b"\r\nVary: Accept-Encoding");
        }
        if !self.keep_alive {
            out.extend_from_slice(b"\r\nConnection: close");
        } else if self.http10 {
            out.extend_from_slice(b"\r\nConnection: keep-alive");
        }
        out.extend_from_slice(b"\r\n\r\n");
        !self.head_only
    }

    /// An error answer with its reason as a plain-text body.
    pub fn write_error(&self, out: &mut Vec<u8>, date: &HttpDate, status: Status) {
        self.write(
            out,
            date,
            status,
            ContentType::Plain,
            status.reason().as_bytes(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{parse, Parsed};

    fn response_to(raw: &[u8]) -> Response {
        match parse(raw, crate::http::MAX_BODY, &Default::default()) {
            Parsed::Complete { request, .. } => Response::to(&request),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn writes_every_required_header() {
        let date = HttpDate::new();
        let mut out = Vec::new();
        response_to(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").write(
            &mut out,
            &date,
            Status::Ok,
            ContentType::Json,
            b"{}",
        );
        let expected = format!(
            "HTTP/1.1 200 OK\r\nServer: gnosis\r\nDate: {}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}",
            std::str::from_utf8(date.as_bytes()).unwrap()
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
    }

    #[test]
    fn says_close_and_keep_alive_when_it_must() {
        let date = HttpDate::new();
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
            let mut out = Vec::new();
            response_to(raw).write(&mut out, &date, Status::Ok, ContentType::Plain, b"x");
            assert!(String::from_utf8(out).unwrap().contains(header), "{header}");
        }
    }

    #[test]
    fn head_gets_the_headers_without_the_body() {
        let date = HttpDate::new();
        let mut out = Vec::new();
        response_to(b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n").write(
            &mut out,
            &date,
            Status::Ok,
            ContentType::Plain,
            b"Hello, World!",
        );
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("Content-Length: 13\r\n"));
        assert!(text.ends_with("\r\n\r\n"));
    }

    #[test]
    fn a_stream_answer_is_read_as_written() {
        let date = HttpDate::new();
        let mut out = b"before".to_vec();
        Response::stream().write(&mut out, &date, Status::NotFound, ContentType::Json, b"{}");
        assert_eq!(
            StreamAnswer::read(&out[6..]),
            Some(StreamAnswer {
                status: 404,
                content_type: b"application/json",
                encoding: Encoding::default(),
                trailers: Trailers::default(),
                body: b"{}",
            })
        );
        assert_eq!(StreamAnswer::read(&[0, 200, 5, b'a']), None);
        assert_eq!(StreamAnswer::read(&[0, 200]), None);
        assert_eq!(
            StreamAnswer::read(&[0, 200, 1, b'a', 0, 0, 3, 1, b'x']),
            None
        );
        assert_eq!(StreamAnswer::read(&[0, 200, 1, b'a', 3, 0, 0]), None);
    }

    #[test]
    fn an_encoding_is_written_for_either_protocol() {
        let date = HttpDate::new();
        let request = b"GET /static/a.css HTTP/1.1\r\nHost: a\r\n\r\n";
        for coding in [None, Some(Coding::Br), Some(Coding::Gzip)] {
            for vary in [false, true] {
                let encoding = Encoding { coding, vary };
                let mut out = Vec::new();
                let response = response_to(request);
                assert!(response.write_head(
                    &mut out,
                    &date,
                    Status::Ok,
                    ContentType::Css,
                    encoding,
                    7
                ));
                let text = String::from_utf8(out).unwrap();
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
                assert!(text.ends_with("\r\n\r\n"), "{text}");

                let mut out = Vec::new();
                Response::stream().write_head(
                    &mut out,
                    &date,
                    Status::Ok,
                    ContentType::Css,
                    encoding,
                    2,
                );
                out.extend_from_slice(b"br");
                let answer = StreamAnswer::read(&out).unwrap();
                assert_eq!((answer.encoding, answer.body), (encoding, &b"br"[..]));
            }
        }
    }

    #[test]
    fn trailers_are_read_as_written_and_only_for_a_stream() {
        let mut out = Vec::new();
        let trailers: [(&[u8], &[u8]); 2] = [(b"grpc-status", b"13"), (b"grpc-message", b"bad")];
        StreamAnswer::write(&mut out, Status::Ok, ContentType::Grpc, &trailers, b"\0msg");
        let answer = StreamAnswer::read(&out).unwrap();
        assert_eq!(
            (answer.status, answer.content_type, answer.body),
            (200, &b"application/grpc"[..], &b"\0msg"[..])
        );
        assert!(answer.trailers.fields().eq(trailers));
    }

    #[test]
    fn method_not_allowed_names_the_allowed_methods() {
        let date = HttpDate::new();
        let mut out = Vec::new();
        Response::closing().write_error(&mut out, &date, Status::MethodNotAllowed);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\n"));
        assert!(text.ends_with("Connection: close\r\n\r\nMethod Not Allowed"));
    }
}
