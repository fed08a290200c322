//! A git repository a command made where the workspace had none (`git init` at the root,
//! `git clone URL dir` below it): it is carried over into the workspace whole, as the command
//! left it, when it is inert — when nothing in it makes git run a program or read a file
//! elsewhere.
//!
//! Why inert only: the sandbox keeps a command from writing an existing repository's
//! `.git/config` and `.git/hooks`, because git runs what they name (a hook, `core.fsmonitor`,
//! `core.sshCommand`, a filter) in the user's own shell later, outside the sandbox. A
//! repository a command made could name such programs too, so one is carried over only when
//! its configuration holds nothing but what `git init`, `git clone`, `git remote add` and
//! `git config user.*` write, its hooks are git's inert samples, and it holds only
//! directories and plain files.
//!
//! It is not recorded: undoing the turn leaves it (the files the command made are undone as
//! always). The next command's changes to one at the root are recorded, as for any
//! repository there; a nested one's are not carried over, as for any nested repository.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::path::WorkspacePath;

/// The settings an inert repository's configuration may hold: by section, whether the
/// section takes a subsection (`[remote "origin"]`) or none, and its keys.
const ALLOWED: [(&str, bool, &[&str]); 6] = [
    (
        "core",
        false,
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
    ("user", false, &["name", "email"]),
    ("init", false, &["defaultbranch"]),
    ("extensions", false, &["objectformat", "refstorage"]),
    // What `git clone` and `git remote add` write.
    ("remote", true, &["url", "fetch"]),
    ("branch", true, &["remote", "merge"]),
];

/// Transports that run a program of the URL's choosing (git refuses them by default; a
/// repository that names one is not inert all the same).
const COMMAND_TRANSPORTS: [&str; 2] = ["ext::", "fd::"];

/// Files at the top of a repository that point git elsewhere: another repository's
/// directory, or a configuration of their own.
const POINTERS: [&str; 3] = ["commondir", "gitdir", "config.worktree"];

/// Whether `path`, which the command's layer holds, is a repository the command made: a
/// `.git` under no other `.git` (nor shiro's state), where the workspace at `root` has
/// nothing. An existing one is the workspace's (at the root, bound through, it never shows
/// in the layer; a nested one's changes are not carried over).
pub(super) fn is_made_here(path: &WorkspacePath, root: &Path) -> bool {
    path.file_name() == ".git"
        && path.parent().is_none_or(|parent| !parent.is_internal())
        && fs::symlink_metadata(path.to_fs_path(root))
            .is_err_and(|err| err.kind() == io::ErrorKind::NotFound)
}

/// The layer's `source`, the repository the command made at `path`, to carry over when it
/// is inert (`marked` says whether the overlay marked a directory); otherwise the note that
/// says why it is not.
pub(super) fn made(
    source: PathBuf,
    path: &WorkspacePath,
    marked: impl Fn(&Path) -> bool,
) -> Result<PathBuf, String> {
    match not_inert(&source, marked) {
        Some(why) => Err(not_carried(path, &why)),
        None => Ok(source),
    }
}

/// Carries each repository the command made (its layer's directory, and its path) into the
/// workspace at `root`; the notes say how each went.
pub(super) fn carry_all(made: &[(PathBuf, WorkspacePath)], root: &Path) -> Vec<String> {
    (made.iter())
        .map(|(source, path)| carry(source, path, root))
        .collect()
}

/// Moves the repository the command made, `source`, to `path` in the workspace at `root`,
/// with one rename, unless something appeared there meanwhile; returns the note that says
/// what it did. The directory it goes into is reached beneath the root through real
/// directories only.
fn carry(source: &Path, path: &WorkspacePath, root: &Path) -> String {
    let parent = path
        .parent()
        .map_or_else(|| ".".to_owned(), |p| p.as_str().to_owned());
    let moved = (|| {
        let root = rustix::fs::open(root, OFlags::PATH | OFlags::DIRECTORY, Mode::empty())?;
        let dir = rustix::fs::openat2(
            &root,
            parent.as_str(),
            OFlags::PATH | OFlags::DIRECTORY,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        )?;
        rustix::fs::renameat_with(
            rustix::fs::CWD,
            source,
            &dir,
            ".git",
            rustix::fs::RenameFlags::NOREPLACE,
        )
    })();
    match moved {
        Ok(()) if path.parent().is_none() => "made the git repository .git: carried over as the \
            command left it; undoing this turn leaves it, and what later commands do to it is \
            recorded"
            .to_owned(),
        Ok(()) => format!(
            "made the git repository {path}: carried over as the command left it; undoing this \
             turn leaves it, and what later commands do inside it is not carried over (shiro \
             lets commands write only the workspace root's .git)"
        ),
        Err(Errno::EXIST | Errno::NOTEMPTY) => not_carried(
            path,
            "something appeared at its path in the workspace meanwhile",
        ),
        Err(Errno::XDEV) => not_carried(
            path,
            "shiro's state directory, which holds the command's layer, is on another file \
             system than the workspace",
        ),
        Err(errno) => not_carried(
            path,
            &format!("moving it failed ({})", io::Error::from(errno)),
        ),
    }
}

/// The note for a repository the command made at `path` that is not carried over, and why.
fn not_carried(path: &WorkspacePath, why: &str) -> String {
    let advice = if path.parent().is_none() {
        "run `git init` yourself to make one (what commands then do to it is recorded)"
    } else {
        "make it yourself if you need it"
    };
    format!(
        "not carried over: the git repository the command made ({path}), because {why}; \
         {advice}"
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
    let mut section: Option<(&str, &[&str])> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.ends_with('\\') {
            return Some(format!("its config continues a line: {line}"));
        }
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let (name, sub) = match header.split_once(char::is_whitespace) {
                Some((name, sub)) => (name, Some(sub.trim())),
                None => (header, None),
            };
            let name = name.to_ascii_lowercase();
            // A subsection is one quoted name, with no quote or escape inside.
            let sub_ok = |sub: &str| {
                sub.len() >= 2
                    && sub.starts_with('"')
                    && sub.ends_with('"')
                    && !sub[1..sub.len() - 1].contains(['"', '\\'])
            };
            section = (ALLOWED.iter())
                .find(|(allowed, takes_sub, _)| {
                    *allowed == name && sub.map_or(!takes_sub, |sub| *takes_sub && sub_ok(sub))
                })
                .map(|(allowed, _, keys)| (*allowed, *keys));
            if section.is_none() {
                return Some(format!("its config has the section [{header}]"));
            }
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or((line, ""));
        let key = key.trim().to_ascii_lowercase();
        let Some((name, _)) = section.filter(|(_, keys)| keys.contains(&key.as_str())) else {
            return Some(format!("its config sets {key}"));
        };
        let value = value.trim().trim_matches('"').to_ascii_lowercase();
        if name == "remote" && COMMAND_TRANSPORTS.iter().any(|t| value.starts_with(t)) {
            return Some(format!(
                "its config names a remote that runs a command ({value})"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const CLONE_CONFIG: &str = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\
                                [remote \"origin\"]\n\turl = /src/lib.git\n\
                                \tfetch = +refs/heads/*:refs/remotes/origin/*\n\
                                [branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n";

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
        fs::write(git.path().join("config"), CLONE_CONFIG).unwrap();
        assert_eq!(
            not_inert(git.path(), unmarked),
            None,
            "as git clone leaves it"
        );
    }

    #[test]
    fn what_would_run_or_point_elsewhere_is_refused_and_named() {
        type Spoil = fn(&Path);
        let cases: [(&str, Spoil); 11] = [
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
            ("ext remote", |git| {
                let config = CLONE_CONFIG.replace("/src/lib.git", "\"ext::sh -c x\"");
                fs::write(git.join("config"), config).unwrap();
            }),
            ("remote key", |git| {
                let config = format!("{CLONE_CONFIG}[remote \"origin\"]\n\tuploadpack = x\n");
                fs::write(git.join("config"), config).unwrap();
            }),
            ("branch unnamed", |git| {
                fs::write(git.join("config"), "[branch]\n\tremote = x\n").unwrap();
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
        ext remote: its config names a remote that runs a command (ext::sh -c x)
        remote key: its config sets uploadpack
        branch unnamed: its config has the section [branch]
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
