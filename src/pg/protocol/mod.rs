//! The PostgreSQL v3 wire protocol, apart from any I/O: encoders that append frontend messages
//! to a byte buffer, and an incremental decoder that takes backend messages out of one.
//!
//! The decoder validates every length before slicing, so any byte sequence yields either a
//! message, "need more bytes" or an error, never a panic.
//!
//! `frontend` encodes what the client sends, `backend` decodes what the server sends, `types`
//! reads the binary column values the client asks for.

mod backend;
mod frontend;
#[cfg(any(test, feature = "test-kit"))]
pub mod script;
#[cfg(test)]
mod tests;
mod types;

pub use backend::*;
pub use frontend::*;
pub use types::*;
