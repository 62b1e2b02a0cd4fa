//! HTTP/1.1's client side, no I/O: what a reverse proxy needs to forward requests to an
//! upstream server over keep-alive connections, pipelined. `request.rs` writes a client's
//! request as the upstream is to receive it ([`Forward`]: hop-by-hop fields out,
//! X-Forwarded-For, X-Forwarded-Proto and Via in, nothing injectable); `response.rs` reads
//! the upstream's responses as their bytes arrive ([`ResponseReader`]: a head, then its
//! body in pieces, then its end, in bounded memory, refusing any framing two parsers could
//! read differently). The connections, their pool and the answers to the proxy's own
//! clients are the caller's.

mod request;
mod response;
#[cfg(test)]
mod tests;

pub use request::{Forward, WriteError};
pub use response::{Awaited, BodyLength, Error, Event, Head, Read, ResponseReader};

use crate::http::connection_specific;

/// Hop-by-hop fields (RFC 9110, 7.6.1), which a proxy does not pass on: the
/// connection-specific ones HTTP/2 and HTTP/3 forbid, and TE and Trailer. Fields named in
/// a Connection field are hop-by-hop too; the caller looks there.
fn is_hop_by_hop(name: &[u8]) -> bool {
    // The longest of them, lowercased on the stack.
    let mut lower = [0; 17];
    let Some(lower) = lower.get_mut(..name.len()) else {
        return false;
    };
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    connection_specific(lower) || lower == b"te" || lower == b"trailer"
}
