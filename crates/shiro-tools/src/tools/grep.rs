//! The `grep` tool: lines matching a regular expression, ignore files honoured.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use grep_matcher::LineTerminator;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use regex::RegexBuilder;
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::walked_output;
use crate::mutator::Mutator;
use crate::path::WorkspacePath;
use crate::tool::{Tool, ToolError, ToolOutput, parse_args, schema_of};
use crate::tools::walk::{self, Hidden, Kind, PathGlob, Start};

/// At most this many matching lines are shown; a note counts the rest.
pub const GREP_MAX_MATCHES: usize = 200;
/// The output stops growing at this many bytes, whatever the count of matches.
pub const GREP_MAX_BYTES: usize = 64 * 1024;
/// A matching line longer than this many characters is cut.
pub const GREP_MAX_LINE_CHARS: usize = 500;
/// Files larger than this are skipped: they are data, not code, and would stall the search.
pub const GREP_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Searches file contents in the workspace on disk with a regular expression.
#[derive(Debug, Clone, Default)]
pub struct Grep {
    /// The paths it leaves out (see [`Hidden`]).
    hidden: Option<Hidden>,
}

/// The `grep` tool.
pub fn grep() -> Grep {
    Grep::default()
}

impl Grep {
    /// The same tool, leaving out the paths `hidden` hides.
    pub fn hiding(self, hidden: Hidden) -> Grep {
        Grep {
            hidden: Some(hidden),
        }
    }
}

/// The arguments of `grep`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// The regular expression (Rust `regex` syntax), matched against each line.
    pub pattern: String,
    /// A file or directory to search, relative to the workspace root (default: the root).
    pub path: Option<String>,
    /// Only search files matching this glob, e.g. `*.rs` or `src/**/*.ts` (relative to
    /// `path`; a glob without `/` matches file names at any depth).
    pub glob: Option<String>,
    /// Match letters regardless of case (default false).
    #[serde(default, alias = "caseInsensitive")]
    pub case_insensitive: bool,
}

const NAME: &str = "grep";

#[async_trait]
impl Tool for Grep {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Searches the contents of files in the workspace (or the file or directory `path`) for \
         lines matching a regular expression (Rust regex syntax: escape `(`, `[`, `.` and the \
         like with `\\` to match them literally). Prints `path:line:text` for each matching \
         line, files in sorted order, up to 200 lines. Narrow the search with `glob` (e.g. \
         `*.rs`) and `case_insensitive`. Files matched by .gitignore or .ignore, `.git/`, \
         binary files and files over 16 MiB are skipped."
    }

    fn schema(&self) -> serde_json::Value {
        schema_of::<GrepArgs>()
    }

    fn is_mutating(&self) -> bool {
        false
    }

    async fn call(
        &self,
        mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: GrepArgs = parse_args(NAME, args)?;
        // The `regex` crate reads the pattern first: its errors point into the pattern as
        // the model wrote it (ripgrep's matcher wraps it before parsing).
        RegexBuilder::new(&args.pattern)
            .case_insensitive(args.case_insensitive)
            .build()
            .map_err(|err| {
                ToolError::refused(format!(
                    "invalid regular expression {:?}: {err}\nescape special characters such as \
                     `(`, `[`, `{{`, `.`, `*` with `\\` to match them literally",
                    args.pattern
                ))
            })?;
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(args.case_insensitive)
            // The searcher hands over whole lines, so `^` and `$` are line anchors, as in
            // `rg`; a line ends in `\n` or `\r\n`, and no match ever crosses one.
            .multi_line(true)
            .crlf(true)
            .build(&args.pattern)
            .map_err(|err| {
                ToolError::refused(format!(
                    "cannot search for {:?}: {err}; grep matches one line at a time, so a \
                     pattern cannot span a line break",
                    args.pattern
                ))
            })?;
        let glob = args.glob.as_deref().map(PathGlob::new).transpose()?;
        let root = mutator.root().to_path_buf();
        let hidden = self.hidden.clone();
        let given = args.path.clone();
        let walked = walk::blocking(move |cancel| {
            let start = walk::open(NAME, &root, args.path.as_deref())?.hiding(hidden.as_ref());
            let report = if start.is_dir {
                let found = Mutex::new(Report::default());
                walk::walk(
                    &start,
                    None,
                    cancel,
                    || (searcher(), matcher.clone()),
                    |(searcher, matcher), beneath, entry| {
                        let wanted = entry.kind == Kind::File
                            && glob
                                .as_ref()
                                .is_none_or(|g| g.is_match(&entry.below_start()));
                        if !wanted {
                            return;
                        }
                        if let Some((file, len)) = beneath.open_file(&entry) {
                            let hits = search_file(searcher, &*matcher, &entry.rel(), &file, len);
                            if let Some(hits) = hits {
                                found
                                    .lock()
                                    .unwrap_or_else(PoisonError::into_inner)
                                    .add(hits);
                            }
                        }
                    },
                );
                found.into_inner().unwrap_or_else(PoisonError::into_inner)
            } else {
                let mut report = Report::default();
                let rel = start.rel();
                if let Some((file, len)) = open_regular(&start, &rel) {
                    let hits = search_file(&mut searcher(), &matcher, &rel, &file, len);
                    report.add(hits.unwrap_or_default());
                }
                report
            };
            Ok(start.noting_hidden(report.render(&args.pattern, &start.describe())))
        })
        .await;
        walked_output(mutator, given.as_deref(), walked).await
    }
}

/// A searcher as `rg` sets one up: line by line, with line numbers, giving up on a file at
/// its first NUL byte (the same test as `git` and `rg`: such a file is not text).
fn searcher() -> Searcher {
    SearcherBuilder::new()
        // As the matcher reads lines: a `\r` before the `\n` is part of the line ending.
        .line_terminator(LineTerminator::crlf())
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .build()
}

/// The regular file the search was asked to start at, opened beneath the jail's handle on
/// the root, with its length; `None` for anything else.
fn open_regular(start: &Start, rel: &str) -> Option<(std::fs::File, u64)> {
    let path = WorkspacePath::from_relative(rel).ok()?;
    let fd = start
        .jail
        .open_following(&path, rustix::fs::OFlags::RDONLY)
        .ok()?;
    let stat = rustix::fs::fstat(&fd).ok()?;
    let regular = rustix::fs::FileType::from_raw_mode(stat.st_mode).is_file();
    regular.then(|| {
        let len = u64::try_from(stat.st_size).unwrap_or(0);
        (std::fs::File::from(fd), len)
    })
}

/// The matching lines of one file: `None` when it has none, is binary, is too big or cannot
/// be read.
fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    rel: &str,
    file: &std::fs::File,
    len: u64,
) -> Option<FileHits> {
    if len > GREP_MAX_FILE_BYTES {
        return None;
    }
    let mut sink = HitSink {
        hits: FileHits {
            rel: rel.to_owned(),
            ..FileHits::default()
        },
        binary: false,
    };
    searcher.search_file(matcher, file, &mut sink).ok()?;
    (!sink.binary && sink.hits.matches > 0).then_some(sink.hits)
}

/// The matching lines of one file, as many as could ever be shown, and how many there were.
#[derive(Debug, Default)]
struct FileHits {
    rel: String,
    /// `path:line:text\n` for each kept line.
    lines: Vec<String>,
    /// The length of `lines` joined.
    bytes: usize,
    matches: usize,
}

impl FileHits {
    fn keep(&mut self, number: u64, line: &[u8]) {
        self.matches += 1;
        if self.lines.len() >= GREP_MAX_MATCHES || self.bytes > GREP_MAX_BYTES {
            return;
        }
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = String::from_utf8_lossy(line);
        let entry = match line.char_indices().nth(GREP_MAX_LINE_CHARS) {
            Some((cut, _)) => format!("{}:{number}:{}… [line cut]\n", self.rel, &line[..cut]),
            None => format!("{}:{number}:{line}\n", self.rel),
        };
        self.bytes += entry.len();
        self.lines.push(entry);
    }
}

/// Receives one file's matches from the searcher.
struct HitSink {
    hits: FileHits,
    /// Whether the file turned out to be binary: its matches are dropped.
    binary: bool,
}

impl Sink for HitSink {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        let first = found.line_number().unwrap_or(0);
        for (number, line) in (first..).zip(found.lines()) {
            self.hits.keep(number, line);
        }
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, Self::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// The matches kept so far, and how many there were in all. Files are kept in path order,
/// and only as many as the first lines shown need: the walk finds them in any order.
#[derive(Debug, Default)]
struct Report {
    files: BTreeMap<PathKey, FileHits>,
    matches: usize,
    matching_files: usize,
}

/// A workspace path ordered as [`walk::path_order`] says.
#[derive(Debug, PartialEq, Eq)]
struct PathKey(String);

impl Ord for PathKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        walk::path_order(&self.0, &other.0)
    }
}

impl PartialOrd for PathKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Report {
    /// Counts one file's matches and keeps its lines if they may be shown, dropping the
    /// files after those whose lines already fill the output.
    fn add(&mut self, hits: FileHits) {
        if hits.matches == 0 {
            return;
        }
        self.matches += hits.matches;
        self.matching_files += 1;
        self.files.insert(PathKey(hits.rel.clone()), hits);
        let (mut lines, mut bytes) = (0, 0);
        let mut full_at = None;
        for (key, hits) in &self.files {
            if lines >= GREP_MAX_MATCHES || bytes > GREP_MAX_BYTES {
                full_at = Some(PathKey(key.0.clone()));
                break;
            }
            lines += hits.lines.len();
            bytes += hits.bytes;
        }
        if let Some(key) = full_at {
            self.files.split_off(&key);
        }
    }

    fn render(self, pattern: &str, place: &str) -> String {
        if self.matches == 0 {
            return format!(
                "no matches for {pattern:?} in {place} (files matched by .gitignore or .ignore, \
                 and binary files, are not searched)"
            );
        }
        let mut out = String::new();
        let mut shown = 0;
        let mut bytes_capped = false;
        let lines = self.files.values().flat_map(|hits| &hits.lines);
        for entry in lines.take(GREP_MAX_MATCHES) {
            if out.len() + entry.len() > GREP_MAX_BYTES {
                bytes_capped = true;
                break;
            }
            out.push_str(entry);
            shown += 1;
        }
        if shown < self.matches {
            let why = if bytes_capped {
                "64 KiB of output"
            } else {
                "200 lines"
            };
            let files = self.matching_files;
            let _ = writeln!(
                out,
                "(showing the first {shown} of {} matching lines in {files} {}, capped at {why}; \
                 narrow the pattern, or pass path or glob)",
                self.matches,
                if files == 1 { "file" } else { "files" }
            );
        }
        out.pop();
        out
    }
}
