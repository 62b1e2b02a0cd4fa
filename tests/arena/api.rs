//! HttpArena's production-stack routes on both binaries, as its edge reaches them over
//! HTTP/1.1, against HttpArena's database in the shared private cluster: `/public/` as the
//! arena routes; `/api/items/{id}` cache-aside (MISS, HIT, expiry), its update seen by the
//! next read on another connection, its refusals; `/api/me` by the edge's `X-User-Id`;
//! 503 without a database. Every value is checked against psql. With a redis-server of the
//! test's own as the L2 (`REDIS_URL`): a miss written to Redis, a value found there a hit, an
//! update deleting it, and Redis gone then back.

use std::time::{Duration, Instant};

use crate::common::redis::RedisServer;
use crate::common::{Client, HttpResponse, Server};
use serde_json::Value;

/// HttpArena's database through `port`.
fn arena_url(port: &str) -> String {
    format!("postgres://bench:bench@127.0.0.1:{port}/benchmark")
}

/// `binary` on HttpArena's database at `url`, serving the repository's dataset, with the
/// Redis of `redis_url` as its L2 (none when empty).
fn start(binary: &str, url: String, redis_url: String) -> Server {
    let mut env: Vec<_> = ["PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE"]
        .map(|name| (name, String::new()))
        .to_vec();
    env.push(("DATABASE_URL", url));
    env.push(("REDIS_URL", redis_url));
    env.push((
        "DATASET_PATH",
        concat!(env!("CARGO_MANIFEST_DIR"), "/data/dataset.json").to_string(),
    ));
    Server::start_with_env(binary, &[], &env)
}

fn start_on_the_cluster(binary: &str) -> Server {
    start(binary, arena_url(&crate::common::pg::port()), String::new())
}

fn start_with_redis(binary: &str, redis: &RedisServer) -> Server {
    start(binary, arena_url(&crate::common::pg::port()), redis.url())
}

fn psql(sql: &str) -> String {
    crate::common::pg::psql(&arena_url(&crate::common::pg::port()), sql)
}

/// A connection whose worker thread's database connections answer (each thread has its
/// own): polled with `/async-db`, which leaves the api's cache alone, up to 20 s.
fn ready_client(server: &Server) -> Client {
    let mut client = server.connect();
    let started = Instant::now();
    while client.get("/async-db?min=1&max=500&limit=1").text() == r#"{"items":[],"count":0}"# {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no rows in 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    client
}

/// `method target` with `fields` (each a line without its CRLF) and `body`.
fn request(
    client: &mut Client,
    method: &str,
    target: &str,
    fields: &[&str],
    body: &str,
) -> HttpResponse {
    let mut raw = format!("{method} {target} HTTP/1.1\r\nHost: app\r\n");
    for field in fields {
        raw.push_str(field);
        raw.push_str("\r\n");
    }
    if !body.is_empty() {
        raw.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    raw.push_str("\r\n");
    raw.push_str(body);
    client.send(raw.as_bytes());
    client.response().unwrap()
}

fn post_item(client: &mut Client, id: i32, body: &str) -> HttpResponse {
    request(client, "POST", &format!("/api/items/{id}"), &[], body)
}

fn me(client: &mut Client, fields: &[&str]) -> HttpResponse {
    request(client, "GET", "/api/me", fields, "")
}

/// The item as psql reads it, in the shape the route answers.
fn item_in_postgres(id: i32) -> Value {
    let json = psql(&format!(
        "SELECT json_build_object('id', id, 'name', name, 'category', category, \
                'price', price, 'quantity', quantity, 'active', active, \
                'rating', json_build_object('score', rating_score, 'count', rating_count)) \
           FROM items WHERE id = {id}"
    ));
    serde_json::from_str(&json).unwrap()
}

/// A JSON answer of the api, its `X-Cache` and its body.
fn cached_json(response: &HttpResponse) -> (String, Value) {
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("content-type"), Some("application/json"));
    let body = serde_json::from_str(response.text()).expect("a JSON body");
    let cache = response.header("x-cache").expect("an X-Cache field");
    (cache.to_string(), body)
}

/// The validator's public routes: the same answers as `/baseline2` and `/json/{count}`.
fn public_routes_answer_as_the_arena_routes(binary: &str) {
    let server = start_on_the_cluster(binary);
    let mut client = server.connect();
    let baseline = client.get("/public/baseline?a=13&b=42");
    assert_eq!((baseline.status, baseline.text()), (200, "55"));
    assert_eq!(baseline.header("content-type"), Some("text/plain"));
    for (public, arena) in [
        ("/public/json/25", "/json/25"),
        ("/public/json/3?m=4", "/json/3?m=4"),
        ("/public/json/0", "/json/0"),
    ] {
        let (public_answer, arena_answer) = (client.get(public), client.get(arena));
        assert_eq!(public_answer.status, arena_answer.status, "{public}");
        assert_eq!(public_answer.body, arena_answer.body, "{public}");
        assert_eq!(
            public_answer.header("content-type"),
            arena_answer.header("content-type")
        );
    }
    let json: Value = serde_json::from_str(client.get("/public/json/25").text()).unwrap();
    assert_eq!(json["count"], 25);
    assert_eq!(
        json["items"][0]["total"],
        json["items"][0]["price"].as_i64().unwrap()
            * json["items"][0]["quantity"].as_i64().unwrap()
    );
    for unknown in [
        "/public/baseline2?a=1&b=2",
        "/public/",
        "/api/items/0",
        "/api/items/x",
        "/api/nope",
    ] {
        assert_eq!(client.get(unknown).status, 404, "{unknown}");
    }
}

/// A first read misses and answers the row as PostgreSQL holds it; the next hits with the
/// same body, HEAD too. (On a machine too loaded to ask again within the second, the next
/// misses: that is checked to be so, and the next one asked.)
fn an_item_misses_then_hits(binary: &str) {
    let server = start_on_the_cluster(binary);
    let mut client = ready_client(&server);
    let target = "/api/items/12345";
    let expected = item_in_postgres(12_345);
    let mut sent = Instant::now();
    let first = client.get(target);
    assert_eq!(cached_json(&first), ("MISS".into(), expected.clone()));
    assert!(
        first.text().starts_with(r#"{"id":12345,"name":"#),
        "{}",
        first.text()
    );
    for _ in 0..5 {
        let sent_again = Instant::now();
        let next = client.get(target);
        let (cache, body) = cached_json(&next);
        assert_eq!(body, expected);
        if cache == "HIT" {
            assert_eq!(next.body, first.body);
            client.send(format!("HEAD {target} HTTP/1.1\r\nHost: app\r\n\r\n").as_bytes());
            let head = client.raw_head().to_ascii_lowercase();
            assert!(
                head.contains("content-type: application/json\r\n"),
                "{head}"
            );
            assert!(head.contains("x-cache: hit\r\n"), "{head}");
            return;
        }
        // The entry was kept after `sent`: a miss means its second had passed.
        assert!(
            sent.elapsed() >= Duration::from_secs(1),
            "a miss within the second"
        );
        sent = sent_again;
    }
    panic!("never asked again within a second");
}

/// After more than the item's second, a read misses again.
fn an_item_expires_after_a_second(binary: &str) {
    let server = start_on_the_cluster(binary);
    let mut client = ready_client(&server);
    let target = "/api/items/54321";
    assert_eq!(cached_json(&client.get(target)).0, "MISS");
    std::thread::sleep(Duration::from_millis(1_200));
    let (cache, body) = cached_json(&client.get(target));
    assert_eq!(cache, "MISS");
    assert_eq!(body, item_in_postgres(54_321));
}

/// The row of `id`, put back as it was when this was made, whatever the test did.
struct RestoredItem {
    id: i32,
    name: String,
    price: i32,
    quantity: i32,
}

impl RestoredItem {
    fn new(id: i32) -> RestoredItem {
        let row = psql(&format!(
            "SELECT name, price, quantity FROM items WHERE id = {id}"
        ));
        let fields: Vec<&str> = row.split('|').collect();
        RestoredItem {
            id,
            name: fields[0].to_string(),
            price: fields[1].parse().unwrap(),
            quantity: fields[2].parse().unwrap(),
        }
    }
}

impl Drop for RestoredItem {
    fn drop(&mut self) {
        psql(&format!(
            "UPDATE items SET name = '{}', price = {}, quantity = {} WHERE id = {}",
            self.name.replace('\'', "''"),
            self.price,
            self.quantity,
            self.id
        ));
    }
}

/// The validator's sequence, each request on its own connection (so on any worker thread):
/// a read warms the cache, the POST answers 204 and changes the row in PostgreSQL, the next
/// read misses and answers the new values. The row is one no other test reads, a different
/// one per binary, and is restored.
fn an_update_invalidates_for_every_thread(binary: &str) {
    let id = if binary.ends_with("gnosis-uring") {
        99_002
    } else {
        99_001
    };
    let server = start_on_the_cluster(binary);
    let _pinned = crate::write_items();
    let _restored = RestoredItem::new(id);
    let target = format!("/api/items/{id}");
    let (_, before) = cached_json(&ready_client(&server).get(&target));
    assert_eq!(before, item_in_postgres(id));

    let mut writer = ready_client(&server);
    let update = r#"{"name":"bench-updated","price":250,"quantity":10}"#;
    let answer = post_item(&mut writer, id, update);
    assert_eq!(answer.status, 204, "{}", answer.text());
    assert!(
        answer.body.is_empty() && answer.header("content-length").is_none(),
        "{answer:?}"
    );
    let row = psql(&format!(
        "SELECT name, price, quantity FROM items WHERE id = {id}"
    ));
    assert_eq!(row, "bench-updated|250|10");

    let (cache, after) = cached_json(&ready_client(&server).get(&target));
    assert_eq!(cache, "MISS");
    assert_eq!(after, item_in_postgres(id));
    assert_eq!(
        (after["name"].as_str(), after["price"].as_i64()),
        (Some("bench-updated"), Some(250))
    );
}

/// Bodies that are not the update are 400 and change nothing; an id without a row is 404;
/// methods other than GET, HEAD and POST are 405.
fn bad_requests_are_refused(binary: &str) {
    let server = start_on_the_cluster(binary);
    let mut client = ready_client(&server);
    let unchanged = item_in_postgres(7);
    for body in [
        "{",
        "not json",
        r#"{"name":"x","price":1}"#,
        r#"{"name":"x","price":"1","quantity":1}"#,
        r#"{"name":"x","price":1,"quantity":99999999999}"#,
        r#"{"name":"x\u0000","price":1,"quantity":1}"#,
    ] {
        assert_eq!(post_item(&mut client, 7, body).status, 400, "{body}");
    }
    assert_eq!(item_in_postgres(7), unchanged);
    let missing = 100_001;
    assert_eq!(client.get(&format!("/api/items/{missing}")).status, 404);
    let update = r#"{"name":"nobody","price":1,"quantity":1}"#;
    assert_eq!(post_item(&mut client, missing, update).status, 404);
    assert_eq!(
        request(&mut client, "DELETE", "/api/items/7", &[], "").status,
        405
    );
    assert_eq!(
        request(&mut client, "POST", "/api/me", &["X-User-Id: 42"], "{}").status,
        405
    );
}

/// `/api/me` is the user the edge names: Alice Chen for 42, a miss then a hit (or a miss
/// again on a machine too loaded to ask within 30 s); no user id or not an integer is 401,
/// an id without a row 404.
fn me_is_the_edges_user(binary: &str) {
    let server = start_on_the_cluster(binary);
    let mut client = ready_client(&server);
    let expected: Value = serde_json::from_str(&psql(
        "SELECT json_build_object('id', id, 'name', name, 'email', email, 'plan', plan) \
           FROM users WHERE id = 42",
    ))
    .unwrap();
    assert_eq!(expected["name"], "Alice Chen");
    let sent = Instant::now();
    let (cache, body) = cached_json(&me(&mut client, &["X-User-Id: 42"]));
    assert_eq!((cache.as_str(), &body), ("MISS", &expected));
    let (cache, body) = cached_json(&me(&mut client, &["x-user-id: 42"]));
    assert_eq!(body, expected);
    assert!(cache == "HIT" || sent.elapsed() >= Duration::from_secs(30));
    for fields in [
        &[][..],
        &["X-User-Id: alice"],
        &["X-User-Id:"],
        &["X-User-Idx: 42"],
    ] {
        assert_eq!(me(&mut client, fields).status, 401, "{fields:?}");
    }
    assert_eq!(me(&mut client, &["X-User-Id: 5"]).status, 404);
}

/// Without a database, the api's reads and updates are 503 and the public routes serve.
fn without_a_database_the_api_answers_503(binary: &str) {
    let closed = crate::common::free_port().to_string();
    let server = start(binary, arena_url(&closed), String::new());
    let mut client = server.connect();
    assert_eq!(client.get("/api/items/1").status, 503);
    assert_eq!(me(&mut client, &["X-User-Id: 42"]).status, 503);
    let update = r#"{"name":"x","price":1,"quantity":1}"#;
    assert_eq!(post_item(&mut client, 1, update).status, 503);
    assert_eq!(client.get("/public/baseline?a=1&b=2").text(), "3");
}

/// What `key` holds in `redis` once it holds something (the server's SET is not awaited),
/// up to 10 s.
fn redis_value(redis: &RedisServer, key: &str) -> String {
    let started = Instant::now();
    loop {
        let value = redis.cli(&["GET", key]);
        if !value.is_empty() {
            return value;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{key} never in Redis"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A miss in both levels reads PostgreSQL and writes the row to Redis for the item's
/// second; the next read hits (unless its second passed).
fn a_miss_is_written_to_redis(binary: &str) {
    let redis = RedisServer::start(crate::common::free_port());
    let server = start_with_redis(binary, &redis);
    assert!(server
        .log()
        .contains(&format!("Redis L2 at tcp 127.0.0.1:{}", redis.port)));
    let mut client = ready_client(&server);
    let sent = Instant::now();
    let first = client.get("/api/items/23456");
    assert_eq!(
        cached_json(&first),
        ("MISS".into(), item_in_postgres(23_456))
    );
    assert_eq!(redis_value(&redis, "item:23456"), first.text());
    let ttl: i64 = redis.cli(&["PTTL", "item:23456"]).parse().unwrap();
    assert!(ttl <= 1000, "{ttl}");
    let next = client.get("/api/items/23456");
    assert_eq!(next.body, first.body);
    let (cache, _) = cached_json(&next);
    assert!(cache == "HIT" || sent.elapsed() >= Duration::from_secs(1));
}

/// A value in Redis for a key not in L1 is answered as it is, a hit: L2 is read (and the
/// database is not, whose row differs).
fn a_value_in_redis_is_a_hit(binary: &str) {
    let redis = RedisServer::start(crate::common::free_port());
    let server = start_with_redis(binary, &redis);
    let mut client = ready_client(&server);
    let planted = r#"{"id":31337,"name":"from-redis"}"#;
    assert_eq!(
        redis.cli(&["SET", "item:31337", planted, "PX", "5000"]),
        "OK"
    );
    let answer = client.get("/api/items/31337");
    assert_eq!(answer.header("x-cache"), Some("HIT"));
    assert_eq!(answer.text(), planted);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    let user = r#"{"id":42,"name":"from-redis"}"#;
    assert_eq!(redis.cli(&["SET", "user:42", user, "PX", "5000"]), "OK");
    let answer = me(&mut client, &["X-User-Id: 42"]);
    assert_eq!(
        (answer.header("x-cache"), answer.text()),
        (Some("HIT"), user)
    );
}

/// An update deletes the item in Redis before its 204: the key is gone, and the next read
/// (on another connection) misses and answers the new row. The row is restored.
fn an_update_deletes_the_item_in_redis(binary: &str) {
    let id = if binary.ends_with("gnosis-uring") {
        99_004
    } else {
        99_003
    };
    let redis = RedisServer::start(crate::common::free_port());
    let server = start_with_redis(binary, &redis);
    let _pinned = crate::write_items();
    let _restored = RestoredItem::new(id);
    let (target, key) = (format!("/api/items/{id}"), format!("item:{id}"));
    let read = ready_client(&server).get(&target);
    assert_eq!(cached_json(&read).0, "MISS");
    assert_eq!(redis_value(&redis, &key), read.text());

    let update = r#"{"name":"redis-updated","price":321,"quantity":12}"#;
    let answer = post_item(&mut ready_client(&server), id, update);
    assert_eq!(answer.status, 204, "{}", answer.text());
    assert_eq!(redis.cli(&["EXISTS", &key]), "0");

    let (cache, after) = cached_json(&ready_client(&server).get(&target));
    assert_eq!(cache, "MISS");
    assert_eq!(after, item_in_postgres(id));
    assert_eq!(
        (after["name"].as_str(), after["price"].as_i64()),
        (Some("redis-updated"), Some(321))
    );
}

/// With Redis gone every read is still answered, from PostgreSQL, and the failures logged;
/// once it is back on its port, the server's connections come back and misses are written
/// to it again.
fn without_redis_postgres_answers_until_it_is_back(binary: &str) {
    let port = crate::common::free_port();
    let redis = RedisServer::start(port);
    let server = start_with_redis(binary, &redis);
    let mut client = ready_client(&server);
    assert_eq!(cached_json(&client.get("/api/items/41000")).0, "MISS");
    redis_value(&redis, "item:41000");
    drop(redis);
    for id in 41_001..41_021 {
        let (cache, body) = cached_json(&client.get(&format!("/api/items/{id}")));
        assert_eq!(cache, "MISS");
        assert_eq!(body["id"], id);
    }
    let log = server.log();
    assert!(
        log.contains("a Redis command failed: Redis unreachable, or the connection lost"),
        "{log}"
    );
    let redis = RedisServer::start(port);
    let started = Instant::now();
    for id in 41_021.. {
        let (_, body) = cached_json(&client.get(&format!("/api/items/{id}")));
        assert_eq!(body["id"], id);
        if !redis.cli(&["GET", &format!("item:{id}")]).is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no value in Redis 30 s after its restart"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

test_both_binaries! {
    gnosis, gnosis_uring;
    public_routes_answer_as_the_arena_routes,
    an_item_misses_then_hits,
    an_item_expires_after_a_second,
    an_update_invalidates_for_every_thread,
    bad_requests_are_refused,
    me_is_the_edges_user,
    without_a_database_the_api_answers_503,
    a_miss_is_written_to_redis,
    a_value_in_redis_is_a_hit,
    an_update_deletes_the_item_in_redis,
    without_redis_postgres_answers_until_it_is_back,
}
