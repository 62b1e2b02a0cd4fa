//! Where to connect: libpq's environment variables, then a local Unix socket if one exists,
//! then TFB's defaults (TCP to `tfb-database`).

use std::fmt;
use std::path::{Path, PathBuf};

pub const DEFAULT_HOST: &str = "tfb-database";
pub const DEFAULT_PORT: u16 = 5432;
pub const DEFAULT_USER: &str = "benchmarkdbuser";
pub const DEFAULT_PASSWORD: &str = "benchmarkdbpass";
pub const DEFAULT_DATABASE: &str = "hello_world";

/// Directories searched for `.s.PGSQL.<port>` when PGHOST is unset (Debian's, then libpq's).
pub const SOCKET_DIRS: &[&str] = &["/var/run/postgresql", "/tmp"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// The directory holding the `.s.PGSQL.<port>` socket.
    Unix(PathBuf),
    /// A host name or address.
    Tcp(String),
}

#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    pub host: Host,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub database: String,
}

impl Config {
    /// Reads PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE, falling back to TFB's
    /// settings, and logs the chosen transport once to stderr.
    pub fn from_env() -> Config {
        let config = Config::from_vars(|name| std::env::var(name).ok(), |path| path.exists());
        eprintln!("gnosis: PostgreSQL target {config}");
        config
    }

    /// `from_env` with the environment and the file system passed in (for tests).
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
        socket_exists: impl Fn(&Path) -> bool,
    ) -> Config {
        let var = |name: &str| var(name).filter(|v| !v.is_empty());
        let port = var("PGPORT")
            .and_then(|p| p.parse().ok())
            .unwrap_or(DEFAULT_PORT);
        let host = match var("PGHOST") {
            Some(h) if h.starts_with('/') => Host::Unix(PathBuf::from(h)),
            Some(h) => Host::Tcp(h),
            None => SOCKET_DIRS
                .iter()
                .map(PathBuf::from)
                .find(|dir| socket_exists(&socket_path(dir, port)))
                .map(Host::Unix)
                .unwrap_or_else(|| Host::Tcp(DEFAULT_HOST.to_string())),
        };
        Config {
            host,
            port,
            user: var("PGUSER").unwrap_or_else(|| DEFAULT_USER.to_string()),
            password: var("PGPASSWORD").unwrap_or_else(|| DEFAULT_PASSWORD.to_string()),
            database: var("PGDATABASE").unwrap_or_else(|| DEFAULT_DATABASE.to_string()),
        }
    }
}

/// The socket file PostgreSQL creates in a socket directory.
pub fn socket_path(dir: &Path, port: u16) -> PathBuf {
    dir.join(format!(".s.PGSQL.{port}"))
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Unix(dir) => write!(f, "unix socket {}", socket_path(dir, self.port).display())?,
            Host::Tcp(host) => write!(f, "tcp {host}:{}", self.port)?,
        }
        write!(f, " user {} database {}", self.user, self.database)
    }
}

/// Same as Display: the password is never shown.
impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Config({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)], sockets: &[&str]) -> Config {
        Config::from_vars(
            |name| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            },
            |path| sockets.iter().any(|s| Path::new(s) == path),
        )
    }

    #[test]
    fn tfb_defaults_without_env_or_socket() {
        let c = config(&[], &[]);
        assert_eq!(c.host, Host::Tcp("tfb-database".into()));
        assert_eq!(
            (c.port, &*c.user, &*c.password, &*c.database),
            (5432, "benchmarkdbuser", "benchmarkdbpass", "hello_world")
        );
    }

    #[test]
    fn env_wins_over_socket_detection() {
        let c = config(
            &[
                ("PGHOST", "127.0.0.1"),
                ("PGPORT", "55432"),
                ("PGUSER", "u"),
            ],
            &["/tmp/.s.PGSQL.55432"],
        );
        assert_eq!(c.host, Host::Tcp("127.0.0.1".into()));
        assert_eq!((c.port, &*c.user), (55432, "u"));
        let c = config(&[("PGHOST", "/run/pg")], &[]);
        assert_eq!(c.host, Host::Unix("/run/pg".into()));
    }

    #[test]
    fn socket_detected_for_the_port() {
        let c = config(&[("PGPORT", "55432")], &["/tmp/.s.PGSQL.55432"]);
        assert_eq!(c.host, Host::Unix("/tmp".into()));
        let c = config(&[], &["/tmp/.s.PGSQL.55432"]);
        assert_eq!(c.host, Host::Tcp("tfb-database".into()));
        let c = config(
            &[],
            &["/var/run/postgresql/.s.PGSQL.5432", "/tmp/.s.PGSQL.5432"],
        );
        assert_eq!(c.host, Host::Unix("/var/run/postgresql".into()));
    }

    #[test]
    fn password_never_shown() {
        let c = config(&[("PGPASSWORD", "s3cret")], &[]);
        assert!(!format!("{c} {c:?}").contains("s3cret"));
    }
}
