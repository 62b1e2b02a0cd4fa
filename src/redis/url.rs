//! `REDIS_URL`: `redis://[[user]:password@]host[:port][/db]` (port 6379, db 0 unless
//! given), or a Unix socket, `unix:///path/to/redis.sock[?db=N]`.
//!
//! The user and password are percent-decoded; an IPv6 address is written in brackets.
//! `rediss://` (TLS) is refused: gnosis speaks no TLS to Redis. Neither the errors nor
//! `Debug` show the password.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use super::protocol::encode_command;
use crate::link::Address;

pub const DEFAULT_PORT: u16 = 6379;

/// Where the server is, still a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// A host name or an IP address (IPv6 without its brackets).
    Tcp {
        host: String,
        port: u16,
    },
    Unix(PathBuf),
}

impl Endpoint {
    /// The address to connect to: a name is resolved here (getaddrinfo: it blocks, so once
    /// at start-up), its first IPv4 address preferred.
    pub fn resolve(&self) -> io::Result<Address> {
        match self {
            Endpoint::Unix(path) => Ok(Address::Unix(path.clone())),
            Endpoint::Tcp { host, port } => {
                if let Ok(ip) = host.parse::<IpAddr>() {
                    return Ok(Address::Tcp(SocketAddr::new(ip, *port)));
                }
                let addresses: Vec<SocketAddr> =
                    (host.as_str(), *port).to_socket_addrs()?.collect();
                let first = addresses.iter().find(|a| a.is_ipv4()).or(addresses.first());
                let none =
                    || io::Error::new(io::ErrorKind::NotFound, format!("{host}: no address"));
                first.copied().map(Address::Tcp).ok_or_else(none)
            }
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            Endpoint::Tcp { host, port } => write!(f, "{host}:{port}"),
            Endpoint::Unix(path) => write!(f, "unix socket {}", path.display()),
        }
    }
}

/// What every connection says once connected, before any command: who it is, which database.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Session {
    /// An ACL user (Redis 6+); without one, the password is the default user's.
    pub username: Option<Vec<u8>>,
    pub password: Option<Vec<u8>>,
    pub db: u32,
}

impl Session {
    /// The commands that set the session up (`AUTH`, `SELECT`), encoded, and how many: their
    /// replies come first on a connection.
    pub fn setup(&self) -> (Vec<u8>, usize) {
        let mut out = Vec::new();
        let mut count = 0;
        if let Some(password) = &self.password {
            match &self.username {
                Some(user) => encode_command(&[b"AUTH", user, password], &mut out),
                None => encode_command(&[b"AUTH", password], &mut out),
            }
            count += 1;
        }
        if self.db != 0 {
            let db = itoa::Buffer::new().format(self.db).as_bytes().to_vec();
            encode_command(&[b"SELECT", &db], &mut out);
            count += 1;
        }
        (out, count)
    }
}

/// The password is never shown.
impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field(
                "username",
                &self.username.as_deref().map(String::from_utf8_lossy),
            )
            .field("password", &self.password.as_ref().map(|_| "(hidden)"))
            .field("db", &self.db)
            .finish()
    }
}

/// A parsed `REDIS_URL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisUrl {
    pub endpoint: Endpoint,
    pub session: Session,
}

/// Why a `REDIS_URL` cannot be used; the text never quotes the URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrlError(pub String);

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "REDIS_URL: {}", self.0)
    }
}

impl std::error::Error for UrlError {}

fn error<T>(text: &str) -> Result<T, UrlError> {
    Err(UrlError(text.to_string()))
}

impl RedisUrl {
    pub fn parse(url: &str) -> Result<RedisUrl, UrlError> {
        if let Some(rest) = url.strip_prefix("unix://") {
            return parse_unix(rest);
        }
        if url.starts_with("rediss://") {
            return error("rediss:// asks for TLS, and gnosis speaks no TLS to Redis");
        }
        let Some(rest) = url.strip_prefix("redis://") else {
            return error("must start with redis:// or unix://");
        };
        if rest.contains('?') || rest.contains('#') {
            return error(
                "query parameters are not supported in redis:// (the db goes in the path)",
            );
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let mut session = Session::default();
        // The last '@' ends the user part, so that an unencoded '@' in a password still works.
        let host_port = match authority.rsplit_once('@') {
            Some((user_info, host_port)) => {
                let (user, password) = user_info.split_once(':').unwrap_or((user_info, ""));
                session.username = Some(decode(user, "the user")?).filter(|u| !u.is_empty());
                session.password =
                    Some(decode(password, "the password")?).filter(|p| !p.is_empty());
                if session.username.is_some() && session.password.is_none() {
                    return error("a user without a password");
                }
                host_port
            }
            None => authority,
        };
        let (host, port) = split_host_port(host_port)?;
        if host.is_empty() {
            return error("no host");
        }
        let port = match port {
            None => DEFAULT_PORT,
            Some(port) => match port.parse::<u16>() {
                Ok(number) if number > 0 && port.bytes().all(|b| b.is_ascii_digit()) => number,
                _ => return error("the port is not a number from 1 to 65535"),
            },
        };
        session.db = parse_db(path)?;
        let host = host.to_string();
        Ok(RedisUrl {
            endpoint: Endpoint::Tcp { host, port },
            session,
        })
    }
}

/// `/path/to/redis.sock[?db=N]` (what follows `unix://`).
fn parse_unix(rest: &str) -> Result<RedisUrl, UrlError> {
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    if !path.starts_with('/') {
        return error("a unix:// socket path must be absolute (unix:///path/to/redis.sock)");
    }
    let db = match query {
        "" => 0,
        _ => match query.strip_prefix("db=") {
            Some(db) => parse_db(db)?,
            None => return error("unix:// takes one query parameter, db=N"),
        },
    };
    Ok(RedisUrl {
        endpoint: Endpoint::Unix(PathBuf::from(path)),
        session: Session {
            db,
            ..Session::default()
        },
    })
}

fn parse_db(text: &str) -> Result<u32, UrlError> {
    match text {
        "" => Ok(0),
        _ if text.bytes().all(|b| b.is_ascii_digit()) => text
            .parse()
            .or_else(|_| error("the db number is too large")),
        _ => error("the db is not a number (is a '/' in the password not percent-encoded?)"),
    }
}

fn split_host_port(text: &str) -> Result<(&str, Option<&str>), UrlError> {
    let Some(bracketed) = text.strip_prefix('[') else {
        return Ok(match text.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        });
    };
    match bracketed.split_once(']') {
        Some((address, "")) => Ok((address, None)),
        Some((address, after)) => match after.strip_prefix(':') {
            Some(port) => Ok((address, Some(port))),
            None => error("something other than ':port' follows an IPv6 address's ']'"),
        },
        None => error("an IPv6 address's '[' has no ']'"),
    }
}

/// Percent-decodes `text` (`what` names it in errors): `%XX` is the byte XX, any byte.
fn decode(text: &str, what: &str) -> Result<Vec<u8>, UrlError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|pair| {
                let pair = std::str::from_utf8(pair).ok()?;
                u8::from_str_radix(pair, 16).ok()
            });
            match hex {
                Some(byte) => out.push(byte),
                None => {
                    return Err(UrlError(format!(
                        "{what} has a '%' not followed by two hex digits"
                    )))
                }
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(host: &str, port: u16) -> Endpoint {
        Endpoint::Tcp {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn host_port_and_db() {
        let url = RedisUrl::parse("redis://cache").unwrap();
        assert_eq!(url.endpoint, tcp("cache", 6379));
        assert_eq!(url.session, Session::default());
        let url = RedisUrl::parse("redis://10.0.0.2:6380/").unwrap();
        assert_eq!(url.endpoint, tcp("10.0.0.2", 6380));
        assert_eq!(url.session.db, 0);
        let url = RedisUrl::parse("redis://[::1]:7000/3").unwrap();
        assert_eq!(url.endpoint, tcp("::1", 7000));
        assert_eq!(url.endpoint.to_string(), "[::1]:7000");
        assert_eq!(url.session.db, 3);
    }

    #[test]
    fn password_and_user_are_decoded_and_never_shown() {
        let url = RedisUrl::parse("redis://:s%2Fe@cr@t@redis:6379/2").unwrap();
        assert_eq!(url.endpoint, tcp("redis", 6379));
        assert_eq!(url.session.password.as_deref(), Some(&b"s/e@cr@t"[..]));
        assert_eq!(url.session.username, None);
        assert_eq!(url.session.db, 2);
        let shown = format!("{url:?}");
        assert!(
            !shown.contains("cr@t") && shown.contains("(hidden)"),
            "{shown}"
        );
        let url = RedisUrl::parse("redis://app:pw@redis").unwrap();
        assert_eq!(url.session.username.as_deref(), Some(&b"app"[..]));
        // The set-up: AUTH user password, then SELECT when the db is not 0.
        let (setup, count) = url.session.setup();
        assert_eq!(count, 1);
        assert_eq!(setup, b"*3\r\n$4\r\nAUTH\r\n$3\r\napp\r\n$2\r\npw\r\n");
        let url = RedisUrl::parse("redis://:pw@redis/9").unwrap();
        let (setup, count) = url.session.setup();
        assert_eq!(count, 2);
        assert!(setup.ends_with(b"*2\r\n$6\r\nSELECT\r\n$1\r\n9\r\n"));
        assert_eq!(Session::default().setup(), (Vec::new(), 0));
    }

    #[test]
    fn unix_sockets() {
        let url = RedisUrl::parse("unix:///run/redis/redis.sock").unwrap();
        assert_eq!(url.endpoint, Endpoint::Unix("/run/redis/redis.sock".into()));
        let url = RedisUrl::parse("unix:///tmp/r.sock?db=4").unwrap();
        assert_eq!(url.session.db, 4);
        assert_eq!(
            url.endpoint.resolve().unwrap(),
            Address::Unix("/tmp/r.sock".into())
        );
    }

    #[test]
    fn bad_urls_say_why_without_the_password() {
        let bad = [
            "http://redis",
            "rediss://:hunter2@redis",
            "redis://",
            "redis://:hunter2@",
            "redis://:hunter2@redis:0",
            "redis://redis:65536",
            "redis://redis:+1",
            "redis://:hunter2@redis/x",
            "redis://:hun/ter2@redis",
            "redis://redis/99999999999",
            "redis://:hunter2@redis?db=2",
            "redis://[::1",
            "redis://[::1]x",
            "redis://user@redis",
            "redis://:hunter2%zz@redis",
            "unix://relative.sock",
            "unix:///tmp/r.sock?x=1",
        ];
        for url in bad {
            let error = RedisUrl::parse(url).unwrap_err().to_string();
            assert!(error.starts_with("REDIS_URL: "), "{url}: {error}");
            assert!(
                !error.contains("hun") && !error.contains("ter2"),
                "{url}: {error}"
            );
        }
    }

    #[test]
    fn ip_addresses_resolve_without_a_lookup() {
        let url = RedisUrl::parse("redis://127.0.0.1:6390").unwrap();
        assert_eq!(
            url.endpoint.resolve().unwrap(),
            Address::Tcp("127.0.0.1:6390".parse().unwrap())
        );
    }
}
