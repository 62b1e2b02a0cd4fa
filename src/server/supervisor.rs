//! The worker threads of either backend, and the one rule for them: the first that stops,
//! by an error or a panic, ends the server with its cause; once all have finished their
//! drain (the server was told to stop), it ends well. (Joining them in order would wait on
//! the first while a later one had died unseen, with its listener and connections.)

use std::any::Any;
use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{mpsc, Arc};

/// What a worker tells the supervisor.
enum Report {
    /// Set up and serving, as described.
    Ready(String),
    /// Drained (`Ok`), or failed.
    Stopped(io::Result<()>),
}

/// How a worker says it is set up (see [`supervise`]).
pub(super) struct Started(mpsc::Sender<Report>);

impl Started {
    /// The worker is set up; once every worker has said so, the description is logged
    /// once, after their number ("2 rings ready (...)").
    pub fn ready(&self, description: String) {
        let _ = self.0.send(Report::Ready(description));
    }
}

/// Runs `work` on a thread named `name-i` for each of `inputs`, and returns the error of
/// the first worker that fails, or `Ok` once every worker has drained (a worker serves
/// until it cannot, or until its drain is over). A panic is an error that names the panic.
pub(super) fn supervise<T, W>(name: &str, inputs: Vec<T>, work: W) -> io::Result<()>
where
    T: Send + 'static,
    W: Fn(T, &Started) -> io::Result<()> + Send + Sync + 'static,
{
    let threads = inputs.len();
    let work = Arc::new(work);
    let (reports, reported) = mpsc::channel();
    for (i, input) in inputs.into_iter().enumerate() {
        let (work, reports) = (work.clone(), reports.clone());
        let thread = format!("{name}-{i}");
        std::thread::Builder::new()
            .name(thread.clone())
            .spawn(move || {
                let started = Started(reports.clone());
                let stopped = panic::catch_unwind(AssertUnwindSafe(|| work(input, &started)))
                    .unwrap_or_else(|panic| {
                        Err(io::Error::other(format!(
                            "worker {thread} panicked: {}",
                            panic_message(&*panic)
                        )))
                    });
                let _ = reports.send(Report::Stopped(stopped));
            })?;
    }
    drop(reports);
    let (mut ready, mut drained) = (0, 0);
    loop {
        match reported.recv() {
            Ok(Report::Ready(description)) => {
                ready += 1;
                if ready == threads {
                    crate::log!("{threads} {description}");
                }
            }
            Ok(Report::Stopped(Err(err))) => return Err(err),
            Ok(Report::Stopped(Ok(()))) => {
                drained += 1;
                if drained == threads {
                    return Ok(());
                }
            }
            Err(_) => return Err(io::Error::other("the workers ended without a word")),
        }
    }
}

fn panic_message(panic: &(dyn Any + Send)) -> &str {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(text), _) => text,
        (_, Some(text)) => text,
        _ => "(no message)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker that serves until the test process ends.
    fn serves_forever() -> io::Result<()> {
        loop {
            std::thread::park();
        }
    }

    #[test]
    fn a_later_worker_that_fails_ends_the_server_with_its_cause() {
        let result = supervise("fails", vec![0, 1, 2], |i, started| {
            started.ready("ready".into());
            match i {
                2 => Err(io::Error::other("listener gone")),
                _ => serves_forever(),
            }
        });
        assert_eq!(result.unwrap_err().to_string(), "listener gone");
    }

    #[test]
    fn a_worker_that_panics_ends_the_server_naming_the_panic() {
        let result = supervise("panics", vec![0, 1], |i, _| match i {
            1 => panic!("slot {} out of range", 7),
            _ => serves_forever(),
        });
        assert_eq!(
            result.unwrap_err().to_string(),
            "worker panics-1 panicked: slot 7 out of range"
        );
    }

    #[test]
    fn a_worker_that_cannot_start_ends_the_server_before_the_others_are_ready() {
        let result = supervise("setup", vec![0, 1], |i, started| match i {
            0 => Err(io::Error::other("cannot use io_uring")),
            _ => {
                started.ready("ready".into());
                serves_forever()
            }
        });
        assert_eq!(result.unwrap_err().to_string(), "cannot use io_uring");
    }

    #[test]
    fn the_server_ends_well_once_every_worker_has_drained() {
        let result = supervise("drains", vec![0, 1, 2], |i, started| {
            started.ready("ready".into());
            std::thread::sleep(std::time::Duration::from_millis(10 * i));
            Ok(())
        });
        assert!(result.is_ok());
    }
}
