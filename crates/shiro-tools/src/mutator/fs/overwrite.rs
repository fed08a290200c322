//! The in-place overwrite a restore uses: only the blocks that differ are written, so undoing
//! a one-line edit of a big file writes a block, not the file.

use std::fs;
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::FileExt;

use rustix::fs::{FileType, Mode, OFlags};

use super::{READ_PIECE, Roots, stat_in, write_atomic};
use crate::mutator::fs_jail::io_error;
use crate::mutator::{MutatorError, Stat, read_exactly};
use crate::path::WorkspacePath;

/// [`Mutator::overwrite`] compares a file at least this big with what it writes, and writes
/// only the blocks that differ.
const COMPARED_FROM: usize = 64 * 1024;

/// The unit that [`Mutator::overwrite`] compares and writes: a page, and a block of most
/// file systems.
const BLOCK: usize = 4096;

/// What an overwrite writes: bytes in memory, or `len` bytes read from a reader.
pub(super) enum Source<'a> {
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
pub(super) fn overwrite(
    roots: &Roots,
    path: &WorkspacePath,
    mut source: Source<'_>,
    mode: u32,
) -> Result<(), MutatorError> {
    let dir = roots.parent_for_change(path)?;
    let len = source.len();
    let replace = |source: Source<'_>| match source {
        Source::Bytes(bytes) => write_atomic(roots, path, bytes, Some(mode)),
        Source::Reader(reader, len) => {
            let bytes = read_exactly(reader, len)
                .map_err(|err| io_error("read the bytes to write to", path, err))?;
            write_atomic(roots, path, &bytes, Some(mode))
        }
    };
    // `O_NOFOLLOW` and `O_NONBLOCK`: what is there now is opened only if it is a file, and
    // a named pipe put there is never waited on; what was opened is checked below, so a
    // file swapped in since is judged by what it is.
    let open = |read: bool| {
        let access = if read { OFlags::RDWR } else { OFlags::WRONLY };
        rustix::fs::openat(
            &dir,
            path.file_name(),
            access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
    };
    // A big file is read first, so that only the blocks that differ are written (and later
    // flushed): undoing an edit of a few lines in a big file writes a few blocks, not the
    // file. One that cannot be read (mode 200) is written whole.
    let big = len >= COMPARED_FROM as u64;
    let opened = match open(big) {
        Ok(fd) => Some((fd, big)),
        Err(_) if big => open(false).ok().map(|fd| (fd, false)),
        Err(_) => None,
    };
    // Only a lone regular file is written in place; anything else (nothing there, a link,
    // a file with other names) is replaced, so the bytes never reach another name.
    let Some((fd, compare)) = opened.filter(|(fd, _)| {
        rustix::fs::fstat(fd).is_ok_and(|stat| {
            FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile && stat.st_nlink == 1
        })
    }) else {
        if let Stat::File { .. } | Stat::Absent | Stat::Symlink { .. } = stat_in(&dir, path)? {
            return replace(source);
        }
        return Err(MutatorError::IsDirectory(path.clone()));
    };
    let mut file = fs::File::from(fd);
    let copied = match (&mut source, compare) {
        (_, true) => write_changed(&file, &mut source.reader()),
        // In one call where the bytes are in memory: a copy goes 8 KiB at a time.
        (Source::Bytes(bytes), false) => file.write_all(bytes).map(|()| len),
        (Source::Reader(..), false) => io::copy(&mut source.reader(), &mut file),
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
        // One look after writing gives both what is left past the bytes written (the file
        // was longer) and the mode (writing clears the set-user-ID and set-group-ID bits).
        let after = rustix::fs::fstat(&file)?;
        if u64::try_from(after.st_size) != Ok(len) {
            file.set_len(len)?;
        }
        let now = after.st_mode & 0o7777;
        if now != mode {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
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
