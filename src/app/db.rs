//! The database routes of one worker thread: each request becomes a job whose queries
//! carry the job's index as their token, all on one of the thread's PostgreSQL connections,
//! each its own Bind/Execute/Sync. When a job's last answer arrives its body is rendered.
//! A job of the api's may also wait for one Redis command at a time, with the same token:
//! its L2 lookup before its query, its L2 deletion after its update.

use std::fmt;
use std::time::Instant;

use super::api::{self, Query, Record};
use super::arena_db::{ItemQuery, Items, FALLBACK};
use super::cache::Cache;
use super::error::AppError;
use super::fortune::Fortunes;
use super::world::{distinct_random_ids, random_id, World};
use crate::http::{Answer, ContentType, Status, Ticket};
use crate::pg::protocol::{INT4_ARRAY_OID, INT4_OID, INT8_OID, TEXT_OID};
use crate::pg::{DbError, Event, Param, Pool, QueryError, Row, Statement};
use crate::redis::{self, Redis, Refused};
use crate::service::Finished;

/// Prepared once per connection; the statics below name them. A database has TFB's tables
/// (`world`, `fortune`) or HttpArena's (`items`, `users`, `fortune`): the statements of the
/// other's tables are unavailable on its connections, and the routes using them answer as
/// if the database were down.
pub static STATEMENTS: &[Statement] = &[
    Statement {
        name: "world",
        sql: "SELECT id, randomnumber FROM world WHERE id = $1",
        param_types: &[INT4_OID],
    },
    Statement {
        name: "fortunes",
        sql: "SELECT id, message FROM fortune",
        param_types: &[],
    },
    Statement {
        name: "update_worlds",
        sql: "UPDATE world SET randomnumber = v.r \
              FROM unnest($1::int4[], $2::int4[]) AS v(id, r) \
              WHERE world.id = v.id",
        param_types: &[INT4_ARRAY_OID, INT4_ARRAY_OID],
    },
    Statement {
        name: "items",
        sql: "SELECT id, name, category, price, quantity, active, tags, rating_score, \
              rating_count FROM items WHERE price BETWEEN $1 AND $2 LIMIT $3",
        param_types: &[INT4_OID, INT4_OID, INT8_OID],
    },
    Statement {
        name: "item",
        sql: "SELECT id, name, category, price, quantity, active, rating_score, rating_count \
              FROM items WHERE id = $1",
        param_types: &[INT4_OID],
    },
    Statement {
        name: "update_item",
        // RETURNING: a row back says the item exists (no row: 404).
        sql: "UPDATE items SET name = $1, price = $2, quantity = $3 WHERE id = $4 RETURNING id",
        param_types: &[TEXT_OID, INT4_OID, INT4_OID, INT4_OID],
    },
    Statement {
        name: "user",
        sql: "SELECT id, name, email, plan FROM users WHERE id = $1",
        param_types: &[INT4_OID],
    },
];
static SELECT_WORLD: &Statement = &STATEMENTS[0];
static SELECT_FORTUNES: &Statement = &STATEMENTS[1];
static UPDATE_WORLDS: &Statement = &STATEMENTS[2];
pub(super) static SELECT_ITEMS: &Statement = &STATEMENTS[3];
pub(super) static SELECT_ITEM: &Statement = &STATEMENTS[4];
pub(super) static UPDATE_ITEM: &Statement = &STATEMENTS[5];
pub(super) static SELECT_USER: &Statement = &STATEMENTS[6];

/// The database routes, with their query counts already clamped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbRoute {
    World,
    Queries(usize),
    Updates(usize),
    Fortunes,
    /// The misses of a cached-queries request of this many rows.
    CachedQueries(usize),
    /// HttpArena's `/async-db`: answered 200 with the fallback body whenever it fails.
    AsyncDb(ItemQuery),
    /// The production-stack profile's `/api/` routes ([`api`]).
    Api(Query),
}

/// Queues one query of a job: its statement and parameters.
type Queue<'a> = dyn FnMut(&Statement, &[Param<'_>]) -> Result<(), QueryError> + 'a;

/// The requests of one thread that wait for the database.
pub struct Jobs {
    all: Vec<Job>,
    free: Vec<usize>,
    /// Jobs under way (those not `free`) beyond which new requests get 503 at once, so that
    /// a hung database cannot make memory and descriptors grow without bound.
    max_active: usize,
    /// The body of the last finished job.
    body: Vec<u8>,
    errors: ErrorLog,
    /// Redis's failures and error replies: a cache's, which cost a read from PostgreSQL.
    redis_errors: ErrorLog,
}

struct Job {
    ticket: Ticket,
    route: DbRoute,
    /// Queries sent and not answered yet.
    outstanding: usize,
    /// An api job's Redis command sent and not answered yet: a read's lookup (before its
    /// query), an update's deletion (after it). Never with a query outstanding.
    awaits_redis: bool,
    /// Set by the first failure; the job still waits for its other answers.
    failure: Option<Status>,
    /// The rows read, in the order their queries were sent.
    worlds: Vec<World>,
    /// Updates: the rows' ids, sorted, and their new random numbers.
    ids: Vec<i32>,
    numbers: Vec<i32>,
    fortunes: Fortunes,
    items: Items,
    record: Record,
}

impl Jobs {
    pub fn new(max_active: usize) -> Jobs {
        Jobs {
            all: Vec::new(),
            free: Vec::new(),
            max_active,
            body: Vec::new(),
            errors: ErrorLog::new("query"),
            redis_errors: ErrorLog::new("a Redis command"),
        }
    }

    /// Queues the queries of `route` on one of `db`'s connections; the response comes
    /// through [`Jobs::on_event`]. `Err` is the status to answer with at once.
    pub fn start(
        &mut self,
        route: DbRoute,
        ticket: Ticket,
        rng: &mut fastrand::Rng,
        db: &mut Pool,
        now: Instant,
    ) -> Result<(), Status> {
        self.begin(route, ticket, db, now, |job, queue| match route {
            DbRoute::World => queue(SELECT_WORLD, &[Param::Int4(random_id(rng))]),
            DbRoute::Queries(n) => {
                (0..n).try_for_each(|_| queue(SELECT_WORLD, &[Param::Int4(random_id(rng))]))
            }
            DbRoute::Fortunes => queue(SELECT_FORTUNES, &[]),
            DbRoute::AsyncDb(query) => queue(SELECT_ITEMS, &query.params()),
            DbRoute::Updates(n) => {
                // All in one round trip: each row read by its own SELECT, then one UPDATE
                // of them all with numbers chosen now. Ids sorted, so that concurrent
                // requests lock rows in the same order and cannot deadlock.
                let (ids, numbers) = (&mut job.ids, &mut job.numbers);
                distinct_random_ids(rng, n, ids);
                ids.sort_unstable();
                numbers.extend((0..n).map(|_| random_id(rng)));
                for &id in ids.iter() {
                    queue(SELECT_WORLD, &[Param::Int4(id)])?;
                }
                let arrays = [Param::Int4Array(ids), Param::Int4Array(numbers)];
                queue(UPDATE_WORLDS, &arrays)
            }
            DbRoute::CachedQueries(_) => unreachable!("cache misses start with read_through"),
            DbRoute::Api(_) => unreachable!("the api's queries start with start_one"),
        })
    }

    /// A job of one query, `statement` with `params`, which borrow from the request.
    pub fn start_one(
        &mut self,
        route: DbRoute,
        statement: &Statement,
        params: &[Param<'_>],
        ticket: Ticket,
        db: &mut Pool,
        now: Instant,
    ) -> Result<(), Status> {
        self.begin(route, ticket, db, now, |_, queue| queue(statement, params))
    }

    /// A cached-queries request whose cache lacked some rows: `found` are the rows it had,
    /// `missing` the ids to read, each by its own SELECT; the rows read go into the cache.
    pub fn read_through(
        &mut self,
        ticket: Ticket,
        found: &[World],
        missing: &[i32],
        db: &mut Pool,
        now: Instant,
    ) -> Result<(), Status> {
        let route = DbRoute::CachedQueries(found.len() + missing.len());
        self.begin(route, ticket, db, now, |job, queue| {
            job.worlds.extend_from_slice(found);
            missing
                .iter()
                .try_for_each(|&id| queue(SELECT_WORLD, &[Param::Int4(id)]))
        })
    }

    /// A job of the api's that waits for a Redis command first, which `send` sends with
    /// the job's token. `Ok(false)` when Redis refused it: nothing is left of the job.
    pub fn await_redis(
        &mut self,
        route: DbRoute,
        ticket: Ticket,
        send: impl FnOnce(u64) -> Result<(), Refused>,
    ) -> Result<bool, Status> {
        if self.is_full() {
            return Err(Status::ServiceUnavailable);
        }
        let index = self.allocate(ticket, route);
        if send(index as u64).is_err() {
            self.free.push(index);
            return Ok(false);
        }
        self.all[index].awaits_redis = true;
        Ok(true)
    }

    fn is_full(&self) -> bool {
        self.all.len() - self.free.len() >= self.max_active
    }

    /// Makes a job for the request and lets `queue_all` queue its queries, each through
    /// the `queue` it is given, on one ready connection.
    fn begin(
        &mut self,
        route: DbRoute,
        ticket: Ticket,
        db: &mut Pool,
        now: Instant,
        queue_all: impl FnOnce(&mut Job, &mut Queue<'_>) -> Result<(), QueryError>,
    ) -> Result<(), Status> {
        if self.is_full() {
            return Err(Status::ServiceUnavailable);
        }
        let index = self.allocate(ticket, route);
        self.queue(index, db, now, queue_all)
    }

    /// Lets `queue_all` queue job `index`'s queries on one ready connection. `Err` is the
    /// status to answer with at once, when none went out: the job is freed.
    fn queue(
        &mut self,
        index: usize,
        db: &mut Pool,
        now: Instant,
        queue_all: impl FnOnce(&mut Job, &mut Queue<'_>) -> Result<(), QueryError>,
    ) -> Result<(), Status> {
        let Some(pg) = db.pick(now) else {
            self.free.push(index);
            return Err(Status::ServiceUnavailable);
        };
        let job = &mut self.all[index];
        let token = index as u64;
        let mut outstanding = 0;
        let mut queue = |statement: &Statement, params: &[Param<'_>]| {
            pg.query(statement, params, token, now)
                .map(|()| outstanding += 1)
        };
        let queued = queue_all(job, &mut queue);
        job.outstanding = outstanding;
        if let Err(error) = queued {
            // Answered once the queries that did go out are answered: 503 when the
            // connection is full, 500 for a query this client cannot write or prepare.
            let status = match error {
                QueryError::NotConnected | QueryError::QueueFull | QueryError::Unavailable(_) => {
                    Status::ServiceUnavailable
                }
                QueryError::Unencodable(_) | QueryError::NotPrepared(_) => {
                    Status::InternalServerError
                }
            };
            job.failure = Some(status);
            if job.outstanding == 0 {
                self.free.push(index);
                return Err(status);
            }
        }
        Ok(())
    }

    /// One event of job `token`'s queries; returns its response once the last one is in.
    /// Rows read on a cache miss go into `cache`, or for the api's routes into `api_cache`
    /// and `redis`.
    pub fn on_event(
        &mut self,
        token: u64,
        event: Event<'_>,
        cache: &mut Cache,
        api_cache: &api::Cache,
        mut redis: Option<&mut Redis>,
    ) -> Option<Finished<'_>> {
        let index = token as usize;
        let job = self.all.get_mut(index).filter(|job| job.outstanding > 0)?;
        match event {
            Event::Row(row) => {
                if job.failure.is_none() {
                    if let Err(error) = job.take_row(&row, cache) {
                        self.errors.report(&error);
                        job.failure = Some(Status::InternalServerError);
                    }
                }
                return None;
            }
            Event::Done => {}
            Event::Failed(DbError::ConnectionLost) => {
                // The connection reports the loss itself; the request gets a 503.
                job.failure.get_or_insert(Status::ServiceUnavailable);
            }
            Event::Failed(DbError::Timeout) => {
                job.failure.get_or_insert(Status::GatewayTimeout);
            }
            Event::Failed(error) => {
                self.errors.report(error);
                job.failure.get_or_insert(Status::InternalServerError);
            }
        }
        job.outstanding -= 1;
        if job.outstanding > 0 {
            return None;
        }
        if let DbRoute::Api(Query::Update(id)) = job.route {
            if api::invalidate(id, api_cache, redis.as_deref_mut(), token) {
                job.awaits_redis = true;
                return None;
            }
        }
        self.free.push(index);
        let job = &mut self.all[index];
        let expected_worlds = match job.route {
            DbRoute::World => 1,
            DbRoute::Queries(n) | DbRoute::Updates(n) | DbRoute::CachedQueries(n) => n,
            DbRoute::Fortunes | DbRoute::AsyncDb(_) | DbRoute::Api(_) => 0,
        };
        if job.failure.is_none() && job.worlds.len() != expected_worlds {
            self.errors.report(AppError::WorldRowMissing);
            job.failure = Some(Status::InternalServerError);
        }
        let body = &mut self.body;
        body.clear();
        let (status, content_type) = match (job.failure, job.route) {
            (failure, DbRoute::Api(query)) => {
                let answer = api::finish(query, failure, &job.record, api_cache, redis);
                return Some(Finished {
                    ticket: job.ticket,
                    answer,
                });
            }
            (_, DbRoute::AsyncDb(_)) => {
                match job.failure {
                    None => job.items.render(body),
                    Some(_) => body.extend_from_slice(FALLBACK),
                }
                (Status::Ok, ContentType::Json)
            }
            (Some(status), _) => {
                body.extend_from_slice(status.reason().as_bytes());
                (status, ContentType::Plain)
            }
            (None, DbRoute::Fortunes) => {
                job.fortunes.render(body);
                (Status::Ok, ContentType::Html)
            }
            (None, DbRoute::World) => {
                write_json(body, &job.worlds[0]);
                (Status::Ok, ContentType::Json)
            }
            (None, DbRoute::Queries(_) | DbRoute::Updates(_) | DbRoute::CachedQueries(_)) => {
                write_json(body, &job.worlds);
                (Status::Ok, ContentType::Json)
            }
        };
        Some(Finished {
            ticket: job.ticket,
            answer: Answer::new(status, content_type, body),
        })
    }

    /// The event of job `token`'s Redis command: a lookup's value answers the read, its
    /// miss queues the read's query on `db`; a deletion's lets the update be answered.
    pub fn on_redis_event(
        &mut self,
        token: u64,
        event: redis::Event<'_>,
        db: &mut Pool,
        api_cache: &api::Cache,
    ) -> Option<Finished<'_>> {
        match event {
            redis::Event::Failed(failure) => self.redis_errors.report(failure),
            redis::Event::Error(message) => {
                // The server's text, shortened: it is only a hint.
                let shown = &message[..message.len().min(200)];
                self.redis_errors.report(String::from_utf8_lossy(shown));
            }
            redis::Event::Reply(_) => {}
        }
        // A command no job awaits (a SET) has a token beyond every job's.
        let index = usize::try_from(token).ok()?;
        let job = self.all.get_mut(index).filter(|job| job.awaits_redis)?;
        job.awaits_redis = false;
        let (ticket, route) = (job.ticket, job.route);
        let DbRoute::Api(query) = route else {
            return None;
        };
        let key = match query {
            Query::Read(key, generation) => match api::found_in_redis(event) {
                Some(json) => {
                    self.free.push(index);
                    let record = &mut self.all[index].record;
                    let answer = api::hit_in_redis(key, generation, json, record, api_cache);
                    return Some(Finished { ticket, answer });
                }
                None => key,
            },
            Query::Update(_) => {
                self.free.push(index);
                let job = &self.all[index];
                let answer = api::finish(query, job.failure, &job.record, api_cache, None);
                return Some(Finished { ticket, answer });
            }
        };
        let now = Instant::now();
        let read =
            |_: &mut Job, queue: &mut Queue<'_>| queue(key.statement(), &[Param::Int4(key.id())]);
        match self.queue(index, db, now, read) {
            Ok(()) => None,
            Err(status) => Some(Finished {
                ticket,
                answer: Answer::error(status),
            }),
        }
    }

    /// A job slot for a new request, keeping the buffers of the job that was there.
    fn allocate(&mut self, ticket: Ticket, route: DbRoute) -> usize {
        let index = self.free.pop().unwrap_or_else(|| {
            self.all.push(Job {
                ticket,
                route,
                outstanding: 0,
                awaits_redis: false,
                failure: None,
                worlds: Vec::new(),
                ids: Vec::new(),
                numbers: Vec::new(),
                fortunes: Fortunes::default(),
                items: Items::default(),
                record: Record::default(),
            });
            self.all.len() - 1
        });
        let job = &mut self.all[index];
        job.ticket = ticket;
        job.route = route;
        job.outstanding = 0;
        job.awaits_redis = false;
        job.failure = None;
        job.worlds.clear();
        job.ids.clear();
        job.numbers.clear();
        job.fortunes.clear();
        job.items.clear();
        job.record.clear();
        index
    }
}

impl Job {
    fn take_row(&mut self, row: &Row<'_>, cache: &mut Cache) -> Result<(), AppError> {
        match self.route {
            DbRoute::Fortunes => self.fortunes.push(row.int4(0)?, row.text(1)?),
            DbRoute::AsyncDb(_) => self.items.push(row)?,
            DbRoute::Api(query) => self.record.push(query, row)?,
            DbRoute::World | DbRoute::Queries(_) => self.worlds.push(World {
                id: row.int4(0)?,
                random_number: row.int4(1)?,
            }),
            DbRoute::Updates(_) => {
                // The selects run in the order of the sorted ids; the row carries the
                // number the UPDATE gives it. TFB requires the row's randomNumber to be read
                // from the result too: it is, and a row without one as an int4 fails the
                // request. (The new number cannot depend on it: the UPDATE goes out in the
                // same round trip as the SELECTs.)
                let id = row.int4(0)?;
                row.int4(1)?;
                let at = self.worlds.len();
                if self.ids.get(at) != Some(&id) {
                    return Err(AppError::WorldNotAsked(id));
                }
                self.worlds.push(World {
                    id,
                    random_number: self.numbers[at],
                });
            }
            DbRoute::CachedQueries(_) => {
                let world = World {
                    id: row.int4(0)?,
                    random_number: row.int4(1)?,
                };
                cache.insert(world);
                self.worlds.push(world);
            }
        }
        Ok(())
    }
}

/// Serializing plain structs into memory cannot fail.
pub(super) fn write_json(out: &mut Vec<u8>, value: &impl serde::Serialize) {
    serde_json::to_writer(out, value).expect("serializing into memory");
}

/// Logs failures without flooding: the first one, then at most one a second with the count
/// of those left out, each after `what` failed.
struct ErrorLog {
    what: &'static str,
    last: Option<Instant>,
    suppressed: u64,
}

impl ErrorLog {
    fn new(what: &'static str) -> ErrorLog {
        ErrorLog {
            what,
            last: None,
            suppressed: 0,
        }
    }

    fn report(&mut self, error: impl fmt::Display) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|last| now.duration_since(last).as_secs() < 1)
        {
            self.suppressed += 1;
            return;
        }
        match std::mem::take(&mut self.suppressed) {
            0 => crate::log!("{} failed: {error}", self.what),
            n => crate::log!(
                "{} failed: {error} (and {n} more since the last report)",
                self.what
            ),
        }
        self.last = Some(now);
    }
}

#[cfg(test)]
mod tests;
