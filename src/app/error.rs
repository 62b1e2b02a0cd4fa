//! What can go wrong answering from the database: the client's error, or rows that do not
//! fit what the application asked for.

use std::fmt;

use crate::pg::DbError;

#[derive(Debug)]
pub enum AppError {
    /// The server's error, a lost or timed-out connection, a column read as the wrong type.
    Db(DbError),
    /// A world row whose id is outside 1..=10000.
    WorldIdOutOfRange(i32),
    /// The world table lacks some of the ids 1..=10000.
    WorldTableIncomplete,
    /// A job's answers lack a world row it asked for.
    WorldRowMissing,
    /// A world row the job did not ask for, or not where it asked for it.
    WorldNotAsked(i32),
}

impl From<DbError> for AppError {
    fn from(error: DbError) -> AppError {
        AppError::Db(error)
    }
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppError::Db(error) => write!(f, "{error}"),
            AppError::WorldIdOutOfRange(id) => write!(f, "world id {id} is outside 1..=10000"),
            AppError::WorldTableIncomplete => {
                f.write_str("the world table lacks some of the ids 1..=10000")
            }
            AppError::WorldRowMissing => f.write_str("a world row is missing"),
            AppError::WorldNotAsked(id) => write!(f, "world {id} was not asked for"),
        }
    }
}

impl std::error::Error for AppError {}
