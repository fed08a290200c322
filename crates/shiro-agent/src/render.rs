//! Text shown to people: unified diffs, with colour only on a terminal.

use similar::{ChangeTag, TextDiff};

/// Whether output gets ANSI colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Color {
    /// Plain text (a pipe, a file, or `NO_COLOR` set).
    Never,
    /// ANSI colours (a terminal).
    Always,
}

impl Color {
    /// Colour on a terminal unless `NO_COLOR` is set to anything but the empty text
    /// (<https://no-color.org>); the caller reads the variable.
    pub fn detect(is_terminal: bool, no_color: Option<&str>) -> Self {
        let no_color = no_color.is_some_and(|v| !v.is_empty());
        if is_terminal && !no_color {
            Color::Always
        } else {
            Color::Never
        }
    }

    fn paint(self, code: &str, text: &str) -> String {
        match self {
            Color::Never => text.to_owned(),
            Color::Always => format!("\x1b[{code}m{text}\x1b[0m"),
        }
    }
}

/// One side of a diff: what a path holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Side {
    /// Nothing at the path.
    Absent,
    /// A regular file's bytes and mode.
    File(Vec<u8>, u32),
    /// A regular file over [`shiro_undo::PREVIEW_MAX_BYTES`], whose bytes are not read: its
    /// length, mode and hash (which tells two versions apart).
    Big {
        /// Length in bytes.
        len: u64,
        /// Unix permission bits.
        mode: u32,
        /// The hash of its bytes.
        hash: shiro_undo::ContentHash,
    },
    /// A directory.
    Dir,
    /// A symbolic link to a target.
    Symlink(String),
}

/// A unified diff of one path from `old` to `new`, `git diff` style.
pub fn diff(path: &str, old: &Side, new: &Side, color: Color) -> String {
    let mut out = String::new();
    let header = |out: &mut String, line: String| {
        out.push_str(&color.paint("1", &line));
        out.push('\n');
    };
    header(&mut out, format!("--- {}", label("a", path, old)));
    header(&mut out, format!("+++ {}", label("b", path, new)));
    if let (Some(mode_a), Some(mode_b)) = (old.file_mode(), new.file_mode())
        && mode_a != mode_b
    {
        out.push_str(&format!("mode {mode_a:o} -> {mode_b:o}\n"));
    }
    match (old, new) {
        (Side::Big { .. }, _) | (_, Side::Big { .. }) if old.file_hash() != new.file_hash() => {
            out.push_str(&format!(
                "Large files differ ({} -> {} bytes; diffs are shown up to {} MiB)\n",
                old.file_len(),
                new.file_len(),
                shiro_undo::PREVIEW_MAX_BYTES >> 20
            ));
        }
        (Side::Big { .. }, _) | (_, Side::Big { .. }) => {}
        (Side::File(a, _), Side::File(b, _)) => out.push_str(&text_diff(a, b, color)),
        (Side::File(a, _), _) => out.push_str(&text_diff(a, b"", color)),
        (_, Side::File(b, _)) => out.push_str(&text_diff(b"", b, color)),
        _ => {}
    }
    for (side, sign, code) in [(old, '-', "31"), (new, '+', "32")] {
        match side {
            Side::Dir => out.push_str(&color.paint(code, &format!("{sign}(directory)\n"))),
            Side::Symlink(target) => {
                out.push_str(&color.paint(code, &format!("{sign}(symbolic link to {target})\n")));
            }
            Side::Absent | Side::File(..) | Side::Big { .. } => {}
        }
    }
    out
}

impl Side {
    /// A regular file's mode.
    fn file_mode(&self) -> Option<u32> {
        match self {
            Side::File(_, mode) | Side::Big { mode, .. } => Some(*mode),
            Side::Absent | Side::Dir | Side::Symlink(_) => None,
        }
    }

    /// A regular file's length; 0 for anything else.
    fn file_len(&self) -> u64 {
        match self {
            Side::File(bytes, _) => bytes.len() as u64,
            Side::Big { len, .. } => *len,
            Side::Absent | Side::Dir | Side::Symlink(_) => 0,
        }
    }

    /// A regular file's hash (computed for a file whose bytes are held).
    fn file_hash(&self) -> Option<shiro_undo::ContentHash> {
        match self {
            Side::File(bytes, _) => Some(shiro_undo::ContentHash::of(bytes)),
            Side::Big { hash, .. } => Some(*hash),
            Side::Absent | Side::Dir | Side::Symlink(_) => None,
        }
    }
}

fn label(prefix: &str, path: &str, side: &Side) -> String {
    match side {
        Side::Absent => "/dev/null".to_owned(),
        _ => format!("{prefix}/{path}"),
    }
}

fn text_diff(old: &[u8], new: &[u8], color: Color) -> String {
    let (Ok(old), Ok(new)) = (std::str::from_utf8(old), std::str::from_utf8(new)) else {
        return format!(
            "Binary files differ ({} -> {} bytes)\n",
            old.len(),
            new.len()
        );
    };
    if old.contains('\0') || new.contains('\0') {
        return format!(
            "Binary files differ ({} -> {} bytes)\n",
            old.len(),
            new.len()
        );
    }
    let diff = TextDiff::from_lines(old, new);
    let mut out = String::new();
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        out.push_str(&color.paint("36", &hunk.header().to_string()));
        out.push('\n');
        for change in hunk.iter_changes() {
            let (sign, code) = match change.tag() {
                ChangeTag::Delete => ("-", "31"),
                ChangeTag::Insert => ("+", "32"),
                ChangeTag::Equal => (" ", ""),
            };
            let mut line = format!("{sign}{}", change.value());
            let missing_newline = !line.ends_with('\n');
            if missing_newline {
                line.push('\n');
            }
            out.push_str(&if code.is_empty() {
                line
            } else {
                color.paint(code, &line)
            });
            if missing_newline {
                out.push_str("\\ No newline at end of file\n");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_edits_creations_deletions_and_kinds() {
        let file = |s: &str| Side::File(s.as_bytes().to_vec(), 0o644);
        let mut out = String::new();
        out += &diff(
            "a.txt",
            &file("one\ntwo\nthree\n"),
            &file("one\n2\nthree"),
            Color::Never,
        );
        out += &diff("new.txt", &Side::Absent, &file("hello\n"), Color::Never);
        out += &diff("old.txt", &file("bye\n"), &Side::Absent, Color::Never);
        out += &diff(
            "run.sh",
            &Side::File(b"x\n".to_vec(), 0o644),
            &Side::File(b"x\n".to_vec(), 0o755),
            Color::Never,
        );
        out += &diff(
            "bin",
            &Side::File(vec![0, 1], 0o644),
            &Side::File(vec![0, 2, 3], 0o644),
            Color::Never,
        );
        out += &diff(
            "d",
            &Side::Dir,
            &Side::Symlink("target".into()),
            Color::Never,
        );
        insta::assert_snapshot!(out);
    }

    /// A file past the preview limit is shown by its lengths; its mode still shows, and two
    /// versions with the same bytes show no change of bytes.
    #[test]
    fn shows_big_files_by_their_lengths() {
        let big = |fill: u8, len: u64, mode: u32| Side::Big {
            len,
            mode,
            hash: shiro_undo::ContentHash::of(&[fill]),
        };
        let small = Side::File(b"small\n".to_vec(), 0o644);
        let mut out = String::new();
        out += &diff(
            "grown.bin",
            &big(1, 9 << 20, 0o644),
            &big(2, 10 << 20, 0o644),
            Color::Never,
        );
        out += &diff("was-small", &small, &big(3, 9 << 20, 0o644), Color::Never);
        out += &diff(
            "gone.bin",
            &big(4, 9 << 20, 0o644),
            &Side::Absent,
            Color::Never,
        );
        out += &diff(
            "run.bin",
            &big(5, 9 << 20, 0o644),
            &big(5, 9 << 20, 0o755),
            Color::Never,
        );
        insta::assert_snapshot!(out);
    }

    #[test]
    fn colours_only_when_asked() {
        let out = diff(
            "a",
            &Side::Absent,
            &Side::File(b"x\n".to_vec(), 0o644),
            Color::Always,
        );
        assert!(out.contains("\x1b[32m+x\n\x1b[0m"), "{out:?}");
    }
}
