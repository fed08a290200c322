//! Opening a file that must be a regular one, in a way that never blocks.
//!
//! A named pipe where a command file is expected would block a plain `open` until something
//! writes to it, so the load (and `shiro commands check`) would hang; a device may do
//! anything when opened. So the file's type is looked at first, and not opened unless it is
//! a regular file; the open itself is non-blocking, and the type is checked again on what
//! was opened, so that a file swapped for a pipe in between cannot block either.

use std::fs::{File, FileType};
use std::os::unix::fs::FileTypeExt as _;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use crate::parse::{Diagnostic, Severity};

/// Why a file was not opened.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// It is not a regular file; what it is instead, for messages (`a named pipe`).
    NotRegular(&'static str),
    /// The system refused (a missing file is `NotFound`).
    Io(std::io::Error),
}

/// Opens `path` (links followed) for reading, if it is a regular file; never blocks on a
/// named pipe and never opens a device.
pub(crate) fn open_regular(path: &Path) -> Result<File, OpenError> {
    let before = std::fs::metadata(path).map_err(OpenError::Io)?;
    regular(before.file_type())?;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let fd = rustix::fs::open(path, flags, Mode::empty())
        .map_err(|errno| OpenError::Io(errno.into()))?;
    let file = File::from(fd);
    // What was opened may not be what was looked at: check it again, on the open file.
    let after = file.metadata().map_err(OpenError::Io)?;
    regular(after.file_type())?;
    // Reading a regular file never blocks, non-blocking or not, so the flag can stay.
    Ok(file)
}

/// `Ok` for a regular file, else what it is.
fn regular(file_type: FileType) -> Result<(), OpenError> {
    if file_type.is_file() {
        return Ok(());
    }
    Err(OpenError::NotRegular(describe(file_type)))
}

/// The error for a command file, or a skill's `SKILL.md`, that is `what` (from
/// [`describe`]) rather than a regular file.
pub(crate) fn not_regular(path: &Path, what: &str) -> Diagnostic {
    Diagnostic::whole_file(
        path,
        Severity::Error,
        format!("not a regular file ({what}), skipped"),
    )
}

/// What a file that is not a regular one is, for messages.
pub(crate) fn describe(file_type: FileType) -> &'static str {
    if file_type.is_dir() {
        "a folder"
    } else if file_type.is_fifo() {
        "a named pipe"
    } else if file_type.is_char_device() || file_type.is_block_device() {
        "a device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "another kind of file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_pipe_is_refused_without_blocking() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let pipe = dir.path().join("pipe");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &pipe,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .expect("a named pipe");
        assert!(matches!(
            open_regular(&pipe),
            Err(OpenError::NotRegular("a named pipe"))
        ));
        assert!(matches!(
            open_regular(dir.path()),
            Err(OpenError::NotRegular("a folder"))
        ));
        assert!(matches!(
            open_regular(Path::new("/dev/null")),
            Err(OpenError::NotRegular("a device"))
        ));
        let file = dir.path().join("file");
        std::fs::write(&file, "text").expect("a file");
        let mut text = String::new();
        std::io::Read::read_to_string(&mut open_regular(&file).expect("opened"), &mut text)
            .expect("read");
        assert_eq!(text, "text");
        assert!(matches!(
            open_regular(&dir.path().join("missing")),
            Err(OpenError::Io(err)) if err.kind() == std::io::ErrorKind::NotFound
        ));
    }
}
