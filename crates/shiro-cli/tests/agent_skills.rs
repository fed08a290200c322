//! Agent Skills end to end: a corpus of skills in every folder shiro reads, listed by
//! `shiro commands list`, offered to the model by description only, loaded through the
//! `skill` tool, typed as `/name`, held back until `/trust`, and a skill's script run
//! through bash and undone. The model is the mock OpenAI-compatible server on 127.0.0.1.
#![allow(clippy::unwrap_used)]

use crate::agent_common;
use crate::support;

use std::path::Path;

use agent_common::World;
use support::mock_openai::{MockResponse, MockServer, finish_chunk, tool_call_chunk};

/// The corpus: `ws/` is the workspace, `home/` the user's home.
fn corpus() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/skills"
    ))
}

/// Every skill of the corpus: its name, and the marker its body (and only its body) holds.
const SKILLS: [&str; 13] = [
    "architecture-guide",
    "bom-skill",
    "changelog",
    "commit-helper",
    "data-cleaner",
    "pdf-forms",
    "react-hooks",
    "release-notes",
    "review-readonly",
    "sql-style",
    "stamp",
    "user-tidy",
    "windows-crlf",
];

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A world holding the corpus; its workspace trusted when `trusted`.
fn world(trusted: bool) -> World {
    let world = World::new();
    copy_tree(&corpus().join("ws"), world.ws.path());
    copy_tree(&corpus().join("home"), world.cfg.path());
    if trusted {
        std::fs::write(
            world.cfg.path().join("trusted-workspaces"),
            format!("{}\n", world.root().display()),
        )
        .unwrap();
    }
    world
}

fn model_env(url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OPENAI_BASE_URL", url.to_owned()),
        ("SHIRO_MODEL", "mock-model".to_owned()),
    ]
}

async fn run_with_model(world: &World, url: &str, args: &[&str], stdin: &str) -> agent_common::Run {
    let env = model_env(url);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    world.run(args, stdin, &env).await
}

/// The `skill` tool a request offers, if it offers one.
fn skill_tool(request: &support::mock_openai::RecordedRequest) -> Option<serde_json::Value> {
    request.body["tools"]
        .as_array()?
        .iter()
        .find(|t| t["function"]["name"] == "skill")
        .cloned()
}

/// Everything a request sends, as text.
fn request_text(request: &support::mock_openai::RecordedRequest) -> String {
    request.body.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_list_shows_every_skill_marked_with_its_description_and_trust() {
    let untrusted = world(false);
    let run = untrusted.run(&["commands", "list"], "", &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    for name in SKILLS {
        assert!(
            run.stdout.contains(&format!("/{name} ")),
            "{name}: {}",
            run.stdout
        );
    }
    insta::assert_snapshot!("list_untrusted", untrusted.normalize(&run.stdout));

    let trusted = world(true);
    let run = trusted.run(&["commands", "list"], "", &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!run.stdout.contains("untrusted"), "{}", run.stdout);
    insta::assert_snapshot!("list_trusted", trusted.normalize(&run.stdout));

    let run = trusted.run(&["commands", "list", "--json"], "", &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let json: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let skills: Vec<&serde_json::Value> = json["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["kind"] == "skill")
        .collect();
    assert_eq!(skills.len(), SKILLS.len(), "{json:#}");
    for skill in &skills {
        assert!(
            skill["summary"].as_str().is_some_and(|s| !s.is_empty()),
            "{skill}"
        );
    }
    insta::assert_snapshot!("list_json", trusted.normalize(&run.stdout));

    // `check` names the problems of the corpus (none are errors) as file:line:col.
    let run = trusted.run(&["commands", "check"], "", &[]).await;
    insta::assert_snapshot!(
        "check",
        trusted.normalize(&format!(
            "exit {:?}\n{}{}",
            run.code, run.stdout, run.stderr
        ))
    );
}

/// The first request offers each skill by its description in the `skill` tool and carries
/// none of the bodies; the model loads every skill and gets its body and its files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_is_offered_descriptions_only_and_loads_a_skill_through_the_tool() {
    let world = world(true);
    let calls: Vec<serde_json::Value> = SKILLS
        .iter()
        .enumerate()
        .map(|(i, name)| {
            tool_call_chunk(
                i as u32,
                Some(&format!("call_{i}")),
                Some("skill"),
                &format!("{{\"name\": \"{name}\"}}"),
            )
        })
        .chain(std::iter::once(finish_chunk("tool_calls")))
        .collect();
    let (url, server) = MockServer::start(vec![
        MockResponse::stream(calls),
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_file"),
                Some("skill"),
                "{\"name\": \"pdf-forms\", \"file\": \"references/fields.md\"}",
            ),
            tool_call_chunk(
                1,
                Some("call_out"),
                Some("skill"),
                "{\"name\": \"pdf-forms\", \"file\": \"../../../secret\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::text(&["Loaded them all."]),
    ])
    .await;
    let run = run_with_model(&world, &url, &["-p", "what can you do?"], "").await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "Loaded them all.\n");

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let first = &requests[0];
    let tool = skill_tool(first).expect("the skill tool is offered");
    let description = tool["function"]["description"].as_str().unwrap();
    for name in SKILLS {
        assert!(description.contains(&format!("\n- {name}: ")), "{name}");
    }
    // No body reaches the model before it asks for one.
    let text = request_text(first);
    assert!(!text.contains("BODY-"), "{text}");
    insta::assert_snapshot!("skill_tool_description", description);
    insta::assert_snapshot!(
        "skill_tool_parameters",
        serde_json::to_string_pretty(&tool["function"]["parameters"]).unwrap()
    );

    let results = world.tool_results();
    assert_eq!(results.len(), SKILLS.len() + 2);
    for (name, result) in SKILLS.iter().zip(&results) {
        assert!(
            result.starts_with(&format!("skill {name} (folder: ")),
            "{result}"
        );
        assert!(result.contains("BODY-"), "{name}: {result}");
        insta::assert_snapshot!(format!("loaded_{name}"), world.normalize(result));
    }
    insta::assert_snapshot!(
        "read_a_file_and_a_path_that_leaves",
        results[SKILLS.len()..].join("\n---\n")
    );
}

/// Each skill typed as `/name args` runs as a command: its body, with the arguments, is the
/// prompt of its turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_skill_is_typed_as_a_slash_command() {
    let world = world(true);
    let answers: Vec<MockResponse> = SKILLS
        .iter()
        .map(|_| MockResponse::text(&["done"]))
        .collect();
    let (url, server) = MockServer::start(answers).await;
    let typed: String = SKILLS
        .iter()
        .map(|name| format!("/{name} first \"second arg\"\n"))
        .collect();
    let run = run_with_model(&world, &url, &[], &typed).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), SKILLS.len(), "{run:?}");
    let mut out = String::new();
    for (name, request) in SKILLS.iter().zip(&requests) {
        let messages = request.body["messages"].as_array().unwrap();
        let prompt = messages.last().unwrap()["content"].as_str().unwrap();
        assert!(prompt.contains("BODY-"), "{name}: {prompt}");
        out += &format!("== /{name} first \"second arg\"\n{prompt}\n");
    }
    insta::assert_snapshot!("typed", out);
}

/// An untrusted workspace's skills are neither offered nor run until `/trust`; the user's
/// own skills are offered from the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_headless_skill_that_cannot_run_exits_1() {
    let world = world(false);
    let (url, server) = MockServer::start(vec![MockResponse::text(&["never"])]).await;
    let run = run_with_model(&world, &url, &["-p", "/release-notes", "--yes"], "").await;
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stderr
            .contains("/release-notes is a skill of this workspace, which you have not trusted"),
        "{run:?}"
    );
    assert!(server.requests().is_empty(), "the model was asked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_workspace_s_skills_wait_for_trust() {
    let world = world(false);
    let (url, server) = MockServer::start(vec![
        MockResponse::text(&["first"]),
        MockResponse::text(&["second"]),
    ])
    .await;
    let run = run_with_model(
        &world,
        &url,
        &[],
        "hello\n/release-notes\n/trust\nhello again\n",
    )
    .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("/release-notes is a skill of this workspace, which you have not trusted"),
        "{said}"
    );
    insta::assert_snapshot!("untrusted_session", world.normalize(&said));
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{run:?}");
    let before = skill_tool(&requests[0]).expect("the user's skill is offered");
    let before = before["function"]["description"].as_str().unwrap();
    assert!(before.contains("\n- user-tidy: "), "{before}");
    for name in SKILLS.iter().filter(|name| **name != "user-tidy") {
        assert!(
            !before.contains(&format!("\n- {name}: ")),
            "{name}: {before}"
        );
    }
    let after = skill_tool(&requests[1]).unwrap();
    let after = after["function"]["description"].as_str().unwrap();
    for name in SKILLS {
        assert!(after.contains(&format!("\n- {name}: ")), "{name}: {after}");
    }
}

/// Without any skill the model is offered no `skill` tool, and a skill of an untrusted
/// workspace cannot be loaded by calling the tool anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_skill_tool_without_skills() {
    let world = World::new();
    world.write(
        ".claude/skills/only/SKILL.md",
        "---\nname: only\ndescription: The only one.\n---\nBODY-only\n",
    );
    let (url, server) = MockServer::start(vec![
        MockResponse::stream(vec![
            tool_call_chunk(0, Some("call_s"), Some("skill"), "{\"name\": \"only\"}"),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::text(&["ok"]),
    ])
    .await;
    let run = run_with_model(&world, &url, &["-p", "hi"], "").await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    assert!(skill_tool(&requests[0]).is_none());
    let results = world.tool_results();
    assert_eq!(results.len(), 1);
    assert!(!results[0].contains("BODY-only"), "{}", results[0]);
    insta::assert_snapshot!("untrusted_call", results[0]);
}

/// The stamp skill's script runs through bash, as the skill tells the model, and
/// `shiro undo` takes its change back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_s_script_runs_through_bash_and_is_undone() {
    let world = world(true);
    let (url, _server) = MockServer::start(vec![
        MockResponse::stream(vec![
            tool_call_chunk(0, Some("call_s"), Some("skill"), "{\"name\": \"stamp\"}"),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_b"),
                Some("bash"),
                "{\"command\": \"sh .agents/skills/stamp/scripts/stamp.sh ada\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::text(&["Stamped."]),
    ])
    .await;
    let run = run_with_model(&world, &url, &["-p", "/stamp ada"], "").await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(
        world.read("STAMPED.txt").as_deref(),
        Some("stamped by ada\n")
    );
    // The skill's allowed-tools pre-approve its script, as a command's do: no --yes.
    assert!(
        run.stderr
            .contains("runs without asking: the /stamp command's allowed-tools cover it"),
        "{}",
        run.stderr
    );
    let undo = world.run(&["undo"], "", &[]).await;
    if undo.stdout.contains("cannot restore") || undo.stderr.contains("detect-only") {
        // FIXME: where overlays are refused bash is only detected; undo names the path.
        assert!(
            undo.stdout.contains("STAMPED.txt") || undo.stderr.contains("STAMPED.txt"),
            "{undo:?}"
        );
        return;
    }
    assert_eq!(undo.code, Some(0), "{undo:?}");
    assert_eq!(world.read("STAMPED.txt"), None, "{undo:?}");
}

/// `shiro commands check` reports a broken `SKILL.md` as `file:line:col: severity: message`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_reports_a_broken_skill_file() {
    let world = World::new();
    world.write(
        ".claude/skills/broken/SKILL.md",
        "---\nname: broken\ndescription: never closed\nBody.\n",
    );
    world.write(
        ".agents/skills/Bad Folder/SKILL.md",
        "---\ndescription: x\n---\nBody.\n",
    );
    let run = world.run(&["commands", "check"], "", &[]).await;
    assert_eq!(run.code, Some(1), "{run:?}");
    insta::assert_snapshot!(world.normalize(&format!("{}{}", run.stdout, run.stderr)));
}

/// A deny rule keeps skills from the model: those it names are left out of the list the
/// model is offered, and a call naming one anyway is refused with the rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_rule_keeps_a_skill_from_the_model() {
    let world = world(true);
    world.write(
        ".shiro/config.toml",
        "[permissions]\ndeny = [\"Skill(pdf-*)\"]\n",
    );
    let (url, server) = MockServer::start(vec![
        MockResponse::stream(vec![
            tool_call_chunk(
                0,
                Some("call_s"),
                Some("skill"),
                "{\"name\": \"PDF-forms\"}",
            ),
            finish_chunk("tool_calls"),
        ]),
        MockResponse::text(&["ok"]),
    ])
    .await;
    let run = run_with_model(&world, &url, &["-p", "fill the form"], "").await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let requests = server.requests();
    let offered = skill_tool(&requests[0]).unwrap();
    let offered = offered["function"]["description"].as_str().unwrap();
    assert!(!offered.contains("pdf-forms"), "{offered}");
    assert!(offered.contains("\n- changelog: "), "{offered}");
    let results = world.tool_results();
    assert_eq!(results.len(), 1);
    assert!(!results[0].contains("BODY-"), "{}", results[0]);
    assert!(
        results[0].starts_with("refused by the permission rule deny Skill(pdf-*)"),
        "{}",
        results[0]
    );
    assert!(run.stderr.contains("denied: skill"), "{}", run.stderr);
}

/// A skill that says `user-invocable: false` is the model's: typed as `/name` it says so and
/// nothing is sent to the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_only_skill_is_not_typed() {
    let world = world(true);
    world.write(
        ".agents/skills/house-style/SKILL.md",
        "---\nname: house-style\ndescription: How this team names things.\nuser-invocable: false\n---\nBODY-house-style\n",
    );
    let (url, server) = MockServer::start(vec![MockResponse::text(&["ok"])]).await;
    let run = run_with_model(&world, &url, &[], "/house-style\n").await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("/house-style is a skill for the model alone (its SKILL.md says `user-invocable: false`)"),
        "{said}"
    );
    assert!(server.requests().is_empty(), "{said}");
}
