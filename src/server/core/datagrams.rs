//! The worker's QUIC endpoint, beside its table of stream connections: the datagrams its
//! UDP socket receives go in here, its batches to send come out of [`Core::outbox`], its
//! connections' deadlines run with the worker's timers, and the answers the database or a
//! timer finish reach its requests by their tickets ([`QUIC_SLOT`]).

use std::sync::Arc;

use super::{Core, Worker};
use crate::h3;
use crate::http::Origin;
use crate::http::{AltSvc, Ticket};
use crate::quic::{Bounds, Endpoint, Outbox, Serve, Spread, QUIC_SLOT};
use crate::server::Listener;
use crate::service::{Context, Service, Serving};
use crate::sys::Received;
use crate::transport::Listening;

impl<S: Service, K> Core<S, K> {
    /// Serves HTTP/3 on worker `index`'s QUIC endpoint (the index its connection IDs
    /// carry), when it has a QUIC socket among its `listeners` and a TLS configuration; new
    /// clients shared with the other workers by `spread`.
    pub fn with_quic(mut self, index: u8, listeners: &[Listener], spread: Arc<Spread>) -> Self {
        let socket = listeners.iter().find(|l| l.kind == Listening::Quic);
        let port = socket.and_then(|l| crate::sys::local_port(&l.socket).ok());
        if let Some((tls, port)) = self.worker.tls.as_ref().zip(port) {
            self.worker.alt_svc = Some(AltSvc::h3(port));
            let limits = &self.worker.limits;
            let bounds = Bounds {
                connections: limits.max_conns,
                buffered: limits.max_buffered,
                request_timeout: limits.timeouts.request,
                h3: h3::Limits {
                    max_body: self.worker.service.max_body(),
                    keep_fields: limits.upstream.is_some(),
                    ..h3::Limits::default()
                },
            };
            let config = crate::quic::with_idle_timeout(&tls.quic(), limits.timeouts.idle);
            self.quic = Some(Box::new(Endpoint::new(index, config, bounds, spread)));
        }
        self
    }

    /// What one receive brought: `bytes`, one datagram or several of `segment` bytes each.
    pub fn datagrams(&mut self, received: &Received, bytes: &[u8]) {
        let share = self.share();
        let Some(quic) = &mut self.quic else { return };
        let ecn = quinn_proto::EcnCodepoint::from_bits(received.ecn);
        let segment = received.segment.unwrap_or(bytes.len()).max(1);
        with_serve(&mut self.worker, share, |serve| {
            for datagram in bytes.chunks(segment) {
                quic.handle(received.from, None, ecn, datagram, serve);
            }
        });
        self.worker.budget.recount_quic(quic.held());
    }

    /// The endpoint's batches to send, if it has any.
    pub fn outbox(&mut self) -> Option<&mut Outbox> {
        self.quic.as_deref_mut().map(Endpoint::outbox)
    }

    /// Runs the QUIC connections' deadlines that are due.
    pub(super) fn run_quic_deadlines(&mut self) {
        let share = self.share();
        if let Some(quic) = &mut self.quic {
            with_serve(&mut self.worker, share, |serve| quic.on_timers(serve));
            self.worker.budget.recount_quic(quic.held());
        }
    }
}

/// Runs `f` with what a QUIC connection's requests are answered with, and each
/// connection's `share` of the budget.
fn with_serve<S: Service, T>(
    worker: &mut Worker<S>,
    share: usize,
    f: impl FnOnce(&mut Serve<'_, Serving<'_, '_, '_, S>>) -> T,
) -> T {
    let Worker {
        service,
        pool,
        date,
        now,
        timers,
        redis,
        upstream,
        ..
    } = worker;
    let mut cx = Context {
        date,
        now: *now,
        db: pool,
        timers,
        redis: redis.as_mut(),
        upstream: upstream.as_mut(),
        // Each connection says its client before its requests (`Handler::set_client`).
        origin: Origin {
            client: None,
            https: true,
        },
    };
    let mut serving = Serving {
        service,
        cx: &mut cx,
    };
    f(&mut Serve {
        handler: &mut serving,
        date,
        now: *now,
        share,
    })
}

/// Whether `ticket` names a request of a QUIC connection.
pub(super) fn is_quic(ticket: &Ticket) -> bool {
    ticket.slot & QUIC_SLOT != 0
}
