//! A scripted server for tests: encoders of backend messages, and a splitter of what a client
//! wrote into frontend messages. Compiled for unit tests, and with the `test-kit` feature for
//! the integration tests (a dev-dependency of the crate on itself turns it on).

/// A backend message: its tag, its length, its body.
pub fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn auth(code: u32, data: &[u8]) -> Vec<u8> {
    let mut body = code.to_be_bytes().to_vec();
    body.extend_from_slice(data);
    message(b'R', &body)
}

pub fn auth_ok() -> Vec<u8> {
    auth(0, b"")
}

pub fn auth_cleartext() -> Vec<u8> {
    auth(3, b"")
}

pub fn auth_md5(salt: [u8; 4]) -> Vec<u8> {
    auth(5, &salt)
}

pub fn auth_sasl(mechanisms: &[&str]) -> Vec<u8> {
    let mut list = Vec::new();
    for mechanism in mechanisms {
        list.extend_from_slice(mechanism.as_bytes());
        list.push(0);
    }
    list.push(0);
    auth(10, &list)
}

pub fn sasl_continue(data: &str) -> Vec<u8> {
    auth(11, data.as_bytes())
}

pub fn sasl_final(data: &str) -> Vec<u8> {
    auth(12, data.as_bytes())
}

pub fn parameter_status(name: &str, value: &str) -> Vec<u8> {
    message(b'S', format!("{name}\0{value}\0").as_bytes())
}

pub fn backend_key_data() -> Vec<u8> {
    message(b'K', &[0, 0, 0, 42, 1, 2, 3, 4])
}

pub fn ready() -> Vec<u8> {
    message(b'Z', b"I")
}

pub fn parse_complete() -> Vec<u8> {
    message(b'1', b"")
}

pub fn bind_complete() -> Vec<u8> {
    message(b'2', b"")
}

pub fn no_data() -> Vec<u8> {
    message(b'n', b"")
}

pub fn parameter_description(oids: &[u32]) -> Vec<u8> {
    let mut body = (oids.len() as u16).to_be_bytes().to_vec();
    for oid in oids {
        body.extend_from_slice(&oid.to_be_bytes());
    }
    message(b't', &body)
}

pub fn row_description(oids: &[u32]) -> Vec<u8> {
    let mut body = (oids.len() as u16).to_be_bytes().to_vec();
    for (i, oid) in oids.iter().enumerate() {
        body.extend_from_slice(format!("c{i}\0").as_bytes());
        body.extend_from_slice(&[0; 6]); // table oid, column number
        body.extend_from_slice(&oid.to_be_bytes());
        body.extend_from_slice(&[0; 8]); // type size, type modifier, format
    }
    message(b'T', &body)
}

/// A row of int4 columns.
pub fn data_row(values: &[i32]) -> Vec<u8> {
    let values: Vec<[u8; 4]> = values.iter().map(|value| value.to_be_bytes()).collect();
    let columns: Vec<Option<&[u8]>> = values.iter().map(|value| Some(&value[..])).collect();
    raw_row(&columns)
}

/// A row of columns in their binary form as they are on the wire (`None`: NULL).
pub fn raw_row(columns: &[Option<&[u8]>]) -> Vec<u8> {
    let mut body = (columns.len() as u16).to_be_bytes().to_vec();
    for column in columns {
        match column {
            Some(bytes) => {
                body.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
                body.extend_from_slice(bytes);
            }
            None => body.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    message(b'D', &body)
}

pub fn command_complete(tag: &str) -> Vec<u8> {
    message(b'C', format!("{tag}\0").as_bytes())
}

pub fn error(severity: &str, code: &str, text: &str) -> Vec<u8> {
    let body = format!("S{severity}\0V{severity}\0C{code}\0M{text}\0\0");
    message(b'E', body.as_bytes())
}

pub fn notice(text: &str) -> Vec<u8> {
    message(b'N', format!("SNOTICE\0M{text}\0\0").as_bytes())
}

/// A client's bytes as (tag, body) messages; a start-up message first, with tag 0, when
/// `startup` says one is there. Panics on a malformed stream: the client wrote it.
pub fn frontend(mut bytes: &[u8], startup: bool) -> Vec<(u8, Vec<u8>)> {
    let mut messages = Vec::new();
    if startup {
        let len = u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
        messages.push((0, bytes[4..len].to_vec()));
        bytes = &bytes[len..];
    }
    while !bytes.is_empty() {
        let len = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
        messages.push((bytes[0], bytes[5..len + 1].to_vec()));
        bytes = &bytes[len + 1..];
    }
    messages
}
