//! The contract between the application and the servers that run it.
//!
//! A server owns the sockets, the HTTP connections and the thread's PostgreSQL connections
//! (a [`Pool`]). It hands the application every parsed request and every database event,
//! and delivers the responses the application finishes to their connections, in order. The
//! application never sees a socket; the servers know nothing of routes.

use std::time::Instant;

use crate::http::{ContentType, Handler, HttpDate, Reply, Request, Response, Status, Ticket};
use crate::pg::{Event, Pool};

pub trait Service {
    /// Appends the whole response to `request` to `out` and returns [`Reply::Now`], or
    /// queues queries on `cx.db` and returns [`Reply::Later`]: the response then comes from
    /// [`Service::on_database_event`] with `ticket`.
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
}

/// What a request is answered with besides the request itself.
pub struct Context<'a> {
    pub date: &'a HttpDate,
    pub now: Instant,
    pub db: &'a mut Pool,
}

/// A response the database work of one request has finished.
pub struct Finished<'a> {
    pub ticket: Ticket,
    pub status: Status,
    pub content_type: ContentType,
    pub body: &'a [u8],
}

/// A service as an HTTP connection's handler, with the thread's clock, `Date` and database
/// connections at hand.
pub struct Serving<'a, S> {
    pub service: &'a mut S,
    pub cx: Context<'a>,
}

impl<S: Service> Handler for Serving<'_, S> {
    fn handle(
        &mut self,
        request: &Request<'_>,
        response: Response,
        ticket: Ticket,
        out: &mut Vec<u8>,
    ) -> Reply {
        self.service
            .handle(request, response, ticket, out, &mut self.cx)
    }
}
