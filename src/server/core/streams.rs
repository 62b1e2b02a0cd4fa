//! HTTP/2 requests answered through the app, as the core answers HTTP/1.1's.

use crate::h2;
use crate::http::{BufferPool, Reply, Response, StreamAnswer, Ticket, MAX_TRAILERS};
use crate::service::{Context, Service};

/// An HTTP/2 connection's limits: the defaults, with the app's largest body.
pub(super) fn limits<S: Service>(service: &S) -> h2::Limits {
    h2::Limits {
        max_body: service.max_body(),
        ..h2::Limits::default()
    }
}

/// Reads an HTTP/2 connection's frames and answers each complete request through the
/// app, as HTTP/1.1's are answered: at once (its `StreamAnswer`), or later by its ticket,
/// whose sequence number is the stream. `share` is the connection's part of the worker's
/// budget.
pub(super) fn answer<S: Service>(
    conn: &mut h2::Connection,
    slot: u32,
    generation: u32,
    service: &mut S,
    cx: &mut Context<'_>,
    buffers: &mut BufferPool,
    share: usize,
) {
    conn.process(cx.date, cx.now, buffers, share);
    let mut out = buffers.take();
    while let Some(request) = conn.take_request() {
        let stream = request.stream;
        let ticket = Ticket {
            slot,
            generation,
            seq: stream,
        };
        out.clear();
        let reply = service.handle(&request.http(), Response::stream(), ticket, &mut out, cx);
        if reply == Reply::Later {
            continue;
        }
        if let Some(answer) = StreamAnswer::read(&out) {
            let mut trailers: [(&[u8], &[u8]); MAX_TRAILERS] = [(&[], &[]); MAX_TRAILERS];
            let count = trailers
                .iter_mut()
                .zip(answer.trailers.fields())
                .map(|(place, field)| *place = field)
                .count();
            let answer = h2::Answer {
                status: answer.status,
                content_type: answer.content_type,
                encoding: answer.encoding,
                body: answer.body,
                trailers: &trailers[..count],
            };
            conn.answer(stream, &answer, cx.date, cx.now, buffers);
        }
    }
    buffers.give_back(out);
}
