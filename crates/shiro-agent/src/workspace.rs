//! Which directory is the workspace, and whether shiro may work there: its state directory
//! must lie outside the workspace.
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

/// Why shiro refuses to work in `workspace` with its state home at `state_home`: the two
/// overlap (the home directory, or `/`, holds `~/.local/state/shiro`), so the agent's tools
/// and commands could reach the undo history. `None` when they are apart.
pub fn overlap_refusal(workspace: &Workspace, state_home: &Path) -> Option<String> {
    let root = &workspace.root;
    if !state_home.starts_with(root) && !root.starts_with(state_home) {
        return None;
    }
    let why = match workspace.chosen {
        Chosen::Repository => " (the root of the git repository you are in)",
        Chosen::CurrentDir | Chosen::Flag => "",
    };
    let (root, state) = (root.display(), state_home.display());
    // Either may hold the other; each says it the right way round.
    Some(if state_home.starts_with(&workspace.root) {
        format!(
            "the workspace {root}{why} holds shiro's state directory {state}, where the agent's tools and commands could reach the undo history; run shiro in a project directory, pass -C DIR to choose another workspace, or set SHIRO_STATE_DIR to a directory outside this one"
        )
    } else {
        format!(
            "the workspace {root}{why} lies inside shiro's state directory {state}, where the agent's tools and commands could reach the undo history; run shiro in a project directory, pass -C DIR to choose another workspace, or set SHIRO_STATE_DIR to a directory apart from it"
        )
    })
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
    fn a_workspace_that_holds_the_state_home_is_refused_with_the_way_out() {
        let home = Workspace {
            root: PathBuf::from("/home/ada"),
            chosen: Chosen::Repository,
        };
        let slash = Workspace {
            root: PathBuf::from("/"),
            chosen: Chosen::CurrentDir,
        };
        let state = Path::new("/home/ada/.local/state/shiro");
        let project = Workspace {
            root: PathBuf::from("/home/ada/shop"),
            chosen: Chosen::Flag,
        };
        assert_eq!(overlap_refusal(&project, state), None);
        let inside = Workspace {
            root: PathBuf::from("/home/ada/.local/state/shiro/x"),
            chosen: Chosen::Flag,
        };
        let text = [
            overlap_refusal(&home, state).unwrap(),
            overlap_refusal(&slash, state).unwrap(),
            overlap_refusal(&inside, state).unwrap(),
        ]
        .join("\n");
        insta::assert_snapshot!(text, @r"
        the workspace /home/ada (the root of the git repository you are in) holds shiro's state directory /home/ada/.local/state/shiro, where the agent's tools and commands could reach the undo history; run shiro in a project directory, pass -C DIR to choose another workspace, or set SHIRO_STATE_DIR to a directory outside this one
        the workspace / holds shiro's state directory /home/ada/.local/state/shiro, where the agent's tools and commands could reach the undo history; run shiro in a project directory, pass -C DIR to choose another workspace, or set SHIRO_STATE_DIR to a directory outside this one
        the workspace /home/ada/.local/state/shiro/x lies inside shiro's state directory /home/ada/.local/state/shiro, where the agent's tools and commands could reach the undo history; run shiro in a project directory, pass -C DIR to choose another workspace, or set SHIRO_STATE_DIR to a directory apart from it
        ");
    }
}
