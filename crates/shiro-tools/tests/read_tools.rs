//! read_file, list_dir, glob and grep: every output and error message as a reviewed snapshot,
//! on temporary workspaces with fixed content.

// Helpers outside `#[test]` functions unwrap too: a failed setup should fail the test.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use serde_json::{Value, json};
use shiro_tools::{FsMutator, MemMutator, Mutator, Tool, WorkspacePath, tools};
use tempfile::TempDir;

/// A workspace on disk holding `files` (path, content); a path ending in `/` is an empty
/// directory.
fn workspace(files: &[(&str, &[u8])]) -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, bytes) in files {
        let full = dir.path().join(path);
        if path.ends_with('/') {
            std::fs::create_dir_all(&full).unwrap();
        } else {
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, bytes).unwrap();
        }
    }
    dir
}

/// A small project: sources, docs, ignored build output, dotfiles and a `.git` directory.
fn project() -> TempDir {
    let dir = workspace(&[
        (".git/HEAD", b"ref: refs/heads/main\n"),
        (".git/info/exclude", b"local-notes.txt\n"),
        ("local-notes.txt", b"answer: excluded\n"),
        (".github/workflows/ci.yml", b"on: push\n"),
        (".gitignore", b"/target/\n*.log\n!keep.log\n"),
        ("Cargo.toml", b"[package]\nname = \"demo\"\n"),
        ("README.md", b"# Demo\n\nA demo project.\n"),
        ("debug.log", b"noise\n"),
        ("keep.log", b"kept despite *.log\n"),
        (
            "src/lib.rs",
            b"pub mod util;\n\npub fn answer() -> u32 {\n    42\n}\n",
        ),
        (
            "src/util.rs",
            b"// TODO: more helpers\npub fn double(x: u32) -> u32 {\n    x * 2\n}\n",
        ),
        (
            "src/bin/main.rs",
            b"fn main() {\n    println!(\"{}\", demo::answer());\n}\n",
        ),
        ("docs/guide.md", b"# Guide\n\nCall `answer()`.\n"),
        ("docs/.ignore", b"draft.md\n"),
        ("docs/draft.md", b"answer() draft\n"),
        ("target/debug/demo", b"\x7fELF\0\0binary"),
        ("assets/logo.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR answer"),
        ("empty/", b""),
    ]);
    std::os::unix::fs::symlink("src/lib.rs", dir.path().join("lib-link.rs")).unwrap();
    dir
}

/// Runs one call; shows the output or the error, with the temporary root replaced.
fn run(dir: &Path, tool: &dyn Tool, args: Value) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let m = FsMutator::new(dir).unwrap();
    let result = rt.block_on(tool.call(&m, args));
    let text = match result {
        Ok(output) => {
            assert!(
                output.changes.is_empty(),
                "a read-only tool reported changes"
            );
            format!("ok:\n{}", output.text)
        }
        Err(err) => format!("error: {err}"),
    };
    let canonical = dir.canonicalize().unwrap();
    text.replace(&canonical.display().to_string(), "[ROOT]")
        .replace(&dir.display().to_string(), "[ROOT]")
}

/// Long runs of one character, shown as `c×n`, so snapshots of cut lines stay readable.
fn squeeze(text: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let mut j = i;
        while j < chars.len() && chars[j] == chars[i] {
            j += 1;
        }
        if j - i > 20 {
            out.push_str(&format!("{}×{}", chars[i], j - i));
        } else {
            out.extend(&chars[i..j]);
        }
        i = j;
    }
    out
}

// read_file

#[test]
fn read_file_numbers_lines_like_cat_n() {
    let dir = project();
    let read = tools::read_file();
    insta::assert_snapshot!(run(dir.path(), &read, json!({"path": "src/util.rs"})));
    // An absolute path under the root is accepted, and a link inside the workspace followed.
    let absolute = dir.path().join("lib-link.rs").display().to_string();
    insta::assert_snapshot!(run(dir.path(), &read, json!({"path": absolute})));
}

#[test]
fn read_file_windows_with_offset_and_limit() {
    let body: String = (1..=30).map(|n| format!("line {n}\n")).collect();
    let dir = workspace(&[("thirty.txt", body.as_bytes())]);
    let read = tools::read_file();
    insta::assert_snapshot!(run(
        dir.path(),
        &read,
        json!({"path": "thirty.txt", "offset": 10, "limit": 3})
    ));
    insta::assert_snapshot!(run(
        dir.path(),
        &read,
        json!({"path": "thirty.txt", "offset": 29})
    ));
    // Line 0 does not exist; a model counting from 0 means the start.
    insta::assert_snapshot!(run(
        dir.path(),
        &read,
        json!({"path": "thirty.txt", "offset": 0, "limit": 1})
    ));
}

#[test]
fn read_file_shows_2000_lines_by_default() {
    let body: String = (1..=2500).map(|n| format!("{n}\n")).collect();
    let dir = workspace(&[("long.txt", body.as_bytes())]);
    let out = run(dir.path(), &tools::read_file(), json!({"path": "long.txt"}));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1 + 2000 + 1, "header, 2000 lines, footer");
    insta::assert_snapshot!(lines[lines.len() - 2..].join("\n"));
}

#[test]
fn read_file_cuts_long_lines() {
    let long = format!("short\n{}\n{}\n", "x".repeat(2500), "é".repeat(2000));
    let dir = workspace(&[("min.js", long.as_bytes())]);
    let out = run(dir.path(), &tools::read_file(), json!({"path": "min.js"}));
    insta::assert_snapshot!(squeeze(&out));
}

#[test]
fn read_file_edge_cases() {
    let dir = workspace(&[
        ("empty.txt", b""),
        ("crlf.txt", b"one\r\ntwo\r\n"),
        ("no-newline.txt", b"last line"),
        ("bom.txt", b"\xef\xbb\xbfwith bom\n"),
    ]);
    let read = tools::read_file();
    insta::assert_snapshot!(run(dir.path(), &read, json!({"path": "empty.txt"})));
    insta::assert_snapshot!(run(dir.path(), &read, json!({"path": "crlf.txt"})));
    insta::assert_snapshot!(run(dir.path(), &read, json!({"path": "no-newline.txt"})));
    insta::assert_snapshot!(run(dir.path(), &read, json!({"path": "bom.txt"})));
}

#[test]
fn read_file_errors() {
    let dir = project();
    std::fs::write(dir.path().join("latin1.txt"), b"caf\xe9\n").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", dir.path().join("escape")).unwrap();
    let read = tools::read_file();
    let cases = [
        json!({"path": "assets/logo.png"}),
        json!({"path": "latin1.txt"}),
        json!({"path": "src/missing.rs"}),
        json!({"path": "src"}),
        json!({"path": "../outside.txt"}),
        json!({"path": "/etc/passwd"}),
        json!({"path": "escape"}),
        json!({"path": "README.md", "offset": 9}),
        json!({"path": "README.md", "limit": 0}),
        json!({"path": "README.md", "lines": 3}),
        json!({"offset": 3}),
        json!({"path": "README.md", "offset": -1}),
    ];
    let out: Vec<String> = cases
        .into_iter()
        .map(|args| format!("{args}\n  {}", run(dir.path(), &read, args.clone())))
        .collect();
    insta::assert_snapshot!(out.join("\n"));
}

#[test]
fn read_file_works_through_any_mutator() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let m = MemMutator::new();
    let path = WorkspacePath::from_relative("notes.txt").unwrap();
    rt.block_on(m.write(&path, b"in memory\n", None)).unwrap();
    let out = rt
        .block_on(tools::read_file().call(&m, json!({"path": "notes.txt"})))
        .unwrap();
    insta::assert_snapshot!(out.text);
}

// list_dir

#[test]
fn list_dir_shows_one_level_and_honours_ignore_files() {
    let dir = project();
    let list = tools::list_dir();
    insta::assert_snapshot!(run(dir.path(), &list, json!({})));
    insta::assert_snapshot!(run(dir.path(), &list, json!({"path": "docs"})));
    insta::assert_snapshot!(run(dir.path(), &list, json!({"path": "./src/"})));
    insta::assert_snapshot!(run(dir.path(), &list, json!({"path": "empty"})));
}

#[test]
fn list_dir_lists_an_ignored_directory_asked_for_by_name() {
    let dir = project();
    insta::assert_snapshot!(run(
        dir.path(),
        &tools::list_dir(),
        json!({"path": "target/debug"})
    ));
}

#[test]
fn list_dir_caps_its_output() {
    let names: Vec<String> = (0..520).map(|n| format!("many/f{n:03}.txt")).collect();
    let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
    let dir = workspace(&files);
    let out = run(dir.path(), &tools::list_dir(), json!({"path": "many"}));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1 + 500 + 1);
    insta::assert_snapshot!(lines[lines.len() - 2..].join("\n"));
}

#[test]
fn list_dir_errors() {
    let dir = project();
    let list = tools::list_dir();
    let out: Vec<String> = [
        json!({"path": "README.md"}),
        json!({"path": "nope"}),
        json!({"path": "../"}),
        json!({"path": "src", "recursive": true}),
    ]
    .into_iter()
    .map(|args| format!("{args}\n  {}", run(dir.path(), &list, args.clone())))
    .collect();
    insta::assert_snapshot!(out.join("\n"));
}

#[test]
fn walking_tools_need_a_workspace_on_disk() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let m = MemMutator::new();
    let calls: [(Box<dyn Tool>, Value); 3] = [
        (Box::new(tools::list_dir()), json!({})),
        (Box::new(tools::glob()), json!({"pattern": "*"})),
        (Box::new(tools::grep()), json!({"pattern": "x"})),
    ];
    let out: Vec<String> = calls
        .iter()
        .map(|(tool, args)| {
            rt.block_on(tool.call(&m, args.clone()))
                .unwrap_err()
                .to_string()
        })
        .collect();
    insta::assert_snapshot!(out.join("\n"));
}

// glob

#[test]
fn glob_matches_names_at_any_depth_and_paths_from_the_start() {
    let dir = project();
    let glob = tools::glob();
    let out: Vec<String> = [
        json!({"pattern": "*.rs"}),
        json!({"pattern": "src/*.rs"}),
        json!({"pattern": "**/*.md"}),
        json!({"pattern": "*.log"}),
        json!({"pattern": "*.{yml,toml}"}),
        json!({"pattern": "bin/*.rs", "path": "src"}),
        json!({"pattern": "*", "path": "target"}),
        json!({"pattern": "*.py"}),
    ]
    .into_iter()
    .map(|args| format!("{args}\n{}", run(dir.path(), &glob, args.clone())))
    .collect();
    insta::assert_snapshot!(out.join("\n\n"));
}

#[test]
fn glob_caps_its_output() {
    let names: Vec<String> = (0..520)
        .map(|n| format!("d{}/f{n:03}.txt", n % 3))
        .collect();
    let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
    let dir = workspace(&files);
    let out = run(dir.path(), &tools::glob(), json!({"pattern": "**/*.txt"}));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1 + 500 + 1);
    insta::assert_snapshot!(lines[lines.len() - 2..].join("\n"));
}

#[test]
fn glob_errors() {
    let dir = project();
    let glob = tools::glob();
    let out: Vec<String> = [
        json!({"pattern": "src/[a"}),
        json!({"pattern": "*.rs", "path": "README.md"}),
        json!({"pattern": "*.rs", "path": "/tmp"}),
        json!({"path": "src"}),
        json!({"pattern": "*.rs", "dir": "src"}),
    ]
    .into_iter()
    .map(|args| format!("{args}\n  {}", run(dir.path(), &glob, args.clone())))
    .collect();
    insta::assert_snapshot!(out.join("\n"));
}

// grep

#[test]
fn grep_finds_lines_and_skips_ignored_and_binary_files() {
    let dir = project();
    let grep = tools::grep();
    let out: Vec<String> = [
        json!({"pattern": "answer"}),
        json!({"pattern": "ANSWER", "caseInsensitive": true}),
        json!({"pattern": "answer", "case_insensitive": false, "glob": "*.md"}),
        json!({"pattern": "fn \\w+\\(", "path": "src"}),
        json!({"pattern": "fn", "path": "src/util.rs"}),
        json!({"pattern": "noise|kept"}),
        json!({"pattern": "fn", "glob": "bin/**", "path": "src"}),
        json!({"pattern": "TODO", "glob": "bin/**", "path": "src"}),
        json!({"pattern": "ELF", "path": "target"}),
    ]
    .into_iter()
    .map(|args| format!("{args}\n{}", run(dir.path(), &grep, args.clone())))
    .collect();
    insta::assert_snapshot!(out.join("\n\n"));
}

#[test]
fn grep_caps_matches_and_bytes_and_cuts_long_lines() {
    let many: String = (1..=250).map(|n| format!("hit {n}\n")).collect();
    let wide: String = (1..=150)
        .map(|n| format!("wide {n} {}\n", "w".repeat(480)))
        .collect();
    let long = format!("long {}\n", "z".repeat(900));
    let dir = workspace(&[
        ("many.txt", many.as_bytes()),
        ("wide.txt", wide.as_bytes()),
        ("long.txt", long.as_bytes()),
    ]);
    let grep = tools::grep();

    let out = run(dir.path(), &grep, json!({"pattern": "^hit"}));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1 + 200 + 1);
    insta::assert_snapshot!(lines[lines.len() - 2..].join("\n"));

    let out = run(dir.path(), &grep, json!({"pattern": "^wide"}));
    assert!(
        out.len() <= shiro_tools::tools::GREP_MAX_BYTES + 200,
        "{} bytes",
        out.len()
    );
    let lines: Vec<&str> = out.lines().collect();
    insta::assert_snapshot!(squeeze(&lines[lines.len() - 2..].join("\n")));

    insta::assert_snapshot!(squeeze(&run(
        dir.path(),
        &grep,
        json!({"pattern": "^long"})
    )));
}

#[test]
fn grep_lists_files_in_walk_order_whatever_thread_found_them() {
    // Enough files in enough directories that several walker threads share them, and names
    // where component order and plain string order differ (`a/` sorts before `a.txt`).
    let mut names: Vec<String> = (0..300)
        .map(|n| format!("d{}/s{}/f{n:03}.txt", n % 7, n % 5))
        .collect();
    names.extend(["a.txt", "a/b.txt", "a-b.txt", "a/b/c.txt"].map(String::from));
    let files: Vec<(&str, &[u8])> = names
        .iter()
        .map(|n| (n.as_str(), &b"x\nhit\n"[..]))
        .collect();
    let dir = workspace(&files);
    let grep = tools::grep();
    let first = run(dir.path(), &grep, json!({"pattern": "hit"}));
    for _ in 0..5 {
        assert_eq!(run(dir.path(), &grep, json!({"pattern": "hit"})), first);
    }
    let mut expected: Vec<&Path> = names.iter().map(Path::new).collect();
    expected.sort();
    let shown: Vec<&str> = first.lines().skip(1).take(200).collect();
    let wanted: Vec<String> = expected[..200]
        .iter()
        .map(|path| format!("{}:2:hit", path.display()))
        .collect();
    assert_eq!(shown, wanted);
    insta::assert_snapshot!(first.lines().last().unwrap());
}

#[test]
fn grep_reads_crlf_lines_and_skips_files_binary_past_their_start() {
    let mut late_binary = "hit early\n".repeat(20_000).into_bytes();
    late_binary.extend(b"\0 hit after\n");
    let dir = workspace(&[
        ("crlf.txt", b"one hit\r\ntwo\r\nthree hit\r\n"),
        ("mixed.txt", b"hit\r\nhit\nno"),
        ("late-binary.dat", &late_binary),
    ]);
    let grep = tools::grep();
    let out: Vec<String> = [
        json!({"pattern": "hit$"}),
        json!({"pattern": "^t.*t$"}),
        json!({"pattern": "early"}),
    ]
    .into_iter()
    .map(|args| format!("{args}\n{}", run(dir.path(), &grep, args.clone())))
    .collect();
    insta::assert_snapshot!(out.join("\n\n"));
}

#[test]
fn glob_keeps_the_first_paths_in_walk_order() {
    let mut names: Vec<String> = (0..700)
        .map(|n| format!("d{}/s{}/f{n:03}.rs", n % 7, n % 5))
        .collect();
    names.extend(["a.rs", "a/b.rs"].map(String::from));
    let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
    let dir = workspace(&files);
    let out = run(dir.path(), &tools::glob(), json!({"pattern": "*.rs"}));
    let mut expected: Vec<&Path> = names.iter().map(Path::new).collect();
    expected.sort();
    let shown: Vec<&str> = out.lines().skip(1).take(500).collect();
    let wanted: Vec<String> = expected[..500]
        .iter()
        .map(|path| path.display().to_string())
        .collect();
    assert_eq!(shown, wanted);
    insta::assert_snapshot!(out.lines().last().unwrap());
}

#[test]
fn grep_errors() {
    let dir = project();
    let grep = tools::grep();
    let out: Vec<String> = [
        json!({"pattern": "fn answer("}),
        json!({"pattern": "a\\nb"}),
        json!({"pattern": "x", "glob": "{a"}),
        json!({"pattern": "x", "path": "missing"}),
        json!({"pattern": "x", "ignoreCase": true}),
        json!({"pattern": 3}),
    ]
    .into_iter()
    .map(|args| format!("{args}\n  {}", run(dir.path(), &grep, args.clone())))
    .collect();
    insta::assert_snapshot!(out.join("\n"));
}

// What the model is told.

#[test]
fn descriptions_and_schemas() {
    let all: [Box<dyn Tool>; 4] = [
        Box::new(tools::read_file()),
        Box::new(tools::list_dir()),
        Box::new(tools::glob()),
        Box::new(tools::grep()),
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let m = MemMutator::new();
    let shown: Vec<Value> = all
        .iter()
        .map(|tool| {
            assert!(!tool.is_mutating());
            let touched = rt
                .block_on(tool.touched_paths(&m, &json!({"path": "a"})))
                .unwrap();
            assert!(touched.is_empty());
            json!({"name": tool.name(), "description": tool.description(), "schema": tool.schema()})
        })
        .collect();
    insta::assert_json_snapshot!(shown);
}

/// The walking tools leave out what their [`tools::Hidden`] hides (the agent's deny rules),
/// without entering a hidden directory, and say how many paths they left out.
#[test]
fn hidden_paths_are_left_out_of_listings_and_searches() {
    let dir = workspace(&[
        ("secrets/key.pem", b"password = hunter2\n"),
        ("secrets/deep/more.txt", b"password again\n"),
        ("src/a.rs", b"let password = ask();\n"),
        (".env", b"password=x\n"),
        ("notes.md", b"nothing here\n"),
    ]);
    let hidden = tools::Hidden::new(|rel: &str| {
        rel == "secrets" || rel.starts_with("secrets/") || rel == ".env"
    });
    let grep = tools::grep().hiding(hidden.clone());
    let glob = tools::glob().hiding(hidden.clone());
    let list = tools::list_dir().hiding(hidden);
    let out = [
        run(dir.path(), &grep, json!({"pattern": "password"})),
        run(dir.path(), &glob, json!({"pattern": "**/*"})),
        run(dir.path(), &list, json!({})),
        // Unhidden tools see everything, as before.
        run(dir.path(), &tools::grep(), json!({"pattern": "password"})),
    ]
    .join("\n---\n");
    insta::assert_snapshot!(out, @r"
    ok:
    src/a.rs:1:let password = ask();
    (2 paths the permission rules deny reading were left out)
    ---
    ok:
    notes.md
    src/a.rs
    (2 paths the permission rules deny reading were left out)
    ---
    ok:
    notes.md
    src/
    (2 paths the permission rules deny reading were left out)
    ---
    ok:
    .env:1:password=x
    secrets/deep/more.txt:1:password again
    secrets/key.pem:1:password = hunter2
    src/a.rs:1:let password = ask();
    ");
}
