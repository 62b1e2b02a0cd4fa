//! The hot path allocates nothing: once the buffers have grown, queueing queries, flushing,
//! reading and delivering rows do not touch the heap. Runs against `scripts/pg.sh start`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use gnosis::pg::protocol::INT4_OID;
use gnosis::pg::{Driver, Event, Param, Statement};

/// Counts this thread's allocations (thread-local, so the test harness's own threads do not
/// count).
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

static STATEMENTS: &[Statement] = &[
    Statement {
        name: "world",
        sql: "SELECT id, randomnumber FROM world WHERE id = $1",
        param_types: &[INT4_OID],
    },
    Statement {
        name: "fortunes",
        sql: "SELECT id, message FROM fortune",
        param_types: &[],
    },
];

/// Runs `rounds` queries of each statement pipelined; returns the allocations made.
fn pipeline(pg: &mut Driver, rounds: u64) -> u64 {
    let finished = Cell::new(0u64);
    let checksum = Cell::new(0i64);
    // Even tokens are world queries, odd ones fortunes.
    let mut sink = |token: u64, event: Event<'_>| match event {
        Event::Row(row) => {
            let value = row.int4(0).unwrap() as i64;
            let extra = if token.is_multiple_of(2) {
                row.int4(1).unwrap() as i64
            } else {
                row.text(1).unwrap().len() as i64
            };
            checksum.set(checksum.get() + value + extra);
        }
        Event::Done => finished.set(finished.get() + 1),
        Event::Failed(error) => panic!("{error}"),
    };
    let before = ALLOCATIONS.with(Cell::get);
    for round in 0..rounds {
        let id = (round * 7919 % 10_000 + 1) as i32;
        let now = Instant::now();
        pg.conn_mut()
            .query(&STATEMENTS[0], &[Param::Int4(id)], 2 * round, now)
            .unwrap();
        pg.conn_mut()
            .query(&STATEMENTS[1], &[], 2 * round + 1, now)
            .unwrap();
    }
    crate::common::pg::drive(pg, Duration::from_secs(30), &mut sink, |_| {
        finished.get() == 2 * rounds
    });
    let allocations = ALLOCATIONS.with(Cell::get) - before;
    assert!(checksum.get() > 0);
    allocations
}

#[test]
fn queries_and_rows_do_not_allocate() {
    let mut pg = crate::common::pg::ready(crate::common::pg::tfb_tcp(), STATEMENTS);
    // Warm-up grows the buffers to their working size: two rounds, as the connection and
    // the driver trade two output buffers (`take_output` swaps) and each grows once.
    pipeline(&mut pg, 2_000);
    pipeline(&mut pg, 2_000);
    for _ in 0..3 {
        assert_eq!(pipeline(&mut pg, 2_000), 0);
    }
}
