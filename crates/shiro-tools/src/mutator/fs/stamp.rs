//! [`crate::Mutator::stamps`] for [`FsMutator`]: each path's entry as `lstat` sees it,
//! reached through real directories only.

use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;

use super::{FsMutator, Roots};
use crate::mutator::Stamp;
use crate::path::WorkspacePath;

/// See [`crate::Mutator::stamps`].
pub(super) async fn stamps(mutator: &FsMutator, paths: &[WorkspacePath]) -> Vec<Option<Stamp>> {
    if mutator.inline {
        return stamp_all(&mutator.inner, paths);
    }
    let count = paths.len();
    let paths = paths.to_vec();
    (mutator
        .blocking(move |roots| Ok(stamp_all(roots, &paths)))
        .await)
        .unwrap_or_else(|_| vec![None; count])
}

/// The stamps of `paths`, in their order; paths in one directory, which come together, open
/// it once.
fn stamp_all(roots: &Roots, paths: &[WorkspacePath]) -> Vec<Option<Stamp>> {
    let mut open = None;
    let mut stamps = Vec::with_capacity(paths.len());
    for path in paths {
        let parent = path.as_str().rsplit_once('/').map(|(parent, _)| parent);
        let dir = match open.take() {
            Some((name, dir)) if name == parent => dir,
            _ => roots.jail.parent_nolinks(path),
        };
        stamps.push(match &dir {
            Ok(dir) => stamp_in(dir, path),
            // A parent that is not a real directory holds nothing at the path.
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => Some(Stamp::Absent),
            Err(_) => None,
        });
        open = Some((parent, dir));
    }
    stamps
}

/// The stamp of `path`'s entry in `dir`, its parent.
fn stamp_in(dir: &impl std::os::fd::AsFd, path: &WorkspacePath) -> Option<Stamp> {
    let stat = match rustix::fs::statat(dir, path.file_name(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::NOENT | Errno::NOTDIR) => return Some(Stamp::Absent),
        Err(_) => return None,
    };
    // The fields' widths differ between targets.
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
    let stamp = if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
        Stamp::Dir {
            mode: stat.st_mode as u32 & 0o7777,
        }
    } else {
        Stamp::Entry {
            dev: u64::from(stat.st_dev),
            ino: u64::from(stat.st_ino),
            len: u64::try_from(stat.st_size).unwrap_or_default(),
            mode: stat.st_mode as u32 & 0o7777,
            modified: (
                i64::from(stat.st_mtime),
                i64::try_from(stat.st_mtime_nsec).unwrap_or_default(),
            ),
        }
    };
    Some(stamp)
}
