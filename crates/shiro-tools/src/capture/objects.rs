//! The git objects of the repository at the workspace root, kept from the command.
//!
//! `.git` is bound through the overlay, so that git works as it should inside a command and
//! its refs, HEAD and index can be recorded and undone (`crate::git`). Its objects cannot
//! be recorded that way: a repository holds too many, and `git gc` rewrites them all. So
//! `.git/objects` is not bound through: the command sees the overlay's view of it, opened
//! before the real `.git` is bound over the overlay and bound back over `.git/objects`
//! after. Whatever the command writes there (a commit's objects, a fetch's pack, a `gc`'s
//! new pack) lands in the layer, under `up/.git/objects`, and is carried into the real
//! `.git/objects` as the command ends ([`carry`]), before anything else is committed (the
//! commit's walk of the layer passes `.git` by); whatever it removes there (`rm -rf .git`,
//! `git gc --prune=now`, `git prune`) is removed only from its view. The objects directory
//! only ever grows, so an undo that puts a ref back always finds the objects it names.
//!
//! What is carried: every regular file the command made that the real directory does not
//! hold, by its path. One that exists there already is left as it is: a loose object or a
//! pack is named by its content, so it is the same; the rest are caches git rebuilds
//! (`info/commit-graph`, `pack/multi-pack-index`, `info/packs`), and the old one still
//! describes the objects, all of which stay.
//!
//! A commit that a crash cut short carries them too: crash recovery does it for a leftover
//! layer of this boot, before it finishes or discards the rest (the refs the command moved
//! are in `.git` already, and must not be left naming missing objects). After a restart the
//! layer may hold torn files (the overlay is mounted `volatile`), and they are not carried.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use super::layer::Layer;

/// Written by the helper when it could not give the command the overlay's view of the
/// objects: why. The command then ran with the real objects, as before.
pub(super) const OBJECTS_UNKEPT_FILE: &str = "objects-unkept";

/// Where the objects the command wrote are in an upper layer `upper`.
pub(super) fn written(upper: &Path) -> PathBuf {
    upper.join(".git").join("objects")
}

/// Carries the objects the command wrote, from the layer at `layer` into the repository of
/// the workspace at `root` (see [`carry`]), and says what the command's result must: that
/// the objects were not kept from it, or that some could not be carried.
pub(super) async fn keep_notes(layer: &Layer, root: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    if let Ok(why) = fs::read_to_string(layer.dir().join(OBJECTS_UNKEPT_FILE)) {
        notes.push(format!(
            "the command worked on the git repository's own objects ({}): what it removed \
             from .git/objects is gone, and an undo cannot bring it back",
            why.trim_end()
        ));
    }
    let upper = written(&layer.upper());
    let empty = fs::read_dir(&upper).map_or(true, |mut entries| entries.next().is_none());
    if empty {
        return notes;
    }
    let objects = root.join(".git").join("objects");
    let failed = tokio::task::spawn_blocking(move || carry(&upper, &objects))
        .await
        .unwrap_or_else(|err| vec![err.to_string()]);
    notes.extend(not_carried_note(&failed));
    notes
}

/// Carries what the command wrote in `.git/objects` (the layer's directory `upper`) into the
/// repository's objects directory `objects`: every regular file, at its path, where there is
/// nothing; directories are made as needed. Idempotent, and it never removes or replaces
/// anything in `objects`. A file it cannot carry is named in the result (a full disk, or
/// something that is no directory where a directory is needed).
pub(super) fn carry(upper: &Path, objects: &Path) -> Vec<String> {
    let mut failed = Vec::new();
    let Ok(objects_meta) = fs::symlink_metadata(objects) else {
        return failed;
    };
    if !objects_meta.is_dir() || !upper.is_dir() {
        return failed;
    }
    carry_dir(upper, objects, Path::new(""), &mut failed);
    failed
}

fn carry_dir(from: &Path, to: &Path, rel: &Path, failed: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(from) else {
        failed.push(shown(rel));
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let rel = rel.join(entry.file_name());
        if kind.is_dir() {
            match fs::symlink_metadata(&target) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    failed.push(shown(&rel));
                    continue;
                }
                Err(_) => {
                    if fs::create_dir(&target).is_err() && !target.is_dir() {
                        failed.push(shown(&rel));
                        continue;
                    }
                }
            }
            carry_dir(&source, &target, &rel, failed);
        } else if kind.is_file() && !matches!(carry_file(&source, &target), Ok(())) {
            failed.push(shown(&rel));
        }
        // Anything else (a whiteout, where the command removed an object) is left behind.
    }
}

/// Moves the file `source` to `target` unless something is there: by a rename on one file
/// system, else by a copy made whole beside it first. Either way its data is flushed, as git
/// flushes what it writes: the overlay, mounted `volatile`, flushed nothing.
fn carry_file(source: &Path, target: &Path) -> io::Result<()> {
    let moved = rustix::fs::renameat_with(
        rustix::fs::CWD,
        source,
        rustix::fs::CWD,
        target,
        RenameFlags::NOREPLACE,
    );
    match moved {
        Ok(()) => fs::File::open(target)?.sync_data(),
        Err(Errno::EXIST) => Ok(()),
        Err(Errno::XDEV) => copy_file(source, target),
        Err(errno) => Err(errno.into()),
    }
}

/// Copies `source` to `target`, where nothing is, through a temporary name beside it that
/// is linked into place only once the copy is whole and flushed.
fn copy_file(source: &Path, target: &Path) -> io::Result<()> {
    let Some(dir) = target.parent() else {
        return Err(io::Error::other("no directory to copy into"));
    };
    let dir_fd = rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mode = {
        use std::os::unix::fs::PermissionsExt as _;
        fs::metadata(source)?.permissions().mode() & 0o777
    };
    let temp = rustix::fs::openat(
        &dir_fd,
        ".",
        OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    );
    let mut file = match temp {
        Ok(fd) => fs::File::from(fd),
        // A file system without O_TMPFILE: a name of its own, removed should the copy fail.
        Err(_) => return copy_named(source, target),
    };
    io::copy(&mut fs::File::open(source)?, &mut file)?;
    file.sync_data()?;
    let linked = rustix::fs::linkat(
        rustix::fs::CWD,
        format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file)),
        rustix::fs::CWD,
        target,
        rustix::fs::AtFlags::SYMLINK_FOLLOW,
    );
    match linked {
        Ok(()) | Err(Errno::EXIST) => Ok(()),
        Err(errno) => Err(errno.into()),
    }
}

fn copy_named(source: &Path, target: &Path) -> io::Result<()> {
    let temp = target.with_extension("shiro-carry");
    let _ = fs::remove_file(&temp);
    let copied = fs::copy(source, &temp).and_then(|_| fs::File::open(&temp)?.sync_data());
    let placed = copied.and_then(|()| match fs::hard_link(&temp, target) {
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    });
    let _ = fs::remove_file(&temp);
    placed
}

fn shown(rel: &Path) -> String {
    Path::new(".git/objects").join(rel).display().to_string()
}

/// The note a command's result carries when objects it wrote could not be carried: the
/// refs it moved may name objects the repository lacks.
pub(super) fn not_carried_note(failed: &[String]) -> Option<String> {
    let (first, rest) = failed.split_first()?;
    let more = match rest.len() {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Some(format!(
        "git objects the command wrote could not be carried into the repository ({first}{more}); \
         a ref the command moved may name an object git cannot find"
    ))
}

#[cfg(target_os = "linux")]
pub(super) mod linux {
    use std::os::fd::{AsRawFd as _, OwnedFd};
    use std::path::Path;

    use rustix::fs::{Mode, OFlags};
    use rustix::io::Errno;

    /// The workspace overlay's view of the repository's objects, opened before the real
    /// `.git` is bound over it: `None` where there is no real `.git/objects` directory.
    pub(in crate::capture) fn open_view(root: &Path) -> Result<Option<OwnedFd>, String> {
        let opened = rustix::fs::open(
            root.join(".git").join("objects"),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        );
        match opened {
            Ok(fd) => Ok(Some(fd)),
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => Ok(None),
            Err(err) => Err(format!("cannot open .git/objects: {err}")),
        }
    }

    /// Binds `view` (from [`open_view`]) over the real `root/.git/objects`, once the real
    /// `.git` is bound through.
    pub(in crate::capture) fn bind_view(root: &Path, view: &OwnedFd) -> Result<(), String> {
        let source = format!("/proc/self/fd/{}", view.as_raw_fd());
        rustix::mount::mount_bind(source.as_str(), root.join(".git").join("objects"))
            .map_err(|err| format!("cannot bind the overlay's view of .git/objects: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn carries_new_files_and_never_replaces_or_removes() {
        let dir = tempfile::tempdir().unwrap();
        let (upper, objects) = (dir.path().join("up"), dir.path().join("objects"));
        fs::create_dir_all(objects.join("ab")).unwrap();
        fs::write(objects.join("ab/old"), "old object").unwrap();
        fs::write(objects.join("ab/kept"), "real").unwrap();
        fs::create_dir_all(objects.join("info")).unwrap();
        fs::write(objects.join("info/packs"), "old cache").unwrap();
        fs::create_dir_all(upper.join("ab")).unwrap();
        fs::create_dir_all(upper.join("cd/ef")).unwrap();
        fs::create_dir_all(upper.join("info")).unwrap();
        fs::write(upper.join("ab/new"), "new object").unwrap();
        fs::write(upper.join("ab/kept"), "the command's").unwrap();
        fs::write(upper.join("cd/ef/deep"), "deep").unwrap();
        fs::write(upper.join("info/packs"), "new cache").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", upper.join("ab/link")).unwrap();

        assert_eq!(carry(&upper, &objects), Vec::<String>::new());
        let read = |rel: &str| fs::read_to_string(objects.join(rel)).unwrap();
        assert_eq!(read("ab/old"), "old object");
        assert_eq!(read("ab/new"), "new object");
        assert_eq!(read("ab/kept"), "real");
        assert_eq!(read("cd/ef/deep"), "deep");
        assert_eq!(read("info/packs"), "old cache");
        assert!(
            fs::symlink_metadata(objects.join("ab/link")).is_err(),
            "only regular files are carried"
        );
        // Again: nothing more to do, nothing changes.
        assert_eq!(carry(&upper, &objects), Vec::<String>::new());
        assert_eq!(read("ab/new"), "new object");
    }

    #[test]
    fn a_file_where_a_directory_is_needed_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let (upper, objects) = (dir.path().join("up"), dir.path().join("objects"));
        fs::create_dir_all(&objects).unwrap();
        fs::write(objects.join("pack"), "not a directory").unwrap();
        fs::create_dir_all(upper.join("pack")).unwrap();
        fs::write(upper.join("pack/pack-1.pack"), "pack").unwrap();
        let failed = carry(&upper, &objects);
        assert_eq!(failed, [".git/objects/pack"]);
        insta::assert_snapshot!(not_carried_note(&failed).unwrap(), @"git objects the command wrote could not be carried into the repository (.git/objects/pack); a ref the command moved may name an object git cannot find");
    }

    #[test]
    fn a_copy_across_file_systems_is_whole_or_absent() {
        let dir = tempfile::tempdir().unwrap();
        let (source, target) = (dir.path().join("s"), dir.path().join("t"));
        fs::write(&source, "bytes").unwrap();
        copy_file(&source, &target).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "bytes");
        // What is there stays.
        fs::write(&source, "other").unwrap();
        copy_file(&source, &target).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "bytes");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            2,
            "no temporary left"
        );
    }
}
