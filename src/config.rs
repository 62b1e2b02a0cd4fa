//! The command line shared by both binaries.

use std::num::NonZeroUsize;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub port: u16,
    pub threads: usize,
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
        "usage: {program} [--port N] [--threads N]\n\n  \
         --port N      TCP port to listen on, on all addresses (default 8080)\n  \
         --threads N   worker threads, one event loop each (default: one per core)\n  \
         --help        print this help\n"
    )
}

impl Config {
    pub fn from_args(
        program: &str,
        args: impl IntoIterator<Item = String>,
    ) -> Result<Config, CliExit> {
        let mut config = Config {
            port: 8080,
            threads: std::thread::available_parallelism().map_or(1, NonZeroUsize::get),
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
                None => (arg, None),
            };
            let mut value = |name: &str| {
                inline.clone().or_else(|| args.next()).ok_or_else(|| {
                    CliExit::Invalid(format!("{name} needs a value\n\n{}", usage(program)))
                })
            };
            match flag.as_str() {
                "--help" | "-h" => return Err(CliExit::Help(usage(program))),
                "--port" => config.port = parse_number(&value("--port")?, "--port", 1, program)?,
                "--threads" => {
                    config.threads = parse_number(&value("--threads")?, "--threads", 1, program)?
                }
                other => {
                    return Err(CliExit::Invalid(format!(
                        "unknown argument '{other}'\n\n{}",
                        usage(program)
                    )))
                }
            }
        }
        Ok(config)
    }
}

fn parse_number<T: std::str::FromStr + PartialOrd + From<u8>>(
    text: &str,
    flag: &str,
    min: u8,
    program: &str,
) -> Result<T, CliExit> {
    match text.parse::<T>() {
        Ok(n) if n >= T::from(min) => Ok(n),
        _ => Err(CliExit::Invalid(format!(
            "{flag} takes a whole number of at least {min}, not '{text}'\n\n{}",
            usage(program)
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
    }

    #[test]
    fn takes_values_separately_or_after_an_equals_sign() {
        assert_eq!(
            parse(&["--port", "9000", "--threads=3"]).unwrap(),
            Config {
                port: 9000,
                threads: 3
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
}
