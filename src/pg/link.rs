//! A [`PgConn`] with the socket it wants (`crate::link`), for whoever moves the socket's
//! bytes (a server's event loop, or `blocking::Driver` over poll(2)).

use std::io;
use std::time::Instant;

use super::conn::{DbError, PgConn, Sink};
use crate::link::{Address, Conn, Driven, Floors, Step};

pub use crate::link::Order;

/// A PostgreSQL connection's link.
pub type Link = crate::link::Link<PgConn>;

impl Conn for PgConn {
    fn step(&self) -> Step {
        PgConn::step(self)
    }

    fn generation(&self) -> u64 {
        PgConn::generation(self)
    }

    fn read_buffer(&mut self) -> &mut [u8] {
        PgConn::read_buffer(self)
    }

    fn take_output(&mut self, out: &mut Vec<u8>) {
        PgConn::take_output(self, out)
    }

    fn has_output(&self) -> bool {
        PgConn::has_output(self)
    }

    fn read_low_water(&self) -> Option<Floors> {
        PgConn::read_low_water(self)
    }
}

impl<K: Sink> Driven<K> for PgConn {
    /// The target's address; without one the connection fails (and its target resolves the
    /// name again).
    fn address(&mut self, now: Instant, sink: &mut K) -> Option<Address> {
        let address = self.target().address();
        if address.is_none() {
            let error = self.target().unresolved();
            PgConn::transport_failed(self, error, now, sink);
        }
        address
    }

    fn connecting(&mut self, now: Instant) {
        PgConn::connecting(self, now)
    }

    fn connected(&mut self, now: Instant, _: &mut K) {
        PgConn::connected(self, now)
    }

    fn filled(&mut self, n: usize, now: Instant, sink: &mut K) {
        match n {
            0 => PgConn::transport_failed(self, DbError::closed(), now, sink),
            n => PgConn::filled(self, n, now, sink),
        }
    }

    fn transport_failed(&mut self, error: io::Error, now: Instant, sink: &mut K) {
        PgConn::transport_failed(self, DbError::Io(error.into()), now, sink)
    }
}
