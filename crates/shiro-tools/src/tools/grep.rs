//! The `grep` tool: lines matching a regular expression, ignore files honoured.

use std::fmt::Write as _;

use async_trait::async_trait;
use regex::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::mutator::Mutator;
use crate::mutator::fs_jail::Jail;
use crate::path::WorkspacePath;
use crate::tool::{Tool, ToolError, ToolOutput, parse_args, schema_of};
use crate::tools::walk::{self, Kind, PathGlob};

/// At most this many matching lines are shown; a note counts the rest.
pub const GREP_MAX_MATCHES: usize = 200;
/// The output stops growing at this many bytes, whatever the count of matches.
pub const GREP_MAX_BYTES: usize = 64 * 1024;
/// A matching line longer than this many characters is cut.
pub const GREP_MAX_LINE_CHARS: usize = 500;
/// Files larger than this are skipped: they are data, not code, and would stall the search.
pub const GREP_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Searches file contents in the workspace on disk with a regular expression.
#[derive(Debug, Clone, Copy, Default)]
pub struct Grep;

/// The `grep` tool.
pub fn grep() -> Grep {
    Grep
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
        let regex = RegexBuilder::new(&args.pattern)
            .case_insensitive(args.case_insensitive)
            .build()
            .map_err(|err| {
                ToolError::refused(format!(
                    "invalid regular expression {:?}: {err}\nescape special characters such as \
                     `(`, `[`, `{{`, `.`, `*` with `\\` to match them literally",
                    args.pattern
                ))
            })?;
        let glob = args.glob.as_deref().map(PathGlob::new).transpose()?;
        let root = mutator.root().to_path_buf();
        let text = walk::blocking(move |cancel| {
            let start = walk::open(NAME, &root, args.path.as_deref())?;
            let jail = Jail::open(start.root()).map_err(|err| {
                ToolError::refused(format!("cannot open the workspace root: {err}"))
            })?;
            let mut report = Report::default();
            if start.is_dir {
                walk::walk(&start, None, cancel, |found| {
                    let wanted = found.kind == Kind::File
                        && glob.as_ref().is_none_or(|g| g.is_match(&found.below_start));
                    if wanted {
                        search_file(&regex, &jail, &found.rel, &mut report);
                    }
                });
            } else {
                search_file(&regex, &jail, &start.rel(), &mut report);
            }
            Ok(report.render(&args.pattern, &start.describe()))
        })
        .await?;
        Ok(ToolOutput {
            text,
            changes: Vec::new(),
            ..ToolOutput::default()
        })
    }
}

/// The matches kept so far, and how many there were in all.
#[derive(Debug, Default)]
struct Report {
    out: String,
    shown: usize,
    matches: usize,
    files: usize,
    /// Whether the byte cap (rather than the match cap) stopped the output.
    bytes_capped: bool,
}

/// The bytes of the regular file `rel`, or `None` for anything else, or one too big. It is
/// opened beneath the jail's handle on the root (so no link swapped in since the walk can send
/// the read outside) and without blocking, and what was opened is checked, so a named pipe or
/// device put there since the walk is never read.
fn read_regular(jail: &Jail, rel: &str) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let path = WorkspacePath::from_relative(rel).ok()?;
    let fd = jail
        .open_following(&path, rustix::fs::OFlags::RDONLY)
        .ok()?;
    let stat = rustix::fs::fstat(&fd).ok()?;
    let regular = rustix::fs::FileType::from_raw_mode(stat.st_mode).is_file();
    if !regular || u64::try_from(stat.st_size).map_or(true, |len| len > GREP_MAX_FILE_BYTES) {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Appends the matching lines of one file; binary, unreadable and huge files are skipped.
fn search_file(regex: &Regex, jail: &Jail, rel: &str, report: &mut Report) {
    let Some(bytes) = read_regular(jail, rel) else {
        return;
    };
    // The same test as `git` and `rg`: a NUL byte means the file is not text.
    if bytes.contains(&0) {
        return;
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut found_here = false;
    for (index, line) in text.lines().enumerate() {
        if !regex.is_match(line) {
            continue;
        }
        found_here = true;
        report.matches += 1;
        if report.shown >= GREP_MAX_MATCHES || report.bytes_capped {
            continue;
        }
        let line = match line.char_indices().nth(GREP_MAX_LINE_CHARS) {
            Some((cut, _)) => format!("{}… [line cut]", &line[..cut]),
            None => line.to_owned(),
        };
        let entry = format!("{rel}:{}:{line}\n", index + 1);
        if report.out.len() + entry.len() > GREP_MAX_BYTES {
            report.bytes_capped = true;
            continue;
        }
        report.out.push_str(&entry);
        report.shown += 1;
    }
    if found_here {
        report.files += 1;
    }
}

impl Report {
    fn render(mut self, pattern: &str, place: &str) -> String {
        if self.matches == 0 {
            return format!(
                "no matches for {pattern:?} in {place} (files matched by .gitignore or .ignore, \
                 and binary files, are not searched)"
            );
        }
        if self.shown < self.matches {
            let why = if self.bytes_capped {
                "64 KiB of output"
            } else {
                "200 lines"
            };
            let _ = writeln!(
                self.out,
                "(showing the first {} of {} matching lines in {} {}, capped at {why}; narrow \
                 the pattern, or pass path or glob)",
                self.shown,
                self.matches,
                self.files,
                if self.files == 1 { "file" } else { "files" }
            );
        }
        self.out.pop();
        self.out
    }
}
