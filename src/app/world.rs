//! The `world` table's rows, random ids, and the in-memory cache of all of them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::Serialize;

use super::error::AppError;
use crate::pg::{BlockingClient, DbError, Statement, Target};

/// TFB's `world` table holds ids 1..=10000, and random numbers are drawn from the same range.
pub const WORLD_ROWS: i32 = 10_000;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct World {
    pub id: i32,
    #[serde(rename = "randomNumber")]
    pub random_number: i32,
}

/// A uniformly random id (or random number): 1..=10000.
pub fn random_id(rng: &mut fastrand::Rng) -> i32 {
    rng.i32(1..=WORLD_ROWS)
}

/// `count` distinct random ids: an update request must not name one row twice, or one bulk
/// UPDATE would keep only one of the two new values.
pub fn distinct_random_ids(rng: &mut fastrand::Rng, count: usize, ids: &mut Vec<i32>) {
    ids.clear();
    while ids.len() < count {
        let id = random_id(rng);
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
}

static ALL_WORLDS: &[Statement] = &[Statement {
    name: "all_worlds",
    sql: "SELECT id, randomnumber FROM world",
    param_types: &[],
}];

/// Every `world` row as read once at start-up, shared read-only by all threads to prime
/// their caches ([`super::cache::Cache`]).
#[derive(Default)]
pub struct WorldSnapshot {
    /// Indexed by id; index 0 is unused.
    worlds: OnceLock<Box<[World]>>,
    /// The first attempt to load has ended, loaded or not.
    tried: AtomicBool,
}

impl WorldSnapshot {
    /// A snapshot that a background thread takes as soon as the database answers, retrying
    /// until it does (unless the database has no `world` table); it is empty until then. `timeout` bounds each attempt.
    pub fn load_in_background(target: Arc<Target>, timeout: Duration) -> Arc<WorldSnapshot> {
        let snapshot = Arc::new(WorldSnapshot::default());
        let filling = snapshot.clone();
        std::thread::Builder::new()
            .name("gnosis-cache".into())
            .spawn(move || filling.load_until_done(&target, timeout))
            .expect("spawning the cache loader");
        snapshot
    }

    fn load_until_done(&self, target: &Arc<Target>, timeout: Duration) {
        let mut delay = Duration::from_millis(50);
        let mut reported = false;
        loop {
            let attempt = Self::read_all(target, timeout);
            self.tried.store(true, Ordering::Release);
            match attempt {
                Ok(worlds) => {
                    crate::log!("loaded {} world rows for the cache", worlds.len() - 1);
                    let _ = self.worlds.set(worlds);
                    return;
                }
                Err(AppError::Db(DbError::NotPrepared(_))) => {
                    // The database could not prepare the statement: no `world` table (an
                    // HttpArena database). Asking again every few seconds would only fill
                    // its log; cached-queries answers 503 as /db does there.
                    crate::log!("no world table in this database: the cache stays empty");
                    return;
                }
                Err(err) if !reported => {
                    crate::log!("cannot load the world rows for the cache yet ({err}); retrying");
                    reported = true;
                }
                Err(_) => {}
            }
            std::thread::sleep(delay);
            delay = (delay * 2).min(Duration::from_secs(2));
        }
    }

    fn read_all(target: &Arc<Target>, timeout: Duration) -> Result<Box<[World]>, AppError> {
        // One attempt: the caller waits for the first and retries itself.
        let mut client = BlockingClient::connect_once(target.clone(), ALL_WORLDS, timeout)?;
        let mut worlds = vec![World::default(); WORLD_ROWS as usize + 1];
        let mut outside = None;
        client.query(&ALL_WORLDS[0], &[], |row| {
            let (id, random_number) = (row.int4(0)?, row.int4(1)?);
            let slot = usize::try_from(id)
                .ok()
                .filter(|&index| index > 0)
                .and_then(|index| worlds.get_mut(index));
            match slot {
                Some(slot) => *slot = World { id, random_number },
                None => outside = outside.or(Some(id)),
            }
            Ok(())
        })?;
        if let Some(id) = outside {
            return Err(AppError::WorldIdOutOfRange(id));
        }
        if worlds[1..].iter().any(|world| world.id == 0) {
            return Err(AppError::WorldTableIncomplete);
        }
        Ok(worlds.into_boxed_slice())
    }

    /// Waits until the first attempt to load has ended (loaded, or the database did not
    /// answer), or `timeout` has passed; returns whether the cache is loaded.
    pub fn wait_for_first_attempt(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        while !self.tried.load(Ordering::Acquire) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.worlds.get().is_some()
    }

    /// Every row (index 0 unused: index i holds id i), once loaded.
    pub fn rows(&self) -> Option<&[World]> {
        self.worlds.get().map(|worlds| &worlds[1..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_cover_the_range_and_stay_in_it() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200_000 {
            let id = random_id(&mut rng);
            assert!((1..=WORLD_ROWS).contains(&id));
            seen.insert(id);
        }
        assert_eq!(seen.len(), WORLD_ROWS as usize);
    }

    #[test]
    fn distinct_ids_are_distinct() {
        let mut rng = fastrand::Rng::with_seed(1);
        let mut ids = Vec::new();
        distinct_random_ids(&mut rng, 500, &mut ids);
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!((ids.len(), unique.len()), (500, 500));
    }

    #[test]
    fn serializes_with_tfb_field_names() {
        let json = serde_json::to_string(&World {
            id: 3217,
            random_number: 2149,
        })
        .unwrap();
        assert_eq!(json, r#"{"id":3217,"randomNumber":2149}"#);
    }
}
