//! The database tests against the real binary and the shared private cluster
//! (`scripts/pg.sh start`), checked the way TFB's verifier checks them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::common::cluster::Cluster;
use crate::common::{assert_general_headers, get_request, Client, Server};
use serde_json::Value;

const GNOSIS: &str = env!("CARGO_BIN_EXE_gnosis");
const GNOSIS_URING: &str = env!("CARGO_BIN_EXE_gnosis-uring");

/// The shared cluster as `user` over its Unix socket (trust), like a local deployment.
fn env_for(user: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "PGHOST",
            crate::common::pg::socket_dir().display().to_string(),
        ),
        ("PGPORT", crate::common::pg::port()),
        ("PGUSER", user.to_string()),
        ("PGDATABASE", "hello_world".to_string()),
    ]
}

/// The shared cluster as TFB connects: benchmarkdbuser over TCP with SCRAM.
fn tfb_env() -> Vec<(&'static str, String)> {
    vec![
        ("PGHOST", "127.0.0.1".to_string()),
        ("PGPORT", crate::common::pg::port()),
        ("PGUSER", "benchmarkdbuser".to_string()),
        ("PGPASSWORD", "benchmarkdbpass".to_string()),
        ("PGDATABASE", "hello_world".to_string()),
    ]
}

/// Starts `binary` and waits until its cache is loaded and its database connections answer.
fn start(binary: &str, env: &[(&str, String)]) -> Server {
    start_with_args(binary, &[], env)
}

/// [`start`] with extra command-line arguments.
fn start_with_args(binary: &str, extra: &[&str], env: &[(&str, String)]) -> Server {
    let server = Server::start_with_env(binary, extra, env);
    server.wait_until_ok(&["/cached-queries", "/db"], Duration::from_secs(20));
    server
}

/// Runs SQL with psql as `user` on the shared cluster's `hello_world`, over its socket.
fn psql(user: &str, sql: &str) -> String {
    let url = format!(
        "postgresql:///hello_world?host={}&port={}&user={user}",
        crate::common::pg::socket_dir().display(),
        crate::common::pg::port()
    );
    crate::common::pg::psql(&url, sql)
}

fn world_table() -> HashMap<i64, i64> {
    psql("gnosis_trust", "SELECT id, randomnumber FROM world")
        .lines()
        .map(|line| {
            let (id, number) = line.split_once('|').unwrap();
            (id.parse().unwrap(), number.parse().unwrap())
        })
        .collect()
}

/// A `{"id":..,"randomNumber":..}` object with both in 1..=10000 and no other key.
fn assert_world(value: &Value) -> (i64, i64) {
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("{value} is not an object"));
    assert_eq!(object.len(), 2, "{value} has extra keys");
    let id = object["id"].as_i64().expect("an integer id");
    let number = object["randomNumber"]
        .as_i64()
        .expect("an integer randomNumber");
    assert!(
        (1..=10_000).contains(&id) && (1..=10_000).contains(&number),
        "{value}"
    );
    (id, number)
}

fn json_of(client: &mut Client, target: &str) -> Value {
    let response = client.get(target);
    assert_eq!(response.status, 200, "{target}: {}", response.text());
    assert_general_headers(&response, "application/json");
    serde_json::from_slice(&response.body).unwrap_or_else(|err| panic!("{target}: {err}"))
}

/// The verifier's cases for the count parameter, with the array length each must give.
const COUNT_CASES: [(&str, usize); 6] = [
    ("2", 2),
    ("0", 1),
    ("foo", 1),
    ("501", 500),
    ("", 1),
    ("20", 20),
];

fn db_answers_one_world_object(binary: &str) {
    let server = start(binary, &tfb_env());
    let mut client = server.connect();
    let mut ids = std::collections::HashSet::new();
    for _ in 0..50 {
        let (id, _) = assert_world(&json_of(&mut client, "/db"));
        ids.insert(id);
    }
    assert!(ids.len() > 40, "ids are not random: {ids:?}");
}

fn queries_and_cached_queries_follow_the_count_rules(binary: &str) {
    let server = start(binary, &tfb_env());
    let mut client = server.connect();
    for (route, name) in [("/queries", "queries"), ("/cached-queries", "count")] {
        for (value, expected) in COUNT_CASES {
            let body = json_of(&mut client, &format!("{route}?{name}={value}"));
            let array = body
                .as_array()
                .unwrap_or_else(|| panic!("{route}?{name}={value}: not an array"));
            assert_eq!(array.len(), expected, "{route}?{name}={value}");
            for world in array {
                assert_world(world);
            }
        }
        assert_eq!(json_of(&mut client, route).as_array().unwrap().len(), 1);
    }
}

fn cached_queries_answer_from_the_table(binary: &str) {
    let server = start(binary, &tfb_env());
    let mut client = server.connect();
    let body = json_of(&mut client, "/cached-queries?count=100");
    // Rows change only through /updates, which no test runs concurrently on these ids often;
    // the cache must hold real rows: every id exists in the table.
    let table = world_table();
    for world in body.as_array().unwrap() {
        let (id, _) = assert_world(world);
        assert!(table.contains_key(&id));
    }
}

fn updates_change_the_rows_they_return(binary: &str) {
    let server = start(binary, &tfb_env());
    let mut client = server.connect();
    for (value, expected) in COUNT_CASES {
        let body = json_of(&mut client, &format!("/updates?queries={value}"));
        assert_eq!(body.as_array().unwrap().len(), expected, "queries={value}");
    }

    let before = world_table();
    let body = json_of(&mut client, "/updates?queries=500");
    let after = world_table();
    let worlds: Vec<(i64, i64)> = body.as_array().unwrap().iter().map(assert_world).collect();
    assert_eq!(worlds.len(), 500);
    let distinct: std::collections::HashSet<_> = worlds.iter().map(|(id, _)| id).collect();
    assert_eq!(distinct.len(), 500, "an update request names a row twice");
    let changed = worlds
        .iter()
        .filter(|(id, _)| before[id] != after[id])
        .count();
    let stored = worlds
        .iter()
        .filter(|(id, number)| after[id] == *number)
        .count();
    assert!(changed >= 475, "only {changed} of 500 rows changed");
    assert!(
        stored >= 475,
        "only {stored} of 500 answered numbers are in the table"
    );
}

fn fortunes_page_is_byte_exact(binary: &str) {
    let server = start(binary, &tfb_env());
    let response = server.connect().get("/fortunes");
    assert_eq!(response.status, 200);
    assert_general_headers(&response, "text/html; charset=utf-8");
    let expected = concat!(
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>",
        "<tr><td>11</td><td>&lt;script&gt;alert(&quot;This should not be displayed in a browser alert box.&quot;);&lt;/script&gt;</td></tr>",
        "<tr><td>4</td><td>A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1</td></tr>",
        "<tr><td>5</td><td>A computer program does what you tell it to do, not what you want it to do.</td></tr>",
        "<tr><td>2</td><td>A computer scientist is someone who fixes things that aren&#039;t broken.</td></tr>",
        "<tr><td>8</td><td>A list is only as strong as its weakest link. — Donald Knuth</td></tr>",
        "<tr><td>0</td><td>Additional fortune added at request time.</td></tr>",
        "<tr><td>3</td><td>After enough decimal places, nobody gives a damn.</td></tr>",
        "<tr><td>7</td><td>Any program that runs right is obsolete.</td></tr>",
        "<tr><td>10</td><td>Computers make very fast, very accurate mistakes.</td></tr>",
        "<tr><td>6</td><td>Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen</td></tr>",
        "<tr><td>9</td><td>Feature: A bug with seniority.</td></tr>",
        "<tr><td>1</td><td>fortune: No such file or directory</td></tr>",
        "<tr><td>12</td><td>フレームワークのベンチマーク</td></tr>",
        "</table></body></html>"
    );
    assert_eq!(response.text(), expected);
}

fn pipelined_database_requests_are_answered_in_order(binary: &str) {
    let server = start(binary, &tfb_env());
    let mut client = server.connect();
    let targets = [
        "/db",
        "/plaintext",
        "/fortunes",
        "/json",
        "/queries?queries=3",
        "/cached-queries?count=2",
        "/updates?queries=2",
        "/missing",
    ];
    for _ in 0..10 {
        let batch: String = targets
            .iter()
            .chain(&targets)
            .map(|t| get_request(t))
            .collect();
        client.send(batch.as_bytes());
        for target in targets.iter().chain(&targets) {
            let response = client.response().unwrap();
            let ok = match *target {
                "/db" => {
                    serde_json::from_slice::<Value>(&response.body).is_ok_and(|v| v.is_object())
                }
                "/plaintext" => response.text() == "Hello, World!",
                "/fortunes" => response.text().contains("フレームワークのベンチマーク"),
                "/json" => response.text() == r#"{"message":"Hello, World!"}"#,
                "/queries?queries=3" => json_len(&response.body) == Some(3),
                "/cached-queries?count=2" | "/updates?queries=2" => {
                    json_len(&response.body) == Some(2)
                }
                _ => response.status == 404,
            };
            assert!(
                ok,
                "out of order or wrong: {target} got {}",
                response.text()
            );
        }
    }
}

fn json_len(body: &[u8]) -> Option<usize> {
    Some(
        serde_json::from_slice::<Value>(body)
            .ok()?
            .as_array()?
            .len(),
    )
}

/// Sends `target` once on each of 512 connections at the same time, like the verifier's
/// siege run, and checks every answer is 200.
fn hit_512_times(server: &Server, target: &str) {
    let mut clients: Vec<Client> = (0..512).map(|_| server.connect()).collect();
    for client in &mut clients {
        client.send(get_request(target).as_bytes());
    }
    for client in &mut clients {
        assert_eq!(client.response().unwrap().status, 200, "{target}");
    }
}

/// Calls and rows so far of `gnosis_count`'s statements on one table whose text contains
/// `kind` anywhere: TFB's rule (scripts/tool verify tfb), so an UPDATE with a SELECT in its text
/// counts as a select too.
fn statement_totals(kind: &str, table: &str) -> (i64, i64) {
    let sql = format!(
        "SELECT coalesce(sum(calls), 0), coalesce(sum(rows), 0) FROM pg_stat_statements \
         WHERE userid = 'gnosis_count'::regrole AND query ~* '[[:<:]]{table}[[:>:]]' \
         AND query ~* '{kind}'"
    );
    let output = psql("gnosis_count", &sql);
    let (calls, rows) = output.trim().split_once('|').unwrap();
    (calls.parse().unwrap(), rows.parse().unwrap())
}

fn counted(target: &str, server: &Server, kind: &str, table: &str) -> (i64, i64) {
    let (calls, rows) = statement_totals(kind, table);
    hit_512_times(server, target);
    let (calls_after, rows_after) = statement_totals(kind, table);
    (calls_after - calls, rows_after - rows)
}

/// Exactly what TFB's verifier expects of 512 concurrent requests: one statement per row,
/// no cache, no multi-row read. Runs as its own role so other tests do not count.
///
/// Both binaries, one after the other: they count as the same role.
#[test]
fn statement_counts_match_the_verifier() {
    for binary in [GNOSIS, GNOSIS_URING] {
        statement_counts_of(binary);
    }
}

fn statement_counts_of(binary: &str) {
    let server = start(binary, &env_for("gnosis_count"));
    assert_eq!(counted("/db", &server, "select", "world"), (512, 512));
    assert_eq!(
        counted("/queries?queries=20", &server, "select", "world"),
        (10_240, 10_240)
    );
    assert_eq!(
        counted("/fortunes", &server, "select", "fortune"),
        (512, 6_144)
    );

    let (selects, rows_read) = statement_totals("select", "world");
    assert_eq!(
        counted("/updates?queries=20", &server, "update", "world"),
        (512, 10_240)
    );
    let (selects_after, rows_read_after) = statement_totals("select", "world");
    assert_eq!(
        (selects_after - selects, rows_read_after - rows_read),
        (10_240, 10_240),
        "the UPDATE's text must not contain 'select'"
    );
}

fn serves_without_a_database_and_recovers_when_it_starts(binary: &str) {
    let cluster = Cluster::new("late");
    let server = Server::start_with_env(binary, &[], &cluster.env());
    let mut client = server.connect();
    assert_eq!(client.get("/plaintext").status, 200);
    assert_eq!(client.get("/json").status, 200);
    for target in [
        "/db",
        "/queries?queries=2",
        "/updates?queries=2",
        "/fortunes",
        "/cached-queries",
    ] {
        let started = Instant::now();
        let response = client.get(target);
        assert_eq!(response.status, 503, "{target}");
        assert_general_headers(&response, "text/plain");
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{target} was slow to fail"
        );
    }

    cluster.start();
    // The server may connect while pg.sh is still creating the tables: statements found
    // unavailable then are prepared again 1, 3, 7 and 15 s later.
    let deadline = Instant::now() + Duration::from_secs(20);
    for target in [
        "/db",
        "/fortunes",
        "/updates?queries=2",
        "/cached-queries?count=3",
    ] {
        while client.get(target).status != 200 {
            assert!(Instant::now() < deadline, "{target} did not recover");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A table created after the server started (a schema loaded late) is found: its route
/// answers 503 at once while the table is missing, the others serve, and it serves within
/// seconds of the table being there, on every thread's connection. Each connection tries
/// again at 1, 3, 7 and 15 s after it became ready, each on its own schedule: the threads
/// recover one after another, all within 20 s.
fn a_table_created_after_start_up_is_found(binary: &str) {
    let cluster = Cluster::new("renamed");
    cluster.start();
    cluster.psql("ALTER TABLE fortune RENAME TO fortune_later");
    let server = Server::start_with_env(binary, &[], &cluster.env());
    let mut client = server.connect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while client.get("/db").status != 200 {
        assert!(Instant::now() < deadline, "/db did not serve");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(client.get("/fortunes").status, 503);

    cluster.psql("ALTER TABLE fortune_later RENAME TO fortune");
    let renamed = Instant::now();
    let deadline = renamed + Duration::from_secs(20);
    while client.get("/fortunes").status != 200 {
        assert!(Instant::now() < deadline, "/fortunes did not recover");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Both threads' connections: many new connections (on either thread), each served
    // once its thread's connection has found the table.
    for _ in 0..16 {
        let mut fresh = server.connect();
        while fresh.get("/fortunes").status != 200 {
            assert!(Instant::now() < deadline, "a thread did not recover");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    eprintln!(
        "every thread served /fortunes {:?} after the rename",
        renamed.elapsed()
    );
}

/// The frontend messages in `bytes` (which start at a message's start): type and body.
fn frontend_messages(mut bytes: &[u8]) -> Vec<(u8, &[u8])> {
    let mut messages = Vec::new();
    while bytes.len() >= 5 {
        let len = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
        let Some(body) = bytes.get(5..1 + len) else {
            break;
        };
        messages.push((bytes[0], body));
        bytes = &bytes[1 + len..];
    }
    messages
}

/// `/updates` takes one round trip: with every reply of the database held back, all of the
/// request's statements (N SELECTs and the UPDATE, each its own Bind/Execute/Sync) still
/// reach it; and once the replies go through, the request is answered.
fn updates_take_one_round_trip(binary: &str) {
    let proxy = crate::common::proxy::Proxy::start(crate::common::pg::port().parse().unwrap());
    let env = [
        ("PGHOST", "127.0.0.1".to_string()),
        ("PGPORT", proxy.port().to_string()),
        ("PGUSER", "benchmarkdbuser".to_string()),
        ("PGPASSWORD", "benchmarkdbpass".to_string()),
        ("PGDATABASE", "hello_world".to_string()),
    ];
    // One thread, so that one database connection carries everything the proxy records,
    // and it is ready (its start-up passes through the proxy too) once `start` returns.
    let server = start_with_args(binary, &["--threads", "1"], &env);
    let mut client = server.connect();
    proxy.hold_replies_and_record();
    client.send(get_request("/updates?queries=5").as_bytes());
    let statements = |recorded: &[u8]| -> Vec<String> {
        frontend_messages(recorded)
            .into_iter()
            .filter(|(kind, _)| *kind == b'B')
            .map(|(_, body)| {
                // Bind: the portal's name, then the statement's, each NUL-terminated.
                let mut names = body.split(|&b| b == 0);
                String::from_utf8_lossy(names.nth(1).unwrap_or_default()).into_owned()
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while statements(&proxy.recorded()).len() < 6 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let recorded = proxy.recorded();
    let syncs = frontend_messages(&recorded)
        .iter()
        .filter(|(kind, _)| *kind == b'S')
        .count();
    assert_eq!(
        (statements(&recorded), syncs),
        (
            vec!["world", "world", "world", "world", "world", "update_worlds"]
                .into_iter()
                .map(String::from)
                .collect(),
            6
        ),
        "what reached the database before it answered anything"
    );
    proxy.release_replies();
    let response = client.response().unwrap();
    assert_eq!(response.status, 200);
    let worlds: Value = serde_json::from_slice(&response.body).unwrap();
    assert_eq!(worlds.as_array().map(Vec::len), Some(5));
}

test_both_binaries! {
    gnosis, gnosis_uring;
    db_answers_one_world_object,
    queries_and_cached_queries_follow_the_count_rules,
    cached_queries_answer_from_the_table,
    updates_change_the_rows_they_return,
    fortunes_page_is_byte_exact,
    pipelined_database_requests_are_answered_in_order,
    updates_take_one_round_trip,
    serves_without_a_database_and_recovers_when_it_starts,
    a_table_created_after_start_up_is_found,
}
