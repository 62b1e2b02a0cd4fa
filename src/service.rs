//! The contract between the application and the servers that run it.
//!
//! A server owns the sockets, the HTTP connections, the thread's PostgreSQL connections
//! (a [`Pool`]), its Redis connections when it has them (a [`Redis`]), its upstream
//! connections in edge mode (an [`Upstream`]) and its timers. It hands the application every
//! parsed request, every database, Redis and upstream event and every timer that comes due,
//! and delivers the responses the application finishes to their connections, in order. The
//! application never sees a socket; the servers know nothing of routes.

use std::net::IpAddr;
use std::time::Instant;

use crate::http::{Answer, Handler, HttpDate, Origin, Reply, Request, Ticket, MAX_BODY};
use crate::pg::{Event, Pool};
use crate::redis::{self, Redis};
use crate::timers::{Timers, Wakeup};
use crate::upstream::{self, Proxy};
use crate::ws;

pub trait Service {
    /// Answers `request` at once ([`Reply::Now`], which the request's protocol encodes),
    /// or queues queries on `cx.db` or a timer with [`Context::answer_at`] and returns
    /// [`Reply::Later`]: the answer then comes from [`Service::on_database_event`] or
    /// [`Service::on_timer`] with `ticket`. A `101` switches an HTTP/1.1 connection to
    /// WebSocket.
    fn handle<'a>(
        &'a mut self,
        request: &'a Request<'a>,
        ticket: Ticket,
        cx: &mut Context<'_>,
    ) -> Reply<'a>;

    /// One event of the query with `token`. Returns the response it finishes, if any. The
    /// request may go on with commands on `redis` (the worker's, when it has one).
    fn on_database_event(
        &mut self,
        token: u64,
        event: Event<'_>,
        redis: Option<&mut Redis>,
    ) -> Option<Finished<'_>>;

    /// What became of the Redis command with `token` ([`Redis::command`] on `cx.redis`).
    /// Returns the response it finishes, if any; the request may go on with queries on `db`.
    fn on_redis_event(
        &mut self,
        token: u64,
        event: redis::Event<'_>,
        db: &mut Pool,
    ) -> Option<Finished<'_>> {
        let _ = (token, event, db);
        None
    }

    /// The time set by [`Context::answer_at`] for the request of `ticket` has come. Returns
    /// the response it finishes, if any. Not called once the request's connection has
    /// closed: keep what the answer needs in the token.
    fn on_timer(&mut self, ticket: Ticket, token: u64) -> Option<Finished<'_>>;

    /// What became of the request forwarded with `token` ([`Upstream::forward`] on
    /// `cx.upstream`): its response's head (its body to come through its pipe), more of
    /// that body, or its failure. Returns what it does to the request's answer, if
    /// anything: the answer, which may borrow the response (it is written before the
    /// upstream reads on), or its body's move.
    fn on_upstream_event<'a>(
        &'a mut self,
        token: u64,
        event: upstream::Event<'a>,
    ) -> Option<Passed<'a>> {
        let _ = (token, event);
        None
    }

    /// The largest request body taken; a larger one is answered 413 and the connection
    /// closes.
    fn max_body(&self) -> usize {
        MAX_BODY
    }

    /// A whole message on a connection that [`Service::handle`] switched to WebSocket
    /// (a `101`): append the frames that answer it to `out` with
    /// [`ws::frame::write`]. Everything one read brought is answered before the output goes.
    fn on_message(&mut self, message: ws::Message<'_>, out: &mut Vec<u8>);

    /// The longest WebSocket message taken; a longer one closes its connection with 1009.
    fn max_message(&self) -> usize {
        ws::MAX_MESSAGE
    }
}

/// What a request is answered with besides the request itself.
pub struct Context<'a> {
    pub date: &'a HttpDate,
    pub now: Instant,
    pub db: &'a mut Pool,
    pub timers: &'a mut Timers<Wakeup>,
    /// The worker's connections to Redis, when the server has one (never at the edge).
    pub redis: Option<&'a mut Redis>,
    /// The worker's connections to the upstream, in edge (reverse-proxy) mode.
    pub upstream: Option<&'a mut Proxy>,
    /// The request's connection: where it came from.
    pub origin: Origin,
}

impl Context<'_> {
    /// Has [`Service::on_timer`] called with `ticket` and `token` at `at` (not before), for
    /// a request answered with [`Reply::Later`].
    pub fn answer_at(&mut self, at: Instant, ticket: Ticket, token: u64) {
        self.timers.schedule(at, Wakeup { ticket, token });
    }
}

/// The answer that the database work, or the timer, of one request has finished.
pub struct Finished<'a> {
    pub ticket: Ticket,
    pub answer: Answer<'a>,
}

/// What an upstream's event does to the answer of a request forwarded.
pub enum Passed<'a> {
    /// Its answer, whose body may still be arriving (`Body::Piped`).
    Answer(Finished<'a>),
    /// More of the piped body of the answer to `Ticket` is in (or it ended, or failed):
    /// its protocol takes what it has room for.
    Body(Ticket),
}

/// A service with what it answers with: what a protocol hands its requests to.
pub struct Serving<'s, 'c, 'x, S> {
    pub service: &'s mut S,
    pub cx: &'c mut Context<'x>,
}

impl<S: Service> Handler for Serving<'_, '_, '_, S> {
    fn handle<'a>(&'a mut self, request: &'a Request<'a>, ticket: Ticket) -> Reply<'a> {
        self.service.handle(request, ticket, self.cx)
    }

    fn set_client(&mut self, client: IpAddr) {
        self.cx.origin.client = Some(client);
    }
}
