//! `@path` in a typed prompt: the file (its text) or directory (its listing) it names is
//! attached to the message the model gets, after the prompt, in a block that names the path.
//! The prompt itself stays as typed. The references are found, and the files read, by
//! shiro-commands' rules and reader for a command's `@path` (jailed to the workspace, binary
//! files refused), so a prompt and a command read the same files the same way.
//!
//! The message with its attachments is what the history holds, so `/undo` rewinds it and
//! `--resume` brings it back like any message.

use std::fmt::Write as _;
use std::path::Path;

use shiro_commands::{FileOutcome, FileReader, FsReader};

/// The most of one file that is attached, in bytes.
pub const FILE_CAP: usize = 100 * 1024;
/// The most that one prompt's attachments hold together, in bytes; a file past it is not
/// attached, and the one that reaches it is cut.
pub const TOTAL_CAP: usize = 256 * 1024;

/// A prompt with what its `@path`s attach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attached {
    /// The message for the model: the prompt as typed, then one block per attachment.
    pub message: String,
    /// One line for the user per `@path` that names a file: what was attached, or why not
    /// (`(attached src/main.rs: 120 lines)`). An `@word` that names nothing and does not look
    /// like a path (`@me`) gets none.
    pub notes: Vec<String>,
}

/// Reads what `prompt`'s `@path`s name in the workspace at `root` and attaches it.
pub async fn attach(root: &Path, prompt: &str) -> Attached {
    let mut paths: Vec<&str> = Vec::new();
    for path in shiro_commands::file_references(prompt) {
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    let mut attached = Attached {
        message: prompt.to_owned(),
        notes: Vec::new(),
    };
    if paths.is_empty() {
        return attached;
    }
    let reader = match FsReader::new(root) {
        Ok(reader) => reader,
        Err(err) => {
            attached.notes.push(format!(
                "(nothing attached: cannot read the workspace: {err})"
            ));
            return attached;
        }
    };
    let mut left = TOTAL_CAP;
    let mut blocks = Vec::new();
    for path in paths {
        let reader = reader.clone().with_cap(FILE_CAP.min(left));
        let outcome = reader.read(path).await;
        let note = match outcome {
            FileOutcome::Contents { .. } | FileOutcome::Directory { .. } if left == 0 => format!(
                "(not attached: {path}: a prompt's attachments hold at most {} KiB together)",
                TOTAL_CAP / 1024
            ),
            FileOutcome::Contents { text, truncated } => {
                left = left.saturating_sub(text.len());
                let lines = text.lines().count();
                let mut block = format!("<attachment path=\"{path}\">\n{text}");
                if !text.is_empty() && !text.ends_with('\n') {
                    block.push('\n');
                }
                if truncated {
                    let _ = writeln!(
                        block,
                        "[cut: only the first {} bytes of {path} are attached]",
                        text.len()
                    );
                }
                block.push_str("</attachment>");
                blocks.push(block);
                if truncated {
                    format!(
                        "(attached {path}: its first {} lines, cut at {} KiB)",
                        lines,
                        text.len().div_ceil(1024)
                    )
                } else {
                    format!("(attached {path}: {})", count(lines, "line", "lines"))
                }
            }
            FileOutcome::Directory { entries, more } => {
                let mut block = format!("<attachment path=\"{path}\" kind=\"directory\">\n");
                for entry in &entries {
                    block.push_str(entry);
                    block.push('\n');
                }
                if more > 0 {
                    let _ = writeln!(block, "… and {more} more");
                }
                if entries.is_empty() && more == 0 {
                    block.push_str("(empty)\n");
                }
                block.push_str("</attachment>");
                left = left.saturating_sub(block.len());
                blocks.push(block);
                let total = entries.len() + more;
                format!(
                    "(attached {path}: a directory of {})",
                    count(total, "entry", "entries")
                )
            }
            FileOutcome::Missing if shiro_commands::looks_like_a_path(&reader, path).await => {
                format!("(not attached: there is no {path} in the workspace)")
            }
            FileOutcome::Missing => continue,
            FileOutcome::Refused { reason } => format!("(not attached: {reason})"),
        };
        attached.notes.push(note);
    }
    for block in blocks {
        attached.message.push_str("\n\n");
        attached.message.push_str(&block);
    }
    attached
}

/// A saved user message as its author typed it, and what was added after it: the
/// `@path` attachments and `-p`'s piped input (`<stdin>`), counted, for a transcript shown
/// again (a resumed session) where the blocks themselves would bury the prompt.
pub fn typed_prompt(message: &str) -> (&str, Added) {
    let starts = ["\n\n<attachment path=\"", "\n\n<stdin>\n"];
    let Some(cut) = starts.iter().filter_map(|start| message.find(start)).min() else {
        return (message, Added::default());
    };
    let rest = &message[cut..];
    let added = Added {
        attachments: rest.matches("\n\n<attachment path=\"").count(),
        stdin: rest.contains("\n\n<stdin>\n"),
    };
    (&message[..cut], added)
}

/// What a message holds after the prompt as typed (see [`typed_prompt`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Added {
    /// How many `@path` blocks.
    pub attachments: usize,
    /// Whether piped input follows.
    pub stdin: bool,
}

impl Added {
    /// `(2 attachments and piped input)`, or `None` when nothing was added.
    pub fn note(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.attachments > 0 {
            parts.push(count(self.attachments, "attachment", "attachments"));
        }
        if self.stdin {
            parts.push("piped input".to_owned());
        }
        (!parts.is_empty()).then(|| format!("({})", parts.join(" and ")))
    }
}

/// `1 line`, `2 lines`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A path a partial `@path` may complete to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathChoice {
    /// The path, as a menu shows it.
    pub display: String,
    /// What replaces the typed word: `@` and the path.
    pub replacement: String,
}

/// Workspace paths starting with `partial`, as `@path` (directories end with `/`).
pub fn complete_path(root: &Path, partial: &str) -> Vec<PathChoice> {
    let (dir, stem) = match partial.rfind('/') {
        Some(slash) => (&partial[..=slash], &partial[slash + 1..]),
        None => ("", partial),
    };
    if dir.split('/').any(|part| part == "..") || dir.starts_with('/') {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
        return Vec::new();
    };
    let mut pairs: Vec<PathChoice> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with(stem) || (name.starts_with('.') && !stem.starts_with('.')) {
                return None;
            }
            let slash = if entry.file_type().is_ok_and(|t| t.is_dir()) {
                "/"
            } else {
                ""
            };
            let path = format!("{dir}{name}{slash}");
            Some(PathChoice {
                display: path.clone(),
                replacement: format!("@{path}"),
            })
        })
        .collect();
    pairs.sort_by(|a, b| a.display.cmp(&b.display));
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completes_paths_inside_the_workspace_only() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("src")).unwrap();
        std::fs::write(root.path().join("src/main.rs"), "").unwrap();
        std::fs::write(root.path().join("Cargo.toml"), "").unwrap();
        let names = |partial: &str| -> Vec<String> {
            complete_path(root.path(), partial)
                .into_iter()
                .map(|p| p.replacement)
                .collect()
        };
        assert_eq!(names("s"), vec!["@src/"]);
        assert_eq!(names("src/"), vec!["@src/main.rs"]);
        assert_eq!(names(""), vec!["@Cargo.toml", "@src/"]);
        assert!(names("../").is_empty());
    }

    /// The message and the notes, as one text.
    async fn check(root: &Path, prompt: &str) -> String {
        let attached = attach(root, prompt).await;
        format!(
            "{}\n--- notes\n{}",
            attached.message,
            attached.notes.join("\n")
        )
    }

    fn workspace() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("src/empty")).unwrap();
        std::fs::write(root.path().join("src/main.rs"), "fn main() {\n}\n").unwrap();
        std::fs::write(root.path().join("notes.txt"), "no final newline").unwrap();
        std::fs::write(root.path().join("logo.png"), b"\x89PNG\r\n\x1a\n\0\0").unwrap();
        root
    }

    /// A saved message splits back into the prompt as typed and a count of what was added:
    /// attachments (as [`attach`] writes them) and `-p`'s piped input.
    #[tokio::test]
    async fn a_saved_message_splits_into_the_typed_prompt_and_what_was_added() {
        let root = workspace();
        let typed = "compare @src/main.rs\nwith @notes.txt and @nothing.rs";
        let attached = attach(root.path(), typed).await;
        let (prompt, added) = typed_prompt(&attached.message);
        assert_eq!(prompt, typed);
        assert_eq!(added.note().as_deref(), Some("(2 attachments)"));
        let piped = format!("{}\n\n<stdin>\nlog\n</stdin>", attached.message);
        let (prompt, added) = typed_prompt(&piped);
        assert_eq!(prompt, typed);
        assert_eq!(
            added.note().as_deref(),
            Some("(2 attachments and piped input)")
        );
        let only_stdin = "why?\n\n<stdin>\nlog\n</stdin>";
        assert_eq!(typed_prompt(only_stdin).0, "why?");
        assert_eq!(
            typed_prompt(only_stdin).1.note().as_deref(),
            Some("(piped input)")
        );
        assert_eq!(
            typed_prompt("plain <stdin> text"),
            ("plain <stdin> text", Added::default())
        );
        assert_eq!(Added::default().note(), None);
    }

    #[tokio::test]
    async fn files_and_directories_are_attached_after_the_prompt_as_typed() {
        let root = workspace();
        let text = check(
            root.path(),
            "compare @src/main.rs with @notes.txt, list @src/ and @src/main.rs again",
        )
        .await;
        insta::assert_snapshot!(text, @r#"
        compare @src/main.rs with @notes.txt, list @src/ and @src/main.rs again

        <attachment path="src/main.rs">
        fn main() {
        }
        </attachment>

        <attachment path="notes.txt">
        no final newline
        </attachment>

        <attachment path="src/" kind="directory">
        empty/
        main.rs
        </attachment>
        --- notes
        (attached src/main.rs: 2 lines)
        (attached notes.txt: 1 line)
        (attached src/: a directory of 2 entries)
        "#);
    }

    #[tokio::test]
    async fn words_that_are_no_paths_stay_as_typed_and_refusals_say_why() {
        let root = workspace();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "SECRET").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.txt"),
            root.path().join("link.txt"),
        )
        .unwrap();
        let text = check(
            root.path(),
            "mail me@example.com or @me about @logo.png @link.txt @../x.rs @src/mian.rs @src/empty",
        )
        .await;
        assert!(!text.contains("SECRET"), "{text}");
        insta::assert_snapshot!(text, @r#"
        mail me@example.com or @me about @logo.png @link.txt @../x.rs @src/mian.rs @src/empty

        <attachment path="src/empty" kind="directory">
        (empty)
        </attachment>
        --- notes
        (not attached: logo.png is a binary file)
        (not attached: link.txt is outside the workspace)
        (not attached: ../x.rs uses `..`)
        (not attached: there is no src/mian.rs in the workspace)
        (attached src/empty: a directory of 0 entries)
        "#);
        let plain = attach(root.path(), "no references here").await;
        assert_eq!(plain.message, "no references here");
        assert!(plain.notes.is_empty());
    }

    #[tokio::test]
    async fn big_files_are_cut_and_the_total_is_capped() {
        let root = tempfile::tempdir().unwrap();
        let line = "x".repeat(1023) + "\n";
        std::fs::write(root.path().join("big.log"), line.repeat(150)).unwrap();
        std::fs::write(root.path().join("b.log"), line.repeat(150)).unwrap();
        std::fs::write(root.path().join("c.log"), line.repeat(150)).unwrap();
        std::fs::write(root.path().join("d.log"), "small\n").unwrap();
        let attached = attach(root.path(), "@big.log @b.log @c.log @d.log").await;
        insta::assert_snapshot!(attached.notes.join("\n"), @r"
        (attached big.log: its first 100 lines, cut at 100 KiB)
        (attached b.log: its first 100 lines, cut at 100 KiB)
        (attached c.log: its first 56 lines, cut at 56 KiB)
        (not attached: d.log: a prompt's attachments hold at most 256 KiB together)
        ");
        assert!(
            attached.message.len() < TOTAL_CAP + 1024,
            "{}",
            attached.message.len()
        );
        assert!(
            attached.message.contains(
                "[cut: only the first 102400 bytes of big.log are attached]\n</attachment>"
            )
        );
    }
}
