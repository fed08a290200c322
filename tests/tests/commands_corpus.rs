//! The command-file corpus: command files written for this test in the style of each
//! ecosystem (shiro's `commands.md` and `commands/`, Claude Code's `.claude/commands`,
//! OpenCode's `.opencode/command(s)`, Gemini CLI's `.gemini/commands` TOML, and the user-level
//! folders of each), run through the real `shiro` binary. Every file gets one reviewed
//! snapshot: the file, its lines of `shiro commands list` and `check`, and `shiro commands
//! expand` of each of its commands, in an untrusted workspace and with `--trust`.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::path::{Path, PathBuf};

use support::{Run, Ws};

/// One command file of the corpus and the expansions to show for it: `(name, args)`.
struct Case {
    file: &'static str,
    expands: &'static [(&'static str, &'static [&'static str])],
}

/// Every command file of the corpus (the test fails when a file is missing from this list).
const CASES: &[Case] = &[
    // shiro's own.
    Case {
        file: "ws/.shiro/commands.md",
        expands: &[
            ("review-file", &["src/main.rs", "error handling"]),
            ("notes", &["the widget ships"]),
            ("deploy", &["staging"]),
            ("undo", &[]),
        ],
    },
    Case {
        file: "ws/.shiro/commands/git/message.md",
        expands: &[("git:message", &["parser"])],
    },
    Case {
        file: "ws/.shiro/commands/bom.md",
        expands: &[("bom", &[])],
    },
    Case {
        file: "cfg/commands.md",
        expands: &[("mine", &["the release notes"])],
    },
    // Claude Code's.
    Case {
        file: "ws/.claude/commands/review-pr.md",
        expands: &[
            ("review-pr", &["456", "high", "alice"]),
            ("/review-pr", &["7"]),
        ],
    },
    Case {
        file: "ws/.claude/commands/explain.md",
        expands: &[
            ("explain", &["src/auth.ts", "the check function"]),
            ("explain", &[]),
        ],
    },
    Case {
        file: "ws/.claude/commands/fix-issue.md",
        expands: &[("fix-issue", &["123", "urgent"])],
    },
    Case {
        file: "ws/.claude/commands/security.md",
        expands: &[("security", &[])],
    },
    Case {
        file: "ws/.claude/commands/commit.md",
        expands: &[("commit", &["fix: handle empty input"])],
    },
    Case {
        file: "ws/.claude/commands/migrate.md",
        expands: &[
            ("migrate", &["SearchBar", "React", "Vue"]),
            ("migrate", &["Only"]),
        ],
    },
    Case {
        file: "ws/.claude/commands/frontend/component.md",
        expands: &[
            ("frontend:component", &["Button"]),
            ("component", &["Card"]),
        ],
    },
    Case {
        file: "ws/.claude/commands/svelte/svelte:test.md",
        expands: &[("svelte:test", &["Counter.svelte"])],
    },
    Case {
        file: "ws/.claude/commands/java.md",
        expands: &[("java", &["orders"])],
    },
    Case {
        file: "ws/.claude/commands/npm-install.md",
        expands: &[("npm-install", &[])],
    },
    Case {
        file: "ws/.claude/commands/python.md",
        expands: &[("python", &["the database"])],
    },
    Case {
        file: "ws/.claude/commands/deploy.md",
        expands: &[],
    },
    Case {
        file: "ws/.claude/commands/help.md",
        expands: &[("help", &[])],
    },
    Case {
        file: "ws/.claude/commands/unknown-keys.md",
        expands: &[("unknown-keys", &[])],
    },
    Case {
        file: "ws/.claude/commands/crlf.md",
        expands: &[("crlf", &["src/main.rs"])],
    },
    Case {
        file: "ws/.claude/commands/quotes.md",
        expands: &[
            ("quotes", &["don't", "stop"]),
            ("quotes", &["'it's fine'", "\"two words\"", ""]),
            ("quotes", &["a \"b", "c"]),
        ],
    },
    Case {
        file: "ws/.claude/commands/bash-args.md",
        expands: &[
            ("bash-args", &["needle", "src/main.rs"]),
            (
                "bash-args",
                &[
                    "$(touch pwned)",
                    "`touch pwned`; touch pwned",
                    "'\"; touch pwned",
                ],
            ),
        ],
    },
    Case {
        file: "ws/.claude/commands/unclosed.md",
        expands: &[("unclosed", &["x"])],
    },
    Case {
        file: "ws/.claude/commands/empty.md",
        expands: &[("empty", &["something"])],
    },
    Case {
        file: "ws/.claude/commands/listing.md",
        expands: &[("listing", &[])],
    },
    Case {
        file: "home/.claude/commands/standup.md",
        expands: &[("standup", &[])],
    },
    Case {
        file: "home/.claude/commands/review-pr.md",
        expands: &[],
    },
    // OpenCode's.
    Case {
        file: "ws/.opencode/command/test.md",
        expands: &[("test", &["the parser"])],
    },
    Case {
        file: "ws/.opencode/command/plan-review.md",
        expands: &[("plan-review", &["the cache design"])],
    },
    Case {
        file: "ws/.opencode/commands/create-file.md",
        expands: &[
            (
                "create-file",
                &["config.json", "src", "{\"key\": \"value\"}"],
            ),
            (
                "create-file",
                &["notes.md", "docs", "first", "second", "third"],
            ),
        ],
    },
    Case {
        file: "ws/.opencode/commands/team/review.md",
        expands: &[("team/review", &["src/auth.ts"]), ("team:review", &[])],
    },
    Case {
        file: "ws/.opencode/commands/no-args.md",
        expands: &[("no-args", &["since", "Monday"])],
    },
    Case {
        file: "home/.config/opencode/commands/oc-user.md",
        expands: &[("oc-user", &["the imports"])],
    },
    // Gemini CLI's.
    Case {
        file: "ws/.gemini/commands/changelog.toml",
        expands: &[(
            "changelog",
            &["1.2.0", "added", "Support for default argument parsing."],
        )],
    },
    Case {
        file: "ws/.gemini/commands/git/commit.toml",
        expands: &[("git:commit", &[])],
    },
    Case {
        file: "ws/.gemini/commands/git/fix.toml",
        expands: &[("git:fix", &["\"Button is misaligned\""]), ("fix", &[])],
    },
    Case {
        file: "ws/.gemini/commands/grep-code.toml",
        expands: &[("grep-code", &["It's", "complicated; touch pwned"])],
    },
    Case {
        file: "ws/.gemini/commands/review.toml",
        expands: &[("review", &["FileCommandLoader.ts"])],
    },
    Case {
        file: "ws/.gemini/commands/json.toml",
        expands: &[("json", &[])],
    },
    Case {
        file: "ws/.gemini/commands/broken.toml",
        expands: &[("broken", &[])],
    },
    Case {
        file: "ws/.gemini/commands/no-prompt.toml",
        expands: &[("no-prompt", &[])],
    },
    Case {
        file: "ws/.gemini/commands/unbalanced.toml",
        expands: &[("unbalanced", &["x"])],
    },
    Case {
        file: "ws/.gemini/commands/extra-keys.toml",
        expands: &[("extra-keys", &["world"])],
    },
    Case {
        file: "home/.gemini/commands/plan.toml",
        expands: &[("plan", &["a login page"])],
    },
];

/// The corpus copied to temporary directories: the workspace, the home directory and the
/// shiro config directory.
struct Corpus {
    ws: Ws,
    home: tempfile::TempDir,
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/commands-corpus")
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

impl Corpus {
    fn new() -> Corpus {
        let ws = Ws::new();
        let home = tempfile::tempdir().unwrap();
        copy_tree(&fixture().join("ws"), ws.path());
        copy_tree(&fixture().join("cfg"), ws.config.path());
        copy_tree(&fixture().join("home"), home.path());
        Corpus { ws, home }
    }

    fn run(&self, args: &[&str]) -> Run {
        let child = self
            .ws
            .command(args)
            .env("HOME", self.home.path())
            .env("LC_ALL", "C")
            // `git` in a substitution never finds a repository around the temporary folder.
            .env(
                "GIT_CEILING_DIRECTORIES",
                self.ws.path().parent().unwrap_or(self.ws.path()),
            )
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut run = self.ws.finish(child);
        let home = self.home.path().canonicalize().unwrap();
        for text in [&mut run.stdout, &mut run.stderr] {
            *text = text
                .replace(home.to_str().unwrap(), "<home>")
                .replace(self.home.path().to_str().unwrap(), "<home>");
        }
        run
    }

    /// The path of a corpus file as the outputs name it.
    fn shown(file: &str) -> String {
        let (root, rest) = file.split_once('/').unwrap();
        let root = match root {
            "ws" => "<ws>",
            "home" => "<home>",
            _ => "<config>",
        };
        format!("{root}/{rest}")
    }
}

/// Every file under `dir`, relative to `base`.
fn files(base: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(base, &path, out);
        } else {
            out.push(path.strip_prefix(base).unwrap().display().to_string());
        }
    }
}

fn is_command_file(file: &str) -> bool {
    file.starts_with("cfg/")
        || file.starts_with("home/")
        || [".shiro/", ".claude/", ".opencode/", ".gemini/"]
            .iter()
            .any(|dir| file.starts_with(&format!("ws/{dir}")))
}

#[test]
fn every_file_of_the_corpus_is_listed_checked_and_expanded() {
    let mut all = Vec::new();
    files(&fixture(), &fixture(), &mut all);
    let mut command_files: Vec<String> = all.into_iter().filter(|f| is_command_file(f)).collect();
    command_files.sort();
    let mut cased: Vec<String> = CASES.iter().map(|c| c.file.to_owned()).collect();
    cased.sort();
    assert_eq!(command_files, cased, "every command file has a case");
    assert!(CASES.len() >= 30, "the corpus has {} files", CASES.len());

    let corpus = Corpus::new();
    let list = corpus.run(&["commands", "list"]);
    assert_eq!(list.code, 0, "{}", list.show());
    let json = corpus.run(&["commands", "list", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let check = corpus.run(&["commands", "check"]);
    assert_eq!(check.code, 1, "the corpus has errors: {}", check.show());
    insta::assert_snapshot!("list", list.show());
    insta::assert_snapshot!("check", check.show());

    for case in CASES {
        let shown = Corpus::shown(case.file);
        let mut out = String::new();
        let text = std::fs::read_to_string(fixture().join(case.file)).unwrap();
        out += &format!("--- file {}\n{}", case.file, text.replace('\r', "␍"));
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out += "--- list\n";
        let names: Vec<&str> = json["commands"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["file"].as_str() == Some(shown.as_str()))
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        for line in list.stdout.lines() {
            let listed = names.iter().any(|n| line.starts_with(&format!("/{n} ")));
            if listed || (line.starts_with("note:") && line.contains(&format!("({shown}:"))) {
                out += &format!("{line}\n");
            }
        }
        out += "--- check\n";
        for line in check.stdout.lines() {
            if line.starts_with(&format!("{shown}:")) {
                out += &format!("{line}\n");
            }
        }
        for (name, args) in case.expands {
            let mut untrusted = vec!["commands", "expand", name];
            untrusted.extend_from_slice(args);
            let mut trusted = vec!["commands", "expand", "--trust", name];
            trusted.extend_from_slice(args);
            out += &format!("--- expand {name} {args:?}\n");
            out += &format!("untrusted: {}", corpus.run(&untrusted).show());
            out += &format!("trusted: {}", corpus.run(&trusted).show());
        }
        let snapshot = case.file.replace('/', "__");
        insta::assert_snapshot!(snapshot, out);
    }
    let made: Vec<String> = {
        let mut made = Vec::new();
        files(corpus.ws.path(), corpus.ws.path(), &mut made);
        made.into_iter().filter(|f| f.contains("pwned")).collect()
    };
    assert!(made.is_empty(), "typed text ran as code: {made:?}");
}
