//! `shiro demo`: a scripted model edits, creates, moves and deletes files in a copy of
//! `examples/demo/workspace/`, shiro shows every diff, then `/undo` puts everything back and
//! the demo checks that the copy is byte-identical to how it started.
//!
//! It runs the same REPL code as an interactive session, with the replay provider, scripted
//! input and auto-approval, so it works offline and from any directory (the workspace and
//! the script are compiled in).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

use anyhow::{Context as _, Result};
use shiro_providers::{Provider, ReplayProvider};
use shiro_undo::StateDir;

use super::approve::Approvals;
use super::events::{Mode, Printer};
use super::input::Lines;
use super::session::Session;
use super::turn::{self, Agent, DEFAULT_MAX_STEPS, SYSTEM_PROMPT};
use crate::config::Config;
use crate::environment::Environment;
use crate::headless::{self, Context};
use crate::render::Color;
use crate::signals::Signals;

/// The demo's model: a replay script.
pub const SCRIPT: &str = include_str!("../../../examples/demo/script.json");

/// What the scripted user types: one prompt, then `/undo`.
pub const USER_INPUT: &str = "Use an f-string in greet, add a test, move notes.txt to docs/notes.md and delete scratch.txt\n/undo\n";

/// The starting workspace, as (path, contents).
pub const WORKSPACE: [(&str, &str); 4] = [
    (
        "README.md",
        include_str!("../../../examples/demo/workspace/README.md"),
    ),
    (
        "notes.txt",
        include_str!("../../../examples/demo/workspace/notes.txt"),
    ),
    (
        "scratch.txt",
        include_str!("../../../examples/demo/workspace/scratch.txt"),
    ),
    (
        "src/greet.py",
        include_str!("../../../examples/demo/workspace/src/greet.py"),
    ),
];

/// Runs the demo in a fresh temporary directory, writing the transcript to `out`.
/// Fails when the workspace is not byte-identical to its start after `/undo`.
pub async fn run(out: Box<dyn Write + Send>, color: Color) -> Result<()> {
    let dir = tempfile::Builder::new()
        .prefix("shiro-demo-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let root = dir
        .path()
        .canonicalize()
        .context("cannot resolve the temporary directory")?;
    for (path, text) in WORKSPACE {
        let path = root.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    // The demo's history lives and dies with its workspace, in a directory of its own.
    let state_home = tempfile::Builder::new()
        .prefix("shiro-demo-state-")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let state = StateDir::of_workspace(state_home.path(), &root);
    let before = snapshot(&root)?;
    // No user config: the demo must not run the user's commands or read their settings.
    let config = Config::load(&root, None)?;
    let ctx = Context {
        root: root.clone(),
        state,
        config,
        color,
        // The demo runs under `shiro demo`'s own handling: a signal drops it whole.
        signals: Signals::default(),
        // The demo's bash is never called; its edits are the file tools'.
        bash: shiro_tools::tools::bash(),
        // The demo needs no variable, and must not read the user's keys.
        env: Environment::default(),
    };
    let provider: Box<dyn Provider> = Box::new(ReplayProvider::from_script(SCRIPT)?);
    let tools = shiro_tools::tools::all();
    let mut agent = Agent {
        ctx: &ctx,
        provider: Ok(provider),
        specs: turn::specs(&tools),
        tools,
        history: super::conversation::Conversation::default(),
        session: Session::create(&ctx.state)?,
        printer: Printer::new(out, Box::new(std::io::sink()), Mode::Interactive, color),
        input: Box::new(Lines::new(Box::new(std::io::Cursor::new(USER_INPUT)))),
        approvals: Approvals::new(crate::permissions::Mode::Yes, true),
        max_steps: DEFAULT_MAX_STEPS,
        catch_interrupts: false,
        bash_running: tokio::sync::watch::Sender::new(false),
        limits: turn::TurnLimits::default(),
        usage: Default::default(),
        system_prompt: SYSTEM_PROMPT.to_owned(),
        // The demo is offline and the same everywhere: no MCP servers.
        mcp: shiro_mcp::client::McpClients::default(),
        skills: None,
    };
    agent.start_conversation()?;
    agent.printer.info(&format!(
        "shiro demo: a scripted model works on a copy of examples/demo/workspace in {}\n(every tool call is approved automatically; each file change is shown as a diff first)\n",
        root.display()
    ));
    let registry = headless::registry(&ctx);
    super::repl::run(&mut agent, &registry).await?;
    let after = snapshot(&root)?;
    if after == before {
        agent.printer.info(&format!(
            "\nchecked: all {} files are byte-identical to how they started, and the files the turn created are gone",
            before.len()
        ));
        return Ok(());
    }
    let changed: BTreeSet<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    let list: Vec<&str> = changed.iter().map(|s| s.as_str()).collect();
    anyhow::bail!(
        "the demo failed: after /undo the workspace differs from its start: {}",
        list.join(", ")
    )
}

/// Every file and directory under `root` except `.shiro/`, with its bytes.
fn snapshot(root: &Path) -> Result<BTreeMap<String, Option<Vec<u8>>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let entry = entry?;
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            if rel == ".shiro" {
                continue;
            }
            if entry.file_type()?.is_dir() {
                out.insert(format!("{rel}/"), None);
                stack.push(path);
            } else {
                out.insert(rel, Some(std::fs::read(&path)?));
            }
        }
    }
    Ok(out)
}
