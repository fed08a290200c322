//! Snapshots of each state of the UI: the transcript lines it prints above the viewport,
//! then the viewport as ratatui's `TestBackend` holds it.

use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::text::Line;
use shiro_agent::protocol::{
    BackgroundAction, BackgroundChoice, BackgroundItem, Op, RewindChoice, RewindScope,
};
use shiro_agent::protocol::{Event, Status};
use shiro_commands::{Registry, Sources};
use shiro_providers::{Message, ToolCall};
use shiro_tools::{Change, WorkspacePath};

use super::app::{App, Phase, PickItem, ReadKind, StatusInfo, ToFront, TurnItem};
use super::view;

/// A UI at `width` columns, with the built-in commands and one user command.
fn app(width: u16) -> App {
    let root = std::env::temp_dir().join("shiro-tui-snapshots-none");
    let registry = Registry::load(Sources {
        workspace_root: root.clone(),
        builtins: shiro_agent::headless::BUILTINS
            .iter()
            .map(|(name, summary)| ((*name).to_owned(), (*summary).to_owned()))
            .collect(),
        ..Sources::default()
    });
    let mut app = App::new(width, false, Some(registry), root);
    app.status = StatusInfo {
        model: "gpt-4o".into(),
        workspace: "~/src/shop".into(),
        tokens: Some(12_345),
        context_window: Some(128_000),
        context_used: Some(9_876),
        undo_depth: Some(3),
        capture_note: None,
        background: None,
    };
    app
}

/// The lines' text, each without trailing blanks.
pub(crate) fn text(lines: &[Line<'_>]) -> String {
    lines
        .iter()
        .map(|line| {
            line.spans
                .iter()
                .map(|span| span.content.as_ref())
                .collect::<String>()
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The transcript printed since the last call, then the viewport at `now`.
fn shot(app: &mut App, now: Instant) -> String {
    let printed = app.take_pending();
    let (lines, cursor) = view::lines(app, now);
    let mut terminal =
        Terminal::new(TestBackend::new(app.width, view::height(&lines))).expect("test backend");
    terminal
        .draw(|frame| view::draw(frame, &lines, cursor))
        .expect("draw");
    format!(
        "printed above the viewport:\n{}\nviewport:\n{}",
        text(&printed),
        terminal.backend()
    )
}

/// The agent asks for the next prompt; the receiver gets what is sent.
pub(crate) fn prompt(app: &mut App, now: Instant) -> Receiver<Op> {
    let (reply, replies) = channel();
    app.on_agent(
        ToFront::Read {
            kind: ReadKind::Prompt,
            reply,
        },
        now,
    );
    replies
}

fn type_text(app: &mut App, text: &str, now: Instant) {
    for c in text.chars() {
        app.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE), now);
    }
}

fn send(app: &mut App, text: &str, now: Instant) {
    type_text(app, text, now);
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), now);
}

#[test]
fn idle() {
    let now = Instant::now();
    let mut app = app(60);
    let _replies = prompt(&mut app, now);
    insta::assert_snapshot!(shot(&mut app, now));
}

#[test]
fn streaming_markdown_with_a_code_block() {
    let now = Instant::now();
    let mut app = app(60);
    let _replies = prompt(&mut app, now);
    send(&mut app, "how do I print in Rust?", now);
    app.on_agent(ToFront::Phase(Phase::Waiting), now);
    for piece in [
        "## Printing\n\nUse the **`println!`** macro",
        ":\n\n```rust\nfn main() {\n",
        "    println!(\"hello\");\n",
    ] {
        app.on_agent(ToFront::Delta(piece.into()), now);
    }
    insta::assert_snapshot!(shot(&mut app, now + Duration::from_secs(3)));
}

#[test]
fn a_tool_card_with_a_diff() {
    let now = Instant::now();
    let mut app = app(60);
    let _replies = prompt(&mut app, now);
    send(&mut app, "rename the greeting", now);
    app.on_agent(
        ToFront::Event(Event::ToolCall {
            id: "call_1".into(),
            name: "edit_file".into(),
            arguments: serde_json::json!({"path": "src/main.rs", "old_string": "hello", "new_string": "goodbye"}),
        }),
        now,
    );
    app.on_agent(
        ToFront::Preview(
            "--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1,3 +1,3 @@\n fn main() {\n-    println!(\"hello\");\n+    println!(\"goodbye\");\n }\n".into(),
        ),
        now,
    );
    let running = shot(&mut app, now + Duration::from_secs(1));
    app.on_agent(
        ToFront::Event(Event::ToolResult {
            id: "call_1".into(),
            name: "edit_file".into(),
            status: Status::Ok,
            output: "edited src/main.rs: 1 replacement".into(),
            changes: vec![Change::Modified {
                path: WorkspacePath::from_relative("src/main.rs").expect("path"),
            }],
        }),
        now,
    );
    insta::assert_snapshot!(format!(
        "{running}\n\n--- after the call:\n{}",
        shot(&mut app, now + Duration::from_secs(2))
    ));
}

fn approval(width: u16) -> String {
    let now = Instant::now();
    let mut app = app(width);
    let _replies = prompt(&mut app, now);
    send(&mut app, "clean up", now);
    app.on_agent(
        ToFront::Event(Event::ToolCall {
            id: "call_1".into(),
            name: "bash".into(),
            arguments: serde_json::json!({"command": "git clean -fdx && cargo build --release"}),
        }),
        now,
    );
    app.on_agent(
        ToFront::Preview("$ git clean -fdx && cargo build --release\n".into()),
        now,
    );
    let (reply, _answers) = channel();
    app.on_agent(
        ToFront::Read {
            kind: ReadKind::Approval {
                tool: "bash".into(),
                always: "always: bash(git clean:*), bash(cargo build:*)".into(),
            },
            reply,
        },
        now,
    );
    shot(&mut app, now + Duration::from_secs(4))
}

#[test]
fn an_approval_at_40_columns() {
    insta::assert_snapshot!(approval(40));
}

#[test]
fn an_approval_at_160_columns() {
    insta::assert_snapshot!(approval(160));
}

#[test]
fn the_slash_menu_filtered() {
    let now = Instant::now();
    let mut app = app(70);
    let _replies = prompt(&mut app, now);
    type_text(&mut app, "/", now);
    let all = shot(&mut app, now);
    type_text(&mut app, "re", now);
    let filtered = shot(&mut app, now);
    app.on_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE), now);
    insta::assert_snapshot!(format!(
        "{all}\n\n--- after typing `re`:\n{filtered}\n\n--- after Down:\n{}",
        shot(&mut app, now)
    ));
}

#[test]
fn the_session_picker() {
    let now = Instant::now();
    let mut app = app(70);
    let (reply, chosen) = channel();
    app.on_agent(
        ToFront::Pick {
            sessions: vec![
                PickItem {
                    id: "20261201-101500-aaaa".into(),
                    when: "2026-12-01 10:15".into(),
                    first_prompt: "add a --verbose flag to the CLI".into(),
                    turns: 4,
                    forked_at: None,
                    depth: 0,
                },
                PickItem {
                    id: "20261201-113000-cccc".into(),
                    when: "2026-12-01 11:30".into(),
                    first_prompt: "add a --verbose flag to the CLI".into(),
                    turns: 2,
                    forked_at: Some(3),
                    depth: 1,
                },
                PickItem {
                    id: "20261130-090000-bbbb".into(),
                    when: "2026-11-30 09:00".into(),
                    first_prompt:
                        "why does the build fail on CI but not here? it says linker errors".into(),
                    turns: 1,
                    forked_at: None,
                    depth: 0,
                },
            ],
            reply,
        },
        now,
    );
    app.on_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE), now);
    app.on_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE), now);
    let shown = shot(&mut app, now);
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), now);
    assert_eq!(chosen.try_recv(), Ok(Some("20261130-090000-bbbb".into())));
    insta::assert_snapshot!(shown);
}

/// Esc Esc on an empty prompt asks for the rewind picker; the picker lists the turns, then
/// offers what to take back, and answers with the turn and the choice.
#[test]
fn the_rewind_picker_and_its_three_way_choice() {
    let now = Instant::now();
    let mut app = app(72);
    let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
    let replies = prompt(&mut app, now);
    app.on_key(key(KeyCode::Esc), now);
    let armed = shot(&mut app, now);
    // Another key in between disarms it.
    app.on_key(key(KeyCode::Char('x')), now);
    app.on_key(key(KeyCode::Backspace), now);
    app.on_key(key(KeyCode::Esc), now);
    assert!(
        replies.try_recv().is_err(),
        "one Esc after a key opens nothing"
    );
    app.on_key(key(KeyCode::Esc), now);
    assert_eq!(replies.try_recv(), Ok(Op::Rewind));

    let (reply, chosen) = channel();
    let turn =
        |number: usize, prompt: &str, ago: &str, changes: &str, blocked: Option<&str>| TurnItem {
            number,
            prompt: prompt.into(),
            ago: ago.into(),
            changes: changes.into(),
            blocked: blocked.map(str::to_owned),
        };
    app.on_agent(
        ToFront::PickTurn {
            turns: vec![
                turn(3, "now make the tests pass", "just now", "2 M, bash", None),
                turn(
                    2,
                    "what does parse() return on empty input?",
                    "4 min ago",
                    "no file changes",
                    None,
                ),
                turn(
                    1,
                    "add a --verbose flag to the CLI",
                    "12 min ago",
                    "3 M, 1 A, 1 D",
                    Some("left the undo log"),
                ),
            ],
            reply,
        },
        now,
    );
    app.on_key(key(KeyCode::Down), now);
    let turns = shot(&mut app, now);
    app.on_key(key(KeyCode::Enter), now);
    let choice = shot(&mut app, now);
    // Esc goes back to the turns; the blocked one starts at the conversation alone.
    app.on_key(key(KeyCode::Esc), now);
    app.on_key(key(KeyCode::Down), now);
    app.on_key(key(KeyCode::Enter), now);
    let blocked = shot(&mut app, now);
    app.on_key(key(KeyCode::Enter), now);
    assert_eq!(
        chosen.try_recv(),
        Ok(Some(RewindChoice {
            number: 1,
            scope: RewindScope::Conversation
        }))
    );
    assert!(app.turn_picker.is_none());
    // The rewound turn's prompt comes back into the input box.
    app.on_agent(
        ToFront::Prefill("add a --verbose flag to the CLI".into()),
        now,
    );
    let prefilled = shot(&mut app, now);
    insta::assert_snapshot!(format!(
        "--- after one Esc:\n{armed}\n\n--- the turns:\n{turns}\n\n--- what goes back:\n{choice}\n\n--- a turn whose files cannot go back:\n{blocked}\n\n--- after the rewind:\n{prefilled}"
    ));
}

#[test]
fn after_undo() {
    let now = Instant::now();
    let mut app = app(70);
    let _replies = prompt(&mut app, now);
    send(&mut app, "/undo", now);
    app.on_agent(
        ToFront::Info(
            "undid turn #3 \"rename the greeting\": restored src/main.rs, removed notes.txt\nrewound the conversation by 4 messages to before that turn".into(),
        ),
        now,
    );
    app.status.undo_depth = Some(2);
    let _replies = prompt(&mut app, now);
    insta::assert_snapshot!(shot(&mut app, now));
}

#[test]
fn the_status_line() {
    let now = Instant::now();
    let mut app = app(100);
    app.status.capture_note = Some("bash: changes detected, not undoable".into());
    app.status.background = Some(2);
    app.hint = Some("/undo reverts turn #3".into());
    let _replies = prompt(&mut app, now);
    let full = shot(&mut app, now);
    let mut narrow = self::app(30);
    let _replies = prompt(&mut narrow, now);
    insta::assert_snapshot!(format!(
        "{full}\n\n--- at 30 columns:\n{}",
        shot(&mut narrow, now)
    ));
}

#[test]
fn a_resumed_session_replays_its_transcript() {
    let now = Instant::now();
    let mut app = app(60);
    let mut asked = Message::assistant("I'll add it.");
    asked.tool_calls = vec![ToolCall {
        id: "call_1".into(),
        name: "write_file".into(),
        arguments: r#"{"path":"notes.txt","content":"hi\n"}"#.into(),
    }];
    app.on_agent(
        ToFront::Replay(
            vec![
                Message::system("system prompt"),
                // As saved: the prompt as typed, then what its `@path` attached.
                Message::user(
                    "add notes like @README.md\n\n<attachment path=\"README.md\">\n# Notes\n</attachment>",
                ),
                asked,
                Message::tool_result("call_1", "created notes.txt (3 bytes)"),
                Message::assistant("Done: **notes.txt** says hi."),
            ]
            .into(),
        ),
        now,
    );
    let _replies = prompt(&mut app, now);
    insta::assert_snapshot!(shot(&mut app, now));
}

/// The full transcript comes back, with a note where the model's view was compacted.
#[test]
fn a_resumed_session_shows_where_it_was_compacted() {
    let now = Instant::now();
    let mut app = app(60);
    let mut conversation = shiro_agent::conversation::Conversation::from(vec![
        Message::system("system prompt"),
        Message::user("explain the parser"),
        Message::assistant("It is a recursive descent parser."),
        Message::user("and the lexer?"),
        Message::assistant("It splits on whitespace."),
    ]);
    conversation
        .compact(3, "We discussed the parser.".into())
        .unwrap();
    conversation.push(Message::user("thanks"));
    app.on_agent(ToFront::Replay(conversation), now);
    let _replies = prompt(&mut app, now);
    insta::assert_snapshot!(shot(&mut app, now));
}

#[test]
fn bash_output_streams_live_with_a_cap() {
    let now = Instant::now();
    let mut app = app(60);
    let _replies = prompt(&mut app, now);
    send(&mut app, "run the tests", now);
    app.on_agent(
        ToFront::Event(Event::ToolCall {
            id: "call_1".into(),
            name: "bash".into(),
            arguments: serde_json::json!({"command": "cargo test"}),
        }),
        now,
    );
    for n in 1..=12 {
        app.on_agent(ToFront::BashOutput(format!("test case_{n} ... ok\n")), now);
    }
    app.on_agent(ToFront::BashOutput("test case_13 ... ".into()), now);
    let live = shot(&mut app, now + Duration::from_secs(7));
    let output: String = (1..=13)
        .map(|n| format!("test case_{n} ... ok\n"))
        .collect::<String>()
        + "[exit code 0]";
    app.on_agent(
        ToFront::Event(Event::ToolResult {
            id: "call_1".into(),
            name: "bash".into(),
            status: Status::Ok,
            output,
            changes: Vec::new(),
        }),
        now,
    );
    insta::assert_snapshot!(format!(
        "{live}\n\n--- after the call:\n{}",
        shot(&mut app, now + Duration::from_secs(8))
    ));
}

/// While bash runs in a session that can start background commands, the spinner offers
/// Ctrl-B, Ctrl-B asks for it, and the status line counts the commands running.
#[test]
fn a_running_bash_call_offers_ctrl_b() {
    let now = Instant::now();
    let mut app = app(100);
    app.status.background = Some(1);
    let _replies = prompt(&mut app, now);
    send(&mut app, "start the server", now);
    app.on_agent(
        ToFront::Event(Event::ToolCall {
            id: "call_1".into(),
            name: "bash".into(),
            arguments: serde_json::json!({"command": "npm run dev"}),
        }),
        now,
    );
    app.on_agent(ToFront::BashOutput("ready on :5173\n".into()), now);
    let ctrl_b = KeyEvent::new(KeyCode::Char('b'), KeyModifiers::CONTROL);
    assert_eq!(app.on_key(ctrl_b, now), super::app::Effect::Background);
    insta::assert_snapshot!(shot(&mut app, now + Duration::from_secs(3)));
}

/// On a terminal emulator: the transcript printed above the viewport, then a shrink of the
/// window, after which the viewport is redrawn whole at the new width. (vt100 drops the rows a
/// shrink cuts off, where real terminals push them into the scrollback, so only the viewport
/// is expected after the resize.)
#[test]
fn a_resize_redraws_the_viewport_at_the_new_width() {
    use super::screen::Screen;
    use super::screen::tests::Emulator;
    let now = Instant::now();
    let mut app = app(50);
    let mut screen = Screen::new(Emulator::new(50, 12), 0).expect("screen");
    let _replies = prompt(&mut app, now);
    send(&mut app, "hello", now);
    app.on_agent(
        ToFront::Delta("A first paragraph.\n\nA second one.".into()),
        now,
    );
    super::render(&mut app, &mut screen).expect("render");
    app.on_agent(
        ToFront::Event(Event::AssistantText {
            text: String::new(),
        }),
        now,
    );
    app.on_agent(
        ToFront::Event(Event::TurnEnd {
            changed: Vec::new(),
            turn_id: None,
            steps: 1,
            error: None,
            error_kind: None,
            usage: None,
            session_id: String::new(),
            background: Vec::new(),
        }),
        now,
    );
    let _replies = prompt(&mut app, now);
    super::render(&mut app, &mut screen).expect("render");
    let before = screen_text(&mut screen);
    screen.backend_mut().set_size(40, 10);
    screen.resized().expect("resize");
    app.width = 40;
    super::render(&mut app, &mut screen).expect("render");
    insta::assert_snapshot!(format!(
        "{before}\n\n--- after a resize to 40×10:\n{}",
        screen_text(&mut screen)
    ));
}

fn screen_text(screen: &mut super::screen::Screen<super::screen::tests::Emulator>) -> String {
    screen
        .backend_mut()
        .everything()
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn where_to_keep_an_always_rule() {
    let now = Instant::now();
    let mut app = app(80);
    let _replies = prompt(&mut app, now);
    send(&mut app, "check", now);
    let (reply, answers) = channel();
    app.on_agent(
        ToFront::Read {
            kind: ReadKind::Keep {
                rules: "bash(git status:*)".into(),
            },
            reply,
        },
        now,
    );
    let asked = shot(&mut app, now + Duration::from_secs(1));
    // A key of the question answers at once; `y` is not one of them.
    app.on_key(KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE), now);
    app.on_key(KeyEvent::new(KeyCode::Backspace, KeyModifiers::NONE), now);
    app.on_key(KeyEvent::new(KeyCode::Char('w'), KeyModifiers::NONE), now);
    assert_eq!(
        answers.try_recv(),
        Ok(shiro_agent::protocol::Op::Keep(
            shiro_agent::protocol::Scope::Workspace
        ))
    );
    insta::assert_snapshot!(asked);
}

/// Skills in the `/` menu: marked as skills with their descriptions, a project's marked
/// untrusted with how to use it until the workspace is trusted; a skill for the model alone
/// (`user-invocable: false`) is not offered to be typed.
#[test]
fn the_slash_menu_shows_skills() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("ws");
    let user = dir.path().join("user");
    for (base, name, description) in [
        (
            &root.join(".claude/skills"),
            "release-notes",
            "Writes release notes",
        ),
        (&user.join("skills"), "tidy-imports", "Sorts the imports"),
    ] {
        let folder = base.join(name);
        std::fs::create_dir_all(&folder).expect("a skill folder");
        std::fs::write(
            folder.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: {description}\n---\nBody.\n"),
        )
        .expect("a SKILL.md");
    }
    let model_only = user.join("skills/house-style");
    std::fs::create_dir_all(&model_only).expect("a skill folder");
    std::fs::write(
        model_only.join("SKILL.md"),
        "---\nname: house-style\ndescription: How we name things\nuser-invocable: false\n---\nBody.\n",
    )
    .expect("a SKILL.md");
    let registry = Registry::load(Sources {
        workspace_root: root.clone(),
        user_config_dir: Some(user),
        ..Sources::default()
    });
    let now = Instant::now();
    let mut app = App::new(70, false, Some(registry.clone()), root);
    let _replies = prompt(&mut app, now);
    type_text(&mut app, "/", now);
    let untrusted = shot(&mut app, now);
    assert!(!untrusted.contains("house-style"), "{untrusted}");
    registry.set_workspace_trusted(true);
    type_text(&mut app, "r", now);
    insta::assert_snapshot!(format!(
        "{untrusted}\n\n--- trusted, after typing `r`:\n{}",
        shot(&mut app, now)
    ));
}

/// `/bashes` in the terminal UI: a picker of the session's background commands; Enter shows
/// the selected one's output, `k` stops it (only while it runs), Esc closes.
#[test]
fn the_bashes_picker() {
    let now = Instant::now();
    let mut app = app(80);
    let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
    let _replies = prompt(&mut app, now);
    let commands = vec![
        BackgroundItem {
            id: "b1".into(),
            command: "npm run dev".into(),
            status: "running".into(),
            running: true,
            age: "4m 10s".into(),
            last_line: Some("ready - started server on http://localhost:3000".into()),
        },
        BackgroundItem {
            id: "b2".into(),
            command: "cargo test --workspace".into(),
            status: "exited with status 101".into(),
            running: false,
            age: "35s".into(),
            last_line: None,
        },
    ];
    let open = |app: &mut App| {
        let (reply, chosen) = channel();
        app.on_agent(
            ToFront::PickBackground {
                commands: commands.clone(),
                reply,
            },
            now,
        );
        chosen
    };

    let chosen = open(&mut app);
    let ended = shot(&mut app, now);
    // `k` on a command that has ended does nothing; on a running one it stops it.
    app.on_key(key(KeyCode::Char('k')), now);
    assert!(app.bashes_picker.is_some());
    app.on_key(key(KeyCode::Up), now);
    let running = shot(&mut app, now);
    app.on_key(key(KeyCode::Char('k')), now);
    assert_eq!(
        chosen.try_recv(),
        Ok(Some(BackgroundChoice {
            id: "b1".into(),
            action: BackgroundAction::Kill
        }))
    );
    assert!(app.bashes_picker.is_none());

    let chosen = open(&mut app);
    app.on_key(key(KeyCode::Enter), now);
    assert_eq!(
        chosen.try_recv(),
        Ok(Some(BackgroundChoice {
            id: "b2".into(),
            action: BackgroundAction::Show
        }))
    );
    let chosen = open(&mut app);
    app.on_key(key(KeyCode::Esc), now);
    assert_eq!(chosen.try_recv(), Ok(None));
    let closed = shot(&mut app, now);
    insta::assert_snapshot!(format!(
        "--- the newest, which has ended:\n{ended}\n\n--- a running one:\n{running}\n\n--- closed:\n{closed}"
    ));
}
