//! Compaction: the model summarises the older part of the conversation, and the summary
//! takes its place in what the model is sent, so that a long session does not end in a
//! context-length error. `/compact [focus]` asks for it; before a request, it happens by
//! itself when the context fills `[model] compact_at` of the window. A compaction keeps the
//! running turn whole, so when that turn alone fills the window, its older tool outputs are
//! cleared instead: a fixed note takes their place (see `docs/cli.md`, "Compaction").
//!
//! The session file keeps every message and records the compaction as a line of its own
//! (see [`super::conversation`]), so `/undo` of a turn made before a compaction brings the
//! replaced messages back.

use anyhow::{Result, anyhow};
use shiro_providers::{ChatRequest, Message, StreamEvent};

use super::conversation::Conversation;
use super::protocol::Phase;
use super::session::Line;
use super::turn::{Agent, Interrupted};
use crate::signals::Handling;

/// The instruction that asks the model for a summary. Fixed text, so requests are stable.
pub const SUMMARY_PROMPT: &str = "Summarise the conversation above for yourself: the summary \
will replace it, and the work goes on from the summary alone. Include what the user asked \
for and the preferences or constraints they stated; the decisions made and why; every file \
read, created or changed (with its path) and what changed in it; the commands run and the \
results that still matter; the errors met and how they were resolved; and what remains to \
be done. Be specific (names, paths, values) and brief. Answer with the summary only.";

/// What asked for a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// `/compact`.
    Command,
    /// The context filled the share of the window `[model] compact_at` sets.
    Auto {
        /// The context's tokens (measured, else estimated).
        tokens: u64,
        /// The window.
        window: u64,
    },
}

/// How a compaction went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compacted {
    /// No turn begins after the part already compacted: the last turn is kept as it is,
    /// so there is nothing to summarise.
    Nothing,
    /// `replaced` messages the model saw are now a summary of `summary_chars` characters.
    Done {
        /// How many transcript messages the summary replaced in the model's context.
        replaced: usize,
        /// The summary's length in characters.
        summary_chars: usize,
    },
    /// The model failed (or there is none); nothing changed.
    Failed(String),
}

/// The request for a summary of `context` (what the model sees, up to the cut), with the
/// user's focus when they gave one.
pub fn summary_request(context: &[Message], focus: &str) -> Vec<Message> {
    let mut messages = context.to_vec();
    let focus = focus.trim();
    let prompt = if focus.is_empty() {
        SUMMARY_PROMPT.to_owned()
    } else {
        format!("{SUMMARY_PROMPT}\n\nThe user asks the summary to focus on: {focus}")
    };
    messages.push(Message::user(prompt));
    messages
}

/// What the user is told when a compaction starts.
pub fn start_text(trigger: Trigger, replaced: usize) -> String {
    let why = match trigger {
        Trigger::Command => String::new(),
        Trigger::Auto { tokens, window } => format!(
            "the context holds about {tokens} of the model's {window} tokens ({}%); ",
            tokens.saturating_mul(100) / window.max(1)
        ),
    };
    format!("{why}compacting… (the model summarises the {replaced} messages before the last turn)")
}

/// What the user is told when a compaction ends.
pub fn outcome_text(outcome: &Compacted) -> String {
    match outcome {
        Compacted::Nothing => "nothing to compact: every turn before the last is already summarised (or there is none), and the last turn is always kept as it is".to_owned(),
        Compacted::Done { replaced, summary_chars } => format!(
            "compacted: the model now sees a summary ({summary_chars} characters) instead of {replaced} earlier messages, then the last turn as it was; the session file keeps every message, and /undo of an earlier turn brings them back"
        ),
        Compacted::Failed(why) => format!("compaction failed: {why}; the conversation is unchanged"),
    }
}

/// What the user is told when older tool outputs are cleared from the model's context.
pub fn cleared_text(tokens: u64, window: u64, cleared: usize) -> String {
    let outputs = if cleared == 1 { "output" } else { "outputs" };
    format!(
        "the context holds about {tokens} of the model's {window} tokens ({}%), and the running turn is all there is left to summarise: the model is now sent a note in place of {cleared} earlier tool {outputs} (the session file keeps every output, and the model can call a tool again)",
        tokens.saturating_mul(100) / window.max(1)
    )
}

/// `/status`'s line about compaction: how many are in effect, how much of the transcript
/// the model sees as a summary, and when the next happens by itself.
pub fn status_line(
    history: &Conversation,
    threshold: Option<(u64, u64)>,
    share: Option<f64>,
) -> String {
    let done = match history.compactions().len() {
        0 => "compactions: none".to_owned(),
        n => format!(
            "compactions: {n} (the model sees a summary in place of {} of the session's {} messages)",
            history.summarised(),
            history.len()
        ),
    };
    let auto = match (threshold, share) {
        (Some((tokens, window)), _) => {
            format!("automatic at about {tokens} tokens of the window of {window}")
        }
        (None, Some(share)) if share <= 0.0 => {
            "automatic compaction off ([model] compact_at = 0)".to_owned()
        }
        (None, _) => {
            "automatic compaction off: the context window is unknown (set [model] context_window)"
                .to_owned()
        }
    };
    let done = match history.cleared() {
        0 => done,
        n => format!("{done}; tool outputs cleared: {n}"),
    };
    format!("{done}; {auto}")
}

impl Agent<'_> {
    /// The context's size in tokens at which a compaction happens by itself, with the
    /// window: `None` when `[model] compact_at` is 0 or the window is unknown.
    pub fn compact_threshold(&self) -> Option<(u64, u64)> {
        let model = &self.ctx.config.model;
        let share = model
            .compact_at
            .unwrap_or(crate::config::DEFAULT_COMPACT_AT);
        let window = model.context_window.or_else(|| {
            let name = self.provider.as_ref().ok()?.model();
            crate::config::context_window(name)
        })?;
        // `as` saturates: a share of at most 1 of a window in u64 always fits.
        let threshold = (window as f64 * share) as u64;
        (share > 0.0 && threshold > 0).then_some((threshold, window))
    }

    /// How many tokens the context holds: the last request's count while the context is
    /// the one it measured, else an estimate.
    pub fn context_tokens(&self) -> u64 {
        self.usage
            .context
            .unwrap_or_else(|| self.history.estimated_tokens())
    }

    /// Before a request: compacts when the context fills the configured share of the
    /// window, telling the user. A failed compaction is reported and the request goes on.
    /// When the context is still that full (the running turn alone fills it, and a
    /// compaction always keeps that turn), the older tool outputs of the conversation are
    /// cleared from what the model is sent ([`Agent::clear_outputs`]). Only failures of the
    /// session file are errors.
    pub(super) async fn compact_if_full(&mut self) -> Result<()> {
        let Some((threshold, window)) = self.compact_threshold() else {
            return Ok(());
        };
        let tokens = self.context_tokens();
        if tokens < threshold {
            return Ok(());
        }
        self.compact(Trigger::Auto { tokens, window }, "").await?;
        let tokens = self.context_tokens();
        if tokens >= threshold {
            self.clear_outputs(tokens, window)?;
        }
        Ok(())
    }

    /// Replaces the output of every tool call before the latest step by a short note in
    /// what the model is sent, and records it (in the session file first), telling the
    /// user. Nothing happens when no output is left to clear.
    fn clear_outputs(&mut self, tokens: u64, window: u64) -> Result<()> {
        let Some(before) = self.history.clearing_point() else {
            return Ok(());
        };
        let at = self.history.len();
        // In memory first, which checks that it fits (see `compact`).
        let cleared = self
            .history
            .clear(before)
            .map_err(|misfit| anyhow!("{misfit}"))?;
        self.session.append(&Line::Clear { at, before })?;
        self.usage.context = None;
        self.printer.info(&cleared_text(tokens, window, cleared));
        Ok(())
    }

    /// `/compact [focus]`: compacts now, and lets Ctrl-C stop the summary request (nothing
    /// changes then).
    pub async fn compact_command(&mut self, focus: &str) -> Result<Compacted> {
        if !self.catch_interrupts {
            return self.compact(Trigger::Command, focus).await;
        }
        let signals = self.ctx.signals.clone();
        signals.set(Handling::Cancel);
        // The summary is recorded with no wait between writing the session line and
        // changing the conversation, so a stop leaves both as they were, or both changed.
        let finished = tokio::select! {
            outcome = self.compact(Trigger::Command, focus) => Some(outcome),
            () = signals.cancelled() => None,
        };
        signals.set(Handling::Idle);
        finished.unwrap_or_else(|| {
            let outcome = Compacted::Failed(Interrupted.to_string());
            self.printer.info(&outcome_text(&outcome));
            Ok(outcome)
        })
    }

    /// Asks the model for a summary of the messages before the last turn and records it
    /// (in the session file first). The user sees when it starts and how it ended; its
    /// tokens count in the session's usage. Only failures of the session file are errors:
    /// a model that fails leaves the conversation as it was.
    pub async fn compact(&mut self, trigger: Trigger, focus: &str) -> Result<Compacted> {
        let Some(keep_from) = self.history.cut() else {
            let outcome = Compacted::Nothing;
            if trigger == Trigger::Command {
                self.printer.info(&outcome_text(&outcome));
            }
            return Ok(outcome);
        };
        let replaced = self.history.len_to_summarise(keep_from);
        self.printer.info(&start_text(trigger, replaced));
        let outcome = match self.summarise(keep_from, focus).await {
            Ok(summary) => {
                let summary_chars = summary.chars().count();
                let at = self.history.len();
                // In memory first, which checks that it fits: a line that did not would
                // leave a session file that no longer loads. Should the line then fail to be
                // written, a resumed session sends the whole transcript, losing nothing.
                self.history
                    .compact(keep_from, summary.clone())
                    .map_err(|misfit| anyhow!("{misfit}"))?;
                self.session.append(&Line::Compact {
                    at,
                    keep_from,
                    summary,
                })?;
                self.usage.context = None;
                Compacted::Done {
                    replaced,
                    summary_chars,
                }
            }
            Err(why) => Compacted::Failed(why),
        };
        self.printer.info(&outcome_text(&outcome));
        Ok(outcome)
    }

    /// The model's summary of the context before `keep_from`, or why there is none. The
    /// request offers no tools; its text is not shown (the user sees "compacting…"), its
    /// retries are.
    async fn summarise(&mut self, keep_from: usize, focus: &str) -> Result<String, String> {
        let provider = self.provider.as_ref().map_err(Clone::clone)?;
        let context = self.history.context();
        let kept = self.history.len() - keep_from;
        let messages = summary_request(&context[..context.len() - kept], focus);
        self.printer.phase(Phase::Waiting);
        let printer = &mut self.printer;
        let completion = provider
            .complete(
                &ChatRequest {
                    messages: &messages,
                    tools: &[],
                },
                &mut |event| {
                    if matches!(event, StreamEvent::Retrying { .. }) {
                        printer.stream(event);
                    }
                },
            )
            .await;
        let completion = completion.map_err(|err| err.to_string())?;
        self.usage.add(provider.kind(), completion.usage);
        let summary = completion.message.content.trim().to_owned();
        if summary.is_empty() {
            return Err("the model answered with an empty summary".to_owned());
        }
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use async_trait::async_trait;
    use proptest::prelude::*;
    use serde_json::json;
    use shiro_undo::UndoOptions;

    use super::*;
    use crate::config::Config;
    use crate::permissions::Mode as Permission;
    use crate::session::Session;
    use crate::turn::SYSTEM_PROMPT;
    use crate::turn::tests::{agent, context, workspace};
    use shiro_providers::{
        Completion, FinishReason, Provider, ProviderError, Role, Sink, ToolCall,
    };

    /// A model that answers from the request: a prompt that is a tool call as JSON
    /// (`{"name": …, "arguments": {…}}`) gets that call, a tool's result gets "done", and a
    /// request without tools (a summary) gets a text naming what it was sent, or fails.
    #[derive(Debug, Default)]
    struct Model {
        fail_summaries: bool,
    }

    #[async_trait]
    impl Provider for Model {
        async fn complete(
            &self,
            request: &ChatRequest<'_>,
            _sink: &mut Sink<'_>,
        ) -> Result<Completion, ProviderError> {
            let mut message = Message::assistant("done");
            if request.tools.is_empty() {
                if self.fail_summaries {
                    return Err(ProviderError::Rejected {
                        status: 400,
                        detail: "too long".into(),
                    });
                }
                let seen: Vec<String> = request.messages[..request.messages.len() - 1]
                    .iter()
                    .map(|m| m.content.chars().take(40).collect())
                    .collect();
                message = Message::assistant(format!("summary of {seen:?}"));
            } else {
                // The turn's prompt: one call, or `{"calls": [...]}` made one a step.
                let prompt = request
                    .messages
                    .iter()
                    .rposition(|m| m.role == Role::User)
                    .unwrap();
                let asked: serde_json::Value =
                    serde_json::from_str(&request.messages[prompt].content).unwrap();
                let calls = match asked.get("calls") {
                    Some(calls) => calls.as_array().unwrap().clone(),
                    None => vec![asked],
                };
                let answered = request.messages[prompt..]
                    .iter()
                    .filter(|m| m.role == Role::Tool)
                    .count();
                if let Some(call) = calls.get(answered) {
                    message.content = String::new();
                    message.tool_calls = vec![ToolCall {
                        id: format!("call_{}", request.messages.len()),
                        name: call["name"].as_str().unwrap().to_owned(),
                        arguments: call["arguments"].to_string(),
                    }];
                }
            }
            Ok(Completion {
                message,
                finish_reason: FinishReason::Stop,
                usage: None,
            })
        }

        fn model(&self) -> &str {
            "test"
        }

        fn kind(&self) -> &'static str {
            "test"
        }
    }

    /// What a session does next.
    #[derive(Debug, Clone, Copy)]
    enum Op {
        /// A turn that writes (or, when it exists and `edit`, edits) one of three files.
        Turn { file: usize, edit: bool },
        /// A turn of several steps: it writes a long text to one of the files, then reads
        /// it three times (the outputs fill a small window by themselves).
        LongTurn { file: usize },
        /// `/compact`.
        Compact,
        /// `/undo`.
        Undo,
    }

    const FILES: [&str; 3] = ["a.txt", "b.txt", "sub/c.txt"];

    fn files(root: &std::path::Path) -> BTreeMap<&'static str, Option<Vec<u8>>> {
        FILES
            .iter()
            .map(|name| (*name, std::fs::read(root.join(name)).ok()))
            .collect()
    }

    /// The state before a turn, which its undo must bring back.
    #[derive(Debug)]
    struct Before {
        files: BTreeMap<&'static str, Option<Vec<u8>>>,
        context: Vec<Message>,
        transcript: Vec<Message>,
    }

    /// Runs `ops` in a session on a fresh workspace with a real undo store (`window`: the
    /// context window, with compaction at half of it; `None`: no automatic compaction),
    /// checking after every undo that the files and the model's context are those before
    /// the turn undone, and after every step that the session file replays to the same
    /// conversation. Returns how many compactions ran, how many undos went past one, how
    /// many clearings ran, and how many undos went past one of those.
    fn run(ops: &[Op], window: Option<u64>) -> (usize, usize, usize, usize) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (_dir, root) = workspace();
            let mut config = Config::load(&root, None).unwrap();
            config.model.context_window = window;
            config.model.compact_at = Some(0.5);
            let ctx = context(root.clone(), config);
            let script = json!({"responses": [{"text": "unused"}]}).to_string();
            let session = Session::create(&ctx.state).unwrap();
            let id = session.id().to_owned();
            let mut agent = agent(&ctx, &script, session, Permission::Yes, 10);
            agent.provider = Ok(Box::new(Model::default()));
            agent.push(Message::system(SYSTEM_PROMPT)).unwrap();
            let mut undoable: Vec<Before> = Vec::new();
            let (mut compactions, mut across) = (0, 0);
            let (mut clearings, mut across_clearings) = (0, 0);
            for (n, op) in ops.iter().enumerate() {
                let compacted = agent.history.compactions().len();
                let cleared = agent.history.clearings().len();
                match op {
                    Op::Turn { file, edit } => {
                        let path = FILES[*file];
                        let content = format!("turn {n}\n");
                        let call = match std::fs::read_to_string(root.join(path)) {
                            Ok(old) if *edit => json!({"name": "edit_file", "arguments":
                                {"path": path, "old_string": old, "new_string": content}}),
                            _ => json!({"name": "write_file", "arguments":
                                {"path": path, "content": content}}),
                        };
                        let before = Before {
                            files: files(&root),
                            context: agent.history.context(),
                            transcript: agent.history.transcript().to_vec(),
                        };
                        let report = agent.turn(&call.to_string()).await.unwrap();
                        assert_eq!(report.error, None, "{report:?}");
                        assert!(report.turn_id.is_some(), "{report:?}");
                        undoable.push(before);
                    }
                    Op::LongTurn { file } => {
                        let path = FILES[*file];
                        let content = format!("turn {n}\n{}\n", "long line ".repeat(200));
                        let read = json!({"name": "read_file", "arguments": {"path": path}});
                        let calls = json!({"calls": [
                            {"name": "write_file", "arguments": {"path": path, "content": content}},
                            read, read, read,
                        ]});
                        let before = Before {
                            files: files(&root),
                            context: agent.history.context(),
                            transcript: agent.history.transcript().to_vec(),
                        };
                        let report = agent.turn(&calls.to_string()).await.unwrap();
                        assert_eq!(report.error, None, "{report:?}");
                        assert_eq!(report.steps, 5, "{report:?}");
                        undoable.push(before);
                    }
                    Op::Compact => {
                        agent.compact(Trigger::Command, "").await.unwrap();
                    }
                    Op::Undo => {
                        let options = UndoOptions {
                            force: false,
                            dry_run: false,
                        };
                        let text = crate::travel::undo(&mut agent, options).await;
                        match undoable.pop() {
                            Some(before) => {
                                assert_eq!(files(&root), before.files, "{text}");
                                assert_eq!(agent.history.context(), before.context, "{text}");
                                assert_eq!(agent.history.transcript(), before.transcript);
                                if agent.history.compactions().len() < compacted {
                                    across += 1;
                                }
                                if agent.history.clearings().len() < cleared {
                                    across_clearings += 1;
                                }
                            }
                            None => assert!(text.contains("nothing to undo"), "{text}"),
                        }
                    }
                }
                compactions += agent.history.compactions().len().saturating_sub(compacted);
                clearings += agent.history.clearings().len().saturating_sub(cleared);
                let reopened = crate::session::load(&ctx.state, Some(&id)).unwrap();
                assert_eq!(reopened.history, agent.history, "after {op:?}");
                assert!(reopened.notices.is_empty());
            }
            (compactions, across, clearings, across_clearings)
        })
    }

    fn turn(file: usize) -> Op {
        Op::Turn { file, edit: true }
    }

    #[test]
    fn undo_across_one_compaction_brings_the_replaced_messages_back() {
        let ops = [turn(0), turn(1), turn(0), Op::Compact, Op::Undo, Op::Undo];
        assert_eq!(run(&ops, None), (1, 1, 0, 0));
    }

    #[test]
    fn undo_across_two_compactions_goes_back_one_compaction_at_a_time() {
        let ops = [
            turn(0),
            turn(1),
            Op::Compact,
            turn(2),
            turn(0),
            Op::Compact,
            Op::Undo,
            Op::Undo,
            Op::Undo,
            Op::Undo,
        ];
        assert_eq!(run(&ops, None), (2, 2, 0, 0));
    }

    #[test]
    fn automatic_compaction_is_part_of_its_turn_and_undone_with_it() {
        let ops: Vec<Op> = (0..8).map(|n| turn(n % 3)).chain([Op::Undo; 8]).collect();
        let (compactions, across, ..) = run(&ops, Some(600));
        assert!(compactions >= 2, "{compactions}");
        assert_eq!(across, compactions);
    }

    /// A turn whose own tool outputs fill the window: a compaction keeps it whole, so its
    /// older outputs are cleared, once a step, and undoing it brings them back.
    #[test]
    fn a_turn_that_alone_fills_the_window_has_its_older_outputs_cleared() {
        let ops = [turn(1), Op::LongTurn { file: 0 }, Op::Undo, Op::Undo];
        let (compactions, across, clearings, across_clearings) = run(&ops, Some(600));
        assert_eq!(
            (compactions, across),
            (1, 1),
            "the first turn is summarised"
        );
        assert_eq!(clearings, 3, "before the 3rd, 4th and 5th requests");
        assert_eq!(across_clearings, 1, "one undo takes both back");
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..FILES.len(), any::<bool>()).prop_map(|(file, edit)| Op::Turn { file, edit }),
            1 => (0..FILES.len()).prop_map(|file| Op::LongTurn { file }),
            1 => Just(Op::Compact),
            2 => Just(Op::Undo),
        ]
    }

    /// Any sequence of turns (some that fill a small window by themselves, which clears
    /// their older tool outputs), compactions (asked for, or by a small window) and undos:
    /// every undo restores the files and the model's context of before its turn, and
    /// the session file always replays to the conversation in memory.
    #[test]
    fn undo_is_exact_across_compactions() {
        // Its own runner: every step writes the workspace, the undo store and the session
        // file, so the count stays as set here whatever `PROPTEST_CASES` says.
        #[allow(clippy::disallowed_methods)] // The test's own setting, which xtask soak raises.
        let cases = std::env::var("SHIRO_DISK_CASES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(24);
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            cases,
            failure_persistence: None,
            ..ProptestConfig::default()
        });
        let strategy = (
            prop::collection::vec(op(), 1..16),
            prop_oneof![Just(None), Just(Some(600))],
        );
        runner
            .run(&strategy, |(ops, window)| {
                run(&ops, window);
                Ok(())
            })
            .unwrap();
    }

    /// A model that fails leaves everything as it was, and says so.
    #[tokio::test]
    async fn a_failed_summary_changes_nothing() {
        let (_dir, root) = workspace();
        let ctx = context(root.clone(), Config::load(&root, None).unwrap());
        let session = Session::create(&ctx.state).unwrap();
        let script = json!({"responses": [{"text": "unused"}]}).to_string();
        let mut agent = agent(&ctx, &script, session, Permission::Yes, 10);
        agent.provider = Ok(Box::new(Model {
            fail_summaries: true,
        }));
        for message in [
            Message::system("s"),
            Message::user("one"),
            Message::assistant("a"),
            Message::user("two"),
        ] {
            agent.push(message).unwrap();
        }
        let before = agent.history.clone();
        let outcome = agent.compact(Trigger::Command, "").await.unwrap();
        assert_eq!(agent.history, before);
        let reopened = crate::session::load(&ctx.state, Some(agent.session.id())).unwrap();
        assert_eq!(reopened.history, before);
        insta::assert_snapshot!(outcome_text(&outcome), @r#"compaction failed: the server refused the request (400): too long; the conversation is unchanged"#);
    }

    #[test]
    fn the_summary_request_and_what_the_user_reads() {
        let request = summary_request(&[Message::user("hi")], "  the parser  ");
        insta::assert_snapshot!(request[1].content, @r#"
        Summarise the conversation above for yourself: the summary will replace it, and the work goes on from the summary alone. Include what the user asked for and the preferences or constraints they stated; the decisions made and why; every file read, created or changed (with its path) and what changed in it; the commands run and the results that still matter; the errors met and how they were resolved; and what remains to be done. Be specific (names, paths, values) and brief. Answer with the summary only.

        The user asks the summary to focus on: the parser
        "#);
        assert_eq!(summary_request(&[], "")[0].content, SUMMARY_PROMPT);
        let texts = [
            start_text(Trigger::Command, 12),
            start_text(
                Trigger::Auto {
                    tokens: 104_000,
                    window: 128_000,
                },
                30,
            ),
            outcome_text(&Compacted::Nothing),
            outcome_text(&Compacted::Done {
                replaced: 12,
                summary_chars: 840,
            }),
        ];
        insta::assert_snapshot!(texts.join("\n"), @r#"
        compacting… (the model summarises the 12 messages before the last turn)
        the context holds about 104000 of the model's 128000 tokens (81%); compacting… (the model summarises the 30 messages before the last turn)
        nothing to compact: every turn before the last is already summarised (or there is none), and the last turn is always kept as it is
        compacted: the model now sees a summary (840 characters) instead of 12 earlier messages, then the last turn as it was; the session file keeps every message, and /undo of an earlier turn brings them back
        "#);
        let mut history = crate::conversation::Conversation::from(vec![
            Message::system("s"),
            Message::user("one"),
            Message::assistant("a"),
            Message::user("two"),
        ]);
        let lines = [
            status_line(&history, None, None),
            status_line(&history, None, Some(0.0)),
        ];
        history.compact(3, "S".into()).unwrap();
        let lines = [
            lines[0].clone(),
            lines[1].clone(),
            status_line(&history, Some((102_400, 128_000)), None),
        ];
        insta::assert_snapshot!(lines.join("\n"), @r#"
        compactions: none; automatic compaction off: the context window is unknown (set [model] context_window)
        compactions: none; automatic compaction off ([model] compact_at = 0)
        compactions: 1 (the model sees a summary in place of 2 of the session's 4 messages); automatic at about 102400 tokens of the window of 128000
        "#);
    }
}
