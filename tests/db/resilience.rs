//! Both servers under a database that goes away: restarted, or its backends killed, while clients
//! keep asking. The server must neither crash nor hang, answer what needs no database
//! throughout, fail database requests fast while it is down, recover within two seconds of the
//! database accepting connections again, and leak neither descriptors nor memory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::common::cluster::Cluster;
use crate::common::{rss_kib, Client, Server};

const DATABASE_ROUTES: [&str; 3] = ["/db", "/fortunes", "/updates?queries=5"];
const OTHER_ROUTES: [&str; 2] = ["/plaintext", "/json"];

struct Sample {
    target: &'static str,
    sent: Instant,
    took: Duration,
    /// `None`: the connection broke.
    status: Option<u16>,
}

/// Clients that ask for their route in a loop until stopped, each on one keep-alive
/// connection, recording every answer.
struct Load {
    stop: Arc<AtomicBool>,
    clients: Vec<JoinHandle<Vec<Sample>>>,
}

impl Load {
    fn start(port: u16) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let clients = DATABASE_ROUTES
            .iter()
            .chain(&OTHER_ROUTES)
            .flat_map(|target| [*target, *target])
            .map(|target| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut client = Client::connect(port);
                    let mut samples = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let sent = Instant::now();
                        let status = client.try_get(target).ok().map(|response| response.status);
                        samples.push(Sample {
                            target,
                            sent,
                            took: sent.elapsed(),
                            status,
                        });
                        if status.is_none() {
                            client = Client::connect(port);
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    samples
                })
            })
            .collect();
        Load { stop, clients }
    }

    fn finish(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.clients
            .into_iter()
            .flat_map(|client| client.join().unwrap())
            .collect()
    }
}

/// Runs load, breaks the database with `outage` (which returns once the database accepts
/// connections again), and checks everything the module comment promises.
fn survives(binary: &str, name: &str, outage: impl FnOnce(&Cluster)) {
    let cluster = Cluster::new(name);
    cluster.start();
    let mut server = Server::start_with_env(binary, &[], &cluster.env());
    server.wait_until_ok(
        &[&DATABASE_ROUTES[..], &["/cached-queries"]].concat(),
        Duration::from_secs(20),
    );

    // Warm up, so that buffers and job tables have their working size before measuring.
    Load::start(server.port).finish_after(Duration::from_secs(1));
    let (fds_before, rss_before) = (server.held_descriptors(), rss_kib(server.pid()));

    let load = Load::start(server.port);
    std::thread::sleep(Duration::from_millis(500));
    outage(&cluster);
    let accepting = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let samples = load.finish();

    assert!(server.is_running(), "gnosis died");
    let broken: Vec<_> = samples
        .iter()
        .filter(|s| s.status.is_none())
        .map(|s| s.target)
        .collect();
    assert!(broken.is_empty(), "connections broke: {broken:?}");
    for sample in samples.iter().filter(|s| OTHER_ROUTES.contains(&s.target)) {
        assert_eq!(
            sample.status,
            Some(200),
            "{} failed during the outage",
            sample.target
        );
    }
    let failed: Vec<_> = samples.iter().filter(|s| s.status != Some(200)).collect();
    assert!(
        !failed.is_empty(),
        "the outage never showed: the test did not test anything"
    );
    for sample in &failed {
        let status = sample.status.unwrap();
        assert!(
            (500..600).contains(&status),
            "{} answered {status}",
            sample.target
        );
        // Well under the 5 s query timeout: it failed with its connection, not by waiting
        // for an answer (the bound leaves room for a loaded machine's scheduling).
        assert!(
            sample.took < Duration::from_millis(2500),
            "{} took {:?} to fail",
            sample.target,
            sample.took
        );
        assert!(
            sample.sent < accepting + Duration::from_secs(2),
            "{} still failed {:?} after the database was back",
            sample.target,
            sample.sent - accepting
        );
    }
    for target in DATABASE_ROUTES {
        let recovered = samples
            .iter()
            .any(|s| s.target == target && s.status == Some(200) && s.sent > accepting);
        assert!(recovered, "{target} did not recover");
    }

    std::thread::sleep(Duration::from_millis(500));
    let (fds_after, rss_after) = (server.held_descriptors(), rss_kib(server.pid()));
    assert!(
        fds_after <= fds_before + 2,
        "descriptors: {fds_before} before, {fds_after} after"
    );
    assert!(
        rss_after < rss_before + 16 * 1024,
        "RSS: {rss_before} KiB before, {rss_after} KiB after"
    );
}

impl Load {
    fn finish_after(self, duration: Duration) -> Vec<Sample> {
        std::thread::sleep(duration);
        self.finish()
    }
}

fn survives_a_database_restart_under_load(binary: &str) {
    survives(binary, "restart", |cluster| cluster.restart());
}

fn survives_its_backends_being_killed_under_load(binary: &str) {
    survives(binary, "terminate", |cluster| {
        cluster.psql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE usename = 'benchmarkdbuser' AND pid <> pg_backend_pid()",
        )
    });
}

test_both_binaries! {
    gnosis, gnosis_uring;
    survives_a_database_restart_under_load,
    survives_its_backends_being_killed_under_load,
}
