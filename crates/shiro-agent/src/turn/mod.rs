//! The agent loop: prompt → stream the model's answer → run its tool calls → send the
//! results → repeat until it stops calling tools or the step cap is reached. Every turn is
//! recorded in the workspace's undo log through a `Recording` mutator.

use anyhow::{Context as _, Result, anyhow};
use serde_json::Value;
use shiro_commands::{AllowedTools, BashVerdict, tool};
use shiro_mcp::client::McpClients;
use shiro_providers::{
    ChatRequest, Message, Provider, ProviderError, ReplayProvider, Role, ToolSpec, Usage,
};
use shiro_tools::{Change, FsMutator, Tool};
use shiro_undo::{Recording, TurnStart};

use super::approve::Approvals;
use super::conversation::Conversation;
use super::events::Printer;
use super::input::Input;
use super::protocol::Phase;
use super::protocol::{ErrorKind, Event};
use super::session::{Line, Session};
use crate::headless::{self, Context};
use crate::permissions::{Target, Verdict};
use crate::signals::Handling;

mod calls;

use calls::mcp_note;

/// A turn stopped by Ctrl-C or SIGTERM.
#[derive(Debug, thiserror::Error)]
#[error("interrupted (Esc, Ctrl-C or a signal)")]
pub struct Interrupted;

/// A turn that reached its cap on model calls.
#[derive(Debug, thiserror::Error)]
#[error("stopped after {0} model calls (the step cap); ask again to continue")]
pub struct StepCap(pub usize);

/// What kind of error `err`, which ended a turn, is.
pub fn error_kind(err: &anyhow::Error) -> Option<ErrorKind> {
    if err.downcast_ref::<Interrupted>().is_some() {
        return Some(ErrorKind::Interrupted);
    }
    if err.downcast_ref::<StepCap>().is_some() {
        return Some(ErrorKind::MaxTurns);
    }
    err.downcast_ref::<ProviderError>().map(provider_error_kind)
}

/// What kind of error a provider's is.
fn provider_error_kind(err: &ProviderError) -> ErrorKind {
    match err {
        ProviderError::InvalidConfig { .. } | ProviderError::InvalidReplayScript { .. } => {
            ErrorKind::Config
        }
        ProviderError::Unauthorized { .. } => ErrorKind::Auth,
        ProviderError::RateLimited { .. } => ErrorKind::RateLimit,
        ProviderError::NotFound { .. }
        | ProviderError::UnknownModel { .. }
        | ProviderError::Rejected { .. } => ErrorKind::InvalidRequest,
        ProviderError::Server { .. } => ErrorKind::Server,
        ProviderError::ConnectionRefused { .. }
        | ProviderError::Connect { .. }
        | ProviderError::Timeout { .. }
        | ProviderError::Dropped
        | ProviderError::Stream { .. } => ErrorKind::Network,
        ProviderError::BadResponse { .. } | ProviderError::ReplayFinished { .. } => {
            ErrorKind::BadResponse
        }
    }
}

/// What a user command asks of the turn it starts: which tools it may use, and which bash
/// commands run without asking.
#[derive(Debug, Clone, Default)]
pub struct TurnLimits {
    /// The command's name (without `/`), for messages.
    pub command: String,
    /// The tools the turn may use; `None`: every tool.
    pub allowed: Option<AllowedTools>,
    /// Whether a bash command that a `Bash(…)` rule matches runs without asking. Only for a
    /// command the user vouches for: their own, or one of a workspace they trust.
    pub preapprove: bool,
}

impl TurnLimits {
    /// Why `tool` may not run in this turn, for the model; `None` when it may (as far as the
    /// limits go: approval may still be needed).
    fn refusal(&self, tool: &str, args: &Value) -> Option<String> {
        let allowed = self.allowed.as_ref()?;
        let tools = crate::headless::describe_tools(allowed);
        if !allowed.allows(tool) {
            return Some(format!(
                "refused: the /{} command limits this turn to these tools: {tools} (its allowed-tools: {}); {tool} is not one of them, so nothing was run. Use those tools, or tell the user what you would need",
                self.command,
                if allowed.written.is_empty() {
                    "none".to_owned()
                } else {
                    allowed.written.join(", ")
                }
            ));
        }
        if tool == shiro_commands::tool::BASH {
            let line = args.get("command").and_then(Value::as_str).unwrap_or("");
            if allowed.bash(line) == BashVerdict::Refused {
                return Some(format!(
                    "refused: in this turn the /{} command allows {tools}; `{line}` is not covered (every command of a line must match a rule, and substitutions and redirections never do), so nothing was run",
                    self.command
                ));
            }
        }
        None
    }

    /// Whether a bash call runs without asking.
    fn preapproved(&self, args: &Value) -> bool {
        let Some(allowed) = &self.allowed else {
            return false;
        };
        let line = args.get("command").and_then(Value::as_str).unwrap_or("");
        self.preapprove && allowed.bash(line) == BashVerdict::Allowed
    }
}

/// The default cap on model calls in one turn.
pub const DEFAULT_MAX_STEPS: usize = 50;

/// The system prompt. Fixed text (no dates, no paths) so transcripts and tests are stable.
pub const SYSTEM_PROMPT: &str = "You are shiro, a coding agent working in the user's workspace. \
Use the tools to read, search and change files; paths are relative to the workspace root. \
Prefer edit_file, multi_edit and apply_patch for changes to existing files. \
Every file change you make can be undone by the user. \
When you are done, answer briefly with what you changed.";

/// One conversation with a model in one workspace.
pub struct Agent<'a> {
    /// Where it works.
    pub ctx: &'a Context,
    /// The model, or why there is none (reported when a prompt is sent).
    pub provider: Result<Box<dyn Provider>, String>,
    /// The tools on offer.
    pub tools: Vec<Box<dyn Tool>>,
    /// Their descriptions for the model.
    pub specs: Vec<ToolSpec>,
    /// The conversation, starting with the system message: the full transcript and its
    /// compactions.
    pub history: Conversation,
    /// Where the conversation is saved.
    pub session: Session,
    /// Where output goes.
    pub printer: Printer,
    /// Where prompts and approval answers come from.
    pub input: Box<dyn Input + 'a>,
    /// Who approves tool calls.
    pub approvals: Approvals,
    /// The cap on model calls per turn.
    pub max_steps: usize,
    /// Whether Ctrl-C stops a running turn (the REPL) rather than the process.
    pub catch_interrupts: bool,
    /// True while a `bash` call runs: Ctrl-C then stops its command (the tool watches the
    /// same signal) and lets it commit what it changed before the turn is dropped.
    pub bash_running: tokio::sync::watch::Sender<bool>,
    /// The limits of the running turn (a user command's `allowed-tools`).
    pub limits: TurnLimits,
    /// The tokens the session has used, as the provider reported them.
    pub usage: SessionUsage,
    /// The system message a new conversation starts with: [`SYSTEM_PROMPT`] and the
    /// project's instructions (see [`super::instructions`]).
    pub system_prompt: String,
    /// The MCP servers whose tools are offered beside shiro's.
    pub mcp: McpClients,
    /// The skills the `skill` tool offers (see [`crate::skill`]); `None`: no skills.
    pub skills: Option<shiro_commands::Registry>,
}

/// The tokens a session has used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionUsage {
    /// Every request's tokens, summed.
    pub total: Usage,
    /// The last turn's requests, summed.
    pub last_turn: Usage,
    /// The last request's: how full the context window is.
    pub last: Option<Usage>,
    /// How many requests reported their usage, and how many did not.
    pub reported: u64,
    /// Requests whose server sent no usage.
    pub unreported: u64,
    /// Requests the replay model answered from its script: they reach no model, and count
    /// no tokens.
    pub replayed: u64,
    /// The last request's tokens (prompt and completion): how full the context is, as long
    /// as it is the one that request measured; `None` once a compaction or a rewind changed
    /// it (an estimate stands in then).
    pub context: Option<u64>,
}

impl SessionUsage {
    /// Adds one request's usage as the provider of kind `provider` ([`Provider::kind`])
    /// reported it (`None`: it sent none, which a replay model never does).
    pub fn add(&mut self, provider: &str, usage: Option<Usage>) {
        let Some(usage) = usage else {
            if provider == ReplayProvider::KIND {
                self.replayed += 1;
            } else {
                self.unreported += 1;
            }
            return;
        };
        for sum in [&mut self.total, &mut self.last_turn] {
            sum.prompt_tokens += usage.prompt_tokens;
            sum.completion_tokens += usage.completion_tokens;
            sum.cached_tokens += usage.cached_tokens;
        }
        self.last = Some(usage);
        self.context = Some(usage.total());
        self.reported += 1;
    }
}

impl std::fmt::Debug for Agent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("session", &self.session.id())
            .finish_non_exhaustive()
    }
}

/// How a turn went.
#[derive(Debug, Default)]
pub struct TurnReport {
    /// The model's last text.
    pub answer: String,
    /// What changed on disk, in order.
    pub changed: Vec<Change>,
    /// The undo log's number for the turn, when it was recorded.
    pub turn_id: Option<u64>,
    /// How many model calls were made.
    pub steps: usize,
    /// Why it ended early, if it did.
    pub error: Option<String>,
    /// What kind of error that was.
    pub error_kind: Option<ErrorKind>,
    /// Whether it ran `bash`.
    pub ran_bash: bool,
    /// What the user is told about calls whose changes `/undo` cannot all reverse: bash
    /// without full capture, and MCP tools.
    pub undo_notes: Vec<String>,
    /// The MCP tools it called, each once, in order.
    pub mcp_tools: Vec<String>,
    /// Whether Ctrl-C (or SIGTERM) stopped it.
    pub interrupted: bool,
    /// The calls denied (by the person, the rules or the mode), one line each
    /// (`write_file x.txt`).
    pub denied: Vec<String>,
    /// Whether a denied call was one that changes files, runs bash or calls an MCP tool (a
    /// denied read is not a refused change).
    pub denied_change: bool,
    /// Why calls that change files, run bash or call an MCP tool were refused without anyone
    /// saying no (a rule, the mode, nobody to ask), each cause once, for the hint `-p` ends
    /// with.
    pub refused: Vec<crate::approve::Refusal>,
    /// The calls refused because the workspace has no undo log to record them in (a
    /// read-only directory), one line each.
    pub unrecordable: Vec<String>,
}

/// Where a turn's changes are recorded: the undo log, or nowhere, for the reason given (a
/// workspace where `.shiro/` cannot be made); then every change is refused, never run
/// unrecorded.
type Log<'r> = Result<&'r Recording<FsMutator>, &'r str>;

/// The tool specs the model is offered.
pub fn specs(tools: &[Box<dyn Tool>]) -> Vec<ToolSpec> {
    tools
        .iter()
        .map(|tool| ToolSpec {
            name: tool.name().to_owned(),
            description: tool.description().to_owned(),
            parameters: tool.schema(),
        })
        .collect()
}

impl Agent<'_> {
    /// Appends a message to the history and the session file.
    pub fn push(&mut self, message: Message) -> Result<()> {
        self.session.append(&Line::Message {
            message: message.clone(),
            time: None,
        })?;
        self.history.push(message);
        Ok(())
    }

    /// Appends a prompt to the history and the session file, with the time it was sent.
    pub(crate) fn push_prompt(&mut self, prompt: &str) -> Result<()> {
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let message = Message::user(prompt);
        self.session.append(&Line::Message {
            message: message.clone(),
            time: Some(time),
        })?;
        self.history.note_time(self.history.len(), time);
        self.history.push(message);
        Ok(())
    }

    /// Starts the conversation with the system message, when it has none yet.
    pub fn start_conversation(&mut self) -> Result<()> {
        if self.history.is_empty() {
            self.push(Message::system(self.system_prompt.clone()))?;
        }
        Ok(())
    }

    /// Truncates the transcript to `to` messages (dropping the compactions made after that
    /// point) and records the rewind in the session file, with the undo log's `turns` whose
    /// files went back with it; `to` at the transcript's length records files going back
    /// alone. A `/redo` brings back both.
    pub fn rewind(&mut self, to: usize, turns: Vec<u64>) -> Result<()> {
        let to = to.min(self.history.len());
        self.history.rewind_with(to, turns.clone());
        self.usage.context = None;
        self.session.append(&Line::Rewind { to, turns })
    }

    /// Notes that the prompt at `marker` started the undo log's turn `turn_id`, in the
    /// conversation and the session file.
    pub(crate) fn note_turn(&mut self, marker: usize, turn_id: u64) -> Result<()> {
        self.history.note_turn(marker, turn_id);
        self.session.append(&Line::Turn {
            turn_id,
            history_marker: marker,
        })
    }

    /// Brings back what the last rewind took from the conversation, and records it in the
    /// session file; `None` (nothing changes) when there is nothing to bring back.
    pub fn redo_conversation(&mut self) -> Result<Option<crate::conversation::Undone>> {
        let Some(undone) = self.history.redo() else {
            return Ok(None);
        };
        self.usage.context = None;
        self.session.append(&Line::Redo)?;
        Ok(Some(undone))
    }

    /// Runs one turn for `prompt` within `limits` (a user command's tools).
    pub async fn turn_with(&mut self, prompt: &str, limits: TurnLimits) -> Result<TurnReport> {
        self.limits = limits;
        let report = self.turn(prompt).await;
        self.limits = TurnLimits::default();
        report
    }

    /// The tool specs this turn offers: shiro's and the running MCP servers', all of them or
    /// those its limits allow.
    fn offered_specs(&self) -> Vec<ToolSpec> {
        let rules = &self.approvals.rules;
        let shown = |skill: &str| {
            let target = Target::Skill(skill.to_lowercase());
            let verdict = rules.judge(self.approvals.mode, tool::SKILL, false, &target);
            !matches!(verdict, Verdict::Deny(_))
        };
        let skill = self
            .skills
            .as_ref()
            .and_then(|registry| crate::skill::spec(registry, shown));
        let all = self
            .specs
            .iter()
            .cloned()
            .chain(skill)
            .chain(self.mcp.specs());
        match &self.limits.allowed {
            None => all.collect(),
            Some(allowed) => all.filter(|spec| allowed.allows(&spec.name)).collect(),
        }
    }

    /// Runs one turn for `prompt`. Errors of the model or a tool end the turn and are in the
    /// report; only failures of shiro's own bookkeeping (the undo store, the session file)
    /// are returned as errors.
    pub async fn turn(&mut self, prompt: &str) -> Result<TurnReport> {
        if let Err(why) = &self.provider {
            // Without a model nothing can happen: keep the prompt out of the history, so
            // that it is not sent twice once a model is set.
            let error = why.clone();
            self.printer.event(&Event::TurnEnd {
                changed: Vec::new(),
                turn_id: None,
                steps: 0,
                error: Some(error.clone()),
                error_kind: Some(ErrorKind::Config),
                usage: None,
                session_id: self.session.id().to_owned(),
                background: Vec::new(),
            });
            return Ok(TurnReport {
                error: Some(error),
                error_kind: Some(ErrorKind::Config),
                ..TurnReport::default()
            });
        }
        let marker = self.history.len();
        self.usage.last_turn = Usage::default();
        let store = match self.ctx.open_store().await {
            Ok((store, notices)) => {
                for notice in notices {
                    self.printer.info(&format!("note: {notice}"));
                }
                Ok(store)
            }
            // The session said when it began that nothing can be saved here: questions
            // still work, and changes are refused (see `run_call`), without a notice per turn.
            Err(err) if self.session.unsaved_reason().is_some() => Err(headless::error_text(&err)),
            Err(err) => return Err(err),
        };
        let recording = match &store {
            Ok(store) => {
                let recording = store.recorder(self.ctx.workspace()?);
                recording
                    .begin_turn(TurnStart {
                        summary: summary_of(prompt),
                        history_marker: marker as u64,
                        session: Some(self.session.id().to_owned()),
                    })
                    .await?;
                Ok(recording)
            }
            Err(why) => Err(why.as_str()),
        };
        let log: Log<'_> = recording.as_ref().map_err(|why| *why);
        let mut report = TurnReport::default();
        let outcome = if self.catch_interrupts {
            // Dropping the steps future cancels the model request or the running tool (bash
            // kills its process group on drop); what the turn changed so far stays recorded.
            // The signals were caught since startup, so one that comes before the first poll
            // is not lost, nor does it find the default handler.
            let signals = self.ctx.signals.clone();
            signals.set(Handling::Cancel);
            let mut running = self.bash_running.subscribe();
            let steps = self.steps(log, prompt, &mut report);
            tokio::pin!(steps);
            let outcome = tokio::select! {
                outcome = &mut steps => outcome,
                () = signals.cancelled() => {
                    // A running bash command stops on the same signal; its changes are
                    // committed and noted before the rest of the turn is dropped.
                    tokio::select! {
                        _ = &mut steps => {}
                        _ = running.wait_for(|running| !running) => {}
                    }
                    Err(Interrupted.into())
                }
            };
            signals.set(Handling::Idle);
            outcome
        } else {
            self.steps(log, prompt, &mut report).await
        };
        if let Err(err) = outcome {
            report.interrupted = err.downcast_ref::<Interrupted>().is_some();
            report.error_kind = error_kind(&err);
            report.error = Some(crate::headless::error_text(&err));
        }
        let repaired = self.answer_dangling_calls();
        if let (Ok(store), Ok(recording)) = (&store, &recording) {
            // What background commands changed during the turn, named with it.
            if let Some(background) = self.ctx.bash.background() {
                let output = shiro_tools::ToolOutput {
                    capture: Some(shiro_tools::capture::CaptureMode::Detect),
                    unrestorable: background.take_changes().await,
                    ..shiro_tools::ToolOutput::default()
                };
                if !output.unrestorable.is_empty() {
                    report.undo_notes.extend(
                        crate::headless::note_bash_output(recording, &output, "/undo").await,
                    );
                }
            }
            let finished = recording.finish_turn().await;
            for notice in store.take_notices() {
                self.printer.info(&format!("note: {notice}"));
            }
            report.turn_id = finished?.map(|id| id.0);
        }
        if let Some(turn_id) = report.turn_id {
            self.note_turn(marker, turn_id)?;
        }
        repaired?;
        self.printer.event(&Event::TurnEnd {
            changed: report.changed.clone(),
            turn_id: report.turn_id,
            steps: report.steps,
            error: report.error.clone(),
            error_kind: report.error_kind,
            usage: (self.usage.last_turn != Usage::default()).then_some(self.usage.last_turn),
            session_id: self.session.id().to_owned(),
            background: self.background_commands(),
        });
        if !report.mcp_tools.is_empty() {
            report.undo_notes.push(mcp_note(&report.mcp_tools));
        }
        for note in &report.undo_notes {
            self.printer.info(note);
        }
        Ok(report)
    }

    /// The session's background commands, for `turn_end`.
    fn background_commands(&self) -> Vec<crate::protocol::BackgroundCommand> {
        let Some(background) = self.ctx.bash.background() else {
            return Vec::new();
        };
        background
            .list()
            .into_iter()
            .map(|job| crate::protocol::BackgroundCommand {
                id: job.id,
                command: job.command,
                status: job.status.to_string(),
            })
            .collect()
    }

    async fn steps(
        &mut self,
        recording: Log<'_>,
        prompt: &str,
        report: &mut TurnReport,
    ) -> Result<()> {
        self.push_prompt(prompt)?;
        while report.steps < self.max_steps {
            self.check_stop()?;
            self.compact_if_full().await?;
            report.steps += 1;
            // A server that stopped since the last request takes its tools with it.
            for notice in self.mcp.check() {
                self.printer.info(&format!("error: {notice}"));
            }
            let specs = self.offered_specs();
            let provider = self.provider.as_ref().map_err(|why| anyhow!("{why}"))?;
            let context = self.history.context();
            let request = ChatRequest {
                messages: &context,
                tools: &specs,
            };
            self.printer.phase(Phase::Waiting);
            let printer = &mut self.printer;
            let completion = provider
                .complete(&request, &mut |event| printer.stream(event))
                .await?;
            self.usage.add(provider.kind(), completion.usage);
            if let Some(usage) = completion.usage {
                self.printer.event(&Event::Usage { usage });
            }
            let message = completion.message;
            if !message.content.is_empty() {
                self.printer.event(&Event::AssistantText {
                    text: message.content.clone(),
                });
            }
            self.printer.end_line();
            report.answer.clone_from(&message.content);
            let calls = message.tool_calls.clone();
            self.push(message)?;
            if calls.is_empty() {
                return Ok(());
            }
            for call in &calls {
                self.check_stop()?;
                let text = self.call_tool(recording, call, report).await;
                self.push(Message::tool_result(call.id.clone(), text))?;
            }
        }
        Err(StepCap(self.max_steps).into())
    }

    /// Fails with [`Interrupted`] once the turn was asked to stop. A stop during a bash call
    /// lets the call finish (its command is killed and its changes committed), and what
    /// follows the call runs on in the same poll until something waits: without this check
    /// the next call, or the next model request and its whole answer, would still happen.
    fn check_stop(&self) -> Result<()> {
        if self.catch_interrupts && self.ctx.signals.interrupted() {
            return Err(Interrupted.into());
        }
        Ok(())
    }

    /// After an interrupted turn, answers the tool calls of the last assistant message that
    /// got no result, so the history stays one a model accepts (every call answered).
    fn answer_dangling_calls(&mut self) -> Result<()> {
        let transcript = self.history.transcript();
        let Some(index) = transcript.iter().rposition(|m| m.role == Role::Assistant) else {
            return Ok(());
        };
        let answered: Vec<String> = transcript[index + 1..]
            .iter()
            .filter_map(|m| m.tool_call_id.clone())
            .collect();
        let missing: Vec<String> = transcript[index]
            .tool_calls
            .iter()
            .filter(|call| !answered.contains(&call.id))
            .map(|call| call.id.clone())
            .collect();
        for id in missing {
            self.push(Message::tool_result(
                id,
                "the user interrupted the turn before this call finished; it may have run partly",
            ))
            .context("cannot save the session")?;
        }
        Ok(())
    }
}

/// The first line of a prompt, cut to a length fit for `shiro log`.
fn summary_of(prompt: &str) -> String {
    const MAX: usize = 80;
    let line = prompt
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    match line.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::Config;
    use crate::events::Mode;
    use crate::input::Lines;
    use crate::permissions::Mode as Permission;
    use crate::render::Color;
    use crate::signals::Signals;

    /// A workspace `ws` in a new temporary directory, whose `state` beside it [`context`]
    /// keeps the workspace's state in.
    pub(crate) fn workspace() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir(&root).unwrap();
        (dir, root)
    }

    /// A context on `root` (made by [`workspace`]) with no terminal, no signals and bash
    /// without capture.
    pub(crate) fn context(root: std::path::PathBuf, config: Config) -> Context {
        let home = root.parent().unwrap().join("state");
        Context {
            config,
            state: shiro_undo::StateDir::of_workspace(&home, &root),
            root,
            color: Color::Never,
            signals: Signals::default(),
            bash: shiro_tools::tools::bash(),
            env: crate::environment::Environment::default(),
        }
    }

    /// An agent in `ctx` playing `script`, printing nowhere, with `session` and `mode`.
    pub(crate) fn agent<'a>(
        ctx: &'a Context,
        script: &str,
        session: Session,
        mode: Permission,
        max_steps: usize,
    ) -> Agent<'a> {
        let tools = shiro_tools::tools::all();
        Agent {
            ctx,
            provider: Ok(Box::new(ReplayProvider::from_script(script).unwrap())),
            specs: specs(&tools),
            tools,
            history: Conversation::default(),
            session,
            printer: Printer::new(
                Box::new(std::io::sink()),
                Box::new(std::io::sink()),
                Mode::Interactive,
                Color::Never,
            ),
            input: Box::new(Lines::new(Box::new(std::io::empty()))),
            approvals: Approvals::new(mode, true),
            max_steps,
            catch_interrupts: false,
            bash_running: tokio::sync::watch::Sender::new(false),
            limits: TurnLimits::default(),
            usage: SessionUsage::default(),
            system_prompt: SYSTEM_PROMPT.to_owned(),
            mcp: McpClients::default(),
            skills: None,
        }
    }

    #[tokio::test]
    async fn the_step_cap_ends_a_turn_that_never_stops_calling_tools() {
        let (_dir, root) = workspace();
        let ctx = context(root.clone(), Config::load(&root, None).unwrap());
        let call = serde_json::json!({"text": "", "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]});
        let script = serde_json::json!({"responses": [call, call, call]}).to_string();
        let session = Session::create(&ctx.state).unwrap();
        let mut agent = agent(&ctx, &script, session, Permission::ReadOnly, 2);
        let report = agent.turn("look around").await.unwrap();
        assert_eq!(report.steps, 2);
        assert!(
            report
                .error
                .as_deref()
                .unwrap_or("")
                .contains("the step cap"),
            "{report:?}"
        );
        assert_eq!(
            report.turn_id, None,
            "a turn that changed nothing is not recorded"
        );
        // user, then (assistant call, tool result) twice: every call is answered.
        let roles: Vec<Role> = agent.history.transcript().iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Assistant,
                Role::Tool
            ]
        );
    }

    /// Where the undo log cannot be opened (here `.shiro` is a file, which stops root as well
    /// as anyone; a read-only directory does the same for other users), an unsaved session
    /// still answers: read-only tools run, and changes and bash are refused, never run
    /// unrecorded.
    #[tokio::test]
    async fn without_an_undo_log_reads_run_and_changes_are_refused() {
        let (dir, root) = workspace();
        std::fs::write(root.join("a.txt"), "hello\n").unwrap();
        let config = Config::load(&root, None).unwrap();
        std::fs::write(dir.path().join("state"), "not a directory").unwrap();
        let ctx = context(root, config);
        let script = serde_json::json!({"responses": [
            {"text": "", "tool_calls": [
                {"name": "read_file", "arguments": {"path": "a.txt"}},
                {"name": "write_file", "arguments": {"path": "b.txt", "content": "b"}},
                {"name": "bash", "arguments": {"command": "touch c.txt"}}]},
            {"text": "done"}
        ]})
        .to_string();
        let session = Session::unsaved("cannot use the sessions directory");
        let mut agent = agent(&ctx, &script, session, Permission::Yes, 5);
        let report = agent.turn("look, then change").await.unwrap();
        assert_eq!(report.error, None, "{report:?}");
        assert_eq!(report.turn_id, None);
        assert_eq!(
            report.unrecordable,
            ["write_file b.txt", "bash touch c.txt"]
        );
        let results: Vec<&str> = agent
            .history
            .transcript()
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| m.content.as_str())
            .collect();
        assert!(results[0].contains("hello"), "{results:?}");
        for refused in &results[1..] {
            assert!(
                refused.starts_with(
                    "cannot record this change for undo (cannot open the undo store: "
                ) && refused.ends_with("); nothing was run"),
                "{refused}"
            );
        }
        assert!(!ctx.root.join("b.txt").exists());
        assert!(!ctx.root.join("c.txt").exists());
    }

    /// A front end that sends typed ops drives the same loop as one that types: a message,
    /// approvals answered as values (one that answers nothing is asked again), then undo and
    /// redo; an answer with nothing to answer changes nothing, and the end of the queue ends
    /// the session.
    #[tokio::test]
    async fn typed_ops_drive_the_loop() {
        use crate::input::Ops;
        use crate::protocol::{Answer, Op};

        let (_dir, root) = workspace();
        let ctx = context(root.clone(), Config::load(&root, None).unwrap());
        let script = serde_json::json!({"responses": [
            {"text": "", "tool_calls": [
                {"name": "write_file", "arguments": {"path": "a.txt", "content": "a\n"}},
                {"name": "write_file", "arguments": {"path": "b.txt", "content": "b\n"}}]},
            {"text": "done"}
        ]})
        .to_string();
        let session = Session::create(&ctx.state).unwrap();
        let mut agent = agent(&ctx, &script, session, Permission::Ask, 5);
        agent.start_conversation().unwrap();
        let registry = crate::headless::registry(&ctx);
        let queued = |ops: Vec<Op>| {
            let (sender, queue) = std::sync::mpsc::channel();
            for op in ops {
                sender.send(op).unwrap();
            }
            Box::new(Ops::new(queue))
        };
        agent.input = queued(vec![
            Op::Submit("write two files".into()),
            Op::Approve(Answer::Once),
            // Not an answer to an approval: asked again.
            Op::Redo,
            Op::Approve(Answer::No(Some("not b".into()))),
            // Nothing waits for an answer at the prompt.
            Op::Approve(Answer::Once),
        ]);
        crate::repl::run(&mut agent, &registry).await.unwrap();
        assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "a\n");
        assert!(!root.join("b.txt").exists(), "b.txt was denied");
        let denied = agent
            .history
            .transcript()
            .iter()
            .any(|m| m.role == Role::Tool && m.content.contains("Their reason: not b"));
        assert!(denied, "the reason reaches the model");

        agent.input = queued(vec![Op::Undo]);
        crate::repl::run(&mut agent, &registry).await.unwrap();
        assert!(!root.join("a.txt").exists(), "undone");
        let roles: Vec<Role> = agent.history.transcript().iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::System], "the conversation rewound");

        agent.input = queued(vec![Op::Redo]);
        crate::repl::run(&mut agent, &registry).await.unwrap();
        assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "a\n");
    }
}
