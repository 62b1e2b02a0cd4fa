//! The edge (`--upstream`): gnosis in front of an HTTP/1.1 server. `/static/*` is served
//! here, from the edge's own folder (HttpArena's gateway profiles forbid forwarding it);
//! every other request goes to the upstream (`cx.upstream`, [`crate::upstream`]) with a
//! token that names its ticket, and the upstream's answer (its head, then its body as it
//! arrives), or its failure as 502 or 504, comes back by that token.

use std::time::Instant;

use crate::http::{Answer, Body, Flow, Origin, Reply, Request, Status, Ticket};
use crate::service::{Finished, Passed};
use crate::upstream::{Event, Proxy};

/// The tickets of the requests forwarded whose answer is not all in yet, by token: a slot
/// each, reused once its last event came (the upstream ends every request it took with
/// one: its failure, its response with its body whole, or its body's last move).
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

    /// What the upstream's `event` does to the answer of the request forwarded with
    /// `token`: the upstream's answer passed on, its body piped as it arrives; the body's
    /// moves; or the status of its failure.
    pub fn answer<'a>(&mut self, token: u64, event: Event<'a>) -> Option<Passed<'a>> {
        let index = usize::try_from(token).ok()?;
        let ticket = (*self.tickets.get(index)?)?;
        let last = match &event {
            Event::Response(response) => response.body.flow() != Flow::Open,
            Event::Moved { last } => *last,
            Event::Failed(_) => true,
        };
        if last {
            self.tickets[index] = None;
            self.free.push(index);
        }
        let answer = match event {
            Event::Response(response) => Answer::forwarded(
                Status::from_code(response.status),
                response.fields,
                Body::Piped(response.body),
            ),
            Event::Moved { .. } => return Some(Passed::Body(ticket)),
            Event::Failed(failure) => Answer::error(failure.status()),
        };
        Some(Passed::Answer(Finished { ticket, answer }))
    }
}
