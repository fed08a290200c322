//! shiro's agent in another program: the replay provider as the model, the real tools over
//! the disk, the undo store, and a sink of the program's own for what the turn reports. The
//! program sends the loop its ops: a message, whose turn edits a file, then an undo, which
//! puts the file back byte for byte and rewinds the conversation. (`cargo run -p
//! shiro-agent --example embed_agent`; the test suite runs it too, in
//! `tests/embed_example.rs`.)
#![allow(clippy::print_stdout)]

use std::sync::{Arc, Mutex};

use shiro_agent::approve::Approvals;
use shiro_agent::config::Config;
use shiro_agent::environment::Environment;
use shiro_agent::events::Printer;
use shiro_agent::headless::{self, Context};
use shiro_agent::input::Ops;
use shiro_agent::protocol::{Event, Op, ToFront};
use shiro_agent::render::Color;
use shiro_agent::session::Session;
use shiro_agent::signals::Signals;
use shiro_agent::turn::{self, Agent, SYSTEM_PROMPT, SessionUsage, TurnLimits};
use shiro_agent::{conversation::Conversation, permissions};
use shiro_providers::ReplayProvider;
use shiro_undo::StateDir;

/// The model's part, played back: one edit, then a last word.
const SCRIPT: &str = r#"{"responses": [
    {"text": "Greeting the world.", "tool_calls": [{"name": "edit_file",
        "arguments": {"path": "hello.txt", "old_string": "hello", "new_string": "hello, world"}}]},
    {"text": "Done."}
]}"#;

/// Runs one turn and undoes it, as ops; an error says which step did not do what it should.
#[tokio::main(flavor = "current_thread")]
pub async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().canonicalize()?.join("app");
    std::fs::create_dir(&root)?;
    std::fs::write(root.join("hello.txt"), "hello\n")?;
    let ctx = Context {
        state: StateDir::of_workspace(&dir.path().join("state"), &root),
        config: Config::load(&root, None)?,
        root: root.clone(),
        color: Color::Never,
        signals: Signals::default(),
        bash: shiro_tools::tools::bash(),
        env: Environment::default(),
    };
    // The program's own front end: it keeps the turn's events.
    let events = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&events);
    let sink = Arc::new(move |message: ToFront| {
        if let ToFront::Event(event) = message {
            kept.lock().unwrap_or_else(|p| p.into_inner()).push(event);
        }
    });
    let (ops, queue) = std::sync::mpsc::channel();
    let tools = shiro_tools::tools::all();
    let mut agent = Agent {
        ctx: &ctx,
        provider: Ok(Box::new(ReplayProvider::from_script(SCRIPT)?)),
        specs: turn::specs(&tools),
        tools,
        history: Conversation::default(),
        session: Session::create(&ctx.state)?,
        printer: Printer::to_front(sink),
        // The program's ops, taken in order; with `Yes`, no call waits for an answer.
        input: Box::new(Ops::new(queue)),
        approvals: Approvals::new(permissions::Mode::Yes, false),
        max_steps: 10,
        catch_interrupts: false,
        bash_running: tokio::sync::watch::Sender::new(false),
        limits: TurnLimits::default(),
        usage: SessionUsage::default(),
        system_prompt: SYSTEM_PROMPT.to_owned(),
        mcp: Default::default(),
        skills: None,
    };
    agent.start_conversation()?;
    ops.send(Op::Submit("greet the world".to_owned()))?;
    ops.send(Op::Undo)?;
    // With every sender gone, the loop is told to quit once the queue is empty.
    drop(ops);
    shiro_agent::repl::run(&mut agent, &headless::registry(&ctx)).await?;
    let rewound = agent.history.transcript().len();
    drop(agent);
    let events = events.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let edited = events.iter().any(|event| {
        matches!(event, Event::TurnEnd { changed, .. }
            if changed.iter().any(|change| change.to_string() == "M hello.txt"))
    });
    anyhow::ensure!(edited, "the turn did not report its edit of hello.txt");
    println!("{} events, then undone", events.len());
    // Undone: the file as it was, and the conversation back to its system message.
    anyhow::ensure!(std::fs::read_to_string(root.join("hello.txt"))? == "hello\n");
    anyhow::ensure!(rewound == 1, "the undo left {rewound} messages");
    Ok(())
}
