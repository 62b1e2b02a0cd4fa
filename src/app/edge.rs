//! The edge (`--upstream`): gnosis in front of an HTTP/1.1 server. `/static/*` is served
//! here, from the edge's own folder (HttpArena's gateway profiles forbid forwarding it);
//! every other request goes to the upstream (`cx.upstream`, [`crate::upstream`]) with a
//! token that names its ticket, and the upstream's whole answer, or its failure as 502 or
//! 504, comes back by that token.

use std::time::Instant;

use crate::http::{Answer, Origin, Reply, Request, Status, Ticket};
use crate::service::Finished;
use crate::upstream::{Event, Proxy};

/// The tickets of the requests forwarded and not answered yet, by token: a slot each,
/// reused once its answer came (the upstream gives every request it took one event).
#[derive(Default)]
pub struct Forwarded {
    tickets: Vec<Option<Ticket>>,
    free: Vec<usize>,
}

impl Forwarded {
    /// Forwards `request` to `upstream`, or answers at once why it cannot be.
    pub fn forward<'a>(
        &mut self,
        upstream: &mut Proxy,
        request: &Request<'_>,
        ticket: Ticket,
        origin: Origin,
        now: Instant,
    ) -> Reply<'a> {
        let index = self.free.pop().unwrap_or_else(|| {
            self.tickets.push(None);
            self.tickets.len() - 1
        });
        match upstream.forward_request(index as u64, request, origin, now) {
            Ok(()) => {
                self.tickets[index] = Some(ticket);
                Reply::Later
            }
            Err(refused) => {
                self.free.push(index);
                Reply::Now(Answer::error(refused.status()))
            }
        }
    }

    /// The answer of the request forwarded with `token`: the upstream's, passed on, or the
    /// status of its failure.
    pub fn answer<'a>(&mut self, token: u64, event: Event<'a>) -> Option<Finished<'a>> {
        let index = usize::try_from(token).ok()?;
        let ticket = self.tickets.get_mut(index)?.take()?;
        self.free.push(index);
        let answer = match event {
            Event::Response(response) => Answer::forwarded(
                Status::from_code(response.status),
                response.fields,
                response.body,
            ),
            Event::Failed(failure) => Answer::error(failure.status()),
        };
        Some(Finished { ticket, answer })
    }
}
