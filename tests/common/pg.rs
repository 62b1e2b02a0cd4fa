//! Shared by the tests/pg_*.rs files (as `#[path = "common/pg.rs"] mod common;`): where the
//! private cluster of `scripts/pg.sh start` is, and a small poll(2) loop that drives a
//! `PgConn` the way the server's event loop does.
#![allow(dead_code)] // each test file uses a different part of this module

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gnosis::pg::blocking::poll_once;
use gnosis::pg::{Config, Event, PgConn};

pub fn port() -> String {
    std::env::var("GNOSIS_PG_PORT").unwrap_or_else(|_| "55432".to_string())
}

pub fn socket_dir() -> PathBuf {
    let dir = std::env::var("GNOSIS_PG_DIR").unwrap_or_else(|_| "/tmp/gnosis-pg".to_string());
    PathBuf::from(dir).join("socket")
}

/// A config read like the app reads it, from PG* variables given here (not the process
/// environment, which parallel tests would share) and the real file system.
pub fn config(vars: &[(&str, &str)]) -> Arc<Config> {
    let port = port();
    Arc::new(Config::from_vars(
        |name| {
            if name == "PGPORT" {
                return Some(port.clone());
            }
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        },
        |path| path.exists(),
    ))
}

/// TFB's user over TCP (SCRAM-SHA-256).
pub fn tfb_tcp() -> Arc<Config> {
    config(&[("PGHOST", "127.0.0.1")])
}

/// Drives `conn` with poll(2) until `done` says so; panics after `timeout`.
pub fn drive(
    conn: &mut PgConn,
    timeout: Duration,
    sink: &mut impl FnMut(u64, Event<'_>),
    mut done: impl FnMut(&PgConn) -> bool,
) {
    let deadline = Instant::now() + timeout;
    conn.flush(sink);
    while !done(conn) {
        assert!(
            Instant::now() < deadline,
            "timed out; last error: {:?}",
            conn.last_error().map(|e| e.to_string())
        );
        let step = (Instant::now() + Duration::from_millis(100)).min(deadline);
        poll_once(conn, step, sink);
        conn.flush(sink);
    }
}

pub fn ignore_events(_: u64, _: Event<'_>) {}
