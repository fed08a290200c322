//! Project instructions: the `AGENTS.md` (else `CLAUDE.md`) files a session's system prompt
//! carries, so that the model follows the project's own conventions. The decisions are written
//! up in `docs/cli.md`, "Project instructions".
//!
//! Where they are read, most general first (a later file can refine an earlier one):
//!
//! 1. the user's own file: `AGENTS.md` (else `CLAUDE.md`) in shiro's config directory, else
//!    Claude Code's `~/.claude/CLAUDE.md`;
//! 2. each directory from the repository's root down to the workspace root, when the workspace
//!    lies inside a git repository (with `-C DIR`, say);
//! 3. each directory below the workspace root down to the directory shiro started in.
//!
//! In each directory `AGENTS.md` wins over `CLAUDE.md`. A file is read only when it is a
//! regular file; a link is followed only when its target is inside the repository (or the
//! workspace, outside a repository), so that a cloned repository cannot make shiro send, say,
//! `~/.ssh/id_ed25519` to a model. Together the files are capped at [`MAX_BYTES`]; what is cut
//! is said, to the model in the prompt and to the user in a notice.
//!
//! Nothing here reads the environment: the caller passes every directory in.

use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The file names read in each directory, the first found winning.
pub const NAMES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// The most the instruction files may add to the system prompt together, in bytes.
pub const MAX_BYTES: usize = 32 * 1024;

/// Where a session looks for instructions.
#[derive(Debug, Clone, Copy)]
pub struct Places<'a> {
    /// The workspace root (canonical).
    pub root: &'a Path,
    /// The directory shiro started in; only its part inside the workspace counts.
    pub cwd: Option<&'a Path>,
    /// shiro's user config directory.
    pub user_dir: Option<&'a Path>,
    /// The user's home directory (for `~/.claude/CLAUDE.md`, and to show paths as `~/…`).
    pub home: Option<&'a Path>,
}

/// One file of instructions, as it goes to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// How the prompt and the notices name it: relative to the workspace root, or `~/…`, or
    /// absolute.
    pub shown: String,
    /// Its text (cut to fit, when `cut` says so).
    pub text: String,
    /// When it was cut: its whole size in bytes.
    pub cut: Option<u64>,
}

/// The instructions found for a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instructions {
    /// The files read, most general first.
    pub files: Vec<File>,
    /// What the user should hear: files cut, dropped or refused.
    pub notes: Vec<String>,
}

impl Instructions {
    /// The system prompt: `base`, then each file under a heading that names it. `base` alone
    /// when there is no file.
    pub fn system_prompt(&self, base: &str) -> String {
        if self.files.is_empty() {
            return base.to_owned();
        }
        let mut prompt = format!(
            "{base}\n\n# Project instructions\n\nThe user wrote these instructions for this \
             project in the files named below, most general first; follow them, and where two \
             disagree, the later one wins."
        );
        for file in &self.files {
            prompt.push_str(&format!(
                "\n\n## {}\n\n{}",
                file.shown,
                file.text.trim_end()
            ));
            if let Some(size) = file.cut {
                prompt.push_str(&format!(
                    "\n\n[cut: {} is {size} bytes; only the part above was included]",
                    file.shown
                ));
            }
        }
        prompt
    }

    /// A one-line summary for the start of a session, `None` without files.
    pub fn summary(&self) -> Option<String> {
        if self.files.is_empty() {
            return None;
        }
        let names: Vec<&str> = self.files.iter().map(|file| file.shown.as_str()).collect();
        Some(format!("project instructions from {}", names.join(", ")))
    }
}

/// Finds and reads the instruction files for a session (see the module's description).
pub fn load(places: &Places<'_>) -> Instructions {
    let mut found = Instructions::default();
    let mut budget = MAX_BYTES;
    for (dir, fence) in candidates(places) {
        let Some(name) = NAMES
            .iter()
            .map(|name| dir.join(name))
            .find(|path| std::fs::symlink_metadata(path).is_ok())
        else {
            continue;
        };
        let shown = show(&name, places);
        let (text, size) = match read(&name, &fence) {
            Ok(read) => read,
            Err(why) => {
                found.notes.push(format!("{shown} is not read: {why}"));
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        if budget == 0 {
            found.notes.push(format!(
                "{shown} is left out: the instruction files above it already fill the {} KiB \
                 they may take",
                MAX_BYTES / 1024
            ));
            continue;
        }
        let (text, cut) = if size > budget as u64 || text.len() > budget {
            let kept = floor_char_boundary(&text, budget);
            found.notes.push(format!(
                "{shown} is {size} bytes; only its first {kept} go to the model (instruction \
                 files may take {} KiB in all)",
                MAX_BYTES / 1024
            ));
            (text[..kept].to_owned(), Some(size))
        } else {
            (text, None)
        };
        budget -= text.len();
        found.files.push(File { shown, text, cut });
    }
    found
}

/// The directories to look in, most general first, each with the directory its file's link
/// may point into.
fn candidates(places: &Places<'_>) -> Vec<(PathBuf, PathBuf)> {
    let mut dirs = Vec::new();
    if let Some(user_dir) = places.user_dir {
        let claude = places.home.map(|home| home.join(".claude"));
        let has_own = NAMES
            .iter()
            .any(|name| std::fs::symlink_metadata(user_dir.join(name)).is_ok());
        // The user's own files are theirs: a link there may point anywhere.
        match (has_own, claude) {
            (false, Some(claude)) if claude.join("CLAUDE.md").exists() => {
                dirs.push((claude, PathBuf::from("/")));
            }
            _ => dirs.push((user_dir.to_owned(), PathBuf::from("/"))),
        }
    }
    let root = places.root;
    let fence = crate::workspace::enclosing_repository(root).unwrap_or_else(|| root.to_owned());
    // From the repository's root down to the workspace root.
    let mut above: Vec<PathBuf> = root
        .ancestors()
        .take_while(|dir| dir.starts_with(&fence))
        .map(Path::to_owned)
        .collect();
    above.reverse();
    // Below the workspace root, down to where shiro started.
    let below = places
        .cwd
        .and_then(|cwd| cwd.strip_prefix(root).ok())
        .map(|rest| {
            let mut dir = root.to_owned();
            rest.components()
                .map(|part| {
                    dir.push(part);
                    dir.clone()
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    dirs.extend(
        above
            .into_iter()
            .chain(below)
            .map(|dir| (dir, fence.clone())),
    );
    dirs
}

/// How the prompt names `path`: relative to the workspace root, else `~/…`, else absolute.
fn show(path: &Path, places: &Places<'_>) -> String {
    if let Ok(rest) = path.strip_prefix(places.root) {
        return rest.display().to_string();
    }
    if let Some(rest) = places.home.and_then(|home| path.strip_prefix(home).ok()) {
        return format!("~/{}", rest.display());
    }
    path.display().to_string()
}

/// Reads an instruction file: a regular file (a link only when it resolves inside `fence`),
/// as UTF-8 text (invalid bytes replaced), at most one byte more than the cap. Returns the
/// text and the file's whole size.
fn read(path: &Path, fence: &Path) -> Result<(String, u64), String> {
    let target = path
        .canonicalize()
        .map_err(|err| format!("cannot resolve it ({err})"))?;
    if !target.starts_with(fence) {
        return Err(format!(
            "it is a link to {}, outside {}",
            target.display(),
            fence.display()
        ));
    }
    let meta = std::fs::metadata(&target).map_err(|err| err.to_string())?;
    if !meta.is_file() {
        return Err("it is not a regular file".to_owned());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(&target)
        .and_then(|file| file.take(MAX_BYTES as u64 + 1).read_to_end(&mut bytes))
        .map_err(|err| err.to_string())?;
    let size = meta.len().max(bytes.len() as u64);
    Ok((String::from_utf8_lossy(&bytes).into_owned(), size))
}

/// The largest index `<= max` at a character boundary of `text`.
fn floor_char_boundary(text: &str, max: usize) -> usize {
    let mut index = max.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The prompt of `/init`: a normal turn (so `/undo` takes it back) in which the model drafts
/// the workspace's `AGENTS.md`, or improves the one there is.
pub fn init_prompt(root: &Path) -> String {
    let existing = NAMES
        .iter()
        .find(|name| std::fs::symlink_metadata(root.join(name)).is_ok());
    let task = match existing {
        Some(&"AGENTS.md") => {
            "AGENTS.md already exists at the workspace root: read it, then improve it where it \
             is wrong, missing something or longer than it needs to be, with edit_file."
        }
        Some(_) => {
            "CLAUDE.md exists at the workspace root: read it, and write an AGENTS.md that keeps \
             what is still true in it and adds what is missing. Leave CLAUDE.md as it is."
        }
        None => "Write it with write_file.",
    };
    format!(
        "Draft AGENTS.md at the workspace root: the instructions a coding agent reads before it \
         works in this project. {task}\n\n\
         First look around: list the root, read the README, the build files (Cargo.toml, \
         package.json, pyproject.toml, Makefile, …), the CI configuration and a few central \
         source files.\n\n\
         Then write, in short Markdown sections, only what an agent could not guess and would \
         get wrong without:\n\
         - how to build, run the tests (all, and a single one), lint and format, as exact \
         commands;\n\
         - how the code is laid out: the main directories and what lives where;\n\
         - the conventions the code follows (naming, error handling, tests, commits) where they \
         differ from the language's usual ones;\n\
         - anything that must not be done (generated files, slow or dangerous commands).\n\n\
         Keep it under 100 lines. Do not invent commands or rules: each must come from a file \
         you read. Answer with one line saying what you wrote."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// The instructions of a session in `root` started in `cwd`, for a user without files.
    fn load_without_user_files(root: &Path, cwd: &Path) -> Instructions {
        load(&Places {
            root,
            cwd: Some(cwd),
            user_dir: None,
            home: None,
        })
    }

    fn shown(found: &Instructions) -> Vec<&str> {
        found.files.iter().map(|file| file.shown.as_str()).collect()
    }

    /// From the repository's root down to where shiro started, AGENTS.md winning over
    /// CLAUDE.md in each directory; nothing above the repository, and the user's file first.
    #[test]
    fn reads_from_the_repository_root_down_to_the_working_directory() {
        let top = tempfile::tempdir().unwrap();
        let top = top.path().canonicalize().unwrap();
        write(&top.join("AGENTS.md"), "above the repository: never read");
        let repo = top.join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        write(&repo.join("AGENTS.md"), "repository rules");
        let ws = repo.join("crates/app");
        write(&ws.join("AGENTS.md"), "workspace rules");
        write(&ws.join("CLAUDE.md"), "shadowed by AGENTS.md");
        write(&ws.join("src/deep/CLAUDE.md"), "deep rules");
        write(&ws.join("src/empty/AGENTS.md"), "  \n");
        let user = top.join("user");
        write(&user.join("AGENTS.md"), "my own rules");
        let cwd = ws.join("src/deep");
        let found = load(&Places {
            root: &ws,
            cwd: Some(&cwd),
            user_dir: Some(&user),
            home: Some(&top),
        });
        assert_eq!(
            shown(&found),
            [
                "~/user/AGENTS.md",
                "~/repo/AGENTS.md",
                "AGENTS.md",
                "src/deep/CLAUDE.md"
            ]
        );
        assert_eq!(found.notes, Vec::<String>::new());
        let prompt = found.system_prompt("BASE");
        let order: Vec<usize> = ["my own", "repository", "workspace", "deep"]
            .iter()
            .map(|text| prompt.find(text).unwrap())
            .collect();
        assert!(order.is_sorted(), "{prompt}");
        assert!(!prompt.contains("never read") && !prompt.contains("shadowed"));

        // A working directory outside the workspace adds nothing; without a repository only
        // the workspace root is read.
        let alone = top.join("alone");
        write(&alone.join("CLAUDE.md"), "alone");
        let found = load_without_user_files(&alone, &cwd);
        assert_eq!(shown(&found), ["CLAUDE.md"]);
    }

    /// Claude Code's user file is read when shiro's config directory has none.
    #[test]
    fn falls_back_to_claude_codes_user_file() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        let ws = home.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        write(&home.join(".claude/CLAUDE.md"), "claude user rules");
        let user = home.join(".config/shiro");
        std::fs::create_dir_all(&user).unwrap();
        let places = Places {
            root: &ws,
            cwd: None,
            user_dir: Some(&user),
            home: Some(&home),
        };
        assert_eq!(shown(&load(&places)), ["~/.claude/CLAUDE.md"]);
        write(&user.join("CLAUDE.md"), "shiro user rules");
        assert_eq!(shown(&load(&places)), ["~/.config/shiro/CLAUDE.md"]);
    }

    /// Together the files fit in the cap: the one that crosses it is cut at a character
    /// boundary, the ones after it are left out, and both are said.
    #[test]
    fn caps_the_files_and_says_what_was_cut() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let big = "é".repeat(MAX_BYTES); // twice the cap in bytes
        write(&ws.join("AGENTS.md"), &big);
        write(&ws.join("sub/AGENTS.md"), "never fits");
        let found = load_without_user_files(&ws, &ws.join("sub"));
        assert_eq!(shown(&found), ["AGENTS.md"]);
        let file = &found.files[0];
        assert_eq!(file.text.len(), MAX_BYTES);
        assert_eq!(file.cut, Some(2 * MAX_BYTES as u64));
        insta::assert_snapshot!(found.notes.join("\n"), @r"
        AGENTS.md is 65536 bytes; only its first 32768 go to the model (instruction files may take 32 KiB in all)
        sub/AGENTS.md is left out: the instruction files above it already fill the 32 KiB they may take
        ");
        let prompt = found.system_prompt("BASE");
        assert!(
            prompt
                .ends_with("\n\n[cut: AGENTS.md is 65536 bytes; only the part above was included]"),
            "{}",
            &prompt[prompt.len() - 200..]
        );
    }

    /// A link is followed only into the repository: a clone cannot make shiro send a file
    /// from elsewhere to the model. Directories and other non-files are said, not read.
    #[test]
    fn links_out_of_the_repository_are_refused() {
        let top = tempfile::tempdir().unwrap();
        let top = top.path().canonicalize().unwrap();
        write(&top.join("secret"), "SECRET KEY");
        let ws = top.join("ws");
        write(&ws.join("docs/agents.md"), "linked rules");
        std::os::unix::fs::symlink("docs/agents.md", ws.join("AGENTS.md")).unwrap();
        std::fs::create_dir_all(ws.join("sub/dir/AGENTS.md")).unwrap();
        std::os::unix::fs::symlink(top.join("secret"), ws.join("sub/AGENTS.md")).unwrap();
        let found = load_without_user_files(&ws, &ws.join("sub/dir"));
        assert_eq!(shown(&found), ["AGENTS.md"]);
        assert_eq!(found.files[0].text, "linked rules");
        assert_eq!(found.notes.len(), 2, "{:?}", found.notes);
        assert!(
            found.notes[0].starts_with("sub/AGENTS.md is not read: it is a link to "),
            "{:?}",
            found.notes
        );
        assert_eq!(
            found.notes[1],
            "sub/dir/AGENTS.md is not read: it is not a regular file"
        );
        assert!(!found.system_prompt("BASE").contains("SECRET"));
    }

    #[test]
    fn the_prompt_names_each_file_and_is_the_base_alone_without_files() {
        assert_eq!(Instructions::default().system_prompt("BASE"), "BASE");
        assert_eq!(Instructions::default().summary(), None);
        let found = Instructions {
            files: vec![
                File {
                    shown: "~/.config/shiro/AGENTS.md".into(),
                    text: "Answer in British English.\n".into(),
                    cut: None,
                },
                File {
                    shown: "AGENTS.md".into(),
                    text: "Run `cargo xtask test` before you say you are done.\n".into(),
                    cut: None,
                },
            ],
            notes: Vec::new(),
        };
        insta::assert_snapshot!(found.system_prompt("BASE"));
        assert_eq!(
            found.summary().as_deref(),
            Some("project instructions from ~/.config/shiro/AGENTS.md, AGENTS.md")
        );
    }

    #[test]
    fn init_asks_to_write_improve_or_convert() {
        let ws = tempfile::tempdir().unwrap();
        insta::assert_snapshot!(init_prompt(ws.path()));
        write(&ws.path().join("CLAUDE.md"), "x");
        assert!(init_prompt(ws.path()).contains("CLAUDE.md exists"));
        write(&ws.path().join("AGENTS.md"), "x");
        assert!(init_prompt(ws.path()).contains("AGENTS.md already exists"));
    }
}
