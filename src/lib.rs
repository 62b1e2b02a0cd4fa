//! gnosis: a TechEmpower Framework Benchmarks entry.
//!
//! `http` parses requests and writes responses, `server` runs the per-thread event loops,
//! `app` holds the routes and handlers.
pub mod pg;
