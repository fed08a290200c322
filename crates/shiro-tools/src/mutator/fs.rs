//! The real disk under a workspace root.

use std::fs;
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use super::{
    DEFAULT_FILE_MODE, DirEntry, Mutator, MutatorError, Stat, partial_write_path, read_exactly,
};
use crate::path::{PathError, WorkspacePath};

/// How many bytes [`Mutator::read_with`] reads at a time: small enough to stay in the
/// processor's cache, big enough that the calls cost nothing beside the copying.
const READ_PIECE: usize = 64 * 1024;
/// [`Mutator::overwrite`] compares a file at least this big with what it writes, and writes
/// only the blocks that differ.
const COMPARED_FROM: usize = 64 * 1024;
/// The unit that [`Mutator::overwrite`] compares and writes: a page, and a block of most
/// file systems.
const BLOCK: usize = 4096;

/// A [`Mutator`] over the real file system under a root directory.
///
/// Writes go to a temporary file in the same directory, then are renamed over the target, so
/// a reader or a crashed process sees either the old or the new bytes. Single writes are not
/// flushed (no `fsync`, as `cp` and editors' plain saves): callers that need durability call
/// [`Mutator::sync`] with the paths they changed.
///
/// Each operation runs on tokio's blocking pool, so it never stalls the async tasks beside
/// it; [`FsMutator::inline`] runs them on the calling thread instead.
#[derive(Debug, Clone)]
pub struct FsMutator {
    inner: Arc<Roots>,
    inline: bool,
}

#[derive(Debug)]
struct Roots {
    /// The root as given, for resolving absolute paths a model sends.
    root: PathBuf,
    /// The canonical root, for checking where symbolic links lead.
    canonical: PathBuf,
}

impl FsMutator {
    /// A mutator for the directory `root`, which must exist.
    pub fn new(root: impl Into<PathBuf>) -> io::Result<Self> {
        let root = root.into();
        let canonical = root.canonicalize()?;
        if !canonical.is_dir() {
            return Err(io::Error::new(
                ErrorKind::NotADirectory,
                "workspace root is not a directory",
            ));
        }
        Ok(Self {
            inner: Arc::new(Roots { root, canonical }),
            inline: false,
        })
    }

    /// The same mutator, running each operation on the calling thread rather than handing it
    /// to tokio's blocking pool: for a program that does one thing at a time (a command-line
    /// command), where each handoff costs more than the operation itself (an undo of 1,000
    /// files made about 5,000 of them). It blocks the async task that calls it, so a server
    /// or anything with concurrent tasks on few threads should keep the default.
    #[must_use]
    pub fn inline(self) -> Self {
        Self {
            inline: true,
            ..self
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Roots) -> Result<T, MutatorError> + Send + 'static,
    ) -> Result<T, MutatorError> {
        if self.inline {
            return op(&self.inner);
        }
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || op(&inner))
            .await
            .unwrap_or_else(|join| Err(MutatorError::Interrupted(join.to_string())))
    }
}

impl Roots {
    /// The on-disk path, after checking that no symbolic link on a parent leads outside.
    fn checked(&self, path: &WorkspacePath) -> Result<PathBuf, MutatorError> {
        for ancestor in path.ancestors() {
            self.check_link(path, &ancestor)?;
        }
        Ok(path.to_fs_path(&self.canonical))
    }

    /// Like [`Roots::checked`], and also for a link in the last component (for reads).
    fn checked_following(&self, path: &WorkspacePath) -> Result<PathBuf, MutatorError> {
        let full = self.checked(path)?;
        self.check_link(path, path)?;
        Ok(full)
    }

    /// A mutation target: jailed and not protected.
    fn writable(&self, path: &WorkspacePath) -> Result<PathBuf, MutatorError> {
        if path.is_protected() {
            return Err(PathError::Protected(path.to_string()).into());
        }
        self.checked(path)
    }

    fn check_link(&self, path: &WorkspacePath, at: &WorkspacePath) -> Result<(), MutatorError> {
        let full = at.to_fs_path(&self.canonical);
        let Ok(meta) = fs::symlink_metadata(&full) else {
            return Ok(());
        };
        if !meta.file_type().is_symlink() {
            return Ok(());
        }
        match full.canonicalize() {
            Ok(target) if target.starts_with(&self.canonical) => Ok(()),
            // A dangling link leads nowhere; the operation itself reports what is missing.
            Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
            _ => Err(PathError::SymlinkEscape {
                path: path.to_string(),
                link: at.to_string(),
            }
            .into()),
        }
    }
}

fn io_error(op: &'static str, path: &WorkspacePath, err: io::Error) -> MutatorError {
    match err.kind() {
        ErrorKind::NotFound => MutatorError::NotFound(path.clone()),
        ErrorKind::AlreadyExists => MutatorError::AlreadyExists(path.clone()),
        ErrorKind::IsADirectory => MutatorError::IsDirectory(path.clone()),
        ErrorKind::NotADirectory => MutatorError::NotDirectory(path.clone()),
        ErrorKind::DirectoryNotEmpty => MutatorError::DirectoryNotEmpty(path.clone()),
        _ => MutatorError::Io {
            op,
            path: path.clone(),
            source: err,
        },
    }
}

fn stat_of(full: &Path, path: &WorkspacePath) -> Result<Stat, MutatorError> {
    let meta = match fs::symlink_metadata(full) {
        Ok(meta) => meta,
        Err(err) if matches!(err.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(Stat::Absent);
        }
        Err(err) => return Err(io_error("stat", path, err)),
    };
    let file_type = meta.file_type();
    let mode = meta.permissions().mode() & 0o7777;
    if file_type.is_symlink() {
        let target = fs::read_link(full).map_err(|err| io_error("readlink", path, err))?;
        Ok(Stat::Symlink {
            target: target.to_string_lossy().into_owned(),
        })
    } else if file_type.is_dir() {
        Ok(Stat::Dir { mode })
    } else {
        Ok(Stat::File {
            mode,
            len: meta.len(),
        })
    }
}

/// The parent must exist and be a directory, as on the in-memory tree.
fn require_parent(roots: &Roots, path: &WorkspacePath) -> Result<(), MutatorError> {
    if let Some(parent) = path.parent() {
        match stat_of(&roots.checked(&parent)?, &parent)? {
            Stat::Dir { .. } => {}
            Stat::Absent => return Err(MutatorError::NotFound(parent)),
            Stat::Symlink { .. } => {
                // A link to a directory inside the workspace is followed, as parents are.
                let followed = parent.to_fs_path(&roots.canonical);
                if !followed.is_dir() {
                    return Err(MutatorError::NotDirectory(parent));
                }
            }
            Stat::File { .. } => return Err(MutatorError::NotDirectory(parent)),
        }
    }
    Ok(())
}

fn write_atomic(
    roots: &Roots,
    path: &WorkspacePath,
    bytes: &[u8],
    mode: Option<u32>,
) -> Result<(), MutatorError> {
    let full = roots.writable(path)?;
    require_parent(roots, path)?;
    let mode = match (mode, stat_of(&full, path)?) {
        (_, Stat::Dir { .. }) => return Err(MutatorError::IsDirectory(path.clone())),
        (Some(mode), _) => mode,
        (None, Stat::File { mode, .. }) => mode,
        (None, Stat::Absent | Stat::Symlink { .. }) => DEFAULT_FILE_MODE,
    };
    // A fixed name beside the target, so that a write killed before its rename leaves a file
    // that crash recovery can find and remove without listing directories.
    let temp_path = partial_write_path(path).to_fs_path(&roots.canonical);
    let written = (|| -> std::io::Result<()> {
        let mut temp = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp_path)?;
        temp.write_all(bytes)?;
        temp.set_permissions(fs::Permissions::from_mode(mode))?;
        fs::rename(&temp_path, &full)
    })();
    if let Err(err) = written {
        let _ = fs::remove_file(&temp_path);
        return Err(io_error("write", path, err));
    }
    Ok(())
}

/// See [`Mutator::real_stat`]: one `lstat` per ancestor, in one blocking step.
fn real_stat(roots: &Roots, path: &WorkspacePath) -> Result<Stat, MutatorError> {
    for ancestor in path.ancestors() {
        let full = ancestor.to_fs_path(&roots.canonical);
        if !matches!(stat_of(&full, &ancestor)?, Stat::Dir { .. }) {
            return Ok(Stat::Absent);
        }
    }
    stat_of(&path.to_fs_path(&roots.canonical), path)
}

/// See [`Mutator::overwrite`].
/// What an overwrite writes: bytes in memory, or `len` bytes read from a reader.
enum Source<'a> {
    Bytes(&'a [u8]),
    Reader(&'a mut (dyn io::Read + Send), u64),
}

impl Source<'_> {
    fn len(&self) -> u64 {
        match self {
            Source::Bytes(bytes) => bytes.len() as u64,
            Source::Reader(_, len) => *len,
        }
    }

    /// Where the bytes come from, a piece at a time.
    fn reader(&mut self) -> Box<dyn io::Read + '_> {
        match self {
            Source::Bytes(bytes) => Box::new(*bytes),
            Source::Reader(reader, len) => Box::new(io::Read::take(&mut **reader, *len)),
        }
    }
}

/// See [`Mutator::overwrite`] and [`Mutator::overwrite_from`].
fn overwrite(
    roots: &Roots,
    path: &WorkspacePath,
    mut source: Source<'_>,
    mode: u32,
) -> Result<(), MutatorError> {
    let full = roots.writable(path)?;
    let in_place = match fs::symlink_metadata(&full) {
        Ok(meta) => meta.file_type().is_file() && meta.nlink() == 1,
        Err(_) => false,
    };
    let len = source.len();
    let replace = |source: Source<'_>| match source {
        Source::Bytes(bytes) => write_atomic(roots, path, bytes, Some(mode)),
        Source::Reader(reader, len) => {
            let bytes = read_exactly(reader, len)
                .map_err(|err| io_error("read the bytes to write to", path, err))?;
            write_atomic(roots, path, &bytes, Some(mode))
        }
    };
    if !in_place {
        return replace(source);
    }
    // `O_NOFOLLOW`: should the file have become a link since the check, the open fails
    // rather than writing where the link leads, and the write replaces the link instead.
    let open = |read: bool| {
        fs::OpenOptions::new()
            .read(read)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&full)
    };
    // A big file is read first, so that only the blocks that differ are written (and later
    // flushed): undoing an edit of a few lines in a big file writes a few blocks, not the
    // file. One that cannot be read (mode 200) is written whole.
    let big = len >= COMPARED_FROM as u64;
    let (mut file, compare) = match open(big) {
        Ok(file) => (file, big),
        Err(_) => match open(false) {
            Ok(file) => (file, false),
            Err(_) => return replace(source),
        },
    };
    let mut reader = source.reader();
    let copied = if compare {
        write_changed(&file, &mut reader)
    } else {
        io::copy(&mut reader, &mut file)
    };
    match copied {
        Ok(copied) if copied == len => {}
        // The bytes written so far stay: an overwrite is not atomic.
        Ok(_) => {
            let short = io::Error::from(ErrorKind::UnexpectedEof);
            return Err(io_error("read the bytes to write to", path, short));
        }
        Err(err) => return Err(io_error("write", path, err)),
    }
    let written = (|| -> io::Result<()> {
        file.set_len(len)?;
        if file.metadata()?.permissions().mode() & 0o7777 != mode {
            file.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        Ok(())
    })();
    written.map_err(|err| io_error("write", path, err))
}

/// Writes what `source` yields over `file` from its start, leaving alone the blocks of
/// [`BLOCK`] bytes that hold it already; returns how many bytes that was. The caller sets
/// the length.
fn write_changed(file: &fs::File, source: &mut dyn io::Read) -> io::Result<u64> {
    let mut piece = vec![0u8; READ_PIECE];
    let mut wanted = vec![0u8; READ_PIECE];
    let mut at = 0u64;
    loop {
        let want = read_full(source, &mut wanted)?;
        if want.is_empty() {
            return Ok(at);
        }
        let found = read_full_at(file, &mut piece[..want.len()], at)?;
        // Runs of blocks that differ (or lie past the file's end), one write each.
        let mut run: Option<usize> = None;
        let mut offset = 0;
        while offset <= want.len() {
            let end = want.len().min(offset + BLOCK);
            let differs = offset < want.len()
                && (end > found.len() || want[offset..end] != found[offset..end]);
            match (differs, run) {
                (true, None) => run = Some(offset),
                (false, Some(start)) => {
                    file.write_all_at(&want[start..offset], at + start as u64)?;
                    run = None;
                }
                _ => {}
            }
            offset += BLOCK;
        }
        if let Some(start) = run {
            file.write_all_at(&want[start..], at + start as u64)?;
        }
        at += want.len() as u64;
    }
}

/// Reads from `source` until `buf` is full or the source ends; returns what was read.
fn read_full<'a>(source: &mut dyn io::Read, buf: &'a mut [u8]) -> io::Result<&'a [u8]> {
    let mut filled = 0;
    while filled < buf.len() {
        match source.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(&buf[..filled])
}

/// Reads into `buf` at `offset` until it is full or the file ends; returns what was read.
fn read_full_at<'a>(file: &fs::File, buf: &'a mut [u8], offset: u64) -> io::Result<&'a [u8]> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(&buf[..filled])
}

/// See [`Mutator::sync`]: flushes each path that is a file or a directory, then each parent
/// directory (an entry created, removed or renamed lives there).
fn flush(roots: &Roots, paths: &[WorkspacePath]) -> io::Result<()> {
    let mut files = Vec::new();
    let mut dirs = std::collections::BTreeSet::new();
    for path in paths {
        let full = path.to_fs_path(&roots.canonical);
        match fs::symlink_metadata(&full) {
            Ok(meta) if meta.is_file() => files.push(full.clone()),
            Ok(meta) if meta.is_dir() => {
                dirs.insert(full.clone());
            }
            _ => {}
        }
        let parent = path.parent().map_or_else(
            || roots.canonical.clone(),
            |parent| parent.to_fs_path(&roots.canonical),
        );
        dirs.insert(parent);
    }
    flush_each(&files)?;
    // A parent removed by the same operation is gone; its own parent is flushed instead.
    let dirs: Vec<PathBuf> = dirs.into_iter().filter(|dir| dir.is_dir()).collect();
    flush_each(&dirs)
}

/// Flushes each file or directory, a few hundred open at a time. One that is gone by now
/// (another program removed it) has nothing left to flush.
fn flush_each(paths: &[PathBuf]) -> io::Result<()> {
    const OPEN_AT_ONCE: usize = 256;
    for chunk in paths.chunks(OPEN_AT_ONCE) {
        let mut files = Vec::with_capacity(chunk.len());
        for path in chunk {
            match fs::File::open(path) {
                Ok(file) => files.push(file),
                Err(err) if err.kind() == ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
        }
        sync_data_all(&files.iter().collect::<Vec<_>>())?;
    }
    Ok(())
}

/// Flushes the data of every file (`fdatasync`), on several threads when there are many:
/// each flush waits for the device, and concurrent flushes share the wait (on the machine of
/// `docs/performance.md`, a thousand take about a third of the time they take one after
/// another). Shared with the undo store, which flushes its blobs the same way.
pub fn sync_data_all(files: &[&fs::File]) -> io::Result<()> {
    const THREADS: usize = 8;
    if files.len() < 2 * THREADS {
        return files.iter().try_for_each(|file| file.sync_data());
    }
    std::thread::scope(|scope| {
        let workers: Vec<_> = files
            .chunks(files.len().div_ceil(THREADS))
            .map(|part| scope.spawn(move || part.iter().try_for_each(|file| file.sync_data())))
            .collect();
        workers.into_iter().try_for_each(|worker| {
            worker
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("a flushing thread failed")))
        })
    })
}

#[async_trait]
impl Mutator for FsMutator {
    fn root(&self) -> &Path {
        &self.inner.root
    }

    async fn stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| stat_of(&roots.checked(&path)?, &path))
            .await
    }

    async fn read(&self, path: &WorkspacePath) -> Result<Vec<u8>, MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| {
            let full = roots.checked_following(&path)?;
            fs::read(&full).map_err(|err| io_error("read", &path, err))
        })
        .await
    }

    async fn read_into(
        &self,
        path: &WorkspacePath,
        mut buf: Vec<u8>,
    ) -> Result<Vec<u8>, MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| {
            let full = roots.checked_following(&path)?;
            buf.clear();
            fs::File::open(&full)
                .and_then(|mut file| std::io::Read::read_to_end(&mut file, &mut buf))
                .map_err(|err| io_error("read", &path, err))?;
            Ok(buf)
        })
        .await
    }

    /// Inline, through one buffer of 64 KiB; otherwise (on another thread) the
    /// whole file is read there and handed over at once.
    async fn read_with(
        &self,
        path: &WorkspacePath,
        sink: &mut (dyn for<'b> FnMut(&'b [u8]) + Send),
    ) -> Result<u64, MutatorError> {
        if !self.inline {
            let bytes = self.read(path).await?;
            sink(&bytes);
            return Ok(bytes.len() as u64);
        }
        let full = self.inner.checked_following(path)?;
        let failed = |err| io_error("read", path, err);
        let mut file = fs::File::open(&full).map_err(failed)?;
        let mut piece = vec![0u8; READ_PIECE];
        let mut total = 0;
        loop {
            match std::io::Read::read(&mut file, &mut piece) {
                Ok(0) => return Ok(total),
                Ok(n) => {
                    sink(&piece[..n]);
                    total += n as u64;
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(failed(err)),
            }
        }
    }

    async fn read_dir(&self, path: &WorkspacePath) -> Result<Vec<DirEntry>, MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| {
            let full = roots.checked_following(&path)?;
            let mut entries = Vec::new();
            for entry in fs::read_dir(&full).map_err(|err| io_error("list", &path, err))? {
                let entry = entry.map_err(|err| io_error("list", &path, err))?;
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                let child = path.join(name)?;
                let stat = stat_of(&entry.path(), &child)?;
                entries.push(DirEntry { path: child, stat });
            }
            entries.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(entries)
        })
        .await
    }

    async fn write(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        mode: Option<u32>,
    ) -> Result<(), MutatorError> {
        if self.inline {
            // No copy of the bytes for another thread.
            return write_atomic(&self.inner, path, bytes, mode);
        }
        let path = path.clone();
        let bytes = bytes.to_vec();
        self.blocking(move |roots| write_atomic(roots, &path, &bytes, mode))
            .await
    }

    async fn real_stat(&self, path: &WorkspacePath) -> Result<Stat, MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| real_stat(roots, &path)).await
    }

    async fn overwrite(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), MutatorError> {
        if self.inline {
            return overwrite(&self.inner, path, Source::Bytes(bytes), mode);
        }
        let path = path.clone();
        let bytes = bytes.to_vec();
        self.blocking(move |roots| overwrite(roots, &path, Source::Bytes(&bytes), mode))
            .await
    }

    /// Inline, a piece at a time; otherwise the bytes are read first, then written on
    /// another thread.
    async fn overwrite_from(
        &self,
        path: &WorkspacePath,
        source: &mut (dyn io::Read + Send),
        len: u64,
        mode: u32,
    ) -> Result<(), MutatorError> {
        if self.inline {
            return overwrite(&self.inner, path, Source::Reader(source, len), mode);
        }
        let bytes = read_exactly(source, len)
            .map_err(|err| io_error("read the bytes to write to", path, err))?;
        self.overwrite(path, &bytes, mode).await
    }

    async fn set_mode(&self, path: &WorkspacePath, mode: u32) -> Result<(), MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| {
            let full = roots.writable(&path)?;
            match stat_of(&full, &path)? {
                Stat::Absent => Err(MutatorError::NotFound(path)),
                // Changing a link's mode would change its target's; links have no mode of their own.
                Stat::Symlink { .. } => Err(MutatorError::Io {
                    op: "chmod",
                    path,
                    source: io::Error::other("symbolic links have no mode"),
                }),
                Stat::File { .. } | Stat::Dir { .. } => {
                    fs::set_permissions(&full, fs::Permissions::from_mode(mode))
                        .map_err(|err| io_error("chmod", &path, err))
                }
            }
        })
        .await
    }

    async fn create_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| {
            let full = roots.writable(&path)?;
            require_parent(roots, &path)?;
            fs::create_dir(&full).map_err(|err| io_error("create directory", &path, err))?;
            fs::set_permissions(&full, fs::Permissions::from_mode(super::DEFAULT_DIR_MODE))
                .map_err(|err| io_error("chmod", &path, err))
        })
        .await
    }

    async fn symlink(&self, target: &str, path: &WorkspacePath) -> Result<(), MutatorError> {
        let path = path.clone();
        let target = target.to_owned();
        self.blocking(move |roots| {
            let full = roots.writable(&path)?;
            require_parent(roots, &path)?;
            symlink(&target, &full).map_err(|err| io_error("create symlink", &path, err))
        })
        .await
    }

    async fn remove_file(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| {
            let full = roots.writable(&path)?;
            match stat_of(&full, &path)? {
                Stat::Absent => Err(MutatorError::NotFound(path)),
                Stat::Dir { .. } => Err(MutatorError::IsDirectory(path)),
                Stat::File { .. } | Stat::Symlink { .. } => {
                    fs::remove_file(&full).map_err(|err| io_error("remove", &path, err))
                }
            }
        })
        .await
    }

    async fn remove_dir(&self, path: &WorkspacePath) -> Result<(), MutatorError> {
        let path = path.clone();
        self.blocking(move |roots| {
            let full = roots.writable(&path)?;
            match stat_of(&full, &path)? {
                Stat::Absent => Err(MutatorError::NotFound(path)),
                Stat::Dir { .. } => {
                    fs::remove_dir(&full).map_err(|err| io_error("remove directory", &path, err))
                }
                Stat::File { .. } | Stat::Symlink { .. } => Err(MutatorError::NotDirectory(path)),
            }
        })
        .await
    }

    async fn sync(&self, paths: &[WorkspacePath]) -> Result<(), MutatorError> {
        let paths = paths.to_vec();
        self.blocking(move |roots| flush(roots, &paths).map_err(MutatorError::Sync))
            .await
    }

    async fn rename(&self, from: &WorkspacePath, to: &WorkspacePath) -> Result<(), MutatorError> {
        let (from, to) = (from.clone(), to.clone());
        self.blocking(move |roots| {
            let source = roots.writable(&from)?;
            let dest = roots.writable(&to)?;
            match stat_of(&source, &from)? {
                Stat::Absent => return Err(MutatorError::NotFound(from)),
                Stat::Dir { .. } => return Err(MutatorError::IsDirectory(from)),
                Stat::File { .. } | Stat::Symlink { .. } => {}
            }
            if let Stat::Dir { .. } = stat_of(&dest, &to)? {
                return Err(MutatorError::IsDirectory(to));
            }
            require_parent(roots, &to)?;
            fs::rename(&source, &dest).map_err(|err| io_error("rename", &from, err))
        })
        .await
    }
}
