//! The epoll server for all seven TFB tests.

use std::time::Duration;

use gnosis::app::db::Database;
use gnosis::app::world::WorldCache;
use gnosis::app::App;
use gnosis::config::{Config, Server};

fn main() {
    let config = Config::from_command_line("gnosis", Server::WithDatabase, "");
    let listeners = match gnosis::server::listeners(config.port, config.threads) {
        Ok(listeners) => listeners,
        Err(err) => {
            eprintln!("gnosis: cannot listen on port {}: {err}", config.port);
            std::process::exit(1);
        }
    };
    eprintln!(
        "gnosis: serving on 0.0.0.0:{} with {} threads (epoll), {} PostgreSQL connection(s) each",
        config.port, config.threads, config.pg_conns
    );
    let database = gnosis::pg::Target::new(gnosis::pg::Config::from_env());
    let cache = WorldCache::load_in_background(database.clone());
    // Requests wait in the listen backlog meanwhile: better than a 503 just after start-up.
    // Without a database the server goes on and the cache fills in once it answers.
    cache.wait_for_first_attempt(Duration::from_secs(3));
    let pg_conns = config.pg_conns;
    let new_app =
        move || App::with_database(Database::new(database.clone(), pg_conns), cache.clone());
    if let Err(err) = gnosis::server::run_epoll(listeners, new_app) {
        eprintln!("gnosis: {err}");
        std::process::exit(1);
    }
}
