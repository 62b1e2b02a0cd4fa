//! A PostgreSQL cluster of a test's own (data directory, port, socket directory), made with
//! `scripts/pg.sh` like the shared one, for tests that stop and start the database.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Cluster {
    dir: PathBuf,
    pub port: u16,
}

impl Cluster {
    /// A cluster that is not started yet; `start` creates it.
    pub fn new(name: &str) -> Cluster {
        // Unique within the process too: a test may run once per binary, in parallel.
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "gnosis-pg-{name}-{}-{}",
            std::process::id(),
            MADE.fetch_add(1, Ordering::Relaxed)
        ));
        Cluster {
            dir,
            port: super::free_port(),
        }
    }

    fn pg_sh(&self, command: &str) {
        self.pg_sh_with(&[command]);
    }

    fn pg_sh_with(&self, args: &[&str]) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg.sh");
        let socket_dir = self.socket_dir();
        let status = Command::new("bash")
            .arg(script)
            .args(args)
            .env("GNOSIS_PG_DIR", &self.dir)
            .env("GNOSIS_PG_PORT", self.port.to_string())
            .env("GNOSIS_PG_SOCKET_DIRS", &socket_dir)
            .status()
            .expect("running scripts/pg.sh");
        assert!(status.success(), "scripts/pg.sh {args:?} failed");
    }

    pub fn start(&self) {
        self.pg_sh("start");
    }

    pub fn stop(&self) {
        self.pg_sh("stop");
    }

    pub fn restart(&self) {
        self.pg_sh("restart");
    }

    /// Runs SQL as the cluster's superuser and returns its output, unaligned, without headers.
    pub fn query(&self, sql: &str) -> String {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg.sh");
        let output = Command::new("bash")
            .arg(script)
            .args(["psql", "-d", "hello_world", "-At", "-c", sql])
            .env("GNOSIS_PG_DIR", &self.dir)
            .env("GNOSIS_PG_PORT", self.port.to_string())
            .env("GNOSIS_PG_SOCKET_DIRS", self.socket_dir())
            .output()
            .expect("running scripts/pg.sh");
        assert!(
            output.status.success(),
            "scripts/pg.sh psql -c {sql:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// Runs SQL as the cluster's superuser.
    pub fn psql(&self, sql: &str) {
        self.pg_sh_with(&["psql", "-d", "hello_world", "-c", sql]);
    }

    /// The directory of the cluster's Unix socket (where every role is trusted).
    pub fn socket_dir(&self) -> PathBuf {
        self.dir.join("socket")
    }

    /// TFB's user over TCP with SCRAM.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("PGHOST", "127.0.0.1".to_string()),
            ("PGPORT", self.port.to_string()),
            ("PGUSER", "benchmarkdbuser".to_string()),
            ("PGPASSWORD", "benchmarkdbpass".to_string()),
            ("PGDATABASE", "hello_world".to_string()),
        ]
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
