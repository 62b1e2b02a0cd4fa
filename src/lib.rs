//! gnosis: a TechEmpower Framework Benchmarks entry and an HttpArena engine.
//!
//! `http` is HTTP's semantics (the request the app reads, the answer it gives), `h1`, `h2`
//! and `h3` the protocols that carry them, `ws` WebSocket (none does I/O); `quic` is QUIC
//! under HTTP/3 and `transport` TLS under the others; `pg` is the PostgreSQL client, `redis`
//! the Redis one (not used by the server yet), `link` a connection without I/O with the
//! socket it wants (PostgreSQL's, an upstream's, Redis's),
//! `server` runs the per-thread event loops (epoll and io_uring), `service` is the contract
//! between a server and the application, `timers` a worker's deadlines, `app` holds the
//! routes and handlers, `sys` the system calls, `config` the command line.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod app;
pub mod config;
pub mod h1;
pub mod h2;
pub mod h3;
pub mod http;
pub mod link;
pub mod pg;
pub mod protocol;
pub mod quic;
pub mod redis;
pub mod server;
pub mod service;
pub mod sys;
pub mod timers;
pub mod transport;
pub mod upstream;
pub mod ws;

/// Writes a line to stderr under the program's name, as command-line tools do: the shared
/// code speaks as `gnosis` or `gnosis-uring`, whichever binary runs it.
#[macro_export]
macro_rules! log {
    ($($arg:tt)*) => {
        eprintln!("{}: {}", $crate::program_name(), format_args!($($arg)*))
    };
}

/// The file name the program was started as (`argv[0]`), or "gnosis".
pub fn program_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        std::env::args_os()
            .next()
            .and_then(|arg0| {
                let name = std::path::Path::new(&arg0).file_name()?;
                Some(name.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "gnosis".to_string())
    })
}
