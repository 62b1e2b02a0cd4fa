//! What a connection does about failing: the pause before the next attempt (a jittered,
//! capped backoff), and the few lines it logs about an outage, whatever its length.

use std::time::{Duration, Instant};

use crate::pg::error::DbError;
use crate::pg::target::Target;

/// The first pause after a failure; it doubles with every failure after that.
pub const BACKOFF_MIN: Duration = Duration::from_millis(50);
/// Low enough that a restarted database is back in use within about a second of accepting
/// connections; a refused connect costs next to nothing.
pub const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// After an error that retrying does not fix (a wrong password), retries need not be fast.
pub const BACKOFF_MAX_PERMANENT: Duration = Duration::from_secs(10);
/// Each pause is the backoff times a random factor in 1 +- this, so that the connections of
/// many threads do not all reconnect in the same instant.
pub const BACKOFF_JITTER: f64 = 0.2;
/// `wanted` brings the next attempt forward, but never closer than this to the last one.
pub const MIN_ATTEMPT_GAP: Duration = Duration::from_millis(100);
/// While a failure lasts, a line that sums it up at most this often.
const FAILURE_SUMMARY_EVERY: Duration = Duration::from_secs(60);
/// Distinct reasons of failure logged in one outage; more are only counted.
pub(super) const MAX_REASONS_LOGGED: usize = 8;

/// What makes two failures "the same" for the log: the SQLSTATE, the OS error, else the
/// error's text.
pub(super) fn failure_kind(error: &DbError) -> String {
    match error {
        DbError::Server { code, .. } => format!("server {code}"),
        DbError::Io(e) => match e.raw_os_error() {
            Some(code) => format!("os {code}"),
            None => format!("io {:?}", e.kind()),
        },
        other => other.to_string(),
    }
}

/// The pause before the next attempt: from `BACKOFF_MIN`, doubling with each failure up to
/// `BACKOFF_MAX` (or `BACKOFF_MAX_PERMANENT` after a permanent error), with jitter.
pub(super) struct Backoff {
    base: Duration,
    rng: fastrand::Rng,
}

impl Backoff {
    pub fn new() -> Backoff {
        Backoff {
            base: BACKOFF_MIN,
            rng: fastrand::Rng::new(),
        }
    }

    pub fn next(&mut self, permanent: bool) -> Duration {
        let factor = 1.0 - BACKOFF_JITTER + 2.0 * BACKOFF_JITTER * self.rng.f64();
        let pause = self.base.mul_f64(factor);
        let cap = if permanent {
            BACKOFF_MAX_PERMANENT
        } else {
            BACKOFF_MAX
        };
        self.base = (self.base * 2).min(cap);
        pause
    }

    pub fn reset(&mut self) {
        self.base = BACKOFF_MIN;
    }
}

/// What a connection logs about its failures: one line when an outage begins, one per new
/// kind of failure (a few at most), a summary at most once a minute while it lasts, and one
/// when a connection has proven itself again. Never a line per attempt.
#[derive(Default)]
pub(super) struct FailureLog {
    outage: Option<Outage>,
}

struct Outage {
    began: Instant,
    failed_attempts: u64,
    last_line: Instant,
    kinds_logged: Vec<String>,
}

impl FailureLog {
    /// A failure: the line to log, if any. `lost` says a proven connection went away.
    pub fn failed(
        &mut self,
        target: &Target,
        kind: String,
        reason: &str,
        lost: bool,
        now: Instant,
    ) -> Option<String> {
        let Some(outage) = &mut self.outage else {
            self.outage = Some(Outage {
                began: now,
                failed_attempts: u64::from(!lost),
                last_line: now,
                kinds_logged: vec![kind],
            });
            return Some(match lost {
                true => format!("PostgreSQL connection to {target} lost ({reason}); reconnecting"),
                false => {
                    format!("PostgreSQL connection to {target} failed ({reason}); retrying")
                }
            });
        };
        outage.failed_attempts += 1;
        let attempts = outage.failed_attempts;
        if !outage.kinds_logged.contains(&kind) && outage.kinds_logged.len() < MAX_REASONS_LOGGED {
            outage.kinds_logged.push(kind);
            outage.last_line = now;
            return Some(format!(
                "PostgreSQL connection to {target} failed ({reason}); \
                 {attempts} failed attempts so far, retrying"
            ));
        }
        if now.saturating_duration_since(outage.last_line) >= FAILURE_SUMMARY_EVERY {
            let line = format!(
                "PostgreSQL connection to {target} still failing ({reason}): \
                 {attempts} failed attempts in {} s",
                now.saturating_duration_since(outage.began).as_secs()
            );
            outage.last_line = now;
            return Some(line);
        }
        None
    }

    /// A connection answered a query: the line that ends an outage, if there was one.
    pub fn recovered(&mut self, target: &Target, now: Instant) -> Option<String> {
        let outage = self.outage.take()?;
        Some(format!(
            "PostgreSQL connection to {target} re-established after {} failed attempts \
             ({} ms)",
            outage.failed_attempts,
            now.saturating_duration_since(outage.began).as_millis()
        ))
    }
}
