//! A connection's request bodies: DATA taken into its stream within the windows given,
//! the window given back, and the two bounds on what the bodies hold: the connection's body
//! budget, past which the newest unfinished upload is refused rather than left to wait for
//! window that would never come, and its share of the worker's budget, past which no window
//! is given until it is back under.

use super::Connection;
use crate::h2::frame::{ErrorCode, H2Error};
use crate::h2::stream::State;
use crate::http::{HttpDate, Status, Wire};

impl Connection {
    pub(super) fn on_data(
        &mut self,
        stream: u32,
        data: &[u8],
        end_stream: bool,
        flow_len: u32,
        date: &HttpDate,
    ) -> Result<(), H2Error> {
        let flow_len = flow_len as i64;
        self.inflow.take(flow_len).map_err(H2Error::Connection)?;
        self.inflow.grant_connection(self.output.frames());
        let Some(index) = self.index(stream) else {
            return self.closed_stream(stream, ErrorCode::StreamClosed);
        };
        let max_body = self.limits.max_body;
        let entry = &mut self.streams[index];
        if flow_len > entry.recv_window {
            return Err(H2Error::Stream(stream, ErrorCode::FlowControl));
        }
        entry.recv_window -= flow_len;
        let State::Receiving { head, body } = &mut entry.state else {
            // The rest of a request answered already is dropped.
            return match entry.state {
                State::Sending {
                    reset_after: true, ..
                } => Ok(()),
                _ => Err(H2Error::Stream(stream, ErrorCode::StreamClosed)),
            };
        };
        let len = body.len() + data.len();
        if head
            .content_length
            .is_some_and(|length| len as u64 > length)
        {
            return Err(H2Error::Stream(stream, ErrorCode::Protocol));
        }
        if len > max_body {
            self.answer_error(index, Status::PayloadTooLarge, !end_stream, date);
            return Ok(());
        }
        body.extend_from_slice(data);
        self.inflow.hold(data.len());
        if end_stream {
            return self.request_complete(index);
        }
        self.refuse_past_budget().map_err(H2Error::Connection)?;
        if let Some(index) = self.index(stream) {
            let out = self.output.frames();
            self.inflow.grant_stream(out, &mut self.streams[index]);
        }
        Ok(())
    }

    /// Unfinished bodies reached the connection's body budget: no window is given while
    /// they hold it, and none of them can finish without window, so the newest are refused
    /// (RST_STREAM REFUSED_STREAM: the app saw nothing of them, and a client may send them
    /// again) until the rest are within it. Every upload is then answered or reset (RFC
    /// 9113, 5.2.2), and the oldest finish first. Complete requests waiting to be handed
    /// out hold theirs until then, and are not refused. A walk of the streams, only when
    /// the budget is reached.
    fn refuse_past_budget(&mut self) -> Result<(), ErrorCode> {
        while self.inflow.over_budget() {
            let unfinished = self.streams.iter().rev().find(|stream| {
                matches!(stream.state, State::Receiving { .. }) && stream.body_len() > 0
            });
            let Some(id) = unfinished.map(|stream| stream.id) else {
                return Ok(());
            };
            self.reset(id, ErrorCode::RefusedStream)?;
        }
        Ok(())
    }

    /// Follows the connection's share of the worker's budget (`usize::MAX` while the
    /// worker is within it): over it, no window is given, so that its peer is held by flow
    /// control (what it may still send is what the windows allow, at most the connection's
    /// 64 KiB); back under, what was withheld is given. What the connection holds is
    /// counted only while the worker is over its budget.
    pub(super) fn follow_share(&mut self, share: usize) {
        let over = share != usize::MAX && self.held() > share;
        if self.inflow.pause(over) {
            self.grant_windows();
        }
    }

    /// DATA on a stream not open: an idle one's is a connection error, a closed one's a
    /// stream error, but one the server reset lately may still be in flight and is ignored,
    /// as are those opened after the server's GOAWAY.
    fn closed_stream(&self, stream: u32, code: ErrorCode) -> Result<(), H2Error> {
        let after_goaway =
            matches!(self.phase, super::Phase::Draining { last_stream } if stream > last_stream);
        if stream > self.last_stream {
            Err(H2Error::Connection(ErrorCode::Protocol))
        } else if after_goaway || self.recently_closed.by_reset(stream) {
            Ok(())
        } else {
            Err(H2Error::Stream(stream, code))
        }
    }

    /// Bodies were let go, or the connection is back under its share: the windows held
    /// back are given now.
    pub(super) fn grant_windows(&mut self) {
        self.inflow.grant_connection(self.output.frames());
        for stream in &mut self.streams {
            self.inflow.grant_stream(self.output.frames(), stream);
        }
    }
}
