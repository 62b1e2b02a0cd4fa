//! The contract between the application and the servers that run it.
//!
//! A server owns the sockets, the HTTP connections, the thread's PostgreSQL connections
//! (a [`Pool`]) and its timers. It hands the application every parsed request, every
//! database event and every timer that comes due, and delivers the responses the
//! application finishes to their connections, in order. The application never sees a
//! socket; the servers know nothing of routes.

use std::time::Instant;

use crate::http::{ContentType, HttpDate, Reply, Request, Response, Status, Ticket, MAX_BODY};
use crate::pg::{Event, Pool};
use crate::timers::Timers;
use crate::ws;

pub trait Service {
    /// Appends the whole response to `request` to `out` (through `response`, which writes
    /// HTTP/1.1, or an HTTP/2 stream's `StreamAnswer`) and returns [`Reply::Now`], or
    /// queues queries on `cx.db` or a timer with [`Context::answer_at`] and returns
    /// [`Reply::Later`]: the response then comes from [`Service::on_database_event`] or
    /// [`Service::on_timer`] with `ticket`.
    fn handle(
        &mut self,
        request: &Request<'_>,
        response: Response,
        ticket: Ticket,
        out: &mut Vec<u8>,
        cx: &mut Context<'_>,
    ) -> Reply;

    /// One event of the query with `token`. Returns the response it finishes, if any.
    fn on_database_event(&mut self, token: u64, event: Event<'_>) -> Option<Finished<'_>>;

    /// The time set by [`Context::answer_at`] for the request of `ticket` has come. Returns
    /// the response it finishes, if any. Not called once the request's connection has
    /// closed: keep what the answer needs in the token.
    fn on_timer(&mut self, ticket: Ticket, token: u64) -> Option<Finished<'_>>;

    /// The largest request body taken; a larger one is answered 413 and the connection
    /// closes.
    fn max_body(&self) -> usize {
        MAX_BODY
    }

    /// A whole message on a connection that [`Service::handle`] switched to WebSocket
    /// ([`Reply::Upgrade`]): append the frames that answer it to `out` with
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
    pub timers: &'a mut Timers,
}

impl Context<'_> {
    /// Has [`Service::on_timer`] called with `ticket` and `token` at `at` (not before), for
    /// a request answered with [`Reply::Later`].
    pub fn answer_at(&mut self, at: Instant, ticket: Ticket, token: u64) {
        self.timers.schedule(at, ticket, token);
    }
}

/// A response the database work of one request has finished.
pub struct Finished<'a> {
    pub ticket: Ticket,
    pub status: Status,
    pub content_type: ContentType,
    pub body: &'a [u8],
}
