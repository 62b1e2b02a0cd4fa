//! WebSocket (RFC 6455): the opening handshake, the frames, and one connection after the
//! switch. Nothing here does I/O: the core feeds bytes in and takes bytes out, as for HTTP.
//!
//! The app decides which request switches (it checks it with [`handshake::check`] and
//! answers `http::Answer::switch_to_websocket`) and what each message is answered with
//! (`Service::on_message`,
//! writing frames with [`frame::write`]); the core switches the connection's protocol once
//! every answer before the `101` is in its output.

pub mod frame;
pub mod handshake;
mod session;

pub use frame::Opcode;
pub use session::{longest_frame, Message, Session, MAX_MESSAGE};
