//! One worker thread's database work: its PostgreSQL connections, and the requests waiting
//! for them. Each request becomes a job whose queries carry the job's index as their token;
//! when a job's last answer arrives its response is rendered and handed back by ticket.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use super::fortune::Fortunes;
use super::world::{distinct_random_ids, new_random_number, random_id, World};
use crate::http::{ContentType, Status};
use crate::pg::protocol::{INT4_ARRAY_OID, INT4_OID};
use crate::pg::{Config, DbError, Event, Param, PgConn, Row, Statement};
use crate::server::Ticket;

/// Prepared once per connection; the indexes below name them.
static STATEMENTS: &[Statement] = &[
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
];
const SELECT_WORLD: usize = 0;
const SELECT_FORTUNES: usize = 1;
const UPDATE_WORLDS: usize = 2;

/// The database routes, with their query counts already clamped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DbRoute {
    World,
    Queries(usize),
    Updates(usize),
    Fortunes,
}

/// Queries a connection holds before new requests go to the next one (see
/// [`Database::pick_connection`]).
const SPILL_DEPTH: usize = 1024;

pub struct Database {
    connections: Vec<PgConn>,
    jobs: Jobs,
}

#[derive(Default)]
struct Jobs {
    all: Vec<Job>,
    free: Vec<usize>,
    rng: fastrand::Rng,
    /// Update jobs whose selects are all answered, waiting to send their UPDATE.
    updates_due: Vec<usize>,
    finished: Vec<Finished>,
    /// The bodies of `finished`, back to back.
    bodies: Vec<u8>,
    /// Scratch for the ids and new numbers of one request.
    ids: Vec<i32>,
    numbers: Vec<i32>,
    errors: ErrorLog,
}

struct Job {
    ticket: Ticket,
    route: DbRoute,
    connection: usize,
    /// Queries sent and not answered yet.
    outstanding: usize,
    /// Set by the first failure; the job still waits for its other answers.
    failure: Option<Status>,
    /// Updates: the selects are answered and the UPDATE is under way.
    updating: bool,
    worlds: Vec<World>,
    fortunes: Fortunes,
}

struct Finished {
    ticket: Ticket,
    status: Status,
    content_type: ContentType,
    body: Range<usize>,
}

impl Database {
    pub fn new(config: Arc<Config>, connections: usize) -> Database {
        Database {
            connections: (0..connections)
                .map(|_| PgConn::new(config.clone(), STATEMENTS))
                .collect(),
            jobs: Jobs::default(),
        }
    }

    pub fn connections(&self) -> &[PgConn] {
        &self.connections
    }

    /// Every connection has either become ready or failed to: what the database is like
    /// right now is known.
    pub fn settled(&self) -> bool {
        self.connections
            .iter()
            .all(|pg| pg.is_ready() || pg.last_error().is_some())
    }

    /// Queues the queries for `route`, each its own Bind/Execute/Sync; the response comes
    /// through [`Database::take_finished`]. `Err` is the status to answer with at once when
    /// nothing could be queued.
    pub fn start(&mut self, route: DbRoute, ticket: Ticket) -> Result<(), Status> {
        let connection = self.pick_connection().ok_or(Status::ServiceUnavailable)?;
        let pg = &mut self.connections[connection];
        let index = self.jobs.allocate(ticket, route, connection);
        let Jobs { all, rng, ids, .. } = &mut self.jobs;
        let job = &mut all[index];
        let token = index as u64;

        ids.clear();
        match route {
            DbRoute::World => ids.push(random_id(rng)),
            DbRoute::Queries(n) => ids.extend((0..n).map(|_| random_id(rng))),
            DbRoute::Updates(n) => distinct_random_ids(rng, n, ids),
            DbRoute::Fortunes => {}
        }
        let queued = match route {
            DbRoute::Fortunes => pg
                .query(SELECT_FORTUNES, &[], token)
                .map(|()| job.outstanding = 1),
            _ => ids.iter().try_for_each(|&id| {
                pg.query(SELECT_WORLD, &[Param::Int4(id)], token)
                    .map(|()| job.outstanding += 1)
            }),
        };
        if queued.is_err() {
            // The connection is full or just went away: answer 503, once the queries that
            // did go out are answered.
            job.failure = Some(Status::ServiceUnavailable);
            if job.outstanding == 0 {
                self.jobs.free.push(index);
                return Err(Status::ServiceUnavailable);
            }
        }
        Ok(())
    }

    /// The first ready connection with room under [`SPILL_DEPTH`], else the least busy ready
    /// one. One deep pipeline keeps a backend busiest for the least overhead; the others take
    /// only what it cannot keep up with.
    fn pick_connection(&self) -> Option<usize> {
        let ready = || (0..self.connections.len()).filter(|&i| self.connections[i].is_ready());
        ready()
            .find(|&i| self.connections[i].queued() < SPILL_DEPTH)
            .or_else(|| ready().min_by_key(|&i| self.connections[i].queued()))
    }

    pub fn on_readable(&mut self, connection: usize) {
        let jobs = &mut self.jobs;
        self.connections[connection].on_readable(&mut |token, event| jobs.on_event(token, event));
        self.send_due_updates();
    }

    pub fn on_writable(&mut self, connection: usize) {
        let jobs = &mut self.jobs;
        self.connections[connection].on_writable(&mut |token, event| jobs.on_event(token, event));
        self.send_due_updates();
    }

    /// Sends every connection's queued queries, one write each.
    pub fn flush(&mut self) {
        let jobs = &mut self.jobs;
        for pg in &mut self.connections {
            pg.flush(&mut |token, event| jobs.on_event(token, event));
        }
        self.send_due_updates();
    }

    pub fn on_timer(&mut self, now: Instant) {
        let jobs = &mut self.jobs;
        for pg in &mut self.connections {
            pg.on_timer(now, &mut |token, event| jobs.on_event(token, event));
        }
        self.send_due_updates();
    }

    pub fn next_timer(&self) -> Option<Instant> {
        self.connections.iter().filter_map(PgConn::next_timer).min()
    }

    /// Hands out every finished response.
    pub fn take_finished(&mut self, mut deliver: impl FnMut(Ticket, Status, ContentType, &[u8])) {
        let Jobs {
            finished, bodies, ..
        } = &mut self.jobs;
        for done in finished.drain(..) {
            deliver(
                done.ticket,
                done.status,
                done.content_type,
                &bodies[done.body],
            );
        }
        bodies.clear();
    }

    /// The second step of the update jobs whose selects are answered: new random numbers,
    /// then one UPDATE for all their rows, ids sorted so that concurrent requests lock rows
    /// in the same order and cannot deadlock.
    fn send_due_updates(&mut self) {
        let jobs = &mut self.jobs;
        while let Some(index) = jobs.updates_due.pop() {
            let Jobs {
                all,
                rng,
                ids,
                numbers,
                ..
            } = &mut *jobs;
            let job = &mut all[index];
            job.worlds.sort_unstable_by_key(|world| world.id);
            for world in &mut job.worlds {
                world.random_number = new_random_number(rng, world.random_number);
            }
            ids.clear();
            ids.extend(job.worlds.iter().map(|world| world.id));
            numbers.clear();
            numbers.extend(job.worlds.iter().map(|world| world.random_number));
            let params = [Param::Int4Array(ids), Param::Int4Array(numbers)];
            match self.connections[job.connection].query(UPDATE_WORLDS, &params, index as u64) {
                Ok(()) => {
                    job.updating = true;
                    job.outstanding = 1;
                }
                Err(_) => {
                    job.failure = Some(Status::ServiceUnavailable);
                    jobs.finish(index);
                }
            }
        }
    }
}

impl Jobs {
    fn allocate(&mut self, ticket: Ticket, route: DbRoute, connection: usize) -> usize {
        let fresh = |worlds, fortunes| Job {
            ticket,
            route,
            connection,
            outstanding: 0,
            failure: None,
            updating: false,
            worlds,
            fortunes,
        };
        match self.free.pop() {
            Some(index) => {
                // Keep the buffers of the job that was here.
                let old = &mut self.all[index];
                let (mut worlds, mut fortunes) = (
                    std::mem::take(&mut old.worlds),
                    std::mem::take(&mut old.fortunes),
                );
                worlds.clear();
                fortunes.clear();
                *old = fresh(worlds, fortunes);
                index
            }
            None => {
                self.all.push(fresh(Vec::new(), Fortunes::default()));
                self.all.len() - 1
            }
        }
    }

    fn on_event(&mut self, token: u64, event: Event<'_>) {
        let index = token as usize;
        let Some(job) = self.all.get_mut(index) else {
            return;
        };
        match event {
            Event::Row(row) => {
                if job.failure.is_none() {
                    if let Err(error) = job.take_row(&row) {
                        self.errors.report(&error);
                        job.failure = Some(Status::InternalServerError);
                    }
                }
                return;
            }
            Event::Done => {}
            Event::Failed(DbError::ConnectionLost) => {
                // The connection reports the loss itself; the request gets a 503.
                job.failure.get_or_insert(Status::ServiceUnavailable);
            }
            Event::Failed(error) => {
                self.errors.report(error);
                job.failure.get_or_insert(Status::InternalServerError);
            }
        }
        job.outstanding = job.outstanding.saturating_sub(1);
        if job.outstanding == 0 {
            self.finish(index);
        }
    }

    /// All of a job's answers are in: render its response, or for updates whose selects are
    /// done, line up the UPDATE.
    fn finish(&mut self, index: usize) {
        let job = &mut self.all[index];
        let start = self.bodies.len();
        let expected_worlds = match job.route {
            DbRoute::World => 1,
            DbRoute::Queries(n) | DbRoute::Updates(n) => n,
            DbRoute::Fortunes => 0,
        };
        if job.failure.is_none() && job.worlds.len() != expected_worlds {
            self.errors
                .report(&DbError::Column("a world row is missing".into()));
            job.failure = Some(Status::InternalServerError);
        }
        let (status, content_type) = match (job.failure, job.route) {
            (Some(status), _) => {
                self.bodies.extend_from_slice(status.reason().as_bytes());
                (status, ContentType::Plain)
            }
            (None, DbRoute::Updates(_)) if !job.updating => {
                self.updates_due.push(index);
                return;
            }
            (None, DbRoute::Fortunes) => {
                job.fortunes.render(&mut self.bodies);
                (Status::Ok, ContentType::Html)
            }
            (None, DbRoute::World) => {
                write_json(&mut self.bodies, &job.worlds[0]);
                (Status::Ok, ContentType::Json)
            }
            (None, DbRoute::Queries(_) | DbRoute::Updates(_)) => {
                write_json(&mut self.bodies, &job.worlds);
                (Status::Ok, ContentType::Json)
            }
        };
        self.finished.push(Finished {
            ticket: job.ticket,
            status,
            content_type,
            body: start..self.bodies.len(),
        });
        self.free.push(index);
    }
}

impl Job {
    fn take_row(&mut self, row: &Row<'_>) -> Result<(), DbError> {
        match self.route {
            DbRoute::Fortunes => self.fortunes.push(row.int4(0)?, row.text(1)?),
            // The UPDATE returns no rows.
            _ if self.updating => {}
            _ => self.worlds.push(World {
                id: row.int4(0)?,
                random_number: row.int4(1)?,
            }),
        }
        Ok(())
    }
}

/// Serializing plain structs into memory cannot fail.
pub(super) fn write_json(out: &mut Vec<u8>, value: &impl serde::Serialize) {
    serde_json::to_writer(out, value).expect("serializing into memory");
}

/// Logs database failures without flooding: the first one, then at most one a second with
/// the count of those left out.
#[derive(Default)]
struct ErrorLog {
    last: Option<Instant>,
    suppressed: u64,
}

impl ErrorLog {
    fn report(&mut self, error: &DbError) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|last| now.duration_since(last).as_secs() < 1)
        {
            self.suppressed += 1;
            return;
        }
        match std::mem::take(&mut self.suppressed) {
            0 => eprintln!("gnosis: query failed: {error}"),
            n => eprintln!("gnosis: query failed: {error} (and {n} more since the last report)"),
        }
        self.last = Some(now);
    }
}
