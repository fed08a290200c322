//! `shiro log`: the turns that can be undone and redone, as text or JSON.

use std::fmt::Write as _;

use anyhow::Result;

use super::{Context, Report};

/// `shiro log [--json]`.
pub async fn log(ctx: &Context, json: bool) -> Result<Report> {
    if !ctx.has_store() {
        return Ok(Report {
            stdout: if json {
                serde_json::to_string_pretty(&serde_json::json!({"turns": [], "redo": []}))? + "\n"
            } else {
                "no turns to undo\n".to_owned()
            },
            ..Report::default()
        });
    }
    let (store, notices) = ctx.open_store_for_one().await?;
    let turns = store.log()?;
    let workspace = ctx.workspace()?;
    // Only the newest turn can be undone next, so only its cleanliness is meaningful now.
    let newest_conflicts = match turns.first() {
        Some(_) => store.check(&workspace).await?,
        None => Vec::new(),
    };
    let redo = store.redo_log()?;
    if json {
        let value = serde_json::json!({
            "turns": turns.iter().enumerate().map(|(i, turn)| {
                let mut value = serde_json::to_value(turn).unwrap_or_default();
                if let Some(object) = value.as_object_mut() {
                    let clean = if i == 0 { Some(newest_conflicts.is_empty()) } else { None };
                    object.insert("undo_is_clean".into(), serde_json::json!(clean));
                    object.insert("conflicts".into(), serde_json::json!(if i == 0 {
                        newest_conflicts.iter().map(|c| c.path.to_string()).collect::<Vec<_>>()
                    } else {
                        Vec::new()
                    }));
                }
                value
            }).collect::<Vec<_>>(),
            "redo": redo.iter().map(|t| t.id.0).collect::<Vec<_>>(),
        });
        let stdout = serde_json::to_string_pretty(&value)? + "\n";
        return Ok(Report {
            stdout,
            notices,
            ..Report::default()
        });
    }
    let mut out = String::new();
    if turns.is_empty() {
        out.push_str("no turns to undo\n");
    }
    for (i, turn) in turns.iter().enumerate() {
        writeln!(
            out,
            "{} {}  {:?}",
            turn.id,
            format_time(turn.time),
            turn.summary
        )?;
        if let Some(session) = &turn.session {
            writeln!(out, "    session {session}")?;
        }
        for change in &turn.changes {
            writeln!(out, "    {change}")?;
        }
        if let Some(git) = &turn.git {
            writeln!(out, "    git: {git}")?;
        }
        if turn.bash_uncaptured {
            writeln!(
                out,
                "    (ran bash without capture: its effects are not recorded)"
            )?;
        }
        let outside = turn.outside_tools();
        if !outside.is_empty() {
            writeln!(
                out,
                "    (called MCP tools {}: their effects are not recorded)",
                outside.join(", ")
            )?;
        }
        if !turn.bash_unrestorable.is_empty() {
            const LISTED: usize = 20;
            let n = turn.bash_unrestorable.len();
            writeln!(
                out,
                "    bash changed {n} {} that cannot be restored:",
                if n == 1 { "file" } else { "files" }
            )?;
            for path in turn.bash_unrestorable.iter().take(LISTED) {
                writeln!(out, "      {path}")?;
            }
            if n > LISTED {
                writeln!(
                    out,
                    "      … and {} more (`shiro log --json` lists them all)",
                    n - LISTED
                )?;
            }
        }
        if let Some(damage) = &turn.damage {
            writeln!(out, "    damaged: {damage}")?;
        }
        if i == 0 {
            if newest_conflicts.is_empty() {
                writeln!(out, "    next to undo: clean")?;
            } else {
                // git's locks stop an undo even when forced: they are named apart.
                let (locks, changed): (Vec<_>, Vec<_>) = (newest_conflicts.iter())
                    .partition(|c| matches!(c.kind, shiro_undo::ConflictKind::GitLocked));
                let paths = |conflicts: &[&shiro_undo::Conflict]| {
                    let paths: Vec<String> = conflicts.iter().map(|c| c.path.to_string()).collect();
                    paths.join(", ")
                };
                if !changed.is_empty() {
                    writeln!(
                        out,
                        "    next to undo: changed since the turn: {} (undo refuses without --force)",
                        paths(&changed)
                    )?;
                }
                if !locks.is_empty() {
                    writeln!(
                        out,
                        "    next to undo: git's lock {} exists: another git process seems to be running in this repository (undo refuses while it exists, even with --force)",
                        paths(&locks)
                    )?;
                }
            }
        }
    }
    if !redo.is_empty() {
        let ids: Vec<String> = redo.iter().map(|t| t.id.to_string()).collect();
        writeln!(out, "can be redone: {}", ids.join(", "))?;
        for turn in &redo {
            if let Some(damage) = &turn.damage {
                writeln!(out, "    {} damaged: {damage}", turn.id)?;
            }
        }
    }
    Ok(Report {
        stdout: out,
        notices,
        ..Report::default()
    })
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn format_time(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm), valid for every date after 1970.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_times() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_time(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(format_time(1_796_000_000), "2026-11-30 00:53:20 UTC");
    }
}
