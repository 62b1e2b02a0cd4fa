//! The io_uring state of one HTTP connection: what the worker has asked of the kernel for
//! it, and how far it is from closed.

/// The io_uring state of one HTTP connection (same index as the core's slot): its
/// receive, its send and how far it is from closed, each an enum of its own.
#[derive(Default)]
pub(super) struct SlotIo {
    pub(super) recv: RecvOp,
    pub(super) send: SendOp,
    pub(super) life: Life,
    /// Queued to be brought up to date after the current batch of completions.
    pub(super) dirty: bool,
}

/// The connection's multishot receive.
///
/// ```text
///  Idle ──armed──▶ Armed ──cancel submitted──▶ Cancelling
///   ▲                │                             │
///   └────────────────┴── its last completion ──────┘
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum RecvOp {
    #[default]
    Idle,
    Armed,
    /// A cancel of the receive was submitted (to stop reading for a while, or to close).
    Cancelling,
}

/// The connection's one send in flight.
///
/// ```text
///  Idle ──send submitted──▶ Sending ──begin_close: cancel submitted──▶ Cancelling
///   ▲                          │                                          │
///   └──────────────────────────┴──────────── its completion ──────────────┘
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum SendOp {
    #[default]
    Idle,
    /// The kernel is reading the connection's unsent output: nothing may change it until
    /// the send completes.
    Sending,
    /// A cancel of the send was submitted (the connection is closing).
    Cancelling,
}

/// How far the connection is from closed. io_uring runs a shutdown on its worker threads,
/// which look the socket's file-table entry up only when they get to it: the entry is not
/// closed while one is in flight.
///
/// ```text
///  Open ──Next::Linger: shutdown submitted──▶ ShuttingDown
///   ▲ │                                           │ │
///   │ └─────── the shutdown's completion ─────────┘ │
///   │                                               │
///   │ begin_close                                   │ begin_close
///   ▼                                               ▼
///  Closing ◀──── the shutdown's completion ──── ClosingShuttingDown
///   │
///   │ nothing in flight: the socket is closed, the slot released (its next connection
///   ▼ starts at Open)
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Life {
    #[default]
    Open,
    /// Its write side's shutdown is in flight (it lingers, served meanwhile).
    ShuttingDown,
    /// Being closed: waiting for its operations to end before the socket is closed.
    Closing,
    /// Being closed, and its shutdown is still in flight.
    ClosingShuttingDown,
}

impl SlotIo {
    /// Whether an operation the kernel holds still names the socket's file-table entry:
    /// until none does, closing it could let the entry's next socket get that operation.
    pub(super) fn in_flight(&self) -> bool {
        self.recv != RecvOp::Idle
            || self.send != SendOp::Idle
            || matches!(self.life, Life::ShuttingDown | Life::ClosingShuttingDown)
    }

    /// Whether it is being closed: what arrives is dropped, nothing more is sent.
    pub(super) fn closing(&self) -> bool {
        matches!(self.life, Life::Closing | Life::ClosingShuttingDown)
    }

    /// It is to be closed once nothing is in flight.
    pub(super) fn begin_close(&mut self) {
        self.life = match self.life {
            Life::Open | Life::Closing => Life::Closing,
            Life::ShuttingDown | Life::ClosingShuttingDown => Life::ClosingShuttingDown,
        };
    }

    /// Its shutdown completed.
    pub(super) fn shutdown_ended(&mut self) {
        self.life = match self.life {
            Life::ShuttingDown => Life::Open,
            Life::ClosingShuttingDown => Life::Closing,
            life => life,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_closed_while_shutting_down_waits_for_the_shutdown() {
        let mut io = SlotIo {
            life: Life::ShuttingDown,
            ..SlotIo::default()
        };
        io.begin_close();
        assert!(io.closing() && io.in_flight());
        io.shutdown_ended();
        assert!(io.closing() && !io.in_flight());
        let mut open = SlotIo {
            life: Life::ShuttingDown,
            ..SlotIo::default()
        };
        open.shutdown_ended();
        assert!(!open.closing() && !open.in_flight());
    }

    #[test]
    fn a_slot_is_four_bytes() {
        assert_eq!(std::mem::size_of::<SlotIo>(), 4);
    }
}
