//! Project automation for shiro, run as `cargo xtask <task>`.
//!
//! - `test`: the whole test suite; insta in check mode, at least 256 proptest cases.
//! - `ci`: formatting, the crates' layout (no import cycles, no long module without a reason),
//!   clippy with warnings denied, the test suite, and the docs.
//! - `layout`: only the layout check.
//! - `soak`: the property and crash tests with many more cases.
//! - `bench`: the benchmarks (see `docs/performance.md`).
//!
//! Invariant: xtask only orchestrates `cargo` and the built binaries; it holds no product logic
//! and never prints a figure it did not measure.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod layout;

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Proptest cases for `cargo xtask test` unless the caller set `PROPTEST_CASES`.
const TEST_CASES: &str = "256";
/// Proptest cases for `cargo xtask soak`.
const SOAK_CASES: &str = "20000";
/// Crash trials (SIGKILL at random points) for `cargo xtask soak`.
const SOAK_CRASH_TRIALS: &str = "200";
/// Rounds of the jail's race test (a directory swapped with an outside link while tools
/// write) for `cargo xtask soak`.
const SOAK_RACE_ROUNDS: &str = "200000";
/// SIGKILLs at random points of a bash turn under soak (20 in the normal suite).
const SOAK_BASH_CRASH_ROUNDS: &str = "200";
/// Cases of the property tests whose every case writes to disk (`grep` and `glob` against
/// their one-thread model, undo across compactions), counted apart from the others' cases.
const SOAK_DISK_CASES: &str = "2000";

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let task = args.first().map(String::as_str);
    let rest = args.get(1..).unwrap_or_default();
    let result = match task {
        Some("test") => test(rest),
        Some("ci") => ci(),
        Some("layout") => check_layout(),
        Some("soak") => soak(rest),
        Some("bench") => bench(rest),
        _ => {
            eprintln!("usage: cargo xtask <test|ci|layout|soak|bench> [args passed to cargo test]");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the whole suite: unit, property, snapshot and end-to-end tests.
fn test(extra: &[String]) -> Result<(), String> {
    let cases = env::var("PROPTEST_CASES").unwrap_or_else(|_| TEST_CASES.to_owned());
    run_tests(&cases, None, extra)
}

fn soak(extra: &[String]) -> Result<(), String> {
    run_tests(SOAK_CASES, Some(SOAK_CRASH_TRIALS), extra)
}

fn run_tests(cases: &str, crash_trials: Option<&str>, extra: &[String]) -> Result<(), String> {
    let mut cmd = cargo();
    cmd.args(["test", "--workspace", "--all-targets", "--no-fail-fast"])
        .args(extra)
        .env("PROPTEST_CASES", cases)
        // Check mode: a new or changed snapshot fails the run and is never written over.
        .env("INSTA_UPDATE", "no")
        .env("INSTA_FORCE_PASS", "0");
    if let Some(trials) = crash_trials {
        cmd.env("SHIRO_CRASH_TRIALS", trials);
        cmd.env("SHIRO_RACE_ROUNDS", SOAK_RACE_ROUNDS);
        cmd.env("SHIRO_BASH_CRASH_ROUNDS", SOAK_BASH_CRASH_ROUNDS);
        cmd.env("SHIRO_DISK_CASES", SOAK_DISK_CASES);
    }
    run(cmd)?;
    // Doc tests are not part of `--all-targets`; the crate examples must run too.
    let mut doc = cargo();
    doc.args(["test", "--workspace", "--doc"])
        .env("INSTA_UPDATE", "no");
    run(doc)
}

fn ci() -> Result<(), String> {
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--check"]);
    run(fmt)?;
    check_layout()?;
    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    run(clippy)?;
    test(&[])?;
    let mut doc = cargo();
    doc.args(["doc", "--workspace", "--no-deps"])
        .env("RUSTDOCFLAGS", "-D warnings");
    run(doc)
}

/// The layout rules of `layout`: no import cycles between a crate's modules, no long module
/// without a reason.
fn check_layout() -> Result<(), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("xtask has no parent directory")?;
    eprintln!("xtask: checking the crates' layout (import cycles, module length)");
    let problems = layout::check(root)?;
    for problem in &problems {
        eprintln!("{problem}");
    }
    match problems.len() {
        0 => Ok(()),
        n => Err(format!("{n} layout problem(s); see docs/architecture.md")),
    }
}

/// Builds `shiro` and the benchmark harness in release mode, then runs the harness, which
/// writes `docs/performance.md`. `--quick` uses smaller inputs (for development); `--only`
/// runs some sections (`capture`, `undo`, `patch`, `store`, `bash`, `search`, `ui`, `mcp`) and
/// writes their page to the release target directory instead.
fn bench(extra: &[String]) -> Result<(), String> {
    const USAGE: &str = "usage: cargo xtask bench [--quick] [--only SECTION,...]";
    let mut quick = false;
    let mut only = None;
    let mut args = extra.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--only" => only = Some(args.next().ok_or(USAGE)?.clone()),
            other => return Err(format!("unknown bench option {other:?}; {USAGE}")),
        }
    }
    let mut build = cargo();
    build.args([
        "build",
        "--release",
        "-p",
        "shiro-cli",
        "-p",
        "shiro-tests",
        "--bins",
    ]);
    run(build)?;
    let release = target_dir()?.join("release");
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("xtask has no parent directory")?;
    // A partial run never replaces the full document.
    let out = match &only {
        Some(sections) => release.join(format!("performance-{}.md", sections.replace(',', "-"))),
        None => root.join("docs/performance.md"),
    };
    let mut harness = Command::new(release.join("shiro_bench"));
    harness
        .arg("--shiro")
        .arg(release.join("shiro"))
        .arg("--out")
        .arg(&out);
    if quick {
        harness.arg("--quick");
    }
    if let Some(sections) = &only {
        harness.arg("--only").arg(sections);
    }
    run(harness)
}

/// Where cargo puts build outputs: `CARGO_TARGET_DIR` when set, else what `cargo metadata`
/// says (which also honours `build.target-dir` in a cargo config).
fn target_dir() -> Result<PathBuf, String> {
    if let Some(dir) = env::var_os("CARGO_TARGET_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .map_err(|err| format!("could not run cargo metadata: {err}"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata failed with {}", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    json_string_field(&text, "target_directory")
        .map(PathBuf::from)
        .ok_or_else(|| "cargo metadata has no target_directory".to_owned())
}

/// The value of the first string field `key` in a JSON text. xtask keeps no dependencies, and
/// cargo's metadata escapes only quotes and backslashes in a path.
fn json_string_field(json: &str, key: &str) -> Option<String> {
    let start = json.find(&format!("\"{key}\":\""))? + key.len() + 4;
    let mut value = String::new();
    let mut chars = json[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(value),
            '\\' => value.push(chars.next()?),
            c => value.push(c),
        }
    }
    None
}

fn cargo() -> Command {
    Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
}

fn run(mut cmd: Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    eprintln!("xtask: running {shown}");
    let status = cmd
        .status()
        .map_err(|err| format!("could not start {shown}: {err}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed with {status}"))
    }
}
