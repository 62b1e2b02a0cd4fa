//! The command line shared by both binaries.

use std::num::NonZeroUsize;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub port: u16,
    pub threads: usize,
    /// PostgreSQL connections per worker thread (servers with the database tests only).
    pub pg_conns: usize,
}

/// Which server the command line is for: only `gnosis` serves the database tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    WithDatabase,
    WithoutDatabase,
}

/// Why the command line did not produce a [`Config`]: print the text and exit.
#[derive(Debug, PartialEq, Eq)]
pub enum CliExit {
    /// `--help`: print to stdout, exit 0.
    Help(String),
    /// A bad argument: print to stderr with the usage, exit 2.
    Invalid(String),
}

fn usage(program: &str, server: Server) -> String {
    let (synopsis, database) = match server {
        Server::WithDatabase => (
            " [--pg-conns N]",
            "  --pg-conns N  PostgreSQL connections per thread (default 2)\n\n\
             PostgreSQL is found through PGHOST, PGPORT, PGUSER, PGPASSWORD and PGDATABASE;\n\
             without PGHOST, a local socket in /var/run/postgresql or /tmp, else tfb-database.\n",
        ),
        Server::WithoutDatabase => ("", ""),
    };
    format!(
        "usage: {program} [--port N] [--threads N]{synopsis}\n\n  \
         --port N      TCP port to listen on, on all addresses (default 8080)\n  \
         --threads N   worker threads, one event loop each (default: one per core)\n  \
         --help        print this help\n{database}"
    )
}

impl Config {
    /// The process's own command line; prints the help (`more_help` after it) and exits 0,
    /// or prints the error with the usage and exits 2.
    pub fn from_command_line(program: &str, server: Server, more_help: &str) -> Config {
        match Config::from_args(program, server, std::env::args().skip(1)) {
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
        server: Server,
        args: impl IntoIterator<Item = String>,
    ) -> Result<Config, CliExit> {
        let usage = || usage(program, server);
        let mut config = Config {
            port: 8080,
            threads: std::thread::available_parallelism().map_or(1, NonZeroUsize::get),
            pg_conns: 2,
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
                None => (arg, None),
            };
            let mut value = |name: &str| {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| CliExit::Invalid(format!("{name} needs a value\n\n{}", usage())))
            };
            match flag.as_str() {
                "--help" | "-h" => return Err(CliExit::Help(usage())),
                "--port" => config.port = parse_number(&value("--port")?, "--port", &usage)?,
                "--threads" => {
                    config.threads = parse_number(&value("--threads")?, "--threads", &usage)?
                }
                "--pg-conns" if server == Server::WithDatabase => {
                    config.pg_conns = parse_number(&value("--pg-conns")?, "--pg-conns", &usage)?
                }
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
        Config::from_args(
            "gnosis",
            Server::WithDatabase,
            args.iter().map(|s| s.to_string()),
        )
    }

    #[test]
    fn defaults_to_port_8080_and_one_thread_per_core() {
        let config = parse(&[]).unwrap();
        assert_eq!(config.port, 8080);
        assert_eq!(
            config.threads,
            std::thread::available_parallelism().unwrap().get()
        );
    }

    #[test]
    fn takes_values_separately_or_after_an_equals_sign() {
        assert_eq!(
            parse(&["--port", "9000", "--threads=3", "--pg-conns", "2"]).unwrap(),
            Config {
                port: 9000,
                threads: 3,
                pg_conns: 2
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
            &["--bogus"],
        ] {
            assert!(matches!(parse(args), Err(CliExit::Invalid(_))), "{args:?}");
        }
        assert!(matches!(parse(&["--help"]), Err(CliExit::Help(_))));
    }

    #[test]
    fn only_the_database_server_takes_pg_conns() {
        let args = ["--pg-conns", "2"].map(String::from);
        assert!(matches!(
            Config::from_args("gnosis-uring", Server::WithoutDatabase, args),
            Err(CliExit::Invalid(_))
        ));
    }
}
