//! Where the private cluster of `scripts/pg.sh start` is, and a loop that drives a `PgConn`
//! through `pg::blocking::Driver` (poll(2)) the way a server's event loop does: for the
//! client's own tests (tests/pg/) and the database's shape (tests/arena/schema.rs).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gnosis::pg::target::{trusted_socket_dir, SOCKET_DIRS};
use gnosis::pg::{Config, Driver, Event, Options, PgConn, Statement, Target};

pub fn port() -> String {
    std::env::var("GNOSIS_PG_PORT").unwrap_or_else(|_| "55432".to_string())
}

/// Runs SQL through psql with the connection string `url`; returns its unaligned output,
/// one row a line, fields split by '|', trimmed.
pub fn psql(url: &str, sql: &str) -> String {
    let output = std::process::Command::new("psql")
        .args([
            "-X",
            "-A",
            "-t",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            url,
            "-c",
            sql,
        ])
        .output()
        .expect("running psql");
    assert!(
        output.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

pub fn socket_dir() -> PathBuf {
    let dir = std::env::var("GNOSIS_PG_DIR").unwrap_or_else(|_| "/tmp/gnosis-pg".to_string());
    PathBuf::from(dir).join("socket")
}

/// A target read like the app reads it, from PG* variables given here (not the process
/// environment, which parallel tests would share) and the real socket search.
pub fn config(vars: &[(&str, &str)]) -> Arc<Target> {
    let port = port();
    Target::new(Config::from_vars(
        |name| {
            if name == "PGPORT" {
                return Some(port.clone());
            }
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        },
        |port| trusted_socket_dir(SOCKET_DIRS, port),
    ))
}

/// TFB's user over TCP (SCRAM-SHA-256).
pub fn tfb_tcp() -> Arc<Target> {
    config(&[("PGHOST", "127.0.0.1")])
}

/// A driven connection to `target`, ready (started up, statements prepared). Queries may
/// take 30 s: thousands at once on a busy shared machine must not time out.
pub fn ready(target: Arc<Target>, statements: &'static [Statement]) -> Driver {
    let options = Options {
        query_timeout: Duration::from_secs(30),
        ..Options::default()
    };
    let mut pg = Driver::new(PgConn::new(target, statements, options, Instant::now()));
    drive(&mut pg, Duration::from_secs(10), &mut ignore_events, |c| {
        c.is_ready()
    });
    pg
}

/// Drives `pg` with poll(2) until `done` says so; panics after `timeout`.
pub fn drive(
    pg: &mut Driver,
    timeout: Duration,
    sink: &mut impl FnMut(u64, Event<'_>),
    mut done: impl FnMut(&PgConn) -> bool,
) {
    let deadline = Instant::now() + timeout;
    pg.flush(sink);
    while !done(pg.conn()) {
        assert!(
            Instant::now() < deadline,
            "timed out; last error: {:?}",
            pg.conn().last_error().map(|e| e.to_string())
        );
        let step = (Instant::now() + Duration::from_millis(100)).min(deadline);
        pg.poll_once(step, sink);
    }
}

pub fn ignore_events(_: u64, _: Event<'_>) {}
