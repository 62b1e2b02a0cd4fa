//! The PostgreSQL client against the private cluster of `scripts/pg.sh start`: pipelining
//! (`pipeline`), authentication (`auth`), the decoder on real and damaged traffic
//! (`decoder`), a hot path that allocates nothing (`alloc`) and an ignored benchmark
//! (`bench`).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod alloc;
mod auth;
mod bench;
mod decoder;
mod pipeline;
