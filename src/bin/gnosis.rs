//! The epoll server for all seven TFB tests.

use gnosis::config::Config;

fn main() {
    // Before any thread starts, so that every thread inherits the mask.
    gnosis::server::block_signals();
    let config = Config::from_command_line("gnosis", "");
    let tls = gnosis::transport::listener_config(&[config.tls_port, config.h2_tls_port]);
    let ports = config.listening(tls.is_some());
    let listeners = match gnosis::server::listeners(&ports, config.threads) {
        Ok(listeners) => listeners,
        Err(err) => {
            eprintln!("gnosis: cannot listen on {err}");
            std::process::exit(1);
        }
    };
    eprintln!(
        "gnosis: serving on {} with {} threads (epoll), {}",
        gnosis::server::describe(&ports),
        config.threads,
        config.behind()
    );
    let new_worker = gnosis::app::prepare(&config.app_settings());
    if let Err(err) = gnosis::server::run_epoll(listeners, new_worker, config.limits(), tls) {
        eprintln!("gnosis: {err}");
        std::process::exit(1);
    }
    eprintln!("gnosis: drained, exiting");
}
