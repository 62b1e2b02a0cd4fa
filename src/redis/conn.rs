//! One connection to Redis, without I/O: its set-up (AUTH, SELECT) once connected, the
//! commands written on it whose replies have not come, the replies read and matched to them
//! in order, and what its failure does to them. Its link (`crate::link::Link`) moves its
//! bytes; the pool (`super::Redis`) gives it commands.

use std::collections::VecDeque;
use std::io;
use std::time::Instant;

use super::protocol::{decode, encode_command, Value};
use super::{Around, Event, Failure, Refused, Settings, Sink};
use crate::link::{self, Address, Driven, Input, Step};

/// The input a connection keeps once empty; what a large reply grew it to is freed.
const INPUT_KEPT: usize = 64 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// No socket; a command opens one (`start`).
    Idle,
    /// A socket is wanted.
    Connect,
    /// The connect is under way and must end by `deadline`.
    Connecting {
        deadline: Instant,
    },
    /// Connected; the set-up's replies must all come by `deadline` before any command goes.
    Setup {
        deadline: Instant,
    },
    Open,
}

/// A command whose reply has not come.
struct InFlight {
    token: u64,
    deadline: Instant,
}

pub struct Conn {
    address: Address,
    settings: Settings,
    /// AUTH and SELECT, encoded (they may hold the password: never logged), and how many.
    setup: Vec<u8>,
    setup_commands: usize,
    phase: Phase,
    /// Changes whenever the socket is given up.
    generation: u64,
    /// Set-up replies still awaited; the set-up was taken by the link.
    setup_left: usize,
    setup_given: bool,
    /// Commands written and not taken by the link yet: held back until the set-up is done,
    /// so that none runs unauthenticated or in the wrong database.
    output: Vec<u8>,
    /// Oldest first, as their replies come; each deadline is later than the one before.
    in_flight: VecDeque<InFlight>,
    /// Received, not read yet.
    input: Input,
}

impl Conn {
    pub(super) fn new(address: Address, setup: (Vec<u8>, usize), settings: Settings) -> Conn {
        Conn {
            address,
            settings,
            setup: setup.0,
            setup_commands: setup.1,
            phase: Phase::Idle,
            generation: 0,
            setup_left: 0,
            setup_given: false,
            output: Vec::new(),
            in_flight: VecDeque::new(),
            input: Input::default(),
        }
    }

    /// Commands written on it whose replies have not come.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Connected and set up: commands go out as they come.
    pub fn is_open(&self) -> bool {
        self.phase == Phase::Open
    }

    /// Without a socket, and not wanting one.
    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Idle
    }

    /// An idle connection wants a socket.
    pub(super) fn start(&mut self) {
        if self.phase == Phase::Idle {
            self.phase = Phase::Connect;
        }
    }

    /// Writes the command `args`, its reply awaited by `deadline`, unless the connection
    /// holds all it may.
    pub(super) fn push(
        &mut self,
        token: u64,
        args: &[&[u8]],
        deadline: Instant,
    ) -> Result<(), Refused> {
        if self.in_flight.len() >= self.settings.max_in_flight
            || self.output.len() >= self.settings.queue_bytes
        {
            return Err(Refused::Busy);
        }
        encode_command(args, &mut self.output);
        self.in_flight.push_back(InFlight { token, deadline });
        Ok(())
    }

    /// When `on_timer` must run: the connect's or the set-up's deadline, the oldest command's.
    pub(super) fn deadline(&self) -> Option<Instant> {
        let phase = match self.phase {
            Phase::Connecting { deadline } | Phase::Setup { deadline } => Some(deadline),
            _ => None,
        };
        let oldest = self.in_flight.front().map(|command| command.deadline);
        phase.into_iter().chain(oldest).min()
    }

    /// A connect or set-up past its deadline fails as a refused one; a command past its
    /// deadline fails with [`Failure::TimedOut`], and the connection with it.
    pub(super) fn on_timer<S: Sink>(&mut self, now: Instant, around: &mut Around<'_, S>) {
        if self.deadline().is_some_and(|deadline| deadline <= now) {
            self.give_up(Failure::Unavailable, now, around);
        }
    }

    /// Gives the socket up: every command it holds fails, with `failure` or, past its
    /// deadline, [`Failure::TimedOut`]. One that never got connected and set up makes the
    /// pool back off.
    fn give_up<S: Sink>(&mut self, failure: Failure, now: Instant, around: &mut Around<'_, S>) {
        if self.phase == Phase::Idle {
            return;
        }
        if self.phase != Phase::Open {
            around.backoff.failed(now);
        }
        for command in self.in_flight.drain(..) {
            let failure = match command.deadline <= now {
                true => Failure::TimedOut,
                false => failure,
            };
            (around.sink)(command.token, Event::Failed(failure));
        }
        self.generation += 1;
        self.phase = Phase::Idle;
        self.setup_left = 0;
        self.setup_given = false;
        self.output.clear();
        self.input.clear(INPUT_KEPT);
    }

    /// Reads every reply the input holds, each its oldest command's (or the set-up's).
    fn read<S: Sink>(&mut self, now: Instant, around: &mut Around<'_, S>) {
        while !self.input.is_empty() {
            let (value, used) = match decode(self.input.unread(), &self.settings.limits) {
                Ok(Some(reply)) => reply,
                Ok(None) => break,
                Err(error) => return self.give_up(Failure::Protocol(error), now, around),
            };
            // Out-of-band data and metadata (RESP3's, never sent to a RESP2 client) are no
            // command's reply.
            if matches!(value, Value::Push(_) | Value::Attribute(_)) {
                self.input.consume(used);
                continue;
            }
            if self.setup_left > 0 {
                if value.error().is_some() {
                    return self.give_up(Failure::SetupRefused, now, around);
                }
                self.input.consume(used);
                self.setup_left -= 1;
                if self.setup_left == 0 {
                    self.phase = Phase::Open;
                    around.backoff.succeeded();
                }
                continue;
            }
            let Some(command) = self.in_flight.pop_front() else {
                // A reply to nothing: the line of replies is out of step.
                let error = super::DecodeError::Malformed("a reply to no command");
                return self.give_up(Failure::Protocol(error), now, around);
            };
            let event = match value.error() {
                Some(message) => Event::Error(message),
                None => Event::Reply(value),
            };
            (around.sink)(command.token, event);
            self.input.consume(used);
        }
        self.input.shrink(INPUT_KEPT);
    }
}

impl link::Conn for Conn {
    fn step(&self) -> Step {
        match self.phase {
            Phase::Idle => Step::Idle,
            Phase::Connect => Step::Connect,
            Phase::Connecting { .. } => Step::Connecting,
            Phase::Setup { .. } | Phase::Open => Step::Io,
        }
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    /// Room after what is unread; what is unread is at most one reply in part, which the
    /// decoder bounds (`Limits::max_len`), so the input stays within twice that.
    fn read_buffer(&mut self) -> &mut [u8] {
        self.input.room()
    }

    fn take_output(&mut self, out: &mut Vec<u8>) {
        match self.phase {
            Phase::Setup { .. } if !self.setup_given => {
                out.extend_from_slice(&self.setup);
                self.setup_given = true;
            }
            // The link empties `out` before asking: the buffers trade places, no copy.
            Phase::Open if out.is_empty() => std::mem::swap(out, &mut self.output),
            Phase::Open => out.append(&mut self.output),
            _ => {}
        }
    }

    fn has_output(&self) -> bool {
        match self.phase {
            Phase::Setup { .. } => !self.setup_given,
            Phase::Open => !self.output.is_empty(),
            _ => false,
        }
    }
}

impl<S: Sink> Driven<Around<'_, S>> for Conn {
    fn address(&mut self, _: Instant, _: &mut Around<'_, S>) -> Option<Address> {
        Some(self.address.clone())
    }

    fn connecting(&mut self, now: Instant) {
        if self.phase == Phase::Connect {
            let deadline = now + self.settings.connect_timeout;
            self.phase = Phase::Connecting { deadline };
        }
    }

    fn connected(&mut self, now: Instant, around: &mut Around<'_, S>) {
        if !matches!(self.phase, Phase::Connect | Phase::Connecting { .. }) {
            return;
        }
        if self.setup_commands == 0 {
            self.phase = Phase::Open;
            around.backoff.succeeded();
        } else {
            let deadline = now + self.settings.connect_timeout;
            self.phase = Phase::Setup { deadline };
            self.setup_left = self.setup_commands;
        }
    }

    fn filled(&mut self, n: usize, now: Instant, around: &mut Around<'_, S>) {
        if !matches!(self.phase, Phase::Setup { .. } | Phase::Open) {
            return;
        }
        if n == 0 {
            // Closed by the server: what it holds has no reply coming.
            return self.give_up(Failure::Unavailable, now, around);
        }
        self.input.filled(n);
        self.read(now, around);
    }

    fn transport_failed(&mut self, _: io::Error, now: Instant, around: &mut Around<'_, S>) {
        self.give_up(Failure::Unavailable, now, around);
    }
}
