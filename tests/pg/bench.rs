//! Throughput of one connection for single-row selects by random id, pipelined at several
//! depths versus one round trip at a time. Ignored by default (it is a measurement):
//!
//!   scripts/pg.sh start
//!   cargo test --release --test pg -- --ignored --nocapture bench
//!
//! GNOSIS_PG_BENCH_SECS (default 5) sets the time per depth.

use std::cell::Cell;
use std::time::{Duration, Instant};

use gnosis::pg::protocol::INT4_OID;
use gnosis::pg::{Driver, Event, Param, Statement};

static STATEMENTS: &[Statement] = &[Statement {
    name: "world",
    sql: "SELECT id, randomnumber FROM world WHERE id = $1",
    param_types: &[INT4_OID],
}];

/// CPU time (user + system) this thread has used.
fn thread_cpu() -> Duration {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
        usage
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// Keeps `depth` queries in flight for `secs`; returns queries per second and the client's
/// CPU time per query.
fn run(pg: &mut Driver, depth: usize, secs: f64) -> (f64, Duration) {
    let finished = Cell::new(0u64);
    let rows = Cell::new(0u64);
    let mut sink = |_token: u64, event: Event<'_>| match event {
        Event::Row(row) => {
            assert!(row.int4(1).is_ok());
            rows.set(rows.get() + 1);
        }
        Event::Done => finished.set(finished.get() + 1),
        Event::Failed(error) => panic!("query failed: {error}"),
    };
    let mut sent = 0u64;
    let cpu_start = thread_cpu();
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        while sent - finished.get() < depth as u64 {
            let id = fastrand::i32(1..=10_000);
            pg.conn_mut()
                .query(&STATEMENTS[0], &[Param::Int4(id)], sent, now)
                .unwrap();
            sent += 1;
        }
        pg.flush(&mut sink);
        pg.poll_once(Instant::now() + Duration::from_millis(100), &mut sink);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let done = finished.get();
    let cpu_per_query = (thread_cpu() - cpu_start) / done.max(1) as u32;
    // Drain what is still in flight so the next run starts clean.
    crate::common::pg::drive(pg, Duration::from_secs(30), &mut sink, |_| {
        finished.get() == sent
    });
    assert_eq!(rows.get(), sent);
    (done as f64 / elapsed, cpu_per_query)
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn single_row_selects_pipelined_vs_round_trips() {
    let secs: f64 = std::env::var("GNOSIS_PG_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    for (transport, config) in [
        ("tcp", crate::common::pg::tfb_tcp()),
        (
            "unix",
            crate::common::pg::config(&[(
                "PGHOST",
                crate::common::pg::socket_dir().to_str().unwrap(),
            )]),
        ),
    ] {
        let mut pg = crate::common::pg::ready(config, STATEMENTS);
        for depth in [1, 16, 64, 256] {
            let (qps, cpu) = run(&mut pg, depth, secs);
            println!(
                "{transport} depth {depth:>3}: {qps:>7.0} queries/s, client CPU {:.2} us/query",
                cpu.as_secs_f64() * 1e6
            );
        }
    }
}
