//! Which directory is the workspace, and whether shiro may make its state (`.shiro/`) there.
//! The decisions are written up in `docs/cli.md`, "The workspace".
//!
//! Nothing here reads the environment or the terminal: `main` passes the current directory,
//! the home directory and the answers in.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

/// How the workspace was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chosen {
    /// `-C DIR` / `--workspace DIR`: used exactly as given.
    Flag,
    /// The root of the git repository that holds the current directory.
    Repository,
    /// The current directory, which no git repository holds.
    CurrentDir,
}

/// The workspace of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// Its root, canonical.
    pub root: PathBuf,
    /// How it was chosen.
    pub chosen: Chosen,
}

/// The workspace for a run started in `cwd`: `flag` when given, else the root of the git
/// repository that holds `cwd`, else `cwd` itself.
pub fn locate(flag: Option<&Path>, cwd: &Path) -> Result<Workspace> {
    let (dir, chosen) = match flag {
        Some(dir) => (dir.to_owned(), Chosen::Flag),
        None => (cwd.to_owned(), Chosen::CurrentDir),
    };
    let dir = cwd.join(dir);
    let root = dir
        .canonicalize()
        .map_err(|err| anyhow::anyhow!("workspace {}: {err}", dir.display()))?;
    if !root.is_dir() {
        bail!("workspace {} is not a directory", root.display());
    }
    if chosen == Chosen::Flag {
        return Ok(Workspace { root, chosen });
    }
    Ok(match enclosing_repository(&root) {
        Some(repository) => Workspace {
            root: repository,
            chosen: Chosen::Repository,
        },
        None => Workspace { root, chosen },
    })
}

/// The root of the git repository that holds `dir`: the nearest of `dir` and its ancestors
/// that has a `.git` entry. A directory is a repository's; a file is a worktree's or a
/// submodule's (`gitdir: …`), whose root is where the file is, as git sees it.
pub fn enclosing_repository(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|candidate| {
            // A link named `.git` is followed, as git follows it.
            std::fs::metadata(candidate.join(".git"))
                .is_ok_and(|meta| meta.is_dir() || meta.is_file())
        })
        .map(Path::to_owned)
}

/// A place where shiro does not make `.shiro/` unasked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposed {
    /// The user's home directory.
    Home,
    /// The filesystem's root, `/`.
    FilesystemRoot,
}

/// Whether `workspace` is a place where `.shiro/` must not be made without asking: the home
/// directory or `/`, chosen without `-C`, without a `.shiro/` yet.
pub fn exposed(workspace: &Workspace, home: Option<&Path>) -> Option<Exposed> {
    if workspace.chosen == Chosen::Flag
        || std::fs::symlink_metadata(workspace.root.join(".shiro")).is_ok()
    {
        return None;
    }
    let home = home.and_then(|home| home.canonicalize().ok());
    if home.as_deref() == Some(workspace.root.as_path()) {
        Some(Exposed::Home)
    } else if workspace.root.parent().is_none() {
        Some(Exposed::FilesystemRoot)
    } else {
        None
    }
}

/// What the workspace is and why, for the question and the refusal:
/// `your home directory /home/x (the git repository that holds the current directory)`.
fn described(workspace: &Workspace, exposed: Exposed) -> String {
    let place = match exposed {
        Exposed::Home => "your home directory",
        Exposed::FilesystemRoot => "the filesystem root",
    };
    let why = match workspace.chosen {
        Chosen::Repository => " (the root of the git repository you are in)",
        Chosen::CurrentDir | Chosen::Flag => "",
    };
    format!("{place} {}{why}", workspace.root.display())
}

/// The question asked on a terminal before making `.shiro/` in an exposed workspace.
pub fn question(workspace: &Workspace, exposed: Exposed) -> String {
    format!(
        "the workspace is {}; shiro keeps its undo log and sessions in .shiro/ there. Create it in {}? [y/N] ",
        described(workspace, exposed),
        workspace.root.display()
    )
}

/// Whether an answer to [`question`] says yes (`y` or `yes`, in any case); anything else,
/// the empty answer included, is no.
pub fn is_yes(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Why shiro stops without making `.shiro/` when there is no terminal to ask on.
pub fn refusal(workspace: &Workspace, exposed: Exposed) -> String {
    with_the_way_out(
        workspace,
        &format!(
            "will not create .shiro/ (shiro's undo log and sessions) in {} without asking, and there is no terminal to ask on",
            described(workspace, exposed)
        ),
    )
}

/// What shiro says when the user answered no to [`question`].
pub fn declined(workspace: &Workspace, exposed: Exposed) -> String {
    with_the_way_out(
        workspace,
        &format!(
            "did not create .shiro/ in {}",
            described(workspace, exposed)
        ),
    )
}

fn with_the_way_out(workspace: &Workspace, what: &str) -> String {
    format!(
        "{what}; run shiro in a project directory, or pass -C DIR to choose the workspace (`-C {}` uses this one)",
        workspace.root.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().canonicalize().unwrap()
    }

    #[test]
    fn the_workspace_is_the_enclosing_repository_unless_the_flag_names_one() {
        let tmp = tempfile::tempdir().unwrap();
        let root = canonical(&tmp);
        let deep = root.join("repo/src/deep");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(
            locate(None, &deep).unwrap(),
            Workspace {
                root: deep.clone(),
                chosen: Chosen::CurrentDir
            },
            "outside a repository: the current directory"
        );

        std::fs::create_dir(root.join("repo/.git")).unwrap();
        let found = locate(None, &deep).unwrap();
        assert_eq!(found.root, root.join("repo"));
        assert_eq!(found.chosen, Chosen::Repository);

        // A worktree or submodule has a `.git` file; the nearest one wins.
        std::fs::write(root.join("repo/src/.git"), "gitdir: ../.git/modules/src\n").unwrap();
        assert_eq!(locate(None, &deep).unwrap().root, root.join("repo/src"));

        // `-C` is used exactly as given, relative to the current directory.
        let flagged = locate(Some(Path::new("deep")), &root.join("repo/src")).unwrap();
        assert_eq!(
            flagged,
            Workspace {
                root: deep,
                chosen: Chosen::Flag
            }
        );
        assert!(locate(Some(Path::new("missing")), &root).is_err());
        std::fs::write(root.join("file"), "").unwrap();
        let err = locate(Some(Path::new("file")), &root).unwrap_err();
        assert!(err.to_string().ends_with("is not a directory"), "{err}");
    }

    #[test]
    fn home_and_the_filesystem_root_are_exposed_until_they_have_a_shiro_directory() {
        let home = tempfile::tempdir().unwrap();
        let root = canonical(&home);
        let at = |root: &Path, chosen| Workspace {
            root: root.to_owned(),
            chosen,
        };
        let implicit = at(&root, Chosen::CurrentDir);
        assert_eq!(exposed(&implicit, Some(&root)), Some(Exposed::Home));
        assert_eq!(
            exposed(&at(&root, Chosen::Repository), Some(&root)),
            Some(Exposed::Home),
            "a home directory that is a repository (dotfiles) too"
        );
        assert_eq!(exposed(&at(&root, Chosen::Flag), Some(&root)), None);
        assert_eq!(exposed(&implicit, None), None);
        assert_eq!(
            exposed(&at(&root.join("x"), Chosen::CurrentDir), Some(&root)),
            None
        );
        // The filesystem root counts whatever the home directory is (unless it has .shiro/,
        // which a test cannot make).
        if std::fs::symlink_metadata("/.shiro").is_err() {
            assert_eq!(
                exposed(&at(Path::new("/"), Chosen::CurrentDir), Some(&root)),
                Some(Exposed::FilesystemRoot)
            );
        }
        std::fs::create_dir(root.join(".shiro")).unwrap();
        assert_eq!(exposed(&implicit, Some(&root)), None);
    }

    #[test]
    fn only_yes_is_yes() {
        for yes in ["y", "Y", "yes", " YES\n"] {
            assert!(is_yes(yes), "{yes:?}");
        }
        for no in ["", "\n", "n", "no", "yep", "y es"] {
            assert!(!is_yes(no), "{no:?}");
        }
    }

    #[test]
    fn the_question_and_the_refusals_name_the_place_and_the_way_out() {
        let home = Workspace {
            root: PathBuf::from("/home/ada"),
            chosen: Chosen::Repository,
        };
        let slash = Workspace {
            root: PathBuf::from("/"),
            chosen: Chosen::CurrentDir,
        };
        let text = [
            question(&home, Exposed::Home),
            declined(&home, Exposed::Home),
            refusal(&slash, Exposed::FilesystemRoot),
        ]
        .join("\n");
        insta::assert_snapshot!(text, @r"
        the workspace is your home directory /home/ada (the root of the git repository you are in); shiro keeps its undo log and sessions in .shiro/ there. Create it in /home/ada? [y/N] 
        did not create .shiro/ in your home directory /home/ada (the root of the git repository you are in); run shiro in a project directory, or pass -C DIR to choose the workspace (`-C /home/ada` uses this one)
        will not create .shiro/ (shiro's undo log and sessions) in the filesystem root / without asking, and there is no terminal to ask on; run shiro in a project directory, or pass -C DIR to choose the workspace (`-C /` uses this one)
        ");
    }
}
