//! What `shiro log` says of the next turn to undo ([`UndoStore::check`]) against what undoing
//! it does, for a turn that moved git's state as well as a file: both come from one check,
//! so a path the undo refuses on is one the log names, and a lock of git's that would stop
//! the undo makes the log say so rather than "clean". The repository is made by hand (its
//! `.git` holds only what the undo reads and moves); no git is run.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use common::p;
use shiro_tools::git::{GitChange, IndexChange, Move};
use shiro_tools::{FsMutator, Mutator};
use shiro_undo::{StoreOptions, TurnStart, UndoError, UndoOptions, UndoStore};

const MAIN: &str = "1111111111111111111111111111111111111111";
const AGENT: &str = "2222222222222222222222222222222222222222";
const USER: &str = "3333333333333333333333333333333333333333";

const FORCE: UndoOptions = UndoOptions {
    force: true,
    dry_run: false,
};

struct Repo {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ws: FsMutator,
    store: UndoStore,
}

impl Repo {
    fn write(&self, rel: &str, bytes: &str) {
        let path = self.root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
}

/// A repository on `main`, with a file, and one turn that did what `git checkout -b feature
/// && git commit -am agent` does: it edited `a.txt`, made `refs/heads/feature`, moved HEAD
/// to it and changed the index.
async fn repo_after_a_turn() -> Repo {
    let dir = common::fast_tempdir();
    let root = dir.path().join("ws");
    fs::create_dir(&root).unwrap();
    let ws = FsMutator::new(&root).unwrap();
    let state = shiro_undo::StateDir::at(dir.path().join("state"), &root);
    let store = UndoStore::open_with(&state, &ws, StoreOptions::default())
        .await
        .unwrap();
    let repo = Repo {
        _dir: dir,
        root,
        ws,
        store,
    };
    repo.write(".git/HEAD", "ref: refs/heads/main\n");
    repo.write(".git/refs/heads/main", &format!("{MAIN}\n"));
    repo.write(".git/index", "index of main");
    repo.write("a.txt", "a\n");

    let rec = repo.store.recorder(repo.ws.clone());
    rec.begin_turn(TurnStart {
        summary: "branch and commit".to_owned(),
        history_marker: 0,
        session: None,
    })
    .await
    .unwrap();
    rec.write(&p("a.txt"), b"agent\n", None).await.unwrap();
    repo.write(".git/refs/heads/feature", &format!("{AGENT}\n"));
    repo.write(".git/HEAD", "ref: refs/heads/feature\n");
    repo.write(".git/index", "index of the agent's commit");
    let moved = |before: Option<&str>, after: &str| Move {
        before: before.map(str::to_owned),
        after: Some(after.to_owned()),
    };
    let change = GitChange {
        moved: BTreeMap::from([
            (
                "HEAD".to_owned(),
                moved(Some("ref: refs/heads/main"), "ref: refs/heads/feature"),
            ),
            ("refs/heads/feature".to_owned(), moved(None, AGENT)),
        ]),
        index: Some(IndexChange {
            before: Some(b"index of main".to_vec()),
            after: Some(b"index of the agent's commit".to_vec()),
        }),
    };
    rec.note_git(&change).await.unwrap();
    rec.finish_turn().await.unwrap().unwrap();
    repo
}

/// Every file under `root`, with its bytes.
fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    common::disk_tree(root)
        .into_iter()
        .filter_map(|(path, (_, bytes))| Some((path, bytes?)))
        .collect()
}

/// After `since` changes the repository, what the log says of the turn (the paths of
/// [`UndoStore::check`], or `clean`), then what an undo (forced, with `force`) does, one
/// line each. An undo that fails must have changed nothing and left the turn undamaged.
async fn check(since: impl FnOnce(&Repo), force: bool) -> String {
    let repo = repo_after_a_turn().await;
    since(&repo);
    let standing = repo.store.check(&repo.ws).await.unwrap();
    let log = if standing.is_empty() {
        "clean".to_owned()
    } else {
        let paths: Vec<String> = standing.iter().map(|c| c.path.to_string()).collect();
        paths.join(", ")
    };
    let before = files(&repo.root);
    let options = if force { FORCE } else { UndoOptions::default() };
    let undo = match repo.store.undo(&repo.ws, options).await {
        Ok(_) => "done".to_owned(),
        Err(err) => {
            assert_eq!(files(&repo.root), before, "a failed undo changed files");
            let turn = &repo.store.log().unwrap()[0];
            assert_eq!(turn.damage, None, "a refused undo marks its turn");
            match err {
                UndoError::Conflict(report) => {
                    let paths: Vec<String> = report
                        .conflicts
                        .iter()
                        .map(|c| c.path.to_string())
                        .collect();
                    format!("refused on {}", paths.join(", "))
                }
                other => format!("failed: {other}"),
            }
        }
    };
    format!("log: {log}\nundo: {undo}")
}

#[tokio::test]
async fn nothing_moved_since_is_clean() {
    insta::assert_snapshot!(check(|_| {}, false).await, @r"
    log: clean
    undo: done
    ");
}

#[tokio::test]
async fn a_ref_moved_since_is_named_by_both() {
    let user_commits = |repo: &Repo| repo.write(".git/refs/heads/feature", &format!("{USER}\n"));
    insta::assert_snapshot!(check(user_commits, false).await, @r"
    log: .git/refs/heads/feature
    undo: refused on .git/refs/heads/feature
    ");
}

#[tokio::test]
async fn a_file_a_ref_and_the_index_moved_since_are_named_by_both() {
    let user_commits = |repo: &Repo| {
        repo.write("a.txt", "user\n");
        repo.write(".git/refs/heads/feature", &format!("{USER}\n"));
        repo.write(".git/index", "index of the user's commit");
    };
    insta::assert_snapshot!(check(user_commits, false).await, @r"
    log: .git/index, .git/refs/heads/feature, a.txt
    undo: refused on .git/index, .git/refs/heads/feature, a.txt
    ");
}

#[tokio::test]
async fn a_lock_on_what_the_undo_moves_is_named_and_stops_it_before_any_change() {
    for lock in ["HEAD.lock", "refs/heads/feature.lock", "index.lock"] {
        let running = |repo: &Repo| repo.write(&format!(".git/{lock}"), "");
        let said = check(running, false).await;
        assert_eq!(
            said,
            format!(
                "log: .git/{lock}\nundo: failed: cannot undo turn #1: .git/{lock} exists: another git process seems to be running in this repository; nothing was changed (run it again once git is done; if no git is running, one that stopped left the lock behind: remove it)"
            )
        );
    }
}

/// Deleting the branch the turn made rewrites `packed-refs` too, under its lock.
#[tokio::test]
async fn the_lock_of_packed_refs_stops_an_undo_that_deletes_a_ref() {
    let running = |repo: &Repo| repo.write(".git/packed-refs.lock", "");
    insta::assert_snapshot!(check(running, false).await, @r"
    log: .git/packed-refs.lock
    undo: failed: cannot undo turn #1: .git/packed-refs.lock exists: another git process seems to be running in this repository; nothing was changed (run it again once git is done; if no git is running, one that stopped left the lock behind: remove it)
    ");
}

#[tokio::test]
async fn a_lock_on_what_the_undo_does_not_move_is_no_obstacle() {
    let running = |repo: &Repo| repo.write(".git/refs/heads/main.lock", "");
    insta::assert_snapshot!(check(running, false).await, @r"
    log: clean
    undo: done
    ");
}

/// A conflict refuses first (`--force` is the user's to decide); forced over it, the lock
/// still stops the undo before it changes anything.
#[tokio::test]
async fn a_conflict_and_a_lock_are_both_named() {
    let both = |repo: &Repo| {
        repo.write(".git/refs/heads/feature", &format!("{USER}\n"));
        repo.write(".git/HEAD.lock", "");
    };
    insta::assert_snapshot!(check(both, false).await, @r"
    log: .git/refs/heads/feature, .git/HEAD.lock
    undo: refused on .git/refs/heads/feature
    ");
    insta::assert_snapshot!(check(both, true).await, @r"
    log: .git/refs/heads/feature, .git/HEAD.lock
    undo: failed: cannot undo turn #1: .git/HEAD.lock exists: another git process seems to be running in this repository; nothing was changed (run it again once git is done; if no git is running, one that stopped left the lock behind: remove it)
    ");
}
