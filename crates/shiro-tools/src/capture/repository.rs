//! A git repository a command made at the workspace root where there was none (`git init`):
//! it is carried over into the workspace whole, as the command left it, when it is inert —
//! when nothing in it makes git run a program or read a file elsewhere.
//!
//! Why inert only: the sandbox keeps a command from writing an existing repository's
//! `.git/config` and `.git/hooks`, because git runs what they name (a hook, `core.fsmonitor`,
//! `core.sshCommand`, a filter) in the user's own shell later, outside the sandbox. A
//! repository a command made could name such programs too, so one is carried over only when
//! its configuration holds nothing but settings `git init` and `git config user.*` write, its
//! hooks are git's inert samples, and it holds only directories and plain files.
//!
//! It is not recorded: undoing the turn leaves it (the files the command made are undone as
//! always). The next command's changes to it are recorded, as for any repository at the root.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use rustix::io::Errno;

/// The settings an inert repository's configuration may hold, by section.
const ALLOWED: [(&str, &[&str]); 4] = [
    (
        "core",
        &[
            "repositoryformatversion",
            "filemode",
            "bare",
            "logallrefupdates",
            "ignorecase",
            "precomposeunicode",
            "symlinks",
        ],
    ),
    ("user", &["name", "email"]),
    ("init", &["defaultbranch"]),
    ("extensions", &["objectformat", "refstorage"]),
];

/// Files at the top of a repository that point git elsewhere: another repository's
/// directory, or a configuration of their own.
const POINTERS: [&str; 3] = ["commondir", "gitdir", "config.worktree"];

/// The layer's `.git` at the root, `source`, a repository the command made, to carry over
/// when the workspace (at `root`) has none and it is inert (`marked` says whether the
/// overlay marked a directory); otherwise the note that says why it is not.
pub(super) fn made(
    source: PathBuf,
    root: &Path,
    marked: impl Fn(&Path) -> bool,
) -> Result<PathBuf, String> {
    let why = if fs::symlink_metadata(root.join(".git")).is_ok() {
        Some("the workspace's own .git is neither a directory nor a file".to_owned())
    } else {
        not_inert(&source, marked)
    };
    match why {
        Some(why) => Err(not_carried(&why)),
        None => Ok(source),
    }
}

/// Moves the repository the command made, `source`, into the workspace root, `root`, with one
/// rename, unless a `.git` appeared there meanwhile; returns the note that says what it did.
pub(super) fn carry(source: &Path, root: &Path) -> String {
    let moved = rustix::fs::renameat_with(
        rustix::fs::CWD,
        source,
        rustix::fs::CWD,
        root.join(".git"),
        rustix::fs::RenameFlags::NOREPLACE,
    );
    match moved {
        Ok(()) => "made the git repository .git: carried over as the command left it; undoing \
                   this turn leaves it, and what later commands do to it is recorded"
            .to_owned(),
        Err(Errno::EXIST | Errno::NOTEMPTY) => {
            not_carried("a .git appeared in the workspace meanwhile")
        }
        Err(Errno::XDEV) => not_carried(
            "shiro's state directory, which holds the command's layer, is on another file \
             system than the workspace",
        ),
        Err(errno) => not_carried(&format!("moving it failed ({})", io::Error::from(errno))),
    }
}

/// The note for a repository the command made that is not carried over, and why.
fn not_carried(why: &str) -> String {
    format!(
        "not carried over: the git repository the command made (.git), because {why}; run \
         `git init` yourself to make one (what commands then do to it is recorded)"
    )
}

/// Why the layer's `.git` at `dir` may not be carried over; `None` when it is inert.
fn not_inert(dir: &Path, marked: impl Fn(&Path) -> bool) -> Option<String> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Some("it is not a directory".to_owned()),
        Err(err) => return Some(format!("it cannot be read ({err})")),
    }
    if let Some(why) = walk(dir, Path::new(""), &marked) {
        return Some(why);
    }
    if let Some(name) = POINTERS.iter().find(|name| dir.join(name).exists()) {
        return Some(format!("it holds .git/{name}, which points git elsewhere"));
    }
    match fs::read(dir.join("config")) {
        Ok(bytes) => config_not_inert(&bytes),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
        Err(err) => Some(format!("its config cannot be read ({err})")),
    }
}

/// Looks at every entry under `dir` (`rel` being its path under `.git`): directories and
/// plain files only, the overlay's marks on none, and only git's samples among the hooks.
fn walk(dir: &Path, rel: &Path, marked: &impl Fn(&Path) -> bool) -> Option<String> {
    if marked(dir) {
        return Some(format!("the overlay marked .git/{}", rel.display()));
    }
    let listed = fs::read_dir(dir).and_then(|entries| {
        entries
            .map(|entry| entry.map(|entry| entry.file_name()))
            .collect::<Result<Vec<_>, _>>()
    });
    let mut names = match listed {
        Ok(names) => names,
        Err(err) => return Some(format!("it cannot be listed ({err})")),
    };
    // In order, so that what is named is the same on every file system.
    names.sort();
    for name in names {
        let path = dir.join(&name);
        let rel = rel.join(&name);
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(err) => return Some(format!("it cannot be read ({err})")),
        };
        if meta.is_dir() {
            if let Some(why) = walk(&path, &rel, marked) {
                return Some(why);
            }
        } else if !meta.is_file() || meta.nlink() != 1 {
            return Some(format!(
                "it holds .git/{}, which is not a plain file",
                rel.display()
            ));
        } else if rel.starts_with("hooks") && !rel.to_string_lossy().ends_with(".sample") {
            return Some(format!(
                "it holds the hook .git/{}, which git would run outside the sandbox",
                rel.display()
            ));
        }
    }
    None
}

/// Why a configuration is not inert: a line other than a comment, an allowed section's
/// header, or one of its allowed settings.
fn config_not_inert(bytes: &[u8]) -> Option<String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Some("its config is not UTF-8".to_owned());
    };
    let mut section: Option<&[&str]> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.ends_with('\\') {
            return Some(format!("its config continues a line: {line}"));
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim().to_ascii_lowercase();
            section = (ALLOWED.iter())
                .find(|(allowed, _)| *allowed == name)
                .map(|(_, keys)| *keys);
            if section.is_none() {
                return Some(format!("its config has the section [{name}]"));
            }
            continue;
        }
        let key = line
            .split_once('=')
            .map_or(line, |(key, _)| key)
            .trim()
            .to_ascii_lowercase();
        if !section.is_some_and(|keys| keys.contains(&key.as_str())) {
            return Some(format!("its config sets {key}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const INIT_CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\
                               \tbare = false\n\tlogallrefupdates = true\n\
                               [user]\n\tname = t\n\temail = t@example.com\n";

    /// A `.git` as `git init` and a commit leave it.
    fn made() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let git = tmp.path();
        for dir in ["hooks", "info", "objects/ab", "refs/heads", "refs/tags"] {
            fs::create_dir_all(git.join(dir)).unwrap();
        }
        fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::write(git.join("config"), INIT_CONFIG).unwrap();
        fs::write(git.join("description"), "Unnamed repository\n").unwrap();
        fs::write(git.join("hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
        fs::write(git.join("info/exclude"), "# git ls-files\n").unwrap();
        fs::write(git.join("objects/ab/cdef"), [1u8, 2, 3]).unwrap();
        fs::write(git.join("refs/heads/main"), "abcdef\n").unwrap();
        tmp
    }

    fn unmarked(_: &Path) -> bool {
        false
    }

    #[test]
    fn a_repository_as_git_init_leaves_it_is_inert() {
        let git = made();
        assert_eq!(not_inert(git.path(), unmarked), None);
        fs::remove_file(git.path().join("config")).unwrap();
        assert_eq!(not_inert(git.path(), unmarked), None, "no config at all");
    }

    #[test]
    fn what_would_run_or_point_elsewhere_is_refused_and_named() {
        type Spoil = fn(&Path);
        let cases: [(&str, Spoil); 8] = [
            ("hook", |git| {
                fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\n").unwrap();
            }),
            ("fsmonitor", |git| {
                let config = format!("{INIT_CONFIG}[core]\n\tfsmonitor = ./x\n");
                fs::write(git.join("config"), config).unwrap();
            }),
            ("filter", |git| {
                let config = format!("{INIT_CONFIG}[filter \"x\"]\n\tclean = ./x\n");
                fs::write(git.join("config"), config).unwrap();
            }),
            ("include", |git| {
                fs::write(git.join("config"), "[include]\npath = /tmp/x\n").unwrap();
            }),
            ("continued", |git| {
                fs::write(git.join("config"), "[core]\nbare = \\\n").unwrap();
            }),
            ("link", |git| {
                std::os::unix::fs::symlink("/etc", git.join("objects/info")).unwrap();
            }),
            ("second name", |git| {
                fs::hard_link(git.join("HEAD"), git.join("ORIG_HEAD")).unwrap();
            }),
            ("commondir", |git| {
                fs::write(git.join("commondir"), "../other\n").unwrap();
            }),
        ];
        let mut found = Vec::new();
        for (name, spoil) in cases {
            let git = made();
            spoil(git.path());
            let why = not_inert(git.path(), unmarked);
            assert!(why.is_some(), "{name} was let through");
            found.push(format!("{name}: {}", why.unwrap()));
        }
        let git = made();
        let marked = |dir: &Path| dir.ends_with("refs");
        found.push(format!(
            "marked: {}",
            not_inert(git.path(), marked).unwrap()
        ));
        let file = tempfile::NamedTempFile::new().unwrap();
        found.push(format!(
            "file: {}",
            not_inert(file.path(), unmarked).unwrap()
        ));
        insta::assert_snapshot!(found.join("\n"), @r#"
        hook: it holds the hook .git/hooks/pre-commit, which git would run outside the sandbox
        fsmonitor: its config sets fsmonitor
        filter: its config has the section [filter "x"]
        include: its config has the section [include]
        continued: its config continues a line: bare = \
        link: it holds .git/objects/info, which is not a plain file
        second name: it holds .git/HEAD, which is not a plain file
        commondir: it holds .git/commondir, which points git elsewhere
        marked: the overlay marked .git/refs
        file: it is not a directory
        "#);
    }
}
