//! The statuses gnosis answers with: their codes, and a short reason for error bodies and
//! HTTP/1.1's status line; and any other code an upstream answered, which a proxy passes on.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    SwitchingProtocols,
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
    BadGateway,
    ServiceUnavailable,
    GatewayTimeout,
    /// A code not named above (an upstream's `201`, `304`, `429`...), made by
    /// [`Status::from_code`], which gives the named variant for a code that has one.
    Other(u16),
}

impl Status {
    /// The status of `code`: its named variant if it has one, else [`Status::Other`]. The
    /// caller checks the range (an upstream's code is three digits, RFC 9110 15).
    pub fn from_code(code: u16) -> Status {
        match code {
            101 => Status::SwitchingProtocols,
            200 => Status::Ok,
            400 => Status::BadRequest,
            404 => Status::NotFound,
            405 => Status::MethodNotAllowed,
            413 => Status::PayloadTooLarge,
            415 => Status::UnsupportedMediaType,
            426 => Status::UpgradeRequired,
            414 => Status::UriTooLong,
            431 => Status::HeaderTooLarge,
            500 => Status::InternalServerError,
            502 => Status::BadGateway,
            503 => Status::ServiceUnavailable,
            504 => Status::GatewayTimeout,
            other => Status::Other(other),
        }
    }

    /// The status code.
    pub fn code(self) -> u16 {
        match self {
            Status::SwitchingProtocols => 101,
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
            Status::BadGateway => 502,
            Status::ServiceUnavailable => 503,
            Status::GatewayTimeout => 504,
            Status::Other(code) => code,
        }
    }

    /// A short plain-text reason: RFC 9110's for the codes it names, else empty (a
    /// client ignores HTTP/1.1's reason phrase, which may be empty: RFC 9112, 4).
    pub fn reason(self) -> &'static str {
        match self {
            Status::SwitchingProtocols => "Switching Protocols",
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
            Status::BadGateway => "Bad Gateway",
            Status::ServiceUnavailable => "Service Unavailable",
            Status::GatewayTimeout => "Gateway Timeout",
            Status::Other(code) => other_reason(code),
        }
    }
}

/// RFC 9110's reason phrases (section 15) of the codes not named by [`Status`].
fn other_reason(code: u16) -> &'static str {
    match code {
        100 => "Continue",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        418 => "I'm a teapot",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        451 => "Unavailable For Legal Reasons",
        501 => "Not Implemented",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_reads_back_and_named_codes_get_their_variant() {
        for code in 100..=599 {
            let status = Status::from_code(code);
            assert_eq!(status.code(), code);
            if let Status::Other(_) = status {
                continue;
            }
            assert!(!status.reason().is_empty(), "{code}");
        }
        assert_eq!(Status::from_code(200), Status::Ok);
        assert_eq!(Status::from_code(502), Status::BadGateway);
        assert_eq!(Status::from_code(201), Status::Other(201));
        assert_eq!(Status::from_code(418).reason(), "I'm a teapot");
        assert_eq!(Status::from_code(299).reason(), "");
    }
}
