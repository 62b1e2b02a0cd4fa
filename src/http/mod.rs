//! HTTP/1.1: request parsing, response writing and the cached `Date` header.
//!
//! Nothing here does I/O: the servers feed bytes in and take bytes out.

mod date;
mod request;
mod response;

pub use date::HttpDate;
pub use request::{parse, Method, Parsed, Request, MAX_BODY, MAX_HEAD};
pub use response::{ContentType, Response, Status};
