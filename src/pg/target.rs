//! Where to connect: libpq's environment variables, then a local Unix socket if a trusted one
//! exists (owned, with its directory, by root, by PostgreSQL's user or by this process's),
//! then TFB's defaults (TCP to `tfb-database`). `Target` holds the chosen `Config` and its
//! resolved address, shared by every thread; names are resolved on a helper thread, never on
//! a thread that serves requests.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::auth::ALLOW_CLEARTEXT_VAR;
use super::error::DbError;
use super::url::{DatabaseUrl, UrlError};
pub use crate::sys::Address;

pub const DEFAULT_HOST: &str = "tfb-database";
pub const DEFAULT_PORT: u16 = 5432;
pub const DEFAULT_USER: &str = "benchmarkdbuser";
pub const DEFAULT_PASSWORD: &str = "benchmarkdbpass";
pub const DEFAULT_DATABASE: &str = "hello_world";

/// Directories searched for `.s.PGSQL.<port>` when PGHOST is unset (Debian's, then libpq's).
pub const SOCKET_DIRS: &[&str] = &["/var/run/postgresql", "/tmp"];
/// The account PostgreSQL's server runs as on the usual installations.
const SERVER_ACCOUNT: &str = "postgres";

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
    /// The password may be sent in clear text over TCP if the server asks for it
    /// (`GNOSIS_ALLOW_CLEARTEXT=1`; see `auth::password_policy`).
    pub allow_cleartext: bool,
}

impl Config {
    /// Reads DATABASE_URL, then PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE and
    /// GNOSIS_ALLOW_CLEARTEXT for what it leaves out, falling back to TFB's settings, and logs
    /// the chosen transport once to stderr (and the URL's parameters it ignores, by name). A
    /// URL that cannot be used (bad, or asking for TLS) is an error.
    pub fn from_env() -> Result<Config, UrlError> {
        let url = DatabaseUrl::from_var(std::env::var("DATABASE_URL").ok())?;
        if !url.ignored.is_empty() {
            crate::log!("DATABASE_URL: ignoring {}", url.ignored.join(", "));
        }
        let config = Config::from_vars(url.over(|name| std::env::var(name).ok()), |port| {
            trusted_socket_dir(SOCKET_DIRS, port)
        });
        crate::log!("PostgreSQL target {config}");
        Ok(config)
    }

    /// `from_env` with the environment and the socket search passed in (for tests):
    /// `socket_dir(port)` is the directory of the socket to use when PGHOST is unset.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
        socket_dir: impl Fn(u16) -> Option<PathBuf>,
    ) -> Config {
        let var = |name: &str| var(name).filter(|v| !v.is_empty());
        let port = var("PGPORT")
            .and_then(|p| p.parse().ok())
            .unwrap_or(DEFAULT_PORT);
        let host = match var("PGHOST") {
            Some(h) if h.starts_with('/') => Host::Unix(PathBuf::from(h)),
            Some(h) => Host::Tcp(h),
            None => socket_dir(port)
                .map(Host::Unix)
                .unwrap_or_else(|| Host::Tcp(DEFAULT_HOST.to_string())),
        };
        Config {
            host,
            port,
            user: var("PGUSER").unwrap_or_else(|| DEFAULT_USER.to_string()),
            password: var("PGPASSWORD").unwrap_or_else(|| DEFAULT_PASSWORD.to_string()),
            database: var("PGDATABASE").unwrap_or_else(|| DEFAULT_DATABASE.to_string()),
            allow_cleartext: var(ALLOW_CLEARTEXT_VAR).is_some_and(|v| v == "1"),
        }
    }
}

/// The first of `dirs` holding a socket for `port` that the PostgreSQL server's account put
/// there: the directory and the socket must each belong to root, to the `postgres` account or
/// to this process's user. Any local user can create `/tmp/.s.PGSQL.5432`, and would then
/// receive the password; such a socket is skipped, and said so.
pub fn trusted_socket_dir(dirs: &[impl AsRef<Path>], port: u16) -> Option<PathBuf> {
    let trusted = trusted_owners();
    dirs.iter().map(AsRef::as_ref).find_map(|dir| {
        let socket = socket_path(dir, port);
        // Not following a symbolic link: the socket itself must be the server's.
        let socket_meta = std::fs::symlink_metadata(&socket).ok()?;
        let dir_meta = std::fs::metadata(dir).ok()?;
        let (dir_uid, socket_uid) = (dir_meta.uid(), socket_meta.uid());
        let untrusted = if !socket_meta.file_type().is_socket() {
            Some(format!("{} is not a socket", socket.display()))
        } else if !trusted.contains(&dir_uid) {
            Some(format!("{} belongs to uid {dir_uid}", dir.display()))
        } else if !trusted.contains(&socket_uid) {
            Some(format!("it belongs to uid {socket_uid}"))
        } else {
            None
        };
        match untrusted {
            None => Some(dir.to_path_buf()),
            Some(why) => {
                crate::log!(
                    "ignoring the PostgreSQL socket {}: {why}, not root, {SERVER_ACCOUNT} or \
                     this process's user",
                    socket.display()
                );
                None
            }
        }
    })
}

/// Root, the `postgres` account if /etc/passwd has one, and this process's effective user.
fn trusted_owners() -> Vec<u32> {
    let mut owners = vec![0, rustix::process::geteuid().as_raw()];
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    owners.extend(passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next() == Some(SERVER_ACCOUNT))
            .then(|| fields.nth(1)?.parse::<u32>().ok())
            .flatten()
    }));
    owners
}

/// The socket file PostgreSQL creates in a socket directory.
pub fn socket_path(dir: &Path, port: u16) -> PathBuf {
    dir.join(format!(".s.PGSQL.{port}"))
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Unix(dir) => write!(f, "unix socket {}", socket_path(dir, self.port).display())?,
            // An IPv6 address in brackets, as in a URL, so that its port stands apart.
            Host::Tcp(host) if host.contains(':') => write!(f, "tcp [{host}]:{}", self.port)?,
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

/// Where every connection of the process connects: the `Config` and its address (for a TCP
/// host name, the one it last resolved to).
pub struct Target {
    config: Config,
    resolution: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<Resolution>,
    /// Signalled when a resolution ends.
    ended: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Resolution> {
        // The lock is never held across anything that can panic; recover regardless.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Default)]
struct Resolution {
    address: Option<Address>,
    /// Why the last resolution failed (cleared by one that succeeds).
    error: Option<String>,
    in_progress: bool,
}

impl Target {
    /// A shared target; for a TCP host the first resolution starts at once on a helper thread.
    pub fn new(config: Config) -> Arc<Target> {
        // A socket's path or an IP address: nothing to look up, now or later.
        let address = match &config.host {
            Host::Unix(dir) => Some(Address::Unix(socket_path(dir, config.port))),
            Host::Tcp(host) => host
                .parse()
                .ok()
                .map(|ip| Address::Tcp(SocketAddr::new(ip, config.port))),
        };
        let target = Arc::new(Target {
            config,
            resolution: Arc::default(),
        });
        target.resolution.lock().address = address;
        target.resolve_again();
        target
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Where to connect now, without blocking: the Unix socket's path, or the address the TCP
    /// host last resolved to (`None` until a first resolution has succeeded).
    pub fn address(&self) -> Option<Address> {
        self.resolution.lock().address.clone()
    }

    /// Why `address()` is `None`: the resolution's error, or that it has not finished yet.
    pub fn unresolved(&self) -> DbError {
        let host = match &self.config.host {
            Host::Tcp(host) => host.as_str(),
            Host::Unix(_) => "",
        };
        let state = self.resolution.lock();
        let what = match &state.error {
            Some(error) => format!("cannot resolve {host}: {error}"),
            None => format!("{host} not resolved yet"),
        };
        DbError::Io(io::Error::new(io::ErrorKind::NotFound, what).into())
    }

    /// A connection to `address()` could not be made: the name may point elsewhere now, so
    /// it is resolved again (on a helper thread; at most one resolution at a time).
    pub fn connect_failed(&self) {
        self.resolve_again();
    }

    /// Blocks until no resolution is under way, or for `timeout`; returns whether there is
    /// an address. For start-up and blocking clients, never for a thread serving requests.
    pub fn wait_resolved(&self, timeout: Duration) -> bool {
        let state = self.resolution.lock();
        let ended = &self.resolution.ended;
        let waited = ended.wait_timeout_while(state, timeout, |state| state.in_progress);
        let (state, _) = waited.unwrap_or_else(PoisonError::into_inner);
        state.address.is_some()
    }

    fn resolve_again(&self) {
        let Host::Tcp(host) = &self.config.host else {
            return;
        };
        if host.parse::<IpAddr>().is_ok() {
            return;
        }
        {
            let mut state = self.resolution.lock();
            if state.in_progress {
                return;
            }
            state.in_progress = true;
        }
        let (host, port, shared) = (host.clone(), self.config.port, self.resolution.clone());
        let spawned = std::thread::Builder::new()
            .name("gnosis-resolve".into())
            .spawn(move || {
                let result = resolve(&host, port);
                let mut state = shared.lock();
                match result {
                    Ok(address) => {
                        state.address = Some(Address::Tcp(address));
                        state.error = None;
                    }
                    // The last good address stays in use: a failed lookup (DNS down) says
                    // nothing about where the database is.
                    Err(error) => state.error = Some(error.to_string()),
                }
                state.in_progress = false;
                shared.ended.notify_all();
            });
        if let Err(error) = spawned {
            let mut state = self.resolution.lock();
            state.in_progress = false;
            state.error = Some(format!("no thread to resolve it: {error}"));
        }
    }
}

/// `host`'s first IPv4 address, else its first address (getaddrinfo: blocks).
fn resolve(host: &str, port: u16) -> io::Result<SocketAddr> {
    let addresses: Vec<SocketAddr> = (host, port).to_socket_addrs()?.collect();
    addresses
        .iter()
        .find(|a| a.is_ipv4())
        .or(addresses.first())
        .copied()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.config.fmt(f)
    }
}

/// Same as Display: the password is never shown.
impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Target({self})")
    }
}

impl From<Config> for Arc<Target> {
    fn from(config: Config) -> Arc<Target> {
        Target::new(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sockets given are found (and trusted) in the usual directories.
    fn config(vars: &[(&str, &str)], sockets: &[&str]) -> Config {
        Config::from_vars(
            |name| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            },
            socket_dirs_holding(sockets),
        )
    }

    /// Socket detection that finds the test's `sockets` in [`SOCKET_DIRS`].
    fn socket_dirs_holding<'a>(sockets: &'a [&str]) -> impl Fn(u16) -> Option<PathBuf> + 'a {
        move |port| {
            SOCKET_DIRS.iter().map(PathBuf::from).find(|dir| {
                sockets
                    .iter()
                    .any(|s| Path::new(s) == socket_path(dir, port))
            })
        }
    }

    /// What `from_env` builds from DATABASE_URL over the PG* variables.
    fn config_with_url(url: &str, vars: &[(&str, &str)], sockets: &[&str]) -> Config {
        let url = DatabaseUrl::parse(url).unwrap();
        Config::from_vars(
            url.over(|name| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }),
            socket_dirs_holding(sockets),
        )
    }

    #[test]
    fn database_url_wins_over_the_pg_variables() {
        let pg = [
            ("PGHOST", "/run/pg"),
            ("PGPORT", "6000"),
            ("PGUSER", "pguser"),
            ("PGPASSWORD", "pgpass"),
            ("PGDATABASE", "pgdb"),
        ];
        let c = config_with_url("postgres://bench:bench@localhost:5432/benchmark", &pg, &[]);
        assert_eq!(c.host, Host::Tcp("localhost".into()));
        assert_eq!(
            (c.port, &*c.user, &*c.password, &*c.database),
            (5432, "bench", "bench", "benchmark")
        );
        let c = config_with_url("postgresql://u@[::1]:7000/d", &pg, &[]);
        assert_eq!(c.to_string(), "tcp [::1]:7000 user u database d");
        assert_eq!((c.host, c.port), (Host::Tcp("::1".into()), 7000));
        let c = config_with_url("postgres://u@%2Fvar%2Frun%2Fpostgresql/d", &[], &[]);
        assert_eq!(c.host, Host::Unix("/var/run/postgresql".into()));
    }

    #[test]
    fn parts_the_url_leaves_out_fall_back_like_libpq() {
        // To the PG* variables first...
        let pg = [
            ("PGHOST", "pghost"),
            ("PGPORT", "6000"),
            ("PGPASSWORD", "pgpass"),
        ];
        let c = config_with_url("postgres://bench@/benchmark", &pg, &[]);
        assert_eq!(c.host, Host::Tcp("pghost".into()));
        assert_eq!((c.port, &*c.user, &*c.password), (6000, "bench", "pgpass"));
        // ...then to the local socket for the URL's port, then TFB's settings.
        let c = config_with_url("postgres://:55432", &[], &["/tmp/.s.PGSQL.55432"]);
        assert_eq!((c.host, c.port), (Host::Unix("/tmp".into()), 55432));
        let c = config_with_url("postgres://", &[], &[]);
        assert_eq!(c, config(&[], &[]));
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
    fn cleartext_over_tcp_only_when_allowed() {
        assert!(!config(&[], &[]).allow_cleartext);
        assert!(!config(&[("GNOSIS_ALLOW_CLEARTEXT", "yes")], &[]).allow_cleartext);
        assert!(config(&[("GNOSIS_ALLOW_CLEARTEXT", "1")], &[]).allow_cleartext);
    }

    #[test]
    fn password_never_shown() {
        let c = config(&[("PGPASSWORD", "s3cret")], &[]);
        assert!(!format!("{c} {c:?}").contains("s3cret"));
        let c = config_with_url("postgres://bench:s3cret@db:5432/benchmark", &[], &[]);
        assert_eq!(format!("{c}"), "tcp db:5432 user bench database benchmark");
        assert!(!format!("{c:?}").contains("s3cret"));
        let target = Target::new(c);
        assert!(!format!("{target} {target:?}").contains("s3cret"));
    }

    #[test]
    fn a_unix_socket_needs_no_resolution() {
        let target = Target::new(config(&[("PGHOST", "/run/pg"), ("PGPORT", "6000")], &[]));
        assert_eq!(
            target.address(),
            Some(Address::Unix("/run/pg/.s.PGSQL.6000".into()))
        );
        assert!(target.wait_resolved(Duration::ZERO));
    }

    #[test]
    fn tcp_names_resolve_on_a_helper_thread_preferring_ipv4() {
        let target = Target::new(config(&[("PGHOST", "localhost"), ("PGPORT", "6000")], &[]));
        assert!(target.wait_resolved(Duration::from_secs(10)));
        let Some(Address::Tcp(address)) = target.address() else {
            panic!("not resolved: {}", target.unresolved());
        };
        assert!(address.is_ipv4() && address.ip().is_loopback(), "{address}");
        assert_eq!(address.port(), 6000);
        // Resolving again keeps the address meanwhile.
        target.connect_failed();
        assert!(target.address().is_some());
        assert!(target.wait_resolved(Duration::from_secs(10)));
    }

    #[test]
    fn a_name_that_does_not_resolve_says_why() {
        let target = Target::new(config(&[("PGHOST", "no-such-host.invalid")], &[]));
        assert!(!target.wait_resolved(Duration::from_secs(30)));
        assert_eq!(target.address(), None);
        let error = target.unresolved().to_string();
        assert!(
            error.contains("cannot resolve no-such-host.invalid"),
            "{error}"
        );
    }
}
