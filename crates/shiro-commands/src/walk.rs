//! Finding command files under a commands directory, and skills under a skills directory,
//! safely.
//!
//! Symbolic links are followed, but every directory is read once: each is canonicalised and
//! remembered across all sources of one load, so a link back up the tree (`ln -s . l`) is
//! one diagnostic instead of an endless walk, and a folder shared by two sources (a
//! `.claude/commands` that links to `.shiro/commands`) gives its commands once, to the
//! stronger source. Depth and the number of entries are capped. In a project source, a link
//! that leads outside the workspace is not followed: a cloned repository must not be able to
//! turn a file of the user's into a command.

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};

use crate::parse::{Diagnostic, SKILL_FILE, Severity};
use crate::regular_file::{describe, not_regular};

/// How deep below the commands directory files are looked for.
pub(crate) const MAX_DEPTH: usize = 8;
/// How many command files one commands directory may give.
pub(crate) const MAX_FILES: usize = 1000;
/// How many directory entries one commands directory's walk may look at.
pub(crate) const MAX_ENTRIES: usize = 20_000;

/// What one load has read already, across all its sources.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    dirs: HashSet<PathBuf>,
    files: HashSet<PathBuf>,
}

impl Seen {
    /// Remembers a file read outside a walk (a `commands.md`), by its canonical path;
    /// `false` when it was read already.
    pub(crate) fn file(&mut self, canonical: PathBuf) -> bool {
        self.files.insert(canonical)
    }
}

/// A command file, or a skill's folder, found by a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// The command name its path gives (`git/commit.md` is `git:commit`); a skill's
    /// folder's own name.
    pub name: String,
    /// The path to read it by (under the directory walked, links unresolved).
    pub path: PathBuf,
}

/// What a walk looks for.
#[derive(Debug, Clone, Copy)]
enum Looking<'a> {
    /// Files with this extension: one command each.
    Files(&'a str),
    /// Folders that hold a `SKILL.md`; a skill's own folders are its files, not searched.
    Skills,
}

impl Looking<'_> {
    /// What the folder walked is called in messages.
    fn folder(self) -> &'static str {
        match self {
            Looking::Files(_) => "command folder",
            Looking::Skills => "skills folder",
        }
    }
}

/// A directory waiting to be read.
struct Pending {
    /// Its canonical path.
    canonical: PathBuf,
    /// The path it was reached by, for names and messages.
    shown: PathBuf,
    /// The command-name prefix of its files.
    prefix: Vec<String>,
}

/// A link met while reading directories; links are followed only after every real entry
/// has been read, so that a command gets its name from its real location.
struct Link {
    shown: PathBuf,
    /// The canonical directory the link sits in.
    parent: PathBuf,
    prefix: Vec<String>,
    name: String,
}

/// The entries of a folder that a walk reads, sorted by name: those named in UTF-8 and not
/// hidden (no leading `.`). `counted` counts every entry seen, across the folders of one
/// walk; past `limit`, the rest are left and `overflowed` is set.
pub(crate) fn visible_entries(
    entries: std::fs::ReadDir,
    counted: &mut usize,
    limit: usize,
    overflowed: &mut bool,
) -> Vec<(String, std::fs::FileType)> {
    let mut names = Vec::new();
    for entry in entries.flatten() {
        *counted += 1;
        if *counted > limit {
            *overflowed = true;
            break;
        }
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        if let Ok(file_type) = entry.file_type() {
            names.push((name, file_type));
        }
    }
    names.sort_by(|a, b| a.0.cmp(&b.0));
    names
}

/// The name of a file `stem` found under `prefix`; a stem that already carries the
/// namespace (`svelte/svelte:test.md`) does not get it twice.
fn command_name(prefix: &[String], stem: &str) -> String {
    if prefix.is_empty() {
        return stem.to_owned();
    }
    let joined = prefix.join(":");
    if stem.starts_with(&format!("{joined}:")) {
        return stem.to_owned();
    }
    for skip in 1..prefix.len() {
        let tail = prefix[skip..].join(":");
        if stem.starts_with(&format!("{tail}:")) {
            return format!("{}:{stem}", prefix[..skip].join(":"));
        }
    }
    format!("{joined}:{stem}")
}

/// The walk of one commands directory.
struct Walk<'a> {
    looking: Looking<'a>,
    jail: Option<&'a Path>,
    seen: &'a mut Seen,
    diagnostics: &'a mut Vec<Diagnostic>,
    found: Vec<Found>,
    queue: VecDeque<Pending>,
    links: VecDeque<Link>,
    entries: usize,
    too_deep: bool,
    too_many: bool,
}

/// Finds every `*.{extension}` file under `dir`, sorted by name within each directory, real
/// entries before links. A missing `dir` gives nothing and no diagnostic. With `jail`, links
/// (and `dir` itself) must resolve inside it.
pub(crate) fn walk(
    dir: &Path,
    extension: &str,
    jail: Option<&Path>,
    seen: &mut Seen,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Found> {
    walk_for(dir, Looking::Files(extension), jail, seen, diagnostics)
}

/// Finds every skill under `dir`: each folder below it, at any depth, that holds a
/// `SKILL.md`, sorted by name within each directory, real entries before links. A folder
/// that is a skill is not searched further. The same rules as [`walk`] for links, limits
/// and `jail`.
pub(crate) fn skills(
    dir: &Path,
    jail: Option<&Path>,
    seen: &mut Seen,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Found> {
    walk_for(dir, Looking::Skills, jail, seen, diagnostics)
}

fn walk_for(
    dir: &Path,
    looking: Looking<'_>,
    jail: Option<&Path>,
    seen: &mut Seen,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Found> {
    let canonical = match dir.canonicalize() {
        Ok(canonical) => canonical,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(err) => {
            diagnostics.push(Diagnostic::whole_file(
                dir,
                Severity::Error,
                format!("cannot read: {err}"),
            ));
            return Vec::new();
        }
    };
    if !canonical.is_dir() {
        return Vec::new();
    }
    if let Some(jail) = jail
        && !canonical.starts_with(jail)
    {
        diagnostics.push(Diagnostic::whole_file(
            dir,
            Severity::Error,
            format!(
                "leads outside the workspace (to {}), so it is not read: a project's {} must live in the project",
                canonical.display(),
                looking.folder(),
            ),
        ));
        return Vec::new();
    }
    if !seen.dirs.insert(canonical.clone()) {
        return Vec::new();
    }
    let mut walk = Walk {
        looking,
        jail,
        seen,
        diagnostics,
        found: Vec::new(),
        queue: VecDeque::new(),
        links: VecDeque::new(),
        entries: 0,
        too_deep: false,
        too_many: false,
    };
    walk.queue.push_back(Pending {
        canonical,
        shown: dir.to_path_buf(),
        prefix: Vec::new(),
    });
    walk.run(dir);
    walk.found
}

impl Walk<'_> {
    fn run(&mut self, top: &Path) {
        loop {
            while let Some(pending) = self.queue.pop_front() {
                self.read_dir(&pending);
            }
            let Some(link) = self.links.pop_front() else {
                break;
            };
            self.follow(link);
        }
        if self.too_deep {
            self.diagnostics.push(Diagnostic::whole_file(
                top,
                Severity::Warning,
                format!("folders nested deeper than {MAX_DEPTH} levels are not read"),
            ));
        }
        if self.too_many {
            let what = match self.looking {
                Looking::Files(_) => "command files",
                Looking::Skills => "skills",
            };
            self.diagnostics.push(Diagnostic::whole_file(
                top,
                Severity::Warning,
                format!(
                    "too many entries: only the first {MAX_FILES} {what} (and {MAX_ENTRIES} entries) are read"
                ),
            ));
        }
    }

    fn read_dir(&mut self, dir: &Pending) {
        let entries = match std::fs::read_dir(&dir.shown) {
            Ok(entries) => entries,
            Err(err) => {
                self.diagnostics.push(Diagnostic::whole_file(
                    &dir.shown,
                    Severity::Error,
                    format!("cannot read: {err}"),
                ));
                return;
            }
        };
        let names = visible_entries(entries, &mut self.entries, MAX_ENTRIES, &mut self.too_many);
        if let Looking::Skills = self.looking
            && let Some((_, file_type)) = names.iter().find(|(name, _)| name == SKILL_FILE)
        {
            if dir.prefix.is_empty() {
                self.diagnostics.push(Diagnostic::whole_file(
                    &dir.shown.join(SKILL_FILE),
                    Severity::Warning,
                    format!(
                        "a {SKILL_FILE} right in a skills folder is not read: a skill is a folder of its own (`skills/<name>/{SKILL_FILE}`)"
                    ),
                ));
            } else {
                self.skill(dir, *file_type);
                return;
            }
        }
        for (name, file_type) in names {
            if file_type.is_symlink() {
                self.links.push_back(Link {
                    shown: dir.shown.join(&name),
                    parent: dir.canonical.clone(),
                    prefix: dir.prefix.clone(),
                    name,
                });
            } else if file_type.is_dir() {
                let canonical = dir.canonical.join(&name);
                self.enter(canonical, dir.shown.join(&name), &dir.prefix, name);
            } else if file_type.is_file() {
                let canonical = dir.canonical.join(&name);
                self.file(canonical, dir.shown.join(&name), &dir.prefix, &name);
            } else if self.wants(&name) {
                self.diagnostics
                    .push(not_regular(&dir.shown.join(&name), describe(file_type)));
            }
        }
    }

    /// Whether a file called `name` would be a command of this walk.
    fn wants(&self, name: &str) -> bool {
        match self.looking {
            Looking::Files(extension) => name
                .strip_suffix(extension)
                .is_some_and(|stem| stem.ends_with('.')),
            Looking::Skills => false,
        }
    }

    /// Queues a directory unless it was read already or lies too deep.
    fn enter(&mut self, canonical: PathBuf, shown: PathBuf, prefix: &[String], name: String) {
        if prefix.len() + 1 > MAX_DEPTH {
            self.too_deep = true;
            return;
        }
        if !self.seen.dirs.insert(canonical.clone()) {
            return;
        }
        let mut prefix = prefix.to_vec();
        prefix.push(name);
        self.queue.push_back(Pending {
            canonical,
            shown,
            prefix,
        });
    }

    /// Takes `dir`, which holds a `SKILL.md` of type `file_type`, as a skill: a regular file,
    /// or a link to one that stays in the jail. The folder walked is never one.
    fn skill(&mut self, dir: &Pending, file_type: std::fs::FileType) {
        let skill_file = dir.shown.join(SKILL_FILE);
        let Some(name) = dir.prefix.last() else {
            return;
        };
        if file_type.is_symlink() {
            let target = match skill_file.canonicalize() {
                Ok(target) => target,
                Err(err) => {
                    self.diagnostics.push(Diagnostic::whole_file(
                        &skill_file,
                        Severity::Warning,
                        format!("broken link, skipped: {err}"),
                    ));
                    return;
                }
            };
            if self.leads_out(&skill_file, &target) {
                return;
            }
            match std::fs::metadata(&target) {
                Ok(meta) if meta.is_file() => {}
                Ok(meta) => {
                    self.diagnostics
                        .push(not_regular(&skill_file, describe(meta.file_type())));
                    return;
                }
                Err(_) => return,
            }
        } else if !file_type.is_file() {
            self.diagnostics
                .push(not_regular(&skill_file, describe(file_type)));
            return;
        }
        if self.found.len() >= MAX_FILES {
            self.too_many = true;
            return;
        }
        self.found.push(Found {
            name: name.clone(),
            path: dir.shown.clone(),
        });
    }

    fn file(&mut self, canonical: PathBuf, shown: PathBuf, prefix: &[String], name: &str) {
        let Looking::Files(extension) = self.looking else {
            return;
        };
        let Some(stem) = name
            .strip_suffix(extension)
            .and_then(|s| s.strip_suffix('.'))
        else {
            return;
        };
        if !self.seen.files.insert(canonical) {
            return;
        }
        if self.found.len() >= MAX_FILES {
            self.too_many = true;
            return;
        }
        self.found.push(Found {
            name: command_name(prefix, stem),
            path: shown,
        });
    }

    /// Whether the link at `shown` leads out of the project's jail to `target`; if so, says
    /// it is not followed.
    fn leads_out(&mut self, shown: &Path, target: &Path) -> bool {
        let Some(jail) = self.jail else {
            return false;
        };
        if target.starts_with(jail) {
            return false;
        }
        self.diagnostics.push(Diagnostic::whole_file(
            shown,
            Severity::Error,
            format!(
                "link leads outside the workspace (to {}), not followed: a project's {} must live in the project",
                target.display(),
                match self.looking {
                    Looking::Files(_) => "commands",
                    Looking::Skills => "skills",
                }
            ),
        ));
        true
    }

    fn follow(&mut self, link: Link) {
        let target = match link.shown.canonicalize() {
            Ok(target) => target,
            Err(err) => {
                if self.wants(&link.name) {
                    self.diagnostics.push(Diagnostic::whole_file(
                        &link.shown,
                        Severity::Warning,
                        format!("broken link, skipped: {err}"),
                    ));
                }
                return;
            }
        };
        if self.leads_out(&link.shown, &target) {
            return;
        }
        if target.is_dir() {
            if link.parent.starts_with(&target) {
                self.diagnostics.push(Diagnostic::whole_file(
                    &link.shown,
                    Severity::Warning,
                    format!(
                        "link loop: it leads to {}, a folder that contains it; not followed",
                        target.display()
                    ),
                ));
                return;
            }
            self.enter(target, link.shown, &link.prefix, link.name);
        } else if target.is_file() {
            self.file(target, link.shown, &link.prefix, &link.name);
        } else if self.wants(&link.name)
            && let Ok(meta) = std::fs::metadata(&target)
        {
            self.diagnostics
                .push(not_regular(&link.shown, describe(meta.file_type())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_not_doubled() {
        let p = |parts: &[&str]| parts.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(command_name(&[], "x"), "x");
        assert_eq!(command_name(&p(&["git"]), "commit"), "git:commit");
        assert_eq!(command_name(&p(&["svelte"]), "svelte:test"), "svelte:test");
        assert_eq!(command_name(&p(&["a", "b"]), "a:b:c"), "a:b:c");
        assert_eq!(command_name(&p(&["a", "b"]), "b:c"), "a:b:c");
        assert_eq!(command_name(&p(&["a", "b"]), "bc"), "a:b:bc");
    }
}
