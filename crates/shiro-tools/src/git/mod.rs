//! What a git repository keeps beside its worktree and its objects, read and set without
//! running git: HEAD, the refs (loose and packed), the stash list and the index.
//!
//! A `bash` command that runs git changes these through the `.git` directory, which the
//! overlay binds through uncaptured. The overlay runner reads them before and after each
//! command ([`Repo::before`], [`Repo::since`]); the undo store keeps what moved and sets it
//! back ([`Repo::set`], [`Repo::set_index`]), so that an undo leaves `git status`, `git log`
//! and `git branch` as they were.
//!
//! Each thing that can move has a name and a value:
//! - `HEAD`: the content of `.git/HEAD`, trimmed (`ref: refs/heads/main`, or an object id);
//! - `refs/…`: the object id a ref names, whether it is loose or packed (a loose ref wins);
//! - [`STASH_LOG`]: the stash's reflog verbatim, which is the stash list.
//!
//! The index is compared by its entries (path, mode, object id, stage), not its bytes: git
//! rewrites the index to refresh its cached file stats, and that is no change.
//!
//! Objects are never written or removed here. Every write goes through git's own lock file
//! (`<file>.lock`, made exclusively, then renamed over the file), so a git running at the same
//! time either waits for it or fails as it would against another git.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, ErrorKind, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The name of the stash list among the things that move (see the module docs).
pub const STASH_LOG: &str = "logs/refs/stash";

/// Values by name (see the module docs).
type Values = BTreeMap<String, String>;

/// Who writes the reflog entries of [`Repo::set`].
const COMMITTER: &str = "shiro <shiro@localhost>";

/// A repository whose `.git` directory is at the root of a workspace.
#[derive(Debug, Clone)]
pub struct Repo {
    git_dir: PathBuf,
}

/// How one thing moved: its value before and after; `None` when it did not exist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    /// Its value before.
    pub before: Option<String>,
    /// Its value after.
    pub after: Option<String>,
}

/// The index before and after, verbatim; `None` when there was no index file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexChange {
    /// The index file's bytes before.
    pub before: Option<Vec<u8>>,
    /// The index file's bytes after.
    pub after: Option<Vec<u8>>,
}

/// What one command changed in the repository.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GitChange {
    /// What moved, by name (see the module docs); only what moved.
    pub moved: BTreeMap<String, Move>,
    /// The index, when its entries changed.
    pub index: Option<IndexChange>,
}

impl GitChange {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.moved.is_empty() && self.index.is_none()
    }
}

/// The state read before a command, with the index's bytes kept as they were.
#[derive(Debug)]
pub struct Before {
    values: Values,
    /// The index as it was, kept under another name (a hard link, or a copy), and the
    /// identity of the file it was kept from.
    index: Option<KeptIndex>,
}

/// The index's bytes kept under another name. The kept file is removed when this is dropped,
/// so a `Before` that is never passed to [`Repo::since`] leaves nothing behind either.
#[derive(Debug)]
struct KeptIndex {
    kept: PathBuf,
    identity: Identity,
}

impl Drop for KeptIndex {
    fn drop(&mut self) {
        // Nothing is lost if this fails: the caller's directory holds a stale copy, which the
        // next `before` replaces.
        let _ = fs::remove_file(&self.kept);
    }
}

/// Which file a path named, and as written when: git replaces the index by renaming a new
/// file over it, so the same identity means the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_nsec: i64,
}

impl Identity {
    fn of(meta: &fs::Metadata) -> Identity {
        Identity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        }
    }
}

impl Repo {
    /// The repository whose `.git` is a directory at the root of `root`; `None` when there
    /// is none (no repository, or a worktree's `.git` file), or when it keeps its refs in a
    /// reftable (`git init --ref-format=reftable`), which this reader does not read.
    pub fn at(root: &Path) -> Option<Repo> {
        let git_dir = root.join(".git");
        // Not `metadata`: a `.git` that is a link leads out of the workspace.
        let meta = fs::symlink_metadata(&git_dir).ok()?;
        let reftable = fs::symlink_metadata(git_dir.join("reftable")).is_ok();
        (meta.is_dir() && !reftable).then_some(Repo { git_dir })
    }

    /// The `.git` directory.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// Reads every value now (HEAD, every ref, the stash list), and keeps the index's bytes
    /// as they are in `keep` (a directory of the caller's, made when missing): by a hard
    /// link, which costs nothing since git replaces the index by renaming a new file over
    /// it, or by a copy where the link cannot be made (another file system).
    pub fn before(&self, keep: &Path) -> io::Result<Before> {
        let values = self.values()?;
        let index = keep_index(&self.path("index"), keep)?;
        Ok(Before { values, index })
    }

    /// What changed since `before`. The indexes' bytes are read only when the index file
    /// was replaced, and kept only when its entries differ.
    pub fn since(&self, before: Before) -> io::Result<GitChange> {
        let kept = before.index;
        let moved = moved(&before.values, &self.values()?);
        let index = self.index_change(kept.as_ref())?;
        // Dropping it removes the kept index.
        drop(kept);
        Ok(GitChange { moved, index })
    }

    /// The value of `name` now; `None` when it does not exist.
    pub fn value(&self, name: &str) -> io::Result<Option<String>> {
        check_name(name)?;
        self.value_of(name)
    }

    /// Moves each `(name, from, to)` to `to` (`None` removes it: a loose ref and its line
    /// in `packed-refs` both, and the ref's reflog), through git's lock files, and writes a
    /// reflog entry with `message` for each ref moved, and for HEAD when the commit it
    /// names changed. `from` is what the caller checked the value to be, for the reflog.
    pub fn set(
        &self,
        moves: &[(&str, Option<&str>, Option<&str>)],
        message: &str,
    ) -> io::Result<()> {
        let mut names = BTreeSet::new();
        for &(name, _, to) in moves {
            check_name(name)?;
            check_value(name, to)?;
            if !names.insert(name) {
                return Err(invalid(format!("{name} is moved twice")));
            }
        }
        // Refs first and HEAD last, so that HEAD never names a ref that is not there yet.
        let mut moves = moves.to_vec();
        moves.sort_by_key(|&(name, ..)| match name {
            "HEAD" => 2,
            STASH_LOG => 1,
            _ => 0,
        });
        let head_before = self.head_commit()?;
        // Every lock is taken before anything is written, so that a git running now leaves
        // all of it as it was.
        let mut locks = Vec::with_capacity(moves.len());
        for &(name, ..) in &moves {
            locks.push(self.lock(name)?);
        }
        let deleted: Vec<&str> = moves
            .iter()
            .filter(|&&(name, _, to)| name.starts_with("refs/") && to.is_none())
            .map(|&(name, ..)| name)
            .collect();
        let packed = (!deleted.is_empty()).then(|| Lock::take(&self.path("packed-refs")));
        // The packed line goes first: while the loose file is there, it wins.
        if let Some(packed) = packed.transpose()? {
            unpack(packed, &deleted)?;
        }
        for (&(name, from, to), lock) in moves.iter().zip(locks) {
            match to {
                Some(value) => self.write(name, from, value, lock, message)?,
                None => self.remove(name, lock)?,
            }
        }
        let head_after = self.head_commit()?;
        if head_before != head_after
            && let Some(line) = reflog_line(head_before.as_deref(), head_after.as_deref(), message)
        {
            self.append_reflog("HEAD", &line)?;
        }
        Ok(())
    }

    /// The index file's bytes now; `None` when there is none.
    pub fn index(&self) -> io::Result<Option<Vec<u8>>> {
        read_opt(&self.path("index"))
    }

    /// Writes `bytes` as the index, through `index.lock` (`None` removes the index).
    pub fn set_index(&self, bytes: Option<&[u8]>) -> io::Result<()> {
        let lock = Lock::take(&self.path("index"))?;
        match bytes {
            Some(bytes) => lock.commit(bytes),
            None => remove_if_present(&lock.file),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.git_dir.join(name)
    }

    /// Every value now, by name.
    fn values(&self) -> io::Result<Values> {
        let mut values = BTreeMap::new();
        if let Some(head) = self.value_of("HEAD")? {
            values.insert("HEAD".to_owned(), head);
        }
        let packed = read_opt(&self.path("packed-refs"))?.unwrap_or_default();
        for (name, oid) in packed_refs(&packed) {
            values.insert(name.to_owned(), oid.to_owned());
        }
        // Loose refs after packed ones: a loose ref wins.
        let mut dirs = vec![(self.path("refs"), "refs".to_owned())];
        while let Some((dir, prefix)) = dirs.pop() {
            let entries = match fs::read_dir(&dir) {
                Err(e) if is_absent(&e) => continue,
                entries => entries?,
            };
            for entry in entries {
                let entry = entry?;
                // A name that is not UTF-8 cannot be named in a move; git never makes one.
                let Ok(file_name) = entry.file_name().into_string() else {
                    continue;
                };
                let name = format!("{prefix}/{file_name}");
                let kind = entry.file_type()?;
                if kind.is_dir() {
                    dirs.push((entry.path(), name));
                } else if kind.is_file()
                    && !file_name.ends_with(".lock")
                    && let Some(value) = read_text(&entry.path())?
                {
                    values.insert(name, value.trim().to_owned());
                }
            }
        }
        if let Some(log) = self.value_of(STASH_LOG)? {
            values.insert(STASH_LOG.to_owned(), log);
        }
        Ok(values)
    }

    /// The value of a name already checked.
    fn value_of(&self, name: &str) -> io::Result<Option<String>> {
        let path = self.path(name);
        if name == STASH_LOG {
            return read_text(&path);
        }
        if name == "HEAD" {
            return Ok(read_text(&path)?.map(|head| head.trim().to_owned()));
        }
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() => {
                if let Some(value) = read_text(&path)? {
                    return Ok(Some(value.trim().to_owned()));
                }
            }
            Ok(_) => {}
            Err(e) if is_absent(&e) => {}
            Err(e) => return Err(e),
        }
        let packed = read_opt(&self.path("packed-refs"))?.unwrap_or_default();
        let oid = packed_refs(&packed).find(|&(packed, _)| packed == name);
        Ok(oid.map(|(_, oid)| oid.to_owned()))
    }

    /// The commit HEAD names, through the ref it points to.
    fn head_commit(&self) -> io::Result<Option<String>> {
        let mut value = self.value_of("HEAD")?;
        // A chain of symbolic refs is short; a loop is not followed forever.
        for _ in 0..5 {
            let target = value
                .as_deref()
                .and_then(|value| value.strip_prefix("ref: "));
            match target {
                Some(target) if target.starts_with("refs/") && check_name(target).is_ok() => {
                    value = self.value_of(target)?;
                }
                Some(_) => return Ok(None),
                None => return Ok(value),
            }
        }
        Ok(None)
    }

    /// Locks the file of a checked name, making its directory when missing.
    fn lock(&self, name: &str) -> io::Result<Lock> {
        let path = self.path(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        Lock::take(&path)
    }

    fn write(
        &self,
        name: &str,
        from: Option<&str>,
        value: &str,
        lock: Lock,
        message: &str,
    ) -> io::Result<()> {
        if name == STASH_LOG {
            return lock.commit(value.as_bytes());
        }
        lock.commit(format!("{value}\n").as_bytes())?;
        // The stash's reflog is the stash list, which moves by its own name.
        if !name.starts_with("refs/") || name == "refs/stash" {
            return Ok(());
        }
        let log = format!("logs/{name}");
        if (name.starts_with("refs/heads/") || self.path(&log).is_file())
            && let Some(line) = reflog_line(from, Some(value), message)
        {
            self.append_reflog(name, &line)?;
        }
        Ok(())
    }

    fn remove(&self, name: &str, lock: Lock) -> io::Result<()> {
        remove_if_present(&lock.file)?;
        drop(lock);
        // The stash's reflog is the stash list, which moves by its own name.
        if name.starts_with("refs/") && name != "refs/stash" {
            let log = format!("logs/{name}");
            remove_if_present(&self.path(&log))?;
            self.prune(name, 2);
            self.prune(&log, 3);
        }
        Ok(())
    }

    /// Removes the directories left empty above `name`, keeping its first `top` components
    /// (`refs/heads`, `logs/refs/heads`) whatever they hold.
    fn prune(&self, name: &str, top: usize) {
        let parts: Vec<&str> = name.split('/').collect();
        for depth in (top + 1..parts.len()).rev() {
            let Some(dir) = parts.get(..depth) else { break };
            // Fails when the directory holds anything: then so do its parents.
            if fs::remove_dir(self.path(&dir.join("/"))).is_err() {
                break;
            }
        }
    }

    fn append_reflog(&self, name: &str, line: &str) -> io::Result<()> {
        let path = self.path(&format!("logs/{name}"));
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        let mut log = OpenOptions::new().append(true).create(true).open(&path)?;
        log.write_all(line.as_bytes())
    }

    fn index_change(&self, kept: Option<&KeptIndex>) -> io::Result<Option<IndexChange>> {
        let now = match fs::metadata(self.path("index")) {
            Ok(meta) => Some(Identity::of(&meta)),
            Err(e) if is_absent(&e) => None,
            Err(e) => return Err(e),
        };
        if let (Some(kept), Some(now)) = (kept, now)
            && kept.identity == now
        {
            return Ok(None);
        }
        let before = match kept {
            Some(kept) => read_opt(&kept.kept)?,
            None => None,
        };
        let after = self.index()?;
        let same = match (&before, &after) {
            (Some(before), Some(after)) => same_index(before, after),
            (before, after) => before.is_none() && after.is_none(),
        };
        Ok((!same).then_some(IndexChange { before, after }))
    }
}

/// Git's lock on a file: `<file>.lock`, made exclusively and renamed over the file to commit.
/// Dropped uncommitted, it is removed and the file stays as it was.
struct Lock {
    file: PathBuf,
    lock: PathBuf,
    handle: File,
    committed: bool,
}

impl Lock {
    fn take(file: &Path) -> io::Result<Lock> {
        let mut lock = file.as_os_str().to_owned();
        lock.push(".lock");
        let lock = PathBuf::from(lock);
        match OpenOptions::new().write(true).create_new(true).open(&lock) {
            Ok(handle) => Ok(Lock {
                file: file.to_owned(),
                lock,
                handle,
                committed: false,
            }),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(io::Error::new(
                ErrorKind::AlreadyExists,
                format!(
                    "{} exists: another git process seems to be running in this repository",
                    lock.display()
                ),
            )),
            Err(e) => Err(e),
        }
    }

    fn commit(mut self, bytes: &[u8]) -> io::Result<()> {
        self.handle.write_all(bytes)?;
        self.handle.sync_all()?;
        fs::rename(&self.lock, &self.file)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        if !self.committed {
            // A lock left behind would stop every git after: best effort is all there is here.
            let _ = fs::remove_file(&self.lock);
        }
    }
}

/// Keeps the index at `index` as `keep/index`; `None` when there is no index.
fn keep_index(index: &Path, keep: &Path) -> io::Result<Option<KeptIndex>> {
    fs::create_dir_all(keep)?;
    let kept = keep.join("index");
    remove_if_present(&kept)?;
    match fs::hard_link(index, &kept) {
        // The link is the same file, so its identity is the index's.
        Ok(()) => {
            let identity = Identity::of(&fs::metadata(&kept)?);
            return Ok(Some(KeptIndex { kept, identity }));
        }
        Err(e) if is_absent(&e) => return Ok(None),
        // Another file system, or links refused: a copy does.
        Err(_) => {}
    }
    let mut source = match File::open(index) {
        Ok(source) => source,
        Err(e) if is_absent(&e) => return Ok(None),
        Err(e) => return Err(e),
    };
    // The identity of the very file copied, whatever replaces it meanwhile.
    let identity = Identity::of(&source.metadata()?);
    let kept = KeptIndex { kept, identity };
    let mut copy = File::create(&kept.kept)?;
    io::copy(&mut source, &mut copy)?;
    Ok(Some(kept))
}

fn moved(before: &Values, after: &Values) -> BTreeMap<String, Move> {
    let names: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let moved = |name: &String| Move {
        before: before.get(name).cloned(),
        after: after.get(name).cloned(),
    };
    let moves = names.into_iter().map(|name| (name.clone(), moved(name)));
    moves
        .filter(|(_, moved)| moved.before != moved.after)
        .collect()
}

/// Whether `name` names one of the things that move (`HEAD`, a ref, the stash list) and
/// cannot lead out of `.git`: what [`Repo::value`] and [`Repo::set`] accept. A reader of a
/// stored record checks its names with it.
pub fn valid_name(name: &str) -> bool {
    check_name(name).is_ok()
}

/// Refuses a name that is not one of the things that move, or that could lead out of `.git`:
/// names come from a stored record.
fn check_name(name: &str) -> io::Result<()> {
    let known = name == "HEAD" || name == STASH_LOG || name.starts_with("refs/");
    let clean = !name.contains("..")
        && !name.contains(['\0', '\\'])
        && name
            .split('/')
            .all(|part| !part.is_empty() && part != "." && !part.ends_with(".lock"));
    if !(known && clean) {
        return Err(invalid(format!(
            "{name:?} is not a name of HEAD, a ref or the stash list"
        )));
    }
    Ok(())
}

/// Refuses a value that git would not read back as one.
fn check_value(name: &str, to: Option<&str>) -> io::Result<()> {
    match to {
        None if name == "HEAD" => Err(invalid("HEAD cannot be removed".to_owned())),
        Some(value)
            if name != STASH_LOG && (value.is_empty() || value.contains(['\n', '\r', '\0'])) =>
        {
            Err(invalid(format!("{name} cannot be set to {value:?}")))
        }
        _ => Ok(()),
    }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, message)
}

/// Whether an error says the file is not there (its directory may not be either).
fn is_absent(e: &io::Error) -> bool {
    matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory)
}

fn read_opt(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if is_absent(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

fn read_text(path: &Path) -> io::Result<Option<String>> {
    let not_text = || {
        io::Error::new(
            ErrorKind::InvalidData,
            format!("{} is not UTF-8", path.display()),
        )
    };
    read_opt(path)?
        .map(|bytes| String::from_utf8(bytes).map_err(|_| not_text()))
        .transpose()
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if !is_absent(&e) => Err(e),
        _ => Ok(()),
    }
}

/// The refs of a `packed-refs` file, as `(name, oid)`; the header, the peeled lines and what
/// is not UTF-8 are skipped.
fn packed_refs(bytes: &[u8]) -> impl Iterator<Item = (&str, &str)> {
    bytes.split(|&b| b == b'\n').filter_map(packed_ref)
}

fn packed_ref(line: &[u8]) -> Option<(&str, &str)> {
    let line = std::str::from_utf8(line).ok()?.trim_end();
    if line.starts_with('#') || line.starts_with('^') {
        return None;
    }
    let (oid, name) = line.split_once(' ')?;
    Some((name, oid))
}

/// Rewrites `packed-refs`, under its lock, without the lines of `names` and their peeled lines.
fn unpack(lock: Lock, names: &[&str]) -> io::Result<()> {
    let Some(bytes) = read_opt(&lock.file)? else {
        return Ok(());
    };
    let mut kept = Vec::with_capacity(bytes.len());
    let mut dropping = false;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        if !line.starts_with(b"^") {
            dropping = packed_ref(line).is_some_and(|(name, _)| names.contains(&name));
        }
        if !dropping {
            kept.extend_from_slice(line);
        }
    }
    // Dropped unchanged, the lock goes and the file stays.
    if kept.len() == bytes.len() {
        Ok(())
    } else {
        lock.commit(&kept)
    }
}

/// A reflog entry from `old` to `new` now; `None` when either is not an object id.
fn reflog_line(old: Option<&str>, new: Option<&str>, message: &str) -> Option<String> {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let is_oid = |v: &str| matches!(v.len(), 40 | 64) && v.bytes().all(|b| b.is_ascii_hexdigit());
    let (old, new) = match (old, new) {
        (None, None) => return None,
        (old, new) if !old.is_none_or(is_oid) || !new.is_none_or(is_oid) => return None,
        (old, new) => (old, new),
    };
    // A missing side is git's null id, as long as the other side's.
    let zeros = "0".repeat(old.or(new).map_or(40, str::len));
    let (old, new) = (old.unwrap_or(&zeros), new.unwrap_or(&zeros));
    let message: String = message
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Some(format!(
        "{old} {new} {COMMITTER} {secs} +0000\t{}\n",
        message.trim()
    ))
}

/// Whether two index files hold the same entries (path, mode, object id, stage), whatever
/// their cached file stats and extensions. Bytes that are no index compare by their bytes.
pub fn same_index(a: &[u8], b: &[u8]) -> bool {
    // The hash's length is not in the index: SHA-1's, else SHA-256's.
    for oid_len in [20, 32] {
        if let (Some(a), Some(b)) = (entries(a, oid_len), entries(b, oid_len)) {
            return a == b;
        }
    }
    a == b
}

/// What an index entry says, as opposed to what it caches.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Entry<'a> {
    pub(crate) path: Vec<u8>,
    pub(crate) mode: u32,
    oid: &'a [u8],
    /// The stage and assume-valid bits.
    flags: u16,
    /// The intent-to-add and skip-worktree bits.
    extended: u16,
}

/// The entries of an index file (format versions 2 to 4); `None` when it is not one.
fn entries(bytes: &[u8], oid_len: usize) -> Option<Vec<Entry<'_>>> {
    read_entries(&mut Reader { bytes, pos: 0 }, oid_len)
}

/// Reads the header and the entries of an index (format versions 2 to 4) whose object ids
/// are `oid_len` bytes long, leaving `at` where its extensions begin; `None` when it is not
/// one. Each entry's flags hold its path's length (up to 0xfff), which is checked: so a
/// wrong `oid_len` is caught.
pub(crate) fn read_entries<'a>(at: &mut Reader<'a>, oid_len: usize) -> Option<Vec<Entry<'a>>> {
    if at.take(4)? != b"DIRC" {
        return None;
    }
    let version = at.u32()?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = at.u32()?;
    let mut entries = Vec::new();
    let mut path = Vec::new();
    for _ in 0..count {
        let start = at.pos;
        at.take(24)?; // ctime, mtime, dev, ino
        let mode = at.u32()?;
        at.take(12)?; // uid, gid, size
        let oid = at.take(oid_len)?;
        let flags = at.u16()?;
        let extended = match (flags & 0x4000 != 0, version) {
            (false, _) => 0,
            (true, 3..) => at.u16()?,
            (true, _) => return None,
        };
        if version == 4 {
            // The path is the previous one less its last `strip` bytes, then a suffix.
            let strip = at.varint()?;
            path.truncate(path.len().checked_sub(strip)?);
            path.extend_from_slice(at.until_nul()?);
        } else {
            let name_at = at.pos.checked_sub(start)?;
            path.clear();
            path.extend_from_slice(at.until_nul()?);
            // NULs pad the entry to a multiple of eight bytes, the path's own NUL included.
            let len = (name_at + path.len() + 8) & !7;
            at.take(len.checked_sub(at.pos.checked_sub(start)?)?)?;
        }
        if usize::from(flags & 0x0fff) != path.len().min(0x0fff) {
            return None;
        }
        entries.push(Entry {
            path: path.clone(),
            mode,
            oid,
            flags: flags & 0xb000,
            extended: extended & 0x6000,
        });
    }
    Some(entries)
}

/// Reads an index front to back; every read is `None` past the end. Also the reader of
/// `capture::writable`, which reads what an index tracks.
pub(crate) struct Reader<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let taken = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(taken)
    }

    pub(crate) fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    /// Git's offset varint: each continuation adds one before shifting, so no value has two
    /// spellings.
    pub(crate) fn varint(&mut self) -> Option<usize> {
        let mut byte = *self.take(1)?.first()?;
        let mut value = usize::from(byte & 0x7f);
        while byte & 0x80 != 0 {
            byte = *self.take(1)?.first()?;
            value = value.checked_add(1)?.checked_mul(128)? | usize::from(byte & 0x7f);
        }
        Some(value)
    }

    /// The bytes up to the next NUL, which is read too.
    pub(crate) fn until_nul(&mut self) -> Option<&'a [u8]> {
        let len = self.bytes.get(self.pos..)?.iter().position(|&b| b == 0)?;
        let taken = self.take(len)?;
        self.take(1)?;
        Some(taken)
    }
}

/// One line naming what moved, for the model and for `shiro log`:
/// `HEAD main → feature; refs/heads/feature created at 1a2b3c4; refs/heads/main 1a2b3c4 →
/// 9f8e7d6; stash: 1 entry added; index changed`.
pub fn describe(moved: &BTreeMap<String, Move>, index_changed: bool) -> String {
    let mut parts = Vec::new();
    if let Some(head) = moved.get("HEAD") {
        let before = head_label(head.before.as_deref());
        let after = head_label(head.after.as_deref());
        parts.push(format!("HEAD {before} → {after}"));
    }
    let stash = moved.get(STASH_LOG);
    for (name, m) in moved.iter().filter(|(name, _)| name.starts_with("refs/")) {
        // The stash list says it better.
        if name == "refs/stash" && stash.is_some() {
            continue;
        }
        let (before, after) = (
            m.before.as_deref().map(short),
            m.after.as_deref().map(short),
        );
        match (before, after) {
            (None, Some(after)) => parts.push(format!("{name} created at {after}")),
            (Some(before), None) => parts.push(format!("{name} deleted (was {before})")),
            (Some(before), Some(after)) => parts.push(format!("{name} {before} → {after}")),
            (None, None) => {}
        }
    }
    if let Some(stash) = stash {
        parts.push(stash_label(stash));
    }
    if index_changed {
        parts.push("index changed".to_owned());
    }
    parts.join("; ")
}

/// A ref's value in few characters: an object id's first seven, or the ref a symbolic one names.
fn short(value: &str) -> String {
    match value.strip_prefix("ref: ") {
        Some(target) => target.to_owned(),
        None => value.chars().take(7).collect(),
    }
}

fn head_label(head: Option<&str>) -> String {
    match head {
        None => "(none)".to_owned(),
        Some(head) => match head.strip_prefix("ref: refs/heads/") {
            Some(branch) => branch.to_owned(),
            None if head.starts_with("ref: ") => short(head),
            None => format!("{} (detached)", short(head)),
        },
    }
}

fn stash_label(stash: &Move) -> String {
    let before = stash_entries(stash.before.as_deref());
    let after = stash_entries(stash.after.as_deref());
    let entries = |n: usize| match n {
        1 => "1 entry".to_owned(),
        n => format!("{n} entries"),
    };
    match after.cmp(&before) {
        std::cmp::Ordering::Greater => format!("stash: {} added", entries(after - before)),
        std::cmp::Ordering::Less => format!("stash: {} dropped", entries(before - after)),
        std::cmp::Ordering::Equal => "stash changed".to_owned(),
    }
}

fn stash_entries(log: Option<&str>) -> usize {
    let lines = log.into_iter().flat_map(str::lines);
    lines.filter(|line| !line.trim().is_empty()).count()
}

#[cfg(test)]
mod tests;
