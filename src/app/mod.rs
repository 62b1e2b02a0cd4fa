//! The application: TFB's routes, handlers, World and Fortune, the cache; and HttpArena's
//! HTTP routes ([`arena`]), `/async-db` ([`arena_db`]) and the production stack's
//! `/public/` and `/api/` routes ([`api`]); files of a directory ([`static_files`]); gRPC's
//! `GetSum` message ([`grpc`]), for the HTTP/2 layer.
//!
//! plaintext, json and cached-queries are answered at once; the database routes start a job
//! in [`db::Jobs`] and are answered when its queries come back; `/delay` is answered by a
//! timer.

pub mod api;
pub mod arena;
pub mod arena_db;
pub mod cache;
pub mod db;
mod edge;
mod error;
pub mod fortune;
pub mod grpc;
mod query;
mod settings;
pub mod static_files;
pub mod world;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::http::{Answer, ContentType, Method, Reply, Request, Status, Ticket, Version};
use crate::pg::{self, Pool, Target};
use crate::redis::{self, Redis};
use crate::service::{Context, Finished, Passed, Service};
use crate::ws::{self, handshake};
use arena::Arena;
use cache::Cache;
use db::{write_json, DbRoute, Jobs, STATEMENTS};
use edge::Forwarded;
use query::count_param;
use static_files::StaticFiles;
use world::{random_id, World, WorldSnapshot};

pub use error::AppError;
pub use settings::Settings;

/// Where the static files are: what follows is a file's name. The edge serves them itself
/// and forwards everything else.
const STATIC: &str = "/static/";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    Plaintext,
    Json,
    Database(DbRoute),
    CachedQueries(usize),
    /// `/static/{name}`: the name is read from the path when answering.
    Static,
    Arena(arena::Route),
    /// `/public/{arena path}`: the arena route of the path without [`api::PUBLIC`].
    Public(arena::Route),
    /// The production stack's `/api/` routes.
    Api(api::Route),
    /// HttpArena's WebSocket echo: the upgrade, then every message echoed.
    WebSocket,
    /// gRPC's unary `GetSum` (over HTTP/2).
    GetSum,
}

impl Route {
    pub fn find(path: &str, query: &str) -> Option<Route> {
        Some(match path {
            "/plaintext" => Route::Plaintext,
            "/json" => Route::Json,
            "/db" => Route::Database(DbRoute::World),
            "/queries" => Route::Database(DbRoute::Queries(count_param(query, "queries"))),
            "/updates" => Route::Database(DbRoute::Updates(count_param(query, "queries"))),
            "/fortunes" => Route::Database(DbRoute::Fortunes),
            "/cached-queries" => Route::CachedQueries(count_param(query, "count")),
            "/ws" => Route::WebSocket,
            grpc::GET_SUM_PATH => Route::GetSum,
            "/async-db" => {
                Route::Database(DbRoute::AsyncDb(arena_db::ItemQuery::from_query(query)))
            }
            _ if path.starts_with(STATIC) => Route::Static,
            _ => match arena::Route::find(path) {
                Some(route) => Route::Arena(route),
                None => return api::find(path),
            },
        })
    }
}

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

/// One worker thread's application state.
pub struct App {
    /// Reused for serializing bodies.
    body: Vec<u8>,
    cache: Cache,
    /// Scratch for the rows and the cache misses of one cached-queries request.
    worlds: Vec<World>,
    missing: Vec<i32>,
    rng: fastrand::Rng,
    jobs: Jobs,
    arena: Arena,
    api: api::Api,
    static_files: StaticFiles,
    /// The last WebSocket handshake's `Sec-WebSocket-Accept`, which its `101` borrows.
    accept: handshake::Accept,
    max_body: usize,
    max_message: usize,
    /// At the edge (`--upstream`): the requests forwarded, waiting for their answers.
    forwarded: Forwarded,
}

impl App {
    /// `snapshot` primes the thread's cache once it has been taken; `api_cache` is the one
    /// every thread's app shares.
    pub fn new(
        snapshot: Arc<WorldSnapshot>,
        max_db_requests: usize,
        api_cache: Arc<api::Cache>,
    ) -> Self {
        App {
            body: Vec::new(),
            cache: Cache::new(snapshot),
            worlds: Vec::new(),
            missing: Vec::new(),
            rng: fastrand::Rng::new(),
            jobs: Jobs::new(max_db_requests),
            arena: Arena::default(),
            api: api::Api::new(api_cache),
            static_files: StaticFiles::new(std::path::Path::new(static_files::STATIC_DIR)),
            accept: [0; 28],
            max_body: crate::http::MAX_BODY,
            max_message: ws::MAX_MESSAGE,
            forwarded: Forwarded::default(),
        }
    }

    /// Serves HttpArena's `/json/{count}` from `dataset` (without it, 503).
    pub fn with_dataset(mut self, dataset: Option<arena::Dataset>) -> Self {
        self.arena = Arena::new(dataset);
        self
    }

    /// Serves `/static/{name}` from `dir`.
    pub fn with_static_dir(mut self, dir: &std::path::Path) -> Self {
        self.static_files = StaticFiles::new(dir);
        self
    }

    /// Takes request bodies of up to `max_body` bytes.
    pub fn with_max_body(mut self, max_body: usize) -> Self {
        self.max_body = max_body;
        self
    }

    /// Takes WebSocket messages of up to `max_message` bytes.
    pub fn with_max_message(mut self, max_message: usize) -> Self {
        self.max_message = max_message;
        self
    }
}

/// What both servers do before serving: find the database and Redis, start loading the
/// cache, and return what makes each worker thread's app, database and Redis connections.
pub fn prepare(
    settings: &Settings,
) -> impl Fn() -> (App, Pool, Option<Redis>) + Send + Sync + 'static {
    // A DATABASE_URL that cannot be used ends the start, as a bad argument does. The edge
    // uses none: it neither reads nor names one.
    let pg_config = match settings.edge {
        true => pg::Config::from_vars(|_| None, |_| None),
        false => pg::Config::from_env().unwrap_or_else(|error| {
            crate::log!("{error}");
            std::process::exit(2);
        }),
    };
    let target = Target::new(pg_config);
    // The api's L2 (`api`); the edge caches nothing.
    let redis_target = match settings.edge {
        true => None,
        false => redis_target(std::env::var("REDIS_URL").ok()),
    };
    let redis_settings = redis::Settings {
        limits: redis::Limits {
            max_len: api::LARGEST_REDIS_REPLY,
            ..redis::Limits::default()
        },
        ..redis::Settings::default()
    };
    // The whole table is read once before the workers take connections, so that the read
    // never falls among the requests TFB's verifier counts statements for; a busy machine
    // gets the whole connect timeout for it. Without a database the server goes on at once
    // (a refused connection ends the attempt) and the caches fill in once it answers.
    let snapshot = match settings.edge {
        true => Arc::new(WorldSnapshot::default()),
        false => {
            let snapshot =
                WorldSnapshot::load_in_background(target.clone(), settings.connect_timeout);
            snapshot.wait_for_first_attempt(settings.connect_timeout + Duration::from_secs(1));
            snapshot
        }
    };
    let options = pg::Options {
        connect_timeout: settings.connect_timeout,
        query_timeout: settings.query_timeout,
        max_message_len: settings.pg_max_message,
        max_rows: settings.pg_max_rows,
        ..pg::Options::default()
    };
    let pg_conns = if settings.edge { 0 } else { settings.pg_conns };
    let max_db_requests = settings.max_db_requests;
    // At the edge, /json/{count} is the upstream's.
    let dataset = match settings.edge {
        true => None,
        false => arena::load_dataset(&arena::dataset_path(settings.dataset.as_deref())),
    };
    let (max_body, max_message) = (settings.max_body, settings.max_message);
    let static_dir = static_files::static_dir();
    let threads = Arc::new(pg::pool::Threads::default());
    let api_cache = Arc::new(api::Cache::default());
    move || {
        let pool = Pool::new(
            &target,
            STATEMENTS,
            &options,
            pg_conns,
            &threads,
            std::time::Instant::now(),
        );
        let app = App::new(snapshot.clone(), max_db_requests, api_cache.clone())
            .with_dataset(dataset.clone())
            .with_static_dir(&static_dir)
            .with_max_body(max_body)
            .with_max_message(max_message);
        let redis = redis_target
            .as_ref()
            .map(|(address, session)| Redis::new(address.clone(), session, redis_settings));
        (app, pool, redis)
    }
}

/// Where the api's L2 is: `REDIS_URL`, resolved once; none when it is unset or empty. A URL
/// that cannot be used ends the start, as a bad DATABASE_URL does (the password never shown).
fn redis_target(url: Option<String>) -> Option<(redis::Address, redis::Session)> {
    let url = url.filter(|url| !url.is_empty())?;
    let exit = |error: &dyn std::fmt::Display| -> ! {
        crate::log!("{error}");
        std::process::exit(2);
    };
    let url = redis::RedisUrl::parse(&url).unwrap_or_else(|error| exit(&error));
    let address = url.endpoint.resolve().unwrap_or_else(|error| {
        exit(&format_args!(
            "REDIS_URL: cannot resolve {}: {error}",
            url.endpoint
        ))
    });
    crate::log!("Redis L2 at {address}");
    Some((address, url.session))
}

impl Service for App {
    fn handle<'a>(
        &'a mut self,
        request: &'a Request<'a>,
        ticket: Ticket,
        cx: &mut Context<'_>,
    ) -> Reply<'a> {
        // At the edge, every request but a static file's is the upstream's to answer.
        if let Some(upstream) = cx.upstream.as_deref_mut() {
            if !request.path.starts_with(STATIC) {
                let forwarded = &mut self.forwarded;
                return forwarded.forward(upstream, request, ticket, cx.origin, cx.now);
            }
        }
        let Some(route) = Route::find(request.path, request.query()) else {
            // CONNECT's target is a host, never a route's path: no route opens a tunnel.
            let status = match request.method {
                Method::Connect => Status::MethodNotAllowed,
                _ => Status::NotFound,
            };
            return Reply::Now(Answer::error(status));
        };
        // Every route but gRPC's answers GET and HEAD; only /baseline11, /echo, an api item
        // and gRPC's take a POST.
        let allowed = match (route, request.method) {
            (Route::GetSum, method) => method == Method::Post,
            (Route::Arena(arena::Route::Baseline | arena::Route::Echo), Method::Post) => true,
            (Route::Api(api::Route::Item(_)), Method::Post) => true,
            (_, method) => matches!(method, Method::Get | Method::Head),
        };
        if !allowed {
            return Reply::Now(Answer::error(Status::MethodNotAllowed));
        }
        let answer = match route {
            Route::Plaintext => Answer::ok(ContentType::Plain, b"Hello, World!"),
            Route::Json => {
                self.body.clear();
                write_json(
                    &mut self.body,
                    &Message {
                        message: "Hello, World!",
                    },
                );
                Answer::ok(ContentType::Json, &self.body)
            }
            Route::CachedQueries(count) => {
                let (worlds, missing, rng) = (&mut self.worlds, &mut self.missing, &mut self.rng);
                worlds.clear();
                missing.clear();
                let ids = (0..count).map(|_| random_id(rng));
                self.cache.lookup(ids, worlds, missing);
                if !missing.is_empty() {
                    return match self
                        .jobs
                        .read_through(ticket, worlds, missing, cx.db, cx.now)
                    {
                        Ok(()) => Reply::Later,
                        Err(status) => Reply::Now(Answer::error(status)),
                    };
                }
                self.body.clear();
                write_json(&mut self.body, worlds);
                Answer::ok(ContentType::Json, &self.body)
            }
            Route::Static => {
                let name = &request.path[STATIC.len()..];
                let accepts = request.fields.accept_encoding;
                self.static_files.respond(name, accepts)
            }
            Route::WebSocket => {
                let upgrade = &request.fields.upgrade;
                match handshake::check(upgrade, request.version) {
                    Ok(accept) if request.method == Method::Get => {
                        self.accept = accept;
                        Answer::switch_to_websocket(&self.accept)
                    }
                    Err(handshake::Refusal::NotAnUpgrade | handshake::Refusal::Version) => {
                        Answer::error(Status::UpgradeRequired)
                    }
                    // Malformed, or a HEAD.
                    _ => Answer::error(Status::BadRequest),
                }
            }
            // gRPC runs over HTTP/2 or HTTP/3, never HTTP/1.x.
            Route::GetSum if request.version < Version::Http2 => Answer::error(Status::BadRequest),
            Route::GetSum => grpc::respond(&request.fields, request.body, &mut self.body),
            Route::Arena(route) => {
                let (path, query, body) = (request.path, request.query(), request.body);
                let outcome = self.arena.answer(route, path, query, body, cx.now);
                return arena::respond(outcome, ticket, cx);
            }
            Route::Public(route) => {
                let path = request.path.strip_prefix(api::PUBLIC).unwrap_or_default();
                let outcome = self.arena.answer(route, path, request.query(), b"", cx.now);
                return arena::respond(outcome, ticket, cx);
            }
            Route::Api(route) => {
                return self.api.answer(route, request, ticket, &mut self.jobs, cx);
            }
            Route::Database(route) => {
                match self.jobs.start(route, ticket, &mut self.rng, cx.db, cx.now) {
                    Ok(()) => return Reply::Later,
                    // HttpArena's answer whenever the database cannot be used.
                    Err(_) if matches!(route, DbRoute::AsyncDb(_)) => {
                        Answer::ok(ContentType::Json, arena_db::FALLBACK)
                    }
                    Err(status) => Answer::error(status),
                }
            }
        };
        Reply::Now(answer)
    }

    fn on_database_event(
        &mut self,
        token: u64,
        event: pg::Event<'_>,
        redis: Option<&mut Redis>,
    ) -> Option<Finished<'_>> {
        self.jobs
            .on_event(token, event, &mut self.cache, self.api.cache(), redis)
    }

    fn on_redis_event(
        &mut self,
        token: u64,
        event: redis::Event<'_>,
        db: &mut Pool,
    ) -> Option<Finished<'_>> {
        self.jobs.on_redis_event(token, event, db, self.api.cache())
    }

    fn on_upstream_event<'a>(
        &'a mut self,
        token: u64,
        event: crate::upstream::Event<'a>,
    ) -> Option<Passed<'a>> {
        self.forwarded.answer(token, event)
    }

    /// Only `/delay` sets timers; its token is the number of milliseconds.
    fn on_timer(&mut self, ticket: Ticket, token: u64) -> Option<Finished<'_>> {
        Some(Finished {
            ticket,
            answer: Answer::ok(ContentType::Plain, self.arena.delayed(token)),
        })
    }

    fn max_body(&self) -> usize {
        self.max_body
    }

    /// `/ws` echoes every message with its opcode.
    fn on_message(&mut self, message: ws::Message<'_>, out: &mut Vec<u8>) {
        ws::frame::write(out, message.opcode, message.payload);
    }

    fn max_message(&self) -> usize {
        self.max_message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_path_and_query() {
        assert_eq!(
            Route::find("/benchmark.BenchmarkService/GetSum", ""),
            Some(Route::GetSum)
        );
        assert_eq!(
            Route::find("/updates", "queries=7"),
            Some(Route::Database(DbRoute::Updates(7)))
        );
        assert_eq!(
            Route::find("/cached-queries", "count=600"),
            Some(Route::CachedQueries(500))
        );
        assert_eq!(
            Route::find("/db", ""),
            Some(Route::Database(DbRoute::World))
        );
        assert_eq!(Route::find("/db/", ""), None);
        assert_eq!(Route::find("/static/app.js", ""), Some(Route::Static));
        assert_eq!(Route::find("/static", ""), None);
        assert_eq!(
            Route::find("/baseline2", "a=1&b=2"),
            Some(Route::Arena(arena::Route::Baseline2))
        );
        assert_eq!(Route::find("/ws", ""), Some(Route::WebSocket));
        assert_eq!(
            Route::find("/public/json/25", ""),
            Some(Route::Public(arena::Route::Json))
        );
        assert_eq!(
            Route::find("/api/items/3", ""),
            Some(Route::Api(api::Route::Item(3)))
        );
    }
}
