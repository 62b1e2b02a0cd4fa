//! TFB's database routes on both binaries against a real PostgreSQL: the routes and the
//! statements they send (`routes`), finding the database (`database_url`), restarts and
//! killed backends under load (`resilience`), and the faults of a proxy and a fake server
//! (`reliability`).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod database_url;
mod reliability;
mod resilience;
mod routes;
