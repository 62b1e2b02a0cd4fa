//! The TFB application: routes, handlers, World and Fortune, the cache.
//!
//! plaintext, json and cached-queries are answered at once; the database routes start a job
//! in [`db::Database`] and are answered when its queries come back.

pub mod db;
pub mod fortune;
pub mod world;

use std::sync::Arc;

use serde::Serialize;

use crate::http::{ContentType, HttpDate, Method, Request, Response, Status};
use crate::server::{Handler, Reply, Ticket};
use db::{write_json, Database, DbRoute};
use world::{World, WorldCache};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    Plaintext,
    Json,
    Database(DbRoute),
    CachedQueries(usize),
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
            _ => return None,
        })
    }
}

/// TFB's rule for the count of queries or cached objects: missing, empty or not an integer
/// is 1, and the value is clamped to 1..=500.
pub fn count_param(query: &str, name: &str) -> usize {
    let value = query
        .split('&')
        .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or("");
    let digits = value.strip_prefix(['+', '-']).unwrap_or(value);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return 1;
    }
    if value.starts_with('-') {
        return 1;
    }
    // All digits: too long to parse still means "more than 500".
    digits.parse::<usize>().map_or(500, |n| n.clamp(1, 500))
}

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

/// One worker thread's application state.
pub struct App {
    /// Reused for serializing bodies.
    body: Vec<u8>,
    /// `None` in a server that does not serve the database tests.
    database: Option<Database>,
    cache: Option<Arc<WorldCache>>,
    worlds: Vec<World>,
    rng: fastrand::Rng,
}

impl App {
    /// plaintext and json only: the other routes are 404.
    pub fn without_database() -> Self {
        Self::new(None, None)
    }

    pub fn with_database(database: Database, cache: Arc<WorldCache>) -> Self {
        Self::new(Some(database), Some(cache))
    }

    fn new(database: Option<Database>, cache: Option<Arc<WorldCache>>) -> Self {
        App {
            body: Vec::new(),
            database,
            cache,
            worlds: Vec::new(),
            rng: fastrand::Rng::new(),
        }
    }

    pub fn database(&mut self) -> Option<&mut Database> {
        self.database.as_mut()
    }
}

impl Handler for App {
    fn handle(
        &mut self,
        request: &Request<'_>,
        response: Response,
        ticket: Ticket,
        out: &mut Vec<u8>,
        date: &HttpDate,
    ) -> Reply {
        let route = Route::find(request.path, request.query).filter(|route| match route {
            Route::Plaintext | Route::Json => true,
            Route::Database(_) | Route::CachedQueries(_) => self.database.is_some(),
        });
        let Some(route) = route else {
            response.write_error(out, date, Status::NotFound);
            return Reply::Now;
        };
        if request.method == Method::Other {
            response.write_error(out, date, Status::MethodNotAllowed);
            return Reply::Now;
        }
        match route {
            Route::Plaintext => {
                response.write(out, date, Status::Ok, ContentType::Plain, b"Hello, World!")
            }
            Route::Json => {
                self.body.clear();
                write_json(
                    &mut self.body,
                    &Message {
                        message: "Hello, World!",
                    },
                );
                response.write(out, date, Status::Ok, ContentType::Json, &self.body);
            }
            Route::CachedQueries(count) => {
                let picked = self
                    .cache
                    .as_ref()
                    .is_some_and(|cache| cache.pick_random(&mut self.rng, count, &mut self.worlds));
                if picked {
                    self.body.clear();
                    write_json(&mut self.body, &self.worlds);
                    response.write(out, date, Status::Ok, ContentType::Json, &self.body);
                } else {
                    // Not loaded yet: the database has not answered since start-up.
                    response.write_error(out, date, Status::ServiceUnavailable);
                }
            }
            Route::Database(route) => {
                if let Some(database) = &mut self.database {
                    match database.start(route, ticket) {
                        Ok(()) => return Reply::Later,
                        Err(status) => response.write_error(out, date, status),
                    }
                }
            }
        }
        Reply::Now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_the_tfb_rules() {
        let cases = [
            ("queries=2", 2),
            ("queries=0", 1),
            ("queries=foo", 1),
            ("queries=501", 500),
            ("queries=", 1),
            ("", 1),
            ("queries=-3", 1),
            ("queries=+7", 7),
            ("queries=99999999999999999999999", 500),
            ("x=1&queries=20", 20),
            ("queriesx=20", 1),
            ("queries=5&queries=9", 5),
        ];
        for (query, expected) in cases {
            assert_eq!(count_param(query, "queries"), expected, "{query}");
        }
    }

    #[test]
    fn routes_by_path_and_query() {
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
    }
}
