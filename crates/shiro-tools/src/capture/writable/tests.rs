//! The writable directories against trees and indexes made by the real `git`.

use std::process::Command;

use super::*;

/// A scratch tree, with `git` run in it apart from the machine's configuration.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.root().join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn mkdir(&self, rel: &str) {
        fs::create_dir_all(self.root().join(rel)).unwrap();
    }

    /// `git ARGS` in `rel`; its output.
    fn git_in(&self, rel: &str, args: &[&str]) -> String {
        let config = "-c user.name=t -c user.email=t@t -c commit.gpgsign=false \
                      -c gc.auto=0 -c init.defaultBranch=main";
        let out = Command::new("git")
            .args(config.split_whitespace())
            .args(args)
            .current_dir(self.root().join(rel))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", self.root())
            .env("XDG_CONFIG_HOME", self.root())
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

    fn git(&self, args: &[&str]) -> String {
        self.git_in("", args)
    }

    /// The writable directories and the notes.
    fn writable(&self) -> (Vec<String>, Vec<String>) {
        let found = writable(self.root());
        let dirs = found.dirs.iter().map(ToString::to_string).collect();
        (dirs, found.notes)
    }
}

/// Whether git is missing, saying so for the test that then skips.
fn git_missing() -> bool {
    let missing = Command::new("git").arg("--version").output().is_err();
    if missing {
        eprintln!("skipped: git is not installed");
    }
    missing
}

#[test]
fn the_writable_directories_are_the_outermost_ignored_real_ones() {
    let tree = Tree::new();
    tree.write(".gitignore", "target/\n*.cache\nlink\n");
    tree.mkdir("target/debug/deps");
    tree.mkdir("src/web/node_modules/x");
    tree.write("src/web/.gitignore", "node_modules/\n");
    tree.mkdir("src/a.cache");
    tree.mkdir(".git/objects");
    tree.write(".git/info", "");
    std::os::unix::fs::symlink("/etc", tree.root().join("link")).unwrap();
    let (dirs, notes) = tree.writable();
    assert_eq!(dirs, ["src/a.cache", "src/web/node_modules", "target"]);
    assert!(notes.is_empty(), "{notes:?}");
    for n in 0..=BACKGROUND_MAX_WRITABLE {
        tree.mkdir(&format!("many/d{n}.cache"));
    }
    let (dirs, notes) = tree.writable();
    assert_eq!(dirs.len(), BACKGROUND_MAX_WRITABLE);
    assert_eq!(notes.len(), 1, "{notes:?}");
}

/// The listing holds the writable directories and what is in them, and nothing else.
#[test]
fn the_listing_is_of_the_writable_directories() {
    let tree = Tree::new();
    tree.write(".gitignore", "target/\n");
    tree.write("target/a.o", "a");
    tree.write("target/sub/b.o", "b");
    tree.write("src/main.rs", "");
    let found = writable(tree.root());
    let seen: Vec<&str> = found.seen.keys().map(|p| p.to_str().unwrap()).collect();
    assert_eq!(
        seen,
        ["target", "target/a.o", "target/sub", "target/sub/b.o"]
    );
}

/// A directory `.gitignore` leaves out that holds a tracked file stays read-only; below
/// it, the directories that hold none are writable, and those that hold one are
/// descended into. A repository of its own in an ignored directory holds its files too.
#[test]
fn a_directory_that_holds_a_tracked_file_is_not_writable() {
    if git_missing() {
        return;
    }
    let tree = Tree::new();
    tree.write("src/main.rs", "");
    tree.write("src/web/app.js", "");
    tree.write("src/web/assets/logo.svg", "");
    tree.mkdir("src/web/dist");
    tree.mkdir("src/target/debug");
    tree.write("build/config.h", "");
    tree.git(&["init", "-q"]);
    tree.git(&["add", "-A"]);
    tree.git(&["commit", "-qm", "first"]);
    tree.write(".gitignore", "src/\nbuild/\nvendor/\n");
    tree.mkdir("build/obj");
    tree.write("vendor/lib/lib.c", "");
    tree.git_in("vendor/lib", &["init", "-q"]);
    tree.mkdir("vendor/cache");
    let (dirs, notes) = tree.writable();
    assert_eq!(
        dirs,
        ["build/obj", "src/target", "src/web/dist", "vendor/cache"]
    );
    insta::assert_snapshot!(notes.join("\n"), @"read-only to it though .gitignore leaves them out, since they hold files git tracks or a repository of their own (their subdirectories that hold neither are writable): build/, src/, vendor/");
}

/// Only git's own rules open a directory: not `.ignore`, which git does not read, nor a
/// `.gitignore` above the repository's top. What they leave out is untracked and
/// unignored to git: the user's work.
#[test]
fn only_git_s_ignore_rules_open_a_directory() {
    if git_missing() {
        return;
    }
    let tree = Tree::new();
    tree.write(".gitignore", "*\n");
    tree.write("repo/a.txt", "");
    tree.git_in("repo", &["init", "-q"]);
    tree.write("repo/.ignore", "notes/\n");
    tree.write("repo/notes/todo.md", "");
    tree.write("repo/drafts/idea.md", "");
    tree.write("repo/.git/info/exclude", "scratch/\n");
    tree.mkdir("repo/scratch");
    let found = writable(&tree.root().join("repo"));
    let dirs: Vec<&str> = found.dirs.iter().map(WorkspacePath::as_str).collect();
    assert_eq!(dirs, ["scratch"]);
}

/// A workspace in a repository that tracks nothing in it (a home directory's dotfiles
/// repository, ignoring everything) is taken as in none: only its own `.gitignore` files
/// count.
#[test]
fn a_repository_above_that_tracks_nothing_here_is_not_the_workspace_s() {
    if git_missing() {
        return;
    }
    let tree = Tree::new();
    tree.write(".bashrc", "");
    tree.git(&["init", "-q"]);
    tree.git(&["add", ".bashrc"]);
    tree.write(".gitignore", "*\n");
    tree.write("proj/.gitignore", "target/\n");
    tree.write("proj/drafts/idea.md", "");
    tree.mkdir("proj/target");
    let found = writable(&tree.root().join("proj"));
    let dirs: Vec<&str> = found.dirs.iter().map(WorkspacePath::as_str).collect();
    assert_eq!(dirs, ["target"]);
}

/// A workspace below its repository's top: the index's paths are taken relative to it.
#[test]
fn a_workspace_below_the_repository_s_top_reads_its_index() {
    if git_missing() {
        return;
    }
    let tree = Tree::new();
    tree.write("app/gen/schema.rs", "");
    tree.write("other/gen/x.rs", "");
    tree.git(&["init", "-q"]);
    tree.git(&["add", "-A"]);
    tree.write(".gitignore", "gen/\n");
    tree.mkdir("app/lib/gen");
    let found = writable(&tree.root().join("app"));
    let dirs: Vec<&str> = found.dirs.iter().map(WorkspacePath::as_str).collect();
    assert_eq!(dirs, ["lib/gen"]);
}

/// A worktree's `.git` is a file naming its git directory, whose index is the worktree's.
#[test]
fn a_worktree_s_index_is_read_through_its_git_file() {
    if git_missing() {
        return;
    }
    let tree = Tree::new();
    tree.write("main/out/keep.txt", "");
    tree.write("main/.gitignore", "out/\n");
    tree.git_in("main", &["init", "-q"]);
    tree.git_in("main", &["add", "-A", "-f"]);
    tree.git_in("main", &["commit", "-qm", "first"]);
    tree.git_in("main", &["worktree", "add", "-q", "../side"]);
    tree.mkdir("side/out/cache");
    let found = writable(&tree.root().join("side"));
    let dirs: Vec<&str> = found.dirs.iter().map(WorkspacePath::as_str).collect();
    assert_eq!(dirs, ["out/cache"]);
}

/// An index that cannot be read leaves the whole workspace read-only, and says why.
#[test]
fn an_index_that_cannot_be_read_opens_nothing() {
    let tree = Tree::new();
    tree.write(".gitignore", "target/\n");
    tree.mkdir("target");
    tree.write(".git/index", "DIRC but not an index");
    let found = writable(tree.root());
    assert!(found.dirs.is_empty());
    let note = found.notes.join("\n");
    let note = note.replace(&tree.root().display().to_string(), "WS");
    insta::assert_snapshot!(note, @"the workspace is read-only to it: WS/.git/index is not an index shiro can read, so which directories hold files git tracks is not known");
}

/// The paths of every index format git writes (versions 2 to 4, entries with extended
/// flags, split and sparse indexes) are those `git ls-files` lists.
#[test]
fn every_index_format_reads_as_git_lists_it() {
    if git_missing() {
        return;
    }
    let tree = Tree::new();
    for (n, rel) in ["a.txt", "dir/b.txt", "dir/sub/c.txt", "d/e/f/long-name.txt"]
        .into_iter()
        .enumerate()
    {
        tree.write(rel, &n.to_string());
    }
    tree.git(&["init", "-q"]);
    tree.git(&["add", "-A"]);
    tree.git(&["commit", "-qm", "first"]);
    let git_dir = tree.root().join(".git");
    let check = |what: &str| {
        let listed: BTreeSet<Vec<u8>> = tree
            .git(&["ls-files", "--sparse", "-z"])
            .split('\0')
            .filter(|path| !path.is_empty())
            .map(|path| path.as_bytes().to_vec())
            .collect();
        let mut held = Held::default();
        held.add_index(&git_dir, b"", b"").unwrap();
        let read: BTreeSet<Vec<u8>> = held.paths.iter().cloned().collect();
        let show = |set: &BTreeSet<Vec<u8>>| {
            set.iter()
                .map(|path| String::from_utf8_lossy(path).into_owned())
                .collect::<Vec<_>>()
        };
        let listed: BTreeSet<Vec<u8>> = listed
            .into_iter()
            .map(|mut path| {
                while path.last() == Some(&b'/') {
                    path.pop();
                }
                path
            })
            .collect();
        assert_eq!(show(&read), show(&listed), "{what}");
        held
    };
    check("version 2");
    tree.git(&["update-index", "--split-index"]);
    tree.write("dir/split.txt", "");
    tree.git(&["add", "dir/split.txt"]);
    let shared = fs::read_dir(&git_dir).unwrap().flatten();
    let shared = shared.filter(|entry| {
        entry
            .file_name()
            .to_string_lossy()
            .starts_with("sharedindex.")
    });
    assert_ne!(shared.count(), 0, "the index was not split");
    check("split");
    tree.git(&["update-index", "--no-split-index"]);
    tree.write("new.txt", "");
    tree.git(&["add", "-N", "new.txt"]);
    check("version 3 (intent to add)");
    tree.git(&["update-index", "--index-version", "4"]);
    check("version 4");
    tree.git(&["update-index", "--index-version", "2"]);
    tree.git(&["rm", "-q", "--cached", "new.txt"]);
    tree.git(&["commit", "-qm", "second"]);
    tree.git(&["config", "index.sparse", "true"]);
    tree.git(&["sparse-checkout", "set", "--cone", "dir"]);
    let held = check("sparse");
    assert!(held.within_whole(b"d/e"), "{:?}", held.whole);
    assert!(!held.within_whole(b"dir"), "{:?}", held.whole);
}

/// A repository that hashes with SHA-256 has longer object ids in its index.
#[test]
fn a_sha256_index_reads_too() {
    if git_missing() {
        return;
    }
    let tree = Tree::new();
    tree.write("gen/keep.rs", "");
    let made = Command::new("git")
        .args(["init", "-q", "--object-format=sha256"])
        .current_dir(tree.root())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", tree.root())
        .output()
        .unwrap();
    if !made.status.success() {
        eprintln!("skipped: this git makes no SHA-256 repository");
        return;
    }
    tree.git(&["add", "-A"]);
    tree.write(".gitignore", "gen/\n");
    tree.mkdir("gen/cache");
    let (dirs, notes) = tree.writable();
    assert_eq!(dirs, ["gen/cache"], "{notes:?}");
}
