//! The module against the real `git`: what moves around the commands an agent runs, and
//! whether setting it back leaves git showing what it showed before.

use std::fs;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use proptest::prelude::*;

use super::*;

/// Moves as [`Repo::set`] takes them: `(name, from, to)`.
type Moves<'a> = [(&'a str, Option<&'a str>, Option<&'a str>)];

/// A repository made by git, with one commit on `main`, and a directory to keep an index in.
struct Fixture {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    root: PathBuf,
    keep: PathBuf,
    repo: Repo,
}

impl Fixture {
    /// `None`, saying why, when git is not installed.
    fn new() -> Option<Fixture> {
        if Command::new("git").arg("--version").output().is_err() {
            eprintln!("skipped: no git to run");
            return None;
        }
        let tmp = tempfile::tempdir().unwrap();
        let (home, root, keep) = (
            tmp.path().to_owned(),
            tmp.path().join("repo"),
            tmp.path().join("keep"),
        );
        fs::create_dir(&root).unwrap();
        let repo = Repo {
            git_dir: root.join(".git"),
        };
        let t = Fixture {
            _tmp: tmp,
            home,
            root,
            keep,
            repo,
        };
        t.git(&["init", "-q", "-b", "main"]);
        fs::create_dir(t.root.join("dir")).unwrap();
        for file in ["a.txt", "dir/b.txt", "dir/c.txt"] {
            t.write(file, "a\n");
        }
        t.git(&["add", "-A"]);
        t.git(&["commit", "-q", "-m", "init"]);
        assert!(Repo::at(&t.root).is_some());
        Some(t)
    }

    /// Runs git in the repository, with none of the machine's configuration, at a fixed date.
    fn git(&self, args: &[&str]) -> String {
        let config = "-c user.name=t -c user.email=t@t -c commit.gpgsign=false -c gc.auto=0";
        let out = Command::new("git")
            .args(config.split(' '))
            .args(args)
            .current_dir(&self.root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", &self.home)
            .env("GIT_AUTHOR_DATE", "946684800 +0000")
            .env("GIT_COMMITTER_DATE", "946684800 +0000")
            .env_remove("GIT_DIR")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_WORK_TREE")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn write(&self, file: &str, content: &str) {
        fs::write(self.root.join(file), content).unwrap();
    }

    fn exists(&self, file: &str) -> bool {
        self.root.join(".git").join(file).exists()
    }

    /// What changed in the repository while `run` ran.
    fn change(&self, run: impl FnOnce(&Fixture)) -> GitChange {
        let before = self.repo.before(&self.keep).unwrap();
        run(self);
        let change = self.repo.since(before).unwrap();
        assert!(
            !self.keep.join("index").exists(),
            "the kept index was left behind"
        );
        change
    }

    /// Sets back what `change` moved, as the undo store does.
    fn undo(&self, change: &GitChange, message: &str) {
        let moves: Vec<_> = change
            .moved
            .iter()
            .map(|(name, m)| (name.as_str(), m.after.as_deref(), m.before.as_deref()))
            .collect();
        self.repo.set(&moves, message).unwrap();
        if let Some(index) = &change.index {
            self.repo.set_index(index.before.as_deref()).unwrap();
        }
    }

    /// What a user sees of the repository.
    fn state(&self) -> Vec<String> {
        let commands: [&[&str]; 5] = [
            &["rev-parse", "HEAD"],
            &["branch", "--show-current"],
            &["status", "--porcelain"],
            &["branch", "--list"],
            &["stash", "list"],
        ];
        commands.iter().map(|args| self.git(args)).collect()
    }
}

fn names(change: &GitChange) -> Vec<&str> {
    change.moved.keys().map(String::as_str).collect()
}

#[test]
fn checkout_and_commit_move_head_and_make_a_branch() {
    let Some(t) = Fixture::new() else { return };
    let index = t.repo.index().unwrap();
    let change = t.change(|t| {
        t.git(&["checkout", "-q", "-b", "x"]);
        t.write("a.txt", "b\n");
        t.git(&["commit", "-q", "-am", "m"]);
    });
    assert_eq!(names(&change), ["HEAD", "refs/heads/x"]);
    let head = &change.moved["HEAD"];
    assert_eq!(head.before.as_deref(), Some("ref: refs/heads/main"));
    assert_eq!(head.after.as_deref(), Some("ref: refs/heads/x"));
    let x = t.git(&["rev-parse", "x"]).trim().to_owned();
    assert_eq!(
        change.moved["refs/heads/x"],
        Move {
            before: None,
            after: Some(x)
        }
    );
    // The commit staged a.txt's new content: the index names another blob.
    assert_eq!(
        change.index,
        Some(IndexChange {
            before: index,
            after: t.repo.index().unwrap()
        })
    );
}

#[test]
fn status_changes_nothing_even_when_git_rewrites_the_index() {
    let Some(t) = Fixture::new() else { return };
    // Stale cached stats make status refresh them and write the index again.
    let file = fs::File::options()
        .write(true)
        .open(t.root.join("a.txt"))
        .unwrap();
    file.set_modified(UNIX_EPOCH + Duration::from_secs(1_000_000))
        .unwrap();
    let index = t.repo.index().unwrap();
    let change = t.change(|t| {
        t.git(&["status", "--porcelain"]);
    });
    assert_ne!(
        t.repo.index().unwrap(),
        index,
        "git did not rewrite the index"
    );
    assert_eq!(change, GitChange::default());
}

#[test]
fn add_changes_the_index() {
    let Some(t) = Fixture::new() else { return };
    t.write("new.txt", "n\n");
    let index = t.repo.index().unwrap();
    let change = t.change(|t| {
        t.git(&["add", "-A"]);
    });
    assert!(change.moved.is_empty());
    assert_eq!(
        change.index,
        Some(IndexChange {
            before: index,
            after: t.repo.index().unwrap()
        })
    );
    assert_eq!(
        describe(&change.moved, change.index.is_some()),
        "index changed"
    );
}

#[test]
fn stash_moves_the_stash_list_and_set_takes_it_back() {
    let Some(t) = Fixture::new() else { return };
    t.write("a.txt", "changed\n");
    let state = t.state();
    let change = t.change(|t| {
        t.git(&["stash", "-q"]);
    });
    assert_eq!(names(&change), [STASH_LOG, "refs/stash"]);
    assert_eq!(
        describe(&change.moved, change.index.is_some()),
        "stash: 1 entry added"
    );
    t.undo(&change, "undo: stash");
    // The worktree is not this module's: the undo store puts the file back.
    t.write("a.txt", "changed\n");
    assert_eq!(t.state(), state);
    assert!(!t.exists("logs/refs/stash"));
}

#[test]
fn pack_refs_changes_nothing() {
    let Some(t) = Fixture::new() else { return };
    t.git(&["branch", "x"]);
    t.git(&["tag", "-a", "t", "-m", "t"]);
    let change = t.change(|t| {
        t.git(&["pack-refs", "--all"]);
    });
    assert!(!t.exists("refs/heads/main"), "git left the refs loose");
    assert_eq!(change, GitChange::default());
}

#[test]
fn set_takes_back_a_checkout_and_a_commit_and_puts_them_again() {
    let Some(t) = Fixture::new() else { return };
    let state = t.state();
    let change = t.change(|t| {
        t.git(&["checkout", "-q", "-b", "x"]);
        t.write("a.txt", "b\n");
        t.git(&["commit", "-q", "-am", "m"]);
    });
    let after = t.state();
    t.undo(&change, "undo: commit");
    t.write("a.txt", "a\n");
    assert_eq!(t.state(), state);
    assert!(
        t.git(&["reflog", "-1"])
            .ends_with(" HEAD@{0}: undo: commit\n")
    );
    assert!(!t.exists("refs/heads/x") && !t.exists("logs/refs/heads/x"));

    let redo = GitChange {
        moved: change
            .moved
            .iter()
            .map(|(name, m)| {
                (
                    name.clone(),
                    Move {
                        before: m.after.clone(),
                        after: m.before.clone(),
                    },
                )
            })
            .collect(),
        index: change.index.map(|i| IndexChange {
            before: i.after,
            after: i.before,
        }),
    };
    t.undo(&redo, "redo: commit");
    t.write("a.txt", "b\n");
    assert_eq!(t.state(), after);
    assert!(
        t.git(&["reflog", "-1", "x"])
            .ends_with(" x@{0}: redo: commit\n")
    );
}

#[test]
fn set_deletes_packed_refs_their_peeled_lines_and_emptied_directories() {
    let Some(t) = Fixture::new() else { return };
    t.git(&["branch", "x"]);
    t.git(&["tag", "-a", "t", "-m", "t"]);
    t.git(&["pack-refs", "--all"]);
    t.git(&["branch", "feature/y"]);
    assert!(
        fs::read_to_string(t.root.join(".git/packed-refs"))
            .unwrap()
            .contains("\n^")
    );
    let value = |name| t.repo.value(name).unwrap();
    let (x, tag, y) = (
        value("refs/heads/x"),
        value("refs/tags/t"),
        value("refs/heads/feature/y"),
    );
    let moves = [
        ("refs/tags/t", tag.as_deref(), None),
        ("refs/heads/x", x.as_deref(), None),
        ("refs/heads/feature/y", y.as_deref(), None),
    ];
    t.repo.set(&moves, "m").unwrap();
    assert_eq!(
        t.git(&["for-each-ref", "--format=%(refname)"]),
        "refs/heads/main\n"
    );
    assert!(
        !fs::read_to_string(t.root.join(".git/packed-refs"))
            .unwrap()
            .contains('^')
    );
    for gone in [
        "logs/refs/heads/x",
        "refs/heads/feature",
        "logs/refs/heads/feature",
        "packed-refs.lock",
    ] {
        assert!(!t.exists(gone), "{gone} is still there");
    }
    assert!(t.exists("refs/heads") && t.exists("logs/refs/heads/main"));
}

#[test]
fn a_lock_file_means_git_is_running_and_nothing_is_set() {
    let Some(t) = Fixture::new() else { return };
    fs::write(t.root.join(".git/refs/heads/main.lock"), "").unwrap();
    let main = t.repo.value("refs/heads/main").unwrap();
    let other = "1".repeat(40);
    let moves = [
        ("refs/heads/y", None, main.as_deref()),
        ("refs/heads/main", main.as_deref(), Some(other.as_str())),
    ];
    let err = t.repo.set(&moves, "m").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
    let message = err.to_string();
    assert!(
        message.ends_with(
            "main.lock exists: another git process seems to be running in this repository"
        ),
        "{message}"
    );
    assert_eq!(t.repo.value("refs/heads/main").unwrap(), main);
    let mut left: Vec<_> = fs::read_dir(t.root.join(".git/refs/heads"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["main", "main.lock"]);
}

#[test]
fn names_that_could_leave_the_refs_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(Repo::at(tmp.path()).is_none());
    fs::write(tmp.path().join(".git"), "gitdir: elsewhere\n").unwrap();
    assert!(Repo::at(tmp.path()).is_none(), "a worktree's .git file");
    fs::remove_file(tmp.path().join(".git")).unwrap();
    fs::create_dir(tmp.path().join("real")).unwrap();
    std::os::unix::fs::symlink("real", tmp.path().join(".git")).unwrap();
    assert!(Repo::at(tmp.path()).is_none(), "a .git link");
    fs::remove_file(tmp.path().join(".git")).unwrap();
    fs::create_dir_all(tmp.path().join(".git/reftable")).unwrap();
    assert!(Repo::at(tmp.path()).is_none(), "refs in a reftable");
    fs::remove_dir(tmp.path().join(".git/reftable")).unwrap();
    let repo = Repo::at(tmp.path()).unwrap();

    let oid = "1".repeat(40);
    let names = [
        "refs/../config",
        "/etc/passwd",
        "objects/x",
        "refs/heads//x",
        "refs/",
        "refs/heads/x.lock",
    ];
    for name in
        names
            .into_iter()
            .chain(["refs/a\0b", "logs/HEAD", "config", "", "refs/./x", "HEAD/x"])
    {
        assert_eq!(
            repo.value(name).unwrap_err().kind(),
            io::ErrorKind::InvalidInput,
            "{name:?}"
        );
        let err = repo.set(&[(name, None, Some(&oid))], "m").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{name:?}");
    }
    let bad_moves: [&Moves<'_>; 3] = [
        &[("HEAD", Some("ref: refs/heads/main"), None)],
        &[("refs/heads/x", None, Some("a\nb"))],
        &[
            ("refs/heads/x", None, Some(&oid)),
            ("refs/heads/x", None, Some(&oid)),
        ],
    ];
    for moves in bad_moves {
        assert_eq!(
            repo.set(moves, "m").unwrap_err().kind(),
            io::ErrorKind::InvalidInput,
            "{moves:?}"
        );
    }
    assert_eq!(
        fs::read_dir(repo.git_dir()).unwrap().count(),
        0,
        "something was written"
    );
}

#[test]
fn same_index_compares_entries_across_versions() {
    let Some(t) = Fixture::new() else { return };
    let index = || t.repo.index().unwrap().unwrap();
    let v2 = index();
    assert_eq!(v2.get(4..8), Some(&[0, 0, 0, 2][..]));
    t.git(&["update-index", "--index-version", "4"]);
    let v4 = index();
    assert_ne!(v2, v4);
    assert!(same_index(&v2, &v4));
    // Cut anywhere, an index neither panics nor differs from itself.
    for len in 0..v4.len() {
        assert!(same_index(&v4[..len], &v4[..len]));
    }

    t.git(&["update-index", "--skip-worktree", "a.txt"]);
    assert!(!same_index(&v2, &index()));
    t.git(&["update-index", "--no-skip-worktree", "a.txt"]);
    assert!(same_index(&v2, &index()));

    // An intent to add needs the extended flags: git moves a version 2 index to version 3.
    t.git(&["update-index", "--index-version", "2"]);
    t.write("dir/d.txt", "d\n");
    t.git(&["add", "-N", "dir/d.txt"]);
    let v3 = index();
    assert_eq!(v3.get(4..8), Some(&[0, 0, 0, 3][..]));
    assert!(!same_index(&v2, &v3));
    t.git(&["update-index", "--index-version", "4"]);
    assert!(same_index(&v3, &index()));
    t.git(&["add", "dir/d.txt"]);
    assert!(!same_index(&v3, &index()));
}

#[test]
fn reflog_lines_name_a_missing_side_by_the_null_id() {
    let sha1 = "a".repeat(40);
    let sha256 = "b".repeat(64);
    let line = reflog_line(None, Some(&sha1), "m\nn").unwrap();
    assert!(
        line.starts_with(&format!(
            "{} {sha1} shiro <shiro@localhost> ",
            "0".repeat(40)
        )),
        "{line}"
    );
    assert!(line.ends_with(" +0000\tm n\n"), "{line}");
    let line = reflog_line(Some(&sha256), None, "m").unwrap();
    assert!(
        line.starts_with(&format!("{sha256} {} ", "0".repeat(64))),
        "{line}"
    );
    assert_eq!(
        reflog_line(Some("ref: refs/heads/main"), Some(&sha1), "m"),
        None
    );
}

/// `describe` of moves given as `(name, before, after)`.
fn describe_moves(moves: &Moves<'_>, index_changed: bool) -> String {
    let moved = moves
        .iter()
        .map(|&(name, before, after)| {
            (
                name.to_owned(),
                Move {
                    before: before.map(str::to_owned),
                    after: after.map(str::to_owned),
                },
            )
        })
        .collect();
    describe(&moved, index_changed)
}

#[test]
fn describe_says_what_moved_in_one_line() {
    const A: &str = "1a2b3c4d5e6f1a2b3c4d5e6f1a2b3c4d5e6f1a2b";
    const B: &str = "9f8e7d6c5b4a9f8e7d6c5b4a9f8e7d6c5b4a9f8e";
    let all = [
        (
            "HEAD",
            Some("ref: refs/heads/main"),
            Some("ref: refs/heads/feature"),
        ),
        ("refs/heads/feature", None, Some(A)),
        ("refs/heads/main", Some(A), Some(B)),
        ("refs/heads/old", Some(B), None),
        (
            "refs/remotes/origin/HEAD",
            None,
            Some("ref: refs/remotes/origin/main"),
        ),
        ("refs/stash", None, Some(A)),
        (STASH_LOG, Some("x\n"), Some("x\ny\nz\n")),
    ];
    insta::assert_snapshot!(describe_moves(&all, true), @"HEAD main → feature; refs/heads/feature created at 1a2b3c4; refs/heads/main 1a2b3c4 → 9f8e7d6; refs/heads/old deleted (was 9f8e7d6); refs/remotes/origin/HEAD created at refs/remotes/origin/main; stash: 2 entries added; index changed");

    let detached = describe_moves(&[("HEAD", Some("ref: refs/heads/main"), Some(A))], false);
    insta::assert_snapshot!(detached, @"HEAD main → 1a2b3c4 (detached)");
    let born = describe_moves(&[("HEAD", None, Some("ref: refs/heads/main"))], false);
    insta::assert_snapshot!(born, @"HEAD (none) → main");
    let dropped = [
        (STASH_LOG, Some("x\ny\n"), Some("y\n")),
        ("refs/stash", Some(A), Some(B)),
    ];
    insta::assert_snapshot!(describe_moves(&dropped, false), @"stash: 1 entry dropped");
    let changed = describe_moves(&[(STASH_LOG, Some("x\n"), Some("y\n"))], false);
    insta::assert_snapshot!(changed, @"stash changed");
    let cleared = describe_moves(&[("refs/stash", Some(A), None)], false);
    insta::assert_snapshot!(cleared, @"refs/stash deleted (was 1a2b3c4)");
    assert_eq!(describe_moves(&[], false), "");
}

proptest! {
    #[test]
    fn same_index_never_panics(
        a in prop::collection::vec(any::<u8>(), 0..300),
        b in prop::collection::vec(any::<u8>(), 0..300),
        version in 1u32..6,
        count in 0u32..4,
    ) {
        // Behind a valid header, the bytes reach the entries' parser.
        let header = [&b"DIRC"[..], &version.to_be_bytes(), &count.to_be_bytes()].concat();
        let (ha, hb) = ([&header[..], &a].concat(), [&header[..], &b].concat());
        for (a, b) in [(&a, &b), (&ha, &hb), (&ha, &b)] {
            prop_assert_eq!(same_index(a, b), same_index(b, a));
            prop_assert!(same_index(a, a));
        }
    }
}
