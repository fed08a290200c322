//! `apply_patch` end to end: data-driven fixtures on the real disk, snapshots of every output
//! and error, and property tests for "all or nothing" and "never panics".
//!
//! A fixture is `tests/fixtures/<case>/{input/, patch, expected/}`. The case's `input/` is
//! copied into a temporary workspace, the patch is applied through `FsMutator`, and the
//! workspace must then hold exactly the files of `expected/` (bytes and executable bit). A
//! refused patch must leave the workspace exactly as it was, directories included. The
//! output or error is an insta snapshot named after the case.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers fail the test on any setup error"
)]

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use serde_json::json;
use shiro_tools::{
    FsMutator, Hooked, MemMutator, Mutation, Mutator, MutatorError, Stat, Tool, ToolError,
    ToolOutput, WorkspacePath, patch, tools,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every entry under `root` (a missing root is an empty tree): files with their bytes and
/// whether they are executable, directories as `None`.
fn tree(root: &Path, with_dirs: bool) -> BTreeMap<String, Option<(Vec<u8>, bool)>> {
    fn walk(
        root: &Path,
        dir: &Path,
        with_dirs: bool,
        out: &mut BTreeMap<String, Option<(Vec<u8>, bool)>>,
    ) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                if with_dirs {
                    out.insert(rel, None);
                }
                walk(root, &path, with_dirs, out);
            } else {
                let exec = meta.permissions().mode() & 0o111 != 0;
                out.insert(rel, Some((fs::read(&path).unwrap(), exec)));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, with_dirs, &mut out);
    out
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    let Ok(entries) = fs::read_dir(from) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            // `fs::copy` keeps the permission bits, so the executable bit survives.
            fs::copy(&path, &dest).unwrap();
        }
    }
}

/// The files of a tree, shown readably when an assertion fails.
fn show(tree: &BTreeMap<String, Option<(Vec<u8>, bool)>>) -> String {
    tree.iter()
        .map(|(path, entry)| match entry {
            None => format!("{path}/\n"),
            Some((bytes, exec)) => {
                format!(
                    "{path}{}: {:?}\n",
                    if *exec { " (x)" } else { "" },
                    String::from_utf8_lossy(bytes)
                )
            }
        })
        .collect()
}

/// The text a snapshot holds for a call's outcome.
fn outcome(result: &Result<ToolOutput, ToolError>) -> String {
    match result {
        Ok(out) => format!("ok\n{}", out.text),
        Err(err) => format!("error\n{err}"),
    }
}

async fn check(case: &str) {
    let dir = fixtures().join(case);
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().join("workspace");
    copy_tree(&dir.join("input"), &root);
    let before = tree(&root, true);
    let patch = fs::read_to_string(dir.join("patch")).unwrap();
    let mutator = FsMutator::new(&root).unwrap();

    let result = tools::apply_patch()
        .call(&mutator, json!({ "patch": patch }))
        .await;

    let expected = tree(&dir.join("expected"), false);
    let after = tree(&root, false);
    assert_eq!(
        show(&after),
        show(&expected),
        "{case}: the workspace differs from expected/"
    );
    match &result {
        Ok(out) => {
            let lines: Vec<String> = out.changes.iter().map(ToString::to_string).collect();
            assert_eq!(
                out.text,
                lines.join("\n"),
                "{case}: the text lists the changes"
            );
        }
        Err(_) => {
            assert_eq!(
                show(&tree(&root, true)),
                show(&before),
                "{case}: a refused patch changed the workspace"
            );
            assert_eq!(
                show(&expected),
                show(&tree(&dir.join("input"), false)),
                "{case}: a refusal's expected/ must equal its input/"
            );
        }
    }
    // The in-memory workspace must behave exactly as the disk does.
    let mem = MemMutator::new();
    seed_mem(&mem, &dir.join("input"), None).await;
    let patch = fs::read_to_string(dir.join("patch")).unwrap();
    let mem_result = tools::apply_patch()
        .call(&mem, json!({ "patch": patch }))
        .await;
    assert_eq!(
        outcome(&mem_result),
        outcome(&result),
        "{case}: MemMutator and FsMutator differ"
    );
    assert_eq!(
        show(&mem_files(&mem)),
        show(&expected),
        "{case}: in memory, the workspace differs from expected/"
    );

    insta::assert_snapshot!(case, outcome(&result));
}

/// Copies the tree under `from` into the in-memory workspace, under `at`.
async fn seed_mem(mem: &MemMutator, from: &Path, at: Option<WorkspacePath>) {
    let Ok(entries) = fs::read_dir(from) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let dest = match &at {
            Some(dir) => dir.join(&name).unwrap(),
            None => p(&name),
        };
        if path.is_dir() {
            mem.create_dir(&dest).await.unwrap();
            Box::pin(seed_mem(mem, &path, Some(dest))).await;
        } else {
            let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            mem.write(&dest, &fs::read(&path).unwrap(), Some(mode))
                .await
                .unwrap();
        }
    }
}

/// The files of an in-memory workspace, in the shape of [`tree`] without directories.
fn mem_files(mem: &MemMutator) -> BTreeMap<String, Option<(Vec<u8>, bool)>> {
    mem.snapshot()
        .into_iter()
        .filter_map(|(path, (stat, bytes))| match stat {
            Stat::File { mode, .. } => {
                Some((path, Some((bytes.unwrap_or_default(), mode & 0o111 != 0))))
            }
            _ => None,
        })
        .collect()
}

macro_rules! fixtures {
    ($($case:ident),* $(,)?) => {
        const CASES: &[&str] = &[$(stringify!($case)),*];
        $(
            #[tokio::test]
            async fn $case() {
                check(stringify!($case)).await;
            }
        )*
    };
}

fixtures! {
    add_empty_file,
    add_file,
    add_file_into_new_dirs,
    anchor_disambiguates,
    anchor_insert_only_additions,
    blank_lines_are_lenient,
    bom_survives,
    cd_wrapper,
    crlf_file_keeps_crlf,
    crlf_patch_text,
    delete_every_line,
    delete_then_add_replaces_file,
    delete_file,
    dot_slash_path,
    end_of_file_pins_hunk,
    end_patch_then_heredoc_word,
    every_operation_at_once,
    exact_match_beats_earlier_loose_match,
    heredoc_wrapper,
    hunk_after_end_of_file_hunk,
    mixed_line_endings,
    move_into_new_dir,
    move_without_changes,
    no_final_newline_append,
    no_final_newline_kept,
    padded_markers,
    pass_leading_and_trailing_whitespace,
    pass_trailing_whitespace,
    pass_typographic_punctuation,
    refuse_absolute_path_outside,
    refuse_add_existing_file,
    refuse_add_line_without_plus,
    refuse_add_then_delete,
    refuse_add_under_a_file,
    refuse_anchor_not_found,
    refuse_binary_file,
    refuse_blank_patch,
    refuse_cd_missing_directory,
    refuse_cd_out_of_workspace,
    refuse_cd_path_escape,
    refuse_delete_directory,
    refuse_delete_missing_file,
    refuse_empty_patch,
    refuse_end_of_file_mismatch,
    refuse_garbage_first_line,
    refuse_heredoc_not_closed,
    refuse_invalid_header,
    refuse_lines_after_end_of_file,
    refuse_missing_context,
    refuse_missing_end_patch,
    refuse_move_onto_another_operation,
    refuse_move_onto_existing_file,
    refuse_non_utf8_file,
    refuse_path_escape,
    refuse_path_inside_added_file,
    refuse_protected_path,
    refuse_same_path_twice,
    refuse_second_file_fails_nothing_written,
    refuse_second_hunk_fails,
    refuse_text_after_end_patch,
    refuse_text_after_heredoc,
    refuse_unprefixed_hunk_line,
    refuse_update_directory,
    refuse_update_missing_file,
    refuse_update_without_hunks,
    several_hunks_in_order,
    simple_envelope,
    simple_envelope_with_end_patch,
    stacked_anchors,
    trailing_empty_context_at_end,
    unicode_content_and_path,
    unified_diff_range_header,
    update_first_hunk_without_at_at,
    update_keeps_mode,
    update_with_context,
}

#[test]
fn every_fixture_has_a_test() {
    let mut on_disk: Vec<String> = fs::read_dir(fixtures())
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = CASES.iter().map(|case| (*case).to_owned()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

// ---------------------------------------------------------------------------------------------
// The tool's contract beyond the fixtures.

fn p(path: &str) -> WorkspacePath {
    WorkspacePath::from_relative(path).unwrap()
}

/// An in-memory workspace holding `files` (parent directories created on the way).
async fn workspace(files: &[(&str, &[u8])]) -> MemMutator {
    let mem = MemMutator::new();
    for (path, bytes) in files {
        let path = p(path);
        shiro_tools::create_parent_dirs(&mem, &path).await.unwrap();
        mem.write(&path, bytes, None).await.unwrap();
    }
    mem
}

#[tokio::test]
async fn touched_paths_lists_every_path_before_anything_is_written() {
    let mem = workspace(&[("a.txt", b"a\n"), ("b.txt", b"b\n"), ("c.txt", b"c\n")]).await;
    let before = mem.snapshot();
    let patch = "*** Begin Patch\n*** Add File: new/d.txt\n+d\n*** Update File: a.txt\n@@\n-a\n+A\n\
                 *** Delete File: b.txt\n*** Update File: c.txt\n*** Move to: moved/c.txt\n*** End Patch";
    let paths = tools::apply_patch()
        .touched_paths(&mem, &json!({ "patch": patch }))
        .await
        .unwrap();
    let paths: Vec<&str> = paths.iter().map(WorkspacePath::as_str).collect();
    assert_eq!(
        paths,
        ["new/d.txt", "a.txt", "b.txt", "c.txt", "moved/c.txt"]
    );
    assert_eq!(mem.snapshot(), before);

    let err = tools::apply_patch()
        .touched_paths(&mem, &json!({ "patch": "*** Delete File: ../x" }))
        .await
        .unwrap_err();
    insta::assert_snapshot!(err.to_string(), @r#"path "../x" uses `..`; give the path relative to the workspace root without `..`; nothing was changed"#);
}

#[tokio::test]
async fn absolute_paths_inside_the_root_are_accepted() {
    let mem = workspace(&[("a.txt", b"x\n")]).await;
    let patch = "*** Update File: /workspace/a.txt\n-x\n+y\n";
    let out = tools::apply_patch()
        .call(&mem, json!({ "patch": patch }))
        .await
        .unwrap();
    assert_eq!(out.text, "M a.txt");
    assert_eq!(mem.read(&p("a.txt")).await.unwrap(), b"y\n");
}

#[tokio::test]
async fn a_cd_wrapper_makes_relative_paths_relative_to_its_directory() {
    let mem = workspace(&[("src/a.txt", b"x\n"), ("b.txt", b"b\n")]).await;
    let patch = "cd /workspace/src && apply_patch <<'EOF'\n*** Update File: a.txt\n-x\n+y\n\
                 *** Delete File: /workspace/b.txt\nEOF";
    let paths = tools::apply_patch()
        .touched_paths(&mem, &json!({ "patch": patch }))
        .await
        .unwrap();
    let paths: Vec<&str> = paths.iter().map(WorkspacePath::as_str).collect();
    assert_eq!(paths, ["src/a.txt", "b.txt"]);
    let out = tools::apply_patch()
        .call(&mem, json!({ "patch": patch }))
        .await
        .unwrap();
    assert_eq!(out.text, "M src/a.txt\nD b.txt");

    let patch = "cd . && apply_patch <<'EOF'\n*** Add File: c.txt\n+c\nEOF";
    let out = tools::apply_patch()
        .call(&mem, json!({ "patch": patch }))
        .await
        .unwrap();
    assert_eq!(out.text, "A c.txt");

    let refused = |dir: &str, header: &str| {
        let patch = format!("cd {dir} && apply_patch <<'EOF'\n{header}\n+z\nEOF");
        let mem = mem.clone();
        async move {
            let before = mem.snapshot();
            let err = tools::apply_patch()
                .call(&mem, json!({ "patch": patch }))
                .await
                .unwrap_err();
            assert_eq!(mem.snapshot(), before);
            err.to_string()
        }
    };
    insta::assert_snapshot!(refused("src/a.txt", "*** Add File: z.txt").await, @"the patch's `cd src/a.txt` fails: it is a file, not a directory; nothing was changed");
    insta::assert_snapshot!(refused("'/etc'", "*** Add File: z.txt").await, @r#"the patch's `cd /etc` is refused: path "/etc" is outside the workspace; nothing was changed"#);
    insta::assert_snapshot!(refused("src", "*** Add File: .git/hooks/z").await, @r#"path "src/.git/hooks/z" is protected: tools never write in .git/ or .shiro/ (except .shiro/commands.md and .shiro/commands/); nothing was changed"#);
}

#[tokio::test]
async fn only_delete_then_add_may_name_a_path_twice() {
    let mem = workspace(&[("a.txt", b"a\n"), ("b.txt", b"b\n")]).await;
    let before = mem.snapshot();
    let mut errors = Vec::new();
    for patch in [
        "*** Delete File: a.txt\n*** Delete File: a.txt",
        "*** Delete File: a.txt\n*** Update File: a.txt\n-a\n+A",
        "*** Update File: a.txt\n-a\n+A\n*** Delete File: a.txt",
        "*** Delete File: a.txt\n*** Add File: a.txt\n+x\n*** Add File: a.txt\n+y",
        "*** Delete File: a.txt\n*** Add File: a.txt\n+x\n*** Delete File: a.txt",
        "*** Delete File: a.txt\n*** Update File: b.txt\n*** Move to: a.txt",
        "*** Update File: a.txt\n*** Move to: c.txt\n*** Add File: a.txt\n+x",
    ] {
        let err = tools::apply_patch()
            .call(&mem, json!({ "patch": patch }))
            .await
            .unwrap_err();
        errors.push(err.to_string());
    }
    assert_eq!(mem.snapshot(), before);
    insta::assert_snapshot!(errors.join("\n"), @r"
    a.txt is named twice in the patch (lines 1 and 2); nothing was changed (name each file once, with all of its hunks under one `*** Update File:`)
    a.txt is named twice in the patch (lines 1 and 2); nothing was changed (name each file once, with all of its hunks under one `*** Update File:`)
    a.txt is named twice in the patch (lines 1 and 4); nothing was changed (name each file once, with all of its hunks under one `*** Update File:`)
    a.txt is named twice in the patch (lines 2 and 4); nothing was changed (name each file once, with all of its hunks under one `*** Update File:`)
    a.txt is named twice in the patch (lines 1 and 4); nothing was changed (name each file once, with all of its hunks under one `*** Update File:`)
    a.txt is named twice in the patch (lines 1 and 2); nothing was changed (name each file once, with all of its hunks under one `*** Update File:`)
    a.txt is named twice in the patch (lines 1 and 3); nothing was changed (name each file once, with all of its hunks under one `*** Update File:`)
    ");

    // A replacement whose new file cannot be written puts the old one back.
    let (faulty, _) = failing(mem.clone(), 1, false);
    let patch = "*** Delete File: a.txt\n*** Add File: a.txt\n+x\n";
    let err = tools::apply_patch()
        .call(&faulty, json!({ "patch": patch }))
        .await
        .unwrap_err();
    insta::assert_snapshot!(err.to_string(), @"could not apply the patch: injected fault write a.txt: disk on fire; nothing was changed (the changes already made were put back)");
    assert_eq!(mem.snapshot(), before);
}

#[tokio::test]
async fn arguments_are_checked() {
    let mem = MemMutator::new();
    let tool = tools::apply_patch();
    let err = tool
        .call(&mem, json!({ "patch": "", "path": "a" }))
        .await
        .unwrap_err();
    insta::assert_snapshot!(err.to_string(), @"invalid arguments for apply_patch: unknown field `path`, expected `patch`; nothing was changed");
    let err = tool.call(&mem, json!({})).await.unwrap_err();
    insta::assert_snapshot!(err.to_string(), @"invalid arguments for apply_patch: missing field `patch`; nothing was changed");
}

#[test]
fn name_description_and_schema() {
    let tool = tools::apply_patch();
    assert_eq!(tool.name(), "apply_patch");
    assert!(tool.is_mutating());
    insta::assert_snapshot!("description", tool.description());
    insta::assert_json_snapshot!("schema", tool.schema());
}

#[tokio::test]
async fn a_symlink_can_be_deleted_and_is_put_back_on_failure() {
    let mem = workspace(&[("target.txt", b"t\n")]).await;
    mem.symlink("target.txt", &p("link")).await.unwrap();
    let before = mem.snapshot();
    let (faulty, _) = failing(mem.clone(), 1, false);
    let patch = "*** Delete File: link\n*** Add File: x.txt\n+x\n";
    let err = tools::apply_patch()
        .call(&faulty, json!({ "patch": patch }))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .ends_with("nothing was changed (the changes already made were put back)"),
        "{err}"
    );
    assert_eq!(mem.snapshot(), before);
    let out = tools::apply_patch()
        .call(&mem, json!({ "patch": patch }))
        .await
        .unwrap();
    assert_eq!(out.text, "D link\nA x.txt");
    assert_eq!(
        mem.stat(&p("target.txt")).await.unwrap(),
        Stat::File {
            mode: 0o644,
            len: 2
        }
    );
}

#[tokio::test]
async fn a_failed_rollback_says_which_files_are_in_which_state() {
    let mem = workspace(&[("a.txt", b"a\n"), ("b.txt", b"b\n"), ("c.txt", b"c\n")]).await;
    // The 4th mutating call fails and so does every later one, including the rollback's.
    let (faulty, _) = failing(mem.clone(), 3, true);
    let patch = "*** Begin Patch\n*** Add File: new/d.txt\n+d\n*** Update File: a.txt\n@@\n-a\n+A\n\
                 *** Delete File: b.txt\n*** End Patch";
    let err = tools::apply_patch()
        .call(&faulty, json!({ "patch": patch }))
        .await
        .unwrap_err();
    insta::assert_snapshot!(err.to_string(), @r"
    could not apply the patch: injected fault remove b.txt: disk on fire; putting back the changes already made failed too, so the workspace is partly patched:
    - a.txt holds the patched content and could not be restored (injected fault write a.txt: disk on fire)
    - new/d.txt was added and could not be removed (injected fault remove new/d.txt: disk on fire)
    - directory new was created and could not be removed (injected fault remove directory new: disk on fire)
    ");
}

// ---------------------------------------------------------------------------------------------
// Fault injection.

/// A `Mutator` that delegates to `inner` but fails its `fail_at`-th mutating call (counting
/// from 0), and with `and_after` every later one too; the counter says how many mutating
/// calls were made.
fn failing<M: Mutator>(inner: M, fail_at: usize, and_after: bool) -> (Hooked<M>, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let hooked = Hooked::new(inner, move |m| {
        let call = counter.fetch_add(1, Ordering::SeqCst);
        if call == fail_at || (and_after && call > fail_at) {
            return Err(MutatorError::Io {
                op: injected(m),
                path: m.path().clone(),
                source: io::Error::other("disk on fire"),
            });
        }
        Ok(())
    });
    (hooked, calls)
}

fn injected(mutation: &Mutation<'_>) -> &'static str {
    match mutation {
        Mutation::Write(_) => "injected fault write",
        Mutation::SetMode(_) => "injected fault chmod",
        Mutation::CreateDir(_) => "injected fault create directory",
        Mutation::Symlink(_) => "injected fault symlink",
        Mutation::RemoveFile(_) => "injected fault remove",
        Mutation::RemoveDir(_) => "injected fault remove directory",
        Mutation::RemoveTree(_) => "injected fault remove tree",
        Mutation::MoveTreeIn(_) => "injected fault move tree in",
        Mutation::Rename { .. } => "injected fault rename",
    }
}

/// A random starting file: unique lines (so hunks match where they were cut from), an
/// optional CRLF ending and an optional final newline.
#[derive(Debug, Clone)]
struct FileSpec {
    lines: Vec<String>,
    crlf: bool,
    final_newline: bool,
}

impl FileSpec {
    fn bytes(&self) -> Vec<u8> {
        let eol = if self.crlf { "\r\n" } else { "\n" };
        let mut text = self.lines.join(eol);
        if self.final_newline {
            text.push_str(eol);
        }
        text.into_bytes()
    }
}

/// What the patch does to one existing file.
#[derive(Debug, Clone)]
enum Action {
    Keep,
    Delete,
    /// `*** Delete File:`, then `*** Add File:` of the same path.
    Replace,
    /// Hunks at the line indices chosen by the seeds, and possibly a move.
    Update {
        seeds: Vec<usize>,
        moved: bool,
    },
}

const NAMES: [&str; 4] = ["a.txt", "b.txt", "src/c.rs", "src/deep/d.md"];

fn file_spec() -> impl Strategy<Value = FileSpec> {
    (
        prop::collection::vec("[a-z ]{0,12}", 1..12),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(words, crlf, final_newline)| FileSpec {
            lines: words
                .iter()
                .enumerate()
                .map(|(i, w)| format!("{i}: {w}"))
                .collect(),
            crlf,
            final_newline,
        })
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        1 => Just(Action::Keep),
        1 => Just(Action::Delete),
        1 => Just(Action::Replace),
        3 => (prop::collection::vec(0usize..100, 1..4), any::<bool>())
            .prop_map(|(seeds, moved)| Action::Update { seeds, moved }),
    ]
}

/// Builds a patch for `files` from the chosen actions; `adds` new files are added too.
fn build_patch(files: &[(usize, FileSpec, Action)], adds: usize) -> String {
    let mut patch = String::from("*** Begin Patch\n");
    for n in 0..adds {
        patch.push_str(&format!(
            "*** Add File: added/n{n}/file.txt\n+new {n}\n+second line\n"
        ));
    }
    for (index, spec, action) in files {
        let name = NAMES[*index];
        match action {
            Action::Keep => {}
            Action::Delete => patch.push_str(&format!("*** Delete File: {name}\n")),
            Action::Replace => patch.push_str(&format!(
                "*** Delete File: {name}\n*** Add File: {name}\n+replaced\n"
            )),
            Action::Update { seeds, moved } => {
                patch.push_str(&format!("*** Update File: {name}\n"));
                if *moved {
                    patch.push_str(&format!("*** Move to: moved/{name}\n"));
                }
                let mut starts: Vec<usize> =
                    seeds.iter().map(|seed| seed % spec.lines.len()).collect();
                starts.sort_unstable();
                starts.dedup();
                let mut next = 0;
                for start in starts {
                    if start < next {
                        continue;
                    }
                    // Context line, then the line after it replaced (when there is one).
                    patch.push_str(&format!("@@\n {}\n", spec.lines[start]));
                    if let Some(line) = spec.lines.get(start + 1) {
                        patch.push_str(&format!("-{line}\n"));
                    }
                    patch.push_str(&format!("+inserted after {start}\n"));
                    next = start + 2;
                }
            }
        }
    }
    patch.push_str("*** End Patch\n");
    patch
}

/// What a patch does to one line of a file with mixed line endings.
#[derive(Debug, Clone, Copy)]
enum LineEdit {
    Keep,
    Replace,
    Delete,
    InsertAfter,
}

fn line_edit() -> impl Strategy<Value = LineEdit> {
    prop_oneof![
        3 => Just(LineEdit::Keep),
        1 => Just(LineEdit::Replace),
        1 => Just(LineEdit::Delete),
        1 => Just(LineEdit::InsertAfter),
    ]
}

/// A file whose line `i` is `line i` with a CRLF ending when `crlf[i]`, the patch that makes
/// `edits` to it (one hunk per edit), and the bytes it must have afterwards: kept lines keep
/// their bytes, a replacing line takes the replaced line's ending, an inserted line the ending
/// of the line before it. A last line without a line break counts as having the ending of the
/// line before it, should a line be added after it.
fn mixed_endings_case(
    lines: &[(bool, LineEdit)],
    final_newline: bool,
) -> (Vec<u8>, String, Vec<u8>) {
    fn join(lines: &[(String, &str)], final_newline: bool) -> Vec<u8> {
        let mut out = String::new();
        for (index, (text, ending)) in lines.iter().enumerate() {
            out.push_str(text);
            if final_newline || index + 1 < lines.len() {
                out.push_str(ending);
            }
        }
        out.into_bytes()
    }
    let eol = |crlf: bool| if crlf { "\r\n" } else { "\n" };
    let last = lines.len() - 1;
    let ending = |i: usize| match i.checked_sub(1) {
        Some(before) if i == last && !final_newline => eol(lines[before].0),
        None if i == last && !final_newline => "\n",
        _ => eol(lines[i].0),
    };
    let mut original = Vec::new();
    let mut expected = Vec::new();
    let mut patch = String::from("*** Begin Patch\n*** Update File: m.txt\n");
    for (i, (_, edit)) in lines.iter().enumerate() {
        let line = format!("line {i}");
        original.push((line.clone(), ending(i)));
        match edit {
            LineEdit::Keep => expected.push((line, ending(i))),
            LineEdit::Replace => {
                patch.push_str(&format!("@@\n-{line}\n+new {i}\n"));
                expected.push((format!("new {i}"), ending(i)));
            }
            LineEdit::Delete => patch.push_str(&format!("@@\n-{line}\n")),
            LineEdit::InsertAfter => {
                patch.push_str(&format!("@@\n {line}\n+inserted {i}\n"));
                expected.push((line, ending(i)));
                expected.push((format!("inserted {i}"), ending(i)));
            }
        }
    }
    patch.push_str("*** End Patch\n");
    (
        join(&original, final_newline),
        patch,
        join(&expected, final_newline),
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whichever mutating call fails, the workspace afterwards is byte-identical to before, or
    /// (when the failure comes after the last write) identical to a clean run's result.
    #[test]
    fn a_failed_write_leaves_the_workspace_untouched(
        specs in prop::collection::vec((0usize..4, file_spec(), action()), 1..4),
        adds in 0usize..3,
        fail_at in 0usize..16,
    ) {
        let mut seen = [false; 4];
        let files: Vec<_> = specs.into_iter().filter(|(i, _, _)| !std::mem::replace(&mut seen[*i], true)).collect();
        let patch = build_patch(&files, adds);
        let seed: Vec<(&str, Vec<u8>)> = files.iter().map(|(i, spec, _)| (NAMES[*i], spec.bytes())).collect();
        runtime().block_on(async {
            let seed: Vec<(&str, &[u8])> = seed.iter().map(|(p, b)| (*p, b.as_slice())).collect();
            let (clean, clean_calls) = failing(workspace(&seed).await, usize::MAX, false);
            let clean_result = tools::apply_patch().call(&clean, json!({ "patch": patch })).await;
            let writes = clean_calls.load(Ordering::SeqCst);
            let names_a_file = adds > 0 || files.iter().any(|(_, _, action)| !matches!(action, Action::Keep));
            // Generated patches always apply, so a failure below is the fault's doing alone.
            prop_assert_eq!(clean_result.is_ok(), names_a_file, "{:?}", clean_result);

            let mem = workspace(&seed).await;
            let before = mem.snapshot();
            let (faulty, _) = failing(mem.clone(), fail_at, false);
            let result = tools::apply_patch().call(&faulty, json!({ "patch": patch })).await;
            match result {
                Ok(out) => {
                    prop_assert!(fail_at >= writes, "a write failed but the call succeeded");
                    prop_assert_eq!(Some(out), clean_result.ok());
                    prop_assert_eq!(mem.snapshot(), clean.inner().snapshot());
                }
                Err(err) => {
                    let message = err.to_string();
                    prop_assert!(message.contains("nothing was changed"), "{}", message);
                    prop_assert_eq!(mem.snapshot(), before, "{}", message);
                }
            }
            Ok(())
        })?;
    }

    /// In a file that mixes CRLF and LF lines, every line the patch keeps keeps its exact
    /// bytes, and every line it adds takes the ending of the line it replaces or follows.
    #[test]
    fn mixed_line_endings_are_kept_line_by_line(
        lines in prop::collection::vec((any::<bool>(), line_edit()), 1..12),
        final_newline in any::<bool>(),
    ) {
        let (original, patch, expected) = mixed_endings_case(&lines, final_newline);
        let hunks = if lines.iter().all(|(_, edit)| matches!(edit, LineEdit::Keep)) {
            // A patch without hunks is refused; applying none must change nothing.
            Vec::new()
        } else {
            match patch::parse(&patch).unwrap().operations.remove(0) {
                patch::Operation::Update { hunks, .. } => hunks,
                other => panic!("not an update: {other:?}"),
            }
        };
        let file = shiro_tools::text::TextFile::decode(&original).unwrap();
        let edited = patch::apply_hunks(&file, &hunks).unwrap().encode();
        prop_assert_eq!(
            String::from_utf8_lossy(&edited),
            String::from_utf8_lossy(&expected),
            "patch:\n{}",
            patch
        );
    }

    /// Parsing any text never panics, and every refusal says something.
    #[test]
    fn parsing_arbitrary_text_never_panics(text in "(?s).{0,300}") {
        if let Err(err) = patch::parse(&text) {
            prop_assert!(!err.to_string().trim().is_empty());
        }
    }

    /// Patch-shaped text applied to any file never panics; every refusal says something and
    /// leaves the file as it was, and a success that lists no change (an update that keeps
    /// every line) changed nothing.
    #[test]
    fn applying_patch_shaped_text_never_panics(
        lines in prop::collection::vec(prop_oneof![
            Just("*** Begin Patch".to_owned()),
            Just("*** End Patch".to_owned()),
            Just("*** Update File: f.txt".to_owned()),
            Just("*** Add File: g.txt".to_owned()),
            Just("*** Delete File: f.txt".to_owned()),
            Just("*** Move to: h/f.txt".to_owned()),
            Just("*** End of File".to_owned()),
            Just("apply_patch <<'EOF'".to_owned()),
            Just("cd . && apply_patch <<'EOF'".to_owned()),
            Just("cd h && apply_patch <<'EOF'".to_owned()),
            Just("EOF".to_owned()),
            Just("@@".to_owned()),
            "@@ [ab\u{2014}]{0,3}",
            "[ +-][ab \u{201c}\u{a0}]{0,4}",
            Just(String::new()),
        ], 0..16),
        file in "[ab\n\r \u{2014}\u{201c}\u{a0}]{0,24}",
    ) {
        let text = lines.join("\n");
        runtime().block_on(async {
            let mem = workspace(&[("f.txt", file.as_bytes())]).await;
            let before = mem.snapshot();
            match tools::apply_patch().call(&mem, json!({ "patch": text })).await {
                Ok(out) => {
                    prop_assert!(!out.text.trim().is_empty());
                    if out.changes.is_empty() {
                        prop_assert_eq!(mem.snapshot(), before);
                    }
                }
                Err(err) => {
                    prop_assert!(!err.to_string().trim().is_empty());
                    prop_assert_eq!(mem.snapshot(), before);
                }
            }
            Ok(())
        })?;
    }
}
