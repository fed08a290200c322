//! Which turns a restore moves: the newest turn (undo), the next undone one (redo), or a
//! session's turns from one of them on (a rewind), joined into one record so that they are
//! checked, applied and recovered as one restore.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use shiro_tools::WorkspacePath;

use crate::deferred::Deferred;
use crate::error::UndoError;
use crate::format::{GitRecord, PathRecord, TurnRecord};
use crate::log::LogState;
use crate::report::{Conflict, ConflictKind, ConflictReport, Direction, TurnId};
use crate::restore::Planned;

/// What one restore moves.
#[derive(Debug, Clone)]
pub(super) struct Selection {
    pub direction: Direction,
    /// The record the restore goes through: the turn, or the turns' images joined (each
    /// path from before the first of them that touched it to after the last), under the
    /// first turn's id. For one turn, the log's own record of it, shared.
    pub turn: Arc<TurnRecord>,
    /// The turns it moves, oldest first, when there are several; empty for one.
    pub members: Vec<Arc<TurnRecord>>,
    /// For an undo, paths someone else changed between two of the turns (see
    /// [`ConflictKind::ChangedBetween`]); always empty for a redo.
    pub between: Vec<Conflict>,
}

impl Selection {
    fn single(direction: Direction, turn: Arc<TurnRecord>) -> Self {
        Self {
            direction,
            turn,
            members: Vec::new(),
            between: Vec::new(),
        }
    }

    /// The turns `first` and `later` (oldest first) as one restore.
    ///
    /// An undo of them is refused over a path someone else changed between two of them
    /// (undoing both would drop that change from the tree). A redo is not: such a gap is
    /// history the undo left in the turns' records as it found them (a forced rewind goes
    /// over it), not a change since the undo, and the redo brings back each turn's own
    /// images, the later one's `before` holding that change for its own undo.
    fn joined(
        direction: Direction,
        first: Arc<TurnRecord>,
        later: Vec<Arc<TurnRecord>>,
    ) -> Result<Self, UndoError> {
        if later.is_empty() {
            return Ok(Self::single(direction, first));
        }
        let (meta, group) = (first.meta.clone(), first.group);
        let mut members = later;
        members.insert(0, first);
        let mut paths: BTreeMap<&str, (PathRecord, TurnId)> = BTreeMap::new();
        let mut between = Vec::new();
        let undo = direction == Direction::Undo;
        for member in &members {
            for record in member.paths()? {
                match paths.get_mut(record.path.as_str()) {
                    None => {
                        paths.insert(&record.path, (record.clone(), member.meta.id));
                    }
                    Some((joined, last)) => {
                        if undo
                            && joined.after != record.before
                            && let Ok(path) = WorkspacePath::from_relative(&record.path)
                        {
                            between.push(Conflict {
                                path,
                                kind: ConflictKind::ChangedBetween {
                                    left_by: *last,
                                    found_by: member.meta.id,
                                },
                            });
                        }
                        joined.after = record.after.clone();
                        *last = member.meta.id;
                    }
                }
            }
        }
        // What the turns moved in the git repository, joined the same way.
        let mut git: Option<GitRecord> = None;
        let mut movers: BTreeMap<&str, TurnId> = BTreeMap::new();
        for member in &members {
            let Some(record) = &member.git else {
                continue;
            };
            let joined = git.get_or_insert_with(GitRecord::default);
            for (name, moved) in &record.moved {
                if undo
                    && let Some(known) = joined.moved.get(name)
                    && known.after != moved.before
                    && let Some(&left_by) = movers.get(name.as_str())
                    && let Ok(path) = WorkspacePath::from_relative(&format!(".git/{name}"))
                {
                    between.push(Conflict {
                        path,
                        kind: ConflictKind::ChangedBetween {
                            left_by,
                            found_by: member.meta.id,
                        },
                    });
                }
                movers.insert(name, member.meta.id);
            }
            joined.then(record);
        }
        let mut turn = TurnRecord {
            meta,
            tools: Vec::new(),
            changes: Deferred::new(Vec::new()),
            ran_bash: members.iter().any(|m| m.ran_bash),
            bash_uncaptured: members.iter().any(|m| m.bash_uncaptured),
            bash_unrestorable: Vec::new(),
            changed_since: Vec::new(),
            recovered: members.iter().any(|m| m.recovered),
            paths: Deferred::new(paths.into_values().map(|(record, _)| record).collect()),
            packs: Vec::new(),
            damage: None,
            group,
            git: git.filter(|git| !git.is_empty()),
        };
        let mut changes = Vec::new();
        for member in &members {
            for tool in &member.tools {
                if !turn.tools.contains(tool) {
                    turn.tools.push(tool.clone());
                }
            }
            changes.extend(member.changes()?.iter().cloned());
            turn.bash_unrestorable
                .extend(member.bash_unrestorable.iter().cloned());
            turn.changed_since
                .extend(member.changed_since.iter().cloned());
            for pack in &member.packs {
                if !turn.packs.contains(pack) {
                    turn.packs.push(pack.clone());
                }
            }
        }
        turn.changes = Deferred::new(changes);
        turn.bash_unrestorable.sort();
        turn.bash_unrestorable.dedup();
        // A path another member changed is reverted with that member.
        let merged: BTreeSet<&str> = (turn.paths()?.iter()).map(|p| p.path.as_str()).collect();
        let kept: BTreeSet<String> = (turn.changed_since.iter())
            .filter(|path| !merged.contains(path.as_str()))
            .cloned()
            .collect();
        turn.changed_since = kept.into_iter().collect();
        between.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Self {
            direction,
            turn: Arc::new(turn),
            members,
            between,
        })
    }

    /// The ids of the turns after the first.
    pub fn later_ids(&self) -> Vec<TurnId> {
        self.members.iter().skip(1).map(|m| m.meta.id).collect()
    }

    /// A refusal of this restore over `conflicts`.
    pub fn refusal(&self, conflicts: Vec<Conflict>) -> UndoError {
        UndoError::Conflict(ConflictReport {
            turn: self.turn.meta.id,
            summary: self.turn.meta.summary.clone(),
            also: self.later_ids(),
            direction: self.direction,
            conflicts,
        })
    }

    /// Records in the turns it moves what the restore found (its `plan`, and `git`, its
    /// joined record of the repository as [`crate::git::settle`] left it) on the side it
    /// leaves, as a restore of one turn does in its record, so that the opposite restore
    /// brings that back exactly; and names the `packs` the restore kept those copies in.
    /// For an undo that is the last turn to touch each path or move each git thing, for a
    /// redo the first.
    pub fn settle(
        &mut self,
        plan: &[Planned],
        git: Option<&GitRecord>,
        packs: &[String],
    ) -> Result<(), UndoError> {
        let direction = self.direction;
        // The members are the log's records, shared: each is copied as it is first changed.
        for item in plan {
            let path = item.path.as_str();
            let mut holders = Vec::new();
            for (i, member) in self.members.iter().enumerate() {
                if let Some(at) = member.paths()?.iter().position(|r| r.path == path) {
                    holders.push((i, at));
                }
            }
            let holder = match direction {
                Direction::Undo => holders.last(),
                Direction::Redo => holders.first(),
            };
            if let Some(&(member, at)) = holder
                && let Some(record) = Arc::make_mut(&mut self.members[member])
                    .paths_mut()?
                    .get_mut(at)
            {
                match direction {
                    Direction::Undo => record.after = item.now.clone(),
                    Direction::Redo => record.before = item.now.clone(),
                }
            }
        }
        // HEAD, a ref or the stash list someone moved after the last turn that moved it (for
        // a redo, since the undo) is found only in the joined record: without it here, the
        // opposite restore would join the turns' own values again and drop that move.
        for (name, found) in git.iter().flat_map(|git| &git.moved) {
            let mut movers = (self.members.iter().enumerate())
                .filter(|(_, member)| {
                    (member.git.as_ref()).is_some_and(|git| git.moved.contains_key(name))
                })
                .map(|(i, _)| i);
            let holder = match direction {
                Direction::Undo => movers.next_back(),
                Direction::Redo => movers.next(),
            };
            if let Some(member) = holder
                && let Some(moved) = (Arc::make_mut(&mut self.members[member]).git.as_mut())
                    .and_then(|git| git.moved.get_mut(name))
            {
                match direction {
                    Direction::Undo => moved.after = found.after.clone(),
                    Direction::Redo => moved.before = found.before.clone(),
                }
            }
        }
        for member in &mut self.members {
            let member = Arc::make_mut(member);
            for pack in packs {
                if !member.packs.contains(pack) {
                    member.packs.push(pack.clone());
                }
            }
        }
        Ok(())
    }
}

/// The newest turn, for an undo.
pub(super) fn newest(state: &LogState) -> Result<Selection, UndoError> {
    let turn = state.undo.last().cloned().ok_or(UndoError::NothingToUndo)?;
    Ok(Selection::single(Direction::Undo, turn))
}

/// The next turn to redo; with the turns a rewind undid with it, when it was one of those.
pub(super) fn next_redo(state: &LogState) -> Result<Selection, UndoError> {
    let top = state.redo.last().ok_or(UndoError::NothingToRedo)?;
    redo_with_group(state, top)
}

/// Turn `id`, wherever it is on the redo stack, with the turns a rewind undid with it: for
/// bringing back one session's turns when other undone turns lie above them (a fork's
/// parent, resumed). Refused when `id` is not undone.
pub(super) fn redo_of(state: &LogState, id: TurnId) -> Result<Selection, UndoError> {
    let turn = (state.redo.iter())
        .find(|turn| turn.meta.id == id)
        .ok_or(UndoError::NotUndone { id })?;
    redo_with_group(state, turn)
}

/// `turn` of the redo stack and the other turns of its group, as one redo.
fn redo_with_group(state: &LogState, turn: &Arc<TurnRecord>) -> Result<Selection, UndoError> {
    let Some(group) = turn.group else {
        return Ok(Selection::single(Direction::Redo, Arc::clone(turn)));
    };
    let mut members: Vec<&Arc<TurnRecord>> = (state.redo.iter())
        .filter(|other| other.group == Some(group))
        .collect();
    members.sort_by_key(|member| member.meta.id);
    match members.split_first() {
        Some((first, later)) => Selection::joined(
            Direction::Redo,
            Arc::clone(first),
            later.iter().map(|member| Arc::clone(member)).collect(),
        ),
        None => Ok(Selection::single(Direction::Redo, Arc::clone(turn))),
    }
}

/// Turn `id` and every later turn of its session (for a headless command's turn, every
/// later headless turn), for a rewind to before `id`. Refused, naming them, when a later
/// turn that is not among them touched one of their paths.
pub(super) fn rewind(state: &LogState, id: TurnId) -> Result<Selection, UndoError> {
    let first = (state.undo.iter())
        .find(|turn| turn.meta.id == id)
        .ok_or(UndoError::NoSuchTurn { id })?;
    let session = &first.meta.session;
    rewind_where(state, id, |turn| &turn.meta.session == session)
}

/// The turns `ids` of the undo stack, for a rewind of exactly those (a conversation's turns,
/// which a fork may have taken from its parent). Refused, naming them, when a later turn
/// that is not among them touched one of their paths.
pub(super) fn rewind_turns(state: &LogState, ids: &[TurnId]) -> Result<Selection, UndoError> {
    for id in ids {
        if !state.undo.iter().any(|turn| turn.meta.id == *id) {
            return Err(UndoError::NoSuchTurn { id: *id });
        }
    }
    let first = ids.iter().min().ok_or(UndoError::NothingToUndo)?;
    rewind_where(state, *first, |turn| ids.contains(&turn.meta.id))
}

/// Turn `id` and the later turns of the undo stack that `member` picks, as one undo.
fn rewind_where(
    state: &LogState,
    id: TurnId,
    member: impl Fn(&TurnRecord) -> bool,
) -> Result<Selection, UndoError> {
    let start = (state.undo.iter())
        .position(|turn| turn.meta.id == id)
        .ok_or(UndoError::NoSuchTurn { id })?;
    let (first, after) = state.undo.split_at(start + 1);
    let Some(first) = first.last() else {
        return Err(UndoError::NoSuchTurn { id });
    };
    let (later, others): (Vec<&Arc<TurnRecord>>, Vec<&Arc<TurnRecord>>) =
        after.iter().partition(|turn| member(turn));
    let selection = Selection::joined(
        Direction::Undo,
        Arc::clone(first),
        later.into_iter().cloned().collect(),
    )?;
    let mut crossed = Vec::new();
    for record in selection.turn.paths()? {
        let mut touched_by = None;
        for other in &others {
            if other.paths()?.iter().any(|p| p.path == record.path) {
                touched_by = Some(other);
                break;
            }
        }
        if let Some(other) = touched_by
            && let Ok(path) = WorkspacePath::from_relative(&record.path)
        {
            crossed.push(Conflict {
                path,
                kind: ConflictKind::LaterTurn {
                    id: other.meta.id,
                    session: other.meta.session.clone(),
                },
            });
        }
    }
    if crossed.is_empty() {
        Ok(selection)
    } else {
        Err(selection.refusal(crossed))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::image::{ContentHash, Image};
    use shiro_tools::git::Move;

    fn file(bytes: &[u8]) -> Image {
        Image::File {
            mode: 0o644,
            len: bytes.len() as u64,
            hash: ContentHash::of(bytes),
        }
    }

    /// Turn `id`, which took `a` from `before` to `after`.
    fn wrote(id: u64, before: Image, after: Image) -> Arc<TurnRecord> {
        let mut turn = TurnRecord::empty(id);
        turn.paths = Deferred::new(vec![PathRecord {
            path: "a".to_owned(),
            before,
            after,
        }]);
        Arc::new(turn)
    }

    /// Someone wrote `a` between two turns: undoing both is refused over it, as it would drop
    /// that write from the tree; redoing both (after a forced undo) is not, as the gap is the
    /// turns' own history, not a change since the undo. Either way the path goes from before
    /// the first turn to after the last.
    #[test]
    fn only_an_undo_is_refused_over_a_change_between_its_turns() {
        let first = wrote(1, Image::Absent, file(b"1"));
        let second = wrote(2, file(b"user"), file(b"2"));
        for (direction, refused) in [(Direction::Undo, true), (Direction::Redo, false)] {
            let joined =
                Selection::joined(direction, Arc::clone(&first), vec![Arc::clone(&second)])
                    .unwrap();
            let kinds: Vec<&ConflictKind> = joined.between.iter().map(|c| &c.kind).collect();
            let expected = ConflictKind::ChangedBetween {
                left_by: TurnId(1),
                found_by: TurnId(2),
            };
            match refused {
                true => assert_eq!(kinds, [&expected], "{direction:?}"),
                false => assert!(kinds.is_empty(), "{direction:?}: {kinds:?}"),
            }
            let paths = joined.turn.paths().unwrap();
            assert_eq!(paths.len(), 1);
            assert_eq!(
                (&paths[0].before, &paths[0].after),
                (&Image::Absent, &file(b"2"))
            );
        }
    }

    /// Turn `id`, which moved each git thing `(name, before, after)`.
    fn moved(id: u64, things: &[(&str, Option<&str>, Option<&str>)]) -> Arc<TurnRecord> {
        let mut turn = TurnRecord::empty(id);
        let moved = (things.iter())
            .map(|(name, before, after)| {
                let value = |v: &Option<&str>| v.map(str::to_owned);
                let moved = Move {
                    before: value(before),
                    after: value(after),
                };
                ((*name).to_owned(), moved)
            })
            .collect();
        turn.git = Some(GitRecord { moved, index: None });
        Arc::new(turn)
    }

    /// The value `name` has in turn `at` of `selection`'s members, before and after.
    fn values_of(selection: &Selection, at: usize, name: &str) -> (Option<String>, Option<String>) {
        let git = selection.members[at].git.as_ref().unwrap();
        let moved = &git.moved[name];
        (moved.before.clone(), moved.after.clone())
    }

    fn some(value: &str) -> Option<String> {
        Some(value.to_owned())
    }

    /// A forced rewind records in its turns where it found what it moved in the repository,
    /// as it does for paths: each thing in the last of them that moved it, so that the redo
    /// (which joins them again) brings back a ref someone moved after that turn, and undoing
    /// that turn alone later expects it there. A forced redo records it in the first.
    #[test]
    fn a_forced_rewind_records_what_it_found_in_the_repository_in_its_turns() {
        // Turn 1 commits c1 on main and makes x; someone commits u1 on main; turn 2 commits
        // c2. Then someone commits u2 on main and moves x.
        let first = moved(
            1,
            &[
                ("refs/heads/main", Some("c0"), Some("c1")),
                ("refs/heads/x", None, Some("x1")),
            ],
        );
        let second = moved(2, &[("refs/heads/main", Some("u1"), Some("c2"))]);
        let mut undo = Selection::joined(
            Direction::Undo,
            Arc::clone(&first),
            vec![Arc::clone(&second)],
        )
        .unwrap();
        // What `git::settle` makes of the joined record, the undo being forced.
        let mut found = undo.turn.git.clone().unwrap();
        assert_eq!(found.moved["refs/heads/main"].after, some("c2"));
        found.moved.get_mut("refs/heads/main").unwrap().after = some("u2");
        found.moved.get_mut("refs/heads/x").unwrap().after = some("x2");
        undo.settle(&[], Some(&found), &[]).unwrap();
        assert_eq!(
            values_of(&undo, 0, "refs/heads/main"),
            (some("c0"), some("c1"))
        );
        assert_eq!(values_of(&undo, 0, "refs/heads/x"), (None, some("x2")));
        assert_eq!(
            values_of(&undo, 1, "refs/heads/main"),
            (some("u1"), some("u2"))
        );
        // The log's records are copied, not changed.
        assert_eq!(
            second.git.as_ref().unwrap().moved["refs/heads/main"].after,
            some("c2")
        );

        // Their redo takes each thing to where the undo found it.
        let (one, two) = (Arc::clone(&undo.members[0]), Arc::clone(&undo.members[1]));
        let mut redo = Selection::joined(Direction::Redo, one, vec![two]).unwrap();
        let joined = redo.turn.git.clone().unwrap();
        assert_eq!(joined.moved["refs/heads/main"].before, some("c0"));
        assert_eq!(joined.moved["refs/heads/main"].after, some("u2"));
        assert_eq!(joined.moved["refs/heads/x"].after, some("x2"));
        assert!(redo.between.is_empty(), "{:?}", redo.between);
        // Forced over main moved to v since the undo, the redo records it in turn 1.
        let mut found = joined;
        found.moved.get_mut("refs/heads/main").unwrap().before = some("v");
        redo.settle(&[], Some(&found), &[]).unwrap();
        assert_eq!(
            values_of(&redo, 0, "refs/heads/main"),
            (some("v"), some("c1"))
        );
        assert_eq!(values_of(&redo, 0, "refs/heads/x"), (None, some("x2")));
        assert_eq!(
            values_of(&redo, 1, "refs/heads/main"),
            (some("u1"), some("u2"))
        );
    }
}
