//! A redis-server of the test's own on a port of its choosing (no persistence), killed when
//! dropped, and `redis-cli` to look into it.
//!
//! redis-server must be installed (`apt-get install redis-server`; scripts/test.sh installs
//! it): without it the tests that need one fail, they are not skipped.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Child,
    pub port: u16,
}

impl RedisServer {
    /// Started on `port`, once it listens there.
    pub fn start(port: u16) -> RedisServer {
        let spawned = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--dir", &std::env::temp_dir().to_string_lossy()])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(error) => panic!(
                "cannot start redis-server ({error}): install it (apt-get install redis-server; \
                 scripts/test.sh installs it)"
            ),
        };
        let server = RedisServer { child, port };
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(address).is_err() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// What gnosis's `REDIS_URL` says to reach it.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `redis-cli` with `args` against it: its output, without the last newline (a nil is
    /// empty).
    pub fn cli(&self, args: &[&str]) -> String {
        let output = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("running redis-cli");
        assert!(output.status.success(), "redis-cli {args:?}: {output:?}");
        let text = String::from_utf8(output.stdout).expect("redis-cli's output is UTF-8");
        text.strip_suffix('\n').unwrap_or(&text).to_string()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
