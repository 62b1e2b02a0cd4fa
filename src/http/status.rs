//! The statuses gnosis answers with: their codes, and a short reason for error bodies.

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
    ServiceUnavailable,
    GatewayTimeout,
}

impl Status {
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
            Status::ServiceUnavailable => 503,
            Status::GatewayTimeout => 504,
        }
    }

    /// A short plain-text body for error answers.
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
            Status::ServiceUnavailable => "Service Unavailable",
            Status::GatewayTimeout => "Gateway Timeout",
        }
    }
}
