//! Start-up against the private cluster (`scripts/pg.sh start`): every authentication method
//! it is set up with, both transports, socket auto-detection (and a planted socket it
//! skips), and a wrong password.

use std::time::Duration;

use gnosis::pg::protocol::INT4_OID;
use gnosis::pg::{BlockingClient, Config, DbError, Host, Statement, Target};

static WHO: &[Statement] = &[
    Statement {
        name: "who",
        // inet_server_addr() is NULL over a Unix socket.
        sql: "SELECT current_user::text, (inet_server_addr() IS NULL)::int4, \
              (SELECT count(*)::int4 FROM world), $1::int4 + 1",
        param_types: &[INT4_OID],
    },
    Statement {
        name: "fortune",
        sql: "SELECT id, message FROM fortune WHERE id = $1",
        param_types: &[INT4_OID],
    },
];

/// Connects, runs `who`, returns (current_user, over a Unix socket).
fn who(config: std::sync::Arc<Target>) -> Result<(String, bool), DbError> {
    let mut client = BlockingClient::connect(config, WHO, Duration::from_secs(10))?;
    let mut answer = None;
    client.query(&WHO[0], &[gnosis::pg::Param::Int4(41)], |row| {
        assert_eq!(row.len(), 4);
        assert_eq!(row.int4(2)?, 10_000);
        assert_eq!(row.int4(3)?, 42);
        answer = Some((row.text(0)?.to_string(), row.int4(1)? == 1));
        Ok(())
    })?;
    Ok(answer.expect("one row"))
}

#[test]
fn scram_sha_256_over_tcp() {
    let config = crate::common::pg::tfb_tcp();
    assert_eq!(config.config().host, Host::Tcp("127.0.0.1".into()));
    assert_eq!(who(config).unwrap(), ("benchmarkdbuser".to_string(), false));
}

#[test]
fn md5_over_tcp() {
    let config = crate::common::pg::config(&[
        ("PGHOST", "127.0.0.1"),
        ("PGUSER", "gnosis_md5"),
        ("PGPASSWORD", "gnosis_md5_pass"),
    ]);
    assert_eq!(who(config).unwrap(), ("gnosis_md5".to_string(), false));
}

#[test]
fn cleartext_over_tcp_only_with_the_opt_in() {
    let mut vars = vec![
        ("PGHOST", "127.0.0.1"),
        ("PGUSER", "gnosis_clear"),
        ("PGPASSWORD", "gnosis_clear_pass"),
    ];
    match who(crate::common::pg::config(&vars)) {
        Err(DbError::Auth(why)) => assert!(why.contains("GNOSIS_ALLOW_CLEARTEXT"), "{why}"),
        other => panic!("the password went in clear over TCP: {other:?}"),
    }
    vars.push(("GNOSIS_ALLOW_CLEARTEXT", "1"));
    assert_eq!(
        who(crate::common::pg::config(&vars)).unwrap(),
        ("gnosis_clear".to_string(), false)
    );
}

#[test]
fn trust_over_the_socket_directory_in_pghost() {
    let dir = crate::common::pg::socket_dir();
    let config = crate::common::pg::config(&[
        ("PGHOST", dir.to_str().unwrap()),
        ("PGUSER", "gnosis_trust"),
    ]);
    assert_eq!(config.config().host, Host::Unix(dir));
    assert_eq!(who(config).unwrap(), ("gnosis_trust".to_string(), true));
}

#[test]
fn socket_found_by_auto_detection() {
    // PGHOST unset, PGPORT set: the cluster's socket in /tmp is found.
    let config = crate::common::pg::config(&[]);
    assert_eq!(config.config().host, Host::Unix("/tmp".into()));
    assert_eq!(who(config).unwrap(), ("benchmarkdbuser".to_string(), true));
}

/// A socket any local user could have made: bound in a temporary directory (standing for
/// /tmp) and given to `nobody`, it is not used; the same socket owned by root is. A socket of
/// root in a directory of `nobody` is not used either. Needs root, to give files away.
#[test]
fn a_planted_socket_of_another_user_is_not_auto_detected() {
    use gnosis::pg::target::{socket_path, trusted_socket_dir};
    use std::os::unix::fs::chown;
    const NOBODY: u32 = 65_534;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this test needs root, to give a socket to another user");
    }
    let dir = std::env::temp_dir().join(format!("gnosis-planted-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let port = 5432;
    let socket = socket_path(&dir, port);
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let dirs = [dir.as_path()];

    chown(&socket, Some(NOBODY), Some(NOBODY)).unwrap();
    assert_eq!(trusted_socket_dir(&dirs, port), None);
    let config = Config::from_vars(|_| None, |port| trusted_socket_dir(&dirs, port));
    assert_eq!(config.host, Host::Tcp("tfb-database".into()));

    chown(&socket, Some(0), Some(0)).unwrap();
    assert_eq!(trusted_socket_dir(&dirs, port), Some(dir.clone()));

    chown(&dir, Some(NOBODY), Some(NOBODY)).unwrap();
    assert_eq!(trusted_socket_dir(&dirs, port), None);
    // Nothing ever connected to the planted socket.
    assert!(listener.accept().is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn wrong_password_is_the_servers_error() {
    let config =
        crate::common::pg::config(&[("PGHOST", "127.0.0.1"), ("PGPASSWORD", "not-the-password")]);
    let started = std::time::Instant::now();
    let error = who(config).unwrap_err();
    match &error {
        DbError::Server { code, message, .. } => {
            assert_eq!(code, "28P01", "{error}");
            assert!(
                message.contains("password authentication failed"),
                "{error}"
            );
        }
        other => panic!("expected the server's error, got {other:?}"),
    }
    assert!(!error.to_string().contains("not-the-password"));
    // A permanent error: no waiting for the timeout.
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn fortunes_come_back_byte_exact() {
    let mut client =
        BlockingClient::connect(crate::common::pg::tfb_tcp(), WHO, Duration::from_secs(10))
            .unwrap();
    for (id, expected) in [
        (
            6,
            "Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen",
        ),
        (
            11,
            "<script>alert(\"This should not be displayed in a browser alert box.\");</script>",
        ),
        (12, "フレームワークのベンチマーク"),
    ] {
        let mut seen = Vec::new();
        client
            .query(&WHO[1], &[gnosis::pg::Param::Int4(id)], |row| {
                seen.push((row.int4(0)?, row.text(1)?.to_string()));
                // Reading a column as the wrong type is an error, not a panic.
                assert!(row.int4(1).is_err());
                assert!(row.text(0).is_err());
                assert!(row.int4(2).is_err());
                Ok(())
            })
            .unwrap();
        assert_eq!(seen, vec![(id, expected.to_string())]);
    }
}

#[test]
fn a_missing_database_fails_at_once() {
    let config =
        crate::common::pg::config(&[("PGHOST", "127.0.0.1"), ("PGDATABASE", "no_such_db")]);
    match who(config) {
        Err(DbError::Server { code, .. }) => assert_eq!(code, "3D000"),
        other => panic!("expected 3D000, got {other:?}"),
    }
}

/// Methods the private cluster cannot offer (GSSAPI needs Kerberos, SCRAM-SHA-256-PLUS needs
/// TLS): a listener answers the StartupMessage with that request, as such a server would.
fn offered(request: &'static [u8]) -> DbError {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).unwrap();
        let mut startup = vec![0u8; u32::from_be_bytes(len) as usize - 4];
        stream.read_exact(&mut startup).unwrap();
        stream.write_all(request).unwrap();
        // Hold the connection open until the client hangs up.
        let _ = stream.read(&mut [0u8; 64]);
    });
    let config = Config {
        host: Host::Tcp("127.0.0.1".into()),
        port,
        user: "benchmarkdbuser".into(),
        password: "benchmarkdbpass".into(),
        database: "hello_world".into(),
        allow_cleartext: false,
    };
    let error = match BlockingClient::connect(config, WHO, Duration::from_secs(5)) {
        Ok(_) => panic!("connected to a server asking for an unsupported method"),
        Err(error) => error,
    };
    server.join().unwrap();
    error
}

#[test]
fn unsupported_methods_are_named() {
    let gss = offered(b"R\0\0\0\x08\0\0\0\x07");
    assert!(matches!(gss, DbError::Auth(_)), "{gss:?}");
    assert!(gss.to_string().contains("GSSAPI"), "{gss}");

    let sspi = offered(b"R\0\0\0\x08\0\0\0\x09");
    assert!(sspi.to_string().contains("SSPI"), "{sspi}");

    let plus_only = offered(b"R\0\0\0\x1c\0\0\0\x0aSCRAM-SHA-256-PLUS\0\0");
    assert!(matches!(plus_only, DbError::Auth(_)), "{plus_only:?}");
    assert!(
        plus_only.to_string().contains("SCRAM-SHA-256-PLUS"),
        "{plus_only}"
    );
}
