//! Parsing and diagnostics over the fixture corpus, plus a no-panic property.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use shiro_commands::{
    Ecosystem, Origin, Parsed, parse_command_file, parse_commands_md, parse_gemini_file,
};

/// Renders a parse result the way a reviewer wants to read it.
fn render(parsed: &Parsed) -> String {
    let mut out = String::new();
    for c in &parsed.commands {
        writeln!(out, "/{} (line {}, {})", c.name, c.line, c.origin).unwrap();
        if let Some(d) = &c.description {
            writeln!(out, "  description: {d}").unwrap();
        }
        if let Some(h) = &c.argument_hint {
            writeln!(out, "  argument-hint: {h}").unwrap();
        }
        if let Some(a) = &c.allowed_tools {
            let tools: Vec<&str> = a.tools.iter().map(String::as_str).collect();
            writeln!(
                out,
                "  allowed-tools: {} -> {tools:?}",
                a.written.join(", ")
            )
            .unwrap();
            if !a.bash_rules.is_empty() {
                writeln!(out, "  bash rules: {:?}", a.bash_rules).unwrap();
            }
        }
        if let Some(m) = &c.model {
            writeln!(out, "  model: {m}").unwrap();
        }
        if !c.arguments.is_empty() {
            writeln!(out, "  arguments: {}", c.arguments.join(", ")).unwrap();
        }
        if c.disable_model_invocation {
            writeln!(out, "  disable-model-invocation").unwrap();
        }
        for line in c.body.lines() {
            writeln!(out, "  | {line}").unwrap();
        }
    }
    if parsed.commands.is_empty() {
        writeln!(out, "(no commands)").unwrap();
    }
    writeln!(out, "--- diagnostics").unwrap();
    for d in &parsed.diagnostics {
        writeln!(out, "{d}").unwrap();
    }
    out
}

fn fixtures(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files
}

#[test]
fn commands_md_corpus() {
    let files = fixtures("commands");
    assert!(files.len() >= 25, "the corpus has {} files", files.len());
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let parsed = parse_commands_md(Path::new("commands.md"), &text, Origin::Project);
        insta::assert_snapshot!(format!("commands_md__{stem}"), render(&parsed));
    }
}

#[test]
fn command_files_corpus() {
    for path in fixtures("command-files") {
        let text = std::fs::read_to_string(&path).unwrap();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let label = Path::new("commands").join(path.file_name().unwrap());
        let parsed = parse_command_file(&label, &stem, &text, Origin::User, Ecosystem::Shiro);
        insta::assert_snapshot!(format!("command_file__{stem}"), render(&parsed));
    }
}

#[test]
fn directory_source_names_and_cross_file_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    std::fs::create_dir_all(base.join("commands/git/deep")).unwrap();
    std::fs::write(base.join("commands.md"), "## review\nFrom commands.md.\n").unwrap();
    std::fs::write(base.join("commands/review.md"), "From the directory.\n").unwrap();
    std::fs::write(base.join("commands/git/commit.md"), "Commit.\n").unwrap();
    std::fs::write(base.join("commands/git/deep/x.md"), "Deep.\n").unwrap();
    std::fs::write(base.join("commands/notes.txt"), "Not markdown.\n").unwrap();
    std::fs::write(base.join("commands/.hidden.md"), "Hidden.\n").unwrap();

    let parsed = shiro_commands::load_source(base, Origin::Project);
    let names: Vec<&str> = parsed.commands.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["review", "git:commit", "git:deep:x"]);
    assert_eq!(parsed.commands[0].body, "From commands.md.");
    let rendered = render(&parsed).replace(&base.display().to_string(), "<dir>");
    insta::assert_snapshot!(rendered, @r"
    /review (line 1, project)
      | From commands.md.
    /git:commit (line 1, project)
      | Commit.
    /git:deep:x (line 1, project)
      | Deep.
    --- diagnostics
    <dir>/commands/review.md:1:1: error: duplicate command /review: already defined at <dir>/commands.md:1, this one is ignored
    ");
}

#[test]
fn invalid_utf8_is_reported_where_its_first_bad_byte_is() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    let mut bytes = b"## greet\nHello.\nCaf\xc3\xa9 \xff bad\n".to_vec();
    bytes.extend_from_slice(b"more \xfe\n");
    std::fs::write(base.join("commands.md"), bytes).unwrap();
    let parsed = shiro_commands::load_source(base, Origin::Project);
    assert_eq!(
        parsed.commands[0].body,
        "Hello.\nCaf\u{e9} \u{fffd} bad\nmore \u{fffd}"
    );
    let rendered = render(&parsed).replace(&base.display().to_string(), "<dir>");
    // Line 3, after the five characters `Café `: column 6.
    assert!(
        rendered.contains(
            "<dir>/commands.md:3:6: warning: not valid UTF-8: the invalid bytes are read as \u{fffd}"
        ),
        "{rendered}"
    );
}

#[test]
fn missing_source_directory_is_empty_and_silent() {
    let dir = tempfile::tempdir().unwrap();
    let parsed = shiro_commands::load_source(&dir.path().join("nope"), Origin::User);
    assert_eq!(parsed, Parsed::default());
}

/// The naming rules of docs/user-commands.md: ASCII letters, digits, `-`, `_`, and `:`
/// between two parts that are not empty.
fn follows_the_name_rules(name: &str) -> bool {
    name.split(':').all(|part| {
        !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_'))
    })
}

/// `:` joins the parts of a namespaced name; a name with an empty part (`::`, `:a`, `a:`,
/// `a::b`) cannot be typed as one, in any format.
#[test]
fn a_colon_must_stand_between_two_parts() {
    let parsed = parse_commands_md(
        Path::new("commands.md"),
        "## ::\nColons.\n## a::b\nTwo.\n## :lead\nLead.\n## trail:\nTrail.\n## git:ok\nFine.\n",
        Origin::Project,
    );
    let names: Vec<&str> = parsed.commands.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["git:ok"]);
    insta::assert_snapshot!(render(&parsed), @r"
    /git:ok (line 9, project)
      | Fine.
    --- diagnostics
    commands.md:1:4: error: invalid command name `::`: `:` must stand between two parts of the name, as in `git:commit`, section skipped
    commands.md:3:6: error: invalid command name `a::b`: `:` must stand between two parts of the name, as in `git:commit`, section skipped
    commands.md:5:4: error: invalid command name `:lead`: `:` must stand between two parts of the name, as in `git:commit`, section skipped
    commands.md:7:9: error: invalid command name `trail:`: `:` must stand between two parts of the name, as in `git:commit`, section skipped
    ");
    for name in [":", "a::b", ":a", "a:"] {
        let parsed = parse_command_file(
            Path::new("x.md"),
            name,
            "X.",
            Origin::User,
            Ecosystem::Claude,
        );
        assert!(parsed.commands.is_empty(), "{name}");
        let parsed = parse_gemini_file(Path::new("x.toml"), name, "prompt = 'x'", Origin::User);
        assert!(parsed.commands.is_empty(), "{name}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parsing_arbitrary_text_never_panics(text in any::<String>()) {
        let parsed = parse_commands_md(Path::new("x.md"), &text, Origin::Project);
        for c in &parsed.commands {
            prop_assert!(!c.name.is_empty());
            prop_assert_eq!(c.body.trim_end(), c.body.as_str());
        }
        let _ = parse_command_file(Path::new("x.md"), "x", &text, Origin::User, Ecosystem::Claude);
        let _ = parse_gemini_file(Path::new("x.toml"), "x", &text, Origin::User);
    }

    /// Arbitrary bytes, read as the loader reads them (lossily), in either format.
    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_commands_md(Path::new("x.md"), &text, Origin::Project);
        let _ = parse_command_file(Path::new("x.md"), "x", &text, Origin::User, Ecosystem::OpenCode);
        let _ = parse_gemini_file(Path::new("x.toml"), "x", &text, Origin::User);
    }

    #[test]
    fn parsing_tomlish_text_never_panics(
        lines in proptest::collection::vec(
            prop_oneof![
                Just("prompt = \"\"\"".to_owned()), Just("\"\"\"".to_owned()),
                Just("description = 'd'".to_owned()), Just("prompt = \"!{a {{args}} }\"".to_owned()),
                Just("[t]".to_owned()), Just("@{".to_owned()), Just("!{".to_owned()), Just("}".to_owned()),
                "[\\x00-\\x7f\u{feff}é]{0,12}",
            ],
            0..20,
        )
    ) {
        let text = lines.join("\n");
        let parsed = parse_gemini_file(Path::new("x.toml"), "x", &text, Origin::User);
        for d in &parsed.diagnostics {
            prop_assert!(d.line >= 1 && d.column >= 1, "{}", d);
        }
    }

    #[test]
    fn parsing_markdownish_text_never_panics(
        lines in proptest::collection::vec(
            prop_oneof![
                Just("## a".to_owned()), Just("##".to_owned()), Just("```".to_owned()),
                Just("~~~".to_owned()), Just("> s".to_owned()), Just("---".to_owned()),
                Just(String::new()), Just("description: d".to_owned()), "[#>`~ a-é:\t]{0,8}",
                Just("allowed-tools:".to_owned()), Just("  - Bash(git status:*)".to_owned()),
                Just("arguments: [a, \"b".to_owned()), Just("x: |".to_owned()), Just("\u{feff}---".to_owned()),
                Just("## ::".to_owned()), Just("## a::b".to_owned()), Just("## :a".to_owned()), Just("## a:".to_owned()),
            ],
            0..40,
        )
    ) {
        let text = lines.join("\n");
        let parsed = parse_commands_md(Path::new("x.md"), &text, Origin::Project);
        for c in &parsed.commands {
            prop_assert!(follows_the_name_rules(&c.name), "/{}", c.name);
        }
        let mut names: Vec<&str> = parsed.commands.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        prop_assert_eq!(names.len(), parsed.commands.len(), "names are unique");
        let parsed = parse_command_file(Path::new("x.md"), "x", &text, Origin::User, Ecosystem::Claude);
        for d in &parsed.diagnostics {
            prop_assert!(d.line >= 1 && d.column >= 1, "{}", d);
        }
    }
}
