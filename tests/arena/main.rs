//! HttpArena's routes on both binaries: the HTTP profiles (`routes`), `/static/{name}`
//! (`static_files`), `/async-db` and fortunes on HttpArena's database (`database`), the
//! production stack's `/public/` and `/api/` routes (`api`), and that database's shape
//! (`schema`).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

mod api;
mod database;
mod routes;
mod schema;
mod static_files;

/// `items` as pinned (its whole digest, its names) against a test that updates a row and
/// restores it: held shared to read the whole table, alone to write.
static ITEMS: RwLock<()> = RwLock::new(());

fn read_pinned_items() -> RwLockReadGuard<'static, ()> {
    ITEMS.read().unwrap_or_else(PoisonError::into_inner)
}

fn write_items() -> RwLockWriteGuard<'static, ()> {
    ITEMS.write().unwrap_or_else(PoisonError::into_inner)
}
