//! The epoll server for all of TFB's tests.

use gnosis::app::App;
use gnosis::config::{CliExit, Config};

fn main() {
    let config = match Config::from_args("gnosis", std::env::args().skip(1)) {
        Ok(config) => config,
        Err(CliExit::Help(text)) => {
            print!("{text}");
            return;
        }
        Err(CliExit::Invalid(text)) => {
            eprint!("gnosis: {text}");
            std::process::exit(2);
        }
    };
    let listeners = match gnosis::server::listeners(config.port, config.threads) {
        Ok(listeners) => listeners,
        Err(err) => {
            eprintln!("gnosis: cannot listen on port {}: {err}", config.port);
            std::process::exit(1);
        }
    };
    eprintln!(
        "gnosis: serving on 0.0.0.0:{} with {} threads (epoll)",
        config.port, config.threads
    );
    if let Err(err) = gnosis::server::run_epoll(listeners, App::new) {
        eprintln!("gnosis: {err}");
        std::process::exit(1);
    }
}
