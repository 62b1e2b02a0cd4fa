use super::request::Method;
use super::{HttpDate, Request, Status};

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
}

impl ContentType {
    fn header(self) -> &'static [u8] {
        match self {
            ContentType::Plain => b"Content-Type: text/plain\r\n",
            ContentType::Json => b"Content-Type: application/json\r\n",
            ContentType::Html => b"Content-Type: text/html; charset=utf-8\r\n",
            ContentType::OctetStream => b"Content-Type: application/octet-stream\r\n",
            ContentType::Css => b"Content-Type: text/css\r\n",
            // HttpArena's validator wants this name (RFC 9239 prefers text/javascript).
            ContentType::JavaScript => b"Content-Type: application/javascript\r\n",
            ContentType::Svg => b"Content-Type: image/svg+xml\r\n",
            ContentType::Webp => b"Content-Type: image/webp\r\n",
            ContentType::Png => b"Content-Type: image/png\r\n",
            ContentType::Jpeg => b"Content-Type: image/jpeg\r\n",
            ContentType::Gif => b"Content-Type: image/gif\r\n",
            ContentType::Avif => b"Content-Type: image/avif\r\n",
            ContentType::Icon => b"Content-Type: image/x-icon\r\n",
            ContentType::Woff2 => b"Content-Type: font/woff2\r\n",
            ContentType::Woff => b"Content-Type: font/woff\r\n",
            ContentType::Xml => b"Content-Type: application/xml\r\n",
            ContentType::Wasm => b"Content-Type: application/wasm\r\n",
            ContentType::Gzip => b"Content-Type: application/gzip\r\n",
        }
    }
}

/// How to answer one request: what the response must say about the connection, and
/// whether the body is sent. Small and `Copy`, so a response that waits for the database
/// can carry it along.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    keep_alive: bool,
    http10: bool,
    head_only: bool,
}

impl Response {
    pub fn to(request: &Request<'_>) -> Self {
        Response {
            keep_alive: request.keep_alive,
            http10: request.http10,
            head_only: request.method == Method::Head,
        }
    }

    /// For a request that could not be parsed: the connection closes after it.
    pub fn closing() -> Self {
        Response {
            keep_alive: false,
            http10: false,
            head_only: false,
        }
    }

    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// Appends a whole response to `out`: status line, headers, body.
    pub fn write(
        &self,
        out: &mut Vec<u8>,
        date: &HttpDate,
        status: Status,
        content_type: ContentType,
        body: &[u8],
    ) {
        if self.write_head(out, date, status, content_type, body.len()) {
            out.extend_from_slice(body);
        }
    }

    /// Appends the status line and headers of a response whose body is `body_len` bytes,
    /// and says whether the body goes out after them (not for HEAD): the caller then
    /// appends exactly `body_len` bytes, from wherever it reads them.
    pub fn write_head(
        &self,
        out: &mut Vec<u8>,
        date: &HttpDate,
        status: Status,
        content_type: ContentType,
        body_len: usize,
    ) -> bool {
        out.extend_from_slice(status.line());
        out.extend_from_slice(b"Server: gnosis\r\nDate: ");
        out.extend_from_slice(date.as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(content_type.header());
        out.extend_from_slice(b"Content-Length: ");
        out.extend_from_slice(itoa::Buffer::new().format(body_len).as_bytes());
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
    fn method_not_allowed_names_the_allowed_methods() {
        let date = HttpDate::new();
        let mut out = Vec::new();
        Response::closing().write_error(&mut out, &date, Status::MethodNotAllowed);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\n"));
        assert!(text.ends_with("Connection: close\r\n\r\nMethod Not Allowed"));
    }
}
