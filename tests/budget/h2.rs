//! What HTTP/2 clients cost a worker (issue #43): answers that wait for a window the client
//! never opens, and request bodies it never finishes, within `--max-buffered` as HTTP/1.1's
//! are. Raw frames over h2c, the growth of the server's resident set at its peak.

use std::time::{Duration, Instant};

use super::{no_database, one_at_a_time};
use crate::common::h2::*;
use crate::common::{cpu_seconds, rss_kib, BigFile, Server};

/// Runs `step` (whether it moved anything) until server `pid` and the step have both been
/// quiet for half a second (under 50 ms of CPU): what the clients sent is all taken in.
/// Returns the server's largest resident set meanwhile, in KiB.
fn peak_until_settled(pid: u32, mut step: impl FnMut() -> bool) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut peak = rss_kib(pid);
    let mut window = (Instant::now(), cpu_seconds(pid), false);
    loop {
        assert!(Instant::now() < deadline, "the server never settled");
        let moved = step();
        window.2 |= moved;
        if !moved {
            std::thread::sleep(Duration::from_millis(5));
        }
        peak = peak.max(rss_kib(pid));
        if window.0.elapsed() >= Duration::from_millis(500) {
            let cpu = cpu_seconds(pid);
            if !window.2 && cpu - window.1 < 0.05 {
                return peak;
            }
            window = (Instant::now(), cpu, false);
        }
    }
}

/// 6 connections each ask for a 300 KiB file on 128 streams with a window of 0
/// (SETTINGS_INITIAL_WINDOW_SIZE) and read nothing: were every answer copied to wait for
/// its window, the server would grow by about 225 MiB (38 MiB a connection). With
/// `--max-buffered 16 MiB` it takes no further request once a connection's waiting answers
/// hold their bound.
fn static_answers_waiting_for_window_cost_no_more_than_the_budget(binary: &str) {
    const BUDGET: usize = 16 * 1024 * 1024;
    const CONNECTIONS: usize = 6;
    const STREAMS: u32 = 128;
    let _alone = one_at_a_time();
    let name = std::path::Path::new(binary).file_name().unwrap();
    let big = BigFile::new(&format!("h2-{}", name.to_str().unwrap()));
    let env = [big.env(), no_database()[0].clone()];
    let budget = BUDGET.to_string();
    // A send timeout far past the test: the answers wait throughout.
    let extra = ["--max-buffered", &budget, "--send-timeout", "600000"];
    let server = Server::start_with_env(binary, &extra, &env);
    assert_eq!(server.connect().get("/static/big.bin").status, 200);
    let rss_before = rss_kib(server.pid());
    let requests: Vec<u8> = (0..STREAMS)
        .flat_map(|n| get_on(2 * n + 1, "/static/big.bin"))
        .collect();
    let clients: Vec<RawClient> = (0..CONNECTIONS)
        .map(|_| {
            let mut client = RawClient::h2c(server.h2c_port, &[(SETTINGS_INITIAL_WINDOW_SIZE, 0)]);
            client.send(&requests);
            client
        })
        .collect();
    let peak = peak_until_settled(server.pid(), || false);
    let grown_kib = peak.saturating_sub(rss_before);
    eprintln!("{CONNECTIONS} connections x {STREAMS} streams: the server grew by {grown_kib} KiB");
    // Two workers' budgets, per connection its bound on waiting answers and one answer
    // past it (1.3 MiB) with the allocator's slack, and 16 MiB.
    let bound_kib = (2 * BUDGET + CONNECTIONS * 3 * 1024 * 1024) / 1024 + 16 * 1024;
    assert!(
        grown_kib < bound_kib as u64,
        "the server grew by {grown_kib} KiB (bound {bound_kib} KiB)"
    );
    drop(clients);
}

/// 60 connections each send 4 POST bodies within the windows given and leave each a byte
/// short: were each connection to take bodies up to its own bound (2 MiB) whatever the
/// worker holds, the server would grow by about 120 MiB. With `--max-buffered 8 MiB` a
/// connection over its share gives no more window, and its client is held by flow control.
fn unfinished_h2_uploads_cost_no_more_than_the_budget(binary: &str) {
    const BUDGET: usize = 8 * 1024 * 1024;
    const CONNECTIONS: usize = 60;
    const LEN: usize = 500_000;
    let _alone = one_at_a_time();
    let budget = BUDGET.to_string();
    let server = Server::start_with_env(binary, &["--max-buffered", &budget], &no_database());
    assert_eq!(server.connect().get("/plaintext").status, 200);
    let rss_before = rss_kib(server.pid());
    let mut clients: Vec<Uploads> = (0..CONNECTIONS)
        .map(|_| Uploads::start(server.h2c_port, &[(LEN, LEN - 1); 4]))
        .collect();
    let peak = peak_until_settled(server.pid(), || {
        clients
            .iter_mut()
            .fold(false, |moved, client| client.pump() | moved)
    });
    let grown_kib = peak.saturating_sub(rss_before);
    let sent: usize = clients.iter().map(Uploads::sent).sum();
    eprintln!("{CONNECTIONS} connections sent {sent} bytes: the server grew by {grown_kib} KiB");
    // Two workers, each its budget and as much again taken by connections before it was
    // spent (a connection's own bound on bodies is 2 MiB); per connection what its window
    // lets in past its share (64 KiB) with the allocator's slack; and 16 MiB.
    let bound_kib = (2 * 2 * BUDGET + CONNECTIONS * 256 * 1024) / 1024 + 16 * 1024;
    assert!(
        grown_kib < bound_kib as u64,
        "the server grew by {grown_kib} KiB (bound {bound_kib} KiB) for bodies of {sent} bytes"
    );
}

crate::test_both_binaries! {
    gnosis, gnosis_uring;
    static_answers_waiting_for_window_cost_no_more_than_the_budget,
    unfinished_h2_uploads_cost_no_more_than_the_budget,
}
