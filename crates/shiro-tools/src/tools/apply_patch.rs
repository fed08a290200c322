//! The `apply_patch` tool: Codex's patch format, applied to every file or to none.
//!
//! A call runs in two phases. Planning reads every file the patch names through the
//! `Mutator`, applies the hunks in memory and checks every precondition (paths, existence,
//! parents); nothing is written until the whole patch is known to apply. Committing then
//! performs the writes in patch order and logs each one; if a write fails, the log is
//! replayed backwards so the workspace is as it was.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;

use super::common::resolve;
use crate::mutator::{DEFAULT_FILE_MODE, Mutator, MutatorError, Stat};
use crate::patch::{self, Operation};
use crate::path::{PathError, WorkspacePath};
use crate::text::TextFile;
use crate::tool::{Change, Tool, ToolError, ToolOutput, parse_args, schema_of};

const NAME: &str = "apply_patch";

/// Arguments of `apply_patch`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchArgs {
    /// The patch text, from `*** Begin Patch` to `*** End Patch`.
    pub patch: String,
}

/// Applies a patch in Codex's format: adds, deletes, updates and moves files, all or none.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApplyPatch;

/// The `apply_patch` tool.
pub fn apply_patch() -> ApplyPatch {
    ApplyPatch
}

#[async_trait]
impl Tool for ApplyPatch {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Apply a patch that adds, updates, moves and deletes files. Either every file changes or \
         none does. Format:\n\
         \n\
         *** Begin Patch\n\
         *** Add File: src/new.py\n\
         +def hello():\n\
         +    return 1\n\
         *** Update File: src/app.py\n\
         *** Move to: src/main.py\n\
         @@ def run():\n\
         \x20    x = load()\n\
         -    print(x)\n\
         +    log(x)\n\
         \x20    return x\n\
         *** Delete File: src/old.py\n\
         *** End Patch\n\
         \n\
         Every line of an added file starts with `+`. In an update, each hunk has context lines \
         (a space, then the line exactly as in the file; about 3 before and after a change), \
         `-` lines to remove and `+` lines to add. `@@ text` (optional) first finds the line \
         `text`, and the hunk is sought after it; use it when the context alone is not unique. \
         Hunks of one file go in file order. `*** End of File` after a hunk pins it to the end \
         of the file. `*** Move to:` (optional, right after `*** Update File:`) renames the \
         file. Paths are relative to the workspace root. Name each file once per patch. Add \
         File and Move to refuse a path that already exists. Files keep their line endings, \
         byte order mark and final-newline state."
    }

    fn schema(&self) -> serde_json::Value {
        schema_of::<ApplyPatchArgs>()
    }

    fn is_mutating(&self) -> bool {
        true
    }

    async fn touched_paths(
        &self,
        mutator: &dyn Mutator,
        args: &serde_json::Value,
    ) -> Result<Vec<WorkspacePath>, ToolError> {
        let args: ApplyPatchArgs = parse_args(NAME, args.clone())?;
        let patch = parse_patch(&args.patch)?;
        let mut paths: Vec<WorkspacePath> = Vec::new();
        for Named { path, .. } in named_paths(mutator, &patch).await? {
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
        Ok(paths)
    }

    async fn call(
        &self,
        mutator: &dyn Mutator,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError> {
        let args: ApplyPatchArgs = parse_args(NAME, args)?;
        let patch = parse_patch(&args.patch)?;
        let Plan { steps, unchanged } = plan(mutator, &patch).await?;
        commit(mutator, &steps).await?;
        let changes: Vec<Change> = steps.iter().map(Step::change).collect();
        let mut lines: Vec<String> = changes.iter().map(ToString::to_string).collect();
        lines.extend(unchanged_note(&unchanged, changes.is_empty()));
        let text = lines.join("\n");
        Ok(ToolOutput {
            text,
            changes,
            ..ToolOutput::default()
        })
    }
}

/// What the output says of the files the patch leaves as they are, which were not written:
/// the whole answer when nothing else changed, else a note after the changes.
fn unchanged_note(unchanged: &[WorkspacePath], alone: bool) -> Option<String> {
    let (last, rest) = unchanged.split_last()?;
    let names = match rest {
        [] => last.to_string(),
        _ => {
            let rest: Vec<String> = rest.iter().map(ToString::to_string).collect();
            format!("{} and {last}", rest.join(", "))
        }
    };
    let (pronoun, verb) = if rest.is_empty() {
        ("it is", "it was")
    } else {
        ("they are", "they were")
    };
    Some(if alone {
        format!("the patch leaves {names} as {pronoun}; nothing was changed")
    } else {
        format!("(the patch leaves {names} as {pronoun}, so {verb} not written)")
    })
}

fn parse_patch(text: &str) -> Result<patch::Patch, ToolError> {
    patch::parse(text)
        .map_err(|err| ToolError::refused(format!("invalid patch: {err}; nothing was changed")))
}

/// A path the patch names.
struct Named {
    /// The patch line that names it.
    line: usize,
    /// The path, jailed and with links on its parents resolved.
    path: WorkspacePath,
    /// The operation that names it.
    role: Role,
}

/// What names a path in a patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Add,
    Delete,
    /// `*** Update File:`, also when it moves the file.
    Update,
    /// `*** Move to:`.
    MoveTo,
}

/// Every path the patch names, in patch order; move destinations follow their source.
/// Relative paths are relative to the directory of a `cd <dir> &&` wrapper, if the patch has
/// one.
async fn named_paths(mutator: &dyn Mutator, patch: &patch::Patch) -> Result<Vec<Named>, ToolError> {
    let workdir = match patch.workdir.as_deref() {
        Some(written) => workdir(mutator, written)
            .await?
            .map(|dir| Workdir { written, dir }),
        None => None,
    };
    let mut paths = Vec::new();
    for operation in &patch.operations {
        let line = operation.line();
        let path = in_workdir(workdir.as_ref(), operation.path())?;
        let role = match operation {
            Operation::Add { .. } => Role::Add,
            Operation::Delete { .. } => Role::Delete,
            Operation::Update { .. } => Role::Update,
        };
        paths.push(Named {
            line,
            path: resolve(mutator, &path).await?,
            role,
        });
        if let Operation::Update {
            move_to: Some(dest),
            ..
        } = operation
        {
            let dest = in_workdir(workdir.as_ref(), dest)?;
            paths.push(Named {
                line,
                path: resolve(mutator, &dest).await?,
                role: Role::MoveTo,
            });
        }
    }
    Ok(paths)
}

/// The directory of a patch's `cd <dir> &&` wrapper.
struct Workdir<'a> {
    /// The directory as the patch wrote it.
    written: &'a str,
    /// The directory, jailed.
    dir: WorkspacePath,
}

/// The directory `cd <dir>` names, jailed like any path; `None` for the workspace root. It
/// must be a directory, as `cd` into anything else fails and the shell would not run the patch.
async fn workdir(mutator: &dyn Mutator, dir: &str) -> Result<Option<WorkspacePath>, ToolError> {
    let path = match WorkspacePath::resolve(mutator.root(), dir) {
        Ok(path) => path,
        // `cd .`, or `cd` to the root by its absolute path.
        Err(PathError::Empty) => return Ok(None),
        Err(err) => {
            return Err(ToolError::refused(format!(
                "the patch's `cd {dir}` is refused: {err}; nothing was changed"
            )));
        }
    };
    let real = mutator.real_path(&path).await?;
    let problem = match mutator.stat(&real).await? {
        Stat::Dir { .. } => return Ok(Some(real)),
        Stat::Symlink { .. } if mutator.read_dir(&real).await.is_ok() => return Ok(Some(real)),
        Stat::Absent => "it does not exist".to_owned(),
        Stat::File { .. } => "it is a file, not a directory".to_owned(),
        Stat::Symlink { target } => format!(
            "it is a symbolic link to {target}, which is not a directory inside the workspace"
        ),
    };
    Err(ToolError::refused(format!(
        "the patch's `cd {dir}` fails: {problem}; nothing was changed"
    )))
}

/// `path` as seen from `workdir`: joined to it when relative, as it is when absolute.
fn in_workdir(workdir: Option<&Workdir<'_>>, path: &str) -> Result<String, ToolError> {
    match workdir {
        Some(Workdir { written, dir }) if !std::path::Path::new(path).is_absolute() => {
            // Checked alone first, so that an error names the path as the patch wrote it.
            let joined = WorkspacePath::resolve(std::path::Path::new(""), path).map_err(|err| {
                ToolError::refused(format!(
                    "after the patch's `cd {written}`, {err}; nothing was changed"
                ))
            })?;
            // A trailing `/` still says the path names a directory (see `resolve`).
            let slash = if path.ends_with('/') { "/" } else { "" };
            Ok(format!("{dir}/{joined}{slash}"))
        }
        _ => Ok(path.to_owned()),
    }
}

/// What a deleted entry was, so that it can be put back.
#[derive(Debug)]
enum Prior {
    File { bytes: Vec<u8>, mode: u32 },
    Symlink { target: String },
}

/// One validated file operation, with everything needed to perform and to undo it.
#[derive(Debug)]
enum Step {
    Add {
        path: WorkspacePath,
        bytes: Vec<u8>,
    },
    Delete {
        path: WorkspacePath,
        prior: Prior,
    },
    Update {
        path: WorkspacePath,
        old: Vec<u8>,
        mode: u32,
        new: Vec<u8>,
    },
    Move {
        from: WorkspacePath,
        to: WorkspacePath,
        old: Vec<u8>,
        mode: u32,
        new: Vec<u8>,
    },
}

impl Step {
    fn change(&self) -> Change {
        match self {
            Step::Add { path, .. } => Change::Added { path: path.clone() },
            Step::Delete { path, .. } => Change::Deleted { path: path.clone() },
            Step::Update { path, .. } => Change::Modified { path: path.clone() },
            Step::Move { from, to, .. } => Change::Moved {
                from: from.clone(),
                to: to.clone(),
            },
        }
    }
}

/// A patch, checked: what to write, and the files it names that it leaves as they are.
#[derive(Debug)]
struct Plan {
    /// The operations that change something, in patch order.
    steps: Vec<Step>,
    /// The files the patch would only rewrite with the bytes and mode they have: an update
    /// whose hunks put back what they take out, or a file deleted and added again the same.
    /// Writing them would give them a new inode and time for nothing (a hard link to one
    /// would be split), so they are left alone.
    unchanged: Vec<WorkspacePath>,
}

/// Checks every operation and computes every new file content, writing nothing.
async fn plan(mutator: &dyn Mutator, patch: &patch::Patch) -> Result<Plan, ToolError> {
    let named = named_paths(mutator, patch).await?;
    check_distinct(&named)?;
    let mut named = named.into_iter().map(|named| named.path);
    let mut steps = Vec::with_capacity(patch.operations.len());
    let mut unchanged = Vec::new();
    for operation in &patch.operations {
        let line = operation.line();
        let Some(path) = named.next() else { break };
        let step = match operation {
            Operation::Add { contents, .. } => {
                // `*** Delete File: p` then `*** Add File: p` replaces p (see `check_distinct`).
                let deleted = steps.iter().position(
                    |step| matches!(step, Step::Delete { path: deleted, .. } if *deleted == path),
                );
                let replaces = deleted.is_some();
                // A new file gets the default mode: with that and the same bytes, the file
                // would come back as it is.
                if let Some(index) = deleted
                    && let Some(Step::Delete {
                        prior: Prior::File { bytes, mode },
                        ..
                    }) = steps.get(index)
                    && *bytes == contents.as_bytes()
                    && *mode == DEFAULT_FILE_MODE
                {
                    steps.remove(index);
                    unchanged.push(path);
                    continue;
                }
                if !replaces
                    && let stat @ (Stat::File { .. } | Stat::Dir { .. } | Stat::Symlink { .. }) =
                        mutator.stat(&path).await?
                {
                    return Err(ToolError::refused(format!(
                        "cannot add {path} (patch line {line}): a {} already exists there; nothing \
                         was changed (use `*** Update File: {path}` to change an existing file)",
                        stat.kind()
                    )));
                }
                check_parents(mutator, &path, line).await?;
                Step::Add {
                    path,
                    bytes: contents.clone().into_bytes(),
                }
            }
            Operation::Delete { .. } => {
                let prior = match mutator.stat(&path).await? {
                    Stat::File { mode, .. } => Prior::File {
                        bytes: mutator.read(&path).await?,
                        mode,
                    },
                    Stat::Symlink { target } => Prior::Symlink { target },
                    Stat::Absent => {
                        return Err(ToolError::refused(format!(
                            "cannot delete {path} (patch line {line}): it does not exist; nothing was changed"
                        )));
                    }
                    Stat::Dir { .. } => {
                        return Err(ToolError::refused(format!(
                            "cannot delete {path} (patch line {line}): it is a directory, and \
                             `*** Delete File:` deletes files; nothing was changed"
                        )));
                    }
                };
                Step::Delete { path, prior }
            }
            Operation::Update { move_to, hunks, .. } => {
                let (old, mode) = load(mutator, &path, line).await?;
                let new = if hunks.is_empty() {
                    old.clone()
                } else {
                    let text = TextFile::decode(&old).map_err(|err| {
                        ToolError::refused(format!(
                            "cannot update {path} (patch line {line}): it {err}; nothing was changed"
                        ))
                    })?;
                    let edited = patch::apply_hunks(&text, hunks).map_err(|err| {
                        ToolError::refused(format!(
                            "could not apply the patch to {path}: {err}\nnothing was changed; read \
                             {path} again and resend the whole patch with context and `-` lines \
                             copied exactly from the file"
                        ))
                    })?;
                    edited.encode()
                };
                match move_to {
                    None if new == old => {
                        unchanged.push(path);
                        continue;
                    }
                    None => Step::Update {
                        path,
                        old,
                        mode,
                        new,
                    },
                    Some(_) => {
                        let Some(to) = named.next() else { break };
                        if let stat
                        @ (Stat::File { .. } | Stat::Dir { .. } | Stat::Symlink { .. }) =
                            mutator.stat(&to).await?
                        {
                            return Err(ToolError::refused(format!(
                                "cannot move {path} to {to} (patch line {line}): a {} already \
                                 exists at {to}; nothing was changed (`*** Move to:` never \
                                 overwrites; choose another name or delete {to} in an earlier call)",
                                stat.kind()
                            )));
                        }
                        check_parents(mutator, &to, line).await?;
                        Step::Move {
                            from: path,
                            to,
                            old,
                            mode,
                            new,
                        }
                    }
                }
            }
        };
        steps.push(step);
    }
    Ok(Plan { steps, unchanged })
}

/// Refuses a patch that names a path twice, or a path inside another path it names: the
/// result would depend on the order of operations, which is rarely what the model meant.
/// The one exception is `*** Delete File: p` followed by `*** Add File: p`, which says plainly
/// that p is replaced (Codex applies it, and models write it to rewrite a file whole).
fn check_distinct(named: &[Named]) -> Result<(), ToolError> {
    for (index, first) in named.iter().enumerate() {
        let Named { line, path, .. } = first;
        for second in named.iter().skip(index + 1) {
            let Named {
                line: other_line,
                path: other,
                ..
            } = second;
            if path == other && (first.role, second.role) == (Role::Delete, Role::Add) {
                continue;
            }
            if path == other {
                let lines = if line == other_line {
                    format!("line {line} moves it onto itself")
                } else {
                    format!("lines {line} and {other_line}")
                };
                return Err(ToolError::refused(format!(
                    "{path} is named twice in the patch ({lines}); nothing was changed (name each \
                     file once, with all of its hunks under one `*** Update File:`)"
                )));
            }
            let (outer, inner) = if other.starts_with(path) {
                (path, other)
            } else {
                (other, path)
            };
            if inner.starts_with(outer) {
                return Err(ToolError::refused(format!(
                    "the patch names both {outer} and {inner}, which is inside it (lines {line} \
                     and {other_line}); nothing was changed (a path cannot be both a file and a \
                     directory)"
                )));
            }
        }
    }
    Ok(())
}

/// The bytes and mode of the regular file an update names.
async fn load(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    line: usize,
) -> Result<(Vec<u8>, u32), ToolError> {
    let (problem, advice) = match mutator.stat(path).await? {
        Stat::File { mode, .. } => return Ok((mutator.read(path).await?, mode)),
        Stat::Absent => (
            "it does not exist".to_owned(),
            " (use `*** Add File:` to create a file)",
        ),
        Stat::Dir { .. } => ("it is a directory".to_owned(), ""),
        Stat::Symlink { target } => (
            format!("it is a symbolic link to {target}"),
            " (update the file it points to)",
        ),
    };
    Err(ToolError::refused(format!(
        "cannot update {path} (patch line {line}): {problem}; nothing was changed{advice}"
    )))
}

/// Refuses a new file whose parent would have to be a directory where a file is.
async fn check_parents(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    line: usize,
) -> Result<(), ToolError> {
    for dir in path.ancestors() {
        match mutator.stat(&dir).await? {
            Stat::Dir { .. } => {}
            // Everything below a missing directory is missing too.
            Stat::Absent => return Ok(()),
            Stat::Symlink { .. } if mutator.read_dir(&dir).await.is_ok() => {}
            Stat::File { .. } | Stat::Symlink { .. } => {
                return Err(ToolError::refused(format!(
                    "cannot create {path} (patch line {line}): {dir} is a file, not a directory; \
                     nothing was changed"
                )));
            }
        }
    }
    Ok(())
}

/// A change already made during a commit, and how to take it back.
#[derive(Debug)]
enum Done<'a> {
    CreatedDir(WorkspacePath),
    /// A file was written; `prior` is what it held before (`None`: it did not exist).
    Wrote {
        path: &'a WorkspacePath,
        prior: Option<(&'a [u8], u32)>,
    },
    Removed {
        path: &'a WorkspacePath,
        prior: &'a Prior,
    },
    Renamed {
        from: &'a WorkspacePath,
        to: &'a WorkspacePath,
    },
}

/// Performs the planned steps; on failure, takes back what was done and reports the outcome.
async fn commit(mutator: &dyn Mutator, steps: &[Step]) -> Result<(), ToolError> {
    let mut done: Vec<Done<'_>> = Vec::new();
    let Err(err) = perform(mutator, steps, &mut done).await else {
        return Ok(());
    };
    let mut stuck = Vec::new();
    for change in done.iter().rev() {
        if let Err(undo_err) = undo(mutator, change).await {
            stuck.push(describe_stuck(change, &undo_err));
        }
    }
    let others = if stuck.len() < done.len() {
        "\nevery other change was put back"
    } else {
        ""
    };
    if stuck.is_empty() {
        let put_back = if done.is_empty() {
            String::new()
        } else {
            " (the changes already made were put back)".to_owned()
        };
        return Err(ToolError::refused(format!(
            "could not apply the patch: {err}; nothing was changed{put_back}"
        )));
    }
    Err(ToolError::refused(format!(
        "could not apply the patch: {err}; putting back the changes already made failed too, so \
         the workspace is partly patched:\n{}{others}",
        stuck.join("\n")
    )))
}

async fn perform<'a>(
    mutator: &dyn Mutator,
    steps: &'a [Step],
    done: &mut Vec<Done<'a>>,
) -> Result<(), MutatorError> {
    for step in steps {
        match step {
            Step::Add { path, bytes } => {
                create_parents(mutator, path, done).await?;
                mutator.write(path, bytes, None).await?;
                done.push(Done::Wrote { path, prior: None });
            }
            Step::Delete { path, prior } => {
                mutator.remove_file(path).await?;
                done.push(Done::Removed { path, prior });
            }
            Step::Update {
                path,
                old,
                mode,
                new,
            } => {
                mutator.write(path, new, None).await?;
                done.push(Done::Wrote {
                    path,
                    prior: Some((old, *mode)),
                });
            }
            Step::Move {
                from,
                to,
                old,
                mode,
                new,
            } => {
                create_parents(mutator, to, done).await?;
                mutator.rename(from, to).await?;
                done.push(Done::Renamed { from, to });
                if new != old {
                    mutator.write(to, new, None).await?;
                    done.push(Done::Wrote {
                        path: to,
                        prior: Some((old, *mode)),
                    });
                }
            }
        }
    }
    Ok(())
}

/// Creates the missing parent directories of `path`, logging each so that it can be removed.
/// (`create_parent_dirs` does the same but does not say which directories it made.)
async fn create_parents<'a>(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    done: &mut Vec<Done<'a>>,
) -> Result<(), MutatorError> {
    for dir in path.ancestors() {
        match mutator.stat(&dir).await? {
            Stat::Absent => {
                mutator.create_dir(&dir).await?;
                done.push(Done::CreatedDir(dir));
            }
            // Anything else was checked while planning; a file here makes the write fail.
            Stat::Dir { .. } | Stat::File { .. } | Stat::Symlink { .. } => {}
        }
    }
    Ok(())
}

async fn undo(mutator: &dyn Mutator, change: &Done<'_>) -> Result<(), MutatorError> {
    match change {
        Done::CreatedDir(dir) => mutator.remove_dir(dir).await,
        Done::Wrote { path, prior: None } => mutator.remove_file(path).await,
        Done::Wrote {
            path,
            prior: Some((bytes, mode)),
        } => mutator.write(path, bytes, Some(*mode)).await,
        Done::Removed {
            path,
            prior: Prior::File { bytes, mode },
        } => mutator.write(path, bytes, Some(*mode)).await,
        Done::Removed {
            path,
            prior: Prior::Symlink { target },
        } => mutator.symlink(target, path).await,
        Done::Renamed { from, to } => mutator.rename(to, from).await,
    }
}

fn describe_stuck(change: &Done<'_>, err: &MutatorError) -> String {
    match change {
        Done::CreatedDir(dir) => {
            format!("- directory {dir} was created and could not be removed ({err})")
        }
        Done::Wrote { path, prior: None } => {
            format!("- {path} was added and could not be removed ({err})")
        }
        Done::Wrote {
            path,
            prior: Some(_),
        } => {
            format!("- {path} holds the patched content and could not be restored ({err})")
        }
        Done::Removed { path, .. } => {
            format!("- {path} was deleted and could not be recreated ({err})")
        }
        Done::Renamed { from, to } => {
            format!("- {from} was moved to {to} and could not be moved back ({err})")
        }
    }
}
