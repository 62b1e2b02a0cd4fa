//! gnosis: a TechEmpower Framework Benchmarks entry.
//!
//! `http` parses requests and writes responses (no I/O), `pg` is the PostgreSQL client,
//! `server` runs the per-thread event loops, `app` holds the routes and handlers, `config`
//! the command line.

pub mod app;
pub mod config;
pub mod http;
pub mod pg;
pub mod server;
pub mod service;
pub mod sys;
