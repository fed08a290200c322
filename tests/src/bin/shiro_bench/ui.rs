//! Section 7: the terminal UI streaming 10,000 tokens of Markdown, against the raw stream
//! the line interface prints. Both run in this process, writing to a sink that counts bytes:
//! the raw side is the line interface's printer (each token written and flushed), the UI side
//! is the UI's state and screen (each token rendered as Markdown and the viewport redrawn).
//! The UI draws once per batch of messages; here it draws after every token, its worst case.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use nix::sys::resource::{UsageWho, getrusage};
use shiro_agent::events::{Mode, Printer};
use shiro_agent::render::Color;
use shiro_providers::StreamEvent;
use shiro_tui::app::App;
use shiro_tui::screen::{FixedSize, Screen};
use shiro_tui::{Phase, ToFront};

use crate::Plan;
use crate::report::{bytes, ratio};

/// How many tokens the stream has.
const TOKENS: usize = 10_000;

/// A writer that keeps nothing and counts what it is given.
#[derive(Clone, Default)]
struct Counter(Arc<AtomicU64>);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What one side cost.
struct Cost {
    /// Per-token latencies, sorted, in nanoseconds.
    latencies: Vec<u64>,
    wall: Duration,
    cpu: Duration,
    written: u64,
}

impl Cost {
    fn percentile(&self, p: f64) -> u64 {
        let n = self.latencies.len();
        if n == 0 {
            return 0;
        }
        let index = ((n as f64 - 1.0) * p).round() as usize;
        self.latencies[index.min(n - 1)]
    }

    fn mean(&self) -> u64 {
        let n = self.latencies.len().max(1) as u64;
        self.latencies.iter().sum::<u64>() / n
    }
}

fn thread_cpu() -> Duration {
    match getrusage(UsageWho::RUSAGE_THREAD) {
        Ok(usage) => {
            let user = usage.user_time();
            let system = usage.system_time();
            let micros =
                |t: nix::sys::time::TimeVal| t.tv_sec() as u64 * 1_000_000 + t.tv_usec() as u64;
            Duration::from_micros(micros(user) + micros(system))
        }
        Err(_) => Duration::ZERO,
    }
}

/// Times `each` on every token, and the thread's CPU time over all of them; `counter` is
/// where the side writes.
fn measure(
    tokens: &[String],
    counter: &Counter,
    mut each: impl FnMut(&str) -> Result<()>,
) -> Result<Cost> {
    let mut latencies = Vec::with_capacity(tokens.len());
    let cpu = thread_cpu();
    let wall = Instant::now();
    for token in tokens {
        let start = Instant::now();
        each(token)?;
        latencies.push(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
    }
    let wall = wall.elapsed();
    let cpu = thread_cpu().saturating_sub(cpu);
    latencies.sort_unstable();
    Ok(Cost {
        latencies,
        wall,
        cpu,
        written: counter.0.load(Ordering::Relaxed),
    })
}

fn raw(tokens: &[String]) -> Result<Cost> {
    let counter = Counter::default();
    let mut printer = Printer::new(
        Box::new(counter.clone()),
        Box::new(std::io::sink()),
        Mode::Interactive,
        Color::Always,
    );
    measure(tokens, &counter, |token| {
        printer.stream(StreamEvent::TextDelta(token.to_owned()));
        Ok(())
    })
}

fn ui(tokens: &[String]) -> Result<Cost> {
    let counter = Counter::default();
    let mut screen = Screen::new(FixedSize::new(counter.clone(), 100, 40), 0)
        .context("cannot set up the screen")?;
    let mut app = App::new(100, true, None, PathBuf::new());
    app.on_agent(ToFront::Phase(Phase::Waiting), Instant::now());
    measure(tokens, &counter, |token| {
        app.on_agent(ToFront::Delta(token.to_owned()), Instant::now());
        shiro_tui::render(&mut app, &mut screen).context("cannot draw")?;
        Ok(())
    })
}

/// A Markdown answer of about `count` tokens (a token is a word or the space before it):
/// headings, paragraphs with emphasis and code, lists, and fenced Rust blocks, as a model
/// writes them.
fn answer(count: usize) -> Vec<String> {
    let words = [
        "the",
        "parser",
        "**reads**",
        "each",
        "`line`",
        "and",
        "keeps",
        "its",
        "*state*",
        "between",
        "calls,",
        "so",
        "the",
        "caller",
        "never",
        "waits.",
    ];
    let mut tokens = Vec::with_capacity(count + 64);
    let mut section = 0;
    while tokens.len() < count {
        section += 1;
        tokens.push(format!("## Step {section}\n\n"));
        for sentence in 0..4 {
            for (i, word) in words.iter().enumerate() {
                let lead = if i == 0 && sentence == 0 { "" } else { " " };
                tokens.push(format!("{lead}{word}"));
            }
        }
        tokens.push("\n\n".to_owned());
        for item in 0..3 {
            tokens.push(format!("- item {item}:"));
            for word in &words[..6] {
                tokens.push(format!(" {word}"));
            }
            tokens.push("\n".to_owned());
        }
        tokens.push("\n```rust\n".to_owned());
        for line in 0..6 {
            for piece in [
                "fn ", "step", "(x: ", "u32)", " -> ", "u32 ", "{ x ", "+ 1 }", "\n",
            ] {
                let _ = line;
                tokens.push(piece.to_owned());
            }
        }
        tokens.push("```\n\n".to_owned());
    }
    tokens.truncate(count);
    tokens
}

fn nanos(n: u64) -> String {
    if n < 10_000 {
        format!("{n} ns")
    } else if n < 10_000_000 {
        format!("{:.1} µs", n as f64 / 1e3)
    } else {
        format!("{:.1} ms", n as f64 / 1e6)
    }
}

/// Writes section 7.
pub fn section(doc: &mut String, _plan: &Plan) -> Result<()> {
    let tokens = answer(TOKENS);
    let text_bytes: usize = tokens.iter().map(String::len).sum();
    // One warm-up of each, so first-use costs (the syntax set, allocations) are not counted.
    raw(&tokens[..200])?;
    ui(&tokens[..200])?;
    let raw = raw(&tokens)?;
    let ui = ui(&tokens)?;
    let _ = write!(
        doc,
        "\n## 7. The terminal UI streaming Markdown\n\n\
         {TOKENS} tokens of a Markdown answer ({}: headings, emphasis, lists and fenced Rust \
         blocks) streamed one token at a time, as a model streams them. *Raw* is the line \
         interface's printer writing each token as it comes; *UI* is the terminal UI's state and \
         screen, rendering the Markdown, printing finished blocks above the viewport and \
         redrawing the viewport after every token (the UI draws once per batch of messages, so \
         this is its worst case). Both write to a sink that counts bytes, on one thread; the CPU \
         time is that thread's (`getrusage(RUSAGE_THREAD)`).\n\n\
         | | raw | UI | UI / raw |\n|---|---:|---:|---:|\n",
        bytes(text_bytes as u64)
    );
    let rows: [(&str, u64, u64); 6] = [
        (
            "latency per token, median",
            raw.percentile(0.5),
            ui.percentile(0.5),
        ),
        ("latency per token, mean", raw.mean(), ui.mean()),
        (
            "latency per token, p99",
            raw.percentile(0.99),
            ui.percentile(0.99),
        ),
        (
            "latency per token, max",
            raw.percentile(1.0),
            ui.percentile(1.0),
        ),
        (
            "wall time, all tokens",
            u64::try_from(raw.wall.as_nanos()).unwrap_or(u64::MAX),
            u64::try_from(ui.wall.as_nanos()).unwrap_or(u64::MAX),
        ),
        (
            "CPU time, all tokens",
            u64::try_from(raw.cpu.as_nanos()).unwrap_or(u64::MAX),
            u64::try_from(ui.cpu.as_nanos()).unwrap_or(u64::MAX),
        ),
    ];
    for (label, a, b) in rows {
        let times = if a > 0 {
            format!("×{}", ratio(b, a))
        } else {
            "—".to_owned()
        };
        let _ = writeln!(doc, "| {label} | {} | {} | {times} |", nanos(a), nanos(b));
    }
    let _ = writeln!(
        doc,
        "| bytes written to the terminal | {} | {} | ×{} |",
        bytes(raw.written),
        bytes(ui.written),
        ratio(ui.written, raw.written.max(1))
    );
    let frame = 16_666_667u64;
    let _ = write!(
        doc,
        "\nWhat it means: the UI adds about {} per token at the median and {} at p99, against \
         a model that sends a token every 10–30 ms; a 60 Hz frame is {}. The UI's CPU time for \
         the whole answer is {} ({:.2}% of the time a 50 tokens/s model takes to send it).\n",
        nanos(ui.percentile(0.5).saturating_sub(raw.percentile(0.5))),
        nanos(ui.percentile(0.99).saturating_sub(raw.percentile(0.99))),
        nanos(frame),
        nanos(u64::try_from(ui.cpu.as_nanos()).unwrap_or(u64::MAX)),
        ui.cpu.as_secs_f64() * 100.0 / (TOKENS as f64 / 50.0),
    );
    Ok(())
}
