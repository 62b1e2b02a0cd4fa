//! The PostgreSQL v3 wire protocol, apart from any I/O: `frontend` encodes what the client
//! sends, `backend` decodes what the server sends (never a panic, whatever the bytes), `types`
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
