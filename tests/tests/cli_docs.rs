//! The docs against the binary, so they cannot drift: every example that `--help` shows runs
//! (in a scratch workspace that holds the files it names, with no model), and every line of
//! the synopsis in docs/cli.md names a real command whose help lists each of its flags.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::process::{Command, Stdio};

use support::{Ws, shiro_bin};

/// Every `--help` there is.
const HELPS: &[&[&str]] = &[
    &[],
    &["tool"],
    &["apply-patch"],
    &["undo"],
    &["redo"],
    &["log"],
    &["commands"],
    &["commands", "list"],
    &["commands", "expand"],
    &["commands", "check"],
    &["demo"],
    &["mcp"],
];

fn help(ws: &Ws, args: &[&str]) -> String {
    let mut all: Vec<&str> = args.to_vec();
    all.push("--help");
    ws.ok(&all).stdout
}

/// The command lines under an `Example:` or `Examples:` heading, each without the
/// explanation that follows it after two spaces.
fn examples(help: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in help.lines() {
        if line.starts_with("Example") {
            inside = true;
            continue;
        }
        if inside {
            match line.strip_prefix("  ") {
                Some(example) if example.starts_with("shiro") => {
                    let command = example.split("  ").next().unwrap_or(example).trim_end();
                    out.push(command.to_owned());
                }
                _ => inside = false,
            }
        }
    }
    out
}

/// A workspace holding what the examples name.
fn scratch() -> Ws {
    let ws = Ws::new();
    ws.write("src/main.rs", "fn foo() {}\n");
    ws.write(
        "fix.patch",
        "*** Begin Patch\n*** Add File: fixed.txt\n+fixed\n*** End Patch\n",
    );
    ws.write(
        "args.json",
        r#"{"path": "from-args.txt", "content": "x\n"}"#,
    );
    ws.write(
        ".shiro/commands.md",
        "## review\n> Review\nReview $ARGUMENTS\n\n## test\n> Test\nRun !`echo tests`\n",
    );
    ws
}

#[test]
fn every_example_in_help_runs() {
    let ws = scratch();
    let bin_dir = shiro_bin().parent().unwrap().to_owned();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut seen = 0;
    for args in HELPS {
        for example in examples(&help(&ws, args)) {
            seen += 1;
            // Isolated as every run is: an example's undo history is not the user's.
            let out = ws
                .isolate(&mut Command::new("sh"))
                .arg("-c")
                .arg(&example)
                .current_dir(ws.path())
                .env("PATH", &path)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            // Exit 2 is a usage error: the example does not match the command line.
            assert_ne!(out.status.code(), Some(2), "`{example}`: {stderr}");
            assert!(
                !stderr.contains("Usage:"),
                "`{example}` was not understood: {stderr}"
            );
        }
    }
    assert!(seen >= 15, "only {seen} examples found");
}

#[test]
fn the_synopsis_in_docs_cli_names_real_commands_and_flags() {
    let ws = Ws::new();
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cli.md")).unwrap();
    let mut fenced = false;
    let mut checked = 0;
    for line in doc.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced || !line.starts_with("shiro ") {
            continue;
        }
        // `shiro commands expand [--trust] NAME [ARGS…]   print the prompt …`
        let synopsis = line.split("  ").next().unwrap();
        let words: Vec<&str> = synopsis.split_whitespace().skip(1).collect();
        let path: Vec<&str> = words
            .iter()
            .take_while(|w| {
                w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-')
            })
            .copied()
            .collect();
        let text = help(&ws, &path);
        for flag in words.iter().flat_map(|w| {
            w.split(['[', ']', '|'])
                .filter(|part| part.starts_with('-'))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        }) {
            assert!(
                text.contains(&flag),
                "docs/cli.md says `{synopsis}`, but `shiro {} --help` has no {flag}",
                path.join(" ")
            );
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} synopsis lines found");
}
