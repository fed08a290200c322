//! `grep` and `glob` walk the tree on several threads and sort what they keep. Whatever the
//! tree, their output must be what a plain one-thread model gives: every file visited in
//! sorted path order, each line matched on its own, the same caps and the same counts.

// Helpers outside `#[test]` functions unwrap too: a failed setup should fail the test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::json;
use shiro_tools::tools::{GLOB_MAX_PATHS, GREP_MAX_BYTES, GREP_MAX_LINE_CHARS, GREP_MAX_MATCHES};
use shiro_tools::{FsMutator, Tool, tools};

/// A generated file: where, and its lines (each with its own ending).
#[derive(Debug, Clone)]
struct File {
    path: PathBuf,
    bytes: Vec<u8>,
}

fn component() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["a", "a.b", "a-b", "b", "x_y", "aa"])
}

fn line() -> impl Strategy<Value = String> {
    // Short lines over a few letters find many matches; now and then a long one is cut.
    prop_oneof![
        8 => "[abxX .]{0,12}",
        1 => "x{0,3}[ab]{480,520}",
    ]
}

fn file() -> impl Strategy<Value = File> {
    (
        prop::collection::vec(component(), 1..4),
        prop::collection::vec((line(), prop::sample::select(vec!["\n", "\r\n"])), 0..40),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(parts, lines, binary, no_final_newline)| {
            let mut bytes = Vec::new();
            for (text, end) in &lines {
                bytes.extend(text.as_bytes());
                bytes.extend(end.as_bytes());
            }
            if no_final_newline {
                while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    bytes.pop();
                }
            }
            if binary {
                let at = bytes.len() / 2;
                bytes.insert(at, 0);
            }
            File {
                path: parts.iter().collect(),
                bytes,
            }
        })
}

/// Writes the files that fit (a path cannot be both a file and a directory: later ones that
/// clash are dropped) and returns them by path.
fn write_tree(root: &Path, files: Vec<File>) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut kept = BTreeMap::new();
    for file in files {
        let full = root.join(&file.path);
        let clashes = file
            .path
            .ancestors()
            .skip(1)
            .any(|dir| !dir.as_os_str().is_empty() && root.join(dir).is_file())
            || full.is_dir();
        if clashes {
            continue;
        }
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, &file.bytes).unwrap();
        kept.insert(file.path, file.bytes);
    }
    kept
}

/// What `grep` shows, computed the plain way.
fn grep_model(files: &BTreeMap<PathBuf, Vec<u8>>, pattern: &str) -> String {
    let regex = regex::Regex::new(pattern).unwrap();
    let (mut out, mut shown, mut matches, mut matching_files) = (String::new(), 0, 0, 0);
    let mut bytes_capped = false;
    // `BTreeMap<PathBuf, _>` orders paths component by component, as a sorted walk does.
    for (path, bytes) in files {
        if bytes.contains(&0) {
            continue;
        }
        let text = String::from_utf8_lossy(bytes);
        let mut found_here = false;
        for (index, line) in text.lines().enumerate() {
            if !regex.is_match(line) {
                continue;
            }
            found_here = true;
            matches += 1;
            if shown >= GREP_MAX_MATCHES || bytes_capped {
                continue;
            }
            let line = match line.char_indices().nth(GREP_MAX_LINE_CHARS) {
                Some((cut, _)) => format!("{}… [line cut]", &line[..cut]),
                None => line.to_owned(),
            };
            let entry = format!("{}:{}:{line}\n", path.display(), index + 1);
            if out.len() + entry.len() > GREP_MAX_BYTES {
                bytes_capped = true;
                continue;
            }
            out.push_str(&entry);
            shown += 1;
        }
        matching_files += usize::from(found_here);
    }
    if matches == 0 {
        return format!(
            "no matches for {pattern:?} in the workspace root (files matched by .gitignore or \
             .ignore, and binary files, are not searched)"
        );
    }
    if shown < matches {
        let why = if bytes_capped {
            "64 KiB of output"
        } else {
            "200 lines"
        };
        out.push_str(&format!(
            "(showing the first {shown} of {matches} matching lines in {matching_files} {}, \
             capped at {why}; narrow the pattern, or pass path or glob)\n",
            if matching_files == 1 { "file" } else { "files" }
        ));
    }
    out.pop();
    out
}

/// What `glob` shows for `*.b` (names ending in `.b`), computed the plain way.
fn glob_model(files: &BTreeMap<PathBuf, Vec<u8>>) -> String {
    let matched: Vec<String> = files
        .keys()
        .filter(|path| path.extension().is_some_and(|ext| ext == "b"))
        .map(|path| path.display().to_string())
        .collect();
    if matched.is_empty() {
        return "no files match \"*.b\" under the workspace root (files matched by .gitignore \
                or .ignore are skipped)"
            .to_owned();
    }
    let mut out = matched[..matched.len().min(GLOB_MAX_PATHS)].join("\n");
    if matched.len() > GLOB_MAX_PATHS {
        out.push_str(&format!(
            "\n({} more matching files not shown, {} in all; narrow the pattern or pass a \
             subdirectory as path)",
            matched.len() - GLOB_MAX_PATHS,
            matched.len()
        ));
    }
    out
}

fn call(root: &Path, tool: &dyn Tool, args: serde_json::Value) -> String {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let mutator = FsMutator::new(root).unwrap();
    rt.block_on(tool.call(&mutator, args)).unwrap().text
}

#[test]
fn grep_and_glob_agree_with_a_sequential_model() {
    // Its own runner: the count stays as set here whatever `PROPTEST_CASES` says, since each
    // case writes a tree to disk.
    #[allow(clippy::disallowed_methods)] // The test's own setting, which xtask soak raises.
    let cases = std::env::var("SHIRO_DISK_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(48);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        prop::collection::vec(file(), 0..30),
        prop::sample::select(vec!["x", "^x", "x$", "a.b", "(?i)X", "b b", "^$", "zzz"]),
    );
    runner
        .run(&strategy, |(files, pattern)| {
            let dir = tempfile::tempdir().unwrap();
            let files = write_tree(dir.path(), files);
            let grep = call(dir.path(), &tools::grep(), json!({ "pattern": pattern }));
            prop_assert_eq!(grep, grep_model(&files, pattern));
            let glob = call(dir.path(), &tools::glob(), json!({ "pattern": "*.b" }));
            prop_assert_eq!(glob, glob_model(&files));
            Ok(())
        })
        .unwrap();
}
