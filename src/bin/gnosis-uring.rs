//! The io_uring server for all seven TFB tests.
//!
//! Same command line as gnosis; io_uring's own settings come from the environment (see
//! `--help`).

use gnosis::config::Config;
use gnosis::server::UringOptions;

const ENVIRONMENT: &str = "\nenvironment:\n  \
    GNOSIS_SQPOLL=1         a kernel thread per ring polls for submissions (default 0)\n  \
    GNOSIS_URING_BUFFERS=N  4 KiB receive buffers per thread, a power of two (default 1024)\n";

fn main() {
    // Before any thread starts, so that every thread inherits the mask.
    gnosis::server::block_signals();
    let config = Config::from_command_line("gnosis-uring", ENVIRONMENT);
    let options = match UringOptions::from_env(|name| std::env::var(name).ok()) {
        Ok(options) => options,
        Err(text) => {
            eprint!("gnosis-uring: {text}\n{ENVIRONMENT}");
            std::process::exit(2);
        }
    };
    let tls = gnosis::transport::listener_config(&[config.tls_port, config.h2_tls_port]);
    let ports = config.listening(tls.is_some());
    let listeners = match gnosis::server::listeners(&ports, config.threads) {
        Ok(listeners) => listeners,
        Err(err) => {
            eprintln!("gnosis-uring: cannot listen on {err}");
            std::process::exit(1);
        }
    };
    eprintln!(
        "gnosis-uring: serving on {} with {} threads (io_uring{}, {} receive buffers each), {}",
        gnosis::server::describe(&ports),
        config.threads,
        if options.sqpoll { ", SQPOLL" } else { "" },
        options.buffers,
        config.behind()
    );
    let new_worker = gnosis::app::prepare(&config.app_settings());
    if let Err(err) =
        gnosis::server::run_uring(listeners, new_worker, config.limits(), tls, options)
    {
        eprintln!("gnosis-uring: {err}");
        std::process::exit(1);
    }
    eprintln!("gnosis-uring: drained, exiting");
}
