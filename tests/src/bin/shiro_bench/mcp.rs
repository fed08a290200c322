//! Section 8: an `edit_file` round trip through `shiro mcp` against the same call through
//! `shiro tool`. The MCP side is a real client (rmcp's) talking to one running server over
//! stdio; the `shiro tool` side spawns the binary per call, as a script does. Each call is
//! a recorded turn on both sides, so the difference is the protocol against a process start.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;

use crate::Plan;
use crate::report::{Stats, Table, ratio};

/// The arguments of repetition `i`: it swaps a word one way, the next one back.
fn edit(i: usize) -> serde_json::Value {
    let (old, new) = if i.is_multiple_of(2) {
        ("alpha", "omega")
    } else {
        ("omega", "alpha")
    };
    serde_json::json!({ "path": "notes.txt", "old_string": old, "new_string": new })
}

/// A workspace with one 100-line file whose line 50 holds the word the edits swap.
fn workspace(work: &Path, name: &str) -> Result<std::path::PathBuf> {
    let ws = work.join(name);
    fs::create_dir_all(&ws)?;
    let mut text = String::new();
    for line in 0..100 {
        let word = if line == 50 { "alpha" } else { "line" };
        let _ = writeln!(text, "{line:03} {word} of the notes");
    }
    fs::write(ws.join("notes.txt"), text)?;
    Ok(ws)
}

fn nanos(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// `shiro tool edit_file` per call.
fn through_tool(shiro: &Path, ws: &Path, home: &Path, reps: usize) -> Result<Vec<u64>> {
    let mut samples = Vec::with_capacity(reps);
    for i in 0..reps {
        let start = Instant::now();
        let out = Command::new(shiro)
            .args(["tool", "edit_file", "--args", &edit(i).to_string()])
            .current_dir(ws)
            .env("HOME", home)
            .env("SHIRO_CONFIG_DIR", home)
            .stdin(Stdio::null())
            .output()?;
        samples.push(nanos(start));
        if !out.status.success() {
            bail!(
                "shiro tool failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    Ok(samples)
}

/// `edit_file` calls to one `shiro mcp`; also returns the time to start it and connect.
fn through_mcp(shiro: &Path, ws: &Path, home: &Path, reps: usize) -> Result<(u64, Vec<u64>)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let start = Instant::now();
        let mut command = tokio::process::Command::new(shiro);
        command
            .arg("mcp")
            .current_dir(ws)
            .env("HOME", home)
            .env("SHIRO_CONFIG_DIR", home)
            .stderr(Stdio::null());
        let client = ().serve(TokioChildProcess::new(command)?).await?;
        let started = nanos(start);
        let mut samples = Vec::with_capacity(reps);
        for i in 0..reps {
            let serde_json::Value::Object(args) = edit(i) else {
                bail!("the arguments are not an object");
            };
            let start = Instant::now();
            let result = client
                .call_tool(CallToolRequestParams::new("edit_file").with_arguments(args))
                .await?;
            samples.push(nanos(start));
            if result.is_error == Some(true) {
                bail!("edit_file through shiro mcp failed: {:?}", result.content);
            }
        }
        client.cancel().await.context("close the MCP session")?;
        Ok((started, samples))
    })
}

pub fn section(doc: &mut String, plan: &Plan, shiro: &Path, work: &Path) -> Result<()> {
    let reps = if plan.name == "quick" { 20 } else { 100 };
    let home = work.join("home");
    let tool_ws = workspace(work, "ws-mcp-tool")?;
    let mcp_ws = workspace(work, "ws-mcp-server")?;
    eprintln!("shiro_bench: mcp: edit_file through shiro tool");
    let tool = through_tool(shiro, &tool_ws, &home, reps).map_err(|err| format!("{err:#}"));
    eprintln!("shiro_bench: mcp: edit_file through shiro mcp");
    let mcp = through_mcp(shiro, &mcp_ws, &home, reps).map_err(|err| format!("{err:#}"));
    let cell = |samples: &Result<Vec<u64>, String>| match samples {
        Ok(samples) => Stats::of(samples).ok_or_else(|| "no samples".to_owned()),
        Err(why) => Err(why.clone()),
    };
    let tool_cell = cell(&tool);
    let mcp_cell = cell(
        &mcp.as_ref()
            .map(|(_, samples)| samples.clone())
            .map_err(Clone::clone),
    );
    let summary = match (&tool_cell, &mcp_cell) {
        (Ok(t), Ok(m)) => format!(
            "An `edit_file` round trip through `shiro mcp` takes {}× the time of the same call \
             through `shiro tool` (medians): the server pays no process start per call.",
            ratio(m.median, t.median)
        ),
        _ => "Not measured: one side failed (see the table).".to_owned(),
    };
    let startup = match &mcp {
        Ok((started, _)) => format!(
            " Starting `shiro mcp` and completing the MCP handshake took {} once.",
            crate::report::duration(*started)
        ),
        Err(_) => String::new(),
    };
    let table = Table {
        row_header: "edit_file, one recorded turn per call".into(),
        columns: vec![
            "`shiro tool` (a process per call)".into(),
            "`shiro mcp` (one server)".into(),
        ],
        baseline: 0,
        rows: vec![(
            "100-line file, one word swapped".into(),
            vec![tool_cell, mcp_cell],
        )],
    };
    let _ = write!(
        doc,
        "\n## 8. The MCP server against `shiro tool`\n\n\
         The same `edit_file` call ({reps} repetitions, swapping one word back and forth in a \
         100-line file), each recorded as its own turn: through `shiro tool`, a process per \
         call, timed from spawn to exit; and through one running `shiro mcp`, timed from the \
         client's request to its response (rmcp's client over stdio).{startup}\n\n{}\n{summary}\n",
        table.render()
    );
    Ok(())
}
