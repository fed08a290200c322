//! `shiro undo` and `shiro redo`: a restore of the newest turn (or, with `--to`, of a turn
//! and the later turns of its session), the revert of one turn (`--turn`), a dry run's diff,
//! and `--abandon`.

use std::sync::atomic::Ordering;

use anyhow::{Context as _, Result, anyhow, bail};
use shiro_tools::{FsMutator, Mutator};
use shiro_undo::{
    Conflict, ConflictKind, Image, PREVIEW_MAX_BYTES, RevertOutcome, TurnId, TurnStart, UndoError,
    UndoOptions, UndoOutcome, UndoStore,
};

use super::{
    Context, FailedAfterChanges, InterruptedBeforeStart, Report, RestoreArgs, noticed, notices_of,
    tracked, with_newline,
};
use crate::render::{self, Color, Side};

/// Which way a restore goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// `shiro undo`.
    Undo,
    /// `shiro redo`.
    Redo,
}

/// `shiro undo` and `shiro redo`.
pub async fn restore(ctx: &Context, way: Way, args: &RestoreArgs) -> Result<Report> {
    if !ctx.has_store() {
        return Err(match (args.abandon, way) {
            (true, _) => anyhow!(ABANDON_NOTHING),
            (false, Way::Undo) => UndoError::NothingToUndo.into(),
            (false, Way::Redo) => UndoError::NothingToRedo.into(),
        });
    }
    if args.abandon {
        return abandon(ctx).await;
    }
    let (store, mut notices) = ctx.open_store_for_one().await?;
    let workspace = ctx.workspace()?;
    if let (Way::Undo, Some(id)) = (way, args.turn) {
        let result = revert(ctx, &store, workspace, TurnId(id), args.dry_run).await;
        notices.extend(notices_of(&store));
        return match result {
            Ok(mut report) => {
                report.notices.splice(0..0, notices);
                Ok(report)
            }
            Err(err) => Err(noticed(notices, err)),
        };
    }
    let options = UndoOptions {
        force: args.force,
        dry_run: args.dry_run,
    };
    let result = restore_in(ctx, &store, workspace, way, args, options).await;
    notices.extend(notices_of(&store));
    match result {
        Ok(mut report) => {
            report.notices.splice(0..0, notices);
            Ok(report)
        }
        Err(err) => Err(noticed(notices, err)),
    }
}

async fn restore_in(
    ctx: &Context,
    store: &UndoStore,
    workspace: FsMutator,
    way: Way,
    args: &RestoreArgs,
    options: UndoOptions,
) -> Result<Report> {
    if !args.dry_run && ctx.signals.interrupted() {
        return Err(InterruptedBeforeStart.into());
    }
    let (workspace, changed) = tracked(workspace);
    let result = match (way, args.to) {
        (Way::Undo, Some(id)) => store.rewind(&workspace, TurnId(id), options).await,
        (Way::Undo, None) => store.undo(&workspace, options).await,
        (Way::Redo, _) => store.redo(&workspace, options).await,
    };
    let verb = match way {
        Way::Undo => "undo",
        Way::Redo => "redo",
    };
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(UndoError::NoSuchTurn { id }) => return Err(no_turn_to_rewind(store, id)),
        // Rolled back: every file is as it was, which the error says; exit 1 is the truth.
        Err(err @ UndoError::RolledBack { .. }) => return Err(err.into()),
        // Neither finished nor rolled back: files were changed, and the error says how to
        // go on (run again, or `--abandon`).
        Err(err @ UndoError::RestoreStuck { .. }) => {
            return Err(anyhow::Error::new(err).context(FailedAfterChanges {
                message: format!("the {verb} stopped part-way after changing files"),
                stdout: String::new(),
            }));
        }
        // The log's `begin` record comes before the first change, so a restore that
        // changed anything and then failed (recording that it is done, say) is completed
        // by the next open.
        Err(err) if changed.load(Ordering::SeqCst) => {
            return Err(anyhow::Error::new(err).context(FailedAfterChanges {
                message: format!(
                    "the {verb} stopped after it began changing files; the undo log records it as under way, and the next shiro command completes it"
                ),
                stdout: String::new(),
            }));
        }
        Err(err) => return Err(err.into()),
    };
    let mut stdout = outcome.to_string();
    let mut notices = Vec::new();
    let mut exit = 0;
    if args.dry_run {
        stdout.push_str(&dry_run_diff(store, &workspace, &outcome, ctx.color).await?);
        // The restore it previews would be refused, or would stop: scripts read that from
        // the code, the one the restore would exit with. A change since the turn refuses it
        // first (exit 3, unless forced); a lock of git's stops it even when forced (exit 1).
        let (locks, changed): (Vec<&Conflict>, Vec<&Conflict>) = (outcome.conflicts.iter())
            .partition(|conflict| conflict.kind == ConflictKind::GitLocked);
        if !args.force && !changed.is_empty() {
            let count = changed.len();
            let since = match way {
                Way::Undo => "the turn",
                Way::Redo => "the turn was undone",
            };
            notices.push(format!(
                "{verb} would be refused: {count} {} changed since {since}; exit 3, as `shiro {verb}` would (`--force` overwrites them)",
                if count == 1 { "path" } else { "paths" }
            ));
            exit = 3;
        } else if !locks.is_empty() {
            let names: Vec<&str> = locks.iter().map(|lock| lock.path.as_str()).collect();
            notices.push(format!(
                "{verb} would stop on git's {} {} (a git is running, or one that stopped left {}); exit 1, as `shiro {verb}` would, even with --force",
                if locks.len() == 1 { "lock file" } else { "lock files" },
                names.join(", "),
                if locks.len() == 1 { "it" } else { "them" },
            ));
            exit = 1;
        }
    }
    Ok(Report {
        stdout,
        notices,
        reverted_by: match (args.dry_run, way) {
            (true, _) => None,
            (false, Way::Undo) => Some("shiro redo"),
            (false, Way::Redo) => Some("shiro undo"),
        },
        exit,
        ..Report::default()
    })
}

/// `shiro undo --turn ID`: turn `id` reverted alone, as a new headless turn.
async fn revert(
    ctx: &Context,
    store: &UndoStore,
    workspace: FsMutator,
    id: TurnId,
    dry_run: bool,
) -> Result<Report> {
    if dry_run {
        let outcome = match store.revert_dry_run(&workspace, id).await {
            Ok(outcome) => outcome,
            // As a dry run of undo does: what stands in the way on stdout, and the code of
            // the revert it previews.
            Err(UndoError::RevertConflict(conflicts)) => {
                return Ok(Report {
                    stdout: with_newline(conflicts.as_dry_run().to_string()),
                    notices: vec![format!(
                        "revert would be refused; exit 3, as `shiro undo --turn {}` would (`--force` does not apply)",
                        id.0
                    )],
                    exit: 3,
                    ..Report::default()
                });
            }
            Err(err) => return Err(err.into()),
        };
        let mut stdout = outcome.to_string();
        stdout.push_str(&revert_diff(&outcome, ctx.color));
        return Ok(Report {
            stdout,
            ..Report::default()
        });
    }
    if ctx.signals.interrupted() {
        return Err(InterruptedBeforeStart.into());
    }
    let start = TurnStart {
        summary: revert_summary(store, id),
        history_marker: 0,
        session: None,
    };
    let (workspace, changed) = tracked(workspace);
    let outcome = match store.revert(&workspace, id, start).await {
        Ok(outcome) => outcome,
        Err(err @ UndoError::RevertRolledBack { .. }) => return Err(err.into()),
        Err(err) if changed.load(Ordering::SeqCst) => {
            return Err(anyhow::Error::new(err).context(FailedAfterChanges {
                message: "the revert stopped after it began changing files; the undo log records it as under way, and the next shiro command completes it".to_owned(),
                stdout: String::new(),
            }));
        }
        Err(err) => return Err(err.into()),
    };
    Ok(Report {
        stdout: outcome.to_string(),
        reverted_by: Some("shiro undo"),
        ..Report::default()
    })
}

/// Why there is no turn `id` to rewind to. A turn undone already says so, and how to bring
/// it back: the store's own error cannot tell it from a turn that never was.
fn no_turn_to_rewind(store: &UndoStore, id: TurnId) -> anyhow::Error {
    let undone = store.redo_log().unwrap_or_default();
    match undone.iter().position(|turn| turn.id == id) {
        Some(0) => anyhow!(
            "turn {id} is undone already, so there is nothing to rewind; `shiro redo` brings it back"
        ),
        Some(_) => anyhow!(
            "turn {id} is undone already, so there is nothing to rewind; `shiro redo` brings it back once it has brought back what was undone after it (`shiro redo --dry-run` shows what the next one brings back)"
        ),
        None => UndoError::NoSuchTurn { id }.into(),
    }
}

/// The summary of the turn that reverts turn `id`: `revert #7: fix the parser`.
pub fn revert_summary(store: &UndoStore, id: TurnId) -> String {
    let summary = (store.log().unwrap_or_default().into_iter())
        .find(|turn| turn.id == id)
        .map(|turn| turn.summary);
    match summary {
        Some(summary) => format!("revert {id}: {summary}"),
        None => format!("revert {id}"),
    }
}

/// The unified diff of what a revert's dry run would change.
pub fn revert_diff(outcome: &RevertOutcome, color: Color) -> String {
    let mut out = String::new();
    for path in &outcome.paths {
        let now = side_of(&path.now, path.now_bytes.clone());
        let becomes = side_of(&path.becomes, path.becomes_bytes.clone());
        if now != becomes {
            out.push_str(&render::diff(path.path.as_str(), &now, &becomes, color));
        }
    }
    out
}

const ABANDON_NOTHING: &str =
    "nothing to abandon: no undo or redo stopped part-way in this workspace";

/// `shiro undo --abandon`: clears a restore that stopped part-way, changing no file. The
/// store is opened as it is: opening it normally would first try to complete the restore.
async fn abandon(ctx: &Context) -> Result<Report> {
    let store = UndoStore::open_as_is(&ctx.state, ctx.store_options())
        .await
        .context("cannot open the undo store")?;
    let notices = notices_of(&store);
    let workspace = ctx.workspace()?;
    match store.abandon(&workspace).await? {
        // Nothing was changed, so there is nothing to revert.
        Some(abandoned) => Ok(Report {
            stdout: with_newline(abandoned.to_string()),
            notices,
            ..Report::default()
        }),
        None => bail!(ABANDON_NOTHING),
    }
}

/// The unified diff of what a dry run would change: each path from now to what it becomes.
pub async fn dry_run_diff(
    store: &UndoStore,
    workspace: &dyn Mutator,
    outcome: &UndoOutcome,
    color: Color,
) -> Result<String> {
    let mut out = String::new();
    let copies = store.copies(outcome.turn.id)?;
    for path in &outcome.paths {
        let now_bytes = match &path.now {
            Image::File { len, .. } if *len <= PREVIEW_MAX_BYTES => {
                Some(workspace.read(&path.path).await?)
            }
            _ => None,
        };
        let becomes_bytes = match &path.becomes {
            Image::File { len, hash, .. } if *len <= PREVIEW_MAX_BYTES => Some(
                copies
                    .get(hash)?
                    .ok_or_else(|| anyhow!("the stored copy of {} is missing", path.path))?,
            ),
            _ => None,
        };
        let now = side_of(&path.now, now_bytes);
        let becomes = side_of(&path.becomes, becomes_bytes);
        if now != becomes {
            out.push_str(&render::diff(path.path.as_str(), &now, &becomes, color));
        }
    }
    Ok(out)
}

/// What `image` shows in a diff; `bytes` are the file's when it is one, read only up to
/// [`PREVIEW_MAX_BYTES`].
fn side_of(image: &Image, bytes: Option<Vec<u8>>) -> Side {
    match image {
        Image::Absent => Side::Absent,
        Image::File { len, mode, hash } if *len > PREVIEW_MAX_BYTES => Side::Big {
            len: *len,
            mode: *mode,
            hash: *hash,
        },
        Image::File { mode, .. } => Side::File(bytes.unwrap_or_default(), *mode),
        Image::Dir { .. } => Side::Dir,
        Image::Symlink { target } => Side::Symlink(target.clone()),
    }
}
