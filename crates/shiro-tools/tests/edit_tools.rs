//! write_file, edit_file and multi_edit: every success and error output as a reviewed
//! snapshot, and all-or-nothing under injected write failures.
#![allow(clippy::unwrap_used)] // Test helpers outside #[test] fns fail loudly by design.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use serde_json::{Value, json};
use shiro_tools::{Hooked, MemMutator, Mutation, Mutator, Tool, WorkspacePath, tools};

fn p(s: &str) -> WorkspacePath {
    WorkspacePath::from_relative(s).unwrap()
}

async fn seed(m: &MemMutator, files: &[(&str, &[u8])]) {
    for (path, bytes) in files {
        let path = p(path);
        shiro_tools::create_parent_dirs(m, &path).await.unwrap();
        m.write(&path, bytes, None).await.unwrap();
    }
}

/// Runs one call on a seeded tree; shows the output or error, then every entry that changed.
fn check(files: &[(&str, &[u8])], tool: &dyn Tool, args: Value) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let m = MemMutator::new();
        seed(&m, files).await;
        m.symlink("a.txt", &p("link")).await.unwrap();
        let before = m.snapshot();
        let mut out = format!("> {} {args}\n", tool.name());
        out += &match tool.call(&m, args).await {
            Ok(output) => {
                let changes: Vec<String> = output.changes.iter().map(ToString::to_string).collect();
                format!("ok: {}\nchanges: {changes:?}\n", output.text)
            }
            Err(err) => format!("error: {err}\n"),
        };
        let after = m.snapshot();
        for (path, (stat, bytes)) in &after {
            if before.get(path) != Some(&(stat.clone(), bytes.clone())) {
                let shown = bytes
                    .as_ref()
                    .map(|b| format!("{:?}", String::from_utf8_lossy(b)));
                writeln!(out, "now {path}: {stat:?} {}", shown.unwrap_or_default()).unwrap();
            }
        }
        for path in before.keys().filter(|k| !after.contains_key(*k)) {
            writeln!(out, "gone {path}").unwrap();
        }
        out
    })
}

const A: (&str, &[u8]) = ("a.txt", b"alpha\nbeta\nalpha\n");

#[test]
fn write_file_outputs() {
    let mut cases = Vec::new();
    let w = tools::write_file();
    cases.push(check(
        &[A],
        &w,
        json!({"path": "new/deep/b.txt", "content": "hi\n"}),
    ));
    cases.push(check(
        &[A],
        &w,
        json!({"path": "a.txt", "content": "replaced"}),
    ));
    cases.push(check(&[A], &w, json!({"path": "one.txt", "content": "x"})));
    cases.push(check(
        &[A],
        &w,
        json!({"path": "a.txt", "content": "alpha\nbeta\nalpha\n"}),
    ));
    cases.push(check(
        &[A],
        &w,
        json!({"path": "/workspace/abs.txt", "content": ""}),
    ));
    cases.push(check(
        &[A, ("dir/x", b"")],
        &w,
        json!({"path": "dir", "content": "x"}),
    ));
    cases.push(check(
        &[A],
        &w,
        json!({"path": "a.txt/under", "content": "x"}),
    ));
    cases.push(check(&[A], &w, json!({"path": "link", "content": "x"})));
    cases.push(check(
        &[A],
        &w,
        json!({"path": "../escape", "content": "x"}),
    ));
    cases.push(check(
        &[A],
        &w,
        json!({"path": "/etc/passwd", "content": "x"}),
    ));
    cases.push(check(
        &[A],
        &w,
        json!({"path": ".git/config", "content": "x"}),
    ));
    cases.push(check(&[A], &w, json!({"path": "a.txt"})));
    cases.push(check(
        &[A],
        &w,
        json!({"path": "a.txt", "content": "x", "mode": 7}),
    ));
    insta::assert_snapshot!(cases.join("\n"));
}

#[test]
fn edit_file_outputs() {
    let mut cases = Vec::new();
    let e = tools::edit_file();
    let edit =
        |old: &str, new: &str| json!({"path": "a.txt", "old_string": old, "new_string": new});
    cases.push(check(&[A], &e, edit("beta", "gamma")));
    cases.push(check(&[A], &e, edit("alpha", "omega")));
    cases.push(check(
        &[A],
        &e,
        json!({"path": "a.txt", "old_string": "alpha", "new_string": "omega", "replace_all": true}),
    ));
    cases.push(check(
        &[A],
        &e,
        json!({"filePath": "a.txt", "oldString": "beta", "newString": "b", "replaceAll": false}),
    ));
    cases.push(check(&[A], &e, edit("delta", "x")));
    cases.push(check(&[A], &e, edit("beta", "beta")));
    cases.push(check(&[A], &e, edit("", "x")));
    cases.push(check(
        &[A],
        &e,
        json!({"path": "missing.txt", "old_string": "a", "new_string": "b"}),
    ));
    cases.push(check(
        &[A, ("d/x", b"")],
        &e,
        json!({"path": "d", "old_string": "a", "new_string": "b"}),
    ));
    cases.push(check(
        &[A],
        &e,
        json!({"path": "link", "old_string": "beta", "new_string": "b"}),
    ));
    cases.push(check(
        &[("bin", b"a\0b")],
        &e,
        json!({"path": "bin", "old_string": "a", "new_string": "b"}),
    ));
    cases.push(check(
        &[("latin1", b"caf\xe9")],
        &e,
        json!({"path": "latin1", "old_string": "caf", "new_string": "b"}),
    ));
    cases.push(check(
        &[A],
        &e,
        json!({"path": "a.txt", "old_string": "beta"}),
    ));
    insta::assert_snapshot!(cases.join("\n"));
}

#[test]
fn edits_keep_line_endings_bom_and_final_newline() {
    let mut cases = Vec::new();
    let e = tools::edit_file();
    let crlf: (&str, &[u8]) = ("w.txt", b"one\r\ntwo\r\nthree\r\n");
    cases.push(check(
        &[crlf],
        &e,
        json!({"path": "w.txt", "old_string": "one\ntwo", "new_string": "1\n2\n2.5"}),
    ));
    let bom: (&str, &[u8]) = ("b.txt", b"\xef\xbb\xbfhead\nbody");
    cases.push(check(
        &[bom],
        &e,
        json!({"path": "b.txt", "old_string": "body", "new_string": "tail"}),
    ));
    let unicode: (&str, &[u8]) = ("u.txt", "naïve — “quoted”\n".as_bytes());
    cases.push(check(
        &[unicode],
        &e,
        json!({"path": "u.txt", "old_string": "“quoted”", "new_string": "«quoted»"}),
    ));
    insta::assert_snapshot!(cases.join("\n"));
}

#[test]
fn multi_edit_outputs() {
    let mut cases = Vec::new();
    let m = tools::multi_edit();
    let edits = |edits: Value| json!({"path": "a.txt", "edits": edits});
    cases.push(check(
        &[A],
        &m,
        edits(json!([
            {"old_string": "beta", "new_string": "BETA"},
            {"old_string": "BETA\nalpha", "new_string": "BETA\nALPHA"},
        ])),
    ));
    cases.push(check(
        &[A],
        &m,
        edits(json!([
            {"old_string": "alpha", "new_string": "a", "replace_all": true},
            {"oldString": "beta", "newString": "b"},
        ])),
    ));
    cases.push(check(
        &[A],
        &m,
        edits(json!([
            {"old_string": "beta", "new_string": "BETA"},
            {"old_string": "alpha", "new_string": "x"},
            {"old_string": "zeta", "new_string": "x"},
        ])),
    ));
    cases.push(check(
        &[A],
        &m,
        edits(json!([
            {"old_string": "beta", "new_string": "BETA"},
            {"old_string": "BETA", "new_string": "beta"},
        ])),
    ));
    cases.push(check(&[A], &m, edits(json!([]))));
    cases.push(check(&[A], &m, edits(json!([{"old_string": "beta"}]))));
    insta::assert_snapshot!(cases.join("\n"));
}

#[test]
fn touched_paths_are_declared_before_writing() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let m = MemMutator::new();
        let args = json!({"path": "x/y.txt", "content": "x"});
        let paths = tools::write_file().touched_paths(&m, &args).await.unwrap();
        assert_eq!(paths, [p("x/y.txt")]);
        assert!(m.snapshot().is_empty(), "declaring paths wrote something");
        let args = json!({"path": "a.txt", "edits": []});
        assert_eq!(
            tools::multi_edit().touched_paths(&m, &args).await.unwrap(),
            [p("a.txt")]
        );
        let bad = json!({"path": "../a", "content": ""});
        assert!(tools::write_file().touched_paths(&m, &bad).await.is_err());
    });
}

/// Fails the k-th mutating call. Removing a directory never fails: it is how a failed call
/// cleans up after itself.
fn failing_at(inner: MemMutator, fail_at: usize) -> Hooked<MemMutator> {
    let calls = AtomicUsize::new(0);
    Hooked::new(inner, move |m| match m {
        Mutation::RemoveDir(_) => Ok(()),
        _ if calls.fetch_add(1, Ordering::SeqCst) == fail_at => Err(m.fault("injected failure")),
        _ => Ok(()),
    })
}

fn arb_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!["a", "b", "ab", "\n", "\r\n", " ", "é"]),
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

fn arb_call() -> impl Strategy<Value = (usize, Value)> {
    let edit = (arb_text(), arb_text(), any::<bool>()).prop_map(
        |(old, new, all)| json!({"old_string": old, "new_string": new, "replace_all": all}),
    );
    prop_oneof![
        (
            arb_text(),
            prop::sample::select(vec!["f.txt", "new/f.txt", "n/e/w.txt"])
        )
            .prop_map(|(content, path)| (0, json!({"path": path, "content": content}))),
        (arb_text(), arb_text(), any::<bool>()).prop_map(|(old, new, all)| {
            (
                1,
                json!({"path": "f.txt", "old_string": old, "new_string": new, "replace_all": all}),
            )
        }),
        prop::collection::vec(edit, 0..4)
            .prop_map(|edits| (2, json!({"path": "f.txt", "edits": edits}))),
    ]
}

proptest! {
    /// Whatever the file and the call, a write that fails leaves the tree as it was.
    #[test]
    fn a_failed_write_leaves_the_tree_untouched(
        content in arb_text(),
        (tool, args) in arb_call(),
        fail_at in 0usize..4,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let inner = MemMutator::new();
            inner.write(&p("f.txt"), content.as_bytes(), None).await.unwrap();
            let before = inner.snapshot();
            let m = failing_at(inner.clone(), fail_at);
            let tool: Box<dyn Tool> = match tool {
                0 => Box::new(tools::write_file()),
                1 => Box::new(tools::edit_file()),
                _ => Box::new(tools::multi_edit()),
            };
            let result = tool.call(&m, args).await;
            match result {
                Err(err) => {
                    prop_assert_eq!(inner.snapshot(), before, "{} failed but changed the tree", err);
                    prop_assert!(!err.to_string().is_empty());
                }
                Ok(output) => prop_assert_eq!(output.changes.is_empty(), inner.snapshot() == before),
            }
            Ok(())
        })?;
    }
}
