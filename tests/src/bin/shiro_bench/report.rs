//! Statistics and the markdown of `docs/performance.md`.

use std::fmt::Write as _;

/// The summary of a series of timings, in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    /// The median (the mean of the two middle samples for an even count).
    pub median: u64,
    /// The fastest sample.
    pub min: u64,
    /// The slowest sample.
    pub max: u64,
    /// How many samples.
    pub n: usize,
}

impl Stats {
    /// The summary of `samples`; `None` when there are none.
    pub fn of(samples: &[u64]) -> Option<Stats> {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let n = sorted.len();
        let median = match n {
            0 => return None,
            _ if n % 2 == 1 => sorted[n / 2],
            _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2,
        };
        Some(Stats {
            median,
            min: sorted[0],
            max: sorted[n - 1],
            n,
        })
    }
}

/// A cell: measured, or why not.
pub type Cell = Result<Stats, String>;

/// One table: rows of cells, each compared with the row's cell in the baseline column.
#[derive(Debug)]
pub struct Table {
    /// The first column's header.
    pub row_header: String,
    /// The measured columns' headers.
    pub columns: Vec<String>,
    /// The column the ratios are relative to.
    pub baseline: usize,
    /// Each row's label and cells (one per column).
    pub rows: Vec<(String, Vec<Cell>)>,
}

impl Table {
    /// The table in markdown: `median (min–max, n) ×ratio` per cell.
    pub fn render(&self) -> String {
        let mut out = format!("| {} |", self.row_header);
        for (i, column) in self.columns.iter().enumerate() {
            let mark = if i == self.baseline {
                " (baseline)"
            } else {
                ""
            };
            let _ = write!(out, " {column}{mark} |");
        }
        out.push_str("\n|---|");
        out.push_str(&"---:|".repeat(self.columns.len()));
        out.push('\n');
        for (label, cells) in &self.rows {
            let _ = write!(out, "| {label} |");
            let base = cells
                .get(self.baseline)
                .and_then(|c| c.as_ref().ok())
                .map(|s| s.median);
            for (i, cell) in cells.iter().enumerate() {
                match cell {
                    Ok(s) => {
                        let ratio = match base {
                            Some(b) if i != self.baseline && b > 0 => {
                                format!(" **×{}**", ratio(s.median, b))
                            }
                            _ => String::new(),
                        };
                        let _ = write!(
                            out,
                            " {} ({}–{}, n={}){ratio} |",
                            duration(s.median),
                            duration(s.min),
                            duration(s.max),
                            s.n
                        );
                    }
                    Err(why) => {
                        let _ = write!(out, " not measured: {} |", one_line(why));
                    }
                }
            }
            out.push('\n');
        }
        out
    }
}

/// `a / b` with two significant decimals for small ratios.
pub fn ratio(a: u64, b: u64) -> String {
    let r = a as f64 / b as f64;
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

/// A duration for people: µs, ms or s with three significant digits.
pub fn duration(nanos: u64) -> String {
    let us = nanos as f64 / 1e3;
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        let ms = us / 1e3;
        if ms < 10.0 {
            format!("{ms:.2} ms")
        } else if ms < 100.0 {
            format!("{ms:.1} ms")
        } else {
            format!("{ms:.0} ms")
        }
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// A size for people, in binary units.
pub fn bytes(n: u64) -> String {
    const UNITS: &[&str] = &["B", "KiB", "MiB", "GiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A cell's error on one line, short enough for a table.
pub fn one_line(text: &str) -> String {
    let line: String = text
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|");
    if line.chars().count() > 160 {
        format!("{}…", line.chars().take(160).collect::<String>())
    } else {
        line
    }
}
