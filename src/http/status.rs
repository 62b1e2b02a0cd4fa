//! The statuses gnosis answers with: the status line and a short reason for error bodies.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    PayloadTooLarge,
    UnsupportedMediaType,
    UpgradeRequired,
    UriTooLong,
    HeaderTooLarge,
    InternalServerError,
    ServiceUnavailable,
    GatewayTimeout,
}

impl Status {
    /// The status line, with the headers that go with the status.
    pub(super) fn line(self) -> &'static [u8] {
        match self {
            Status::Ok => b"HTTP/1.1 200 OK\r\n",
            Status::BadRequest => b"HTTP/1.1 400 Bad Request\r\n",
            Status::NotFound => b"HTTP/1.1 404 Not Found\r\n",
            Status::MethodNotAllowed => b"HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\n",
            Status::PayloadTooLarge => b"HTTP/1.1 413 Content Too Large\r\n",
            Status::UnsupportedMediaType => b"HTTP/1.1 415 Unsupported Media Type\r\n",
            // Only the WebSocket endpoint answers it, naming what it upgrades to.
            Status::UpgradeRequired => {
                b"HTTP/1.1 426 Upgrade Required\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
            }
            Status::UriTooLong => b"HTTP/1.1 414 URI Too Long\r\n",
            Status::HeaderTooLarge => b"HTTP/1.1 431 Request Header Fields Too Large\r\n",
            Status::InternalServerError => b"HTTP/1.1 500 Internal Server Error\r\n",
            Status::ServiceUnavailable => b"HTTP/1.1 503 Service Unavailable\r\n",
            Status::GatewayTimeout => b"HTTP/1.1 504 Gateway Timeout\r\n",
        }
    }

    /// The status code.
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::PayloadTooLarge => 413,
            Status::UnsupportedMediaType => 415,
            Status::UpgradeRequired => 426,
            Status::UriTooLong => 414,
            Status::HeaderTooLarge => 431,
            Status::InternalServerError => 500,
            Status::ServiceUnavailable => 503,
            Status::GatewayTimeout => 504,
        }
    }

    /// A short plain-text body for error answers.
    pub fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::BadRequest => "Bad Request",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::PayloadTooLarge => "Content Too Large",
            Status::UnsupportedMediaType => "Unsupported Media Type",
            Status::UpgradeRequired => "Upgrade Required",
            Status::UriTooLong => "URI Too Long",
            Status::HeaderTooLarge => "Request Header Fields Too Large",
            Status::InternalServerError => "Internal Server Error",
            Status::ServiceUnavailable => "Service Unavailable",
            Status::GatewayTimeout => "Gateway Timeout",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Status;

    #[test]
    fn each_status_line_carries_its_code() {
        let all = [
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
            Status::ServiceUnavailable,
            Status::GatewayTimeout,
        ];
        for status in all {
            let line = String::from_utf8_lossy(status.line());
            let expected = format!("HTTP/1.1 {} {}\r\n", status.code(), status.reason());
            assert!(line.starts_with(&expected), "{line}");
        }
    }
}
