//! The calls of a turn: each one parsed, held to the turn's limits, approved (or asked
//! about, or denied) and run — shiro's own tools through the undo log, an MCP server's
//! through its client.

use anyhow::Result;
use serde_json::Value;
use shiro_tools::{Change, Tool as _};

use super::{Agent, Log, TurnReport};
use crate::approve::{self, Answer, Approvals, Decision, Refusal, Scope};
use crate::events::Printer;
use crate::headless::{self, Context};
use crate::input::Input;
use crate::permissions::{self, Kind, Mode, Source, Target, Verdict};
use crate::protocol::{Event, Op, Status, brief};

impl Agent<'_> {
    /// Runs one tool call (after approval) and returns the text for the model.
    pub(super) async fn call_tool(
        &mut self,
        recording: Log<'_>,
        call: &shiro_providers::ToolCall,
        report: &mut TurnReport,
    ) -> String {
        let parsed: Result<Value, _> = if call.arguments.trim().is_empty() {
            Ok(Value::Object(serde_json::Map::new()))
        } else {
            serde_json::from_str(&call.arguments)
        };
        self.printer.event(&Event::ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: parsed
                .as_ref()
                .map_or_else(|_| Value::String(call.arguments.clone()), Clone::clone),
        });
        let (status, text, changes) = self.run_call(recording, &call.name, parsed, report).await;
        self.printer.event(&Event::ToolResult {
            id: call.id.clone(),
            name: call.name.clone(),
            status,
            output: text.clone(),
            changes: changes.clone(),
        });
        report.changed.extend(changes);
        text
    }

    async fn run_call(
        &mut self,
        recording: Log<'_>,
        name: &str,
        parsed: Result<Value, serde_json::Error>,
        report: &mut TurnReport,
    ) -> (Status, String, Vec<Change>) {
        if self.mcp.owns(name) {
            return self.run_mcp_call(recording, name, parsed, report).await;
        }
        if name == crate::skill::SKILL_TOOL && self.skills.is_some() {
            return self.run_skill_call(name, parsed, report);
        }
        let Some(index) = self.tools.iter().position(|tool| tool.name() == name) else {
            let mut names: Vec<&str> = self.tools.iter().map(|tool| tool.name()).collect();
            names.extend(self.mcp.tools().map(|tool| tool.name.as_str()));
            return (
                Status::Error,
                format!("unknown tool {name:?}; the tools are: {}", names.join(", ")),
                Vec::new(),
            );
        };
        let tool = &self.tools[index];
        let is_bash = tool.name() == "bash";
        let changes = tool.is_mutating() || is_bash;
        let args = match self.admitted(name, parsed, changes, report) {
            Ok(args) => args,
            Err(refusal) => return refusal,
        };
        // In read-only mode, bash runs only in a read-only sandbox, where one can be made.
        // It then changes nothing in the workspace, but it still reads anything and may
        // reach the network, so it is weighed as in ask mode.
        let sandboxed = (is_bash && self.approvals.mode == Mode::ReadOnly)
            .then(|| self.ctx.bash.read_only())
            .flatten();
        let mode = match sandboxed {
            Some(_) => Mode::Ask,
            None => self.approvals.mode,
        };
        let target = match recording {
            Ok(recording) => permissions::target(tool.as_ref(), &args, recording.inner()).await,
            Err(_) => match self.ctx.workspace() {
                Ok(workspace) => permissions::target(tool.as_ref(), &args, &workspace).await,
                Err(_) => Target::Paths(Vec::new()),
            },
        };
        let verdict = match self.judged(mode, name, changes, &target, &args, report) {
            Ok(verdict) => verdict,
            Err(refusal) => return refusal,
        };
        if let Err(why) = recording
            && changes
        {
            report.unrecordable.push(format!("{name} {}", brief(&args)));
            return (
                Status::Error,
                format!("cannot record this change for undo ({why}); nothing was run"),
                Vec::new(),
            );
        }
        if let (true, Ok(recording)) = (changes, recording) {
            let preview = approve::preview(
                tool.as_ref(),
                &args,
                recording.inner(),
                self.printer.color(),
            )
            .await;
            self.printer.preview(&preview);
        }
        match &verdict {
            Verdict::Run(Some(rule)) => {
                self.printer.info(&format!("(runs without asking: {rule})"));
            }
            Verdict::Ask(None) if is_bash && self.limits.preapproved(&args) => {
                self.printer.info(&format!(
                    "(runs without asking: the /{} command's allowed-tools cover it)",
                    self.limits.command
                ));
            }
            Verdict::Ask(rule) => {
                let question = Question {
                    tool: name,
                    rule: rule.as_deref(),
                    target: &target,
                    changes,
                };
                if let Some(refusal) = self.ask_about(&question, &args, report) {
                    report.denied_change |= changes;
                    return refusal;
                }
            }
            Verdict::Run(None) | Verdict::Deny(_) => {}
        }
        // Borrowed again: asking needed the whole agent.
        let tool = &self.tools[index];
        let Ok(recording) = recording else {
            // Nothing to record: a read-only tool reads the workspace itself.
            let result = match self.ctx.workspace() {
                Ok(workspace) => tool.call(&workspace, args).await.map_err(|e| e.to_string()),
                Err(err) => Err(headless::error_text(&err)),
            };
            return match result {
                Ok(output) => (Status::Ok, output.text, output.changes),
                Err(text) => (Status::Error, text, Vec::new()),
            };
        };
        if tool.is_mutating()
            && let Err(err) = crate::headless::capture_ahead(tool.as_ref(), recording, &args).await
        {
            return (
                Status::Error,
                format!("{}; nothing was run", crate::headless::error_text(&err)),
                Vec::new(),
            );
        }
        if is_bash {
            // Flagged before it runs, so that a turn a crash cuts short still says it ran
            // bash.
            let mode = self.ctx.bash.runner().mode();
            recording.note_bash(headless::undo_capture(mode), &[]).await;
        }
        self.bash_running.send_replace(is_bash);
        let result = match &sandboxed {
            Some(bash) => bash.call(recording, args).await,
            None => tool.call(recording, args).await,
        };
        if tool.is_mutating() {
            let changes = result
                .as_ref()
                .map(|output| output.changes.as_slice())
                .unwrap_or_default();
            recording.note_tool(tool.name(), changes).await;
            // What the agent's tools changed is recorded; a background command's watch must
            // not name it as the command's.
            if let Some(background) = self.ctx.bash.background() {
                let paths: Vec<_> = changes.iter().flat_map(Change::paths).cloned().collect();
                background.recorded(&paths).await;
            }
        }
        // `bash`, and the background tools, which name what background commands changed.
        if let Ok(output) = &result
            && (is_bash || output.capture.is_some())
        {
            report.ran_bash |= is_bash;
            report
                .undo_notes
                .extend(headless::note_bash_output(recording, output, "/undo").await);
        }
        self.bash_running.send_replace(false);
        match result {
            Ok(output) => (Status::Ok, output.text, output.changes),
            Err(err) => (Status::Error, err.to_string(), Vec::new()),
        }
    }

    /// Runs one call of the `skill` tool. Loading a skill changes nothing and reads only its
    /// own folder, so it runs without asking; a deny or ask rule about it (`Skill`,
    /// `Skill(pdf-*)`) and a command's allowed-tools still hold.
    fn run_skill_call(
        &mut self,
        name: &str,
        parsed: Result<Value, serde_json::Error>,
        report: &mut TurnReport,
    ) -> (Status, String, Vec<Change>) {
        let args = match self.admitted(name, parsed, false, report) {
            Ok(args) => args,
            Err(refusal) => return refusal,
        };
        let skill = args.get("name").and_then(Value::as_str).unwrap_or("");
        let target = Target::Skill(skill.trim().trim_start_matches('/').to_lowercase());
        match self.judged(self.approvals.mode, name, false, &target, &args, report) {
            Err(refusal) => return refusal,
            Ok(Verdict::Ask(rule)) => {
                let question = Question {
                    tool: name,
                    rule: rule.as_deref(),
                    target: &target,
                    changes: false,
                };
                if let Some(refusal) = self.ask_about(&question, &args, report) {
                    return refusal;
                }
            }
            Ok(Verdict::Run(_) | Verdict::Deny(_)) => {}
        }
        let Some(registry) = &self.skills else {
            return (
                Status::Error,
                "no skill is offered in this session".to_owned(),
                Vec::new(),
            );
        };
        match crate::skill::call(registry, args) {
            Ok(text) => (Status::Ok, text, Vec::new()),
            Err(text) => (Status::Error, text, Vec::new()),
        }
    }

    /// Runs one call of an MCP server's tool, after the same limits, rules and approval as
    /// shiro's tools. shiro cannot see what it changes: the turn notes it, in its report and
    /// in the undo log, as it notes bash run without capture.
    async fn run_mcp_call(
        &mut self,
        recording: Log<'_>,
        name: &str,
        parsed: Result<Value, serde_json::Error>,
        report: &mut TurnReport,
    ) -> (Status, String, Vec<Change>) {
        let args = match self.admitted(name, parsed, true, report) {
            Ok(args) => args,
            Err(refusal) => return refusal,
        };
        // Nothing to approve when nothing can run.
        if let Some(why) = self.mcp.unavailable(name) {
            return (Status::Error, why, Vec::new());
        }
        let target = Target::Mcp;
        let verdict = match self.judged(self.approvals.mode, name, true, &target, &args, report) {
            Ok(verdict) => verdict,
            Err(refusal) => return refusal,
        };
        match &verdict {
            Verdict::Run(Some(rule)) => {
                self.printer.info(&format!("(runs without asking: {rule})"));
            }
            Verdict::Ask(rule) => {
                if self.approvals.interactive {
                    self.printer.info(
                        "(an MCP tool: shiro cannot see what it changes, and /undo cannot reverse it)",
                    );
                }
                let question = Question {
                    tool: name,
                    rule: rule.as_deref(),
                    target: &target,
                    changes: true,
                };
                if let Some(refusal) = self.ask_about(&question, &args, report) {
                    report.denied_change = true;
                    return refusal;
                }
            }
            Verdict::Run(None) | Verdict::Deny(_) => {}
        }
        if !report.mcp_tools.iter().any(|tool| tool == name) {
            report.mcp_tools.push(name.to_owned());
        }
        if let Ok(recording) = recording {
            // Noted before it runs, so that a turn a crash cuts short still names it.
            recording.note_tool(name, &[]).await;
        }
        let printer = &mut self.printer;
        let called = self
            .mcp
            .call(name, args, &mut |notice| {
                printer.info(&format!("error: {notice}"));
            })
            .await;
        match called {
            Ok(called) if called.is_error => (Status::Error, called.text, Vec::new()),
            Ok(called) => (Status::Ok, called.text, Vec::new()),
            Err(text) => (Status::Error, text, Vec::new()),
        }
    }

    /// What the permission rules and the mode say about a call of `name` (`changes`: whether
    /// it can change files) touching `target`; a refusal, noted in the report with its cause
    /// (a deny rule or read-only mode), when a rule or the mode denies it.
    fn judged(
        &self,
        mode: Mode,
        name: &str,
        changes: bool,
        target: &Target,
        args: &Value,
        report: &mut TurnReport,
    ) -> Result<Verdict, (Status, String, Vec<Change>)> {
        let verdict = self.approvals.rules.judge(mode, name, changes, target);
        if let Verdict::Deny(text) = verdict {
            let cause = if self.approvals.rules.denies(name, target) {
                Refusal::Rule
            } else {
                Refusal::ReadOnly
            };
            report
                .denied
                .push(format!("{name} {}{}", brief(args), cause.note()));
            if changes {
                report.denied_change = true;
                note_cause(report, cause);
            }
            return Err((Status::Denied, text, Vec::new()));
        }
        Ok(verdict)
    }

    /// The arguments of a call of `name`, when they are JSON and the turn's limits let it
    /// run; else the result for the model, and a refusal noted in the report (`changes`:
    /// whether the call can change files, run bash or call an MCP tool).
    fn admitted(
        &self,
        name: &str,
        parsed: Result<Value, serde_json::Error>,
        changes: bool,
        report: &mut TurnReport,
    ) -> Result<Value, (Status, String, Vec<Change>)> {
        let args = parsed.map_err(|err| {
            (
                Status::Error,
                format!("the arguments are not valid JSON ({err}); nothing was run"),
                Vec::new(),
            )
        })?;
        match self.limits.refusal(name, &args) {
            Some(refusal) => {
                let cause = Refusal::Command;
                report
                    .denied
                    .push(format!("{name} {}{}", brief(&args), cause.note()));
                if changes {
                    report.denied_change = true;
                    note_cause(report, cause);
                }
                Err((Status::Denied, refusal, Vec::new()))
            }
            None => Ok(args),
        }
    }

    /// Asks whether a call may run (see [`ask`]).
    fn ask_about(
        &mut self,
        question: &Question<'_>,
        args: &Value,
        report: &mut TurnReport,
    ) -> Option<(Status, String, Vec<Change>)> {
        ask(
            &mut self.approvals,
            self.ctx,
            &mut *self.input,
            &mut self.printer,
            question,
            args,
            report,
        )
    }
}

/// Asks the person whether a call may run, and keeps the rules of an "always" answer where
/// they say. Without a person to ask (`-p`), the call is denied.
fn decide(
    approvals: &mut Approvals,
    ctx: &Context,
    input: &mut dyn Input,
    printer: &mut Printer,
    question: &Question<'_>,
) -> Decision {
    if !approvals.interactive {
        let why = match (question.rule, Refusal::unanswered(question.rule, approvals.mode)) {
            (Some(rule), _) => format!(
                "The permission rule {rule} asks before every such call, with --yes or without."
            ),
            (None, Refusal::ReadOnlyBash) => "In read-only mode bash runs (in a read-only sandbox) only when approved or allowed by a rule, with --yes or without; read and search with the other tools instead, or tell the user the command, which --allowed-tools or an allow rule in .shiro/config.toml can allow.".to_owned(),
            (None, _) => "Tools that change files or run commands need it; the user can run again with --yes to allow them, or allow this call with --allowed-tools or a rule in .shiro/config.toml.".to_owned(),
        };
        return Decision::Deny(Some(why));
    }
    // An ask rule asks every time: an "always" answer would keep a rule it overrides.
    let always = match question.rule {
        Some(_) => None,
        None => permissions::narrowest(question.tool, question.target),
    };
    let always_text = always.as_ref().map(|rules| rules.join(", "));
    let offer = match (&always_text, question.rule) {
        (Some(text), _) => format!("always: {text}"),
        (None, Some(rule)) => format!("once (the rule {rule} asks every time)"),
        (None, None) => "once (no rule can cover this call)".to_owned(),
    };
    loop {
        let answer = match input.approve(question.tool, &offer, printer) {
            Op::Submit(line) => approve::parse_answer(&line),
            Op::Approve(answer) => Some(answer),
            Op::Interrupt | Op::Quit => return Decision::Deny(None),
            Op::Undo | Op::Redo | Op::Rewind | Op::Keep(_) => None,
        };
        match answer {
            Some(Answer::Once) => return Decision::Run,
            Some(Answer::Always) => {
                if let (Some(rules), Some(text)) = (&always, &always_text) {
                    keep(approvals, ctx, input, printer, rules, text);
                }
                return Decision::Run;
            }
            Some(Answer::No(reason)) => return Decision::Deny(reason),
            None => printer.info("answer y, a or n"),
        }
    }
}

/// Asks whether a call may run (see [`decide`]); `Some` with the result for the model, the
/// refusal noted in the report, when it may not.
fn ask(
    approvals: &mut Approvals,
    ctx: &Context,
    input: &mut dyn Input,
    printer: &mut Printer,
    question: &Question<'_>,
    args: &Value,
    report: &mut TurnReport,
) -> Option<(Status, String, Vec<Change>)> {
    match decide(approvals, ctx, input, printer, question) {
        Decision::Run => None,
        Decision::Deny(reason) => {
            // Without a person, nobody said no: the cause is what asked.
            let cause = (!approvals.interactive)
                .then(|| Refusal::unanswered(question.rule, approvals.mode));
            let note = cause.map_or("", Refusal::note);
            report
                .denied
                .push(format!("{} {}{note}", question.tool, brief(args)));
            if let (Some(cause), true) = (cause, question.changes) {
                note_cause(report, cause);
            }
            // Without a person, nobody denied it: say what asked instead.
            let text = match (cause, reason.as_deref()) {
                (Some(_), Some(why)) => approve::unanswered_text(why),
                _ => approve::denied_text(reason.as_deref()),
            };
            Some((Status::Denied, text, Vec::new()))
        }
    }
}

/// Notes `cause` among the report's causes of refused changes, once.
fn note_cause(report: &mut TurnReport, cause: Refusal) {
    if !report.refused.contains(&cause) {
        report.refused.push(cause);
    }
}

/// What [`decide`] asks about.
struct Question<'q> {
    /// The tool.
    tool: &'q str,
    /// The ask rule that insists on asking, if one does.
    rule: Option<&'q str>,
    /// What the call touches.
    target: &'q Target,
    /// Whether the call can change something (files, through bash, an MCP tool).
    changes: bool,
}

/// Asks where the rules of an "always" answer are kept, adds them to the session's rules,
/// and saves them in the config file chosen. A file that cannot be written is reported, and
/// the rules still hold for the session.
fn keep(
    approvals: &mut Approvals,
    ctx: &Context,
    input: &mut dyn Input,
    printer: &mut Printer,
    rules: &[String],
    text: &str,
) {
    let scope = loop {
        let scope = match input.keep(text, printer) {
            Op::Submit(line) => approve::parse_scope(&line),
            Op::Keep(scope) => Some(scope),
            Op::Interrupt | Op::Quit => break Scope::Session,
            Op::Undo | Op::Redo | Op::Rewind | Op::Approve(_) => None,
        };
        match scope {
            Some(scope) => break scope,
            None => printer.info("answer s, w or u"),
        }
    };
    let file = match scope {
        Scope::Session => None,
        Scope::Workspace => Some(Source::Workspace(
            ctx.root.join(".shiro").join("config.toml"),
        )),
        Scope::User => match &ctx.config.user_dir {
            Some(dir) => Some(Source::User(dir.join("config.toml"))),
            None => {
                printer.info("there is no user config directory (set SHIRO_CONFIG_DIR or HOME); kept for this session only");
                None
            }
        },
    };
    let saved = file.and_then(|source| {
        let (Source::Workspace(path) | Source::User(path)) = &source else {
            return None;
        };
        match permissions::save_allow(path, rules) {
            Ok(()) => {
                printer.info(&format!("saved {text} to the allow list of {source}"));
                Some(source)
            }
            Err(err) => {
                printer.info(&format!(
                    "error: {}; kept for this session only",
                    headless::error_text(&err)
                ));
                None
            }
        }
    });
    let source = saved.unwrap_or(Source::Session);
    // The rules were made from a call, so they parse; a failure would only lose the "always".
    let _ = approvals.rules.add(Kind::Allow, &source, rules);
}

/// What the user is told after a turn that called MCP tools.
pub(super) fn mcp_note(tools: &[String]) -> String {
    format!(
        "note: this turn called MCP {} {}; shiro cannot see what {} changed, and /undo does not reverse it",
        if tools.len() == 1 { "tool" } else { "tools" },
        tools.join(", "),
        if tools.len() == 1 { "it" } else { "they" }
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::{agent, context, workspace};
    use crate::approve::Refusal;
    use crate::config::Config;
    use crate::permissions::{Kind, Mode, Source};
    use crate::session::Session;

    /// Without a person (`-p`), each refused change is noted with what refused it: read-only
    /// mode, a deny rule, an ask rule nobody can answer, or the lack of `--yes`; a denied
    /// read is no refused change.
    #[tokio::test]
    async fn headless_refusals_are_noted_with_their_cause() {
        let (_dir, root) = workspace();
        let ctx = context(root.clone(), Config::load(&root, None).unwrap());
        let call = |name: &str, arguments: serde_json::Value| serde_json::json!({"name": name, "arguments": arguments});
        let script = serde_json::json!({"responses": [
            {"text": "", "tool_calls": [
                call("write_file", serde_json::json!({"path": "a.txt", "content": "a"})),
                call("write_file", serde_json::json!({"path": "b.txt", "content": "b"})),
                call("bash", serde_json::json!({"command": "git push"})),
                call("read_file", serde_json::json!({"path": "secret.txt"}))]},
            {"text": "done"}
        ]})
        .to_string();
        let cases = [
            // Deny rules are weighed before the mode.
            (Mode::ReadOnly, vec![Refusal::ReadOnly, Refusal::Rule]),
            (Mode::Yes, vec![Refusal::Rule, Refusal::AskRule]),
            (
                Mode::Ask,
                vec![Refusal::Unasked, Refusal::Rule, Refusal::AskRule],
            ),
        ];
        for (mode, causes) in cases {
            let session = Session::create(&ctx.state).unwrap();
            let mut agent = agent(&ctx, &script, session, mode, 5);
            agent.approvals.interactive = false;
            let source = Source::Flag("--disallowed-tools");
            let rules = &mut agent.approvals.rules;
            rules
                .add(
                    Kind::Deny,
                    &source,
                    &["write_file(b.txt)".into(), "Read".into()],
                )
                .unwrap();
            rules
                .add(Kind::Ask, &source, &["bash(git push:*)".into()])
                .unwrap();
            let report = agent.turn("change").await.unwrap();
            assert_eq!(report.refused, causes, "{mode:?}");
            assert!(report.denied_change, "{mode:?}");
            let last = report.denied.last().map(String::as_str);
            assert_eq!(last, Some("read_file secret.txt (by the permission rules)"));
        }
    }
}
