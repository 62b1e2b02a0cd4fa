//! HttpArena's async-db profile (its `site/content/docs/test-profiles/h1/isolated/
//! async-database` and `scripts/validate.sh`): `GET /async-db?min=&max=&limit=` reads the
//! `items` whose price is in `min..=max`, at most `limit` of them, and answers
//! `{"items":[{"id","name","category","price","quantity","active","tags","rating":{"score",
//! "count"}}...],"count":N}`; with no row, or without a database, `{"items":[],"count":0}`.
//!
//! The parameters are integers: missing or not an integer is the documented default (10, 50,
//! 50), as HttpArena's pseudocode treats a missing one; an integer past the 32-bit range is
//! the nearest end of it (prices are `integer`); `limit` is clamped to 1..=50.

use std::io::Write;
use std::num::IntErrorKind;

use super::arena::write_json_string;
use super::query::param;
use crate::pg::protocol::Jsonb;
use crate::pg::{DbError, Param, Row};

pub const DEFAULT_MIN: i32 = 10;
pub const DEFAULT_MAX: i32 = 50;
pub const MAX_LIMIT: i64 = 50;
/// The answer when no row matches or the database cannot be used.
pub const FALLBACK: &[u8] = br#"{"items":[],"count":0}"#;

/// The query's parameters, clamped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemQuery {
    pub min: i32,
    pub max: i32,
    pub limit: i64,
}

impl ItemQuery {
    pub fn from_query(query: &str) -> ItemQuery {
        let read = |name, default| param(query, name).and_then(integer).unwrap_or(default);
        ItemQuery {
            min: saturate(read("min", DEFAULT_MIN.into())),
            max: saturate(read("max", DEFAULT_MAX.into())),
            limit: read("limit", MAX_LIMIT).clamp(1, MAX_LIMIT),
        }
    }

    /// `$1`, `$2` (int4) and `$3` (LIMIT's int8) of [`super::db::SELECT_ITEMS`].
    pub fn params(&self) -> [Param<'static>; 3] {
        [
            Param::Int4(self.min),
            Param::Int4(self.max),
            Param::Int8(self.limit),
        ]
    }
}

/// An optionally signed decimal integer, saturated to the 64-bit range; `None` if it is
/// not one.
fn integer(text: &str) -> Option<i64> {
    match text.parse::<i64>() {
        Ok(value) => Some(value),
        Err(error) => match error.kind() {
            IntErrorKind::PosOverflow => Some(i64::MAX),
            IntErrorKind::NegOverflow => Some(i64::MIN),
            _ => None,
        },
    }
}

fn saturate(value: i64) -> i32 {
    value.clamp(i32::MIN.into(), i32::MAX.into()) as i32
}

/// The items of one request, written as JSON as their rows arrive (a row borrows the
/// connection's buffer only while it is handled).
#[derive(Default)]
pub struct Items {
    json: Vec<u8>,
    count: usize,
}

impl Items {
    pub fn clear(&mut self) {
        self.json.clear();
        self.count = 0;
    }

    /// One row of the query: every column read, by its described type, before anything is
    /// written, so that a bad row leaves no half item. `tags` goes out as the JSON text the
    /// database holds (jsonb's output is valid JSON), the strings as JSON strings.
    pub fn push(&mut self, row: &Row<'_>) -> Result<(), DbError> {
        let id: i32 = row.get(0)?;
        let name: &str = row.get(1)?;
        let category: &str = row.get(2)?;
        let price: i32 = row.get(3)?;
        let quantity: i32 = row.get(4)?;
        let active: bool = row.get(5)?;
        let Jsonb(tags) = row.get(6)?;
        let score: i32 = row.get(7)?;
        let count: i32 = row.get(8)?;
        let out = &mut self.json;
        if self.count > 0 {
            out.push(b',');
        }
        // Writing into memory cannot fail.
        let _ = write!(out, r#"{{"id":{id},"name":"#);
        write_json_string(out, name);
        out.extend_from_slice(br#","category":"#);
        write_json_string(out, category);
        let _ = write!(
            out,
            r#","price":{price},"quantity":{quantity},"active":{active},"tags":{tags},"rating":{{"score":{score},"count":{count}}}}}"#
        );
        self.count += 1;
        Ok(())
    }

    /// The response body: the items and their count, or [`FALLBACK`] when there are none.
    pub fn render(&self, out: &mut Vec<u8>) {
        if self.count == 0 {
            out.extend_from_slice(FALLBACK);
            return;
        }
        out.extend_from_slice(br#"{"items":["#);
        out.extend_from_slice(&self.json);
        let _ = write!(out, r#"],"count":{}}}"#, self.count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_take_the_documented_defaults_and_clamps() {
        let cases = [
            ("", (10, 50, 50)),
            ("min=5&max=80&limit=7", (5, 80, 7)),
            ("limit=0", (10, 50, 1)),
            ("limit=-3", (10, 50, 1)),
            ("limit=51", (10, 50, 50)),
            ("limit=99999999999999999999999", (10, 50, 50)),
            ("min=abc&max=&limit=1.5", (10, 50, 50)),
            ("min=-7&max=+9", (-7, 9, 50)),
            ("min=9999&max=9999", (9999, 9999, 50)),
            ("min=-99999999999&max=99999999999", (i32::MIN, i32::MAX, 50)),
            ("min=-", (10, 50, 50)),
            ("max=20&min=30", (30, 20, 50)),
        ];
        for (query, (min, max, limit)) in cases {
            assert_eq!(
                ItemQuery::from_query(query),
                ItemQuery { min, max, limit },
                "{query}"
            );
        }
    }

    #[test]
    fn no_items_render_the_fallback_body() {
        let mut out = Vec::new();
        Items::default().render(&mut out);
        assert_eq!(out, FALLBACK);
    }
}
