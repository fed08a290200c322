//! Deterministic inputs: workspaces, file contents and patches, all from a fixed seed, so that
//! two runs (and two machines) measure the same work.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

/// A small, fast, seedable generator (splitmix64); the quality of the numbers hardly matters,
/// only that the same seed always yields the same workspace.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// Words for source-like text: it compresses about as well as real code does.
const WORDS: &[&str] = &[
    "fn", "let", "mut", "self", "return", "match", "struct", "impl", "value", "result", "error",
    "config", "path", "buffer", "index", "count", "items", "name", "data", "state", "Some(x)",
    "None", "Ok(())", "=>", "{", "}", "&str", "Vec<u8>", "async", "await?;", "// note:", "0x1f",
];

/// Source-like text of exactly `len` bytes ending in a newline (when `len > 0`).
pub fn text(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 128);
    while out.len() < len {
        let indent = rng.below(4) as usize * 4;
        out.extend(std::iter::repeat_n(b' ', indent));
        for i in 0..3 + rng.below(8) {
            if i > 0 {
                out.push(b' ');
            }
            out.extend_from_slice(WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes());
        }
        out.push(b'\n');
    }
    out.truncate(len);
    if let Some(last) = out.last_mut() {
        *last = b'\n';
    }
    out
}

/// Where file `index` of a generated workspace lives: three levels of nesting, about 50 files
/// per directory, mixed extensions.
pub fn file_path(index: usize) -> String {
    const EXT: &[&str] = &["rs", "md", "txt", "json", "toml"];
    let leaf = index / 50;
    format!(
        "a{:03}/b{:02}/c{}/f{index:06}.{}",
        leaf / 40,
        leaf % 40 / 4,
        leaf % 4,
        EXT[index % EXT.len()]
    )
}

/// Sizes of the workspaces of the capture benchmark: mostly small files, a few larger
/// (mean about 2.7 KB), as in a source repository.
pub fn mixed_size(rng: &mut Rng) -> usize {
    let base = match rng.below(100) {
        0..30 => 128,
        30..60 => 512,
        60..85 => 2048,
        85..97 => 8192,
        _ => 32768,
    };
    base / 2 + rng.below(base as u64) as usize
}

/// Sizes of the files the undo benchmark's turns touch: 1 KiB to 1 MiB, mostly small (mean
/// about 16 KiB); the first file is always 1 MiB so that even a one-file turn moves a megabyte.
pub fn undo_size(rng: &mut Rng, index: usize) -> usize {
    if index == 0 {
        return 1 << 20;
    }
    match rng.below(1000) {
        0..400 => 1 << 10,
        400..700 => 4 << 10,
        700..900 => 16 << 10,
        900..980 => 64 << 10,
        980..999 => 256 << 10,
        _ => 1 << 20,
    }
}

/// Writes `count` files into `root` (created if missing), with sizes from `size`; returns the
/// total bytes written.
pub fn workspace(
    root: &Path,
    count: usize,
    seed: u64,
    mut size: impl FnMut(&mut Rng, usize) -> usize,
) -> Result<u64> {
    let mut rng = Rng::new(seed);
    let mut total = 0;
    for index in 0..count {
        let path = root.join(file_path(index));
        if index % 50 == 0
            && let Some(parent) = path.parent()
        {
            fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
        }
        let len = size(&mut rng, index);
        let bytes = text(&mut rng, len);
        fs::write(&path, &bytes).with_context(|| format!("write {}", path.display()))?;
        total += bytes.len() as u64;
    }
    Ok(total)
}

/// The line every capture edit flips between two values.
pub const MARKER_A: &str = "bench-marker: AAAA";
/// The other value of the marker line.
pub const MARKER_B: &str = "bench-marker: BBBB";

/// Writes an edit target of about `len` bytes with [`MARKER_A`] on a line in its middle.
pub fn edit_target(path: &Path, len: usize, seed: u64) -> Result<()> {
    let mut rng = Rng::new(seed);
    let mut bytes = text(&mut rng, len / 2);
    bytes.extend_from_slice(MARKER_A.as_bytes());
    bytes.push(b'\n');
    bytes.extend(text(&mut rng, len / 2));
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, bytes).with_context(|| format!("write {}", path.display()))
}

/// A file of `lines` numbered, unique lines (so every hunk has exactly one match).
pub fn numbered_lines(lines: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    (0..lines)
        .map(|i| {
            let words: Vec<&str> = (0..2 + rng.below(6))
                .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
                .collect();
            format!("{i:07} {}", words.join(" "))
        })
        .collect()
}

/// One `*** Update File` section that changes each of `targets` (line indices, ascending) by
/// appending ` // changed`, with three lines of context around each, forward or backward.
pub fn update_section(path: &str, lines: &[String], targets: &[usize], forward: bool) -> String {
    let mut out = format!("*** Update File: {path}\n");
    for &t in targets {
        out.push_str("@@\n");
        for line in &lines[t.saturating_sub(3)..t] {
            out.push_str(&format!(" {line}\n"));
        }
        let (old, new) = (lines[t].clone(), format!("{} // changed", lines[t]));
        let (removed, added) = if forward { (old, new) } else { (new, old) };
        out.push_str(&format!("-{removed}\n+{added}\n"));
        for line in &lines[t + 1..(t + 4).min(lines.len())] {
            out.push_str(&format!(" {line}\n"));
        }
    }
    out
}

/// Wraps sections in the patch envelope.
pub fn envelope(sections: &[String]) -> String {
    format!("*** Begin Patch\n{}*** End Patch\n", sections.concat())
}
