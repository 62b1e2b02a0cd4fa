//! `DATABASE_URL`: a libpq connection URI, `postgres[ql]://[user[:password]@][host][:port]
//! [/database][?name=value&...]`, read into the parts gnosis uses.
//!
//! As in libpq: every part is percent-decoded; a host that decodes to an absolute path (or a
//! `host=` parameter that is one) is a Unix-socket directory; an IPv6 address is written in
//! brackets; a query parameter (`host`, `port`, `user`, `password`, `dbname`) overrides the
//! part written before it; a part left out falls back to its `PG*` variable. Unlike libpq,
//! parameters gnosis does not use are not an error: they are listed in `ignored` (by name,
//! never by value) for the caller to log. An `sslmode` that requires TLS is an error, since
//! gnosis speaks no TLS to PostgreSQL. Error messages never quote the URL: it may hold the
//! password.

use std::fmt;

/// The parts of a `DATABASE_URL`; `None` for a part it leaves out.
#[derive(Default, Clone, PartialEq, Eq)]
pub struct DatabaseUrl {
    /// A host name, an IP address (IPv6 without its brackets) or a socket directory.
    pub host: Option<String>,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub password: Option<String>,
    pub database: Option<String>,
    /// The query parameters gnosis does not use, by name, in the order given.
    pub ignored: Vec<String>,
}

/// Why a `DATABASE_URL` cannot be used; the text never contains the URL itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlError(pub String);

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DATABASE_URL: {}", self.0)
    }
}

impl std::error::Error for UrlError {}

fn error<T>(text: impl Into<String>) -> Result<T, UrlError> {
    Err(UrlError(text.into()))
}

impl DatabaseUrl {
    pub fn parse(url: &str) -> Result<DatabaseUrl, UrlError> {
        let Some(rest) = url
            .strip_prefix("postgresql://")
            .or_else(|| url.strip_prefix("postgres://"))
        else {
            return error("must start with postgres:// or postgresql://");
        };
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let mut parsed = DatabaseUrl::default();
        // The last '@' ends the user part, so that an unencoded '@' in a password still works.
        let host_port = match authority.rsplit_once('@') {
            Some((user_info, host_port)) => {
                let (user, password) = match user_info.split_once(':') {
                    Some((user, password)) => (user, Some(password)),
                    None => (user_info, None),
                };
                parsed.user = non_empty(decode(user, "the user")?);
                parsed.password = password.map(|p| decode(p, "the password")).transpose()?;
                host_port
            }
            None => authority,
        };
        if host_port.contains(',') {
            return error("several hosts are given; gnosis connects to one");
        }
        let (host, port) = split_host_port(host_port)?;
        parsed.host = non_empty(decode(host, "the host")?);
        parsed.port = port.map(parse_port).transpose()?;
        parsed.database = non_empty(decode(path, "the database name")?);
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let Some((name, value)) = pair.split_once('=') else {
                return error("a query parameter has no '=value'");
            };
            let name = decode(name, "a parameter name")?;
            let value = decode(value, "a parameter value")?;
            match name.as_str() {
                "host" => parsed.host = non_empty(value),
                "port" => parsed.port = Some(parse_port(&value)?),
                "user" => parsed.user = non_empty(value),
                "password" => parsed.password = Some(value),
                "dbname" => parsed.database = non_empty(value),
                "sslmode" => check_sslmode(&value)?,
                _ => parsed.ignored.push(name),
            }
        }
        Ok(parsed)
    }

    /// `DATABASE_URL`'s value parsed; unset or empty, a URL that gives nothing.
    pub fn from_var(value: Option<String>) -> Result<DatabaseUrl, UrlError> {
        match value.filter(|url| !url.is_empty()) {
            Some(url) => DatabaseUrl::parse(&url),
            None => Ok(DatabaseUrl::default()),
        }
    }

    /// `var` (a reader of environment variables) with this URL's parts taking precedence
    /// over the `PG*` variables they stand for.
    pub fn over(self, var: impl Fn(&str) -> Option<String>) -> impl Fn(&str) -> Option<String> {
        move |name| self.var(name).or_else(|| var(name))
    }

    /// The value `name` (a `PG*` variable) takes from this URL, if the URL gives it.
    pub fn var(&self, name: &str) -> Option<String> {
        match name {
            "PGHOST" => self.host.clone(),
            "PGPORT" => self.port.map(|port| port.to_string()),
            "PGUSER" => self.user.clone(),
            "PGPASSWORD" => self.password.clone(),
            "PGDATABASE" => self.database.clone(),
            _ => None,
        }
    }
}

/// The password is never shown.
impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseUrl")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "(hidden)"))
            .field("database", &self.database)
            .field("ignored", &self.ignored)
            .finish()
    }
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

/// `host[:port]`, the host possibly a bracketed IPv6 address.
fn split_host_port(text: &str) -> Result<(&str, Option<&str>), UrlError> {
    let Some(bracketed) = text.strip_prefix('[') else {
        return Ok(text
            .split_once(':')
            .map_or((text, None), |(host, port)| (host, Some(port))));
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

fn parse_port(text: &str) -> Result<u16, UrlError> {
    match text.parse::<u16>() {
        Ok(port) if port > 0 && text.bytes().all(|b| b.is_ascii_digit()) => Ok(port),
        // Not quoted: with a '/' or '@' left unencoded in a password, this may be part of it.
        _ => error(
            "the port is not a number from 1 to 65535 (is a ':', '/' or '@' in the password \
             not percent-encoded?)",
        ),
    }
}

fn check_sslmode(mode: &str) -> Result<(), UrlError> {
    match mode {
        "disable" | "allow" | "prefer" => Ok(()),
        "require" | "verify-ca" | "verify-full" => error(format!(
            "sslmode={mode} requires TLS, and gnosis speaks no TLS to PostgreSQL; use \
             sslmode=disable (or prefer), or leave sslmode out"
        )),
        _ => error(format!(
            "unknown sslmode '{mode}' (disable, allow, prefer, require, verify-ca, verify-full)"
        )),
    }
}

/// Percent-decodes `text` (`what` names it in errors): `%XX` is the byte XX, a NUL or bytes
/// that are not UTF-8 are errors, `+` stays a `+` (as in libpq).
fn decode(text: &str, what: &str) -> Result<String, UrlError> {
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
                Some(0) => return error(format!("{what} contains %00")),
                Some(byte) => out.push(byte),
                None => return error(format!("{what} has a '%' not followed by two hex digits")),
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).or_else(|_| error(format!("{what} is not UTF-8 once decoded")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> DatabaseUrl {
        DatabaseUrl::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"))
    }

    fn parse_error(url: &str) -> String {
        match DatabaseUrl::parse(url) {
            Ok(parsed) => panic!("{url} parsed: {parsed:?}"),
            Err(error) => error.to_string(),
        }
    }

    fn url(host: &str, port: u16, user: &str, password: &str, database: &str) -> DatabaseUrl {
        DatabaseUrl {
            host: Some(host.into()),
            port: Some(port),
            user: Some(user.into()),
            password: Some(password.into()),
            database: Some(database.into()),
            ignored: Vec::new(),
        }
    }

    #[test]
    fn httparena_url_and_both_schemes() {
        let expected = url("localhost", 5432, "bench", "bench", "benchmark");
        assert_eq!(
            parse("postgres://bench:bench@localhost:5432/benchmark"),
            expected
        );
        assert_eq!(
            parse("postgresql://bench:bench@localhost:5432/benchmark"),
            expected
        );
    }

    #[test]
    fn percent_decoding_everywhere() {
        let parsed = parse("postgres://us%40er:p%3Aa%2Fs%40s%25@db.example:6543/my%20db");
        assert_eq!(
            parsed,
            url("db.example", 6543, "us@er", "p:a/s@s%", "my db")
        );
        // Non-ASCII (UTF-8 percent-encoded), '+' kept, an unencoded '@' in the password.
        let parsed = parse("postgres://%C3%A9l%C3%A8ve:a+b@c@h/d");
        assert_eq!(parsed.user.as_deref(), Some("élève"));
        assert_eq!(parsed.password.as_deref(), Some("a+b@c"));
        assert_eq!(parsed.host.as_deref(), Some("h"));
    }

    #[test]
    fn ipv4_and_bracketed_ipv6_hosts() {
        assert_eq!(
            parse("postgres://u@127.0.0.1:1/d").host.as_deref(),
            Some("127.0.0.1")
        );
        let parsed = parse("postgres://u@[::1]:55432/d");
        assert_eq!(
            (parsed.host.as_deref(), parsed.port),
            (Some("::1"), Some(55432))
        );
        let parsed = parse("postgres://[2001:db8::7]/d");
        assert_eq!(
            (parsed.host.as_deref(), parsed.port),
            (Some("2001:db8::7"), None)
        );
    }

    #[test]
    fn unix_socket_directories() {
        let parsed = parse("postgresql://u@%2Ftmp%2Fgnosis-pg%2Fsocket:55432/hello_world");
        assert_eq!(parsed.host.as_deref(), Some("/tmp/gnosis-pg/socket"));
        assert_eq!(parsed.port, Some(55432));
        let parsed = parse("postgresql:///hello_world?host=/var/run/postgresql&port=5433");
        assert_eq!(parsed.host.as_deref(), Some("/var/run/postgresql"));
        assert_eq!(
            (parsed.port, parsed.database.as_deref()),
            (Some(5433), Some("hello_world"))
        );
    }

    #[test]
    fn missing_parts_are_none() {
        assert_eq!(parse("postgres://"), DatabaseUrl::default());
        assert_eq!(parse("postgresql:///"), DatabaseUrl::default());
        let parsed = parse("postgres://h");
        assert_eq!(parsed.host.as_deref(), Some("h"));
        assert_eq!(
            (parsed.port, &parsed.user, &parsed.password),
            (None, &None, &None)
        );
        // An empty password is a password; an empty user is no user.
        let parsed = parse("postgres://:@h/");
        assert_eq!((parsed.user, parsed.password), (None, Some(String::new())));
    }

    #[test]
    fn query_parameters_override_and_unknown_ones_are_listed_by_name() {
        let parsed = parse(
            "postgres://a:b@h:1/d?user=u2&password=p%262&dbname=d2&port=2&sslmode=prefer\
             &application_name=secret-ish&connect_timeout=3",
        );
        assert_eq!(parsed.user.as_deref(), Some("u2"));
        assert_eq!(parsed.password.as_deref(), Some("p&2"));
        assert_eq!(
            (parsed.port, parsed.database.as_deref()),
            (Some(2), Some("d2"))
        );
        assert_eq!(parsed.ignored, ["application_name", "connect_timeout"]);
        for mode in ["disable", "allow", "prefer"] {
            parse(&format!("postgres://h/d?sslmode={mode}"));
        }
    }

    #[test]
    fn tls_sslmodes_are_a_clear_error() {
        for mode in ["require", "verify-ca", "verify-full"] {
            let error = parse_error(&format!("postgres://u:pw@h/d?sslmode={mode}"));
            assert!(error.contains(&format!("sslmode={mode}")), "{error}");
            assert!(error.contains("no TLS"), "{error}");
        }
        assert!(parse_error("postgres://h/d?sslmode=sometimes").contains("unknown sslmode"));
    }

    #[test]
    fn bad_urls_are_clear_errors_that_never_quote_the_password() {
        let cases = [
            ("mysql://u:hunter2@h/d", "must start with postgres://"),
            ("hunter2", "must start with postgres://"),
            ("postgres://u:hunter2@h:port/d", "the port is not a number"),
            ("postgres://u:hunter2@h:0/d", "the port is not a number"),
            ("postgres://u:hunter2@h:65536/d", "the port is not a number"),
            ("postgres://u:hunter2@h:+5/d", "the port is not a number"),
            // A '/' left unencoded in the password ends the host part early.
            ("postgres://u:hun/ter2@h/d", "the port is not a number"),
            ("postgres://u:hunter2%zz@h/d", "the password has a '%'"),
            ("postgres://u:hunter2%@h/d", "the password has a '%'"),
            ("postgres://u:hunter2%00@h/d", "the password contains %00"),
            ("postgres://u:hunter2%ff@h/d", "the password is not UTF-8"),
            ("postgres://u:hunter2@[::1/d", "'[' has no ']'"),
            ("postgres://u:hunter2@[::1]x/d", "follows an IPv6 address"),
            ("postgres://u:hunter2@h1,h2/d", "several hosts"),
            ("postgres://u:hunter2@h/d?sslmode", "no '=value'"),
            (
                "postgres://u:hunter2@h/d?port=x",
                "the port is not a number",
            ),
        ];
        for (url, expected) in cases {
            let error = parse_error(url);
            assert!(error.starts_with("DATABASE_URL: "), "{url}: {error}");
            assert!(error.contains(expected), "{url}: {error}");
            assert!(
                !error.contains("hunter2") && !error.contains("ter2"),
                "{url}: {error}"
            );
        }
    }

    #[test]
    fn password_never_shown_by_debug() {
        let parsed = parse("postgres://u:hunter2@h/d");
        let shown = format!("{parsed:?}");
        assert!(
            !shown.contains("hunter2") && shown.contains("hidden"),
            "{shown}"
        );
    }

    #[test]
    fn var_maps_the_parts_to_libpq_names() {
        let parsed = parse("postgres://u:p@h:7/d");
        let names = [
            "PGHOST",
            "PGPORT",
            "PGUSER",
            "PGPASSWORD",
            "PGDATABASE",
            "HOME",
        ];
        let values: Vec<_> = names.iter().map(|name| parsed.var(name)).collect();
        let expected = ["h", "7", "u", "p", "d"].map(|v| Some(v.to_string()));
        assert_eq!(values[..5], expected);
        assert_eq!(values[5], None);
        assert_eq!(DatabaseUrl::default().var("PGHOST"), None);
    }
}
