//! Frontend messages: encoders that append what the client sends to a byte buffer.

use super::types::INT4_OID;

const PROTOCOL_VERSION_3: i32 = 196_608;

/// A parameter, always sent in binary.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    Int4(i32),
    Int8(i64),
    Int4Array(&'a [i32]),
    /// A `text` (or `varchar`) value: its UTF-8 bytes, which are its binary form too.
    Text(&'a str),
}

/// Why an encoder refused a message; it appended nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// This string, sent NUL-terminated, has a NUL inside.
    Nul(&'static str),
    /// This length or count does not fit its field of the message.
    TooLong(&'static str),
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EncodeError::Nul(what) => write!(f, "the {what} contains a NUL byte"),
            EncodeError::TooLong(what) => write!(f, "the {what} is too long for the protocol"),
        }
    }
}

impl std::error::Error for EncodeError {}

/// What an encoder returns; when it fails, it has appended nothing.
pub type Encoded = Result<(), EncodeError>;

/// Appends one message: `tag` (none for the StartupMessage), its length, then what `body`
/// writes. If `body` fails, or the message is too long for its length field, the buffer is
/// left as it was.
fn message(
    buf: &mut Vec<u8>,
    tag: Option<u8>,
    body: impl FnOnce(&mut Vec<u8>) -> Encoded,
) -> Encoded {
    let start = buf.len();
    buf.extend(tag);
    let at = buf.len();
    buf.extend_from_slice(&[0; 4]);
    // The length counts itself, not the tag.
    let result = body(buf).and_then(|()| {
        let len = i32::try_from(buf.len() - at).map_err(|_| EncodeError::TooLong("message"))?;
        buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
        Ok(())
    });
    if result.is_err() {
        buf.truncate(start);
    }
    result
}

fn put_i32_len(buf: &mut Vec<u8>, len: usize, what: &'static str) -> Encoded {
    let len = i32::try_from(len).map_err(|_| EncodeError::TooLong(what))?;
    buf.extend_from_slice(&len.to_be_bytes());
    Ok(())
}

/// An Int16 count (of parameters, of their types).
fn put_count(buf: &mut Vec<u8>, count: usize, what: &'static str) -> Encoded {
    let count = u16::try_from(count).map_err(|_| EncodeError::TooLong(what))?;
    buf.extend_from_slice(&count.to_be_bytes());
    Ok(())
}

fn put_cstr(buf: &mut Vec<u8>, s: &str, what: &'static str) -> Encoded {
    if s.as_bytes().contains(&0) {
        return Err(EncodeError::Nul(what));
    }
    buf.extend_from_slice(s.as_bytes());
    buf.push(0);
    Ok(())
}

pub fn startup(buf: &mut Vec<u8>, user: &str, database: &str) -> Encoded {
    message(buf, None, |buf| {
        buf.extend_from_slice(&PROTOCOL_VERSION_3.to_be_bytes());
        for (key, value, what) in [
            ("user", user, "user name"),
            ("database", database, "database name"),
            ("client_encoding", "UTF8", "encoding"),
            ("application_name", "gnosis", "application name"),
        ] {
            put_cstr(buf, key, "parameter name")?;
            put_cstr(buf, value, what)?;
        }
        buf.push(0);
        Ok(())
    })
}

/// PasswordMessage: a cleartext or MD5-hashed password.
pub fn password(buf: &mut Vec<u8>, password: &str) -> Encoded {
    message(buf, Some(b'p'), |buf| put_cstr(buf, password, "password"))
}

pub fn sasl_initial_response(buf: &mut Vec<u8>, mechanism: &str, data: &[u8]) -> Encoded {
    message(buf, Some(b'p'), |buf| {
        put_cstr(buf, mechanism, "SASL mechanism")?;
        put_i32_len(buf, data.len(), "SASL response")?;
        buf.extend_from_slice(data);
        Ok(())
    })
}

pub fn sasl_response(buf: &mut Vec<u8>, data: &[u8]) -> Encoded {
    message(buf, Some(b'p'), |buf| {
        buf.extend_from_slice(data);
        Ok(())
    })
}

pub fn parse(buf: &mut Vec<u8>, name: &str, sql: &str, param_types: &[u32]) -> Encoded {
    message(buf, Some(b'P'), |buf| {
        put_cstr(buf, name, "statement name")?;
        put_cstr(buf, sql, "statement text")?;
        put_count(buf, param_types.len(), "parameter type list")?;
        for oid in param_types {
            buf.extend_from_slice(&oid.to_be_bytes());
        }
        Ok(())
    })
}

/// Bind to the unnamed portal with every parameter and every result column in binary.
pub fn bind(buf: &mut Vec<u8>, statement: &str, params: &[Param]) -> Encoded {
    message(buf, Some(b'B'), |buf| {
        buf.push(0); // unnamed portal
        put_cstr(buf, statement, "statement name")?;
        buf.extend_from_slice(&[0, 1, 0, 1]); // one format code for all parameters: binary
        put_count(buf, params.len(), "parameter list")?;
        for param in params {
            match *param {
                Param::Int4(value) => {
                    buf.extend_from_slice(&4i32.to_be_bytes());
                    buf.extend_from_slice(&value.to_be_bytes());
                }
                Param::Int8(value) => {
                    buf.extend_from_slice(&8i32.to_be_bytes());
                    buf.extend_from_slice(&value.to_be_bytes());
                }
                Param::Int4Array(values) => {
                    // ndim, has-nulls flag, element oid, then (length, lower bound) per
                    // dimension, then (length, value) per element.
                    let len = values.len().checked_mul(8).and_then(|n| n.checked_add(20));
                    put_i32_len(buf, len.unwrap_or(usize::MAX), "int4 array")?;
                    buf.extend_from_slice(&1i32.to_be_bytes());
                    buf.extend_from_slice(&0i32.to_be_bytes());
                    buf.extend_from_slice(&INT4_OID.to_be_bytes());
                    put_i32_len(buf, values.len(), "int4 array")?;
                    buf.extend_from_slice(&1i32.to_be_bytes());
                    for value in values {
                        buf.extend_from_slice(&4i32.to_be_bytes());
                        buf.extend_from_slice(&value.to_be_bytes());
                    }
                }
                Param::Text(text) => {
                    // PostgreSQL's text cannot hold a NUL: refused here, not by the server.
                    if text.as_bytes().contains(&0) {
                        return Err(EncodeError::Nul("text parameter"));
                    }
                    put_i32_len(buf, text.len(), "text parameter")?;
                    buf.extend_from_slice(text.as_bytes());
                }
            }
        }
        buf.extend_from_slice(&[0, 1, 0, 1]); // one format code for all results: binary
        Ok(())
    })
}

/// Describe a prepared statement (its parameter types and result columns).
pub fn describe_statement(buf: &mut Vec<u8>, name: &str) -> Encoded {
    message(buf, Some(b'D'), |buf| {
        buf.push(b'S');
        put_cstr(buf, name, "statement name")
    })
}

/// Execute the unnamed portal, all rows.
pub fn execute(buf: &mut Vec<u8>) {
    buf.extend_from_slice(&[b'E', 0, 0, 0, 9, 0, 0, 0, 0, 0]);
}

pub fn sync(buf: &mut Vec<u8>) {
    buf.extend_from_slice(&[b'S', 0, 0, 0, 4]);
}

pub fn terminate(buf: &mut Vec<u8>) {
    buf.extend_from_slice(&[b'X', 0, 0, 0, 4]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_past_int32_are_refused() {
        let mut buf = Vec::new();
        let too_long = usize::try_from(i32::MAX).unwrap() + 1;
        assert_eq!(
            put_i32_len(&mut buf, too_long, "array"),
            Err(EncodeError::TooLong("array"))
        );
        put_i32_len(&mut buf, too_long - 1, "array").unwrap();
        assert_eq!(buf, i32::MAX.to_be_bytes());
        // A message whose body fails halfway leaves no trace, tag and length included.
        let mut buf = b"before".to_vec();
        let failed = message(&mut buf, Some(b'B'), |buf| {
            buf.extend_from_slice(b"half a message");
            put_i32_len(buf, too_long, "array")
        });
        assert_eq!(failed, Err(EncodeError::TooLong("array")));
        assert_eq!(buf, b"before");
    }
}
