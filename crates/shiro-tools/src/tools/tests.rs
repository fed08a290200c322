//! The file tools on a real workspace, in the words the model reads: what a call that changes
//! nothing leaves behind, the paths every tool refuses, and what a broken symbolic link says.

use std::fs;
use std::os::unix::fs::{MetadataExt as _, symlink};
use std::path::Path;

use serde_json::{Value, json};

use crate::mutator::{FsMutator, Mutator as _};
use crate::tool::Tool;

/// A workspace on disk, and the mutator the tools use on it.
fn workspace() -> (tempfile::TempDir, FsMutator) {
    let dir = tempfile::tempdir().unwrap();
    let mutator = FsMutator::new(dir.path().canonicalize().unwrap()).unwrap();
    (dir, mutator)
}

/// One call, as the model reads it: the text, or the error behind `error: `; the workspace's
/// own path reads `<root>`.
async fn run(tool: &dyn Tool, mutator: &FsMutator, args: Value) -> String {
    let root = mutator.root().display().to_string();
    let text = match tool.call(mutator, args).await {
        Ok(out) => out.text,
        Err(err) => format!("error: {err}"),
    };
    text.replace(&root, "<root>")
}

/// Each call of `calls`, as `tool args` then what it answered.
async fn transcript(mutator: &FsMutator, calls: &[(&str, Value)]) -> String {
    let mut out = String::new();
    for (name, args) in calls {
        let tool = super::find(name).unwrap();
        let answer = run(tool.as_ref(), mutator, args.clone()).await;
        out.push_str(&format!("{name} {args}\n{answer}\n\n"));
    }
    out.replace(&mutator.root().display().to_string(), "<root>")
}

/// The names directly in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn patch(body: &str) -> Value {
    json!({ "patch": format!("*** Begin Patch\n{body}*** End Patch\n") })
}

/// A patch wrapped in `cd src && apply_patch <<'EOF'`, as models copy it from Codex.
fn in_src(body: &str) -> Value {
    let patch =
        format!("cd src && apply_patch <<'EOF'\n*** Begin Patch\n{body}*** End Patch\nEOF\n");
    json!({ "patch": patch })
}

/// A hunk that puts back the line it takes out changes nothing, so the file is not written:
/// it keeps its inode (a hard link to it stays one) and its modification time, and the
/// output says nothing was changed, as `write_file` does for the content a file already has.
#[tokio::test]
async fn apply_patch_that_changes_nothing_leaves_the_file_alone() {
    let (dir, mutator) = workspace();
    let root = mutator.root().to_path_buf();
    fs::write(root.join("f.txt"), "line\nother\n").unwrap();
    fs::hard_link(root.join("f.txt"), root.join("hl")).unwrap();
    let before = fs::metadata(root.join("f.txt")).unwrap();

    let out = super::apply_patch()
        .call(&mutator, patch("*** Update File: f.txt\n-line\n+line\n"))
        .await
        .unwrap();

    insta::assert_snapshot!(out.text, @"the patch leaves f.txt as it is; nothing was changed");
    assert!(out.changes.is_empty());
    let after = fs::metadata(root.join("f.txt")).unwrap();
    assert_eq!(after.ino(), before.ino(), "f.txt was replaced");
    assert_eq!(after.nlink(), 2, "the hard link was split");
    assert_eq!(after.mtime_nsec(), before.mtime_nsec());
    drop(dir);
}

/// In a patch where some files change and others do not, only those that change are written
/// and listed; a note names the rest. A file deleted and added again with the same bytes and
/// a new file's mode is left alone too.
#[tokio::test]
async fn apply_patch_writes_and_lists_only_the_files_that_change() {
    let (dir, mutator) = workspace();
    let root = mutator.root().to_path_buf();
    for name in ["a.txt", "b.txt", "c.txt"] {
        fs::write(root.join(name), "one\ntwo\n").unwrap();
    }
    let ino = |name: &str| fs::metadata(root.join(name)).unwrap().ino();
    let (b, c) = (ino("b.txt"), ino("c.txt"));

    let out = super::apply_patch()
        .call(
            &mutator,
            patch(
                "*** Update File: a.txt\n-one\n+uno\n\
                 *** Update File: b.txt\n one\n-two\n+two\n\
                 *** Delete File: c.txt\n\
                 *** Add File: c.txt\n+one\n+two\n",
            ),
        )
        .await
        .unwrap();

    insta::assert_snapshot!(out.text, @r"
    M a.txt
    (the patch leaves b.txt and c.txt as they are, so they were not written)
    ");
    assert_eq!(out.changes.len(), 1);
    assert_eq!(
        fs::read_to_string(root.join("a.txt")).unwrap(),
        "uno\ntwo\n"
    );
    assert_eq!(
        (ino("b.txt"), ino("c.txt")),
        (b, c),
        "an unchanged file was written"
    );
    drop(dir);
}

/// A path ending in `/` names a directory, `.` and the root's own path name the root, and
/// `~` is not the home directory: every tool that takes a path says so, and nothing is made.
#[tokio::test]
async fn tools_refuse_directory_paths_the_root_and_tilde() {
    let (dir, mutator) = workspace();
    let root = mutator.root().to_path_buf();
    fs::create_dir(root.join("src")).unwrap();
    fs::write(root.join("src/a.txt"), "a\n").unwrap();
    let root_text = root.display().to_string();
    let write = |path: &str| ("write_file", json!({ "path": path, "content": "x\n" }));

    let out = transcript(
        &mutator,
        &[
            write("newdir/"),
            write("newdir/."),
            write("."),
            write(&root_text),
            write(&format!("{root_text}/")),
            write("~/notes"),
            write("~"),
            (
                "edit_file",
                json!({ "path": "src/a.txt/", "old_string": "a", "new_string": "b" }),
            ),
            ("read_file", json!({ "path": "src/" })),
            ("read_file", json!({ "path": "." })),
            ("read_file", json!({ "path": "~/.bashrc" })),
            ("list_dir", json!({ "path": "~" })),
            ("grep", json!({ "pattern": "a", "path": "~/src" })),
            ("apply_patch", patch("*** Add File: newdir/\n+x\n")),
            ("apply_patch", patch("*** Add File: ~/notes\n+x\n")),
            ("apply_patch", in_src("*** Add File: new/\n+x\n")),
            ("apply_patch", in_src("*** Add File: ~/notes\n+x\n")),
        ],
    )
    .await;

    insta::assert_snapshot!(out);
    assert_eq!(names(&root), ["src"], "a refused call made something");
    assert_eq!(names(&root.join("src")), ["a.txt"]);
    drop(dir);
}

/// A name that really starts with `~` is reached as `./~name`, and `list_dir` still takes a
/// directory with a trailing `/` and the root as `.`.
#[tokio::test]
async fn tilde_names_and_directories_still_work_where_they_should() {
    let (dir, mutator) = workspace();
    let root = mutator.root().to_path_buf();
    fs::create_dir(root.join("src")).unwrap();
    fs::write(root.join("src/a.txt"), "a\n").unwrap();

    let out = transcript(
        &mutator,
        &[
            (
                "write_file",
                json!({ "path": "./~notes", "content": "x\n" }),
            ),
            ("read_file", json!({ "path": "./~notes" })),
            ("list_dir", json!({ "path": "src/" })),
            ("list_dir", json!({ "path": "." })),
        ],
    )
    .await;

    insta::assert_snapshot!(out, @r#"
    write_file {"content":"x\n","path":"./~notes"}
    A ~notes
    created ~notes (2 bytes)

    read_file {"path":"./~notes"}
         1	x

    list_dir {"path":"src/"}
    src/a.txt

    list_dir {"path":"."}
    src/
    ~notes

    "#);
    drop(dir);
}

/// A link that loops, a link to nothing and a link to a link to nothing: each tool that
/// reads says which, and names the targets.
#[tokio::test]
async fn broken_links_say_what_is_wrong_with_them() {
    let (dir, mutator) = workspace();
    let root = mutator.root().to_path_buf();
    symlink("a", root.join("b")).unwrap();
    symlink("b", root.join("a")).unwrap();
    symlink("missing.txt", root.join("dang")).unwrap();
    symlink("dang", root.join("chain")).unwrap();
    fs::create_dir(root.join("d")).unwrap();
    symlink("../nowhere", root.join("d/dl")).unwrap();

    let mut calls = Vec::new();
    for path in ["a", "a/x", "dang", "chain", "d/dl", "dang/x"] {
        calls.push(("read_file", json!({ "path": path })));
        calls.push(("list_dir", json!({ "path": path })));
        calls.push(("grep", json!({ "pattern": "x", "path": path })));
    }
    calls.push(("glob", json!({ "pattern": "*", "path": "a" })));
    let out = transcript(&mutator, &calls).await;

    insta::assert_snapshot!(out);
    drop(dir);
}

/// Should a link not be named (it changed between the walk and the look), the walk's own
/// error still says that the path loops, never a bare `os error 40`.
#[test]
fn a_walk_from_a_looping_path_says_it_loops() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    symlink("a", root.join("b")).unwrap();
    symlink("b", root.join("a")).unwrap();

    let err = super::walk::open("list_dir", &root, Some("a/x")).unwrap_err();

    insta::assert_snapshot!(err.to_string(), @"a/x goes through a symbolic link that loops");
}
