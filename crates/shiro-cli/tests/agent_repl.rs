//! The REPL driven through piped standard input, with the replay provider (no network), and
//! the `shiro demo` run.
#![allow(clippy::unwrap_used)]

use crate::agent_common;

use agent_common::{World, normalize_times, replay_history, tree};
use serde_json::json;

/// Two turns: the first creates a.txt, the second edits it and creates b.txt.
fn two_turn_script() -> serde_json::Value {
    json!({"responses": [
        {"text": "Creating a.txt.", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "a.txt", "content": "one\n"}}]},
        {"text": "Created a.txt."},
        {"text": "Editing.", "tool_calls": [
            {"name": "edit_file", "arguments": {"path": "a.txt", "old_string": "one", "new_string": "two"}},
            {"name": "write_file", "arguments": {"path": "sub/b.txt", "content": "bee\n"}}]},
        {"text": "Edited a.txt and created sub/b.txt."}
    ]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_session_two_turns_then_undo_restores_files_and_rewinds_history() {
    let world = World::new();
    world.write("keep.txt", "untouched\n");
    let model = world.replay(&two_turn_script());
    // Approvals are read from the following lines: y for the first turn's call; in the
    // second, `a` and `s` allow editing a.txt for the session, and `y` the write.
    let stdin = "make a.txt\ny\nchange it\na\ns\ny\n/undo\n";
    let run = world.run(&["--model", &model], stdin, &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    insta::assert_snapshot!("piped_session", world.normalize(&run.stdout));

    assert_eq!(
        world.read("a.txt").as_deref(),
        Some("one\n"),
        "the second turn's edit is undone"
    );
    assert_eq!(
        world.read("sub/b.txt"),
        None,
        "the second turn's new file is gone"
    );
    assert!(
        !world.ws.path().join("sub").exists(),
        "the directory the turn created is gone"
    );
    assert_eq!(world.read("keep.txt").as_deref(), Some("untouched\n"));

    let lines = world.session_lines();
    assert!(
        lines.iter().any(|l| l["type"] == "rewind"),
        "a rewind line was saved"
    );
    let history = replay_history(&lines);
    // system, user, assistant(call), tool, assistant(answer): the second turn is gone.
    assert_eq!(history.len(), 5, "{history:#?}");
    assert_eq!(history.last().unwrap()["content"], "Created a.txt.");
    assert!(!history.iter().any(|m| m["content"] == "change it"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_after_a_restart_then_undo_restores_files_and_rewinds() {
    let world = World::new();
    let model = world.replay(&two_turn_script());
    let first = world
        .run(&["--model", &model, "--yes"], "make a.txt\n", &[])
        .await;
    assert_eq!(first.code, Some(0), "{first:?}");
    assert_eq!(world.read("a.txt").as_deref(), Some("one\n"));
    assert_eq!(replay_history(&world.session_lines()).len(), 5);

    // A new process: the replay script has no responses left for it, and needs none.
    let second = world
        .run(&["--model", &model, "--continue"], "/undo\n", &[])
        .await;
    assert_eq!(second.code, Some(0), "{second:?}");
    let out = world.normalize(&second.stdout);
    assert!(out.contains("session [SESSION] (resumed)"), "{out}");
    assert!(
        out.contains("undid turn #1 \"make a.txt\" of session [SESSION]"),
        "{out}"
    );
    assert!(
        out.contains("rewound the conversation by 4 messages"),
        "{out}"
    );
    assert_eq!(world.read("a.txt"), None, "the created file is gone");
    let history = replay_history(&world.session_lines());
    assert_eq!(
        history.len(),
        1,
        "only the system prompt is left: {history:#?}"
    );
    assert_eq!(history[0]["role"], "system");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_commands_get_suggestions_and_commands_lists_user_commands() {
    let world = World::new();
    world.write(
        ".shiro/commands.md",
        "# Commands\n\n## review\n> Review a file for bugs\nReview $ARGUMENTS carefully.\n",
    );
    let run = world
        .run(&[], "/frob\n/undp\n/commands\n/help\n/exit\n", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    insta::assert_snapshot!("commands_and_suggestions", world.normalize(&run.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_the_prompt_says_how_to_set_one() {
    let world = World::new();
    let run = world.run(&[], "hello\n", &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("turn stopped: no model is set: pass --model NAME"),
        "{}",
        run.stdout
    );
    let history = replay_history(&world.session_lines());
    assert_eq!(history.len(), 1, "the prompt was not kept: {history:?}");
    let missing = world.run(&["--resume", "nope"], "", &[]).await;
    assert_eq!(missing.code, Some(1), "{missing:?}");
    assert!(
        missing.stderr.contains("no session nope in"),
        "{}",
        missing.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_changes_files_shows_diffs_and_undo_restores_them_byte_for_byte() {
    let world = World::new();
    let run = world.run(&["demo"], "", &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let mut out = String::new();
    for line in run.stdout.lines() {
        let line = match line.find("/shiro-demo-") {
            // The temporary directory's path differs each run.
            Some(_) => line
                .split(' ')
                .map(|w| {
                    if w.contains("/shiro-demo-") {
                        "[TMP]"
                    } else {
                        w
                    }
                })
                .collect::<Vec<_>>()
                .join(" "),
            None => line.to_owned(),
        };
        out.push_str(&agent_common::normalize_ids(&line));
        out.push('\n');
    }
    insta::assert_snapshot!("demo", out);
    assert!(out.contains("byte-identical"), "{out}");
    // The demo works in its own temporary directory, never in the current one.
    assert!(tree(world.ws.path()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_of_a_headless_turn_conflicts_force_and_redo() {
    let world = World::new();
    world.write("a.txt", "before\n");
    let args = r#"{"path": "a.txt", "old_string": "before", "new_string": "after"}"#;
    let tool = world
        .run(&["tool", "edit_file", "--args", args], "", &[])
        .await;
    assert_eq!(tool.code, Some(0), "{tool:?}");
    // The user edits the file after the turn: undo must refuse, then --force overwrites.
    world.write("a.txt", "after, and mine\n");
    let stdin = "/undo --dry-run\n/undo\n/undo --force\n/redo\n/undo --bogus\n";
    let run = world.run(&[], stdin, &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    insta::assert_snapshot!("undo_conflict_force_redo", world.normalize(&run.stdout));
    // Redo puts back what the forced undo replaced: the user's own edit.
    assert_eq!(world.read("a.txt").as_deref(), Some("after, and mine\n"));
}

/// `/undo` after a turn whose bash call ran `sed -i` and `rm` restores both files, and the
/// conversation is rewound. Where overlays are refused the turn says bash fell back to
/// detection, and the test stops there (printing why).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::print_stderr)]
async fn undo_restores_what_a_bash_call_changed() {
    let world = World::new();
    world.write("src/a.rs", "fn old() {}\n");
    world.write("build.log", "log\n");
    let script = json!({"responses": [
        {"text": "Renaming and cleaning.", "tool_calls": [
            {"name": "bash", "arguments": {"command": "sed -i s/old/new/ src/a.rs && rm build.log"}}]},
        {"text": "Done."}
    ]});
    let model = world.replay(&script);
    let run = world
        .run(&["--model", &model], "rename it\ny\n/log\n/undo\n", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    if let Some(at) = run.stdout.find("fell back to detect-only") {
        eprintln!("skipped: overlays are refused here ({})", &run.stdout[at..]);
        return;
    }
    assert!(run.stdout.contains("M src/a.rs"), "{}", run.stdout);
    assert!(run.stdout.contains("D build.log"), "{}", run.stdout);
    assert_eq!(world.read("src/a.rs").as_deref(), Some("fn old() {}\n"));
    assert_eq!(world.read("build.log").as_deref(), Some("log\n"));
    let history = replay_history(&world.session_lines());
    assert!(!history.iter().any(|m| m["content"] == "rename it"));
}

/// Two saved sessions, then a third run: `/resume` lists them (the new, empty one is left
/// out), `/resume 2` switches to the first, whose turn `/undo` then rewinds as its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_lists_sessions_and_switches_to_one_whose_turn_undo_rewinds() {
    let world = World::new();
    let model = world.replay(&two_turn_script());
    let first = world
        .run(&["--model", &model, "--yes"], "make a.txt\n", &[])
        .await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let first_id = world.sessions()[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        first.stdout.ends_with(&format!(
            "resume this session with: shiro --resume {first_id}\n"
        )),
        "{}",
        first.stdout
    );
    let answer = world.replay(&json!({"responses": [{"text": "Forty-two."}]}));
    let second = world
        .run(
            &["--model", &answer],
            "what is the answer?\nand why?\n",
            &[],
        )
        .await;
    assert_eq!(second.code, Some(0), "{second:?}");

    // The list is by modification time; on a filesystem with coarse times both could fall
    // in the same second.
    let first_file = world
        .state()
        .sessions_dir()
        .join(format!("{first_id}.jsonl"));
    std::fs::File::options()
        .append(true)
        .open(&first_file)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(10))
        .unwrap();

    let stdin = "/resume\n/resume 7\n/resume nope\n/resume 2\n/undo\n";
    let run = world.run(&[], stdin, &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    insta::assert_snapshot!(
        "resume_sessions",
        normalize_times(&world.normalize(&run.stdout))
    );
    assert_eq!(
        world.read("a.txt"),
        None,
        "the first session's turn is undone"
    );
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(first_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        replay_history(&lines).len(),
        1,
        "the first session is rewound to its system prompt"
    );
}

/// `@path` typed in the REPL is attached, kept in the session, and `/undo` of the turn
/// rewinds the message with its attachment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_file_is_in_the_history_and_undo_rewinds_it() {
    let world = World::new();
    world.write("spec.txt", "a.txt must say one\n");
    let model = world.replay(&two_turn_script());
    let run = world
        .run(&["--model", &model, "--yes"], "follow @spec.txt\n", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("> follow @spec.txt\n(attached spec.txt: 1 line)\n"),
        "{}",
        run.stdout
    );
    let history = replay_history(&world.session_lines());
    assert_eq!(
        history[1]["content"],
        "follow @spec.txt\n\n<attachment path=\"spec.txt\">\na.txt must say one\n</attachment>"
    );
    let undo = world.run(&["--continue"], "/undo\n", &[]).await;
    assert!(
        undo.stdout
            .contains("rewound the conversation by 4 messages"),
        "{}",
        undo.stdout
    );
    assert_eq!(replay_history(&world.session_lines()).len(), 1);
    assert_eq!(world.read("a.txt"), None);
}

/// `/compact` summarises the first turn (the last is kept); after a restart with
/// `--resume`, `/undo` twice restores both turns' files, and the first undo, which goes
/// back past the compaction, gives the model the replaced messages again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_then_resume_and_undo_twice_across_the_compaction() {
    let world = World::new();
    let model = world.replay(&json!({"responses": [
        {"text": "Creating a.txt.", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "a.txt", "content": "one\n"}}]},
        {"text": "Created a.txt."},
        {"text": "Creating b.txt.", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "b.txt", "content": "two\n"}}]},
        {"text": "Created b.txt."},
        {"text": "The user asked for a.txt, which now says one."}
    ]}));
    let first = world
        .run(
            &["--model", &model, "--yes"],
            "make a.txt\nmake b.txt\n/compact keep the file names\n/status\n",
            &[],
        )
        .await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let lines = world.session_lines();
    let compact: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["type"] == "compact").collect();
    assert_eq!(compact.len(), 1, "{lines:#?}");
    assert_eq!(
        (&compact[0]["at"], &compact[0]["keep_from"]),
        (&json!(9), &json!(5)),
        "made after 9 messages, keeping the second turn's from its prompt on"
    );
    assert_eq!(
        compact[0]["summary"],
        "The user asked for a.txt, which now says one."
    );
    assert_eq!(replay_history(&lines).len(), 9, "the transcript keeps all");

    let id = world.sessions()[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let second = world
        .run(&["--resume", &id], "/status\n/undo\n/undo\n/status\n", &[])
        .await;
    assert_eq!(second.code, Some(0), "{second:?}");
    insta::assert_snapshot!(
        "compact_then_undo",
        format!(
            "{}\n---- resumed ----\n{}",
            world.normalize(&first.stdout),
            world.normalize(&second.stdout)
        )
    );
    assert_eq!(world.read("a.txt"), None);
    assert_eq!(world.read("b.txt"), None);
    assert_eq!(replay_history(&world.session_lines()).len(), 1);
}

/// A replay script of turns that each write one file and answer.
fn writes(files: &[(&str, &str)]) -> serde_json::Value {
    let responses: Vec<serde_json::Value> = files
        .iter()
        .flat_map(|(path, content)| {
            [
                json!({"text": "", "tool_calls": [
                    {"name": "write_file", "arguments": {"path": path, "content": content}}]}),
                json!({"text": format!("Wrote {path}.")}),
            ]
        })
        .collect();
    json!({ "responses": responses })
}

/// The rewind list's `just now` / `N min ago` column as `[AGO]`: how long a loaded machine
/// takes between the turns and the list is not what the test is about.
fn normalize_ago(text: &str) -> String {
    text.lines()
        .map(|line| {
            // `   3  just now      third  (1 M)`: the number, then a column of 12.
            let numbered = line.len() > 18
                && line.is_char_boundary(18)
                && line[..4].trim().chars().all(|c| c.is_ascii_digit())
                && !line[..4].trim().is_empty()
                && &line[4..6] == "  ";
            if numbered {
                format!("{}{:<12}{}", &line[..6], "[AGO]", &line[18..])
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The session files' ids, and the lines of each.
fn sessions(world: &World) -> Vec<(String, Vec<serde_json::Value>)> {
    world
        .sessions()
        .iter()
        .map(|path| {
            let lines = std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            (
                path.file_stem().unwrap().to_string_lossy().into_owned(),
                lines,
            )
        })
        .collect()
}

/// The prompts a session file replays into.
fn prompts(lines: &[serde_json::Value]) -> Vec<String> {
    replay_history(lines)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

/// `/rewind` lists the turns; `/rewind 2` takes back turns 2 and 3 (files and messages) as
/// one restore and one entry of the log; `/redo` brings all of it back; the session file
/// replays into what the screen showed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_lists_the_turns_takes_back_two_and_redo_brings_them_back() {
    let world = World::new();
    let model = world.replay(&writes(&[
        ("a.txt", "1\n"),
        ("b.txt", "2\n"),
        ("a.txt", "3\n"),
    ]));
    let stdin =
        "first\nsecond\nthird\n/rewind\n/rewind 2\n/log\n/redo\n/rewind 9\n/rewind 1 code\n";
    let run = world.run(&["--model", &model, "--yes"], stdin, &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    insta::assert_snapshot!(
        "rewind_and_redo",
        normalize_ago(&normalize_times(&world.normalize(&run.stdout)))
    );
    // `/rewind 1 code` (files only) took every turn's files back; the conversation stays.
    assert_eq!(tree(&world.root()), Default::default());
    let (_, lines) = &sessions(&world)[0];
    assert_eq!(prompts(lines), ["first", "second", "third"]);
}

/// Fork before turn 2 of 4, work in the fork, then `--resume` the original: it says its
/// files were rewound, and `/redo` brings them back beside the fork's work. Both transcripts
/// replay; the fork is listed under its parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_at_turn_two_of_four_then_the_original_brings_its_files_back() {
    let world = World::new();
    let model = world.replay(&writes(&[
        ("a.txt", "1\n"),
        ("b.txt", "2\n"),
        ("c.txt", "3\n"),
        ("a.txt", "4\n"),
        ("f.txt", "fork\n"),
    ]));
    let stdin = "first\nsecond\nthird\nfourth\n/fork 2\nin the fork\n/sessions\n";
    let run = world.run(&["--model", &model, "--yes"], stdin, &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let fork_out = normalize_times(&world.normalize(&run.stdout));
    assert_eq!(world.read("a.txt").as_deref(), Some("1\n"));
    assert_eq!(world.read("b.txt"), None);
    assert_eq!(world.read("f.txt").as_deref(), Some("fork\n"));

    let all = sessions(&world);
    let (original, original_lines) = all
        .iter()
        .find(|(_, lines)| lines[0]["type"] != "fork")
        .unwrap();
    let (_, fork_lines) = all
        .iter()
        .find(|(_, lines)| lines[0]["type"] == "fork")
        .unwrap();
    assert_eq!(fork_lines[0]["parent"], original.as_str());
    assert_eq!(fork_lines[0]["turn"], 2);
    assert_eq!(
        prompts(original_lines),
        ["first", "second", "third", "fourth"]
    );
    assert_eq!(prompts(fork_lines), ["first", "in the fork"]);

    let run = world.run(&["--resume", original], "/redo\n", &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    insta::assert_snapshot!(
        "fork_and_back",
        format!(
            "{fork_out}\n--- the original, resumed:\n{}",
            world.normalize(&run.stdout)
        )
    );
    let files: Vec<(String, String)> = tree(&world.root())
        .into_iter()
        .map(|(path, bytes)| (path, String::from_utf8(bytes).unwrap()))
        .collect();
    assert_eq!(
        files,
        [
            ("a.txt".to_owned(), "4\n".to_owned()),
            ("b.txt".to_owned(), "2\n".to_owned()),
            ("c.txt".to_owned(), "3\n".to_owned()),
            ("f.txt".to_owned(), "fork\n".to_owned()),
        ]
    );
    let after = sessions(&world);
    let (_, original_lines) = after.iter().find(|(id, _)| id == original).unwrap();
    assert_eq!(
        prompts(original_lines),
        ["first", "second", "third", "fourth"]
    );
    let (_, fork_lines) = after.iter().find(|(id, _)| id != original).unwrap();
    assert_eq!(prompts(fork_lines), ["first", "in the fork"]);

    // `--continue --fork-session` copies the newest session whole and changes no file.
    let run = world
        .run(&["--continue", "--fork-session"], "/rewind\n", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        run.stdout.contains("with its whole conversation"),
        "{run:?}"
    );
    assert_eq!(sessions(&world).len(), 3);
    let usage = world.run(&["--fork-session"], "", &[]).await;
    assert_eq!(usage.code, Some(2), "{usage:?}");
}

/// `shiro undo --to ID` rewinds a session's turns as one restore, and refuses (exit 3,
/// naming the other session and the path) when another session's later turn touched the
/// same file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_to_rewinds_a_session_and_refuses_over_another_sessions_turn() {
    let world = World::new();
    let first = world.replay(&writes(&[("a.txt", "1\n"), ("b.txt", "2\n")]));
    let run = world
        .run(&["--model", &first, "--yes"], "one\ntwo\n", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let other = world.replay(&writes(&[("b.txt", "other\n")]));
    let run = world
        .run(&["--model", &other, "--yes"], "mine\n", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");

    let refused = world.run(&["undo", "--to", "#1"], "", &[]).await;
    assert_eq!(refused.code, Some(3), "{refused:?}");
    let forced = world.run(&["undo", "--to", "1", "--force"], "", &[]).await;
    assert_eq!(forced.code, Some(3), "{forced:?}");
    let bad = world.run(&["undo", "--to", "x"], "", &[]).await;
    assert_eq!(bad.code, Some(2), "{bad:?}");
    let missing = world.run(&["undo", "--to", "42"], "", &[]).await;
    assert_eq!(missing.code, Some(1), "{missing:?}");
    insta::assert_snapshot!(
        "undo_to_refused",
        world.normalize(&format!(
            "{}\n--- forced:\n{}\n--- not a number:\n{}\n--- no such turn:\n{}",
            refused.stderr, forced.stderr, bad.stderr, missing.stderr
        ))
    );
    assert_eq!(world.read("b.txt").as_deref(), Some("other\n"));

    // Once the other session's turn is undone, the first session rewinds in one restore.
    let undone = world.run(&["undo"], "", &[]).await;
    assert_eq!(undone.code, Some(0), "{undone:?}");
    let rewound = world.run(&["undo", "--to", "1"], "", &[]).await;
    assert_eq!(rewound.code, Some(0), "{rewound:?}");
    assert!(
        rewound.stdout.contains("undid turn #1 \"one\"") && rewound.stdout.contains("#2"),
        "{rewound:?}"
    );
    assert_eq!(tree(&world.root()), Default::default());
    let redone = world.run(&["redo"], "", &[]).await;
    assert_eq!(redone.code, Some(0), "{redone:?}");
    assert_eq!(world.read("a.txt").as_deref(), Some("1\n"));
    assert_eq!(world.read("b.txt").as_deref(), Some("2\n"));
}

/// `/undo` of a turn whose messages are not where it began leaves the conversation alone and
/// says why: after its files were redone alone (a new prompt had replaced its messages), the
/// messages sent since stay; after a rewind of the conversation alone, its files go back
/// and `/redo` brings back the files, then the messages. The session file replays into the
/// same conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undo_of_a_turn_whose_messages_went_already_keeps_the_conversation() {
    let world = World::new();
    let mut script = writes(&[("a.txt", "1\n"), ("b.txt", "2\n"), ("c.txt", "3\n")]);
    let responses = script["responses"].as_array_mut().unwrap();
    responses.insert(2, json!({"text": "Just chatting."}));
    let model = world.replay(&script);
    let stdin = "first\n/undo\nhello?\n/redo\n/undo\n/rewind\n\
                 second\nthird\n/rewind 3 conversation\n/undo\n/redo\n/redo\n/rewind\n";
    let run = world.run(&["--model", &model, "--yes"], stdin, &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    insta::assert_snapshot!(
        "undo_keeps_to_its_turn",
        normalize_ago(&normalize_times(&world.normalize(&run.stdout)))
    );
    assert_eq!(world.read("a.txt"), None);
    assert_eq!(world.read("b.txt").as_deref(), Some("2\n"));
    assert_eq!(world.read("c.txt").as_deref(), Some("3\n"));
    let (_, lines) = &sessions(&world)[0];
    assert_eq!(prompts(lines), ["hello?", "second", "third"]);
}

/// A `/rewind` or `/fork` refused over an edit of yours names what works: `--dry-run`
/// shows the diff and changes nothing, `--force` goes over the edit. The original session,
/// resumed after a forced fork, brings the files back as the fork found them, the edit
/// included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_rewind_or_fork_takes_dry_run_and_force() {
    let world = World::new();
    let model = world.replay(&writes(&[("a.txt", "1\n"), ("b.txt", "2\n")]));
    let run = world
        .run(&["--model", &model, "--yes"], "first\nsecond\n", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let (original, _) = sessions(&world).remove(0);
    world.write("b.txt", "mine\n");

    let stdin = "/rewind 2\n/rewind 2 --dry-run\n/rewind 2 conversation --force\n\
                 /fork 2\n/fork 2 --force\n";
    let run = world.run(&["--continue"], stdin, &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let forked = normalize_times(&world.normalize(&run.stdout));
    assert_eq!(world.read("a.txt").as_deref(), Some("1\n"));
    assert_eq!(world.read("b.txt"), None);
    assert_eq!(sessions(&world).len(), 2);

    let run = world.run(&["--resume", &original], "/redo\n", &[]).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    insta::assert_snapshot!(
        "rewind_and_fork_forced",
        format!(
            "{forked}\n--- the original, resumed:\n{}",
            world.normalize(&run.stdout)
        )
    );
    assert_eq!(world.read("b.txt").as_deref(), Some("mine\n"));
}

/// `/cost` with the replay model says what is true: the script was played, and it used no
/// tokens, rather than blame a server that was never asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_with_the_replay_model_says_it_uses_no_tokens() {
    let world = World::new();
    let model = world.replay(&json!({"responses": [{"text": "hi"}]}));
    let run = world
        .run(&["--model", &model], "/cost\nhello\n/cost\n", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    let said: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| !line.starts_with("shiro: session") && !line.starts_with("resume "))
        .collect();
    insta::assert_snapshot!(said.join("\n"), @r"
    > /cost
    no tokens used yet: no request was sent to the model in this session
    > hello
    hi
    > /cost
    no tokens used: the replay model played 1 response from its script, calling no model, so there is nothing to count or pay
    ");
}
