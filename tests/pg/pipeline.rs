//! The pipelined connection against the private cluster (`scripts/pg.sh start`): many
//! queries in flight, answers in order, a failing query failing alone, a killed backend
//! failing what it held and reconnecting, and the queue bound.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use gnosis::pg::protocol::{INT4_ARRAY_OID, INT4_OID};
use gnosis::pg::{BlockingClient, DbError, Driver, Event, Param, QueryError, Statement};

static WORLD: &Statement = &STATEMENTS[0];
static DIVIDE: &Statement = &STATEMENTS[1];
static SLOW: &Statement = &STATEMENTS[2];
static BACKEND_PID: &Statement = &STATEMENTS[3];
static ALL_WORLDS: &Statement = &STATEMENTS[4];
static TERMINATE: &Statement = &STATEMENTS[5];
static WORLD_REVERSED: &Statement = &STATEMENTS[6];
static STATS: &Statement = &STATEMENTS[7];
static ARRAY_SUM: &Statement = &STATEMENTS[8];
static BULK_UPDATE: &Statement = &STATEMENTS[9];

static STATEMENTS: &[Statement] = &[
    Statement {
        name: "world",
        sql: "SELECT id, randomnumber FROM world WHERE id = $1",
        param_types: &[INT4_OID],
    },
    Statement {
        name: "divide",
        sql: "SELECT 1000 / $1::int4",
        param_types: &[INT4_OID],
    },
    Statement {
        name: "slow",
        sql: "SELECT $1::int4 FROM pg_sleep(0.2)",
        param_types: &[INT4_OID],
    },
    Statement {
        name: "backend_pid",
        sql: "SELECT pg_backend_pid()",
        param_types: &[],
    },
    Statement {
        name: "all_worlds",
        sql: "SELECT id, randomnumber FROM world",
        param_types: &[],
    },
    Statement {
        name: "terminate",
        sql: "SELECT pg_terminate_backend($1)::int4",
        param_types: &[INT4_OID],
    },
    // Its own pg_stat_statements entry: no other test runs this shape.
    Statement {
        name: "world_reversed",
        sql: "SELECT randomnumber, id FROM world WHERE id = $1",
        param_types: &[INT4_OID],
    },
    Statement {
        name: "stats",
        sql: "SELECT coalesce(sum(calls), 0)::int4, coalesce(sum(rows), 0)::int4 \
              FROM pg_stat_statements \
              WHERE query = 'SELECT randomnumber, id FROM world WHERE id = $1'",
        param_types: &[],
    },
    Statement {
        name: "array_sum",
        sql: "SELECT sum(x)::int4, count(*)::int4, min(x) FROM unnest($1::int4[]) AS x",
        param_types: &[INT4_ARRAY_OID],
    },
    // The shape of the /updates bulk write: ids and new values as two int4 arrays.
    Statement {
        name: "bulk_update",
        sql: "UPDATE world SET randomnumber = new.randomnumber \
              FROM unnest($1::int4[], $2::int4[]) AS new(id, randomnumber) \
              WHERE world.id = new.id RETURNING world.id, world.randomnumber",
        param_types: &[INT4_ARRAY_OID, INT4_ARRAY_OID],
    },
];

/// What one query came to: its rows' int4 columns, then Ok or the error.
#[derive(Debug, Default)]
struct Outcome {
    rows: Vec<Vec<i32>>,
    result: Option<Result<(), DbError>>,
}

/// Records every event per token and the order in which queries finished.
#[derive(Default)]
struct Recorder {
    outcomes: HashMap<u64, Outcome>,
    finished: Vec<u64>,
}

impl Recorder {
    fn record(&mut self, token: u64, event: Event<'_>) {
        let outcome = self.outcomes.entry(token).or_default();
        assert!(outcome.result.is_none(), "event after the end of {token}");
        match event {
            Event::Row(row) => outcome
                .rows
                .push((0..row.len()).map(|i| row.int4(i).unwrap()).collect()),
            Event::Done => {
                outcome.result = Some(Ok(()));
                self.finished.push(token);
            }
            Event::Failed(error) => {
                outcome.result = Some(Err(error.clone()));
                self.finished.push(token);
            }
        }
    }
}

/// Drives `pg` until `count` queries have finished.
fn drive_until_finished(pg: &mut Driver, recorder: &RefCell<Recorder>, count: usize) {
    crate::common::pg::drive(
        pg,
        Duration::from_secs(60),
        &mut |token, event| recorder.borrow_mut().record(token, event),
        |_| recorder.borrow().finished.len() >= count,
    );
}

fn ready_conn() -> Driver {
    crate::common::pg::ready(crate::common::pg::tfb_tcp(), STATEMENTS)
}

fn blocking() -> BlockingClient {
    BlockingClient::connect(
        crate::common::pg::tfb_tcp(),
        STATEMENTS,
        Duration::from_secs(10),
    )
    .unwrap()
}

fn world_table() -> HashMap<i32, i32> {
    let mut table = HashMap::new();
    blocking()
        .query(ALL_WORLDS, &[], |row| {
            table.insert(row.int4(0)?, row.int4(1)?);
            Ok(())
        })
        .unwrap();
    assert_eq!(table.len(), 10_000);
    table
}

#[test]
fn ten_thousand_pipelined_queries_come_back_right_and_in_order() {
    let before = world_table();
    let mut pg = ready_conn();
    let ids: Vec<i32> = (0..10_000).map(|_| fastrand::i32(1..=10_000)).collect();
    let recorder = RefCell::new(Recorder::default());
    // Hand queries out in bursts with a flush after each, as the event loop does.
    for (burst, chunk) in ids.chunks(500).enumerate() {
        for (i, &id) in chunk.iter().enumerate() {
            let token = (burst * 500 + i) as u64;
            pg.conn_mut()
                .query(WORLD, &[Param::Int4(id)], token, Instant::now())
                .unwrap();
        }
        pg.flush(&mut |token, event| recorder.borrow_mut().record(token, event));
    }
    drive_until_finished(&mut pg, &recorder, ids.len());
    // A test elsewhere updating world meanwhile may change a row once: either value is right.
    let after = world_table();
    let recorder = recorder.into_inner();
    let in_order: Vec<u64> = (0..ids.len() as u64).collect();
    assert_eq!(recorder.finished, in_order);
    for (token, &id) in ids.iter().enumerate() {
        let outcome = &recorder.outcomes[&(token as u64)];
        assert!(matches!(outcome.result, Some(Ok(()))), "{outcome:?}");
        let [row] = &outcome.rows[..] else {
            panic!("query {token}: {outcome:?}")
        };
        assert_eq!(row[0], id, "query {token} answered for another id");
        assert!(
            row[1] == before[&id] || row[1] == after[&id],
            "query {token}: id {id} has randomnumber {} in the table, {} here",
            before[&id],
            row[1]
        );
    }
}

#[test]
fn a_failing_query_fails_alone() {
    let mut pg = ready_conn();
    let divisors: Vec<i32> = (0..1_000)
        .map(|i| if i % 97 == 13 { 0 } else { i % 50 + 1 })
        .collect();
    let recorder = RefCell::new(Recorder::default());
    for (token, &d) in divisors.iter().enumerate() {
        pg.conn_mut()
            .query(DIVIDE, &[Param::Int4(d)], token as u64, Instant::now())
            .unwrap();
    }
    drive_until_finished(&mut pg, &recorder, divisors.len());
    let recorder = recorder.into_inner();
    assert_eq!(
        recorder.finished,
        (0..divisors.len() as u64).collect::<Vec<_>>()
    );
    for (token, &d) in divisors.iter().enumerate() {
        let outcome = &recorder.outcomes[&(token as u64)];
        if d == 0 {
            match &outcome.result {
                Some(Err(DbError::Server { code, message, .. })) => {
                    assert_eq!(code, "22012");
                    assert_eq!(message, "division by zero");
                }
                other => panic!("query {token}: expected division by zero, got {other:?}"),
            }
            assert!(outcome.rows.is_empty());
        } else {
            assert!(matches!(outcome.result, Some(Ok(()))), "{outcome:?}");
            assert_eq!(outcome.rows, vec![vec![1000 / d]]);
        }
    }
    assert!(pg.conn().is_ready());
}

#[test]
fn a_terminated_backend_fails_its_queries_then_reconnects() {
    let mut pg = ready_conn();
    let generation = pg.conn().generation();
    let recorder = RefCell::new(Recorder::default());
    pg.conn_mut()
        .query(BACKEND_PID, &[], 0, Instant::now())
        .unwrap();
    drive_until_finished(&mut pg, &recorder, 1);
    let pid = recorder.borrow().outcomes[&0].rows[0][0];

    // Ten queries of 0.2 s each: the backend is killed while they are in flight.
    for token in 1..=10 {
        pg.conn_mut()
            .query(SLOW, &[Param::Int4(token as i32)], token, Instant::now())
            .unwrap();
    }
    drive_until_finished(&mut pg, &recorder, 2);
    let mut killed = false;
    blocking()
        .query(TERMINATE, &[Param::Int4(pid)], |row| {
            killed = row.int4(0)? == 1;
            Ok(())
        })
        .unwrap();
    assert!(killed);
    drive_until_finished(&mut pg, &recorder, 11);

    let recorder = recorder.into_inner();
    assert_eq!(recorder.finished, (0..=10).collect::<Vec<u64>>());
    let lost: Vec<u64> = (1..=10)
        .filter(|t| {
            matches!(
                recorder.outcomes[t].result,
                Some(Err(DbError::ConnectionLost))
            )
        })
        .collect();
    assert!(!lost.is_empty(), "no query failed");
    // Those before the kill succeeded, every one after it was failed.
    let first_lost = lost[0];
    assert_eq!(lost, (first_lost..=10).collect::<Vec<u64>>());
    for token in 1..first_lost {
        assert_eq!(recorder.outcomes[&token].rows, vec![vec![token as i32]]);
    }

    // Not ready until the new connection has started up; then it works again.
    assert_eq!(
        pg.conn_mut()
            .query(WORLD, &[Param::Int4(1)], 99, Instant::now()),
        Err(QueryError::NotConnected)
    );
    crate::common::pg::drive(
        &mut pg,
        Duration::from_secs(10),
        &mut crate::common::pg::ignore_events,
        |c| c.is_ready(),
    );
    assert_ne!(pg.conn().generation(), generation);
    let recorder = RefCell::new(Recorder::default());
    pg.conn_mut()
        .query(BACKEND_PID, &[], 100, Instant::now())
        .unwrap();
    drive_until_finished(&mut pg, &recorder, 1);
    let new_pid = recorder.borrow().outcomes[&100].rows[0][0];
    assert_ne!(new_pid, pid);
}

#[test]
fn the_queue_is_bounded() {
    let mut pg = ready_conn();
    let max = gnosis::pg::Options::default().max_queued;
    for token in 0..max as u64 {
        pg.conn_mut()
            .query(WORLD, &[Param::Int4(1)], token, Instant::now())
            .unwrap();
    }
    assert_eq!(
        pg.conn_mut()
            .query(WORLD, &[Param::Int4(1)], max as u64, Instant::now()),
        Err(QueryError::QueueFull)
    );
    let recorder = RefCell::new(Recorder::default());
    drive_until_finished(&mut pg, &recorder, max);
    assert!(recorder
        .borrow()
        .outcomes
        .values()
        .all(|o| matches!(o.result, Some(Ok(())))));
    pg.conn_mut()
        .query(WORLD, &[Param::Int4(1)], 0, Instant::now())
        .unwrap();
}

/// What TFB's verifier checks: each pipelined query is one statement in pg_stat_statements
/// with its one row (the server counts an Execute per Sync, not a batch).
#[test]
fn pg_stat_statements_counts_each_pipelined_query() {
    let mut client = blocking();
    let mut stats = || {
        let mut counts = (0, 0);
        client
            .query(STATS, &[], |row| {
                counts = (row.int4(0)?, row.int4(1)?);
                Ok(())
            })
            .unwrap();
        counts
    };
    let before = stats();
    let mut pg = ready_conn();
    let recorder = RefCell::new(Recorder::default());
    for token in 0..512 {
        let id = fastrand::i32(1..=10_000);
        pg.conn_mut()
            .query(WORLD_REVERSED, &[Param::Int4(id)], token, Instant::now())
            .unwrap();
    }
    drive_until_finished(&mut pg, &recorder, 512);
    let after = stats();
    assert_eq!((after.0 - before.0, after.1 - before.1), (512, 512));
}

#[test]
fn int4_arrays_are_sent_binary() {
    let mut pg = ready_conn();
    let recorder = RefCell::new(Recorder::default());
    pg.conn_mut()
        .query(
            ARRAY_SUM,
            &[Param::Int4Array(&[3, -1, 1_000_000, 0])],
            0,
            Instant::now(),
        )
        .unwrap();
    pg.conn_mut()
        .query(ARRAY_SUM, &[Param::Int4Array(&[7])], 1, Instant::now())
        .unwrap();
    // Rows written back with the values they already hold: other tests only read world and
    // compare against a snapshot, which this leaves intact.
    let table = world_table();
    let mut ids: Vec<i32> = (0..20).map(|_| fastrand::i32(1..=10_000)).collect();
    ids.sort_unstable();
    ids.dedup();
    let values: Vec<i32> = ids.iter().map(|id| table[id]).collect();
    pg.conn_mut()
        .query(
            BULK_UPDATE,
            &[Param::Int4Array(&ids), Param::Int4Array(&values)],
            2,
            Instant::now(),
        )
        .unwrap();
    drive_until_finished(&mut pg, &recorder, 3);
    let recorder = recorder.into_inner();
    assert_eq!(recorder.outcomes[&0].rows, vec![vec![1_000_002, 4, -1]]);
    assert_eq!(recorder.outcomes[&1].rows, vec![vec![7, 1, 7]]);
    let mut updated = recorder.outcomes[&2].rows.clone();
    updated.sort_unstable();
    let expected: Vec<Vec<i32>> = ids.iter().zip(&values).map(|(&i, &v)| vec![i, v]).collect();
    assert_eq!(updated, expected);
}
