//! The job table without sockets: requests start jobs on a pool whose one connection a
//! scripted PostgreSQL answers, and the tests read the responses the jobs finish.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::app::world::WorldSnapshot;
use crate::pg::pool::Threads;
use crate::pg::protocol::script;
use crate::pg::protocol::{BOOL_OID, INT4_ARRAY_OID, INT4_OID, INT8_OID, JSONB_OID, TEXT_OID};
use crate::pg::target::{Config, Host};
use crate::pg::{link::Order, Options, Target};

fn target() -> Arc<Target> {
    Target::new(Config {
        // A Unix socket: nothing to resolve, no helper thread.
        host: Host::Unix("/nonexistent".into()),
        port: 5432,
        user: "u".into(),
        password: String::new(),
        database: "d".into(),
        allow_cleartext: false,
    })
}

/// The columns of HttpArena's items query.
const ITEM_COLUMNS: &[u32] = &[
    INT4_OID, TEXT_OID, TEXT_OID, INT4_OID, INT4_OID, BOOL_OID, JSONB_OID, INT4_OID, INT4_OID,
];

/// The columns of the api's item and user queries.
const ONE_ITEM_COLUMNS: &[u32] = &[
    INT4_OID, TEXT_OID, TEXT_OID, INT4_OID, INT4_OID, BOOL_OID, INT4_OID, INT4_OID,
];
const USER_COLUMNS: &[u32] = &[INT4_OID, TEXT_OID, TEXT_OID, TEXT_OID];

/// A pool of one connection, ready: started up and its statements prepared.
fn ready_pool() -> Pool {
    let mut arena = Vec::new();
    for (params, columns) in [
        (&[INT4_OID, INT4_OID, INT8_OID][..], ITEM_COLUMNS),
        (&[INT4_OID], ONE_ITEM_COLUMNS),
        (&[TEXT_OID, INT4_OID, INT4_OID, INT4_OID], &[INT4_OID]),
        (&[INT4_OID], USER_COLUMNS),
    ] {
        arena.extend(script::parse_complete());
        arena.extend(script::parameter_description(params));
        arena.extend(script::row_description(columns));
        arena.extend(script::ready());
    }
    pool_answering(&arena)
}

/// A ready pool whose database has no `items` nor `users` table (TFB's).
fn tfb_pool() -> Pool {
    let mut arena = Vec::new();
    for table in ["items", "items", "items", "users"] {
        let missing = format!(r#"relation "{table}" does not exist"#);
        arena.extend(script::error("ERROR", "42P01", &missing));
        arena.extend(script::ready());
    }
    pool_answering(&arena)
}

/// A pool of one connection, started up, TFB's statements prepared and HttpArena's
/// answered with `arena`.
fn pool_answering(arena: &[u8]) -> Pool {
    let target = target();
    let threads = Arc::new(Threads::default());
    let now = Instant::now();
    let mut pool = Pool::new(&target, STATEMENTS, &Options::default(), 1, &threads, now);
    let link = pool.link_mut(0);
    let mut ignore = |_: u64, _: Event<'_>| {};
    assert!(matches!(
        link.order(now, &mut ignore),
        Some(Order::Connect(_))
    ));
    link.connected(Ok(()), now, &mut ignore);
    let mut answers = script::auth_ok();
    answers.extend(script::ready());
    for (params, columns) in [
        (&[INT4_OID][..], Some(&[INT4_OID, INT4_OID][..])),
        (&[], Some(&[INT4_OID, TEXT_OID][..])),
        (&[INT4_ARRAY_OID, INT4_ARRAY_OID], None),
    ] {
        answers.extend(script::parse_complete());
        answers.extend(script::parameter_description(params));
        answers.extend(columns.map_or_else(script::no_data, script::row_description));
        answers.extend(script::ready());
    }
    answers.extend_from_slice(arena);
    link.receive(&answers, now, &mut ignore);
    assert!(link.conn().is_ready());
    let sent = link.unsent().len();
    link.sent(sent);
    pool
}

fn ticket(seq: u32) -> Ticket {
    Ticket {
        slot: 0,
        generation: 0,
        seq,
    }
}

fn cache() -> Cache {
    Cache::new(WorldSnapshot::load_in_background(
        target(),
        Duration::from_millis(1),
    ))
}

/// The world ids of the SELECTs the pool's connection has to send, taken as sent.
fn selected_ids(pool: &mut Pool) -> Vec<i32> {
    let link = pool.link_mut(0);
    let bytes = link.unsent().to_vec();
    link.sent(bytes.len());
    script::frontend(&bytes, false)
        .into_iter()
        .filter(|(tag, body)| *tag == b'B' && body.starts_with(b"\0world\0"))
        .map(|(_, body)| {
            // Portal, statement, two format words, the parameter count, the length.
            let at = b"\0world\0".len() + 6 + 4;
            i32::from_be_bytes(body[at..at + 4].try_into().unwrap())
        })
        .collect()
}

/// The answer to one SELECT of a world: its row.
fn world_answer(id: i32) -> Vec<u8> {
    let mut answer = script::bind_complete();
    answer.extend(script::data_row(&[id, 1000 + id]));
    answer.extend(script::command_complete("SELECT 1"));
    answer.extend(script::ready());
    answer
}

fn update_answer() -> Vec<u8> {
    let mut answer = script::bind_complete();
    answer.extend(script::command_complete("UPDATE 2"));
    answer.extend(script::ready());
    answer
}

/// Feeds the scripted server's `answers` to the pool's connection and returns the
/// responses the jobs finish: (sequence, status, body).
fn answer(jobs: &mut Jobs, pool: &mut Pool, answers: &[u8]) -> Vec<(u32, Status, String)> {
    answer_with(jobs, pool, answers, &api::Cache::new(16), None)
}

/// [`answer`], the api's rows kept in `api_cache` and `redis`.
fn answer_with(
    jobs: &mut Jobs,
    pool: &mut Pool,
    answers: &[u8],
    api_cache: &api::Cache,
    mut redis: Option<&mut Redis>,
) -> Vec<(u32, Status, String)> {
    let mut cache = cache();
    let mut finished = Vec::new();
    pool.link_mut(0)
        .receive(answers, Instant::now(), &mut |token, event| {
            let redis = redis.as_deref_mut();
            if let Some(done) = jobs.on_event(token, event, &mut cache, api_cache, redis) {
                finished.push(owned(done));
            }
        });
    finished
}

/// A finished answer, owned: (sequence, status, body).
fn owned(done: Finished<'_>) -> (u32, Status, String) {
    let crate::http::Body::Bytes(body) = done.answer.body else {
        panic!("a database answer is bytes");
    };
    let body = String::from_utf8(body.to_vec()).unwrap();
    (done.ticket.seq, done.answer.status, body)
}

fn item_row(id: i32, name: &str, active: bool, tags: &str) -> Vec<u8> {
    let int = |n: i32| n.to_be_bytes().to_vec();
    let jsonb = [&[1u8][..], tags.as_bytes()].concat();
    script::raw_row(&[
        Some(&int(id)),
        Some(name.as_bytes()),
        Some(b"toys"),
        Some(&int(30)),
        Some(&int(5)),
        Some(&[u8::from(active)]),
        Some(&jsonb),
        Some(&int(42)),
        Some(&int(127)),
    ])
}

const QUERY: ItemQuery = ItemQuery {
    min: 10,
    max: 50,
    limit: 20,
};

/// Rows become items as they arrive: the strings escaped for JSON, the tags the database's
/// JSON text, the rating nested, the count computed.
#[test]
fn an_async_db_request_is_answered_with_its_items() {
    let (mut jobs, mut pool, mut rng) = (Jobs::new(8), ready_pool(), fastrand::Rng::new());
    let now = Instant::now();
    jobs.start(DbRoute::AsyncDb(QUERY), ticket(1), &mut rng, &mut pool, now)
        .unwrap();
    let sent = script::frontend(pool.link_mut(0).unsent(), false);
    let bind = &sent.iter().find(|(tag, _)| *tag == b'B').unwrap().1;
    assert!(bind.starts_with(b"\0items\0"), "the items statement");
    let limit = [&[0, 0, 0, 8][..], &20i64.to_be_bytes()].concat();
    assert!(
        bind.windows(limit.len()).any(|w| w == limit),
        "LIMIT's parameter an int8"
    );
    let mut answer_bytes = script::bind_complete();
    answer_bytes.extend(item_row(
        4,
        r#"Vertex "Spindle" \ 4 é"#,
        true,
        r#"["sale", "new"]"#,
    ));
    answer_bytes.extend(item_row(10, "Quartz Lamp 10", false, "[]"));
    answer_bytes.extend(script::command_complete("SELECT 2"));
    answer_bytes.extend(script::ready());
    let body = concat!(
        r#"{"items":[{"id":4,"name":"Vertex \"Spindle\" \\ 4 é","category":"toys","#,
        r#""price":30,"quantity":5,"active":true,"tags":["sale", "new"],"#,
        r#""rating":{"score":42,"count":127}},{"id":10,"name":"Quartz Lamp 10","#,
        r#""category":"toys","price":30,"quantity":5,"active":false,"tags":[],"#,
        r#""rating":{"score":42,"count":127}}],"count":2}"#
    );
    let finished = answer(&mut jobs, &mut pool, &answer_bytes);
    assert_eq!(finished, [(1, Status::Ok, body.to_string())]);
    let parsed: serde_json::Value = serde_json::from_str(&finished[0].2).unwrap();
    assert_eq!(parsed["items"][0]["name"], r#"Vertex "Spindle" \ 4 é"#);
}

/// No row, a failed query, a column of the wrong type: the fallback body, 200.
#[test]
fn async_db_answers_the_fallback_body_when_it_has_no_items() {
    let fallback = super::FALLBACK.to_vec();
    let mut wrong_type = script::bind_complete();
    wrong_type.extend(script::data_row(&[1, 2, 3, 4, 5, 6, 7, 8, 9]));
    wrong_type.extend(script::command_complete("SELECT 1"));
    wrong_type.extend(script::ready());
    let mut failed = script::bind_complete();
    failed.extend(script::error("ERROR", "57014", "canceling statement"));
    failed.extend(script::ready());
    let mut empty = script::bind_complete();
    empty.extend(script::command_complete("SELECT 0"));
    empty.extend(script::ready());
    for answer_bytes in [empty, failed, wrong_type] {
        let (mut jobs, mut pool, mut rng) = (Jobs::new(8), ready_pool(), fastrand::Rng::new());
        jobs.start(
            DbRoute::AsyncDb(QUERY),
            ticket(1),
            &mut rng,
            &mut pool,
            Instant::now(),
        )
        .unwrap();
        let finished = answer(&mut jobs, &mut pool, &answer_bytes);
        assert_eq!(finished.len(), 1);
        let (_, status, body) = &finished[0];
        assert_eq!((*status, body.as_bytes()), (Status::Ok, &fallback[..]));
    }
}

/// On TFB's database the items statement is unavailable: the request is refused at once
/// (the app answers the fallback body), nothing is sent, and TFB's routes serve.
#[test]
fn async_db_is_refused_at_once_where_items_is_unavailable() {
    let (mut jobs, mut pool, mut rng) = (Jobs::new(8), tfb_pool(), fastrand::Rng::new());
    let now = Instant::now();
    assert!(pool.link(0).conn().is_ready());
    assert_eq!(
        jobs.start(DbRoute::AsyncDb(QUERY), ticket(1), &mut rng, &mut pool, now),
        Err(Status::ServiceUnavailable)
    );
    assert!(pool.link_mut(0).unsent().is_empty());
    jobs.start(DbRoute::World, ticket(2), &mut rng, &mut pool, now)
        .unwrap();
    let ids = selected_ids(&mut pool);
    assert_eq!(answer(&mut jobs, &mut pool, &world_answer(ids[0])).len(), 1);
}

/// The api's item read: the row as JSON (no tags), kept in the shared cache; an update:
/// 204 with a row back, 404 without, and the entry gone either way.
#[test]
fn api_jobs_read_and_update_an_item() {
    use super::api::Key;
    let (mut jobs, mut pool) = (Jobs::new(8), ready_pool());
    let api_cache = api::Cache::new(16);
    let (now, key) = (Instant::now(), Key::Item(4));
    let read = DbRoute::Api(Query::Read(key, api_cache.generation(key)));
    let params = [Param::Int4(4)];
    jobs.start_one(read, SELECT_ITEM, &params, ticket(1), &mut pool, now)
        .unwrap();
    let int = |n: i32| n.to_be_bytes().to_vec();
    let mut row = script::bind_complete();
    row.extend(script::raw_row(&[
        Some(&int(4)),
        Some(br#"Vertex "Spindle" 4"#),
        Some(b"toys"),
        Some(&int(30)),
        Some(&int(5)),
        Some(&[1]),
        Some(&int(42)),
        Some(&int(127)),
    ]));
    row.extend(script::command_complete("SELECT 1"));
    row.extend(script::ready());
    let body = concat!(
        r#"{"id":4,"name":"Vertex \"Spindle\" 4","category":"toys","price":30,"#,
        r#""quantity":5,"active":true,"rating":{"score":42,"count":127}}"#
    );
    let finished = answer_with(&mut jobs, &mut pool, &row, &api_cache, None);
    assert_eq!(finished, [(1, Status::Ok, body.to_string())]);
    assert_eq!(api_cache.get(key, now).as_deref(), Some(body.as_bytes()));

    let update = DbRoute::Api(Query::Update(4));
    let params = [
        Param::Text("bench-updated"),
        Param::Int4(250),
        Param::Int4(10),
        Param::Int4(4),
    ];
    let mut returned = script::bind_complete();
    returned.extend(script::data_row(&[4]));
    returned.extend(script::command_complete("UPDATE 1"));
    returned.extend(script::ready());
    let mut none = script::bind_complete();
    none.extend(script::command_complete("UPDATE 0"));
    none.extend(script::ready());
    for (answer_bytes, status) in [(returned, Status::Other(204)), (none, Status::NotFound)] {
        assert!(api_cache.insert(key, api_cache.generation(key), b"{}", now));
        jobs.start_one(update, UPDATE_ITEM, &params, ticket(2), &mut pool, now)
            .unwrap();
        let finished = answer_with(&mut jobs, &mut pool, &answer_bytes, &api_cache, None);
        assert_eq!(finished.len(), 1);
        assert_eq!(finished[0].1, status);
        assert!(api_cache.get(key, now).is_none());
    }
}

/// With Redis: a read asks it first, its nil goes on to PostgreSQL, whose row is a miss
/// written to Redis; a value found there is a hit, PostgreSQL not asked; an update is
/// answered once its DEL's reply comes. Events no job awaits change nothing.
#[test]
fn api_jobs_ask_redis_before_and_after_the_database() {
    use super::api::tests::{connected_redis, resp, sent};
    use super::api::Key;
    use crate::redis::{self, Value};
    let (mut jobs, mut pool) = (Jobs::new(8), ready_pool());
    let mut redis = connected_redis();
    let api_cache = api::Cache::new(16);
    let (now, key) = (Instant::now(), Key::Item(4));
    let read = DbRoute::Api(Query::Read(key, api_cache.generation(key)));
    let get = |redis: &mut Redis, token| redis.get(token, b"item:4", now);
    assert_eq!(
        jobs.await_redis(read, ticket(1), |t| get(&mut redis, t)),
        Ok(true)
    );
    assert_eq!(sent(&mut redis), resp(&["GET", "item:4"]));
    assert!(pool.link_mut(0).unsent().is_empty(), "PostgreSQL waits");
    let nil = redis::Event::Reply(Value::Null);
    assert!(jobs.on_redis_event(0, nil, &mut pool, &api_cache).is_none());
    // Its query went out: a second nil for the job is no longer awaited.
    assert!(!pool.link_mut(0).unsent().is_empty());
    assert!(jobs.on_redis_event(0, nil, &mut pool, &api_cache).is_none());
    let sent_query = pool.link_mut(0).unsent().len();
    pool.link_mut(0).sent(sent_query);
    let int = |n: i32| n.to_be_bytes().to_vec();
    let mut row = script::bind_complete();
    row.extend(script::raw_row(&[
        Some(&int(4)),
        Some(b"Spindle"),
        Some(b"toys"),
        Some(&int(30)),
        Some(&int(5)),
        Some(&[1]),
        Some(&int(42)),
        Some(&int(127)),
    ]));
    row.extend(script::command_complete("SELECT 1"));
    row.extend(script::ready());
    let finished = answer_with(&mut jobs, &mut pool, &row, &api_cache, Some(&mut redis));
    assert_eq!((finished.len(), finished[0].1), (1, Status::Ok));
    let set = resp(&["SET", "item:4", &finished[0].2, "PX", "1000"]);
    assert_eq!(sent(&mut redis), set);

    let other = Key::Item(5);
    let read = DbRoute::Api(Query::Read(other, api_cache.generation(other)));
    assert_eq!(
        jobs.await_redis(read, ticket(2), |t| get(&mut redis, t)),
        Ok(true)
    );
    sent(&mut redis);
    let found = redis::Event::Reply(Value::Bulk(b"{\"id\":5}"));
    let hit = jobs
        .on_redis_event(0, found, &mut pool, &api_cache)
        .map(owned);
    assert_eq!(hit, Some((2, Status::Ok, "{\"id\":5}".to_string())));
    assert!(api_cache.get(other, now).is_some());
    assert!(pool.link_mut(0).unsent().is_empty(), "PostgreSQL not asked");

    let update = DbRoute::Api(Query::Update(4));
    let params = [
        Param::Text("bench-updated"),
        Param::Int4(250),
        Param::Int4(10),
        Param::Int4(4),
    ];
    jobs.start_one(update, UPDATE_ITEM, &params, ticket(3), &mut pool, now)
        .unwrap();
    let mut returned = script::bind_complete();
    returned.extend(script::data_row(&[4]));
    returned.extend(script::command_complete("UPDATE 1"));
    returned.extend(script::ready());
    let finished = answer_with(
        &mut jobs,
        &mut pool,
        &returned,
        &api_cache,
        Some(&mut redis),
    );
    assert!(finished.is_empty(), "the 204 waits for the DEL");
    assert_eq!(sent(&mut redis), resp(&["DEL", "item:4"]));
    assert!(api_cache.get(key, now).is_none());
    let deleted = redis::Event::Reply(Value::Integer(1));
    let answered = jobs
        .on_redis_event(0, deleted, &mut pool, &api_cache)
        .map(owned);
    assert_eq!(answered, Some((3, Status::Other(204), String::new())));
    // A SET's reply, awaited by no job.
    let ok = redis::Event::Reply(Value::Simple(b"OK"));
    assert!(jobs
        .on_redis_event(u64::MAX, ok, &mut pool, &api_cache)
        .is_none());
}

/// On TFB's database the api's statements are unavailable: 503 at once, nothing sent.
#[test]
fn api_jobs_are_refused_at_once_where_their_tables_are_missing() {
    let (mut jobs, mut pool) = (Jobs::new(8), tfb_pool());
    let now = Instant::now();
    let read = DbRoute::Api(Query::Read(api::Key::User(42), 0));
    assert_eq!(
        jobs.start_one(
            read,
            SELECT_USER,
            &[Param::Int4(42)],
            ticket(1),
            &mut pool,
            now
        ),
        Err(Status::ServiceUnavailable)
    );
    assert!(pool.link_mut(0).unsent().is_empty());
}

#[test]
fn a_world_request_is_answered_with_its_row() {
    let (mut jobs, mut pool, mut rng) = (Jobs::new(8), ready_pool(), fastrand::Rng::new());
    let now = Instant::now();
    assert_eq!(
        jobs.start(DbRoute::World, ticket(1), &mut rng, &mut pool, now),
        Ok(())
    );
    let ids = selected_ids(&mut pool);
    assert_eq!(ids.len(), 1);
    let body = format!(r#"{{"id":{},"randomNumber":{}}}"#, ids[0], 1000 + ids[0]);
    assert_eq!(
        answer(&mut jobs, &mut pool, &world_answer(ids[0])),
        [(1, Status::Ok, body)]
    );
}

#[test]
fn a_queries_job_answers_once_its_last_row_is_in() {
    let (mut jobs, mut pool, mut rng) = (Jobs::new(8), ready_pool(), fastrand::Rng::new());
    let now = Instant::now();
    jobs.start(DbRoute::Queries(3), ticket(2), &mut rng, &mut pool, now)
        .unwrap();
    let ids = selected_ids(&mut pool);
    assert_eq!(ids.len(), 3);
    assert_eq!(answer(&mut jobs, &mut pool, &world_answer(ids[0])), []);
    assert_eq!(answer(&mut jobs, &mut pool, &world_answer(ids[1])), []);
    let finished = answer(&mut jobs, &mut pool, &world_answer(ids[2]));
    assert_eq!(finished.len(), 1);
    let (seq, status, body) = &finished[0];
    assert_eq!((*seq, *status), (2, Status::Ok));
    let rows: Vec<serde_json::Value> = serde_json::from_str(body).unwrap();
    let read: Vec<i64> = rows.iter().map(|row| row["id"].as_i64().unwrap()).collect();
    assert_eq!(
        read,
        ids.iter().map(|&id| i64::from(id)).collect::<Vec<_>>()
    );
}

/// Updates read their rows in the order of their sorted ids; a row the job did not ask
/// for is an error of the server's, answered 500.
#[test]
fn updates_take_their_rows_in_order_and_refuse_strangers() {
    let (mut jobs, mut pool, mut rng) = (Jobs::new(8), ready_pool(), fastrand::Rng::new());
    let now = Instant::now();
    jobs.start(DbRoute::Updates(2), ticket(3), &mut rng, &mut pool, now)
        .unwrap();
    let ids = selected_ids(&mut pool);
    assert!(ids.len() == 2 && ids[0] < ids[1], "{ids:?}");
    let mut answers = world_answer(ids[0]);
    answers.extend(world_answer(ids[1]));
    answers.extend(update_answer());
    let finished = answer(&mut jobs, &mut pool, &answers);
    assert_eq!((finished[0].0, finished[0].1), (3, Status::Ok));

    jobs.start(DbRoute::Updates(2), ticket(4), &mut rng, &mut pool, now)
        .unwrap();
    let ids = selected_ids(&mut pool);
    let mut answers = world_answer(ids[1]);
    answers.extend(world_answer(ids[0]));
    answers.extend(update_answer());
    let finished = answer(&mut jobs, &mut pool, &answers);
    assert_eq!(
        (finished[0].0, finished[0].1),
        (4, Status::InternalServerError)
    );
}

/// A query the server fails fails its job (500); a lost connection is a 503.
#[test]
fn failed_queries_and_a_lost_connection_fail_their_jobs() {
    let (mut jobs, mut pool, mut rng) = (Jobs::new(8), ready_pool(), fastrand::Rng::new());
    let now = Instant::now();
    jobs.start(DbRoute::World, ticket(5), &mut rng, &mut pool, now)
        .unwrap();
    selected_ids(&mut pool);
    let mut answers = script::error("ERROR", "42P01", "no world");
    answers.extend(script::ready());
    let finished = answer(&mut jobs, &mut pool, &answers);
    assert_eq!(
        (finished[0].0, finished[0].1),
        (5, Status::InternalServerError)
    );

    jobs.start(DbRoute::Queries(2), ticket(6), &mut rng, &mut pool, now)
        .unwrap();
    selected_ids(&mut pool);
    let finished = answer(&mut jobs, &mut pool, &[]);
    assert_eq!(
        finished,
        [(6, Status::ServiceUnavailable, "Service Unavailable".into())]
    );
}

/// Beyond its limit of jobs under way a thread answers 503 at once, and takes jobs
/// again once one has finished; without a ready connection, 503 too.
#[test]
fn jobs_are_bounded_and_need_a_ready_connection() {
    let (mut jobs, mut pool, mut rng) = (Jobs::new(2), ready_pool(), fastrand::Rng::new());
    let now = Instant::now();
    for seq in 0..2 {
        jobs.start(DbRoute::World, ticket(seq), &mut rng, &mut pool, now)
            .unwrap();
    }
    assert_eq!(
        jobs.start(DbRoute::World, ticket(2), &mut rng, &mut pool, now),
        Err(Status::ServiceUnavailable)
    );
    let ids = selected_ids(&mut pool);
    assert_eq!(answer(&mut jobs, &mut pool, &world_answer(ids[0])).len(), 1);
    assert_eq!(
        jobs.start(DbRoute::World, ticket(3), &mut rng, &mut pool, now),
        Ok(())
    );
    answer(&mut jobs, &mut pool, &[]);
    assert_eq!(
        jobs.start(DbRoute::World, ticket(4), &mut rng, &mut pool, now),
        Err(Status::ServiceUnavailable)
    );
}
