//! Saved sessions across restarts, driven through piped standard input with the replay
//! provider: a session resumed past a damaged last line stays readable, and `--continue`
//! takes the newest session `/sessions` lists.
#![allow(clippy::unwrap_used)]

use std::io::Write as _;

use crate::agent_common;

use agent_common::{World, finish, normalize_times, replay_history};
use serde_json::json;

/// The id of a session file.
fn id_of(path: &std::path::Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

/// The prompts of the session file at `path`; every line must parse.
fn prompts_of(path: &std::path::Path) -> Vec<String> {
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}")))
        .collect();
    replay_history(&lines)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

/// A crash mid-write leaves a torn last line. Resumed, the session skips it with a notice
/// and goes on; the line is cut off before the first append, so the file stays whole and
/// the next resume reads both turns, without a notice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resumed_past_a_torn_last_line_stays_readable() {
    let world = World::new();
    let model = world.replay(&json!({"responses": [{"text": "a1"}]}));
    let first = world.run(&["--model", &model], "first\n", &[]).await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let path = world.sessions()[0].clone();
    let id = id_of(&path);
    // What a crash mid-write leaves.
    let mut file = std::fs::File::options().append(true).open(&path).unwrap();
    file.write_all(br#"{"type":"message","mess"#).unwrap();
    drop(file);

    let model = world.replay(&json!({"responses": [{"text": "a2"}]}));
    let second = world
        .run(&["--resume", &id, "--model", &model], "second\n", &[])
        .await;
    assert_eq!(second.code, Some(0), "{second:?}");
    let third = world.run(&["--resume", &id], "/sessions\n", &[]).await;
    assert_eq!(third.code, Some(0), "{third:?}");
    assert_eq!(prompts_of(&path), ["first", "second"]);
    insta::assert_snapshot!(
        "resumed_past_a_torn_line",
        normalize_times(&world.normalize(&format!(
            "{}{}--- resumed again:\n{}{}",
            second.stderr, second.stdout, third.stderr, third.stdout
        )))
    );
}

/// Every start of shiro makes a session file; one with no prompt (shiro started to run
/// `/log`, say) is not what `--continue` goes on from: the follow-up goes to the newest
/// conversation. `--resume` of the empty one by its id says it is resumed, not new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_passes_over_a_newer_session_without_a_prompt() {
    let world = World::new();
    let model = world.replay(&json!({"responses": [{"text": "a"}]}));
    let first = world
        .run(&["--model", &model], "important conversation\n", &[])
        .await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let important = world.sessions()[0].clone();
    let empty = world.run(&[], "/log\n", &[]).await;
    assert_eq!(empty.code, Some(0), "{empty:?}");
    let empty = (world.sessions().into_iter())
        .find(|path| *path != important)
        .unwrap();
    assert_eq!(prompts_of(&empty), Vec::<String>::new());

    let model = world.replay(&json!({"responses": [{"text": "Followed up."}]}));
    let run = world
        .run(
            &["--continue", "-p", "follow up", "--model", &model],
            "",
            &[],
        )
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "Followed up.\n");
    assert_eq!(
        prompts_of(&important),
        ["important conversation", "follow up"]
    );
    assert_eq!(prompts_of(&empty), Vec::<String>::new());
    assert_eq!(world.sessions().len(), 2, "no session was made");

    let reopened = world.run(&["--resume", &id_of(&empty)], "", &[]).await;
    assert_eq!(reopened.code, Some(0), "{reopened:?}");
    assert!(
        (world.normalize(&reopened.stdout)).starts_with("shiro: session [SESSION] (resumed)"),
        "{reopened:?}"
    );
}

/// A session whose every turn was undone keeps them for `/redo`: `/sessions` lists it (0
/// turns, its first prompt), `--continue` takes it over a newer session without a prompt
/// and says what `/redo` brings back, and `/redo` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_takes_a_session_whose_every_turn_was_undone() {
    let world = World::new();
    let model = world.replay(&json!({"responses": [
        {"text": "", "tool_calls": [
            {"name": "write_file", "arguments": {"path": "a.txt", "content": "one\n"}}]},
        {"text": "Wrote a.txt."}
    ]}));
    let first = world
        .run(&["--model", &model, "--yes"], "make a.txt\n/undo\n", &[])
        .await;
    assert_eq!(first.code, Some(0), "{first:?}");
    assert_eq!(world.read("a.txt"), None);
    let undone = world.sessions()[0].clone();
    // The hint is shown: the session is one to go back to.
    assert!(
        first.stdout.ends_with(&format!(
            "resume this session with: shiro --resume {}\n",
            id_of(&undone)
        )),
        "{first:?}"
    );
    let empty = world.run(&[], "", &[]).await;
    assert_eq!(empty.code, Some(0), "{empty:?}");

    let run = world
        .run(&["--continue"], "/sessions\n/redo\n/sessions\n", &[])
        .await;
    assert_eq!(run.code, Some(0), "{run:?}");
    insta::assert_snapshot!(
        "continue_all_undone",
        normalize_times(&world.normalize(&run.stdout))
    );
    assert_eq!(world.read("a.txt").as_deref(), Some("one\n"));
    assert_eq!(prompts_of(&undone), ["make a.txt"]);
}

/// A `shiro` running with a session open, waiting at its prompt: its standard input is
/// kept open, and its output is read as it comes.
struct Holder {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Holder {
    /// Starts `shiro ARGS` and returns once it has said which session it has open (it
    /// opens it before it says so).
    async fn start(world: &World, args: &[&str]) -> Holder {
        use tokio::io::AsyncBufReadExt as _;
        let mut child = world.command(args, &[]).spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        while let Some(line) = stdout.next_line().await.unwrap() {
            if line.starts_with("shiro: session ") {
                return Holder {
                    child,
                    stdin,
                    stdout,
                };
            }
        }
        panic!(
            "shiro ended before it opened a session: {:?}",
            finish(child).await
        );
    }

    /// Ends its input, as Ctrl-D does, and waits for it to leave.
    async fn end(self) {
        let Holder {
            mut child,
            stdin,
            mut stdout,
        } = self;
        drop(stdin);
        while stdout.next_line().await.unwrap().is_some() {}
        assert!(child.wait().await.unwrap().success());
    }

    /// Kills it (SIGKILL), as a crash would end it, and waits for it to be gone.
    async fn crash(mut self) {
        self.child.kill().await.unwrap();
    }
}

/// Two processes on one session: while one has it open, another is refused it, by
/// `--resume ID`, by `--continue` (which takes no older session instead) and by `/resume`
/// (which keeps the session it is in), and the file is left as it was. Listing it and
/// forking a copy of it still work. When the first ends, or crashes, the session opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_open_in_one_process_is_refused_to_another_until_it_ends() {
    let world = World::new();
    let model = world.replay(&json!({"responses": [{"text": "a1"}]}));
    let older = world.run(&["--model", &model], "older\n", &[]).await;
    assert_eq!(older.code, Some(0), "{older:?}");
    let older = world.sessions()[0].clone();
    let model = world.replay(&json!({"responses": [{"text": "a2"}]}));
    let first = world.run(&["--model", &model], "first\n", &[]).await;
    assert_eq!(first.code, Some(0), "{first:?}");
    let path = (world.sessions().into_iter())
        .find(|path| *path != older)
        .unwrap();
    let id = id_of(&path);
    // The newest by modification time, whatever the filesystem's resolution.
    std::fs::File::options()
        .append(true)
        .open(&older)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(10))
        .unwrap();

    let holder = Holder::start(&world, &["--resume", &id]).await;
    let before = std::fs::read(&path).unwrap();
    let by_id = world.run(&["--resume", &id], "second\n", &[]).await;
    assert_eq!(by_id.code, Some(1), "{by_id:?}");
    let newest = world.run(&["--continue"], "second\n", &[]).await;
    assert_eq!(newest.code, Some(1), "{newest:?}");
    let model = world.replay(&json!({"responses": [{"text": "Still here."}]}));
    let switch = world
        .run(&["--model", &model], "/sessions\n/resume 1\nhello\n", &[])
        .await;
    assert_eq!(switch.code, Some(0), "{switch:?}");
    insta::assert_snapshot!(
        "refused_while_open",
        normalize_times(&world.normalize(&format!(
            "--- shiro --resume ID:\n{}{}--- shiro --continue:\n{}{}--- /resume:\n{}{}",
            by_id.stderr, by_id.stdout, newest.stderr, newest.stdout, switch.stderr, switch.stdout
        )))
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the session is untouched"
    );
    assert_eq!(prompts_of(&older), ["older"], "no older one was taken");
    let own: Vec<_> = (world.sessions().into_iter())
        .filter(|file| *file != older && *file != path)
        .collect();
    assert_eq!(own.len(), 1, "the refused runs made no session: {own:?}");
    assert_eq!(
        prompts_of(&own[0]),
        ["hello"],
        "/resume's own session went on"
    );

    let fork = world
        .run(&["--resume", &id, "--fork-session"], "", &[])
        .await;
    assert_eq!(fork.code, Some(0), "{fork:?}");
    assert!(fork.stdout.contains("forked session "), "{fork:?}");
    assert_eq!(std::fs::read(&path).unwrap(), before);

    holder.end().await;
    let model = world.replay(&json!({"responses": [{"text": "a3"}]}));
    let second = world
        .run(&["--resume", &id, "--model", &model], "second\n", &[])
        .await;
    assert_eq!(second.code, Some(0), "{second:?}");
    assert_eq!(prompts_of(&path), ["first", "second"]);

    let holder = Holder::start(&world, &["--resume", &id]).await;
    holder.crash().await;
    let model = world.replay(&json!({"responses": [{"text": "a4"}]}));
    let third = world
        .run(&["--resume", &id, "--model", &model], "third\n", &[])
        .await;
    assert_eq!(third.code, Some(0), "{third:?}");
    assert_eq!(prompts_of(&path), ["first", "second", "third"]);
}
