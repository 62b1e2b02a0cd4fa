//! The type oids the client uses, and the decoding of the binary column values it reads.

use super::backend::ProtocolError;

/// Type oids the client encodes or decodes.
pub const INT4_OID: u32 = 23;
pub const INT4_ARRAY_OID: u32 = 1007;
pub const TEXT_OID: u32 = 25;
pub const VARCHAR_OID: u32 = 1043;
pub const BPCHAR_OID: u32 = 1042;
pub const NAME_OID: u32 = 19;
pub const BOOL_OID: u32 = 16;
pub const INT8_OID: u32 = 20;
pub const JSONB_OID: u32 = 3802;

/// A value read from one binary result column whose type is one of `OIDS`: the decoding of
/// each type the client reads, in one place. Bytes of the wrong length or form are an error,
/// never a panic.
pub trait ColumnValue<'a>: Sized {
    /// The type oids whose binary form `decode` reads.
    const OIDS: &'static [u32];
    /// The PostgreSQL type's name, for errors.
    const NAME: &'static str;
    fn decode(bytes: &'a [u8]) -> Result<Self, ProtocolError>;
}

impl ColumnValue<'_> for bool {
    const OIDS: &'static [u32] = &[BOOL_OID];
    const NAME: &'static str = "bool";
    fn decode(bytes: &[u8]) -> Result<bool, ProtocolError> {
        match bytes {
            [0] => Ok(false),
            [1] => Ok(true),
            _ => Err(ProtocolError("bool not one byte of 0 or 1")),
        }
    }
}

impl ColumnValue<'_> for i32 {
    const OIDS: &'static [u32] = &[INT4_OID];
    const NAME: &'static str = "int4";
    fn decode(bytes: &[u8]) -> Result<i32, ProtocolError> {
        Ok(i32::from_be_bytes(sized(bytes, "int4 of the wrong size")?))
    }
}

impl ColumnValue<'_> for i64 {
    const OIDS: &'static [u32] = &[INT8_OID];
    const NAME: &'static str = "int8";
    fn decode(bytes: &[u8]) -> Result<i64, ProtocolError> {
        Ok(i64::from_be_bytes(sized(bytes, "int8 of the wrong size")?))
    }
}

fn sized<const N: usize>(bytes: &[u8], error: &'static str) -> Result<[u8; N], ProtocolError> {
    bytes.try_into().map_err(|_| ProtocolError(error))
}

/// text, varchar, char and name: in binary, the UTF-8 bytes themselves.
impl<'a> ColumnValue<'a> for &'a str {
    const OIDS: &'static [u32] = &[TEXT_OID, VARCHAR_OID, BPCHAR_OID, NAME_OID];
    const NAME: &'static str = "text";
    fn decode(bytes: &'a [u8]) -> Result<&'a str, ProtocolError> {
        std::str::from_utf8(bytes).map_err(|_| ProtocolError("text is not UTF-8"))
    }
}

/// A jsonb column's JSON text, as the server wrote it (valid JSON: the server checked it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jsonb<'a>(pub &'a str);

impl<'a> ColumnValue<'a> for Jsonb<'a> {
    const OIDS: &'static [u32] = &[JSONB_OID];
    const NAME: &'static str = "jsonb";
    /// Binary jsonb is a version byte, 1 (the only one there is), then the JSON text.
    fn decode(bytes: &'a [u8]) -> Result<Jsonb<'a>, ProtocolError> {
        match bytes.split_first() {
            Some((1, text)) => std::str::from_utf8(text)
                .map(Jsonb)
                .map_err(|_| ProtocolError("jsonb text is not UTF-8")),
            Some(_) => Err(ProtocolError("jsonb of an unknown version")),
            None => Err(ProtocolError("jsonb without its version byte")),
        }
    }
}
