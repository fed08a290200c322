//! Codex's patch format: parsing a patch and applying its hunks to a text file.
//!
//! This module is pure: it never touches a file. [`parse`] turns patch text into a [`Patch`]
//! (every error names the patch line), and [`apply_hunks`] applies the hunks of one
//! `*** Update File` section to a decoded [`TextFile`](crate::text::TextFile). The `apply_patch` tool reads and writes
//! the files through a `Mutator`.
//!
//! ```
//! use shiro_tools::patch::{self, Operation};
//! use shiro_tools::text::TextFile;
//!
//! let patch = patch::parse(
//!     "*** Begin Patch\n*** Update File: greet.txt\n@@ fn greet\n-    hello\n+    hi\n*** End Patch\n",
//! )
//! .unwrap();
//! let Operation::Update { hunks, .. } = &patch.operations[0] else { unreachable!() };
//! let file = TextFile::decode(b"fn main\n    hello\nfn greet\n    hello\n").unwrap();
//! let edited = patch::apply_hunks(&file, hunks).unwrap();
//! assert_eq!(edited.body, "fn main\n    hello\nfn greet\n    hi\n");
//! ```

mod apply;
mod parse;

pub use apply::{HunkError, HunkErrorKind, apply_hunks, seek};
pub use parse::{PatchError, parse};

/// A parsed patch: the file operations in the order they appear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// Which envelope the patch used.
    pub envelope: Envelope,
    /// The directory of a `cd <dir> && apply_patch <<'EOF'` wrapper, as written: the patch's
    /// relative paths are relative to it. `None` without that wrapper.
    pub workdir: Option<String>,
    /// The file operations, in patch order; never empty.
    pub operations: Vec<Operation>,
}

/// The two envelopes accepted around the file operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Envelope {
    /// Codex's `*** Begin Patch` … `*** End Patch`.
    Codex,
    /// The seed's simpler form: file markers without `*** Begin Patch`/`*** End Patch`.
    Simple,
}

/// One file operation of a patch. Paths are as written in the patch, not yet jailed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operation {
    /// `*** Add File: path` followed by `+` lines.
    Add {
        /// The file to create.
        path: String,
        /// The patch line of the marker (1-based).
        line: usize,
        /// The new file's text: each `+` line followed by `\n`.
        contents: String,
    },
    /// `*** Delete File: path`.
    Delete {
        /// The file to delete.
        path: String,
        /// The patch line of the marker (1-based).
        line: usize,
    },
    /// `*** Update File: path`, an optional `*** Move to: path`, then hunks.
    Update {
        /// The file to change.
        path: String,
        /// Where to move it, if anywhere.
        move_to: Option<String>,
        /// The patch line of the marker (1-based).
        line: usize,
        /// The changes, in file order; empty only for a pure move.
        hunks: Vec<Hunk>,
    },
}

impl Operation {
    /// The path the operation names first (the source of a move).
    pub fn path(&self) -> &str {
        match self {
            Operation::Add { path, .. }
            | Operation::Delete { path, .. }
            | Operation::Update { path, .. } => path,
        }
    }

    /// The patch line of the operation's marker (1-based).
    pub fn line(&self) -> usize {
        match self {
            Operation::Add { line, .. }
            | Operation::Delete { line, .. }
            | Operation::Update { line, .. } => *line,
        }
    }
}

/// One hunk of an `*** Update File` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The patch line where the hunk starts (its first `@@` line, or its first change line).
    pub line: usize,
    /// The `@@ text` anchors, sought one after the other before the hunk's lines.
    pub anchors: Vec<String>,
    /// The hunk's lines in order.
    pub lines: Vec<HunkLine>,
    /// Whether `*** End of File` pins the hunk to the end of the file.
    pub end_of_file: bool,
}

impl Hunk {
    /// The lines the file must contain: context and `-` lines, in order.
    pub fn old_lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter_map(|line| match line {
            HunkLine::Context(text) | HunkLine::Remove(text) => Some(text.as_str()),
            HunkLine::Add(_) => None,
        })
    }
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    /// ` text`: must match the file, and is kept as the file has it.
    Context(String),
    /// `-text`: must match the file, and is removed.
    Remove(String),
    /// `+text`: inserted.
    Add(String),
}

impl std::fmt::Display for HunkLine {
    /// The line as it is written in a patch.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HunkLine::Context(text) => write!(f, " {text}"),
            HunkLine::Remove(text) => write!(f, "-{text}"),
            HunkLine::Add(text) => write!(f, "+{text}"),
        }
    }
}
