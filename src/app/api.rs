//! HttpArena's production-stack profile, the application server's side (its
//! `scripts/validate.sh`, `_validate_production_stack`): the edge in front terminates TLS,
//! authenticates, and forwards over HTTP/1.1 to these routes.
//!
//! - `GET /public/baseline?a=&b=` and `GET /public/json/{count}`: `/baseline2` and
//!   `/json/{count}` themselves (the arena routes of the path without `/public`);
//! - `GET /api/items/{id}`: the item's row as JSON, cache-aside (1 s), `X-Cache: HIT|MISS`;
//! - `POST /api/items/{id}`: `{"name","price","quantity"}` written to the row, its cache
//!   entries invalidated, 204;
//! - `GET /api/me`: the user the edge names in `X-User-Id`, cache-aside (30 s).
//!
//! An id is a positive 32-bit integer; any other `/api/` path is 404. A database that cannot
//! be used is 503 (504 on a timeout), as for the other database routes.
//!
//! The cache has two levels: L1 in-process ([`Cache`]), and, when `REDIS_URL` names one,
//! L2 in Redis (`item:{id}`, `user:{id}`, the same JSON and time to live). A read that
//! misses L1 asks Redis (`GET`): a value is a hit, kept in L1; anything else (nil, an error
//! reply, a failure, a refused command) reads PostgreSQL, whose row is a miss, written to
//! Redis (`SET .. PX`, its reply awaited by no one) unless an update invalidated the key
//! meanwhile. An update deletes the key in Redis (`DEL`) after L1's invalidation and is
//! answered once the DEL's reply or failure comes, so that no read after its 204 finds the
//! old row in either level. Redis never makes a request fail: at worst it is read from
//! PostgreSQL.
//!
//! One worker's SET of a row read before an update, checked against the generation just
//! before the update's invalidation, may still reach Redis after another worker's DEL (their
//! connections are not ordered): the old row then lives in L2 for its time to live at most.

use std::borrow::Cow;
use std::hash::Hash;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::arena::{self, write_json_string};
use super::db::{DbRoute, Jobs, SELECT_ITEM, SELECT_USER, UPDATE_ITEM};
use crate::http::{
    Answer, Body, ContentType, Field, FieldLines, Method, Reply, Request, Status, Ticket,
};
use crate::pg::{DbError, Param, Row, Statement};
use crate::redis::{self, Redis, Value};
use crate::service::Context;

/// The prefix of the routes anyone may ask for: what follows it is an arena route's path.
pub const PUBLIC: &str = "/public";

const ITEM_TTL: Duration = Duration::from_secs(1);
const USER_TTL: Duration = Duration::from_secs(30);
/// Room for every item of HttpArena's table (100,000) and its few users.
const CAPACITY: usize = 100_016;
/// Generations kept, each for the keys that fall in its stripe (see [`Cache`]).
const STRIPES: usize = 1024;

/// The largest reply taken from Redis: room for any row's JSON (an item's is a few hundred
/// bytes), so that a job holds little whatever Redis holds.
pub const LARGEST_REDIS_REPLY: usize = 64 << 10;
/// The token of a command whose reply no one awaits (a SET): no job has it.
const UNAWAITED: u64 = u64::MAX;

const HIT: Field<'static> = (b"x-cache", b"HIT");
const MISS: Field<'static> = (b"x-cache", b"MISS");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/api/items/{id}`: GET and HEAD read the item, POST updates it.
    Item(i32),
    /// `/api/me`: the user of `X-User-Id`.
    Me,
}

/// The app's route of `path`, if it is one of this profile's; called after every other
/// route missed, so that they pay nothing for these.
pub fn find(path: &str) -> Option<super::Route> {
    if let Some(rest) = path.strip_prefix(PUBLIC) {
        return match rest {
            "/baseline" => Some(super::Route::Public(arena::Route::Baseline2)),
            _ if rest.starts_with("/json/") => Some(super::Route::Public(arena::Route::Json)),
            _ => None,
        };
    }
    let route = match path.strip_prefix("/api/")? {
        "me" => Route::Me,
        rest => Route::Item(id(rest.strip_prefix("items/")?)?),
    };
    Some(super::Route::Api(route))
}

/// A positive 32-bit integer, as the tables' ids are.
fn id(text: &str) -> Option<i32> {
    text.parse().ok().filter(|&id| id > 0)
}

/// What a cache entry is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    Item(i32),
    User(i32),
}

impl Key {
    pub(super) fn id(self) -> i32 {
        match self {
            Key::Item(id) | Key::User(id) => id,
        }
    }

    fn ttl(self) -> Duration {
        match self {
            Key::Item(_) => ITEM_TTL,
            Key::User(_) => USER_TTL,
        }
    }

    fn stripe(self) -> usize {
        let kind = matches!(self, Key::User(_)) as usize;
        (self.id() as u32 as usize % (STRIPES / 2)) * 2 + kind
    }

    /// The statement that reads its row, its id the one parameter.
    pub(super) fn statement(self) -> &'static Statement {
        match self {
            Key::Item(_) => SELECT_ITEM,
            Key::User(_) => SELECT_USER,
        }
    }

    /// Its key in Redis: `item:{id}` or `user:{id}`.
    fn redis_key(self) -> RedisKey {
        let prefix: &[u8] = match self {
            Key::Item(_) => b"item:",
            Key::User(_) => b"user:",
        };
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(self.id()).as_bytes();
        let mut key = RedisKey {
            bytes: [0; RedisKey::CAPACITY],
            len: prefix.len() + digits.len(),
        };
        key.bytes[..prefix.len()].copy_from_slice(prefix);
        key.bytes[prefix.len()..key.len].copy_from_slice(digits);
        key
    }
}

/// A [`Key`]'s name in Redis, without an allocation.
struct RedisKey {
    bytes: [u8; RedisKey::CAPACITY],
    len: usize,
}

impl RedisKey {
    /// `user:` and `-2147483648`.
    const CAPACITY: usize = 16;

    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// A key's [`Cache`] generation when its read began.
pub type Generation = u64;

/// The database work of one request of these routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Query {
    /// A cache miss: the row of the key, read when the key was at this generation.
    Read(Key, Generation),
    /// The update of this item.
    Update(i32),
}

#[derive(Clone)]
struct Entry {
    json: Arc<[u8]>,
    expires: Instant,
}

/// The answers of these routes, by key, shared by every worker thread of the process: the
/// edge's requests for one item land on any thread, and a per-thread cache would rarely
/// hit (HttpArena's load spreads 10,000 hot ids over 24 and more threads) and could not be
/// invalidated for all threads at once.
///
/// The L1 before Redis's L2 (when there is one): one process serves every request, so a
/// shared cache here answers most reads without a network round trip. Bounded in entries;
/// `quick_cache`'s sync cache is sharded, so threads seldom meet on a lock.
///
/// A read that began before an update must not put the old row back after the update's
/// invalidation. Each key has a generation (one per stripe of keys, [`STRIPES`] of them):
/// a miss takes it before its SELECT goes out, and its row is kept only if the generation
/// is still the same, checked and inserted under the stripe's lock; an invalidation bumps
/// the generation and removes the entry under the same lock, after the UPDATE committed.
/// So a read whose SELECT may have seen the old row finds the generation moved and keeps
/// nothing; one that took the generation after the bump ran its SELECT after the commit.
/// (Keys sharing a stripe only lose one insertion to another key's update.)
pub struct Cache {
    entries: quick_cache::sync::Cache<Key, Entry>,
    generations: Box<[Mutex<Generation>]>,
}

impl Default for Cache {
    fn default() -> Cache {
        Cache::new(CAPACITY)
    }
}

impl Cache {
    pub fn new(capacity: usize) -> Cache {
        Cache {
            entries: quick_cache::sync::Cache::new(capacity),
            generations: (0..STRIPES).map(|_| Mutex::new(0)).collect(),
        }
    }

    /// The key's JSON, unless absent or expired at `now`.
    pub fn get(&self, key: Key, now: Instant) -> Option<Arc<[u8]>> {
        self.entries
            .get(&key)
            .filter(|entry| entry.expires > now)
            .map(|entry| entry.json)
    }

    /// What a miss takes before reading the row.
    pub fn generation(&self, key: Key) -> Generation {
        *self.lock(key)
    }

    /// Keeps `json` for the key's time to live from `now`, unless the key was invalidated
    /// since its read took `generation`; whether it was kept.
    pub fn insert(&self, key: Key, generation: Generation, json: &[u8], now: Instant) -> bool {
        let current = self.lock(key);
        if *current != generation {
            return false;
        }
        let entry = Entry {
            json: json.into(),
            expires: now + key.ttl(),
        };
        self.entries.insert(key, entry);
        true
    }

    /// Drops the key's entry, and whatever a read under way would put back.
    pub fn invalidate(&self, key: Key) {
        let mut current = self.lock(key);
        *current += 1;
        self.entries.remove(&key);
    }

    /// Nothing panics while a stripe is held, so a poisoned lock still holds a good value.
    fn lock(&self, key: Key) -> std::sync::MutexGuard<'_, Generation> {
        self.generations[key.stripe()]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A `POST /api/items/{id}` body: every field required, the numbers 32-bit integers (the
/// columns' type), other fields ignored.
#[derive(Debug, Deserialize, PartialEq, Eq)]
struct ItemUpdate<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    price: i32,
    quantity: i32,
}

impl<'a> ItemUpdate<'a> {
    /// `None` for anything else, and for a name with a NUL, which PostgreSQL's text cannot
    /// hold.
    fn parse(body: &'a [u8]) -> Option<ItemUpdate<'a>> {
        serde_json::from_slice::<ItemUpdate<'a>>(body)
            .ok()
            .filter(|update| !update.name.contains('\0'))
    }
}

/// The user id the edge sets once it has authenticated the request. Only the edge reaches
/// this server, and it replaces any `X-User-Id` a client sent; over HTTP/1.1 a request
/// carries its field lines.
fn user_id(fields: &FieldLines<'_>) -> Option<i32> {
    let (_, value) = fields
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(b"x-user-id"))?;
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// One worker's side of these routes.
pub struct Api {
    cache: Arc<Cache>,
    /// The JSON of the last hit, which its answer borrows.
    hit: Arc<[u8]>,
}

impl Api {
    pub fn new(cache: Arc<Cache>) -> Api {
        Api {
            cache,
            hit: Arc::new([]),
        }
    }

    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// A hit now; a miss or an update once the database answers ([`finish`]).
    pub fn answer<'a>(
        &'a mut self,
        route: Route,
        request: &Request<'_>,
        ticket: Ticket,
        jobs: &mut Jobs,
        cx: &mut Context<'_>,
    ) -> Reply<'a> {
        let key = match route {
            Route::Item(id) if request.method == Method::Post => {
                let Some(update) = ItemUpdate::parse(request.body) else {
                    return Reply::Now(Answer::error(Status::BadRequest));
                };
                let params = [
                    Param::Text(&update.name),
                    Param::Int4(update.price),
                    Param::Int4(update.quantity),
                    Param::Int4(id),
                ];
                let route = DbRoute::Api(Query::Update(id));
                return started(jobs.start_one(route, UPDATE_ITEM, &params, ticket, cx.db, cx.now));
            }
            Route::Item(id) => Key::Item(id),
            Route::Me => match user_id(&request.field_lines) {
                Some(id) => Key::User(id),
                None => return Reply::Now(Answer::error(Status::Other(401))),
            },
        };
        if let Some(json) = self.cache.get(key, cx.now) {
            self.hit = json;
            let answer = Answer::ok(ContentType::Json, &self.hit).with_fields([Some(HIT), None]);
            return Reply::Now(answer);
        }
        let route = DbRoute::Api(Query::Read(key, self.cache.generation(key)));
        if let Some(redis) = cx.redis.as_deref_mut() {
            let name = key.redis_key();
            let now = cx.now;
            match jobs.await_redis(route, ticket, |token| {
                redis.get(token, name.as_bytes(), now)
            }) {
                Ok(true) => return Reply::Later,
                // Refused: PostgreSQL answers, as without Redis.
                Ok(false) => {}
                Err(status) => return Reply::Now(Answer::error(status)),
            }
        }
        let params = [Param::Int4(key.id())];
        started(jobs.start_one(route, key.statement(), &params, ticket, cx.db, cx.now))
    }
}

fn started(result: Result<(), Status>) -> Reply<'static> {
    match result {
        Ok(()) => Reply::Later,
        Err(status) => Reply::Now(Answer::error(status)),
    }
}

/// The rows of one request's query, as they arrive: a read's row as its JSON answer, an
/// update's (`RETURNING id`) only counted.
#[derive(Default)]
pub struct Record {
    json: Vec<u8>,
    rows: usize,
}

impl Record {
    pub fn clear(&mut self) {
        self.json.clear();
        self.rows = 0;
    }

    /// A key's JSON found in Redis, as if its row had been read.
    fn found(&mut self, json: &[u8]) {
        self.json.clear();
        self.json.extend_from_slice(json);
        self.rows = 1;
    }

    /// Every column read, by its described type, before anything is written.
    pub fn push(&mut self, query: Query, row: &Row<'_>) -> Result<(), DbError> {
        self.rows += 1;
        let out = &mut self.json;
        match query {
            // An id is a primary key: a second row cannot come.
            _ if self.rows > 1 => {}
            Query::Update(_) => {}
            Query::Read(Key::Item(_), _) => {
                let id: i32 = row.get(0)?;
                let name: &str = row.get(1)?;
                let category: &str = row.get(2)?;
                let price: i32 = row.get(3)?;
                let quantity: i32 = row.get(4)?;
                let active: bool = row.get(5)?;
                let score: i32 = row.get(6)?;
                let count: i32 = row.get(7)?;
                // Writing into memory cannot fail.
                let _ = write!(out, r#"{{"id":{id},"name":"#);
                write_json_string(out, name);
                out.extend_from_slice(br#","category":"#);
                write_json_string(out, category);
                let _ = write!(
                    out,
                    r#","price":{price},"quantity":{quantity},"active":{active},"rating":{{"score":{score},"count":{count}}}}}"#
                );
            }
            Query::Read(Key::User(_), _) => {
                let id: i32 = row.get(0)?;
                let name: &str = row.get(1)?;
                let email: &str = row.get(2)?;
                let plan: &str = row.get(3)?;
                let _ = write!(out, r#"{{"id":{id},"name":"#);
                write_json_string(out, name);
                out.extend_from_slice(br#","email":"#);
                write_json_string(out, email);
                out.extend_from_slice(br#","plan":"#);
                write_json_string(out, plan);
                out.push(b'}');
            }
        }
        Ok(())
    }
}

/// What follows the update of item `id`, whatever its outcome (an update whose answer was
/// lost may still have committed): its L1 entry invalidated, then its L2 one deleted with
/// `token`. Whether the answer waits for the DEL's event: it does unless Redis refused it.
pub fn invalidate(id: i32, cache: &Cache, redis: Option<&mut Redis>, token: u64) -> bool {
    let key = Key::Item(id);
    cache.invalidate(key);
    redis.is_some_and(|redis| {
        let name = key.redis_key();
        redis.del(token, name.as_bytes(), Instant::now()).is_ok()
    })
}

/// The answer of a request whose query is done (`failure`: the status it failed with): a
/// read's row, kept in `cache` and in `redis`, or 404 without one; an update's 204 (once
/// [`invalidate`]d), or 404 without a row.
pub fn finish<'a>(
    query: Query,
    failure: Option<Status>,
    record: &'a Record,
    cache: &Cache,
    redis: Option<&mut Redis>,
) -> Answer<'a> {
    match (failure, record.rows, query) {
        (Some(status), _, _) => Answer::error(status),
        (None, 0, _) => Answer::error(Status::NotFound),
        // No content type and no length: a 204 says neither (RFC 9110 8.6, 8.3).
        (None, _, Query::Update(_)) => {
            Answer::forwarded(Status::Other(204), FieldLines::default(), Body::Bytes(b""))
        }
        (None, _, Query::Read(key, generation)) => {
            let now = Instant::now();
            // Not kept after an update's invalidation: the row may be the old one.
            if cache.insert(key, generation, &record.json, now) {
                if let Some(redis) = redis {
                    let name = key.redis_key();
                    // Refused or failed, the next miss reads PostgreSQL again.
                    let _ = redis.set_px(UNAWAITED, name.as_bytes(), &record.json, key.ttl(), now);
                }
            }
            Answer::ok(ContentType::Json, &record.json).with_fields([Some(MISS), None])
        }
    }
}

/// The JSON a Redis lookup found, if it found one: anything else (nil, an error reply, a
/// failure) is a miss, which PostgreSQL answers.
pub fn found_in_redis<'e>(event: redis::Event<'e>) -> Option<&'e [u8]> {
    match event {
        redis::Event::Reply(Value::Bulk(json)) if !json.is_empty() => Some(json),
        _ => None,
    }
}

/// The answer of a read whose Redis lookup found `json`: a hit, kept in `cache` too unless
/// an update invalidated the key since the read began.
pub fn hit_in_redis<'a>(
    key: Key,
    generation: Generation,
    json: &[u8],
    record: &'a mut Record,
    cache: &Cache,
) -> Answer<'a> {
    cache.insert(key, generation, json, Instant::now());
    record.found(json);
    Answer::ok(ContentType::Json, &record.json).with_fields([Some(HIT), None])
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    #[test]
    fn paths_find_their_routes() {
        use super::super::Route as App;
        let cases = [
            (
                "/public/baseline",
                Some(App::Public(arena::Route::Baseline2)),
            ),
            ("/public/json/25", Some(App::Public(arena::Route::Json))),
            ("/public/json", None),
            ("/public/baseline2", None),
            ("/public", None),
            ("/api/me", Some(App::Api(Route::Me))),
            ("/api/items/3", Some(App::Api(Route::Item(3)))),
            (
                "/api/items/2147483647",
                Some(App::Api(Route::Item(i32::MAX))),
            ),
            ("/api/items/2147483648", None),
            ("/api/items/0", None),
            ("/api/items/-1", None),
            ("/api/items/x", None),
            ("/api/items/", None),
            ("/api/items", None),
            ("/api/me/", None),
            ("/api/other", None),
            ("/api", None),
        ];
        for (path, expected) in cases {
            assert_eq!(find(path), expected, "{path}");
        }
    }

    #[test]
    fn an_update_body_needs_every_field_of_its_type() {
        let parsed = ItemUpdate::parse(br#"{"name":"bench-updated","price":250,"quantity":10}"#);
        let expected = ItemUpdate {
            name: "bench-updated".into(),
            price: 250,
            quantity: 10,
        };
        assert_eq!(parsed, Some(expected));
        let escaped = ItemUpdate::parse(br#"{"quantity":-1,"name":"a\"b","price":0,"x":[]}"#);
        assert_eq!(escaped.map(|u| u.name.into_owned()), Some("a\"b".into()));
        for bad in [
            &br#"{"name":"a","price":1}"#[..],
            br#"{"name":"a","price":"1","quantity":1}"#,
            br#"{"name":"a","price":1.5,"quantity":1}"#,
            br#"{"name":"a","price":2147483648,"quantity":1}"#,
            br#"{"name":1,"price":1,"quantity":1}"#,
            br#"{"name":null,"price":1,"quantity":1}"#,
            br#"{"name":"a\u0000","price":1,"quantity":1}"#,
            br#"{"name":"a","price":1,"quantity":1"#,
            br#"[]"#,
            b"",
            b"\xff",
        ] {
            assert_eq!(
                ItemUpdate::parse(bad),
                None,
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn the_user_id_is_the_edges_field() {
        let id = |lines: &[u8]| user_id(&FieldLines::new(lines, 0));
        assert_eq!(id(b"Host: a\r\nx-user-id: 42\r\n"), Some(42));
        assert_eq!(id(b"X-User-Id:  -7 \r\n"), Some(-7));
        for bad in [
            &b"Host: a\r\n"[..],
            b"X-User-Id: 4 2\r\n",
            b"X-User-Id: \r\n",
        ] {
            assert_eq!(id(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn entries_live_for_their_keys_ttl() {
        let cache = Cache::new(16);
        let now = Instant::now();
        let (item, user) = (Key::Item(7), Key::User(7));
        assert!(cache.get(item, now).is_none());
        assert!(cache.insert(item, cache.generation(item), b"{}", now));
        assert!(cache.insert(user, cache.generation(user), b"[]", now));
        assert_eq!(
            cache.get(item, now + ITEM_TTL / 2).as_deref(),
            Some(&b"{}"[..])
        );
        assert!(cache.get(item, now + ITEM_TTL).is_none());
        assert_eq!(cache.get(user, now + ITEM_TTL).as_deref(), Some(&b"[]"[..]));
        assert!(cache.get(user, now + USER_TTL).is_none());
    }

    #[test]
    fn an_invalidation_is_seen_by_every_thread() {
        let cache = Arc::new(Cache::new(16));
        let now = Instant::now();
        let key = Key::Item(3);
        assert!(cache.insert(key, cache.generation(key), b"old", now));
        let other = Arc::clone(&cache);
        std::thread::spawn(move || other.invalidate(key))
            .join()
            .unwrap();
        assert!(cache.get(key, now).is_none());
        // The same id's user is another key.
        let user = Key::User(3);
        assert!(cache.insert(user, cache.generation(user), b"user", now));
        assert!(cache.get(user, now).is_some());
    }

    #[test]
    fn a_read_begun_before_an_invalidation_keeps_nothing() {
        let cache = Cache::new(16);
        let now = Instant::now();
        let key = Key::Item(5);
        let before = cache.generation(key);
        cache.invalidate(key);
        assert!(!cache.insert(key, before, b"old row", now));
        assert!(cache.get(key, now).is_none());
        // A read begun after it keeps its row.
        assert!(cache.insert(key, cache.generation(key), b"new row", now));
        assert_eq!(cache.get(key, now).as_deref(), Some(&b"new row"[..]));
    }

    /// A Redis of one connection, connected by hand: what it sends is read with [`sent`].
    pub(in crate::app) fn connected_redis() -> Redis {
        let address = crate::redis::Address::Tcp(([127, 0, 0, 1], 6379).into());
        let settings = crate::redis::Settings {
            connections: 1,
            ..crate::redis::Settings::default()
        };
        let mut redis = Redis::new(address, &crate::redis::Session::default(), settings);
        let now = Instant::now();
        let mut sink = |_: u64, _: redis::Event<'_>| {};
        redis.on_link(0, &mut sink, |link, around| {
            while let Some(order) = link.order(now, around) {
                assert!(matches!(order, crate::link::Order::Connect(_)));
                link.connected(Ok(()), now, around);
            }
        });
        redis
    }

    /// The commands the connection has to send, as RESP text, reported sent.
    pub(in crate::app) fn sent(redis: &mut Redis) -> String {
        let link = redis.link_mut(0);
        let bytes = link.unsent().to_vec();
        link.sent(bytes.len());
        String::from_utf8(bytes).unwrap()
    }

    /// `args` as a RESP command.
    pub(in crate::app) fn resp(args: &[&str]) -> String {
        let mut out = format!("*{}\r\n", args.len());
        for arg in args {
            out.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        out
    }

    #[test]
    fn keys_are_named_in_redis_by_kind_and_id() {
        assert_eq!(Key::Item(7).redis_key().as_bytes(), b"item:7");
        assert_eq!(Key::User(42).redis_key().as_bytes(), b"user:42");
        let widest = Key::User(i32::MIN).redis_key();
        assert_eq!(widest.as_bytes(), b"user:-2147483648");
    }

    #[test]
    fn a_finished_read_is_kept_in_both_levels_and_a_finished_update_invalidates() {
        let cache = Cache::new(16);
        let mut redis = connected_redis();
        let key = Key::Item(9);
        let mut record = Record {
            json: b"{\"id\":9}".to_vec(),
            rows: 1,
        };
        let read = Query::Read(key, cache.generation(key));
        let answer = finish(read, None, &record, &cache, Some(&mut redis));
        assert_eq!(
            (answer.status, answer.head_fields().next()),
            (Status::Ok, Some(&MISS))
        );
        assert!(cache.get(key, Instant::now()).is_some());
        let set = resp(&["SET", "item:9", "{\"id\":9}", "PX", "1000"]);
        assert_eq!(sent(&mut redis), set);

        // The update's DEL is awaited with the job's token; its answer follows.
        assert!(invalidate(9, &cache, Some(&mut redis), 3));
        assert_eq!(sent(&mut redis), resp(&["DEL", "item:9"]));
        assert!(cache.get(key, Instant::now()).is_none());
        let updated = finish(Query::Update(9), None, &record, &cache, None);
        assert_eq!(updated.status, Status::Other(204));
        assert!(updated.body.is_empty());
        // Without Redis nothing is awaited.
        assert!(!invalidate(9, &cache, None, 3));

        // A read that began before the update keeps nothing, in either level.
        finish(read, None, &record, &cache, Some(&mut redis));
        assert!(cache.get(key, Instant::now()).is_none());
        assert_eq!(sent(&mut redis), "");
        let failed = finish(
            Query::Update(9),
            Some(Status::GatewayTimeout),
            &record,
            &cache,
            None,
        );
        assert_eq!(failed.status, Status::GatewayTimeout);
        record.clear();
        let missing = finish(read, None, &record, &cache, Some(&mut redis));
        assert_eq!(missing.status, Status::NotFound);
        assert_eq!(sent(&mut redis), "");
    }

    #[test]
    fn a_users_row_lives_thirty_seconds_in_redis() {
        let cache = Cache::new(16);
        let mut redis = connected_redis();
        let key = Key::User(42);
        let record = Record {
            json: b"{}".to_vec(),
            rows: 1,
        };
        let read = Query::Read(key, cache.generation(key));
        finish(read, None, &record, &cache, Some(&mut redis));
        assert_eq!(
            sent(&mut redis),
            resp(&["SET", "user:42", "{}", "PX", "30000"])
        );
    }

    #[test]
    fn only_a_value_found_in_redis_is_a_hit() {
        use crate::redis::{Event, Failure};
        assert_eq!(
            found_in_redis(Event::Reply(Value::Bulk(b"{}"))),
            Some(&b"{}"[..])
        );
        for miss in [
            Event::Reply(Value::Null),
            Event::Reply(Value::Bulk(b"")),
            Event::Reply(Value::Simple(b"OK")),
            Event::Error(b"WRONGTYPE"),
            Event::Failed(Failure::TimedOut),
            Event::Failed(Failure::Unavailable),
        ] {
            assert_eq!(found_in_redis(miss), None, "{miss:?}");
        }
    }

    #[test]
    fn a_hit_in_redis_is_kept_in_l1_unless_invalidated_since() {
        let cache = Cache::new(16);
        let mut record = Record::default();
        let key = Key::Item(4);
        let before = cache.generation(key);
        let answer = hit_in_redis(key, before, b"{\"id\":4}", &mut record, &cache);
        assert_eq!(
            (answer.status, answer.head_fields().next()),
            (Status::Ok, Some(&HIT))
        );
        assert_eq!(
            cache.get(key, Instant::now()).as_deref(),
            Some(&b"{\"id\":4}"[..])
        );
        cache.invalidate(key);
        let answer = hit_in_redis(key, before, b"old", &mut record, &cache);
        assert_eq!(answer.status, Status::Ok);
        assert!(cache.get(key, Instant::now()).is_none());
    }
}
