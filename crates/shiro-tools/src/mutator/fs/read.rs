//! [`crate::Mutator::read_with`] for [`FsMutator`]: a file handed over a piece at a time, inline or
//! from the blocking pool.

use std::fs;
use std::io;

use super::{FsMutator, READ_PIECE, open_file};
use crate::mutator::MutatorError;
use crate::mutator::fs_jail::io_error;
use crate::path::WorkspacePath;

/// How many bytes [`crate::Mutator::read_with`] reads at a time on the blocking pool (when the
/// mutator is not [`FsMutator::inline`]): each piece is a hand-off to another thread and
/// back, so fewer and bigger.
const BLOCKING_READ_PIECE: usize = 1 << 20;

/// See [`crate::Mutator::read_with`].
pub(super) async fn read_with(
    mutator: &FsMutator,
    path: &WorkspacePath,
    sink: &mut (dyn for<'b> FnMut(&'b [u8]) + Send),
) -> Result<u64, MutatorError> {
    let failed = |err| io_error("read", path, err);
    if mutator.inline {
        let mut file = open_file(&mutator.inner, path)?;
        let mut piece = vec![0u8; READ_PIECE];
        let mut total = 0;
        loop {
            match read_piece(&mut file, &mut piece).map_err(failed)? {
                0 => return Ok(total),
                n => {
                    sink(&piece[..n]);
                    total += n as u64;
                }
            }
        }
    }
    // On the blocking pool a piece at a time, each handed to the sink here: the sink
    // cannot go to another thread, and reading the whole file first would need memory of
    // its size (a 10 GiB file's pre-image, captured by an embedder's recorder).
    let opened = {
        let path = path.clone();
        mutator
            .blocking(move |roots| open_file(roots, &path))
            .await?
    };
    let mut reading = Some((opened, vec![0u8; BLOCKING_READ_PIECE]));
    let mut total = 0;
    while let Some((mut file, mut piece)) = reading.take() {
        let (read, file, piece) = tokio::task::spawn_blocking(move || {
            let read = read_piece(&mut file, &mut piece);
            (read, file, piece)
        })
        .await
        .map_err(|join| MutatorError::Interrupted(join.to_string()))?;
        let n = read.map_err(failed)?;
        if n > 0 {
            sink(&piece[..n]);
            total += n as u64;
            reading = Some((file, piece));
        }
    }
    Ok(total)
}

/// Reads the next piece of `file` into `piece`; 0 at the end. An interrupted read is tried
/// again.
fn read_piece(file: &mut fs::File, piece: &mut [u8]) -> io::Result<usize> {
    loop {
        match std::io::Read::read(file, piece) {
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
}
