//! The store's lock: one process at a time reads and writes the log.

use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use fs4::fs_std::FileExt;

use crate::error::UndoError;
use crate::ground::no_follow;

/// How often a waiting process tries the lock again.
const POLL: Duration = Duration::from_millis(10);

/// Holds the store's lock until dropped (closing the file releases it, also when the process
/// dies, so a crash never leaves the store locked).
#[derive(Debug)]
pub(crate) struct LockGuard {
    _file: File,
    /// Dropped with the guard: [`LockGuard::token`] tells whether it is still held.
    held: Arc<()>,
}

impl LockGuard {
    /// A token that upgrades while this guard is held, and never again once it is dropped.
    pub(crate) fn token(&self) -> Weak<()> {
        Arc::downgrade(&self.held)
    }
}

/// Takes the lock on `path`, polling until `timeout` has passed.
pub(crate) fn acquire(path: &Path, timeout: Duration) -> Result<LockGuard, UndoError> {
    let file = no_follow()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|source| UndoError::io("open the lock file", path, source))?;
    let start = Instant::now();
    loop {
        // Called through the trait: std's own `File::try_lock` has a different signature.
        match FileExt::try_lock_exclusive(&file) {
            Ok(true) => {
                return Ok(LockGuard {
                    _file: file,
                    held: Arc::new(()),
                });
            }
            Ok(false) => {}
            Err(source) => return Err(UndoError::io("lock", path, source)),
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Err(UndoError::Locked {
                lock: path.to_path_buf(),
                waited: timeout,
            });
        }
        thread::sleep(POLL.min(timeout - waited));
    }
}
