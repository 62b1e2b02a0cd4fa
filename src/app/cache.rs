//! The cached-queries test's cache: per thread, a `quick_cache` of World rows by id (its
//! S3-FIFO policy decides what to evict when full). Primed with every row once the start-up
//! snapshot is in, and read through: ids it misses are read from the database by the
//! thread's pipeline and then kept.

use std::sync::Arc;

use super::world::{World, WorldSnapshot, WORLD_ROWS};

pub struct Cache {
    worlds: quick_cache::unsync::Cache<i32, World>,
    snapshot: Arc<WorldSnapshot>,
    primed: bool,
}

impl Cache {
    /// Room for the whole table: after priming, every id is a hit.
    pub fn new(snapshot: Arc<WorldSnapshot>) -> Cache {
        Cache {
            worlds: quick_cache::unsync::Cache::new(WORLD_ROWS as usize),
            snapshot,
            primed: false,
        }
    }

    /// Fills the cache from the start-up snapshot, once it has been taken.
    fn prime(&mut self) {
        if let Some(rows) = self.snapshot.rows() {
            for world in rows {
                self.worlds.insert(world.id, *world);
            }
            self.primed = true;
        }
    }

    /// Appends the cached row of each id to `found` and the ids it does not hold to
    /// `missing`.
    pub fn lookup(
        &mut self,
        ids: impl Iterator<Item = i32>,
        found: &mut Vec<World>,
        missing: &mut Vec<i32>,
    ) {
        if !self.primed {
            self.prime();
        }
        for id in ids {
            match self.worlds.get(&id) {
                Some(world) => found.push(*world),
                None => missing.push(id),
            }
        }
    }

    /// Keeps a row read from the database on a miss.
    pub fn insert(&mut self, world: World) {
        self.worlds.insert(world.id, world);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misses_until_filled_then_hits() {
        let mut cache = Cache::new(Arc::new(WorldSnapshot::default()));
        let (mut found, mut missing) = (Vec::new(), Vec::new());
        cache.lookup([7, 8].into_iter(), &mut found, &mut missing);
        assert_eq!((found.len(), missing.as_slice()), (0, &[7, 8][..]));
        cache.insert(World {
            id: 7,
            random_number: 70,
        });
        missing.clear();
        cache.lookup([7, 8, 7].into_iter(), &mut found, &mut missing);
        assert_eq!(
            found,
            vec![
                World {
                    id: 7,
                    random_number: 70
                };
                2
            ]
        );
        assert_eq!(missing, vec![8]);
    }

    #[test]
    fn holds_the_whole_table() {
        let mut cache = Cache::new(Arc::new(WorldSnapshot::default()));
        for id in 1..=WORLD_ROWS {
            cache.insert(World {
                id,
                random_number: id,
            });
        }
        let (mut found, mut missing) = (Vec::new(), Vec::new());
        cache.lookup(1..=WORLD_ROWS, &mut found, &mut missing);
        assert_eq!((found.len(), missing.len()), (WORLD_ROWS as usize, 0));
    }
}
