//! The workspace jail: paths that can only name an entry inside the workspace root.

use std::fmt;
use std::path::{Component, Path};

/// Why a path was refused before any file was touched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path was empty, or named the workspace root itself.
    #[error("empty path: name a file inside the workspace")]
    Empty,
    /// A file's path named the workspace root (`.`, or the root's absolute path); see
    /// [`WorkspacePath::resolve_file`].
    #[error("path {0:?} names the workspace root, which is a directory; name a file inside it")]
    Root(String),
    /// A file's path ended with `/` (or `/.`), which names a directory; see
    /// [`WorkspacePath::resolve_file`].
    #[error(
        "path {0:?} ends with `{ending}`, so it names a directory; name a file",
        ending = if .0.ends_with('/') { "/" } else { "/." }
    )]
    TrailingSlash(String),
    /// The path started with `~`: the shell's home directory, which shiro does not expand.
    #[error(
        "path {0:?} starts with `~`, but shiro does not expand `~` to a home directory: paths are relative to the workspace root; give a path inside the workspace"
    )]
    Tilde(String),
    /// The path contained a NUL byte.
    #[error("path {0:?} contains a NUL byte")]
    Nul(String),
    /// The path used `..`, which could leave the workspace.
    #[error("path {0:?} uses `..`; give the path relative to the workspace root without `..`")]
    ParentDir(String),
    /// An absolute path that does not lie under the workspace root.
    #[error("path {0:?} is outside the workspace")]
    Outside(String),
    /// A symbolic link on the path resolves outside the workspace.
    #[error(
        "path {path:?} goes through the symbolic link {link:?}, which leads outside the workspace"
    )]
    SymlinkEscape {
        /// The path as given.
        path: String,
        /// The link on that path, relative to the root.
        link: String,
    },
    /// A symbolic link on the path leads round a loop.
    #[error("path {path:?} goes through the symbolic link {link:?}, which loops")]
    SymlinkLoop {
        /// The path as given.
        path: String,
        /// The link on that path, relative to the root.
        link: String,
    },
    /// A mutation met a symbolic link on the path's parent directories: mutations follow no
    /// link (see [`Mutator::real_path`](crate::Mutator::real_path)).
    #[error(
        "path {path:?} goes through the symbolic link {link:?}, and shiro changes files only by their real path; nothing was changed"
    )]
    ThroughLink {
        /// The path as given.
        path: String,
        /// The link on that path, relative to the root.
        link: String,
    },
    /// The path is inside a directory that tools may never write: `.git/`, or `.shiro/`
    /// other than `.shiro/commands.md` and `.shiro/commands/`.
    #[error(
        "path {0:?} is protected: tools never write in .git/ or .shiro/ (except .shiro/commands.md and .shiro/commands/)"
    )]
    Protected(String),
    /// The path leads, through links, to a protected path.
    #[error(
        "path {path:?} leads to {real:?}, which is protected: tools never write in .git/ or .shiro/ (except .shiro/commands.md and .shiro/commands/)"
    )]
    ProtectedThroughLink {
        /// The path as given.
        path: String,
        /// Where it leads, relative to the root.
        real: String,
    },
}

/// A path inside the workspace, relative to its root, normalised to `/`-separated components.
///
/// It can only be built for a path that stays inside the root lexically; symbolic links are
/// checked by each [`Mutator`](crate::Mutator) when the path is used, because links can change
/// between building the path and using it.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkspacePath {
    rel: String,
}

impl WorkspacePath {
    /// Resolves `input` (relative to `root`, or absolute under `root`) to a workspace path.
    ///
    /// ```
    /// use std::path::Path;
    /// use shiro_tools::WorkspacePath;
    ///
    /// let root = Path::new("/work/repo");
    /// assert_eq!(WorkspacePath::resolve(root, "./src//lib.rs").unwrap().as_str(), "src/lib.rs");
    /// assert_eq!(WorkspacePath::resolve(root, "/work/repo/a.txt").unwrap().as_str(), "a.txt");
    /// assert!(WorkspacePath::resolve(root, "../escape").is_err());
    /// assert!(WorkspacePath::resolve(root, "/etc/passwd").is_err());
    /// assert!(WorkspacePath::resolve(root, "~/notes").is_err());
    /// ```
    ///
    /// A path that starts with `~` is refused ([`PathError::Tilde`]): a model that writes
    /// `~/notes` means its home directory, which a shell would expand and shiro does not, so
    /// taking it literally would make a directory named `~`. A name that really starts with
    /// `~` is reached as `./~name`. The workspace root itself (`.`) is [`PathError::Empty`].
    pub fn resolve(root: &Path, input: &str) -> Result<Self, PathError> {
        if input.starts_with('~') {
            return Err(PathError::Tilde(input.to_owned()));
        }
        Self::lexical(root, input)
    }

    /// Like [`WorkspacePath::resolve`], for a path that must name a file: the workspace root
    /// is refused as [`PathError::Root`], and a path that ends with `/` or `/.`, which names
    /// a directory, as [`PathError::TrailingSlash`].
    ///
    /// ```
    /// use std::path::Path;
    /// use shiro_tools::{PathError, WorkspacePath};
    ///
    /// let root = Path::new("/work/repo");
    /// assert_eq!(WorkspacePath::resolve_file(root, "src/lib.rs").unwrap().as_str(), "src/lib.rs");
    /// assert!(matches!(WorkspacePath::resolve_file(root, "src/"), Err(PathError::TrailingSlash(_))));
    /// assert!(matches!(WorkspacePath::resolve_file(root, "."), Err(PathError::Root(_))));
    /// ```
    pub fn resolve_file(root: &Path, input: &str) -> Result<Self, PathError> {
        let path = Self::resolve(root, input).map_err(|err| match err {
            PathError::Empty if !input.is_empty() => PathError::Root(input.to_owned()),
            other => other,
        })?;
        if input.ends_with('/') || input.ends_with("/.") {
            return Err(PathError::TrailingSlash(input.to_owned()));
        }
        Ok(path)
    }

    /// [`WorkspacePath::resolve`] without the check for `~`, which is about what a model
    /// means and not about where a path leads.
    fn lexical(root: &Path, input: &str) -> Result<Self, PathError> {
        if input.contains('\0') {
            return Err(PathError::Nul(input.to_owned()));
        }
        let path = Path::new(input);
        let relative = if path.is_absolute() {
            path.strip_prefix(root)
                .map_err(|_| PathError::Outside(input.to_owned()))?
        } else {
            path
        };
        let mut parts: Vec<&str> = Vec::new();
        for component in relative.components() {
            match component {
                Component::Normal(part) => {
                    let part = part
                        .to_str()
                        .ok_or_else(|| PathError::Outside(input.to_owned()))?;
                    parts.push(part);
                }
                Component::CurDir => {}
                Component::ParentDir => return Err(PathError::ParentDir(input.to_owned())),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(PathError::Outside(input.to_owned()));
                }
            }
        }
        if parts.is_empty() {
            return Err(PathError::Empty);
        }
        Ok(Self {
            rel: parts.join("/"),
        })
    }

    /// Builds a workspace path from a path already relative to the root (such as one read
    /// back from the undo log). The same rules as [`WorkspacePath::resolve`] apply, except
    /// that a first component named `~` is a name like any other: a command may have made it.
    pub fn from_relative(rel: &str) -> Result<Self, PathError> {
        if Path::new(rel).is_absolute() {
            return Err(PathError::Outside(rel.to_owned()));
        }
        Self::lexical(Path::new(""), rel)
    }

    /// The path relative to the root, `/`-separated.
    pub fn as_str(&self) -> &str {
        &self.rel
    }

    /// The path's components.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.rel.split('/')
    }

    /// The parent directory, or `None` when the parent is the workspace root.
    pub fn parent(&self) -> Option<WorkspacePath> {
        self.rel.rsplit_once('/').map(|(parent, _)| Self {
            rel: parent.to_owned(),
        })
    }

    /// Every proper ancestor, outermost first (`a`, `a/b` for `a/b/c`).
    pub fn ancestors(&self) -> Vec<WorkspacePath> {
        let mut out = Vec::new();
        let mut end = 0;
        while let Some(offset) = self.rel[end..].find('/') {
            end += offset;
            out.push(Self {
                rel: self.rel[..end].to_owned(),
            });
            end += 1;
        }
        out
    }

    /// The last component.
    pub fn file_name(&self) -> &str {
        self.rel.rsplit('/').next().unwrap_or(&self.rel)
    }

    /// Appends one or more components.
    pub fn join(&self, rest: &str) -> Result<WorkspacePath, PathError> {
        Self::from_relative(&format!("{}/{rest}", self.rel))
    }

    /// How many components deep the path is (`a` is 1).
    pub fn depth(&self) -> usize {
        self.components().count()
    }

    /// Whether this path is `other` or lies inside it.
    pub fn starts_with(&self, other: &WorkspacePath) -> bool {
        self.rel == other.rel
            || (self.rel.starts_with(&other.rel)
                && self.rel.as_bytes().get(other.rel.len()) == Some(&b'/'))
    }

    /// Whether tools are forbidden to write here: anything named `.git` and what is inside
    /// it (a submodule's too), and `.shiro` and what is inside it, except `.shiro/commands.md`
    /// and `.shiro/commands/`, which are the user's commands. Names are compared ignoring
    /// ASCII case, as a case-insensitive file system would resolve them. Check the real path
    /// (see [`Mutator::real_path`](crate::Mutator::real_path)), not a spelling through a link.
    pub fn is_protected(&self) -> bool {
        let mut parts = self.components().peekable();
        while let Some(part) = parts.next() {
            if part.eq_ignore_ascii_case(".git") {
                return true;
            }
            if part.eq_ignore_ascii_case(".shiro") {
                return !matches!(parts.peek(), Some(&"commands.md" | &"commands"));
            }
        }
        false
    }

    /// Whether no `Mutator` may change it, whoever asks: anything named `.git` and what is
    /// inside it, and what an earlier version of shiro kept in a `.shiro` directory
    /// (`.shiro/undo`, `.shiro/sessions`, `.shiro/bash`). The rest of `.shiro` is the user's
    /// (commands, configuration, skills): the file tools still refuse it
    /// ([`WorkspacePath::is_protected`]), but a bash command's change to it is applied and
    /// undone like any other.
    pub fn is_internal(&self) -> bool {
        let mut parts = self.components().peekable();
        while let Some(part) = parts.next() {
            if part.eq_ignore_ascii_case(".git") {
                return true;
            }
            if part.eq_ignore_ascii_case(".shiro")
                && parts.peek().is_some_and(|next| {
                    ["undo", "sessions", "bash"]
                        .iter()
                        .any(|name| next.eq_ignore_ascii_case(name))
                })
            {
                return true;
            }
        }
        false
    }

    /// The path on disk under `root`.
    pub fn to_fs_path(&self, root: &Path) -> std::path::PathBuf {
        root.join(&self.rel)
    }
}

impl fmt::Display for WorkspacePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rel)
    }
}

impl fmt::Debug for WorkspacePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.rel, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(input: &str) -> Result<String, PathError> {
        WorkspacePath::resolve(Path::new("/ws"), input).map(|p| p.as_str().to_owned())
    }

    #[test]
    fn normalises_relative_and_absolute_paths() {
        assert_eq!(resolve("a/b.txt").unwrap(), "a/b.txt");
        assert_eq!(resolve("./a//b/./c").unwrap(), "a/b/c");
        assert_eq!(resolve("/ws/a").unwrap(), "a");
        assert_eq!(resolve("a/").unwrap(), "a");
    }

    #[test]
    fn refuses_escapes() {
        assert_eq!(resolve(""), Err(PathError::Empty));
        assert_eq!(resolve("."), Err(PathError::Empty));
        assert_eq!(resolve("/ws"), Err(PathError::Empty));
        assert!(matches!(resolve("../x"), Err(PathError::ParentDir(_))));
        assert!(matches!(resolve("a/../../b"), Err(PathError::ParentDir(_))));
        assert!(matches!(resolve("/etc/passwd"), Err(PathError::Outside(_))));
        assert!(matches!(resolve("/wsx/a"), Err(PathError::Outside(_))));
        assert!(matches!(resolve("a\0b"), Err(PathError::Nul(_))));
    }

    #[test]
    fn refuses_a_leading_tilde_from_a_model_only() {
        assert_eq!(resolve("~/notes"), Err(PathError::Tilde("~/notes".into())));
        assert_eq!(resolve("~"), Err(PathError::Tilde("~".into())));
        assert_eq!(resolve("~user/x"), Err(PathError::Tilde("~user/x".into())));
        // A name that really starts with `~`, reached the way a shell reaches it.
        assert_eq!(resolve("./~notes").unwrap(), "~notes");
        assert_eq!(resolve("a/~b").unwrap(), "a/~b");
        // What the undo log holds came from the disk, where a command may have made `~`.
        assert_eq!(WorkspacePath::from_relative("~/x").unwrap().as_str(), "~/x");
        assert_eq!(
            WorkspacePath::from_relative("~")
                .unwrap()
                .join("y")
                .unwrap()
                .as_str(),
            "~/y"
        );
    }

    #[test]
    fn a_file_path_names_no_directory() {
        let file = |input: &str| {
            WorkspacePath::resolve_file(Path::new("/ws"), input).map(|p| p.as_str().to_owned())
        };
        assert_eq!(file("a/b.txt").unwrap(), "a/b.txt");
        assert_eq!(file("/ws/a").unwrap(), "a");
        assert_eq!(file(""), Err(PathError::Empty));
        for root in [".", "./", "/ws", "/ws/", "/ws/."] {
            assert_eq!(file(root), Err(PathError::Root(root.into())), "{root}");
        }
        for dir in ["a/", "a/b/", "a/.", "/ws/a/"] {
            assert_eq!(
                file(dir),
                Err(PathError::TrailingSlash(dir.into())),
                "{dir}"
            );
        }
        assert!(matches!(file("~/a"), Err(PathError::Tilde(_))));
        assert!(matches!(file("../a/"), Err(PathError::ParentDir(_))));
        // Each reads as a sentence that says what to do.
        let messages: Vec<String> = ["a/", "a/.", ".", "~/a"]
            .iter()
            .map(|input| file(input).unwrap_err().to_string())
            .collect();
        insta::assert_snapshot!(messages.join("\n"), @r#"
        path "a/" ends with `/`, so it names a directory; name a file
        path "a/." ends with `/.`, so it names a directory; name a file
        path "." names the workspace root, which is a directory; name a file inside it
        path "~/a" starts with `~`, but shiro does not expand `~` to a home directory: paths are relative to the workspace root; give a path inside the workspace
        "#);
    }

    #[test]
    fn knows_protected_directories() {
        let p = |s| WorkspacePath::from_relative(s).unwrap();
        assert!(p(".git").is_protected());
        assert!(p(".git/config").is_protected());
        assert!(p(".shiro/undo/log").is_protected());
        assert!(!p(".shiro/commands.md").is_protected());
        assert!(!p(".shiro/commands/review.md").is_protected());
        assert!(!p(".shiro/commands").is_protected());
        assert!(p(".shiro").is_protected());
        assert!(p(".shiro/config.toml").is_protected());
        assert!(p(".shiro/sessions/a.json").is_protected());
        assert!(p(".shiro/commands.md.bak").is_protected());
        assert!(p(".GIT/config").is_protected());
        assert!(p(".Shiro/undo/log.jsonl").is_protected());
        assert!(p("vendor/lib/.git/hooks/pre-commit").is_protected());
        assert!(p("sub/.shiro/undo/log.jsonl").is_protected());
        assert!(!p(".github/workflows/ci.yml").is_protected());
        assert!(!p("src/.git_keep").is_protected());
        assert!(!p("src/.gitignore").is_protected());
    }

    #[test]
    fn knows_internal_directories() {
        let p = |s| WorkspacePath::from_relative(s).unwrap();
        for internal in [
            ".git",
            ".git/config",
            "sub/.GIT/HEAD",
            ".shiro/undo",
            ".shiro/undo/log.jsonl",
            ".Shiro/Sessions/a.jsonl",
            "sub/.shiro/bash/0123",
        ] {
            assert!(p(internal).is_internal(), "{internal}");
            assert!(p(internal).is_protected(), "{internal}");
        }
        for users in [
            ".shiro",
            ".shiro/config.toml",
            ".shiro/commands.md",
            ".shiro/skills/x/SKILL.md",
            ".shiro/undone",
            "src/.gitignore",
        ] {
            assert!(!p(users).is_internal(), "{users}");
        }
    }

    #[test]
    fn ancestors_and_parent() {
        let p = WorkspacePath::from_relative("a/b/c").unwrap();
        let ancestors: Vec<_> = p
            .ancestors()
            .iter()
            .map(|a| a.as_str().to_owned())
            .collect();
        assert_eq!(ancestors, ["a", "a/b"]);
        assert_eq!(p.parent().unwrap().as_str(), "a/b");
        assert_eq!(p.file_name(), "c");
        assert!(
            WorkspacePath::from_relative("a")
                .unwrap()
                .parent()
                .is_none()
        );
        assert!(p.starts_with(&WorkspacePath::from_relative("a/b").unwrap()));
        assert!(!p.starts_with(&WorkspacePath::from_relative("a/bc").unwrap()));
    }
}
