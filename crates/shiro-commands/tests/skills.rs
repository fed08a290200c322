//! Skills: `SKILL.md` parsed with diagnostics (a fixture per shape), found in every folder
//! the peers read with precedence and shadowing, held back until the workspace is trusted,
//! their folders listed and read under the link rules, reloaded when they change, and no
//! input that makes the parser or the loader panic.

// Helpers outside `#[test]` functions unwrap too: a failure there is a test failure.
#![allow(clippy::unwrap_used)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use shiro_commands::{
    Ecosystem, Kind, Origin, Parsed, Registry, Resolved, SkillFileError, Sources, parse_skill_file,
};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A `SKILL.md` with `name` and `description`, then `body`.
fn skill(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")
}

/// Renders a skill's parse the way a reviewer reads it.
fn render(parsed: &Parsed) -> String {
    let mut out = String::new();
    for c in &parsed.commands {
        let info = c.skill.as_ref().unwrap();
        writeln!(out, "/{} ({}, {})", c.name, c.kind(), c.origin).unwrap();
        if let Some(d) = &c.description {
            writeln!(out, "  description: {d}").unwrap();
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
        for (key, value) in [
            ("license", &info.license),
            ("compatibility", &info.compatibility),
        ] {
            if let Some(value) = value {
                writeln!(out, "  {key}: {value}").unwrap();
            }
        }
        for (key, value) in &info.metadata {
            writeln!(out, "  metadata {key}: {value}").unwrap();
        }
        for (key, value) in &info.other_keys {
            writeln!(out, "  kept {key}: {value}").unwrap();
        }
        if !info.user_invocable {
            writeln!(out, "  user-invocable: false").unwrap();
        }
        if c.disable_model_invocation {
            writeln!(out, "  disable-model-invocation").unwrap();
        }
        for line in c.body.lines() {
            writeln!(out, "  | {line}").unwrap();
        }
    }
    if parsed.commands.is_empty() {
        writeln!(out, "(no skill)").unwrap();
    }
    writeln!(out, "--- diagnostics").unwrap();
    for d in &parsed.diagnostics {
        writeln!(out, "{d}").unwrap();
    }
    out
}

#[test]
fn skill_files_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/skills");
    let mut folders: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    folders.sort();
    assert!(
        folders.len() >= 15,
        "the corpus has {} skills",
        folders.len()
    );
    for folder in folders {
        let name = folder.file_name().unwrap().to_str().unwrap().to_owned();
        let text =
            String::from_utf8_lossy(&std::fs::read(folder.join("SKILL.md")).unwrap()).into_owned();
        let label = Path::new("skills").join(&name).join("SKILL.md");
        let parsed = parse_skill_file(&label, &name, &text, Origin::Project, Ecosystem::Claude);
        let snapshot = format!("skill__{}", name.replace(' ', "_"));
        insta::assert_snapshot!(snapshot, render(&parsed));
    }
}

/// A workspace, a user config directory and a home with a skill in every folder shiro reads.
fn every_folder() -> (tempfile::TempDir, Sources) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ws = root.join("ws");
    let user = root.join("user");
    let home = root.join("home");
    let config = root.join("config");
    let folders = [
        (ws.join(".shiro/skills"), "shiro"),
        (ws.join(".agents/skills"), "agents"),
        (ws.join(".claude/skills"), "claude"),
        (ws.join(".opencode/skills"), "opencode"),
        (ws.join(".opencode/skill"), "opencode-old"),
        (ws.join(".gemini/skills"), "gemini"),
        (user.join("skills"), "user-shiro"),
        (home.join(".agents/skills"), "user-agents"),
        (home.join(".claude/skills"), "user-claude"),
        (config.join("opencode/skills"), "user-opencode"),
        (home.join(".gemini/skills"), "user-gemini"),
    ];
    for (folder, name) in folders {
        let body = format!("From {}.", folder.display());
        write(
            &folder.join(name).join("SKILL.md"),
            &skill(name, &format!("The {name} skill"), &body),
        );
        // The same name everywhere: the strongest folder's wins.
        write(
            &folder.join("shared/SKILL.md"),
            &skill("shared", &format!("shared, in {name}'s folder"), &body),
        );
    }
    // A command and a skill of the same name in one tool's folders: the skill wins.
    write(
        &ws.join(".claude/commands/claude.md"),
        "---\ndescription: A command\n---\nCommand.\n",
    );
    // A project skill cannot take a built-in's name.
    write(
        &ws.join(".agents/skills/help/SKILL.md"),
        &skill("help", "Hijack", "No."),
    );
    let sources = Sources {
        workspace_root: ws,
        user_config_dir: Some(user),
        home_dir: Some(home),
        config_home: Some(config),
        builtins: vec![("help".to_owned(), "Show help".to_owned())],
        ..Sources::default()
    };
    (dir, sources)
}

fn listing(registry: &Registry, base: &Path) -> String {
    let mut out = String::new();
    for e in registry.list() {
        let marks = [
            (e.untrusted, "untrusted"),
            (e.model_only, "model only"),
            (e.typed_only, "typed only"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, mark)| *mark)
        .collect::<Vec<_>>()
        .join(", ");
        let line = format!(
            "/{} {} [{}] {} {}",
            e.name,
            e.kind,
            e.source(),
            e.summary.as_deref().unwrap_or("-"),
            marks
        );
        writeln!(out, "{}", line.trim_end()).unwrap();
    }
    for s in registry.shadowed() {
        writeln!(out, "note: {s}").unwrap();
    }
    for d in registry.diagnostics() {
        writeln!(out, "{d}").unwrap();
    }
    out.replace(&base.canonicalize().unwrap().display().to_string(), "<tmp>")
}

#[test]
fn skills_are_found_in_every_folder_with_precedence_and_shadowing() {
    let (dir, sources) = every_folder();
    let registry = Registry::load(sources);
    insta::assert_snapshot!(listing(&registry, dir.path()));
    let shared = registry.get("shared").unwrap();
    assert_eq!(shared.kind(), Kind::Skill);
    assert_eq!(shared.ecosystem, Ecosystem::Shiro);
    assert_eq!(
        shared.skill.as_ref().unwrap().shown_dir,
        ".shiro/skills/shared"
    );
}

#[test]
fn a_switched_off_tool_s_skills_are_not_read() {
    let (_dir, mut sources) = every_folder();
    sources.ecosystems.agents = false;
    sources.ecosystems.claude = false;
    let registry = Registry::load(sources);
    let names: Vec<String> = registry.commands().into_iter().map(|c| c.name).collect();
    for gone in ["agents", "claude", "user-agents", "user-claude"] {
        assert!(!names.contains(&gone.to_owned()), "{gone} in {names:?}");
    }
    assert!(names.contains(&"gemini".to_owned()));
}

#[test]
fn project_skills_wait_for_trust_and_user_skills_do_not() {
    let (_dir, sources) = every_folder();
    let registry = Registry::load(sources);
    let offered = |registry: &Registry| -> Vec<String> {
        registry
            .offered_skills()
            .into_iter()
            .map(|c| c.name)
            .collect()
    };
    assert_eq!(
        offered(&registry),
        [
            "user-agents",
            "user-claude",
            "user-gemini",
            "user-opencode",
            "user-shiro"
        ]
    );
    let project = registry.get("claude").unwrap();
    assert!(registry.held_back(&project));
    let untrusted: Vec<String> = registry
        .list()
        .into_iter()
        .filter(|e| e.untrusted)
        .map(|e| e.name)
        .collect();
    assert!(untrusted.contains(&"claude".to_owned()), "{untrusted:?}");
    // Trust is shared by every clone, as the UI's menu and the agent share one registry.
    let clone = registry.clone();
    clone.set_workspace_trusted(true);
    assert!(!registry.held_back(&project));
    assert_eq!(offered(&registry).len(), 12);
    assert!(registry.list().iter().all(|e| !e.untrusted));
    // Typed, a skill resolves as a user command does.
    let Resolved::User { command, args } = registry.resolve("/claude the args") else {
        panic!("not a user command");
    };
    assert_eq!((command.kind(), args.as_str()), (Kind::Skill, "the args"));
}

/// `shiro commands expand` shows a prompt; its notes say where typing the command in a
/// session would not send that prompt. A project skill of a workspace not trusted runs
/// nothing when typed, as a project command's shell substitutions do not run, and says so
/// as the command does; trusted (or with `--trust`), neither says anything. A skill for the
/// model alone runs nothing typed, trusted or not; the user's own skill always runs.
#[test]
fn expanding_a_skill_says_what_trust_holds_back_as_for_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    let user = dir.path().join("config");
    write(
        &root.join(".shiro/commands.md"),
        "## cmd\nBranch: !`git branch --show-current`\n\n## plain\nNo shell.\n",
    );
    write(
        &root.join(".claude/skills/deploy/SKILL.md"),
        &skill("deploy", "Deploy", "Deploy now."),
    );
    write(
        &root.join(".claude/skills/release/SKILL.md"),
        &skill("release", "Release", "Tag: !`git describe`"),
    );
    write(
        &root.join(".claude/skills/background/SKILL.md"),
        "---\nname: background\ndescription: Context\nuser-invocable: false\n---\nKnow this.\n",
    );
    write(
        &user.join("skills/mine/SKILL.md"),
        &skill("mine", "Mine", "Mine: !`date`"),
    );
    let registry = Registry::load(Sources {
        workspace_root: root,
        user_config_dir: Some(user),
        ..Sources::default()
    });
    let mut out = String::new();
    for trusted in [false, true] {
        writeln!(out, "trusted: {trusted}").unwrap();
        for name in ["cmd", "plain", "deploy", "release", "background", "mine"] {
            let command = registry.get(name).unwrap();
            for note in shiro_commands::expand_notes(&command, trusted) {
                writeln!(out, "  /{name}: {note}").unwrap();
            }
        }
    }
    insta::assert_snapshot!(out, @r"
    trusted: false
      /cmd: its shell substitutions were not run: this workspace is not trusted (`/trust` in a session, or `--trust` here)
      /deploy: /deploy is a skill of this workspace, which you have not trusted: typed in a session it runs nothing, and the model is not offered it, until you trust the workspace (`/trust` in a session, or `--trust` here)
      /release: /release is a skill of this workspace, which you have not trusted: typed in a session it runs nothing, and the model is not offered it, until you trust the workspace (`/trust` in a session, or `--trust` here)
      /release: its shell substitutions were not run: this workspace is not trusted (`/trust` in a session, or `--trust` here)
      /background: /background is a skill of this workspace, which you have not trusted: typed in a session it runs nothing, and the model is not offered it, until you trust the workspace (`/trust` in a session, or `--trust` here)
      /background: /background is a skill for the model alone (its SKILL.md says `user-invocable: false`): typed in a session it runs nothing, and the model loads it when a task calls for it
    trusted: true
      /background: /background is a skill for the model alone (its SKILL.md says `user-invocable: false`): typed in a session it runs nothing, and the model loads it when a task calls for it
    ");
}

#[test]
fn a_skill_that_disables_model_invocation_is_typed_only() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    write(
        &root.join(".claude/skills/deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Deploy\ndisable-model-invocation: true\n---\nDeploy.\n",
    );
    write(
        &root.join(".claude/skills/background/SKILL.md"),
        "---\nname: background\ndescription: Context\nuser-invocable: false\n---\nKnow this.\n",
    );
    let registry = Registry::load(Sources {
        workspace_root: root,
        ..Sources::default()
    });
    registry.set_workspace_trusted(true);
    let offered: Vec<String> = registry
        .offered_skills()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(offered, ["background"]);
    insta::assert_snapshot!(listing(&registry, dir.path()), @r"
    /background skill [project .claude] Context model only
    /deploy skill [project .claude] Deploy typed only
    ");
    // The `/` menu offers what can be typed: not the skill for the model alone.
    let menu: Vec<String> = registry.menu().into_iter().map(|e| e.name).collect();
    assert_eq!(menu, ["deploy"]);
}

/// A `SKILL.md` whose frontmatter is never closed has no name or description to offer: it
/// is an error that `check` reports, and the skill is neither offered nor typed.
#[test]
fn a_skill_whose_frontmatter_never_closes_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    write(
        &root.join(".claude/skills/broken/SKILL.md"),
        "---\nname: broken\ndescription: Never closed.\nDo this.\n",
    );
    write(
        &root.join(".claude/skills/fine/SKILL.md"),
        &skill("fine", "Works", "Do that."),
    );
    let registry = Registry::load(Sources {
        workspace_root: root,
        ..Sources::default()
    });
    registry.set_workspace_trusted(true);
    let offered: Vec<String> = registry
        .offered_skills()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(offered, ["fine"]);
    assert!(registry.get("broken").is_none());
    insta::assert_snapshot!(listing(&registry, dir.path()), @r"
    /fine skill [project .claude] Works
    <tmp>/ws/.claude/skills/broken/SKILL.md:1:1: error: frontmatter `---` is never closed, skill skipped: end the frontmatter with a `---` line before the instructions
    ");
}

#[test]
fn nested_skills_are_found_and_a_skill_s_own_folders_are_not_searched() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    let skills = root.join(".agents/skills");
    write(
        &skills.join("team/frontend/lint/SKILL.md"),
        &skill("lint", "Lint the frontend", "Lint."),
    );
    write(
        &skills.join("writer/SKILL.md"),
        &skill("writer", "Write docs", "Write."),
    );
    // A template inside a skill is one of its files, not a skill of its own.
    write(
        &skills.join("writer/assets/template/SKILL.md"),
        &skill("template", "Not a skill", "No."),
    );
    write(
        &skills.join("SKILL.md"),
        &skill("top", "Not a skill", "No."),
    );
    write(&skills.join("notes.md"), "A stray file.\n");
    let registry = Registry::load(Sources {
        workspace_root: root,
        ..Sources::default()
    });
    insta::assert_snapshot!(listing(&registry, dir.path()), @r"
    /lint skill [project .agents] Lint the frontend untrusted
    /writer skill [project .agents] Write docs untrusted
    <tmp>/ws/.agents/skills/SKILL.md:1:1: warning: a SKILL.md right in a skills folder is not read: a skill is a folder of its own (`skills/<name>/SKILL.md`)
    ");
}

fn link(target: &Path, at: &Path) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, at).unwrap();
}

/// A skill folder shared by linking it from another tool's folder is listed once; a project's
/// links that lead out of it are not followed, the user's own are.
#[test]
fn links_follow_the_command_folders_rules() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let root = base.join("ws");
    let outside = base.join("outside");
    write(
        &outside.join("secret/SKILL.md"),
        &skill("secret", "From outside", "Read ~/.ssh."),
    );
    write(
        &root.join(".agents/skills/shared/SKILL.md"),
        &skill("shared", "Shared by two tools", "Shared."),
    );
    link(
        &root.join(".agents/skills/shared"),
        &root.join(".claude/skills/shared"),
    );
    link(&outside.join("secret"), &root.join(".claude/skills/secret"));
    link(
        &outside.join("secret/SKILL.md"),
        &root.join(".gemini/skills/sneaky/SKILL.md"),
    );
    link(
        &outside.join("secret"),
        &base.join("home/.claude/skills/mine"),
    );
    let registry = Registry::load(Sources {
        workspace_root: root,
        home_dir: Some(base.join("home")),
        ..Sources::default()
    });
    insta::assert_snapshot!(listing(&registry, dir.path()), @r"
    /secret skill [user .claude] From outside
    /shared skill [project .agents] Shared by two tools untrusted
    <tmp>/ws/.claude/skills/secret:1:1: error: link leads outside the workspace (to <tmp>/outside/secret), not followed: a project's skills must live in the project
    <tmp>/ws/.gemini/skills/sneaky/SKILL.md:1:1: error: link leads outside the workspace (to <tmp>/outside/secret/SKILL.md), not followed: a project's skills must live in the project
    <tmp>/home/.claude/skills/mine/SKILL.md:2:1: warning: `name` `secret` differs from its folder's name `mine`: the format asks them to match; shiro calls it /secret
    ");
}

/// A skill's folder is listed for the model, links that leave the workspace left out, and
/// only files inside it can be read.
#[test]
fn a_skill_s_files_are_listed_and_read_inside_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let root = base.join("ws");
    let folder = root.join(".claude/skills/pdf");
    write(
        &folder.join("SKILL.md"),
        &skill("pdf", "Fill PDF forms", "See references/fields.md."),
    );
    write(
        &folder.join("references/fields.md"),
        "# Fields\nname, date\n",
    );
    write(&folder.join("scripts/fill.py"), "print('filled')\n");
    write(&folder.join("assets/form.bin"), "\0\x01binary");
    write(&folder.join(".hidden"), "not listed\n");
    write(
        &root.join("docs/shared.md"),
        "shared inside the workspace\n",
    );
    write(&base.join("secret.txt"), "outside\n");
    link(
        &root.join("docs/shared.md"),
        &folder.join("references/shared.md"),
    );
    link(
        &base.join("secret.txt"),
        &folder.join("references/secret.txt"),
    );
    let registry = Registry::load(Sources {
        workspace_root: root,
        ..Sources::default()
    });
    let pdf = registry.get("pdf").unwrap();
    let files = registry.skill_files(&pdf);
    assert_eq!(
        files.files,
        [
            "SKILL.md",
            "assets/form.bin",
            "references/fields.md",
            "references/shared.md",
            "scripts/fill.py"
        ]
    );
    assert!(files.links_left_out);
    assert_eq!(files.more, 0);
    let read = registry
        .read_skill_file(&pdf, "references/fields.md")
        .unwrap();
    assert_eq!(read.text, "# Fields\nname, date\n");
    assert_eq!(
        registry
            .read_skill_file(&pdf, "references/shared.md")
            .unwrap()
            .text,
        "shared inside the workspace\n"
    );
    let refused = |name: &str| registry.read_skill_file(&pdf, name).unwrap_err();
    assert!(matches!(
        refused("references/secret.txt"),
        SkillFileError::LeadsOut(_)
    ));
    assert!(matches!(
        refused("../../../../secret.txt"),
        SkillFileError::NotInside(_)
    ));
    assert!(matches!(
        refused("/etc/passwd"),
        SkillFileError::NotInside(_)
    ));
    assert!(matches!(refused(""), SkillFileError::NotInside(_)));
    assert!(matches!(refused("nope.md"), SkillFileError::Missing(_)));
    assert!(matches!(refused("scripts"), SkillFileError::NotAFile(_)));
    assert!(matches!(
        refused("assets/form.bin"),
        SkillFileError::Binary(_)
    ));
    insta::assert_snapshot!(refused("../x").to_string(), @"`../x` is not a path inside the skill's folder: give one of the files its listing names, such as `references/guide.md`");
}

#[test]
fn claude_skill_dir_names_the_folder_as_the_model_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let root = base.join("ws");
    write(
        &root.join(".claude/skills/run/SKILL.md"),
        &skill("run", "Run it", "Run ${CLAUDE_SKILL_DIR}/scripts/go.sh."),
    );
    write(
        &base.join("home/.claude/skills/mine/SKILL.md"),
        &skill("mine", "Mine", "Run ${CLAUDE_SKILL_DIR}/go.sh."),
    );
    let registry = Registry::load(Sources {
        workspace_root: root,
        home_dir: Some(base.join("home")),
        ..Sources::default()
    });
    assert_eq!(
        registry.get("run").unwrap().body,
        "Run .claude/skills/run/scripts/go.sh."
    );
    assert_eq!(
        registry.get("mine").unwrap().body,
        format!("Run {}/home/.claude/skills/mine/go.sh.", base.display())
    );
}

fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    false
}

/// A skill added to a `.agents` folder created after the watch started, and an edit of its
/// description, are seen without a restart.
#[test]
fn hot_reload_sees_a_new_skill_and_an_edited_description() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let registry = Registry::load(Sources {
        workspace_root: root.clone(),
        ..Sources::default()
    });
    let _watch = registry.watch().unwrap();
    let file = root.join(".agents/skills/fresh/SKILL.md");
    write(&file, &skill("fresh", "First words", "Body."));
    assert!(
        eventually(|| registry.get("fresh").is_some()),
        "the new skill was not seen"
    );
    write(&file, &skill("fresh", "Second words", "Body."));
    assert!(
        eventually(
            || registry.get("fresh").and_then(|c| c.description).as_deref() == Some("Second words")
        ),
        "the edit was not seen"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any bytes as `SKILL.md`, read as the loader reads them: a skill, or diagnostics that
    /// say why there is none; never a panic.
    #[test]
    fn any_bytes_parse_to_a_skill_or_diagnostics(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        folder in "[a-z-]{1,8}|[ -~]{0,8}",
    ) {
        let text = String::from_utf8_lossy(&bytes);
        let parsed = parse_skill_file(Path::new("SKILL.md"), &folder, &text, Origin::User, Ecosystem::Agents);
        check(&parsed)?;
    }

    /// Text shaped like frontmatter, to reach the keys' code.
    #[test]
    fn frontmatter_shaped_text_parses_to_a_skill_or_diagnostics(
        lines in proptest::collection::vec(
            prop_oneof![
                Just("---".to_owned()), Just("\u{feff}---".to_owned()), Just(String::new()),
                Just("name: x-y".to_owned()), Just("name: Bad Name".to_owned()), Just("name:".to_owned()),
                Just("description: d".to_owned()), Just("description: >".to_owned()),
                Just("metadata:".to_owned()), Just("  a: b".to_owned()), Just("    c: d".to_owned()),
                Just("allowed-tools: Read Bash(git:*)".to_owned()), Just("- Grep".to_owned()),
                Just("user-invocable: false".to_owned()), Just("license: [a".to_owned()),
                Just("compatibility: \"x".to_owned()), Just("## Context".to_owned()),
                "[#>`~ a-é:\t\r\"'\\[\\]{}-]{0,10}",
            ],
            0..30,
        )
    ) {
        let text = lines.join("\r\n");
        let parsed = parse_skill_file(Path::new("SKILL.md"), "x-y", &text, Origin::Project, Ecosystem::Claude);
        check(&parsed)?;
    }
}

/// A parse gives one skill, or none and an error that says why; positions are 1-based.
fn check(parsed: &Parsed) -> Result<(), TestCaseError> {
    prop_assert!(parsed.commands.len() <= 1);
    if parsed.commands.is_empty() {
        prop_assert!(
            parsed
                .diagnostics
                .iter()
                .any(|d| d.severity == shiro_commands::Severity::Error),
            "no skill and no error: {:?}",
            parsed.diagnostics
        );
    }
    for c in &parsed.commands {
        prop_assert!(!c.name.is_empty());
        prop_assert!(c.skill.is_some());
    }
    for d in &parsed.diagnostics {
        prop_assert!(d.line >= 1 && d.column >= 1, "{}", d);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The same through the registry, from a file on disk (invalid UTF-8, a BOM, CRLF as
    /// written): every load gives the skill or a diagnostic at its file.
    #[test]
    fn any_bytes_on_disk_load_to_a_skill_or_diagnostics(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let file = root.join(".claude/skills/x/SKILL.md");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, &bytes).unwrap();
        let registry = Registry::load(Sources { workspace_root: root, ..Sources::default() });
        let skills = registry.commands();
        let about_it = registry.diagnostics().iter().any(|d| d.file == file);
        prop_assert!(skills.len() == 1 || about_it);
        let _ = registry.list();
        let _ = registry.check();
    }
}
