//! Both binaries find PostgreSQL through DATABASE_URL, before the PG* variables, against the
//! shared private cluster (`scripts/pg.sh start`); a URL asking for TLS ends the start with a
//! clear message; DATABASE_MAX_CONN lowers the connections per thread.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, Server};

const GNOSIS: &str = env!("CARGO_BIN_EXE_gnosis");

/// PG* variables the test process may have, emptied: gnosis (like libpq) treats an empty
/// variable as unset, so the server sees none.
fn no_pg_variables() -> Vec<(&'static str, String)> {
    ["PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE"]
        .map(|name| (name, String::new()))
        .to_vec()
}

fn start_and_wait(binary: &str, extra: &[&str], env: &[(&str, String)]) -> Server {
    let server = Server::start_with_env(binary, extra, env);
    server.wait_until_ok(&["/db"], Duration::from_secs(20));
    server
}

/// Only DATABASE_URL: TFB's user over TCP with SCRAM, the host a name to resolve, and a
/// parameter gnosis does not use (logged by name, its value never).
fn database_url_alone(binary: &str) {
    let mut env = no_pg_variables();
    env.push((
        "DATABASE_URL",
        format!(
            "postgres://benchmarkdbuser:benchmarkdbpass@localhost:{}/hello_world\
             ?sslmode=disable&application_name=hushhush",
            crate::common::pg::port()
        ),
    ));
    let server = start_and_wait(binary, &[], &env);
    let log = server.log();
    assert!(
        log.contains(&format!(
            "PostgreSQL target tcp localhost:{} user benchmarkdbuser database hello_world",
            crate::common::pg::port()
        )),
        "{log}"
    );
    assert!(
        log.contains("DATABASE_URL: ignoring application_name"),
        "{log}"
    );
    assert!(
        !log.contains("benchmarkdbpass") && !log.contains("hushhush"),
        "{log}"
    );
}

/// DATABASE_URL's parts win over PG* variables that point nowhere: here the cluster's Unix
/// socket directory, percent-encoded as libpq allows.
fn database_url_wins_over_pg_variables(binary: &str) {
    let socket_dir = crate::common::pg::socket_dir().display().to_string();
    let env = [
        ("PGHOST", "/nonexistent".to_string()),
        ("PGPORT", "1".to_string()),
        ("PGUSER", "nobody".to_string()),
        ("PGPASSWORD", "wrong".to_string()),
        ("PGDATABASE", "nothing_here".to_string()),
        (
            "DATABASE_URL",
            format!(
                "postgresql://gnosis_trust@{}:{}/hello_world",
                socket_dir.replace('/', "%2F"),
                crate::common::pg::port()
            ),
        ),
    ];
    let server = start_and_wait(binary, &[], &env);
    let mut client = server.connect();
    for _ in 0..20 {
        assert_eq!(client.get("/db").status, 200);
    }
    let log = server.log();
    assert!(
        log.contains(&format!(
            "PostgreSQL target unix socket {socket_dir}/.s.PGSQL.{} user gnosis_trust",
            crate::common::pg::port()
        )),
        "{log}"
    );
}

test_both_binaries! {
    gnosis, gnosis_uring;
    database_url_alone,
    database_url_wins_over_pg_variables,
}

/// Runs `binary` with `env` until it exits (within 20 s); returns its status and stderr.
fn run_until_exit(binary: &str, env: &[(&str, String)]) -> (Option<i32>, String) {
    let mut child = Command::new(binary)
        .args(["--port", &free_port().to_string(), "--threads", "1"])
        .args(crate::common::OtherPorts::free().args())
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the server");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{binary} did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn an_sslmode_that_requires_tls_ends_the_start_with_a_clear_message() {
    for binary in [GNOSIS, env!("CARGO_BIN_EXE_gnosis-uring")] {
        let env = [(
            "DATABASE_URL",
            format!(
                "postgres://bench:s3cr3t@localhost:{}/benchmark?sslmode=require",
                crate::common::pg::port()
            ),
        )];
        let (status, stderr) = run_until_exit(binary, &env);
        assert_eq!(status, Some(2), "{stderr}");
        assert!(
            stderr.contains(
                "DATABASE_URL: sslmode=require requires TLS, and gnosis speaks no TLS to \
                 PostgreSQL"
            ),
            "{stderr}"
        );
        assert!(!stderr.contains("s3cr3t"), "{stderr}");
    }
}

#[test]
fn a_bad_database_url_or_max_conn_ends_the_start() {
    let (status, stderr) = run_until_exit(
        GNOSIS,
        &[("DATABASE_URL", "postgres://u:s3cr3t@h:notaport/d".into())],
    );
    assert_eq!(status, Some(2), "{stderr}");
    assert!(
        stderr.contains("DATABASE_URL: the port is not a number"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cr3t"), "{stderr}");
    let (status, stderr) = run_until_exit(GNOSIS, &[("DATABASE_MAX_CONN", "zero".into())]);
    assert_eq!(status, Some(2), "{stderr}");
    assert!(
        stderr.contains("DATABASE_MAX_CONN takes a whole number of at least 1, not 'zero'"),
        "{stderr}"
    );
}

/// A REDIS_URL that cannot be used ends the start on both binaries, naming what is wrong and
/// never the password; one whose host has no address too.
#[test]
fn a_bad_redis_url_ends_the_start_with_a_clear_message() {
    for binary in [GNOSIS, env!("CARGO_BIN_EXE_gnosis-uring")] {
        let url = "redis://:s3cr3t@127.0.0.1:notaport".to_string();
        let (status, stderr) = run_until_exit(binary, &[("REDIS_URL", url)]);
        assert_eq!(status, Some(2), "{stderr}");
        assert!(
            stderr.contains("REDIS_URL: the port is not a number from 1 to 65535"),
            "{stderr}"
        );
        assert!(!stderr.contains("s3cr3t"), "{stderr}");
    }
    let url = "redis://:s3cr3t@no-such-host.invalid:6379".to_string();
    let (status, stderr) = run_until_exit(GNOSIS, &[("REDIS_URL", url)]);
    assert_eq!(status, Some(2), "{stderr}");
    assert!(
        stderr.contains("REDIS_URL: cannot resolve no-such-host.invalid:6379"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cr3t"), "{stderr}");
}

/// DATABASE_URL and DATABASE_MAX_CONN only, as HttpArena starts a server: 2 threads x
/// --pg-conns 4 do not fit in 9 less the 4 reserved, so 2 per thread, said once; it serves.
#[test]
fn database_max_conn_lowers_the_connections_per_thread() {
    let mut env = no_pg_variables();
    env.push((
        "DATABASE_URL",
        format!(
            "postgres://benchmarkdbuser:benchmarkdbpass@127.0.0.1:{}/hello_world",
            crate::common::pg::port()
        ),
    ));
    env.push(("DATABASE_MAX_CONN", "9".into()));
    let server = start_and_wait(GNOSIS, &["--pg-conns", "4"], &env);
    let log = server.log();
    assert_eq!(log.matches("DATABASE_MAX_CONN=").count(), 1, "{log}");
    assert!(
        log.contains("DATABASE_MAX_CONN=9: 2 PostgreSQL connection(s) per thread, 4 for 2 threads"),
        "{log}"
    );
    assert!(
        log.contains("with 2 threads (epoll), 2 PostgreSQL connection(s) each"),
        "{log}"
    );
}
