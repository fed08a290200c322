//! The overlay's upper layer: where it lives, its lock and its commit mark (how it is carried
//! into the workspace is `plan`'s; how a layer left by a killed shiro is finished or
//! discarded is `recovery`'s).
//!
//! A layer is a directory `<layers>/<16 hex digits>/` holding `up/` (the upper layer) and
//! `work/` (the overlay's work directory). The shiro process running its command holds an
//! exclusive `flock` on it; a layer nobody holds is left over from a process that died.
//! Before the first change is applied, the pre-images of every path the commit will touch
//! are captured (one batch) and a `commit` marker is created: a leftover layer with the marker
//! is applied again by recovery (which is idempotent: each step compares before it acts, and
//! runs only where the path still holds its captured pre-image),
//! one without it is discarded, as its command was cut short before its changes counted.

use std::ffi::OsStr;
use std::fs;
use std::hash::{BuildHasher as _, Hasher as _};
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rustix::fs::{FlockOperation, Mode, OFlags};

pub(super) const UPPER_DIR: &str = "up";
pub(super) const WORK_DIR: &str = "work";
/// Written by a helper that could not set the overlay up: why.
pub(super) const SETUP_ERROR_FILE: &str = "setup-error";
/// Written by the overlay helper once it started the command's init process: that
/// process's id, which stopping the command kills (see `CommandCapture::kill`).
pub(super) const INIT_PID_FILE: &str = "init-pid";
/// Created once every pre-image of the commit is captured: from then on the layer's changes
/// count, and recovery applies what a crash left unapplied. It holds the system's boot id.
const COMMIT_MARKER: &str = "commit";
/// A removed layer's new name, until it is deleted.
pub(super) const TRASH_PREFIX: &str = "trash-";
/// Where the commit moves the workspace directories the command removed whole (see
/// `Mutator::remove_tree`): removed with the layer, after the commit.
const ASIDE_DIR: &str = "gone";

/// What a layer's `commit` marker says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mark {
    /// No marker: the command was cut short before its changes counted.
    None,
    /// Its commit began in this boot of the system: the layer is whole.
    ThisBoot,
    /// Its commit began before a restart: the layer may be torn.
    EarlierBoot,
}

/// A layer, locked by this process.
pub(super) struct Layer {
    dir: PathBuf,
    _lock: OwnedFd,
    /// When this process made it, before its command started; `None` for a layer left by
    /// another (see `Plan::outside`).
    made: Option<SystemTime>,
}

impl Layer {
    /// Makes a fresh layer in the directory `layers` (made when missing; its parent must
    /// be there), locked.
    pub(super) fn create(layers: &Path) -> io::Result<Self> {
        real_dir(layers, 0o700)?;
        let random = std::collections::hash_map::RandomState::new();
        for attempt in 0u32..8 {
            let mut hasher = random.build_hasher();
            hasher.write_u32(attempt);
            hasher.write_u32(std::process::id());
            let dir = layers.join(format!("{:016x}", hasher.finish()));
            match fs::create_dir(&dir) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(err) => return Err(err),
            }
            let lock = lock(&dir)?.ok_or_else(|| io::Error::other("the new layer is locked"))?;
            fs::create_dir(dir.join(UPPER_DIR))?;
            fs::create_dir(dir.join(WORK_DIR))?;
            return Ok(Self {
                dir,
                _lock: lock,
                made: Some(SystemTime::now()),
            });
        }
        Err(io::Error::other("no free layer name"))
    }

    /// The layer at `dir`, locked, unless a live process holds it.
    pub(super) fn take(dir: PathBuf) -> io::Result<Option<Self>> {
        Ok(lock(&dir)?.map(|lock| Self {
            dir,
            _lock: lock,
            made: None,
        }))
    }

    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// When this process made the layer, before its command began; `None` for a layer
    /// left by another process.
    pub(super) fn made(&self) -> Option<SystemTime> {
        self.made
    }

    pub(super) fn upper(&self) -> PathBuf {
        self.dir.join(UPPER_DIR)
    }

    /// A fresh path in the layer for a workspace directory the commit moves out whole.
    pub(super) fn aside(&self) -> io::Result<PathBuf> {
        let dir = self.dir.join(ASIDE_DIR);
        real_dir(&dir, 0o700)?;
        for n in 0u32.. {
            let path = dir.join(n.to_string());
            if !fs::exists(&path)? {
                return Ok(path);
            }
        }
        Err(io::Error::other("no free name to move a directory aside"))
    }

    /// Why the helper could not set the overlay up, if it said.
    pub(super) fn setup_error(&self) -> Option<String> {
        fs::read_to_string(self.dir.join(SETUP_ERROR_FILE))
            .ok()
            .map(|why| why.trim_end().to_owned())
    }

    /// The id of the command's init process, once the helper has said it.
    pub(super) fn init_pid(&self) -> Option<i32> {
        fs::read_to_string(self.dir.join(INIT_PID_FILE))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Whether its commit began, and in which boot of the system. The overlay is mounted
    /// `volatile` (nothing in it is flushed), so only a commit of this boot has a whole upper
    /// layer; after a power cut the layer may hold torn files.
    pub(super) fn commit_mark(&self) -> Mark {
        match fs::read_to_string(self.dir.join(COMMIT_MARKER)) {
            Err(_) => Mark::None,
            Ok(boot) if Some(boot.trim()) == boot_id().as_deref() => Mark::ThisBoot,
            Ok(_) => Mark::EarlierBoot,
        }
    }

    /// Marks the commit as begun, naming this boot of the system.
    pub(super) fn mark_committing(&self) -> io::Result<()> {
        use std::io::Write as _;
        let mut marker = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.dir.join(COMMIT_MARKER))?;
        marker.write_all(boot_id().unwrap_or_default().as_bytes())
    }

    /// Removes the layer: renamed out of the way at once (recovery never takes it for a
    /// layer again), then deleted on a blocking thread, with the directories the commit moved
    /// into it, so the command's result does not wait for a disk that frees blocks slowly.
    /// What a failure or an exit leaves is removed by the next recovery.
    pub(super) fn discard(self) {
        let trash = self.dir.with_file_name(format!(
            "{TRASH_PREFIX}{}",
            self.dir
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ));
        let doomed = match fs::rename(&self.dir, &trash) {
            Ok(()) => trash,
            Err(_) => self.dir.clone(),
        };
        drop(self);
        remove_later(doomed);
    }
}

/// Removes the tree `dir` on a blocking thread when there is a runtime (which waits for it
/// before the process exits), else now.
pub(super) fn remove_later(dir: PathBuf) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn_blocking(move || remove_meekly(dir))),
        Err(_) => drop(remove_tree(&dir)),
    }
}

/// Removes the tree `dir` on a thread of its own at the lowest priority, and waits for it.
///
/// Freeing a big tree (a `rm -rf` turn moves the removed tree into the layer) keeps a core
/// busy for as long as the command took, right while the turn is being stored; at the
/// lowest priority it takes only what the store leaves. The thread is its own because a
/// priority, once lowered, cannot be raised again without privilege, and the blocking pool
/// reuses its threads. Should the thread not start, the removal runs here; so does that of a
/// layer that holds no tree moved aside (one more thread would cost a small turn more than
/// its removal).
fn remove_meekly(dir: PathBuf) -> io::Result<()> {
    if fs::symlink_metadata(dir.join(ASIDE_DIR)).is_err() {
        return remove_tree(&dir);
    }
    let spare = dir.clone();
    let meek = std::thread::Builder::new()
        .name("shiro-remove-layer".to_owned())
        .spawn(move || {
            // Linux's nice value is the calling thread's; failing to lower it changes nothing
            // but the speed.
            let _ = rustix::process::setpriority_process(None, LOWEST_PRIORITY);
            remove_tree(&dir)
        });
    match meek {
        Ok(thread) => thread
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the removing thread failed"))),
        Err(_) => remove_tree(&spare),
    }
}

/// The highest nice value: the lowest priority of the normal scheduling class.
const LOWEST_PRIORITY: i32 = 19;

/// This boot of the system (Linux), to tell a layer written before a restart.
fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|id| id.trim().to_owned())
}

/// Whether `name` is one shiro gives a layer: 16 lowercase hex digits.
pub(super) fn is_layer_name(name: &OsStr) -> bool {
    name.to_str().is_some_and(|name| {
        name.len() == 16
            && name
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// `path` as a real directory (not a link), made with `mode` when missing.
fn real_dir(path: &Path, mode: u32) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(io::Error::other(format!(
            "{} is not a real directory",
            path.display()
        ))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            use std::os::unix::fs::DirBuilderExt as _;
            fs::DirBuilder::new().mode(mode).create(path)
        }
        Err(err) => Err(err),
    }
}

/// An exclusive lock on the directory `dir`, or `None` when another process holds one.
fn lock(dir: &Path) -> io::Result<Option<OwnedFd>> {
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(fd)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// Removes a directory tree without following links; directories the command made
/// unreadable are opened up first.
fn remove_tree(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(_) => {
            open_up(dir);
            fs::remove_dir_all(dir)
        }
    }
}

fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                open_up(&entry.path());
            }
        }
    }
}
