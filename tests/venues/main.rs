//! The folders each venue's pull request needs, exported and checked (`tfb_export`,
//! `httparena_export`).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod httparena_export;
mod tfb_export;
