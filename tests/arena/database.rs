//! HttpArena's database routes, `/async-db` and `/fortunes`, served by both binaries started
//! with only DATABASE_URL and DATABASE_MAX_CONN (no PG* variables) against HttpArena's
//! database in the shared private cluster (`scripts/pg.sh start`: `benchmark`, user bench):
//! the documented items and schema, checked against psql; the fallback body when nothing
//! matches or the database is down at start, goes away under load, or hangs, then rows again;
//! TFB's routes there answer 503; and against TFB's database, `/async-db` answers the fallback.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::proxy::Proxy;
use crate::common::{HttpResponse, Server};
use serde_json::Value;

const FALLBACK: &str = r#"{"items":[],"count":0}"#;

/// HttpArena's database through `port` (the cluster's, or a proxy's).
fn arena_url(port: &str) -> String {
    format!("postgres://bench:bench@127.0.0.1:{port}/benchmark")
}

/// The server's whole environment as far as the database goes: the URL and the budget, and
/// every PG* variable the test process may have emptied (an empty one counts as unset).
fn database_env(url: String) -> Vec<(&'static str, String)> {
    let mut env: Vec<_> = ["PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE"]
        .map(|name| (name, String::new()))
        .to_vec();
    env.push(("DATABASE_URL", url));
    env.push(("DATABASE_MAX_CONN", "32".to_string()));
    env
}

fn start(binary: &str, url: String, extra: &[&str]) -> Server {
    Server::start_with_env(binary, extra, &database_env(url))
}

/// Rows of `sql` through psql on HttpArena's database.
fn psql(sql: &str) -> String {
    crate::common::pg::psql(&arena_url(&crate::common::pg::port()), sql)
}

/// An async-db answer: always 200 and JSON; its items, each checked against the schema, and
/// `count` their number.
fn items(response: &HttpResponse) -> Vec<Value> {
    assert_eq!(response.status, 200, "{}", response.text());
    assert_eq!(response.header("content-type"), Some("application/json"));
    let body: Value = serde_json::from_str(response.text()).expect("a JSON body");
    let items = body["items"].as_array().expect("an items array").clone();
    assert_eq!(body["count"].as_u64(), Some(items.len() as u64), "{body}");
    for item in &items {
        let fields: Vec<&str> = item
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut sorted = fields.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            ["active", "category", "id", "name", "price", "quantity", "rating", "tags"],
            "{item}"
        );
        for number in [
            &item["id"],
            &item["price"],
            &item["quantity"],
            &item["rating"]["score"],
            &item["rating"]["count"],
        ] {
            assert!(number.is_i64(), "{item}");
        }
        assert!(item["name"].is_string() && item["category"].is_string());
        assert!(item["active"].is_boolean(), "{item}");
        assert!(item["tags"].is_array(), "{item}");
    }
    items
}

/// Waits (polling, up to 20 s) until async-db answers rows.
fn wait_for_rows(server: &Server) -> Duration {
    wait_for_rows_on(&mut server.connect())
}

/// [`wait_for_rows`] on `client`'s own connection, whose worker thread has database
/// connections of its own: another connection's rows say nothing of this one's.
fn wait_for_rows_on(client: &mut crate::common::Client) -> Duration {
    let started = Instant::now();
    while items(&client.get("/async-db?limit=5")).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no rows within 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    started.elapsed()
}

/// HttpArena's validation and more: exactly `limit` items in the range, each the row psql
/// reads for its id; the count psql finds when fewer match; an empty range's fallback body.
fn async_db_answers_the_documented_items(binary: &str) {
    let server = start(binary, arena_url(&crate::common::pg::port()), &[]);
    let mut client = server.connect();
    wait_for_rows_on(&mut client);
    let mut rng = fastrand::Rng::with_seed(20);
    let mut ranges = vec![(5, 80, 7), (20, 150, 18), (100, 400, 33), (10, 50, 50)];
    ranges.extend((0..6).map(|_| {
        let min = rng.i32(-5..=505);
        (min, min + rng.i32(0..=3), rng.i64(1..=50))
    }));
    for (min, max, limit) in ranges {
        let target = format!("/async-db?min={min}&max={max}&limit={limit}");
        let got = items(&client.get(&target));
        let matching: i64 = psql(&format!(
            "SELECT count(*) FROM items WHERE price BETWEEN {min} AND {max}"
        ))
        .parse()
        .unwrap();
        assert_eq!(got.len() as i64, matching.min(limit), "{target}");
        if got.is_empty() {
            continue;
        }
        for item in &got {
            let price = item["price"].as_i64().unwrap();
            assert!(
                (min as i64..=max as i64).contains(&price),
                "{target}: {item}"
            );
        }
        let ids: Vec<String> = got.iter().map(|item| item["id"].to_string()).collect();
        let expected: Value = serde_json::from_str(&psql(&format!(
            "SELECT json_agg(json_build_object('id', id, 'name', name, 'category', category, \
             'price', price, 'quantity', quantity, 'active', active, 'tags', tags, \
             'rating', json_build_object('score', rating_score, 'count', rating_count)) \
             ORDER BY id) FROM items WHERE id IN ({})",
            ids.join(",")
        )))
        .unwrap();
        let mut got = got;
        got.sort_by_key(|item| item["id"].as_i64());
        assert_eq!(Value::Array(got), expected, "{target}");
    }
    // The defaults (10, 50, 50), a clamped limit, and bad input taken as the defaults.
    for target in [
        "/async-db",
        "/async-db?limit=500",
        "/async-db?min=x&max=&limit=1.5",
    ] {
        assert_eq!(items(&client.get(target)).len(), 50, "{target}");
    }
    assert_eq!(items(&client.get("/async-db?limit=0")).len(), 1);
    let empty = client.get("/async-db?min=9999&max=9999&limit=50");
    assert!(items(&empty).is_empty());
    assert_eq!(empty.text(), FALLBACK);
}

/// The fortunes page on HttpArena's 200 rows: every row and the added one, sorted by
/// message, every message escaped, within HttpArena's size check.
fn fortunes_on_httparenas_table(binary: &str) {
    let server = start(binary, arena_url(&crate::common::pg::port()), &[]);
    server.wait_until_ok(&["/fortunes"], Duration::from_secs(20));
    let response = server.connect().get("/fortunes");
    assert_eq!(
        response.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    let page = response.text();
    assert!(
        (18 * 1024..=64 * 1024).contains(&page.len()),
        "{} bytes",
        page.len()
    );
    let mut messages: Vec<String> = psql("SELECT message FROM fortune")
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(messages.len(), 200);
    messages.push("Additional fortune added at request time.".into());
    messages.sort_unstable();
    let cells: Vec<&str> = page
        .split("<tr><td>")
        .skip(1)
        .map(|row| {
            row.split("</td><td>")
                .nth(1)
                .unwrap()
                .split("</td>")
                .next()
                .unwrap()
        })
        .collect();
    let escaped: Vec<String> = messages
        .iter()
        .map(|message| {
            message
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&quot;")
                .replace('\'', "&#039;")
        })
        .collect();
    assert_eq!(cells, escaped);
    assert!(page.contains("&lt;script&gt;") && !page.contains("<script>"));
}

/// HttpArena's database has no `world`: TFB's routes answer 503 at once, the server stays
/// up and serves async-db, the log says once which statements are unavailable, and the
/// cache loader stops.
fn tfb_routes_answer_503_without_their_table(binary: &str) {
    let server = start(binary, arena_url(&crate::common::pg::port()), &[]);
    wait_for_rows(&server);
    let mut client = server.connect();
    for target in [
        "/db",
        "/queries?queries=3",
        "/updates?queries=2",
        "/cached-queries?count=2",
    ] {
        assert_eq!(client.get(target).status, 503, "{target}");
    }
    assert_eq!(items(&client.get("/async-db?limit=3")).len(), 3);
    let log = server.log();
    let lines = log
        .lines()
        .filter(|l| l.contains("cannot prepare statements"))
        .count();
    assert_eq!(lines, 1, "{log}");
    assert!(
        log.contains(r#"world (relation "world" does not exist)"#),
        "{log}"
    );
    assert!(log.contains("no world table in this database"), "{log}");
}

/// TFB's database has no `items`: async-db answers the fallback body, TFB's routes serve.
fn async_db_on_tfbs_database_answers_the_fallback(binary: &str) {
    let url = format!(
        "postgres://benchmarkdbuser:benchmarkdbpass@127.0.0.1:{}/hello_world",
        crate::common::pg::port()
    );
    let server = start(binary, url, &[]);
    server.wait_until_ok(&["/db", "/fortunes"], Duration::from_secs(20));
    let mut client = server.connect();
    let response = client.get("/async-db?min=10&max=50&limit=5");
    assert!(items(&response).is_empty());
    assert_eq!(response.text(), FALLBACK);
    assert_eq!(client.get("/queries?queries=5").status, 200);
}

/// The database down when the server starts (every connection to it reset): the fallback
/// body at once and fortunes 503, then rows once it is up.
fn database_down_at_start_then_up(binary: &str) {
    let proxy = Proxy::start(crate::common::pg::port().parse().unwrap());
    proxy.set_refusing(true);
    let server = start(binary, arena_url(&proxy.port().to_string()), &[]);
    let mut client = server.connect();
    for _ in 0..3 {
        let response = client.get("/async-db?limit=10");
        assert_eq!(response.text(), FALLBACK);
        assert_eq!(client.get("/fortunes").status, 503);
    }
    proxy.set_refusing(false);
    wait_for_rows_on(&mut client);
    assert_eq!(items(&client.get("/async-db?limit=10")).len(), 10);
}

/// Clients keep asking while the database goes away (connections reset, new ones refused)
/// and comes back, then hangs (nothing forwarded) and comes back: every answer is 200 JSON,
/// either `limit` rows or the fallback body; the fallback is seen while it is away and rows
/// again once it is back.
fn database_away_under_load_then_back(binary: &str) {
    let proxy = Proxy::start(crate::common::pg::port().parse().unwrap());
    let server = start(
        binary,
        arena_url(&proxy.port().to_string()),
        &["--query-timeout", "300"],
    );
    wait_for_rows(&server);
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (stop, mut client) = (stop.clone(), server.connect());
            std::thread::spawn(move || {
                let mut answered = 0;
                while !stop.load(Ordering::Relaxed) {
                    let got = items(&client.get("/async-db?min=10&max=50&limit=20"));
                    assert!(got.is_empty() || got.len() == 20, "{} items", got.len());
                    answered += 1;
                }
                answered
            })
        })
        .collect();
    let mut client = server.connect();
    let fallback_seen = |client: &mut crate::common::Client| {
        let started = Instant::now();
        while !items(&client.get("/async-db?limit=20")).is_empty() {
            assert!(started.elapsed() < Duration::from_secs(20), "rows still");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    // Away: every connection reset, new ones refused.
    proxy.set_refusing(true);
    proxy.reset_all();
    fallback_seen(&mut client);
    proxy.set_refusing(false);
    let back = wait_for_rows(&server);
    // Hung: connections held, nothing forwarded, queries past their deadline.
    proxy.pause();
    fallback_seen(&mut client);
    proxy.resume();
    proxy.reset_all();
    let back_from_hang = wait_for_rows(&server);
    stop.store(true, Ordering::Relaxed);
    for handle in clients {
        assert!(handle.join().expect("a client failed") > 0);
    }
    eprintln!("rows again {back:?} after the reset, {back_from_hang:?} after the hang");
    assert!(server.connect().get("/plaintext").status == 200);
}

test_both_binaries! {
    gnosis, gnosis_uring;
    async_db_answers_the_documented_items,
    fortunes_on_httparenas_table,
    tfb_routes_answer_503_without_their_table,
    async_db_on_tfbs_database_answers_the_fallback,
    database_down_at_start_then_up,
    database_away_under_load_then_back,
}
