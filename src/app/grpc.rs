//! gRPC's unary `GetSum` (HttpArena's gRPC profiles) as bytes in, bytes out, for the
//! HTTP/2 layer to call: the request stream's whole body in, the reply's length-prefixed
//! message or a gRPC status out.
//!
//! ```text
//! service BenchmarkService { rpc GetSum (SumRequest) returns (SumReply); }
//! message SumRequest { int32 a = 1; int32 b = 2; }    message SumReply { int32 result = 1; }
//! ```
//!
//! The body is one length-prefixed message (gRPC over HTTP/2: a compressed flag byte, a
//! 4-byte big-endian length, the message). The message is read as protobuf reads it:
//! fields in any order, a repeated field's last value wins, unknown fields (and a known one
//! of another wire type) skipped by their wire type, groups included; `int32` varints of up
//! to 10 bytes (negative numbers are 10), truncated to 32 bits. The sum wraps, as `int32`
//! addition does in the languages of gRPC's own libraries.
//!
//! Errors, with the codes of gRPC's `doc/statuscodes.md`: a message that does not parse
//! (a truncated or overlong varint, wire type 6 or 7, field number 0, an unbalanced group, a
//! length past the end) or a prefix or message cut short: INTERNAL ("error parsing request
//! proto"); no message or more than one: UNIMPLEMENTED (request cardinality violation); a
//! compressed message: UNIMPLEMENTED if its `grpc-encoding` names a compression (none is
//! supported), INTERNAL if none or `identity` was declared (`PROTOCOL-HTTP2.md`: the flag
//! must then be 0; grpc-go answers INTERNAL too).

use crate::http::{Answer, ContentType, Fields, Status};

/// The request's `:path`.
pub const GET_SUM_PATH: &str = "/benchmark.BenchmarkService/GetSum";
/// How deep groups may nest in a skipped field (protobuf's default recursion limit).
const MAX_GROUP_DEPTH: usize = 100;
/// Field numbers run 1..=2^29-1.
const MAX_FIELD_NUMBER: u64 = (1 << 29) - 1;

/// The gRPC status codes answered here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    Unimplemented = 12,
    Internal = 13,
}

impl Code {
    /// The `grpc-status` value.
    fn value(self) -> &'static [u8] {
        match self {
            Code::Unimplemented => b"12",
            Code::Internal => b"13",
        }
    }
}

/// A call's failure: the `grpc-status` and `grpc-message` trailers. The messages are
/// printable ASCII without `%`, so valid `grpc-message` values as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrpcStatus {
    pub code: Code,
    pub message: &'static str,
}

impl GrpcStatus {
    fn internal(message: &'static str) -> GrpcStatus {
        GrpcStatus {
            code: Code::Internal,
            message,
        }
    }

    fn unimplemented(message: &'static str) -> GrpcStatus {
        GrpcStatus {
            code: Code::Unimplemented,
            message,
        }
    }
}

/// Answers a `GetSum` request of an HTTP/2 stream with the request's `fields` and `body`,
/// as gRPC over HTTP/2 says (`PROTOCOL-HTTP2.md`): 200 with `content-type:
/// application/grpc`, the reply's message and the trailer `grpc-status: 0`; or, for a call
/// that fails, no message and its `grpc-status` and `grpc-message`; a request whose
/// content-type is not gRPC's: 415. `message` holds the reply.
pub fn respond<'a>(fields: &Fields<&[u8]>, body: &[u8], message: &'a mut Vec<u8>) -> Answer<'a> {
    if !fields.content_type.is_some_and(is_grpc) {
        return Answer::error(Status::UnsupportedMediaType);
    }
    message.clear();
    match get_sum(fields.grpc_encoding, body, message) {
        Ok(()) => Answer::ok(ContentType::Grpc, message)
            .with_trailers([Some((b"grpc-status", b"0")), None]),
        Err(failure) => Answer::ok(ContentType::Grpc, b"").with_trailers([
            Some((b"grpc-status", failure.code.value())),
            Some((b"grpc-message", failure.message.as_bytes())),
        ]),
    }
}

/// `application/grpc`, alone or with a subtype (`+proto`) or parameters.
fn is_grpc(content_type: &[u8]) -> bool {
    content_type
        .strip_prefix(b"application/grpc")
        .is_some_and(|rest| matches!(rest.first(), None | Some(b'+' | b';')))
}

/// Answers one `GetSum` call: `body` is the request's whole body, `encoding` its
/// `grpc-encoding` header if it had one. Appends the reply's length-prefixed message
/// (`SumReply`) to `out`, or returns the status to end the call with (`out` untouched).
pub fn get_sum(encoding: Option<&[u8]>, body: &[u8], out: &mut Vec<u8>) -> Result<(), GrpcStatus> {
    let message = single_message(encoding, body)?;
    let (a, b) = sum_request(message).map_err(GrpcStatus::internal)?;
    let result = a.wrapping_add(b);
    let start = out.len();
    out.extend_from_slice(&[0; 5]);
    // proto3 leaves a field at its default (0) out.
    if result != 0 {
        // Field 1, a varint: an int32 sign-extended to 64 bits (a negative one is 10 bytes).
        out.push(1 << 3);
        write_varint(out, i64::from(result) as u64);
    }
    let len = (out.len() - start - 5) as u32;
    out[start + 1..start + 5].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// The one message of a unary request's body, uncompressed.
fn single_message<'a>(encoding: Option<&[u8]>, body: &'a [u8]) -> Result<&'a [u8], GrpcStatus> {
    if body.is_empty() {
        return Err(GrpcStatus::unimplemented("no request message"));
    }
    let Some((prefix, rest)) = body.split_first_chunk::<5>() else {
        return Err(GrpcStatus::internal("truncated message prefix"));
    };
    match prefix[0] {
        0 => {}
        1 if encoding.is_none_or(|encoding| encoding == b"identity") => {
            return Err(GrpcStatus::internal(
                "compressed flag set without grpc-encoding",
            ))
        }
        1 => return Err(GrpcStatus::unimplemented("no compression is supported")),
        _ => return Err(GrpcStatus::internal("unknown compressed flag")),
    }
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    match rest.len().cmp(&len) {
        std::cmp::Ordering::Less => Err(GrpcStatus::internal("truncated message")),
        std::cmp::Ordering::Greater => {
            Err(GrpcStatus::unimplemented("more than one request message"))
        }
        std::cmp::Ordering::Equal => Ok(rest),
    }
}

/// `SumRequest`'s `a` and `b` (0 when absent), or why the message does not parse.
fn sum_request(message: &[u8]) -> Result<(i32, i32), &'static str> {
    let mut reader = Reader(message);
    let (mut a, mut b) = (0, 0);
    while !reader.0.is_empty() {
        let (field, wire_type) = reader.tag()?;
        match (field, wire_type) {
            // int32: the low 32 bits of the varint.
            (1, WireType::Varint) => a = reader.varint()? as i32,
            (2, WireType::Varint) => b = reader.varint()? as i32,
            _ => reader.skip(field, wire_type, 0)?,
        }
    }
    Ok((a, b))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WireType {
    Varint,
    I64,
    Len,
    StartGroup,
    EndGroup,
    I32,
}

/// The bytes of a message not read yet.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    /// A varint of at most 10 bytes whose value fits 64 bits.
    fn varint(&mut self) -> Result<u64, &'static str> {
        let mut value = 0u64;
        for (index, &byte) in self.0.iter().enumerate().take(10) {
            // The 10th byte holds bit 63 only.
            if index == 9 && byte > 1 {
                return Err("varint over 64 bits");
            }
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                self.0 = &self.0[index + 1..];
                return Ok(value);
            }
        }
        Err("truncated varint")
    }

    fn tag(&mut self) -> Result<(u64, WireType), &'static str> {
        let tag = self.varint()?;
        let field = tag >> 3;
        if field == 0 || field > MAX_FIELD_NUMBER {
            return Err("field number out of range");
        }
        let wire_type = match tag & 7 {
            0 => WireType::Varint,
            1 => WireType::I64,
            2 => WireType::Len,
            3 => WireType::StartGroup,
            4 => WireType::EndGroup,
            5 => WireType::I32,
            _ => return Err("unknown wire type"),
        };
        Ok((field, wire_type))
    }

    fn take(&mut self, len: u64) -> Result<(), &'static str> {
        match usize::try_from(len).ok().filter(|&len| len <= self.0.len()) {
            Some(len) => {
                self.0 = &self.0[len..];
                Ok(())
            }
            None => Err("field past the end of the message"),
        }
    }

    /// Skips the value of a field whose tag was just read; a group up to its end, with
    /// the groups inside it (`depth` of them around it already).
    fn skip(&mut self, field: u64, wire_type: WireType, depth: usize) -> Result<(), &'static str> {
        match wire_type {
            WireType::Varint => self.varint().map(drop),
            WireType::I64 => self.take(8),
            WireType::I32 => self.take(4),
            WireType::Len => {
                let len = self.varint()?;
                self.take(len)
            }
            WireType::EndGroup => Err("end of a group not begun"),
            WireType::StartGroup if depth == MAX_GROUP_DEPTH => Err("groups nested too deep"),
            WireType::StartGroup => loop {
                if self.0.is_empty() {
                    return Err("unterminated group");
                }
                match self.tag()? {
                    (inner, WireType::EndGroup) if inner == field => return Ok(()),
                    (_, WireType::EndGroup) => return Err("end of another group"),
                    (inner, wire_type) => self.skip(inner, wire_type, depth + 1)?,
                }
            },
        }
    }
}

fn write_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests;
