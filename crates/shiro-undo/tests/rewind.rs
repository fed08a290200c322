//! Rewinds against a model: random turns (file tools' and bash's) of two interleaved
//! sessions and of headless commands, with the user's own edits between them, and the operations undo, redo (of the
//! newest undone turn, or of a chosen one, as a fork's parent brings its turns back), rewind
//! to before any turn (forced, too, over the user's edits), and fork (a rewind of a session's turns from one on, exactly those
//! turns, after which the session goes on under a new id), and the revert of one earlier
//! turn alone, as a new turn. A new turn clears the undone turns of its own session only. After every step the tree is the model's, and every
//! refusal leaves it byte-identical.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;

use common::p;
use proptest::prelude::*;
use proptest::sample::Index;
use shiro_tools::{MemMutator, Mutator};
use shiro_undo::{
    BashCapture, ConflictKind, StoreOptions, TurnId, TurnStart, UndoError, UndoOptions, UndoStore,
};

const FILES: [&str; 4] = ["a", "b", "c", "d"];
/// Sessions of the generated turns; the last stands for headless commands (no session).
const SESSIONS: [Option<&str>; 3] = [Some("s1"), Some("s2"), None];

/// The files, as the model sees them.
type Files = BTreeMap<&'static str, Vec<u8>>;

/// A file's content, or `None` when it is absent.
type Content = Option<Vec<u8>>;

/// Each path a turn (or turns) changed, with its content before and after.
type Sides = BTreeMap<&'static str, (Content, Content)>;

#[derive(Debug, Clone)]
enum Change {
    Write(usize, u8),
    Delete(usize),
    Move(usize, usize),
}

#[derive(Debug, Clone)]
enum Step {
    /// A turn of the session in the given slot; `bash` when its changes come from a bash
    /// call's overlay, captured ahead all at once and applied through the recording.
    Turn {
        session: usize,
        changes: Vec<Change>,
        bash: bool,
    },
    /// The user's own edit, not recorded.
    Edit(Change),
    Undo,
    Redo,
    /// Redo a chosen undone turn (with its rewind's group), wherever it is on the stack.
    RedoTurn(Index),
    Rewind(Index),
    /// Rewind to before a chosen turn with `--force`: over the user's edits, those between
    /// its turns too (only a later turn of another session still refuses it).
    ForceRewind(Index),
    /// Fork the session of a chosen turn before it: rewind exactly its turns from that one on,
    /// and go on under a new session id (the parent's turns wait, undone, for a redo).
    Fork(Index),
    /// Revert a chosen turn alone, as a new turn of the session in the given slot.
    Revert(Index, usize),
}

/// A recorded turn as the model knows it: its id, session, and each path before and after.
#[derive(Debug, Clone)]
struct Turn {
    id: u64,
    session: Option<String>,
    paths: Sides,
}

#[derive(Debug, Default)]
struct Model {
    files: Files,
    undo: Vec<Turn>,
    /// Groups of turns undone together, the next to redo last; each oldest first.
    redo: Vec<Vec<Turn>>,
}

impl Model {
    /// The change as it applies to the files now, or `None` when it cannot (a delete or
    /// move of a missing file, a move onto an existing one).
    fn resolve(&self, change: &Change) -> Option<Change> {
        match *change {
            Change::Write(..) => Some(change.clone()),
            Change::Delete(f) => self.files.contains_key(FILES[f]).then(|| change.clone()),
            Change::Move(from, to) => (from != to
                && self.files.contains_key(FILES[from])
                && !self.files.contains_key(FILES[to]))
            .then(|| change.clone()),
        }
    }

    fn apply(&mut self, change: &Change) {
        match *change {
            Change::Write(f, byte) => {
                self.files.insert(FILES[f], vec![byte; 3]);
            }
            Change::Delete(f) => {
                self.files.remove(FILES[f]);
            }
            Change::Move(from, to) => {
                if let Some(bytes) = self.files.remove(FILES[from]) {
                    self.files.insert(FILES[to], bytes);
                }
            }
        }
    }

    /// The paths of `group` (oldest first), from before the first turn that touched each to
    /// after the last.
    fn group_sides(group: &[Turn]) -> Sides {
        let mut joined = Sides::new();
        for turn in group {
            for (path, (before, after)) in &turn.paths {
                joined
                    .entry(path)
                    .and_modify(|sides| sides.1 = after.clone())
                    .or_insert_with(|| (before.clone(), after.clone()));
            }
        }
        joined
    }

    /// Whether someone else changed a path between two turns of `group`.
    fn changed_between(group: &[Turn]) -> bool {
        let mut last: BTreeMap<&str, &Option<Vec<u8>>> = BTreeMap::new();
        for turn in group {
            for (path, (before, after)) in &turn.paths {
                if last.get(path).is_some_and(|left| *left != before) {
                    return true;
                }
                last.insert(path, after);
            }
        }
        false
    }

    fn is(&self, path: &str, image: &Option<Vec<u8>>) -> bool {
        self.files.get(path) == image.as_ref()
    }

    fn set(&mut self, path: &'static str, image: &Option<Vec<u8>>) {
        match image {
            Some(bytes) => self.files.insert(path, bytes.clone()),
            None => self.files.remove(path),
        };
    }

    /// Undoes `group` (oldest first) when nothing stands in the way; whether it did.
    fn undo_group(&mut self, group: Vec<Turn>) -> bool {
        let joined = Self::group_sides(&group);
        let clean = !Self::changed_between(&group)
            && joined.iter().all(|(path, (_, after))| self.is(path, after));
        if !clean {
            return false;
        }
        for (path, (before, _)) in &joined {
            self.set(path, before);
        }
        let ids: Vec<u64> = group.iter().map(|t| t.id).collect();
        self.undo.retain(|t| !ids.contains(&t.id));
        self.redo.push(group);
        true
    }

    /// Undoes `group` (oldest first) whatever its paths hold now. What it finds is what its
    /// redo brings back: the last turn of the group to touch each path keeps it as its
    /// `after`, and an edit between two of its turns stays in the later one's `before`.
    fn force_undo_group(&mut self, mut group: Vec<Turn>) {
        let joined = Self::group_sides(&group);
        for (path, (before, _)) in &joined {
            let found = self.files.get(path).cloned();
            if let Some(turn) = group.iter_mut().rev().find(|t| t.paths.contains_key(path))
                && let Some(sides) = turn.paths.get_mut(path)
            {
                sides.1 = found;
            }
            self.set(path, before);
        }
        let ids: Vec<u64> = group.iter().map(|t| t.id).collect();
        self.undo.retain(|t| !ids.contains(&t.id));
        self.redo.push(group);
    }

    fn redo_group(&mut self) -> Option<bool> {
        let top = self.redo.len().checked_sub(1)?;
        Some(self.redo_at(top))
    }

    /// Redoes the group at `index` of the redo stack when nothing stands in the way; whether
    /// it did.
    fn redo_at(&mut self, index: usize) -> bool {
        let joined = Self::group_sides(&self.redo[index]);
        if !joined
            .iter()
            .all(|(path, (before, _))| self.is(path, before))
        {
            return false;
        }
        for (path, (_, after)) in &joined {
            self.set(path, after);
        }
        for turn in self.redo.remove(index) {
            let at = self.undo.partition_point(|t| t.id < turn.id);
            self.undo.insert(at, turn);
        }
        true
    }

    /// The turns a rewind to before `undo[start]` undoes, or `None` when a later turn of
    /// another session touched one of their paths.
    fn rewound(&self, start: usize) -> Option<Vec<Turn>> {
        let session = &self.undo[start].session;
        let (group, others): (Vec<&Turn>, Vec<&Turn>) = self.undo[start..]
            .iter()
            .partition(|t| &t.session == session);
        let crossed = group.iter().any(|t| {
            t.paths
                .keys()
                .any(|path| others.iter().any(|o| o.paths.contains_key(path)))
        });
        (!crossed).then(|| group.into_iter().cloned().collect())
    }

    /// What a revert of `undo[at]` makes of each path it changes, or `None` when one path
    /// conflicts. A path as the turn found it stays, as does one the turn left as it found
    /// it (a forced undo keeps what it found as the turn's `after`); one as the turn left it
    /// goes back; one changed since conflicts, as every file here is a single line (a merge
    /// of two changes to one line is a conflict).
    fn reverted(&self, at: usize) -> Option<Sides> {
        let mut changes = Sides::new();
        for (path, (before, after)) in &self.undo[at].paths {
            if before == after || self.is(path, before) {
                continue;
            }
            if !self.is(path, after) {
                return None;
            }
            changes.insert(path, (after.clone(), before.clone()));
        }
        Some(changes)
    }
}

fn change() -> impl Strategy<Value = Change> {
    let file = 0..FILES.len();
    prop_oneof![
        4 => (file.clone(), b'a'..b'f').prop_map(|(f, byte)| Change::Write(f, byte)),
        1 => file.clone().prop_map(Change::Delete),
        1 => (file.clone(), file).prop_map(|(from, to)| Change::Move(from, to)),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => (0..SESSIONS.len(), prop::collection::vec(change(), 1..4), any::<bool>())
            .prop_map(|(session, changes, bash)| Step::Turn { session, changes, bash }),
        1 => change().prop_map(Step::Edit),
        2 => Just(Step::Undo),
        2 => Just(Step::Redo),
        1 => any::<Index>().prop_map(Step::RedoTurn),
        3 => any::<Index>().prop_map(Step::Rewind),
        1 => any::<Index>().prop_map(Step::ForceRewind),
        1 => any::<Index>().prop_map(Step::Fork),
        2 => (any::<Index>(), 0..SESSIONS.len()).prop_map(|(at, session)| Step::Revert(at, session)),
    ]
}

async fn perform(m: &dyn Mutator, change: &Change) {
    let result = match *change {
        Change::Write(f, byte) => m.write(&p(FILES[f]), &[byte; 3], None).await,
        Change::Delete(f) => m.remove_file(&p(FILES[f])).await,
        Change::Move(from, to) => m.rename(&p(FILES[from]), &p(FILES[to])).await,
    };
    result.unwrap();
}

fn tree(mem: &MemMutator) -> Files {
    let mut files = Files::new();
    for (path, (_, bytes)) in mem.snapshot() {
        let name = FILES.iter().find(|f| **f == path).unwrap();
        files.insert(name, bytes.unwrap());
    }
    files
}

/// What a store operation came to: done, refused (changing nothing), or nothing to do.
fn settled(result: Result<shiro_undo::UndoOutcome, UndoError>) -> Option<bool> {
    match result {
        Ok(_) => Some(true),
        Err(UndoError::Conflict(_)) => Some(false),
        Err(UndoError::NothingToUndo | UndoError::NothingToRedo) => None,
        Err(err) => panic!("unexpected error: {err}"),
    }
}

/// What a revert came to, as [`settled`] says it: the new turn's id when done.
fn reverted(result: Result<shiro_undo::RevertOutcome, UndoError>) -> Option<Option<u64>> {
    match result {
        Ok(outcome) => Some(outcome.turn.map(|t| t.id.0)),
        Err(UndoError::RevertConflict(_)) => Some(None),
        Err(UndoError::NothingToRevert { .. }) => None,
        Err(err) => panic!("unexpected error: {err}"),
    }
}

/// Deep enough that no turn of a case is dropped.
fn deep() -> StoreOptions {
    StoreOptions {
        depth: 1000,
        ..StoreOptions::default()
    }
}

/// A store deep enough for any case, over an empty in-memory workspace.
async fn open() -> (tempfile::TempDir, MemMutator, UndoStore) {
    let dir = common::fast_tempdir();
    let mem = MemMutator::new();
    let store = UndoStore::open_with(&common::state(dir.path()), &mem, deep())
        .await
        .unwrap();
    (dir, mem, store)
}

fn run(steps: &[Step]) -> Result<(), TestCaseError> {
    common::runtime().block_on(async {
        let (dir, mem, store) = open().await;
        let recording = store.recorder(mem.clone());
        let mut model = Model::default();
        let mut script = String::new();
        let mut next_id = 1;
        // The session id each slot of SESSIONS goes on under (a fork gives it a new one).
        let mut sessions: Vec<Option<String>> =
            SESSIONS.iter().map(|s| s.map(str::to_owned)).collect();
        let mut forks = 0;
        for step in steps {
            let before = tree(&mem);
            match step {
                Step::Turn {
                    session,
                    changes,
                    bash,
                } => {
                    let session = sessions[*session].clone();
                    recording
                        .begin_turn(TurnStart {
                            summary: format!("turn {next_id}"),
                            history_marker: next_id,
                            session: session.clone(),
                        })
                        .await
                        .unwrap();
                    let start = model.files.clone();
                    if *bash {
                        // As the overlay's changes are applied: every path they may touch
                        // captured first, with one flush.
                        let all: Vec<_> = FILES.iter().map(|f| p(f)).collect();
                        recording.capture_ahead(&all).await.unwrap();
                        recording.note_bash(BashCapture::Overlay, &[]).await;
                    }
                    let mut touched = Vec::new();
                    for change in changes {
                        if let Some(change) = model.resolve(change) {
                            perform(&recording, &change).await;
                            model.apply(&change);
                            match change {
                                Change::Write(f, _) | Change::Delete(f) => touched.push(FILES[f]),
                                Change::Move(a, b) => touched.extend([FILES[a], FILES[b]]),
                            }
                        }
                    }
                    let finished = recording.finish_turn().await.unwrap();
                    let kind = if *bash { "bash " } else { "" };
                    script.push_str(&format!("{kind}turn {next_id} {session:?}: {changes:?}\n"));
                    // A turn keeps the paths it changed, and only a turn that changed one is kept.
                    let paths: BTreeMap<_, _> = touched
                        .into_iter()
                        .map(|f| (f, (start.get(f).cloned(), model.files.get(f).cloned())))
                        .filter(|(_, (before, after))| before != after)
                        .collect();
                    if finished.is_some() {
                        // Another session's undone turns stay redoable.
                        model.redo.retain(|group| group[0].session != session);
                        model.undo.push(Turn {
                            id: next_id,
                            session,
                            paths,
                        });
                        next_id += 1;
                    } else {
                        prop_assert!(
                            paths.is_empty(),
                            "a turn that changed files was dropped\n{script}"
                        );
                    }
                }
                Step::Edit(change) => {
                    if let Some(change) = model.resolve(change) {
                        perform(&mem, &change).await;
                        model.apply(&change);
                        script.push_str(&format!("edit {change:?}\n"));
                    }
                }
                Step::Undo => {
                    let real = settled(store.undo(&mem, UndoOptions::default()).await);
                    let expected = model
                        .undo
                        .last()
                        .cloned()
                        .map(|turn| model.undo_group(vec![turn]));
                    script.push_str(&format!("undo: {real:?}\n"));
                    prop_assert_eq!(real, expected, "undo\n{}", script);
                }
                Step::Redo => {
                    let real = settled(store.redo(&mem, UndoOptions::default()).await);
                    let expected = model.redo_group();
                    script.push_str(&format!("redo: {real:?}\n"));
                    prop_assert_eq!(real, expected, "redo\n{}", script);
                }
                Step::RedoTurn(index) => {
                    if model.redo.is_empty() {
                        continue;
                    }
                    let at = index.index(model.redo.len());
                    // Any turn of the group names it.
                    let group = &model.redo[at];
                    let id = group[index.index(group.len())].id;
                    let real = settled(
                        store
                            .redo_turn(&mem, TurnId(id), UndoOptions::default())
                            .await,
                    );
                    let expected = Some(model.redo_at(at));
                    script.push_str(&format!("redo #{id}: {real:?}\n"));
                    prop_assert_eq!(real, expected, "redo of a chosen turn\n{}", script);
                }
                Step::Fork(index) => {
                    if model.undo.is_empty() {
                        continue;
                    }
                    let start = index.index(model.undo.len());
                    let session = model.undo[start].session.clone();
                    let Some(slot) = sessions.iter().position(|s| *s == session) else {
                        // A parent session that forked already: it goes on no more.
                        continue;
                    };
                    if session.is_none() {
                        continue;
                    }
                    let ids: Vec<TurnId> = (model.undo[start..].iter())
                        .filter(|t| t.session == session)
                        .map(|t| TurnId(t.id))
                        .collect();
                    let result = store.rewind_turns(&mem, &ids, UndoOptions::default()).await;
                    let real = settled(result);
                    let expected = Some(match model.rewound(start) {
                        Some(group) => model.undo_group(group),
                        None => false,
                    });
                    script.push_str(&format!(
                        "fork {session:?} before #{}: {real:?}\n",
                        ids[0].0
                    ));
                    prop_assert_eq!(real, expected, "fork\n{}", script);
                    if real == Some(true) {
                        forks += 1;
                        sessions[slot] = Some(format!("fork{forks}"));
                    }
                }
                Step::Revert(index, slot) => {
                    if model.undo.is_empty() {
                        continue;
                    }
                    let at = index.index(model.undo.len());
                    let id = model.undo[at].id;
                    let session = sessions[*slot].clone();
                    let start = TurnStart {
                        summary: format!("revert #{id}"),
                        history_marker: next_id,
                        session: session.clone(),
                    };
                    let real = reverted(store.revert(&mem, TurnId(id), start).await);
                    script.push_str(&format!("revert #{id} as {session:?}: {real:?}\n"));
                    let expected = model.reverted(at);
                    match (real, expected) {
                        (Some(Some(new)), Some(paths)) if !paths.is_empty() => {
                            prop_assert!(new >= next_id, "a revert reused an id\n{}", script);
                            for (path, (_, before)) in &paths {
                                model.set(path, before);
                            }
                            model.redo.retain(|group| group[0].session != session);
                            model.undo.push(Turn {
                                id: new,
                                session,
                                paths,
                            });
                            next_id = new + 1;
                        }
                        (Some(None), None) => {
                            prop_assert_eq!(
                                &tree(&mem),
                                &before,
                                "a refused revert changed the tree\n{}",
                                script
                            );
                        }
                        (None, Some(paths)) if paths.is_empty() => {}
                        (real, expected) => {
                            return Err(TestCaseError::fail(format!(
                                "revert: store {real:?}, model {expected:?}\n{script}"
                            )));
                        }
                    }
                }
                Step::Rewind(index) => {
                    if model.undo.is_empty() {
                        continue;
                    }
                    let start = index.index(model.undo.len());
                    let id = model.undo[start].id;
                    let result = store.rewind(&mem, TurnId(id), UndoOptions::default()).await;
                    if let Err(UndoError::Conflict(report)) = &result {
                        let crossed = report
                            .conflicts
                            .iter()
                            .any(|c| matches!(c.kind, ConflictKind::LaterTurn { .. }));
                        prop_assert_eq!(crossed, model.rewound(start).is_none(), "{}", script);
                    }
                    let real = settled(result);
                    let expected = Some(match model.rewound(start) {
                        Some(group) => model.undo_group(group),
                        None => false,
                    });
                    script.push_str(&format!("rewind to #{id}: {real:?}\n"));
                    prop_assert_eq!(real, expected, "rewind\n{}", script);
                }
                Step::ForceRewind(index) => {
                    if model.undo.is_empty() {
                        continue;
                    }
                    let start = index.index(model.undo.len());
                    let id = model.undo[start].id;
                    let forced = UndoOptions {
                        force: true,
                        dry_run: false,
                    };
                    let real = settled(store.rewind(&mem, TurnId(id), forced).await);
                    let expected = Some(match model.rewound(start) {
                        Some(group) => {
                            model.force_undo_group(group);
                            true
                        }
                        None => false,
                    });
                    script.push_str(&format!("rewind to #{id} --force: {real:?}\n"));
                    prop_assert_eq!(real, expected, "forced rewind\n{}", script);
                }
            }
            let now = tree(&mem);
            prop_assert_eq!(&now, &model.files, "tree and model differ\n{}", script);
            if matches!(
                step,
                Step::Undo
                    | Step::Redo
                    | Step::RedoTurn(_)
                    | Step::Rewind(_)
                    | Step::ForceRewind(_)
                    | Step::Fork(_)
            ) && script.ends_with("Some(false)\n")
            {
                prop_assert_eq!(&now, &before, "a refusal changed the tree\n{}", script);
            }
        }
        // The log lists the model's turns; reopened, the store redoes what is left to redo,
        // a rewind's turns together, as the model does.
        let ids: Vec<u64> = store.log().unwrap().iter().map(|t| t.id.0).collect();
        let model_ids: Vec<u64> = model.undo.iter().rev().map(|t| t.id).collect();
        prop_assert_eq!(ids, model_ids, "{}", script);
        drop((recording, store));
        let store = UndoStore::open_with(&common::state(dir.path()), &mem, deep())
            .await
            .unwrap();
        loop {
            let real = settled(store.redo(&mem, UndoOptions::default()).await);
            let expected = model.redo_group();
            script.push_str(&format!("redo after reopening: {real:?}\n"));
            prop_assert_eq!(real, expected, "redo after reopening\n{}", script);
            prop_assert_eq!(
                &tree(&mem),
                &model.files,
                "tree and model differ\n{}",
                script
            );
            if real != Some(true) {
                break;
            }
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::base_cases(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn rewinds_undo_and_redo_agree_with_a_model(steps in prop::collection::vec(step(), 1..40)) {
        run(&steps)?;
    }
}

/// What a person reads: a rewind of three turns, a redo of them, and a rewind refused over
/// another session's later turn.
#[test]
fn rewind_texts() {
    common::runtime().block_on(async {
        let (_dir, mem, store) = open().await;
        let recording = store.recorder(mem.clone());
        let turns = [
            ("s1", "a", "add the parser"),
            ("s2", "b", "write the docs"),
            ("s1", "c", "add tests"),
            ("s1", "a", "fix the parser"),
        ];
        for (i, (session, file, summary)) in turns.into_iter().enumerate() {
            recording
                .begin_turn(TurnStart {
                    summary: summary.to_owned(),
                    history_marker: i as u64,
                    session: Some(session.to_owned()),
                })
                .await
                .unwrap();
            recording
                .write(&p(file), summary.as_bytes(), None)
                .await
                .unwrap();
            recording.finish_turn().await.unwrap();
        }
        let rewound = store
            .rewind(&mem, TurnId(1), UndoOptions::default())
            .await
            .unwrap();
        let redone = store.redo(&mem, UndoOptions::default()).await.unwrap();
        // Session s2 writes `c` after s1's first turn: s1 can no longer rewind to it.
        recording
            .begin_turn(TurnStart {
                summary: "rename in the tests".to_owned(),
                history_marker: 9,
                session: Some("s2".to_owned()),
            })
            .await
            .unwrap();
        recording.write(&p("c"), b"renamed", None).await.unwrap();
        recording.finish_turn().await.unwrap();
        let refused = store
            .rewind(&mem, TurnId(1), UndoOptions::default())
            .await
            .unwrap_err();
        let missing = store
            .rewind(&mem, TurnId(42), UndoOptions::default())
            .await
            .unwrap_err();
        insta::assert_snapshot!(format!("{rewound}\n{redone}\n{refused}\n\n{missing}"));
    });
}

/// Records one turn of session `s1` that writes each `(path, bytes)`.
async fn write_turn(recording: &shiro_undo::Recording<MemMutator>, writes: &[(&str, &[u8])]) {
    recording
        .begin_turn(TurnStart {
            summary: format!("write {}", writes[0].0),
            history_marker: 0,
            session: Some("s1".to_owned()),
        })
        .await
        .unwrap();
    for (path, bytes) in writes {
        recording.write(&p(path), bytes, None).await.unwrap();
    }
    recording.finish_turn().await.unwrap().unwrap();
}

/// Checks that `copies` holds the bytes of every file `outcome` makes, as `expected` names
/// them: what a dry run shows as a diff.
fn check_copies(store: &UndoStore, outcome: &shiro_undo::UndoOutcome, expected: &[(&str, &[u8])]) {
    let copies = store.copies(outcome.turn.id).unwrap();
    let made: Vec<(&str, Vec<u8>)> = (outcome.paths.iter())
        .filter_map(|path| {
            let hash = path.becomes.hash()?;
            let bytes = copies.get(&hash).unwrap();
            let bytes = bytes.unwrap_or_else(|| panic!("no copy of {}", path.path));
            Some((path.path.as_str(), bytes))
        })
        .collect();
    let expected: Vec<(&str, Vec<u8>)> = (expected.iter())
        .map(|(path, bytes)| (*path, bytes.to_vec()))
        .collect();
    assert_eq!(made, expected);
}

/// The stored copies of what a rewind, and its redo, would write are found through the
/// outcome's turn, the first of them, though the later turn's pack holds some: a file that
/// was there before the turns and that only the second one touched.
#[test]
fn the_copies_a_rewind_and_its_redo_write_are_found_through_its_first_turn() {
    common::runtime().block_on(async {
        let (dir, mem, store) = open().await;
        mem.write(&p("f1"), b"1", None).await.unwrap();
        let recording = store.recorder(mem.clone());
        write_turn(&recording, &[("f2", b"2")]).await;
        write_turn(&recording, &[("f1", b"1b")]).await;
        let dry_run = UndoOptions {
            force: false,
            dry_run: true,
        };
        let planned = store.rewind(&mem, TurnId(1), dry_run).await.unwrap();
        check_copies(&store, &planned, &[("f1", b"1")]);
        store
            .rewind(&mem, TurnId(1), UndoOptions::default())
            .await
            .unwrap();
        // As the next command finds them, and as the one that rewound them does.
        let reopened = UndoStore::open_with(&common::state(dir.path()), &mem, deep())
            .await
            .unwrap();
        for store in [&store, &reopened] {
            let planned = store.redo(&mem, dry_run).await.unwrap();
            check_copies(store, &planned, &[("f1", b"1b"), ("f2", b"2")]);
        }
    });
}

/// A rewind forced over the user's edit between two of its turns is redone without force,
/// since nothing changed after it: the workspace is back exactly as before the rewind, and
/// the edit between the turns stays in the later turn's record, so that undoing that turn
/// alone brings it back. A change made after the rewind still refuses the redo.
#[test]
fn a_rewind_forced_over_an_edit_between_its_turns_is_redone_without_force() {
    common::runtime().block_on(async {
        let (_dir, mem, store) = open().await;
        let recording = store.recorder(mem.clone());
        let forced = UndoOptions {
            force: true,
            dry_run: false,
        };
        write_turn(&recording, &[("a", b"1"), ("b", b"1")]).await;
        mem.write(&p("a"), b"user", None).await.unwrap();
        write_turn(&recording, &[("a", b"2")]).await;
        let before = tree(&mem);
        let Err(UndoError::Conflict(refused)) =
            store.rewind(&mem, TurnId(1), UndoOptions::default()).await
        else {
            panic!("a rewind over an edit between its turns is refused");
        };
        assert!(matches!(
            refused.conflicts[..],
            [shiro_undo::Conflict {
                kind: ConflictKind::ChangedBetween { .. },
                ..
            }]
        ));
        store.rewind(&mem, TurnId(1), forced).await.unwrap();
        assert!(tree(&mem).is_empty());

        let redone = store.redo(&mem, UndoOptions::default()).await.unwrap();
        assert!(redone.conflicts.is_empty(), "{redone}");
        assert_eq!(tree(&mem), before);
        store.undo(&mem, UndoOptions::default()).await.unwrap();
        assert_eq!(mem.read(&p("a")).await.unwrap(), b"user");
        store.redo(&mem, UndoOptions::default()).await.unwrap();
        assert_eq!(tree(&mem), before);

        // Changed after the rewind: refused, and nothing changes.
        store.rewind(&mem, TurnId(1), forced).await.unwrap();
        mem.write(&p("b"), b"after the rewind", None).await.unwrap();
        let after_edit = tree(&mem);
        let Err(UndoError::Conflict(refused)) = store.redo(&mem, UndoOptions::default()).await
        else {
            panic!("a redo over a change since the rewind is refused");
        };
        let paths: Vec<&str> = refused.conflicts.iter().map(|c| c.path.as_str()).collect();
        assert_eq!(paths, ["b"]);
        assert_eq!(tree(&mem), after_edit);
    });
}
