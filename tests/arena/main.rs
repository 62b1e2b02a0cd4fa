//! HttpArena's routes on both binaries: the HTTP profiles (`routes`), `/static/{name}`
//! (`static_files`), `/async-db` and fortunes on HttpArena's database (`database`), and that
//! database's shape (`schema`).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod database;
mod routes;
mod schema;
mod static_files;
