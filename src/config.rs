//! The command line shared by both binaries.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use crate::app::Settings;
use crate::http::{LARGEST_MAX_BODY, MAX_BODY, SEND_TIMEOUT, TIMEOUTS};
use crate::server::Limits;
use crate::sys::Address;
use crate::transport::Listening;
use crate::upstream;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub port: u16,
    /// The TLS listener's port (when there is a certificate).
    pub tls_port: u16,
    /// The cleartext listener for h2c by prior knowledge.
    pub h2c_port: u16,
    /// The TLS listener whose ALPN offers `h2`, then `http/1.1` (when there is a
    /// certificate).
    pub h2_tls_port: u16,
    /// The UDP port of HTTP/3 over QUIC (when there is a certificate); 0: none.
    pub h3_port: u16,
    pub threads: usize,
    /// PostgreSQL connections per worker thread.
    pub pg_conns: usize,
    /// A query unanswered this long fails its request (504) and its connection is replaced.
    pub query_timeout: Duration,
    /// Connecting, authenticating and preparing must finish within this.
    pub connect_timeout: Duration,
    /// HTTP requests waiting on the database per thread; beyond it, 503 at once.
    pub max_db_requests: usize,
    /// The longest PostgreSQL message taken; a longer one replaces its connection.
    pub pg_max_message: usize,
    /// Rows one query may answer; a query answering more fails its request (500) and its
    /// connection is replaced.
    pub pg_max_rows: usize,
    /// The largest request body taken; larger gets 413 and the connection closes.
    pub max_body: usize,
    /// The longest WebSocket message taken; longer closes the connection with 1009.
    pub max_message: usize,
    /// HttpArena's json dataset, when given on the command line.
    pub dataset: Option<PathBuf>,
    /// Buffer memory per thread for its clients; past it, the connections holding the
    /// most are not read from.
    pub max_buffered: usize,
    /// Connections per thread; beyond it, accepts pause.
    pub max_conns: usize,
    /// What is unsent at any instant must be sent within this, or the connection closes.
    pub send_timeout: Duration,
    /// A keep-alive connection that sends nothing for this long is closed.
    pub idle_timeout: Duration,
    /// After SIGTERM (SIGINT, SIGQUIT), what is in flight must finish within this.
    pub drain_timeout: Duration,
    /// The edge (reverse-proxy) mode: the HTTP/1.1 server every request but a static
    /// file's is forwarded to.
    pub upstream: Option<Address>,
    /// Keep-alive connections per thread to the upstream.
    pub upstream_conns: usize,
    /// Connections per thread beyond those while answers stream to slow clients.
    pub upstream_streams: usize,
    /// A forwarded request the upstream has not answered within this gets 504.
    pub upstream_timeout: Duration,
    /// At the edge: the auth service asked about every request under `auth_prefix`, and
    /// the target it is asked at.
    pub auth: Option<(Address, String)>,
    pub auth_prefix: String,
    /// The fields of the auth service's yes passed on to the upstream.
    pub auth_fields: Vec<String>,
}

/// Connections of DATABASE_MAX_CONN's budget the worker threads leave free: one for the
/// start-up cache load (it retries in the background while the database is down, so it may
/// overlap the workers' connections), one for a replaced connection whose server process has
/// not yet noticed the close, two for an operator's or a validator's psql.
pub const RESERVED_CONNECTIONS: usize = 4;

/// Why the command line did not produce a [`Config`]: print the text and exit.
#[derive(Debug, PartialEq, Eq)]
pub enum CliExit {
    /// `--help`: print to stdout, exit 0.
    Help(String),
    /// A bad argument: print to stderr with the usage, exit 2.
    Invalid(String),
}

/// One command-line option: its flag, the value it takes, what it means, how it reads its
/// value into a [`Config`], and how its default reads (from [`Config::default`]: each
/// default is written once). `--help` and the README's table are made from these.
struct Opt {
    flag: &'static str,
    value: &'static str,
    help: &'static str,
    set: fn(&mut Config, &str) -> Result<(), String>,
    default: fn(&Config) -> String,
}

const OPTIONS: &[Opt] = &[
    Opt {
        flag: "--port",
        value: "N",
        help: "TCP port for HTTP/1.1 (and HTTP/2 by its preface) in cleartext, on all addresses; \
               0 for none",
        set: |config, text| assign(&mut config.port, port_or_off(text)),
        default: |config| config.port.to_string(),
    },
    Opt {
        flag: "--tls-port",
        value: "N",
        help: "TCP port for HTTP/1.1 over TLS 1.3, on all addresses, when TLS_CERT (else \
               /certs/server.crt) exists; 0 for none",
        set: |config, text| assign(&mut config.tls_port, port_or_off(text)),
        default: |config| config.tls_port.to_string(),
    },
    Opt {
        flag: "--h2c-port",
        value: "N",
        help: "TCP port for HTTP/2 in cleartext by prior knowledge (h2c), on all addresses; 0 for \
               none",
        set: |config, text| assign(&mut config.h2c_port, port_or_off(text)),
        default: |config| config.h2c_port.to_string(),
    },
    Opt {
        flag: "--h2-tls-port",
        value: "N",
        help: "TCP port for HTTP/2 over TLS 1.3 (ALPN h2, and http/1.1 for clients that do not \
               offer h2), on all addresses, when the certificate of --tls-port exists; 0 for none",
        set: |config, text| assign(&mut config.h2_tls_port, port_or_off(text)),
        default: |config| config.h2_tls_port.to_string(),
    },
    Opt {
        flag: "--h3-port",
        value: "N",
        help: "UDP port for HTTP/3 over QUIC (TLS 1.3, ALPN h3), on all addresses, when the \
               certificate of --tls-port exists; 0 for none",
        set: |config, text| assign(&mut config.h3_port, port_or_off(text)),
        default: |config| config.h3_port.to_string(),
    },
    Opt {
        flag: "--threads",
        value: "N",
        help: "worker threads, one event loop each",
        set: |config, text| assign(&mut config.threads, number(text)),
        default: |_| "one per core".to_string(),
    },
    Opt {
        flag: "--pg-conns",
        value: "N",
        help: "PostgreSQL connections per thread",
        set: |config, text| assign(&mut config.pg_conns, number(text)),
        default: |config| config.pg_conns.to_string(),
    },
    Opt {
        flag: "--query-timeout",
        value: "MS",
        help: "a query unanswered this long fails its request with 504 and its connection is \
               replaced",
        set: |config, text| assign(&mut config.query_timeout, millis(text)),
        default: |config| config.query_timeout.as_millis().to_string(),
    },
    Opt {
        flag: "--connect-timeout",
        value: "MS",
        help: "connecting, authenticating and preparing must finish within this",
        set: |config, text| assign(&mut config.connect_timeout, millis(text)),
        default: |config| config.connect_timeout.as_millis().to_string(),
    },
    Opt {
        flag: "--max-db-requests",
        value: "N",
        help: "requests waiting on the database per thread; beyond it, 503 at once",
        set: |config, text| assign(&mut config.max_db_requests, number(text)),
        default: |config| config.max_db_requests.to_string(),
    },
    Opt {
        flag: "--pg-max-message",
        value: "BYTES",
        help: "the longest PostgreSQL message taken; a longer one replaces its connection",
        set: |config, text| assign(&mut config.pg_max_message, number(text)),
        default: |config| config.pg_max_message.to_string(),
    },
    Opt {
        flag: "--pg-max-rows",
        value: "N",
        help: "rows a query may answer; past it the request fails with 500 and the \
               connection is replaced",
        set: |config, text| assign(&mut config.pg_max_rows, number(text)),
        default: |config| config.pg_max_rows.to_string(),
    },
    Opt {
        flag: "--max-body",
        value: "BYTES",
        help: "the largest request body taken, at most 1 GiB; larger gets 413 and the \
               connection closes",
        set: |config, text| {
            config.max_body = number(text)?;
            match config.max_body <= LARGEST_MAX_BODY {
                true => Ok(()),
                false => Err(format!("at most {LARGEST_MAX_BODY} (1 GiB), not '{text}'")),
            }
        },
        default: |config| config.max_body.to_string(),
    },
    Opt {
        flag: "--max-message",
        value: "BYTES",
        help: "the longest WebSocket message taken, at most 1 GiB; longer closes the \
               connection with 1009",
        set: |config, text| {
            config.max_message = number(text)?;
            match config.max_message <= LARGEST_MAX_BODY {
                true => Ok(()),
                false => Err(format!("at most {LARGEST_MAX_BODY} (1 GiB), not '{text}'")),
            }
        },
        default: |config| config.max_message.to_string(),
    },
    Opt {
        flag: "--dataset",
        value: "FILE",
        help: "HttpArena's json dataset; without it /json/{count} answers 503",
        set: |config, text| assign(&mut config.dataset, Ok(Some(PathBuf::from(text)))),
        default: |_| "$DATASET_PATH, else /data/dataset.json".to_string(),
    },
    Opt {
        flag: "--max-buffered",
        value: "BYTES",
        help: "buffer memory per thread for its clients; past it the connections holding \
               the most are neither read nor answered",
        set: |config, text| assign(&mut config.max_buffered, number(text)),
        default: |config| config.max_buffered.to_string(),
    },
    Opt {
        flag: "--max-conns",
        value: "N",
        help: "connections per thread; beyond it accepts pause",
        set: |config, text| assign(&mut config.max_conns, number(text)),
        default: |config| config.max_conns.to_string(),
    },
    Opt {
        flag: "--send-timeout",
        value: "MS",
        help: "what is unsent at any instant must be sent within this, else the connection \
               closes",
        set: |config, text| assign(&mut config.send_timeout, millis(text)),
        default: |config| config.send_timeout.as_millis().to_string(),
    },
    Opt {
        flag: "--idle-timeout",
        value: "MS",
        help: "a keep-alive connection that sends nothing this long is closed",
        set: |config, text| assign(&mut config.idle_timeout, millis(text)),
        default: |config| config.idle_timeout.as_millis().to_string(),
    },
    Opt {
        flag: "--drain-timeout",
        value: "MS",
        help: "after SIGTERM, SIGINT or SIGQUIT, what is in flight is finished within this, \
               then the server exits 0 (a second signal: at once)",
        set: |config, text| assign(&mut config.drain_timeout, millis(text)),
        default: |config| config.drain_timeout.as_millis().to_string(),
    },
    Opt {
        flag: "--upstream",
        value: "ADDR",
        help: "the edge (reverse-proxy) mode: /static/* from STATIC_DIR, every other request \
               forwarded over keep-alive HTTP/1.1 to ADDR (HOST:PORT, or a unix socket's path), \
               its answer passed on in the client's protocol; no database",
        set: |config, text| assign(&mut config.upstream, upstream_address(text).map(Some)),
        default: |_| "none".to_string(),
    },
    Opt {
        flag: "--upstream-conns",
        value: "N",
        help: "keep-alive connections per thread to the upstream, each carrying pipelined \
               requests",
        set: |config, text| assign(&mut config.upstream_conns, number(text)),
        default: |config| config.upstream_conns.to_string(),
    },
    Opt {
        flag: "--upstream-streams",
        value: "N",
        help: "connections per thread the edge may open beyond those: one streaming an answer \
               its client reads slowly takes no request, so another opens in its place",
        set: |config, text| assign(&mut config.upstream_streams, count(text)),
        default: |config| config.upstream_streams.to_string(),
    },
    Opt {
        flag: "--upstream-timeout",
        value: "MS",
        help: "a forwarded request the upstream has not begun to answer within this is \
               answered 504; an answer passed on whose body neither arrives nor is taken by its \
               client for as long is cut short",
        set: |config, text| assign(&mut config.upstream_timeout, millis(text)),
        default: |config| config.upstream_timeout.as_millis().to_string(),
    },
    Opt {
        flag: "--auth",
        value: "HOST:PORT/PATH",
        help: "at the edge, every request under --auth-prefix is first asked about at this \
               auth service (GET PATH with the client's Authorization and Cookie): a 2xx lets it \
               through with the --auth-fields of that answer, a 401 or 403 is the client's \
               answer, anything else 503",
        set: |config, text| assign(&mut config.auth, auth_target(text).map(Some)),
        default: |_| "none".to_string(),
    },
    Opt {
        flag: "--auth-prefix",
        value: "PATH",
        help: "the paths the auth service guards: those beginning with this",
        set: |config, text| assign(&mut config.auth_prefix, path_prefix(text)),
        default: |config| config.auth_prefix.clone(),
    },
    Opt {
        flag: "--auth-fields",
        value: "NAMES",
        help: "the fields of the auth service's yes passed on to the upstream, comma-separated \
               (a client's own are dropped from every request)",
        set: |config, text| assign(&mut config.auth_fields, field_names(text)),
        default: |config| config.auth_fields.join(","),
    },
];

/// The help: a synopsis, then each option with its meaning and default, wrapped to 80
/// columns, then where PostgreSQL is found.
fn usage(program: &str) -> String {
    let defaults = Config::default();
    let mut text = format!("usage: {program}");
    let mut column = text.len();
    for opt in OPTIONS {
        let word = format!(" [{} {}]", opt.flag, opt.value);
        if column + word.len() > 80 {
            text.push_str("\n      ");
            column = 6;
        }
        text.push_str(&word);
        column += word.len();
    }
    text.push_str("\n\n");
    for opt in OPTIONS {
        let name = format!("  {} {}", opt.flag, opt.value);
        let help = format!("{} (default {})", opt.help, (opt.default)(&defaults));
        let mut line = match name.len() < 24 {
            true => format!("{name:<24}"),
            false => format!("{name}\n{:24}", ""),
        };
        for word in help.split(' ') {
            if line.rsplit('\n').next().unwrap().len() + word.len() >= 80 {
                line.push_str(&format!("\n{:24}", ""));
            } else if !line.ends_with(' ') {
                line.push(' ');
            }
            line.push_str(word);
        }
        text.push_str(&line);
        text.push('\n');
    }
    text.push_str(&format!(
        "  --help                print this help\n\n\
         PostgreSQL is found through DATABASE_URL (postgres://user:password@host:port/database),\n\
         then PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE for what it leaves out;\n\
         without a host, a local socket in /var/run/postgresql or /tmp (if it and its directory\n\
         belong to root, postgres or this user), else tfb-database. The password is not sent\n\
         in clear text over TCP unless GNOSIS_ALLOW_CLEARTEXT=1. DATABASE_MAX_CONN=N lowers\n\
         --pg-conns so that threads x connections stays within N less {RESERVED_CONNECTIONS}\n\
         (kept for the start-up cache load, replaced connections and administration).\n"
    ));
    text
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 8080,
            tls_port: 8081,
            h2c_port: 8082,
            h2_tls_port: 8443,
            h3_port: 8443,
            threads: std::thread::available_parallelism().map_or(1, NonZeroUsize::get),
            pg_conns: 2,
            query_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            max_db_requests: 4096,
            pg_max_message: crate::pg::protocol::MAX_MESSAGE_LEN,
            pg_max_rows: crate::pg::conn::MAX_ROWS,
            max_body: MAX_BODY,
            max_message: crate::ws::MAX_MESSAGE,
            dataset: None,
            max_buffered: Limits::MAX_BUFFERED,
            max_conns: Limits::MAX_CONNS,
            send_timeout: SEND_TIMEOUT,
            idle_timeout: TIMEOUTS.idle,
            drain_timeout: Limits::DRAIN_TIMEOUT,
            upstream: None,
            upstream_conns: upstream::Settings::default().connections,
            upstream_streams: upstream::Settings::default().streams,
            upstream_timeout: upstream::Settings::default().response_timeout,
            auth: None,
            auth_prefix: "/".to_string(),
            auth_fields: vec!["X-User-Id".to_string()],
        }
    }
}

impl Config {
    /// The process's own command line with `DATABASE_MAX_CONN` applied (and logged); prints
    /// the help (`more_help` after it) and exits 0, or prints the error with the usage and
    /// exits 2.
    pub fn from_command_line(program: &str, more_help: &str) -> Config {
        let budget = std::env::var("DATABASE_MAX_CONN").ok();
        let config = Config::from_args(program, std::env::args().skip(1)).and_then(|mut config| {
            if let Some(line) = config.fit_connection_budget(budget.as_deref(), program)? {
                crate::log!("{line}");
            }
            Ok(config)
        });
        match config {
            Ok(config) => config,
            Err(CliExit::Help(text)) => {
                print!("{text}{more_help}");
                std::process::exit(0);
            }
            Err(CliExit::Invalid(text)) => {
                eprint!("{program}: {text}{more_help}");
                std::process::exit(2);
            }
        }
    }

    pub fn from_args(
        program: &str,
        args: impl IntoIterator<Item = String>,
    ) -> Result<Config, CliExit> {
        let invalid = |text: String| CliExit::Invalid(format!("{text}\n\n{}", usage(program)));
        let mut config = Config::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if arg == "--help" || arg == "-h" {
                return Err(CliExit::Help(usage(program)));
            }
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
                None => (arg, None),
            };
            let Some(opt) = OPTIONS.iter().find(|opt| opt.flag == flag) else {
                return Err(invalid(format!("unknown argument '{flag}'")));
            };
            let Some(value) = inline.or_else(|| args.next()) else {
                return Err(invalid(format!("{flag} needs a value")));
            };
            (opt.set)(&mut config, &value).map_err(|why| invalid(format!("{flag} takes {why}")))?;
        }
        if config.auth.is_some() && config.upstream.is_none() {
            return Err(invalid(
                "--auth guards an edge: it needs --upstream".to_string(),
            ));
        }
        Ok(config)
    }

    /// The ports to listen on, each with what its connections speak: the HTTP port
    /// (HTTP/1.1, and h2c by prior knowledge), the h2c port and, `with_tls` (there is a
    /// certificate), the TLS ports: HTTP/1.1's, and the one offering `h2`.
    /// A port given as 0 is not listened on.
    pub fn listening(&self, with_tls: bool) -> Vec<(u16, Listening)> {
        let mut ports = vec![
            (self.port, Listening::Http),
            (self.h2c_port, Listening::H2c),
        ];
        if with_tls {
            ports.push((self.tls_port, Listening::Tls));
            ports.push((self.h2_tls_port, Listening::H2Tls));
            ports.push((self.h3_port, Listening::Quic));
        }
        ports.retain(|&(port, _)| port != 0);
        ports
    }

    /// What answers behind the listeners, for the start-up line.
    pub fn behind(&self) -> String {
        match &self.upstream {
            Some(address) => {
                let mut behind = format!(
                    "forwarding to {address} ({} connections each)",
                    self.upstream_conns
                );
                if let Some((auth, path)) = &self.auth {
                    let prefix = &self.auth_prefix;
                    behind += &format!(", {prefix}* asked about at {auth}{path} first");
                }
                behind
            }
            None => format!("{} PostgreSQL connection(s) each", self.pg_conns),
        }
    }

    /// What the app takes from the command line (`app::prepare`).
    pub fn app_settings(&self) -> Settings {
        Settings {
            connect_timeout: self.connect_timeout,
            query_timeout: self.query_timeout,
            pg_max_message: self.pg_max_message,
            pg_max_rows: self.pg_max_rows,
            pg_conns: self.pg_conns,
            max_db_requests: self.max_db_requests,
            dataset: self.dataset.clone(),
            max_body: self.max_body,
            max_message: self.max_message,
            edge: self.upstream.is_some(),
        }
    }

    /// What each worker lets its clients cost it.
    pub fn limits(&self) -> Limits {
        Limits {
            max_buffered: self.max_buffered,
            max_conns: self.max_conns,
            timeouts: crate::http::Timeouts {
                send: self.send_timeout,
                idle: self.idle_timeout,
                ..TIMEOUTS
            },
            drain_timeout: self.drain_timeout,
            upstream: self.upstream.clone().map(|address| {
                let settings = upstream::Settings {
                    connections: self.upstream_conns,
                    streams: self.upstream_streams,
                    response_timeout: self.upstream_timeout,
                    ..upstream::Settings::default()
                };
                let auth = self.auth.clone().map(|(address, path)| {
                    let auth = upstream::AuthSettings {
                        address,
                        path,
                        prefix: self.auth_prefix.clone(),
                        grants: self.auth_fields.clone(),
                    };
                    // Its answers are heads: none streams.
                    (
                        auth,
                        upstream::Settings {
                            streams: 0,
                            ..settings
                        },
                    )
                });
                upstream::ProxySettings {
                    address,
                    settings,
                    auth,
                }
            }),
        }
    }

    /// Lowers `pg_conns` so that `threads` x `pg_conns` stays within `budget`
    /// (`DATABASE_MAX_CONN`, the whole server's share of the database's connections) less
    /// [`RESERVED_CONNECTIONS`], but never below one connection per thread. Returns the line
    /// that says what was chosen, or `None` without a budget (unset or empty).
    pub fn fit_connection_budget(
        &mut self,
        budget: Option<&str>,
        program: &str,
    ) -> Result<Option<String>, CliExit> {
        let Some(text) = budget.filter(|text| !text.is_empty()) else {
            return Ok(None);
        };
        let budget: usize = number(text).map_err(|why| {
            CliExit::Invalid(format!(
                "DATABASE_MAX_CONN takes {why}\n\n{}",
                usage(program)
            ))
        })?;
        let share = budget.saturating_sub(RESERVED_CONNECTIONS) / self.threads;
        self.pg_conns = self.pg_conns.min(share).max(1);
        let total = self.pg_conns * self.threads;
        let mut line = format!(
            "DATABASE_MAX_CONN={budget}: {} PostgreSQL connection(s) per thread, {total} for \
             {} threads ({RESERVED_CONNECTIONS} kept for the start-up load, replaced \
             connections and administration)",
            self.pg_conns, self.threads
        );
        if total + RESERVED_CONNECTIONS > budget {
            line.push_str("; more than the budget allows: lower --threads");
        }
        Ok(Some(line))
    }
}

/// Sets `field` to `value`, if it was read.
fn assign<T>(field: &mut T, value: Result<T, String>) -> Result<(), String> {
    *field = value?;
    Ok(())
}

/// A whole number of at least 1.
fn number<T: std::str::FromStr + PartialOrd + From<u8>>(text: &str) -> Result<T, String> {
    match text.parse::<T>() {
        Ok(n) if n >= T::from(1) => Ok(n),
        _ => Err(format!("a whole number of at least 1, not '{text}'")),
    }
}

/// The upstream's address: a path (a unix socket), or HOST:PORT, resolved now (the first
/// address the name has).
fn upstream_address(text: &str) -> Result<Address, String> {
    use std::net::ToSocketAddrs;
    if text.starts_with('/') {
        return Ok(Address::Unix(PathBuf::from(text)));
    }
    let why =
        |detail: String| format!("HOST:PORT or a unix socket's path, not '{text}' ({detail})");
    let mut found = text.to_socket_addrs().map_err(|err| why(err.to_string()))?;
    found
        .next()
        .map(Address::Tcp)
        .ok_or_else(|| why("no address".to_string()))
}

/// The auth service's address and target: `HOST:PORT/PATH`.
fn auth_target(text: &str) -> Result<(Address, String), String> {
    let why = || format!("HOST:PORT/PATH, not '{text}'");
    let slash = text.find('/').filter(|&at| at > 0).ok_or_else(why)?;
    let (address, path) = text.split_at(slash);
    if !path.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(why());
    }
    let address = upstream_address(address).map_err(|_| why())?;
    Ok((address, path.to_string()))
}

/// A path's beginning: `/` and what follows it.
fn path_prefix(text: &str) -> Result<String, String> {
    match text.starts_with('/') {
        true => Ok(text.to_string()),
        false => Err(format!("a path beginning with '/', not '{text}'")),
    }
}

/// Field names (tokens), comma-separated; none is none.
fn field_names(text: &str) -> Result<Vec<String>, String> {
    let names = text
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty());
    names
        .map(|name| match crate::h1::is_token(name.as_bytes()) {
            true => Ok(name.to_string()),
            false => Err(format!("field names separated by commas, not '{text}'")),
        })
        .collect()
}

/// A whole number, 0 included.
fn count(text: &str) -> Result<usize, String> {
    text.parse()
        .map_err(|_| format!("a whole number, not '{text}'"))
}

/// A port, or 0 for none.
fn port_or_off(text: &str) -> Result<u16, String> {
    text.parse::<u16>()
        .map_err(|_| format!("a port (0 for none), not '{text}'"))
}

/// A whole number of milliseconds, at least 1.
fn millis(text: &str) -> Result<Duration, String> {
    number(text).map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, CliExit> {
        Config::from_args("gnosis", args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn defaults_to_port_8080_and_one_thread_per_core() {
        let config = parse(&[]).unwrap();
        assert_eq!(config.port, 8080);
        assert_eq!(
            config.threads,
            std::thread::available_parallelism().unwrap().get()
        );
        assert_eq!(config.query_timeout, Duration::from_secs(5));
    }

    #[test]
    fn takes_values_separately_or_after_an_equals_sign() {
        assert_eq!(
            parse(&[
                "--port",
                "9000",
                "--threads=3",
                "--h2c-port=8092",
                "--h2-tls-port",
                "8453",
                "--h3-port=0",
                "--pg-conns",
                "1",
                "--query-timeout=250",
                "--connect-timeout",
                "1000",
                "--max-db-requests",
                "8",
                "--pg-max-message=1000",
                "--pg-max-rows",
                "12",
                "--max-body=100",
                "--max-message",
                "200",
                "--dataset",
                "/tmp/items.json",
                "--max-buffered=1000000",
                "--max-conns",
                "50",
                "--send-timeout=1500",
                "--idle-timeout",
                "90000",
                "--drain-timeout=2500",
                "--upstream=127.0.0.1:9090",
                "--upstream-conns",
                "2",
                "--upstream-streams=9",
                "--upstream-timeout=700",
                "--auth=127.0.0.1:9091/_auth",
                "--auth-prefix",
                "/api/",
                "--auth-fields",
                "X-User-Id, X-Role",
            ])
            .unwrap(),
            Config {
                port: 9000,
                tls_port: 8081,
                h2c_port: 8092,
                h2_tls_port: 8453,
                h3_port: 0,
                threads: 3,
                pg_conns: 1,
                query_timeout: Duration::from_millis(250),
                connect_timeout: Duration::from_secs(1),
                max_db_requests: 8,
                pg_max_message: 1000,
                pg_max_rows: 12,
                max_body: 100,
                max_message: 200,
                dataset: Some(PathBuf::from("/tmp/items.json")),
                max_buffered: 1_000_000,
                max_conns: 50,
                send_timeout: Duration::from_millis(1500),
                idle_timeout: Duration::from_secs(90),
                drain_timeout: Duration::from_millis(2500),
                upstream: Some(Address::Tcp("127.0.0.1:9090".parse().unwrap())),
                upstream_conns: 2,
                upstream_streams: 9,
                upstream_timeout: Duration::from_millis(700),
                auth: Some((
                    Address::Tcp("127.0.0.1:9091".parse().unwrap()),
                    "/_auth".to_string()
                )),
                auth_prefix: "/api/".to_string(),
                auth_fields: vec!["X-User-Id".to_string(), "X-Role".to_string()],
            }
        );
    }

    /// `--upstream` takes an address, a name to resolve or a unix socket's path, and turns
    /// the edge mode on: the upstream with its settings in the workers' limits, no database
    /// for the app.
    #[test]
    fn the_upstream_makes_an_edge() {
        let edge = parse(&["--upstream", "localhost:8080", "--upstream-timeout=500"]).unwrap();
        let upstream::ProxySettings {
            address,
            settings,
            auth,
        } = edge.limits().upstream.unwrap();
        assert_eq!(auth, None);
        let Address::Tcp(socket) = address else {
            panic!("{address}")
        };
        assert!(socket.ip().is_loopback() && socket.port() == 8080);
        assert_eq!(settings.response_timeout, Duration::from_millis(500));
        assert!(edge.app_settings().edge);
        let unix = parse(&["--upstream", "/run/app.sock"]).unwrap();
        assert_eq!(
            unix.upstream,
            Some(Address::Unix(PathBuf::from("/run/app.sock")))
        );
        assert!(Config::default().limits().upstream.is_none());
        assert!(!Config::default().app_settings().edge);
        for bad in ["no-port", "host:99999", ""] {
            assert!(parse(&["--upstream", bad]).is_err(), "{bad}");
        }
    }

    /// `--auth` puts an auth service before the upstream, for the paths under
    /// `--auth-prefix` (all by default), passing X-User-Id on unless told otherwise; it
    /// guards an edge only.
    #[test]
    fn the_auth_service_guards_the_edge() {
        let edge = parse(&["--upstream=127.0.0.1:8080", "--auth=127.0.0.1:9090/_auth"]).unwrap();
        let (auth, settings) = edge.limits().upstream.unwrap().auth.unwrap();
        assert_eq!(
            auth,
            upstream::AuthSettings {
                address: Address::Tcp("127.0.0.1:9090".parse().unwrap()),
                path: "/_auth".to_string(),
                prefix: "/".to_string(),
                grants: vec!["X-User-Id".to_string()],
            }
        );
        assert_eq!(settings.connections, edge.upstream_conns);
        assert!(parse(&["--auth=127.0.0.1:9090/_auth"]).is_err());
        for bad in ["127.0.0.1:9090", "/_auth", "127.0.0.1:9090/a b"] {
            let args = ["--upstream=127.0.0.1:8080", "--auth", bad];
            assert!(parse(&args).is_err(), "{bad}");
        }
        assert!(parse(&["--auth-prefix", "api"]).is_err());
        assert!(parse(&["--auth-fields", "X-User-Id,bad name"]).is_err());
    }

    /// Each listener is on unless its port is 0; the TLS ones and HTTP/3 only with a
    /// certificate.
    #[test]
    fn a_port_of_0_is_not_listened_on() {
        let edge = parse(&["--port=0", "--h2c-port=0", "--tls-port=0"]).unwrap();
        assert_eq!(
            edge.listening(true),
            [(8443, Listening::H2Tls), (8443, Listening::Quic)]
        );
        assert_eq!(edge.listening(false), []);
    }

    /// HTTP/3 listens on UDP beside the TLS ports, only with a certificate, and not at all
    /// with `--h3-port 0`.
    #[test]
    fn http3_listens_with_a_certificate_unless_its_port_is_0() {
        let quic = |config: &Config, tls| {
            let ports = config.listening(tls);
            ports
                .iter()
                .filter(|(_, kind)| *kind == Listening::Quic)
                .count()
        };
        let config = Config::default();
        assert_eq!((quic(&config, true), quic(&config, false)), (1, 0));
        let off = parse(&["--h3-port", "0"]).unwrap();
        assert_eq!(quic(&off, true), 0);
    }

    /// The app gets its options as given: each from its own flag.
    #[test]
    fn the_app_settings_are_the_apps_options() {
        let config = parse(&[
            "--connect-timeout=1000",
            "--query-timeout=250",
            "--pg-max-message=1000",
            "--pg-max-rows=12",
            "--pg-conns=3",
            "--max-db-requests=8",
            "--dataset=/tmp/items.json",
            "--max-body=100",
            "--max-message=200",
        ])
        .unwrap();
        assert_eq!(
            config.app_settings(),
            Settings {
                connect_timeout: Duration::from_secs(1),
                query_timeout: Duration::from_millis(250),
                pg_max_message: 1000,
                pg_max_rows: 12,
                pg_conns: 3,
                max_db_requests: 8,
                dataset: Some(PathBuf::from("/tmp/items.json")),
                max_body: 100,
                max_message: 200,
                edge: false,
            }
        );
    }

    #[test]
    fn database_max_conn_caps_threads_times_connections() {
        let fit = |threads: usize, pg_conns: usize, budget: Option<&str>| {
            let mut config = parse(&[]).unwrap();
            (config.threads, config.pg_conns) = (threads, pg_conns);
            let line = config.fit_connection_budget(budget, "gnosis");
            line.map(|line| (config.pg_conns, line))
        };
        // HttpArena's 256 on 64 threads: 252 / 64 = 3 each, so --pg-conns 8 becomes 3.
        let (pg_conns, line) = fit(64, 8, Some("256")).unwrap();
        assert_eq!(pg_conns, 3);
        let line = line.unwrap();
        assert!(
            line.contains(
                "DATABASE_MAX_CONN=256: 3 PostgreSQL connection(s) per thread, 192 for 64 threads"
            ),
            "{line}"
        );
        assert!(!line.contains("lower --threads"), "{line}");
        // Within the budget: unchanged; never below one per thread, and said so.
        assert_eq!(fit(2, 2, Some("256")).unwrap().0, 2);
        assert_eq!(fit(4, 2, Some("12")).unwrap().0, 2);
        assert_eq!(fit(4, 2, Some("11")).unwrap().0, 1);
        let (pg_conns, line) = fit(64, 2, Some("10")).unwrap();
        assert_eq!(pg_conns, 1);
        assert!(line.unwrap().ends_with("lower --threads"));
        // Unset or empty: no budget, nothing logged.
        assert_eq!(fit(2, 5, None).unwrap(), (5, None));
        assert_eq!(fit(2, 5, Some("")).unwrap(), (5, None));
        for bad in ["0", "-1", "many", "2.5"] {
            let Err(CliExit::Invalid(text)) = fit(2, 2, Some(bad)) else {
                panic!("DATABASE_MAX_CONN={bad} accepted");
            };
            assert!(
                text.starts_with("DATABASE_MAX_CONN takes a whole number"),
                "{text}"
            );
        }
    }

    #[test]
    fn rejects_bad_values_and_unknown_flags() {
        for args in [
            &["--port"][..],
            &["--port", "-1"],
            &["--port", "70000"],
            &["--threads", "0"],
            &["--query-timeout", "0"],
            &["--max-db-requests", "x"],
            &["--pg-max-rows", "0"],
            &["--max-body", "0"],
            &["--max-body", "1073741825"],
            &["--max-buffered", "0"],
            &["--max-conns", "-1"],
            &["--send-timeout", "0"],
            &["--idle-timeout", "0"],
            &["--dataset"],
            &["--bogus"],
        ] {
            assert!(matches!(parse(args), Err(CliExit::Invalid(_))), "{args:?}");
        }
        assert!(matches!(parse(&["--help"]), Err(CliExit::Help(_))));
    }

    /// The README's table of options says what `--help` says: the same options, each with
    /// its default.
    #[test]
    fn the_readme_table_has_every_option_with_its_default() {
        let readme = include_str!("../README.md");
        let rows: Vec<(String, String)> = readme
            .lines()
            .filter_map(|line| {
                let mut cells = line.strip_prefix("| `--")?.split(" | ");
                let flag = format!("--{}", cells.next()?.strip_suffix('`')?);
                Some((flag, cells.next()?.replace('`', "")))
            })
            .collect();
        let defaults = Config::default();
        let flags: Vec<&str> = rows.iter().map(|(flag, _)| flag.as_str()).collect();
        let expected: Vec<&str> = OPTIONS.iter().map(|opt| opt.flag).collect();
        assert_eq!(flags, expected, "the README's options, in order");
        for ((flag, default), opt) in rows.iter().zip(OPTIONS) {
            let wanted = (opt.default)(&defaults);
            assert!(
                default.starts_with(&wanted),
                "{flag}: README says {default:?}, the code {wanted:?}"
            );
        }
    }
}
