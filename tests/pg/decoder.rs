//! The incremental decoder never panics: on random bytes, on real server traffic (recorded
//! from the private cluster, `scripts/pg.sh start`) cut at random places, and on that traffic
//! with random bytes changed.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::OnceLock;

use gnosis::pg::protocol::{self, ColumnValue, Jsonb, Message, Param, INT4_OID, INT8_OID};
use proptest::prelude::*;

/// Every column of `row` read as each type the client decodes (whatever its real type):
/// bad lengths and bytes must be errors, never panics.
fn read_every_way(row: &protocol::DataRow<'_>) -> String {
    (0..=row.len())
        .map(|i| match row.get(i) {
            Some(Some(bytes)) => format!(
                "{:?} {:?} {:?} {:?} {:?}",
                bool::decode(bytes),
                i32::decode(bytes),
                i64::decode(bytes),
                <&str>::decode(bytes),
                Jsonb::decode(bytes)
            ),
            other => format!("{other:?}"),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Decodes every complete message in `buf`, touching every accessor; returns their Debug
/// forms (a DataRow's columns read every way) and the bytes used. Stops at the first error
/// (also returned as an entry).
fn decode_all(buf: &[u8]) -> (Vec<String>, usize) {
    let mut at = 0;
    let mut seen = Vec::new();
    loop {
        match protocol::decode(&buf[at..]) {
            Ok(Some((message, used))) => {
                assert!(used >= 5 && at + used <= buf.len());
                at += used;
                match &message {
                    Message::DataRow(row) => seen.push(read_every_way(row)),
                    Message::RowDescription(description) => {
                        let _ = description.type_oids();
                    }
                    Message::ErrorResponse(fields) => {
                        let _ = (fields.field(b'C'), fields.field(b'M'));
                    }
                    _ => {}
                }
                seen.push(format!("{message:?}"));
            }
            Ok(None) => return (seen, at),
            Err(e) => {
                seen.push(format!("error: {e}"));
                return (seen, at);
            }
        }
    }
}

/// A real conversation: start-up as gnosis_trust over the Unix socket, three statements
/// prepared and described, 50 queries (world rows, fortunes with UTF-8, rows of bool, int8,
/// jsonb and text from an int8 parameter, one error).
fn real_traffic() -> &'static [u8] {
    static TRAFFIC: OnceLock<Vec<u8>> = OnceLock::new();
    TRAFFIC.get_or_init(|| {
        let path =
            crate::common::pg::socket_dir().join(format!(".s.PGSQL.{}", crate::common::pg::port()));
        let mut stream = UnixStream::connect(path).expect("scripts/pg.sh start");
        let mut out = Vec::new();
        protocol::startup(&mut out, "gnosis_trust", "hello_world").unwrap();
        protocol::parse(
            &mut out,
            "w",
            "SELECT id, randomnumber FROM world WHERE id = $1",
            &[INT4_OID],
        )
        .unwrap();
        protocol::describe_statement(&mut out, "w").unwrap();
        protocol::parse(
            &mut out,
            "f",
            "SELECT id, message FROM fortune WHERE id <= 12 / $1 * $1",
            &[INT4_OID],
        )
        .unwrap();
        protocol::describe_statement(&mut out, "f").unwrap();
        protocol::parse(&mut out, "t", TYPED_SQL, &[INT8_OID]).unwrap();
        protocol::describe_statement(&mut out, "t").unwrap();
        protocol::sync(&mut out);
        for i in 0..50 {
            if i % 10 == 7 {
                protocol::bind(&mut out, "t", &[Param::Int8(i64::from(i) << 33)]).unwrap();
            } else if i % 10 == 3 {
                protocol::bind(&mut out, "f", &[Param::Int4(if i == 23 { 0 } else { 12 })])
                    .unwrap();
            } else {
                protocol::bind(&mut out, "w", &[Param::Int4(i * 199 + 1)]).unwrap();
            }
            protocol::execute(&mut out);
            protocol::sync(&mut out);
        }
        protocol::terminate(&mut out);
        // Written before start-up completes: the server reads it in order after auth (trust).
        stream.write_all(&out).unwrap();
        let mut traffic = Vec::new();
        stream.read_to_end(&mut traffic).unwrap();
        let (messages, used) = decode_all(&traffic);
        assert_eq!(used, traffic.len());
        let ready = messages
            .iter()
            .filter(|m| m.starts_with("ReadyForQuery"))
            .count();
        assert_eq!(ready, 52, "start-up + prepare + 50 queries");
        assert!(messages.iter().any(|m| m.starts_with("ErrorResponse")));
        traffic
    })
}

/// One row of bool, int8, jsonb and text from an int8 parameter.
const TYPED_SQL: &str = "SELECT $1 > 0, $1 * 3, \
     jsonb_build_object('tags', jsonb_build_array('sale', 'é'), 'n', $1), 'x'::text";

#[test]
fn real_traffic_decodes_whole() {
    let (messages, _) = decode_all(real_traffic());
    assert!(messages.iter().all(|m| !m.starts_with("error")));
    assert!(messages.iter().filter(|m| m.starts_with("DataRow")).count() > 50);
    // The server's binary bool, int8 and jsonb, read as those types.
    let mut typed = Vec::new();
    let mut buf = real_traffic();
    while let Ok(Some((message, used))) = protocol::decode(buf) {
        buf = &buf[used..];
        let Message::DataRow(row) = message else {
            continue;
        };
        let column = |i| row.get(i).flatten().unwrap();
        if row.len() == 4 {
            typed.push((
                bool::decode(column(0)).unwrap(),
                i64::decode(column(1)).unwrap(),
                Jsonb::decode(column(2)).unwrap().0.to_string(),
                <&str>::decode(column(3)).unwrap(),
            ));
        }
    }
    let expected: Vec<_> = [7i64, 17, 27, 37, 47]
        .iter()
        .map(|i| {
            let n = i << 33;
            let json = format!(r#"{{"n": {n}, "tags": ["sale", "é"]}}"#);
            (true, n * 3, json, "x")
        })
        .collect();
    assert_eq!(typed, expected);
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        decode_all(&bytes);
    }

    #[test]
    fn random_message_shaped_bytes_never_panic(
        parts in proptest::collection::vec(
            (prop::sample::select(b"RSKZ123nstITDCENAv?".to_vec()),
             proptest::collection::vec(any::<u8>(), 0..64)),
            0..32)
    ) {
        // Plausible tags with correct lengths and random bodies reach the body parsers.
        let mut bytes = Vec::new();
        for (tag, body) in parts {
            bytes.extend(protocol::script::message(tag, &body));
        }
        decode_all(&bytes);
    }

    #[test]
    fn real_traffic_split_anywhere_decodes_the_same(
        mut cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..40)
    ) {
        let traffic = real_traffic();
        let (whole, _) = decode_all(traffic);
        let mut cuts: Vec<usize> = cuts.drain(..).map(|c| c.index(traffic.len())).collect();
        cuts.push(traffic.len());
        cuts.sort_unstable();
        // Feed the pieces one by one, decoding what is complete each time, as the
        // connection does with each read.
        let mut buffer = Vec::new();
        let mut seen = Vec::new();
        let mut from = 0;
        for cut in cuts {
            buffer.extend_from_slice(&traffic[from..cut]);
            from = cut;
            let (messages, used) = decode_all(&buffer);
            seen.extend(messages);
            buffer.drain(..used);
        }
        prop_assert!(buffer.is_empty());
        prop_assert_eq!(seen, whole);
    }

    #[test]
    fn damaged_real_traffic_never_panics(
        damage in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..20),
        keep in any::<prop::sample::Index>(),
    ) {
        let mut traffic = real_traffic().to_vec();
        for (at, byte) in damage {
            let at = at.index(traffic.len());
            traffic[at] = byte;
        }
        traffic.truncate(keep.index(traffic.len() + 1));
        decode_all(&traffic);
    }
}

/// A peer that is not PostgreSQL (here: an HTTP server's answer) makes the connection fail
/// with a protocol error and retry with backoff; nothing panics.
#[test]
fn a_server_speaking_garbage_is_a_protocol_error_then_a_retry() {
    use gnosis::pg::{Config, Driver, Host, Options, PgConn, Step, Target};
    use std::time::{Duration, Instant};

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let mut accepted = Vec::new();
        for _ in 0..2 {
            let (mut stream, _) = listener.accept().unwrap();
            let mut startup = [0u8; 8];
            stream.read_exact(&mut startup).unwrap();
            accepted.push(Instant::now());
            stream
                .write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                .unwrap();
        }
        accepted
    });
    let target = Target::new(Config {
        host: Host::Tcp("127.0.0.1".into()),
        port,
        user: "u".into(),
        password: "p".into(),
        database: "d".into(),
        allow_cleartext: false,
    });
    let conn = PgConn::new(target, &[], Options::default(), Instant::now());
    let mut pg = Driver::new(conn);
    // Done once the second socket has been dropped for a protocol error.
    crate::common::pg::drive(
        &mut pg,
        Duration::from_secs(10),
        &mut crate::common::pg::ignore_events,
        |c| {
            c.generation() >= 2
                && c.step() == Step::Idle
                && matches!(c.last_error(), Some(gnosis::pg::DbError::Protocol(_)))
        },
    );
    assert!(!pg.conn().is_ready());
    assert_eq!(pg.socket(), None);
    let accepted = server.join().unwrap();
    // The retry waited for the backoff.
    assert!(accepted[1] - accepted[0] >= Duration::from_millis(40));
}
