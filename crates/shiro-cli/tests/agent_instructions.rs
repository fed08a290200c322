//! Project instructions end to end: the AGENTS.md files a session reads into its system
//! message, and `/init`, which drafts one in an undoable turn.
#![allow(clippy::unwrap_used)]

use crate::agent_common;

use agent_common::World;
use serde_json::json;

/// Started in a subdirectory of a repository: the root's AGENTS.md and the subdirectory's
/// CLAUDE.md go into the system message, named by path, and the session says which were read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_reads_the_instructions_from_the_root_down_to_where_it_started() {
    let world = World::new();
    std::fs::create_dir(world.ws.path().join(".git")).unwrap();
    world.write("AGENTS.md", "Run the tests with `make check`.\n");
    world.write("web/CLAUDE.md", "Use tabs in this directory.\n");
    world.write("web/other/AGENTS.md", "Not on the way down: never read.\n");
    std::fs::write(
        world.cfg.path().join("AGENTS.md"),
        "Answer in British English.\n",
    )
    .unwrap();
    let model = world.replay(&json!({"responses": [{"text": "Noted."}]}));
    let mut command = world.command(&["-p", "hi", "--model", &model], &[]);
    command.current_dir(world.ws.path().join("web"));
    let run = agent_common::run_command(command, "").await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr
            .contains("note: project instructions from ~/AGENTS.md, AGENTS.md, web/CLAUDE.md"),
        "{}",
        run.stderr
    );
    let lines = world.session_lines();
    let system = lines[0]["message"]["content"].as_str().unwrap();
    assert_eq!(lines[0]["message"]["role"], "system");
    let (_, instructions) = system.split_once("# Project instructions").unwrap();
    // The user's file is named by its path from the (test's) home directory.
    insta::assert_snapshot!(instructions, @r"


    The user wrote these instructions for this project in the files named below, most general first; follow them, and where two disagree, the later one wins.

    ## ~/AGENTS.md

    Answer in British English.

    ## AGENTS.md

    Run the tests with `make check`.

    ## web/CLAUDE.md

    Use tabs in this directory.
    ");
}

/// `/init` is a turn like any other: it asks before writing AGENTS.md, and `/undo` takes
/// it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_drafts_agents_md_in_a_turn_that_undo_takes_back() {
    let world = World::new();
    world.write("README.md", "# tool\n\nBuild with `make`.\n");
    let model = world.replay(&json!({"responses": [
        {"text": "", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "README.md"}}]},
        {"text": "", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "AGENTS.md", "content": "# Agents\n\nBuild with `make`.\n"}}]},
        {"text": "Wrote AGENTS.md."}
    ]}));
    let run = world
        .run(&["--model", &model], "/init\ny\n/undo\n", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("Wrote AGENTS.md."), "{}", run.stdout);
    assert!(run.stdout.contains("+Build with `make`."), "{}", run.stdout);
    assert_eq!(world.read("AGENTS.md"), None, "/undo removed it");
    let lines = world.session_lines();
    let prompt = lines
        .iter()
        .find(|line| line["message"]["role"] == "user")
        .unwrap()["message"]["content"]
        .as_str()
        .unwrap();
    assert!(
        prompt.starts_with("Draft AGENTS.md at the workspace root"),
        "{prompt}"
    );
}
