//! The HTTP/1.1 core of both binaries over real sockets: the routes and the protocol
//! (`basics`), hostile and broken clients (`hostile`), what only the io_uring server has
//! (`uring`), and property tests of the parser and a whole connection (`fuzz`).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod basics;
mod fuzz;
mod hostile;
mod uring;
