//! The command line shared by both binaries.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use crate::http::MAX_BODY;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub port: u16,
    pub threads: usize,
    /// PostgreSQL connections per worker thread.
    pub pg_conns: usize,
    /// A query unanswered this long fails its request (504) and its connection is replaced.
    pub query_timeout: Duration,
    /// Connecting, authenticating and preparing must finish within this.
    pub connect_timeout: Duration,
    /// HTTP requests waiting on the database per thread; beyond it, 503 at once.
    pub max_db_requests: usize,
    /// The largest request body taken; larger gets 413 and the connection closes.
    pub max_body: usize,
    /// HttpArena's json dataset, when given on the command line.
    pub dataset: Option<PathBuf>,
}

/// Why the command line did not produce a [`Config`]: print the text and exit.
#[derive(Debug, PartialEq, Eq)]
pub enum CliExit {
    /// `--help`: print to stdout, exit 0.
    Help(String),
    /// A bad argument: print to stderr with the usage, exit 2.
    Invalid(String),
}

fn usage(program: &str) -> String {
    format!(
        "usage: {program} [--port N] [--threads N] [--pg-conns N] [--query-timeout MS]\n       \
         [--connect-timeout MS] [--max-db-requests N]\n       \
         [--max-body BYTES] [--dataset FILE]\n\n  \
         --port N              TCP port to listen on, on all addresses (default 8080)\n  \
         --threads N           worker threads, one event loop each (default: one per core)\n  \
         --pg-conns N          PostgreSQL connections per thread (default 2)\n  \
         --query-timeout MS    a query unanswered this long fails its request with 504 and\n                        \
         its connection is replaced (default 5000)\n  \
         --connect-timeout MS  connecting, authenticating and preparing must finish within\n                        \
         this (default 5000)\n  \
         --max-db-requests N   requests waiting on the database per thread; beyond it, 503\n                        \
         at once (default 4096)\n  \
         --max-body BYTES      the largest request body taken; larger gets 413 and the\n                        \
         connection closes (default {MAX_BODY})\n  \
         --dataset FILE        HttpArena's json dataset (default: $DATASET_PATH, else\n                        \
         /data/dataset.json); without it /json/{{count}} answers 503\n  \
         --help                print this help\n\n\
         PostgreSQL is found through PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE;\n\
         without PGHOST, a local socket in /var/run/postgresql or /tmp, else tfb-database.\n"
    )
}

impl Config {
    /// The process's own command line; prints the help (`more_help` after it) and exits 0,
    /// or prints the error with the usage and exits 2.
    pub fn from_command_line(program: &str, more_help: &str) -> Config {
        match Config::from_args(program, std::env::args().skip(1)) {
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
        let usage = || usage(program);
        let mut config = Config {
            port: 8080,
            threads: std::thread::available_parallelism().map_or(1, NonZeroUsize::get),
            pg_conns: 2,
            query_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            max_db_requests: 4096,
            max_body: MAX_BODY,
            dataset: None,
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
                None => (arg, None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| CliExit::Invalid(format!("{flag} needs a value\n\n{}", usage())))
            };
            let millis =
                |text: String| parse_number::<u64>(&text, &flag, &usage).map(Duration::from_millis);
            match flag.as_str() {
                "--help" | "-h" => return Err(CliExit::Help(usage())),
                "--port" => config.port = parse_number(&value()?, &flag, &usage)?,
                "--threads" => config.threads = parse_number(&value()?, &flag, &usage)?,
                "--pg-conns" => config.pg_conns = parse_number(&value()?, &flag, &usage)?,
                "--query-timeout" => config.query_timeout = millis(value()?)?,
                "--connect-timeout" => config.connect_timeout = millis(value()?)?,
                "--max-db-requests" => {
                    config.max_db_requests = parse_number(&value()?, &flag, &usage)?
                }
                "--max-body" => config.max_body = parse_number(&value()?, &flag, &usage)?,
                "--dataset" => config.dataset = Some(PathBuf::from(value()?)),
                other => {
                    return Err(CliExit::Invalid(format!(
                        "unknown argument '{other}'\n\n{}",
                        usage()
                    )))
                }
            }
        }
        Ok(config)
    }
}

/// A whole number of at least 1.
fn parse_number<T: std::str::FromStr + PartialOrd + From<u8>>(
    text: &str,
    flag: &str,
    usage: &dyn Fn() -> String,
) -> Result<T, CliExit> {
    match text.parse::<T>() {
        Ok(n) if n >= T::from(1) => Ok(n),
        _ => Err(CliExit::Invalid(format!(
            "{flag} takes a whole number of at least 1, not '{text}'\n\n{}",
            usage()
        ))),
    }
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
                "--pg-conns",
                "1",
                "--query-timeout=250",
                "--connect-timeout",
                "1000",
                "--max-db-requests",
                "8",
                "--max-body=100",
                "--dataset",
                "/tmp/items.json",
            ])
            .unwrap(),
            Config {
                port: 9000,
                threads: 3,
                pg_conns: 1,
                query_timeout: Duration::from_millis(250),
                connect_timeout: Duration::from_secs(1),
                max_db_requests: 8,
                max_body: 100,
                dataset: Some(PathBuf::from("/tmp/items.json")),
            }
        );
    }

    #[test]
    fn rejects_bad_values_and_unknown_flags() {
        for args in [
            &["--port"][..],
            &["--port", "0"],
            &["--port", "70000"],
            &["--threads", "0"],
            &["--query-timeout", "0"],
            &["--max-db-requests", "x"],
            &["--max-body", "0"],
            &["--dataset"],
            &["--bogus"],
        ] {
            assert!(matches!(parse(args), Err(CliExit::Invalid(_))), "{args:?}");
        }
        assert!(matches!(parse(&["--help"]), Err(CliExit::Help(_))));
    }
}
