//! HttpArena's HTTP profiles (its repository's `site/content/docs/test-profiles/h1` and
//! `scripts/validate.sh`; the async profile from its pull requests #1313 and #1458):
//!
//! - `GET|POST /baseline11?a=&b=`: the sum of `a`, `b` and the body's integer, text/plain;
//! - `GET /baseline2?a=&b=`: the sum of `a` and `b`, text/plain (the HTTP/2 profiles'
//!   baseline, the same sum with no body);
//! - `GET /pipeline`: `ok`, text/plain;
//! - `GET /json/{count}?m=`: the first `count` items of the dataset, each with
//!   `total = price * quantity * m`, as `{"items":[...],"count":count}`; without `m`,
//!   m = 1 (the gateway profiles' `/json/{count}`);
//! - `GET /delay/{ms}`: the number, `ms` milliseconds later, text/plain;
//! - `POST /echo`: the body, byte for byte, application/octet-stream (8gbit).
//!
//! Bad input is answered 400, never guessed at: a missing or non-integer `a` or `b`, an
//! `m` given and not an integer, a body that is not an integer, a sum or total out of the 64-bit range, a count outside
//! 1..=the dataset's length, a delay that is not an integer or above [`MAX_DELAY_MS`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::query::param;
use crate::http::{Answer, ContentType, Reply, Status, Ticket};
use crate::service::Context;

/// Where HttpArena mounts the dataset, unless `--dataset` or `DATASET_PATH` says otherwise.
pub const DATASET_PATH: &str = "/data/dataset.json";
/// The longest `/delay` answered: HttpArena asks for 10 ms (15 and 10 to 30 in earlier
/// rounds). Well below the 60 s idle timeout, so a waiting request's connection is never
/// taken for idle, and it bounds how long a client can make the server hold a request.
pub const MAX_DELAY_MS: u64 = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    Baseline,
    /// `/baseline2`: `/baseline11`'s sum without a body.
    Baseline2,
    Pipeline,
    /// `/json/{count}`: the count is read from the path when answering.
    Json,
    /// `/delay/{ms}`: the delay is read from the path when answering.
    Delay,
    /// `/echo`: the request's body as the answer's.
    Echo,
}

impl Route {
    pub fn find(path: &str) -> Option<Route> {
        match path {
            "/baseline11" => Some(Route::Baseline),
            "/baseline2" => Some(Route::Baseline2),
            "/pipeline" => Some(Route::Pipeline),
            "/echo" => Some(Route::Echo),
            _ if path.starts_with("/json/") => Some(Route::Json),
            _ if path.starts_with("/delay/") => Some(Route::Delay),
            _ => None,
        }
    }
}

/// One item of the dataset, as read.
#[derive(Debug, Deserialize)]
pub struct Item {
    id: i64,
    name: String,
    category: String,
    price: i64,
    quantity: i64,
    active: bool,
    tags: Vec<String>,
    rating: Rating,
}

#[derive(Debug, Deserialize)]
struct Rating {
    score: serde_json::Number,
    count: serde_json::Number,
}

/// Writes `{"items":[...],"count":N}`: `items`, each with its fields in the dataset's
/// order and its `total` for the multiplier `m` last. A total out of the 64-bit range is
/// an error, and `out` is then left part written.
///
/// Written here rather than by deriving `Serialize`: serde_json escapes every key and
/// writes each fragment apart, which made it a third of json-tls's CPU per request
/// (docs/BENCHMARKS.md, "json-tls on kept connections"). Strings still go through
/// serde_json whenever they hold a byte it escapes; a test holds the two outputs equal.
fn write_items(out: &mut Vec<u8>, items: &[Item], m: i64) -> Result<(), Status> {
    out.extend_from_slice(b"{\"items\":[");
    for (index, item) in items.iter().enumerate() {
        let total = item
            .price
            .checked_mul(item.quantity)
            .and_then(|total| total.checked_mul(m))
            .ok_or(Status::BadRequest)?;
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"id\":");
        write_integer(out, item.id);
        out.extend_from_slice(b",\"name\":");
        write_json_string(out, &item.name);
        out.extend_from_slice(b",\"category\":");
        write_json_string(out, &item.category);
        out.extend_from_slice(b",\"price\":");
        write_integer(out, item.price);
        out.extend_from_slice(b",\"quantity\":");
        write_integer(out, item.quantity);
        out.extend_from_slice(if item.active {
            b",\"active\":true,\"tags\":["
        } else {
            b",\"active\":false,\"tags\":["
        });
        for (index, tag) in item.tags.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            write_json_string(out, tag);
        }
        out.extend_from_slice(b"],\"rating\":{\"score\":");
        write_number(out, &item.rating.score);
        out.extend_from_slice(b",\"count\":");
        write_number(out, &item.rating.count);
        out.extend_from_slice(b"},\"total\":");
        write_integer(out, total);
        out.push(b'}');
    }
    out.extend_from_slice(b"],\"count\":");
    write_integer(out, items.len());
    out.push(b'}');
    Ok(())
}

/// An integer in decimal: the totals and fields of `/json`, the bodies of `/baseline11` and
/// `/delay`.
fn write_integer(out: &mut Vec<u8>, value: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// A JSON string: as it is unless it holds a byte JSON escapes (a control character, `"`
/// or `\`), then escaped by serde_json.
pub(super) fn write_json_string(out: &mut Vec<u8>, text: &str) {
    if text
        .bytes()
        .all(|byte| byte >= 0x20 && byte != b'"' && byte != b'\\')
    {
        out.push(b'"');
        out.extend_from_slice(text.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, text).expect("a Vec takes every write");
    }
}

/// A number as read: an integer by itoa, any other (a fraction) by serde_json.
fn write_number(out: &mut Vec<u8>, number: &serde_json::Number) {
    match number.as_i64() {
        Some(integer) => write_integer(out, integer),
        None => serde_json::to_writer(&mut *out, number).expect("a Vec takes every write"),
    }
}

/// The dataset, read once at start and shared by every worker.
pub type Dataset = Arc<[Item]>;

/// The dataset's path: `--dataset`, else `DATASET_PATH` in the environment (what
/// HttpArena's other entries read), else [`DATASET_PATH`].
pub fn dataset_path(option: Option<&Path>) -> PathBuf {
    option
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("DATASET_PATH").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(DATASET_PATH))
}

/// Reads the dataset; without it (TFB's runs have no /data) the server serves everything
/// else and `/json/{count}` answers 503.
pub fn load_dataset(path: &Path) -> Option<Dataset> {
    let read = std::fs::read(path)
        .map_err(|err| err.to_string())
        .and_then(|bytes| serde_json::from_slice::<Vec<Item>>(&bytes).map_err(|e| e.to_string()));
    match read {
        Ok(items) => Some(items.into()),
        Err(err) => {
            crate::log!(
                "no dataset from {}: {err}; /json/{{count}} answers 503",
                path.display()
            );
            None
        }
    }
}

/// One worker's state for these routes.
#[derive(Default)]
pub struct Arena {
    dataset: Option<Dataset>,
    /// Reused for serializing bodies and formatting numbers.
    body: Vec<u8>,
}

/// What a route answers: a body now, a body at a later time, or an error status.
pub enum Outcome<'a> {
    Now(ContentType, &'a [u8]),
    At(Instant, u64),
    Error(Status),
}

impl Arena {
    pub fn new(dataset: Option<Dataset>) -> Self {
        Arena {
            dataset,
            ..Arena::default()
        }
    }

    /// An `/echo` answer is the body where it lies: written to the output once, no copy
    /// before.
    pub fn answer<'a>(
        &'a mut self,
        route: Route,
        path: &str,
        query: &str,
        body: &'a [u8],
        now: Instant,
    ) -> Outcome<'a> {
        let result = match route {
            Route::Baseline => self.baseline(query, body),
            Route::Baseline2 => self.baseline(query, b""),
            Route::Pipeline => Ok(Outcome::Now(ContentType::Plain, b"ok")),
            Route::Json => self.json(&path["/json/".len()..], query),
            Route::Delay => delay(&path["/delay/".len()..], now),
            Route::Echo => Ok(Outcome::Now(ContentType::OctetStream, body)),
        };
        result.unwrap_or_else(Outcome::Error)
    }

    /// The body of a `/delay` answer whose time has come: the number of milliseconds.
    pub fn delayed(&mut self, ms: u64) -> &[u8] {
        self.body.clear();
        write_integer(&mut self.body, ms);
        &self.body
    }

    fn baseline(&mut self, query: &str, body: &[u8]) -> Result<Outcome<'_>, Status> {
        let a: i64 = integer(param(query, "a"))?;
        let b: i64 = integer(param(query, "b"))?;
        let body = std::str::from_utf8(body)
            .map_err(|_| Status::BadRequest)?
            .trim();
        let extra: i64 = if body.is_empty() {
            0
        } else {
            integer(Some(body))?
        };
        let sum = a
            .checked_add(b)
            .and_then(|sum| sum.checked_add(extra))
            .ok_or(Status::BadRequest)?;
        self.body.clear();
        write_integer(&mut self.body, sum);
        Ok(Outcome::Now(ContentType::Plain, &self.body))
    }

    fn json(&mut self, count: &str, query: &str) -> Result<Outcome<'_>, Status> {
        let Some(dataset) = &self.dataset else {
            return Err(Status::ServiceUnavailable);
        };
        let count: usize = integer(Some(count))?;
        // The gateway profiles ask for /json/{count} with no m: m is 1 there.
        let m: i64 = match param(query, "m") {
            None => 1,
            given => integer(given)?,
        };
        let items = dataset.get(..count).filter(|_| count > 0);
        self.body.clear();
        write_items(&mut self.body, items.ok_or(Status::BadRequest)?, m)?;
        Ok(Outcome::Now(ContentType::Json, &self.body))
    }
}

fn delay(ms: &str, now: Instant) -> Result<Outcome<'static>, Status> {
    let ms: u64 = integer(Some(ms))?;
    if ms > MAX_DELAY_MS {
        return Err(Status::BadRequest);
    }
    Ok(Outcome::At(now + Duration::from_millis(ms), ms))
}

/// A decimal integer, with an optional sign, in range; anything else is 400.
fn integer<T: std::str::FromStr>(text: Option<&str>) -> Result<T, Status> {
    text.and_then(|text| text.parse().ok())
        .ok_or(Status::BadRequest)
}

/// Answers with `outcome` now, or has it come back through [`super::App`]'s `on_timer`.
pub fn respond<'a>(outcome: Outcome<'a>, ticket: Ticket, cx: &mut Context<'_>) -> Reply<'a> {
    match outcome {
        Outcome::Now(content_type, body) => Reply::Now(Answer::ok(content_type, body)),
        Outcome::At(at, token) => {
            cx.answer_at(at, ticket, token);
            Reply::Later
        }
        Outcome::Error(status) => Reply::Now(Answer::error(status)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::Serialize;

    /// What `write_items` writes, as serde_json writes it.
    fn serde_items(items: &[Item], m: i64) -> Vec<u8> {
        #[derive(Serialize)]
        struct Priced<'a> {
            id: i64,
            name: &'a str,
            category: &'a str,
            price: i64,
            quantity: i64,
            active: bool,
            tags: &'a [String],
            rating: Rated<'a>,
            total: i64,
        }
        #[derive(Serialize)]
        struct Rated<'a> {
            score: &'a serde_json::Number,
            count: &'a serde_json::Number,
        }
        #[derive(Serialize)]
        struct Items<'a> {
            items: Vec<Priced<'a>>,
            count: usize,
        }
        let items = items.iter().map(|item| Priced {
            id: item.id,
            name: &item.name,
            category: &item.category,
            price: item.price,
            quantity: item.quantity,
            active: item.active,
            tags: &item.tags,
            rating: Rated {
                score: &item.rating.score,
                count: &item.rating.count,
            },
            total: item.price * item.quantity * m,
        });
        let count = items.len();
        serde_json::to_vec(&Items {
            items: items.collect(),
            count,
        })
        .unwrap()
    }

    fn written(items: &[Item], m: i64) -> Result<Vec<u8>, Status> {
        let mut out = Vec::new();
        write_items(&mut out, items, m).map(|()| out)
    }

    #[test]
    fn the_dataset_is_written_as_serde_json_writes_it() {
        let dataset =
            load_dataset(Path::new("data/dataset.json")).expect("the repository's dataset");
        for (count, m) in [
            (1, 3),
            (5, 7),
            (10, 2),
            (15, 5),
            (25, 4),
            (40, 8),
            (50, 6),
            (50, -1),
        ] {
            let items = &dataset[..count];
            assert_eq!(
                written(items, m),
                Ok(serde_items(items, m)),
                "count {count}, m {m}"
            );
        }
    }

    fn item() -> impl Strategy<Value = Item> {
        let number = prop_oneof![
            any::<i64>().prop_map(serde_json::Number::from),
            any::<u64>().prop_map(serde_json::Number::from),
            (-1e6f64..1e6).prop_map(|f| serde_json::Number::from_f64(f).unwrap()),
        ];
        let text = prop_oneof![".{0,12}", "[ -~]{0,12}", any::<String>()];
        (
            any::<i64>(),
            (
                text.clone(),
                text.clone(),
                prop::collection::vec(text, 0..4),
            ),
            (
                -3_000_000_000i64..3_000_000_000,
                -3_000_000_000i64..3_000_000_000,
            ),
            any::<bool>(),
            (number.clone(), number),
        )
            .prop_map(
                |(id, (name, category, tags), (price, quantity), active, (score, count))| Item {
                    id,
                    name,
                    category,
                    price,
                    quantity,
                    active,
                    tags,
                    rating: Rating { score, count },
                },
            )
    }

    proptest! {
        #[test]
        fn any_items_are_written_as_serde_json_writes_them(
            items in prop::collection::vec(item(), 0..4),
            m in -1_000i64..1_000,
        ) {
            let in_range = items.iter().all(|item| {
                item.price.checked_mul(item.quantity).and_then(|total| total.checked_mul(m)).is_some()
            });
            let expected = if in_range { Ok(serde_items(&items, m)) } else { Err(Status::BadRequest) };
            prop_assert_eq!(written(&items, m), expected);
        }
    }

    fn answered(arena: &mut Arena, target: &str, body: &str) -> Result<String, Status> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let route = Route::find(path).expect("an arena route");
        match arena.answer(route, path, query, body.as_bytes(), Instant::now()) {
            Outcome::Now(_, body) => Ok(String::from_utf8(body.to_vec()).unwrap()),
            Outcome::At(_, token) => Ok(format!("at {token}")),
            Outcome::Error(status) => Err(status),
        }
    }

    #[test]
    fn routes_answer_and_refuse_what_they_must() {
        let mut arena = Arena::default();
        let cases = [
            ("/baseline11?a=13&b=42", "", Ok("55")),
            ("/baseline11?a=13&b=42", "20", Ok("75")),
            ("/baseline11?a=-3&b=+2", " -1\r\n", Ok("-2")),
            ("/baseline11?aa=1&a=1&b=1", "", Ok("2")),
            ("/baseline11?a=1", "", Err(Status::BadRequest)),
            ("/baseline11?a=1&b=2", "2 0", Err(Status::BadRequest)),
            ("/baseline2?a=13&b=42", "", Ok("55")),
            ("/baseline2?b=-3&a=1", "", Ok("-2")),
            (
                "/baseline2?a=9223372036854775807&b=1",
                "",
                Err(Status::BadRequest),
            ),
            ("/baseline2?a=1", "", Err(Status::BadRequest)),
            ("/baseline2?a=1&b=x", "", Err(Status::BadRequest)),
            ("/pipeline", "", Ok("ok")),
            ("/delay/0", "", Ok("at 0")),
            ("/delay/10000", "", Ok("at 10000")),
            ("/delay/10001", "", Err(Status::BadRequest)),
            ("/delay/1/2", "", Err(Status::BadRequest)),
            ("/json/1?m=1", "", Err(Status::ServiceUnavailable)),
            ("/echo", "", Ok("")),
            ("/echo", "\0\r\nbytes", Ok("\0\r\nbytes")),
        ];
        for (target, body, expected) in cases {
            let expected = expected.map(str::to_string);
            assert_eq!(
                answered(&mut arena, target, body),
                expected,
                "{target} {body:?}"
            );
        }
        assert_eq!(Route::find("/baseline"), None);
        assert_eq!(Route::find("/json"), None);
    }
}
