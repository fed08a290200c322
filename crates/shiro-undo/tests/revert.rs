//! Reverts against a model: random turns and user edits on files made of line slots, undo,
//! redo, and the revert of any earlier turn. The model predicts each revert: refused (and the
//! tree is byte-identical), nothing to do, or done with the exact resulting tree; a done
//! revert is then undone and redone exactly.
//!
//! A file is a separator line, then for each slot its lines and a separator: a slot holds no
//! line, one, or two, each naming its slot, so that lines of different slots never match and
//! two slots are always apart (adjacency never decides). Each file name has its own line
//! endings: `a` LF, `b` CRLF, `c` a byte-order mark and no final newline.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::p;
use proptest::prelude::*;
use proptest::sample::Index;
use shiro_tools::{MemMutator, Mutator};
use shiro_undo::{StoreOptions, TurnId, TurnStart, UndoError, UndoOptions, UndoStore};

const FILES: [&str; 3] = ["a", "b", "c"];
const SLOTS: usize = 4;
/// A slot's value: 0 no line, 1-2 one line, 3-4 two lines.
const VALUES: u8 = 5;

type Slots = [u8; SLOTS];
/// The files, by index into [`FILES`].
type Files = BTreeMap<usize, Slots>;
/// Each file a turn changed, before and after (`None`: absent).
type Sides = BTreeMap<usize, (Option<Slots>, Option<Slots>)>;

/// The bytes of file `file` holding `slots`.
fn render(file: usize, slots: &Slots) -> Vec<u8> {
    let (eol, bom, final_newline) = match file {
        0 => ("\n", "", true),
        1 => ("\r\n", "", true),
        _ => ("\n", "\u{feff}", false),
    };
    let mut out = format!("{bom}--{eol}");
    for (slot, value) in slots.iter().enumerate() {
        let lines = match value {
            0 => Vec::new(),
            1 | 2 => vec![format!("s{slot} x{value}")],
            _ => vec![format!("s{slot} x{value}"), format!("s{slot} y{value}")],
        };
        for line in lines {
            out.push_str(&line);
            out.push_str(eol);
        }
        out.push_str("--");
        if slot + 1 < SLOTS || final_newline {
            out.push_str(eol);
        }
    }
    out.into_bytes()
}

#[derive(Debug, Clone)]
enum Change {
    /// Sets a slot of a file, creating the file (every other slot empty) when absent.
    Set(usize, usize, u8),
    Delete(usize),
}

#[derive(Debug, Clone)]
enum Step {
    Turn(Vec<Change>),
    /// The user's own edit, not recorded.
    Edit(Change),
    Undo,
    Redo,
    /// Revert a turn that can be undone.
    Revert(Index),
    /// Try to revert an undone turn.
    RevertUndone(Index),
}

#[derive(Debug, Clone)]
struct Turn {
    id: u64,
    paths: Sides,
    /// Whether the store keeps both sides' contents: recorded (a turn stores what it left
    /// of small files, and these are far under the cap), undone (the undo keeps what it
    /// replaced), or made by a revert (which stores both).
    both_kept: bool,
}

/// What the model expects of a revert.
#[derive(Debug, PartialEq)]
enum Expect {
    /// Refused over these files.
    Refused(BTreeSet<usize>),
    Nothing,
    /// Done: the files after it, and each changed file before and after.
    Done(Files, Sides),
}

#[derive(Debug, Default)]
struct Model {
    files: Files,
    undo: Vec<Turn>,
    redo: Vec<Turn>,
    /// Every content the store has been sure to keep at some point: one of these that it is
    /// no longer sure to keep (its turns left the log) may still be in a pack.
    ever_kept: BTreeSet<Vec<u8>>,
}

impl Model {
    fn apply(&mut self, change: &Change) -> Option<usize> {
        match *change {
            Change::Set(file, slot, value) => {
                let slots = self.files.entry(file).or_insert([0; SLOTS]);
                slots[slot] = value;
                Some(file)
            }
            Change::Delete(file) => self.files.remove(&file).map(|_| file),
        }
    }

    fn set(&mut self, file: usize, slots: &Option<Slots>) {
        match slots {
            Some(slots) => self.files.insert(file, *slots),
            None => self.files.remove(&file),
        };
    }

    /// The contents the store is sure to keep: what each kept turn found, and what it left
    /// (see [`Turn::both_kept`]).
    fn kept(&self) -> BTreeSet<Vec<u8>> {
        let mut kept = BTreeSet::new();
        for turn in self.undo.iter().chain(&self.redo) {
            for (file, (before, after)) in &turn.paths {
                kept.extend(before.iter().map(|slots| render(*file, slots)));
                if turn.both_kept {
                    kept.extend(after.iter().map(|slots| render(*file, slots)));
                }
            }
        }
        kept
    }

    fn note_kept(&mut self) {
        let kept = self.kept();
        self.ever_kept.extend(kept);
    }

    /// The revert of `turn`; with whether it depends on a copy the store may or may not
    /// still have (then it may also be refused).
    fn revert(&self, turn: &Turn) -> (Expect, bool) {
        let kept = self.kept();
        let mut files = self.files.clone();
        let mut changed = Sides::new();
        let mut refused = BTreeSet::new();
        let mut unsure = false;
        for (&file, (before, after)) in &turn.paths {
            let now = self.files.get(&file).copied();
            let becomes = if now == *before {
                continue;
            } else if now == *after {
                *before
            } else if let (Some(base), Some(ours), Some(theirs)) = (after, now, before) {
                let base_bytes = render(file, base);
                if !kept.contains(&base_bytes) {
                    if !self.ever_kept.contains(&base_bytes) {
                        refused.insert(file);
                        continue;
                    }
                    unsure = true;
                }
                match merge(base, &ours, theirs) {
                    Some(merged) if merged == ours => continue,
                    Some(merged) => Some(merged),
                    None => {
                        refused.insert(file);
                        continue;
                    }
                }
            } else {
                refused.insert(file);
                continue;
            };
            match becomes {
                Some(slots) => files.insert(file, slots),
                None => files.remove(&file),
            };
            changed.insert(file, (now, becomes));
        }
        let expect = if !refused.is_empty() {
            Expect::Refused(refused)
        } else if changed.is_empty() {
            Expect::Nothing
        } else {
            Expect::Done(files, changed)
        };
        (expect, unsure)
    }

    /// Undoes the top turn when every path it changed is as it left it; whether it did.
    fn undo(&mut self) -> Option<bool> {
        let turn = self.undo.last()?;
        if !(turn.paths.iter()).all(|(file, (_, after))| self.files.get(file) == after.as_ref()) {
            return Some(false);
        }
        let mut turn = self.undo.pop()?;
        for (file, (before, _)) in &turn.paths {
            self.set(*file, before);
        }
        turn.both_kept = true;
        self.redo.push(turn);
        Some(true)
    }

    fn redo(&mut self) -> Option<bool> {
        let turn = self.redo.last()?;
        if !(turn.paths.iter()).all(|(file, (before, _))| self.files.get(file) == before.as_ref()) {
            return Some(false);
        }
        let turn = self.redo.pop()?;
        for (file, (_, after)) in &turn.paths {
            self.set(*file, after);
        }
        self.undo.push(turn);
        Some(true)
    }
}

/// The three-way merge slot by slot: a slot only one side changed takes that side; both
/// sides the same way, that; otherwise a conflict.
fn merge(base: &Slots, ours: &Slots, theirs: &Slots) -> Option<Slots> {
    let mut out = *ours;
    for slot in 0..SLOTS {
        out[slot] = if ours[slot] == base[slot] {
            theirs[slot]
        } else if theirs[slot] == base[slot] || ours[slot] == theirs[slot] {
            ours[slot]
        } else {
            return None;
        };
    }
    Some(out)
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        6 => (0..FILES.len(), 0..SLOTS, 0..VALUES).prop_map(|(f, s, v)| Change::Set(f, s, v)),
        1 => (0..FILES.len()).prop_map(Change::Delete),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        5 => prop::collection::vec(change(), 1..4).prop_map(Step::Turn),
        3 => change().prop_map(Step::Edit),
        1 => Just(Step::Undo),
        1 => Just(Step::Redo),
        4 => any::<Index>().prop_map(Step::Revert),
        1 => any::<Index>().prop_map(Step::RevertUndone),
    ]
}

async fn perform(m: &dyn Mutator, model: &Model, change: &Change) {
    match *change {
        Change::Set(file, ..) => {
            let slots = model.files[&file];
            m.write(&p(FILES[file]), &render(file, &slots), None)
                .await
                .unwrap();
        }
        Change::Delete(file) => m.remove_file(&p(FILES[file])).await.unwrap(),
    }
}

/// The files as the model sees them; `None` when the tree holds anything the model cannot.
fn files(mem: &MemMutator) -> Option<Files> {
    let mut files = Files::new();
    for (path, (_, bytes)) in mem.snapshot() {
        let file = FILES.iter().position(|f| *f == path)?;
        let bytes = bytes?;
        let slots = all_slots().find(|slots| render(file, slots) == bytes)?;
        files.insert(file, slots);
    }
    Some(files)
}

fn all_slots() -> impl Iterator<Item = Slots> {
    let values = u32::from(VALUES);
    (0..values.pow(SLOTS as u32)).map(move |mut n| {
        let mut slots = [0; SLOTS];
        for slot in &mut slots {
            *slot = (n % values) as u8;
            n /= values;
        }
        slots
    })
}

fn deep() -> StoreOptions {
    StoreOptions {
        depth: 1000,
        ..StoreOptions::default()
    }
}

fn settled<T>(result: Result<T, UndoError>) -> Option<bool> {
    match result {
        Ok(_) => Some(true),
        Err(UndoError::Conflict(_)) => Some(false),
        Err(UndoError::NothingToUndo | UndoError::NothingToRedo) => None,
        Err(err) => panic!("unexpected error: {err}"),
    }
}

fn run(steps: &[Step]) -> Result<(), TestCaseError> {
    common::runtime().block_on(async {
        let dir = common::fast_tempdir();
        let mem = MemMutator::new();
        let store = UndoStore::open_with(&common::state(dir.path()), &mem, deep())
            .await
            .unwrap();
        let recording = store.recorder(mem.clone());
        let mut model = Model::default();
        let mut script = String::new();
        for step in steps {
            let tree_before = mem.snapshot();
            match step {
                Step::Turn(changes) => {
                    let start = model.files.clone();
                    recording
                        .begin_turn(TurnStart {
                            summary: "turn".to_owned(),
                            history_marker: 0,
                            session: None,
                        })
                        .await
                        .unwrap();
                    let mut touched = BTreeSet::new();
                    for change in changes {
                        if let Some(file) = model.apply(change) {
                            perform(&recording, &model, change).await;
                            touched.insert(file);
                        }
                    }
                    let id = recording.finish_turn().await.unwrap();
                    let paths: Sides = (touched.into_iter())
                        .map(|f| (f, (start.get(&f).copied(), model.files.get(&f).copied())))
                        .filter(|(_, (before, after))| before != after)
                        .collect();
                    script.push_str(&format!("turn {id:?}: {changes:?}\n"));
                    match id {
                        Some(id) => {
                            model.undo.push(Turn {
                                id: id.0,
                                paths,
                                both_kept: true,
                            });
                            model.redo.clear();
                        }
                        None => prop_assert!(paths.is_empty(), "a turn was dropped\n{}", script),
                    }
                }
                Step::Edit(change) => {
                    if model.apply(change).is_some() {
                        perform(&mem, &model, change).await;
                        script.push_str(&format!("edit {change:?}\n"));
                    }
                }
                Step::Undo => {
                    let real = settled(store.undo(&mem, UndoOptions::default()).await);
                    script.push_str(&format!("undo: {real:?}\n"));
                    prop_assert_eq!(real, model.undo(), "undo\n{}", script);
                }
                Step::Redo => {
                    let real = settled(store.redo(&mem, UndoOptions::default()).await);
                    script.push_str(&format!("redo: {real:?}\n"));
                    prop_assert_eq!(real, model.redo(), "redo\n{}", script);
                }
                Step::RevertUndone(index) => {
                    if model.redo.is_empty() {
                        continue;
                    }
                    let id = model.redo[index.index(model.redo.len())].id;
                    let result = store.revert(&mem, TurnId(id), revert_start(id)).await;
                    script.push_str(&format!("revert undone #{id}\n"));
                    prop_assert!(
                        matches!(result, Err(UndoError::NoTurnToRevert { undone: true, .. })),
                        "{:?}\n{}",
                        result,
                        script
                    );
                }
                Step::Revert(index) => {
                    if model.undo.is_empty() {
                        continue;
                    }
                    let turn = model.undo[index.index(model.undo.len())].clone();
                    revert_step(&store, &mem, &mut model, &turn, &mut script).await?;
                }
            }
            model.note_kept();
            let now = files(&mem);
            prop_assert_eq!(
                now.as_ref(),
                Some(&model.files),
                "tree and model differ\n{}",
                script
            );
            let refused = ["Some(false)\n", "refused\n", "nothing\n"];
            if refused.iter().any(|end| script.ends_with(end)) {
                prop_assert_eq!(
                    &mem.snapshot(),
                    &tree_before,
                    "a refusal changed the tree\n{}",
                    script
                );
            }
        }
        let ids: Vec<u64> = store.log().unwrap().iter().map(|t| t.id.0).collect();
        let model_ids: Vec<u64> = model.undo.iter().rev().map(|t| t.id).collect();
        prop_assert_eq!(ids, model_ids, "{}", script);
        Ok(())
    })
}

fn revert_start(id: u64) -> TurnStart {
    TurnStart {
        summary: format!("revert #{id}"),
        history_marker: 100 + id,
        session: None,
    }
}

/// Reverts `turn` and checks the outcome against the model; a done revert is undone and
/// redone, each exactly.
async fn revert_step(
    store: &UndoStore,
    mem: &MemMutator,
    model: &mut Model,
    turn: &Turn,
    script: &mut String,
) -> Result<(), TestCaseError> {
    let id = turn.id;
    let (expect, unsure) = model.revert(turn);
    let tree_before = mem.snapshot();
    let result = store.revert(mem, TurnId(id), revert_start(id)).await;
    match result {
        Ok(outcome) => {
            script.push_str(&format!("revert #{id}: done\n"));
            let Expect::Done(files, changed) = expect else {
                return Err(TestCaseError::fail(format!(
                    "done, expected {expect:?}\n{script}"
                )));
            };
            let new = outcome.turn.as_ref().unwrap();
            prop_assert_eq!(new.history_marker, 100 + id, "{}", script);
            prop_assert_eq!(outcome.reverted.id, TurnId(id), "{}", script);
            model.files = files;
            model.undo.push(Turn {
                id: new.id.0,
                paths: changed,
                both_kept: true,
            });
            model.redo.clear();
            prop_assert_eq!(files_of(mem), model.files.clone(), "{}", script);
            // Undone and redone exactly.
            let after = mem.snapshot();
            store.undo(mem, UndoOptions::default()).await.unwrap();
            prop_assert_eq!(
                &mem.snapshot(),
                &tree_before,
                "undo of the revert\n{}",
                script
            );
            store.redo(mem, UndoOptions::default()).await.unwrap();
            prop_assert_eq!(&mem.snapshot(), &after, "redo of the revert\n{}", script);
        }
        Err(UndoError::RevertConflict(report)) => {
            script.push_str(&format!("revert #{id}: refused\n"));
            let real: BTreeSet<usize> = (report.conflicts.iter())
                .map(|c| FILES.iter().position(|f| *f == c.path.as_str()).unwrap())
                .collect();
            match expect {
                Expect::Refused(files) if !unsure => {
                    prop_assert_eq!(real, files, "conflicting files\n{}", script);
                }
                Expect::Refused(_) => {}
                _ if unsure => {}
                other => {
                    return Err(TestCaseError::fail(format!(
                        "refused ({report}), expected {other:?}\n{script}"
                    )));
                }
            }
        }
        Err(UndoError::NothingToRevert { .. }) => {
            script.push_str(&format!("revert #{id}: nothing\n"));
            prop_assert!(
                expect == Expect::Nothing,
                "expected {:?}\n{}",
                expect,
                script
            );
        }
        Err(err) => panic!("unexpected error: {err}\n{script}"),
    }
    Ok(())
}

fn files_of(mem: &MemMutator) -> Files {
    files(mem).unwrap_or_default()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::base_cases(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn reverts_agree_with_a_model(steps in prop::collection::vec(step(), 1..40)) {
        run(&steps)?;
    }
}

/// A store over an in-memory workspace, with its recorder.
struct Fixture {
    dir: tempfile::TempDir,
    ws: MemMutator,
    store: UndoStore,
    rec: shiro_undo::Recording<MemMutator>,
}

async fn fixture(options: StoreOptions) -> Fixture {
    let dir = common::fast_tempdir();
    let ws = MemMutator::new();
    let store = UndoStore::open_with(&common::state(dir.path()), &ws, options)
        .await
        .unwrap();
    let rec = store.recorder(ws.clone());
    Fixture {
        dir,
        ws,
        store,
        rec,
    }
}

async fn write(m: &dyn Mutator, path: &str, bytes: &[u8]) {
    shiro_tools::create_parent_dirs(m, &p(path)).await.unwrap();
    m.write(&p(path), bytes, None).await.unwrap();
}

async fn begin(f: &Fixture, summary: &str) {
    (f.rec.begin_turn(TurnStart {
        summary: summary.to_owned(),
        history_marker: 3,
        session: Some("s1".to_owned()),
    }))
    .await
    .unwrap();
}

async fn finish(f: &Fixture) -> TurnId {
    f.rec.finish_turn().await.unwrap().unwrap()
}

fn start(summary: &str) -> TurnStart {
    TurnStart {
        summary: summary.to_owned(),
        history_marker: 9,
        session: Some("s1".to_owned()),
    }
}

const PARSE: &str = "fn parse() {\n    let a = 1;\n    let b = 2;\n    let c = 3;\n    let d = 4;\n    let e = 5;\n    let f = 6;\n    let g = 7;\n}\n";

/// Turn #1 changes every kind of thing; turn #2 changes `src/parse.rs` elsewhere, so that
/// what turn #1 left there is kept (turn #2's pre-image) and it can be merged.
async fn two_turns(f: &Fixture) {
    write(&f.ws, "src/parse.rs", PARSE.as_bytes()).await;
    write(&f.ws, "old.txt", b"old\n").await;
    write(&f.ws, "docs/old.md", b"# old\n").await;
    write(&f.ws, "logo.png", b"\x89PNG\0\x01\x02").await;
    write(&f.ws, "notes.txt", b"a\nb\nc\n").await;
    begin(f, "fix the parser").await;
    let fixed = PARSE
        .replace("let a = 1", "let a = 10")
        .replace("let g = 7", "let g = 70");
    write(&f.rec, "src/parse.rs", fixed.as_bytes()).await;
    write(&f.rec, "new.txt", b"new\n").await;
    f.rec.remove_file(&p("old.txt")).await.unwrap();
    f.rec.remove_file(&p("docs/old.md")).await.unwrap();
    write(&f.rec, "logo.png", b"\x89PNG\0\x03\x04").await;
    write(&f.rec, "notes.txt", b"a\nB\nc\n").await;
    write(&f.rec, "gen/a.txt", b"generated\n").await;
    assert_eq!(finish(f).await, TurnId(1));
    begin(f, "later work").await;
    let later = fixed.replace("let d = 4", "let d = 40");
    write(&f.rec, "src/parse.rs", later.as_bytes()).await;
    assert_eq!(finish(f).await, TurnId(2));
}

/// What a person reads: a revert's plan and outcome, a refusal with a conflict of every
/// kind, and the errors of a revert that cannot be made.
#[test]
fn revert_texts() {
    common::runtime().block_on(async {
        let f = fixture(StoreOptions::default()).await;
        two_turns(&f).await;
        let before = f.ws.snapshot();
        let plan = f.store.revert_dry_run(&f.ws, TurnId(1)).await.unwrap();
        assert_eq!(f.ws.snapshot(), before, "a dry run changes nothing");
        let done = (f.store)
            .revert(&f.ws, TurnId(1), start("revert #1 \"fix the parser\""))
            .await
            .unwrap();
        let parse = f.ws.read(&p("src/parse.rs")).await.unwrap();
        assert_eq!(
            String::from_utf8(parse).unwrap(),
            PARSE.replace("let d = 4", "let d = 40"),
            "turn #1's lines are back, turn #2's stay"
        );
        // Reverting it again changes nothing; an undone revert cannot be reverted.
        let nothing = f.store.revert(&f.ws, TurnId(1), start("again")).await;
        f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(f.ws.snapshot(), before, "the revert is undone exactly");
        let undone = f.store.revert(&f.ws, TurnId(3), start("undone")).await;
        let unknown = f.store.revert(&f.ws, TurnId(42), start("unknown")).await;

        // The same two turns, then changes since that stand in the way of each kind; in a
        // store that keeps no after-image (as past its cap), so that what turn #1 left of
        // `notes.txt` is not kept to merge with.
        let g = fixture(StoreOptions {
            max_small_after_bytes: 0,
            ..StoreOptions::default()
        })
        .await;
        two_turns(&g).await;
        let edited = PARSE
            .replace("let a = 10", "let a = 100")
            .replace("let g = 7", "let g = 70");
        let edited = edited.replace("let a = 1;", "let a = 100;\n    let aa = 101;");
        write(&g.ws, "src/parse.rs", edited.as_bytes()).await;
        write(&g.ws, "logo.png", b"\x89PNG\0\x05").await;
        write(&g.ws, "notes.txt", b"a\nB\nc\nd\n").await;
        write(&g.ws, "new.txt", b"new, and mine\n").await;
        write(&g.ws, "gen/mine.txt", b"mine\n").await;
        g.ws.remove_dir(&p("docs")).await.unwrap();
        let edited_tree = g.ws.snapshot();
        let refused = g.store.revert(&g.ws, TurnId(1), start("refused")).await;
        let refused_plan = g.store.revert_dry_run(&g.ws, TurnId(1)).await;
        assert_eq!(g.ws.snapshot(), edited_tree, "a refusal changes nothing");
        assert_eq!(g.store.log().unwrap().len(), 2, "and records nothing");

        let err = |result: Result<shiro_undo::RevertOutcome, UndoError>| {
            result.map(|o| o.to_string()).unwrap_err().to_string()
        };
        let refused_plan = err(refused_plan);
        let refused = err(refused);
        assert_eq!(refused, refused_plan, "the dry run is refused alike");
        insta::assert_snapshot!(format!(
            "{plan}\n{done}\n{}\n\n{}\n\n{}\n\n{refused}",
            err(nothing),
            err(undone),
            err(unknown)
        ));
    });
}

/// A text file edited by hand right after the turn (no later turn found what the turn left)
/// is merged: the turn stored what it left of it. Past the cap it is not kept, and the
/// revert is refused.
#[test]
fn a_hand_edit_right_after_the_turn_is_merged_with_what_the_turn_stored() {
    common::runtime().block_on(async {
        for cap in [StoreOptions::default().max_small_after_bytes, 0] {
            let f = fixture(StoreOptions {
                max_small_after_bytes: cap,
                ..StoreOptions::default()
            })
            .await;
            write(&f.ws, "notes.txt", b"a\nb\nc\n").await;
            begin(&f, "edit b").await;
            write(&f.rec, "notes.txt", b"a\nB\nc\n").await;
            let k = finish(&f).await;
            write(&f.ws, "notes.txt", b"a\nB\nc\nd\n").await;
            let reverted = f.store.revert(&f.ws, k, start("revert")).await;
            let now = f.ws.read(&p("notes.txt")).await.unwrap();
            if cap > 0 {
                reverted.unwrap();
                assert_eq!(now, b"a\nb\nc\nd\n", "the hand edit stays");
            } else {
                let err = reverted.unwrap_err();
                let UndoError::RevertConflict(report) = &err else {
                    panic!("{err}");
                };
                assert!(
                    matches!(
                        report.conflicts[0].kind,
                        shiro_undo::RevertConflictKind::NotKept { .. }
                    ),
                    "{err}"
                );
                assert_eq!(now, b"a\nB\nc\nd\n");
            }
        }
    });
}

/// A file edited since the turn, by hand, back to what the turn found, with more besides:
/// the revert would leave it as it is, so there is nothing to revert, and the message says
/// why (the turn is not undone: its file was changed since).
#[test]
fn an_edit_that_already_holds_the_revert_is_nothing_to_revert() {
    common::runtime().block_on(async {
        let f = fixture(StoreOptions::default()).await;
        write(&f.ws, "notes.txt", b"a\nb\nc\n").await;
        begin(&f, "edit b").await;
        write(&f.rec, "notes.txt", b"a\nB\nc\n").await;
        let k = finish(&f).await;
        write(&f.ws, "notes.txt", b"a\nb\nc\nd\n").await;
        let edited = f.ws.snapshot();
        let err = f.store.revert(&f.ws, k, start("revert")).await.unwrap_err();
        assert!(
            matches!(err, UndoError::NothingToRevert { undone: false, .. }),
            "{err}"
        );
        assert_eq!(f.ws.snapshot(), edited, "nothing was changed");
        insta::assert_snapshot!(err, @"nothing to revert: the files turn #1 changed were changed since, and already hold what its revert would make of them; nothing was changed");
    });
}

/// Every kind of change a turn makes is reverted exactly when nothing changed it since, and
/// a later turn's changes stay; the revert is undone and redone exactly.
#[test]
fn every_kind_of_change_is_reverted_exactly() {
    common::runtime().block_on(async {
        let f = fixture(StoreOptions::default()).await;
        write(&f.ws, "edited.txt", b"one\r\ntwo\r\n").await;
        write(&f.ws, "gone.txt", b"gone\n").await;
        write(&f.ws, "from.txt", b"moved\n").await;
        write(&f.ws, "mode.sh", b"#!/bin/sh\n").await;
        write(&f.ws, "bin", &[0, 1, 2, 255]).await;
        write(&f.ws, "swap", b"a file that becomes a directory\n").await;
        write(
            &f.ws,
            "dswap/inner",
            b"in a directory that becomes a file\n",
        )
        .await;
        f.ws.symlink("somewhere", &p("link")).await.unwrap();
        write(&f.ws, "other.txt", b"other\n").await;
        let start_tree = f.ws.snapshot();

        begin(&f, "every kind").await;
        write(&f.rec, "edited.txt", b"one\r\nTWO\r\n").await;
        write(&f.rec, "made/deep/new.txt", b"new\n").await;
        f.rec.remove_file(&p("gone.txt")).await.unwrap();
        f.rec.rename(&p("from.txt"), &p("to.txt")).await.unwrap();
        f.rec.set_mode(&p("mode.sh"), 0o755).await.unwrap();
        write(&f.rec, "bin", &[9, 9, 0]).await;
        f.rec.remove_file(&p("swap")).await.unwrap();
        write(&f.rec, "swap/inner", b"now inside\n").await;
        f.rec.remove_file(&p("dswap/inner")).await.unwrap();
        f.rec.remove_dir(&p("dswap")).await.unwrap();
        write(&f.rec, "dswap", b"now a file\n").await;
        f.rec.remove_file(&p("link")).await.unwrap();
        f.rec.symlink("elsewhere", &p("link")).await.unwrap();
        f.rec.symlink("target", &p("newlink")).await.unwrap();
        let k = finish(&f).await;
        begin(&f, "later").await;
        write(&f.rec, "other.txt", b"other, later\n").await;
        finish(&f).await;
        let before_revert = f.ws.snapshot();

        let outcome = f.store.revert(&f.ws, k, start("revert")).await.unwrap();
        let mut expected = start_tree.clone();
        expected.insert("other.txt".to_owned(), f.ws.snapshot()["other.txt"].clone());
        assert_eq!(f.ws.snapshot(), expected, "{outcome}");
        let after_revert = f.ws.snapshot();
        assert_eq!(f.store.log().unwrap().len(), 3);

        f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(f.ws.snapshot(), before_revert);
        f.store.redo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(f.ws.snapshot(), after_revert);
        // Reopened, the store has the revert as a turn like any other.
        drop(f.rec);
        let store = UndoStore::open_with(&common::state(f.dir.path()), &f.ws, deep())
            .await
            .unwrap();
        let log = store.log().unwrap();
        assert_eq!(log[0].summary, "revert");
        assert_eq!(
            (log[0].history_marker, log[0].session.as_deref()),
            (9, Some("s1"))
        );
        store.undo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(f.ws.snapshot(), before_revert);
    });
}

/// A mode, a link or a binary file the turn changed is reverted only as the turn left it;
/// so is a text file whose mode it changed.
#[test]
fn what_cannot_be_merged_must_be_as_the_turn_left_it() {
    common::runtime().block_on(async {
        let cases: [(&str, &[u8]); 4] = [
            ("mode", b"#!/bin/sh\nrun\n"),
            ("link", b""),
            ("binary", b"\0\x01\x02\n"),
            ("text", b"1\n2\n3\n4\n"),
        ];
        for (case, initial) in cases {
            let f = fixture(StoreOptions::default()).await;
            if case == "link" {
                f.ws.symlink("one", &p("x")).await.unwrap();
            } else {
                write(&f.ws, "x", initial).await;
            }
            begin(&f, case).await;
            match case {
                "mode" => f.rec.set_mode(&p("x"), 0o755).await.unwrap(),
                "link" => {
                    f.rec.remove_file(&p("x")).await.unwrap();
                    f.rec.symlink("two", &p("x")).await.unwrap();
                }
                "binary" => write(&f.rec, "x", b"\0\x01\x02\nchanged\n").await,
                _ => {
                    write(&f.rec, "x", b"1\nTWO\n3\n4\n").await;
                    f.rec.set_mode(&p("x"), 0o600).await.unwrap();
                }
            }
            let k = finish(&f).await;
            // A later turn keeps what the turn left, so a text merge would have its base.
            begin(&f, "later").await;
            match case {
                "link" => {
                    f.rec.remove_file(&p("x")).await.unwrap();
                    f.rec.symlink("three", &p("x")).await.unwrap();
                }
                "binary" => write(&f.rec, "x", b"\0\x01\x02\nchanged\nlater\n").await,
                "mode" => write(&f.rec, "x", b"#!/bin/sh\nrun\nlater\n").await,
                _ => write(&f.rec, "x", b"1\nTWO\n3\n4\nlater\n").await,
            }
            finish(&f).await;
            let tree = f.ws.snapshot();
            let err = f.store.revert(&f.ws, k, start("revert")).await.unwrap_err();
            let UndoError::RevertConflict(report) = &err else {
                panic!("{case}: {err}");
            };
            assert!(
                matches!(
                    report.conflicts[0].kind,
                    shiro_undo::RevertConflictKind::Changed { .. }
                ),
                "{case}: {err}"
            );
            assert_eq!(f.ws.snapshot(), tree, "{case}");
            // Undo the later turn, and the revert goes through.
            f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
            let before_k = {
                f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
                let tree = f.ws.snapshot();
                f.store.redo(&f.ws, UndoOptions::default()).await.unwrap();
                tree
            };
            f.store.revert(&f.ws, k, start("revert")).await.unwrap();
            assert_eq!(f.ws.snapshot(), before_k, "{case}");
        }
    });
}

/// A dry run returns the bytes of each file it would change, now and as it would write
/// them, and changes neither the workspace nor the log.
#[test]
fn a_dry_run_gives_the_bytes_for_a_diff() {
    common::runtime().block_on(async {
        let f = fixture(StoreOptions::default()).await;
        two_turns(&f).await;
        let log = f.store.log().unwrap();
        let plan = f.store.revert_dry_run(&f.ws, TurnId(1)).await.unwrap();
        assert!(plan.dry_run && plan.turn.is_none());
        let path = |name: &str| plan.paths.iter().find(|p| p.path.as_str() == name).unwrap();
        let parse = path("src/parse.rs");
        assert!(parse.merged);
        let later = PARSE.replace("let d = 4", "let d = 40");
        let now = later
            .replace("let a = 1", "let a = 10")
            .replace("let g = 7", "let g = 70");
        assert_eq!(parse.now_bytes.as_deref(), Some(now.as_bytes()));
        assert_eq!(parse.becomes_bytes.as_deref(), Some(later.as_bytes()));
        let old = path("old.txt");
        assert_eq!(
            (old.now_bytes.as_deref(), old.becomes_bytes.as_deref()),
            (None, Some(&b"old\n"[..]))
        );
        let new = path("new.txt");
        assert_eq!(
            (new.now_bytes.as_deref(), new.becomes_bytes.as_deref()),
            (Some(&b"new\n"[..]), None)
        );
        assert_eq!(f.store.log().unwrap(), log);
        // The dry run took no turn id: the revert gets the next one.
        let done = f
            .store
            .revert(&f.ws, TurnId(1), start("revert"))
            .await
            .unwrap();
        assert_eq!(done.turn.unwrap().id, TurnId(3));
    });
}

/// A revert is a new turn: the oldest turn goes past the depth, and it empties the redo
/// stack.
#[test]
fn a_revert_is_recorded_like_a_turn() {
    common::runtime().block_on(async {
        let f = fixture(StoreOptions {
            depth: 3,
            ..StoreOptions::default()
        })
        .await;
        for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
            begin(&f, name).await;
            write(&f.rec, name, format!("{i}\n").as_bytes()).await;
            finish(&f).await;
        }
        let ids = |store: &UndoStore| -> Vec<u64> {
            store.log().unwrap().iter().map(|t| t.id.0).collect()
        };
        let done = f
            .store
            .revert(&f.ws, TurnId(2), start("revert b"))
            .await
            .unwrap();
        assert_eq!(done.turn.as_ref().unwrap().id, TurnId(4));
        assert_eq!(
            ids(&f.store),
            [4, 3, 2],
            "newest first; #1 went past the depth"
        );
        assert!(!f.ws.snapshot().contains_key("b"));
        f.store.undo(&f.ws, UndoOptions::default()).await.unwrap();
        assert_eq!(f.store.redo_log().unwrap().len(), 1);
        f.store
            .revert(&f.ws, TurnId(3), start("revert c"))
            .await
            .unwrap();
        assert!(
            f.store.redo_log().unwrap().is_empty(),
            "the redo stack is emptied"
        );
        assert_eq!(ids(&f.store), [5, 3, 2]);
        assert_eq!(f.ws.snapshot().keys().collect::<Vec<_>>(), ["a", "b"]);
    });
}

/// Fails every mutating call from the `fail_at`-th on, as a full disk would.
fn failing_after(inner: MemMutator, fail_at: usize) -> shiro_tools::Hooked<MemMutator> {
    let calls = std::sync::atomic::AtomicUsize::new(0);
    shiro_tools::Hooked::new(inner, move |m| {
        if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 >= fail_at {
            return Err(shiro_tools::MutatorError::Interrupted(format!(
                "simulated failure before touching {}",
                m.path()
            )));
        }
        Ok(())
    })
}

/// A revert whose writes start failing part-way is rolled back, and records nothing; when
/// the rollback fails too, the next open finishes it, or `--abandon` keeps the files as they
/// are with the revert's turn recorded (marked), which a forced undo takes back. Either way
/// the revert can then be made again.
#[test]
fn a_revert_that_fails_at_any_step_is_rolled_back() {
    common::runtime().block_on(async {
        let reference = fixture(StoreOptions::default()).await;
        two_turns(&reference).await;
        (reference.store)
            .revert(&reference.ws, TurnId(1), start("revert"))
            .await
            .unwrap();
        let reverted = reference.ws.snapshot();
        let mut stuck = 0;
        for fail_at in 1.. {
            let f = fixture(StoreOptions::default()).await;
            two_turns(&f).await;
            let before = f.ws.snapshot();
            let failing = failing_after(f.ws.clone(), fail_at);
            let result = f.store.revert(&failing, TurnId(1), start("revert")).await;
            let Err(err) = result else {
                // It needed fewer steps than this: every step has failed once.
                assert_eq!(f.ws.snapshot(), reverted);
                break;
            };
            let store = match &err {
                UndoError::RevertRolledBack { turn, .. } => {
                    assert_eq!(*turn, TurnId(1));
                    assert_eq!(f.ws.snapshot(), before, "fail_at {fail_at}: {err}");
                    f.store.clone()
                }
                UndoError::RestoreStuck {
                    reverting: Some(TurnId(1)),
                    ..
                } => {
                    stuck += 1;
                    let state = common::state(f.dir.path());
                    if stuck == 1 {
                        insta::assert_snapshot!("revert_stuck", err.to_string());
                    }
                    if stuck == 2 {
                        // Abandoned: the files stay as they are, the revert's turn is kept.
                        // (This store was opened before the revert: it has not completed it.)
                        let store = &f.store;
                        let abandoned = store.abandon(&f.ws).await.unwrap().unwrap();
                        insta::assert_snapshot!("revert_abandoned", abandoned.to_string());
                        let log = store.log().unwrap();
                        assert_eq!(log[0].id, TurnId(3));
                        assert!(log[0].damage.is_some());
                        let forced = shiro_undo::UndoOptions {
                            force: true,
                            dry_run: false,
                        };
                        store.undo(&f.ws, forced).await.unwrap();
                        assert_eq!(f.ws.snapshot(), before, "fail_at {fail_at}");
                        continue;
                    }
                    let store = UndoStore::open_with(&state, &f.ws, StoreOptions::default())
                        .await
                        .unwrap();
                    let notices: Vec<String> = store
                        .take_notices()
                        .iter()
                        .map(ToString::to_string)
                        .collect();
                    if stuck == 1 {
                        insta::assert_snapshot!("revert_rolled_back", notices.join("\n"));
                    }
                    assert_eq!(f.ws.snapshot(), before, "fail_at {fail_at}");
                    store
                }
                other => panic!("fail_at {fail_at}: {other}"),
            };
            let ids: Vec<u64> = store.log().unwrap().iter().map(|t| t.id.0).collect();
            assert_eq!(ids, [2, 1], "fail_at {fail_at}: nothing was recorded");
            store
                .revert(&f.ws, TurnId(1), start("revert"))
                .await
                .unwrap();
            assert_eq!(f.ws.snapshot(), reverted, "fail_at {fail_at}");
        }
        assert!(
            stuck >= 3,
            "the revert takes several writes, each failed once ({stuck})"
        );
    });
}

/// A stored copy of the turn that the revert needs, missing: refused before anything
/// changes, and the turn is marked.
#[test]
fn a_damaged_turn_is_not_reverted() {
    common::runtime().block_on(async {
        for merge in [false, true] {
            let f = fixture(StoreOptions::default()).await;
            two_turns(&f).await;
            if !merge {
                // Nothing to merge: only `src/parse.rs` changed since, and it is put back.
                let fixed = PARSE
                    .replace("let a = 1", "let a = 10")
                    .replace("let g = 7", "let g = 70");
                write(&f.ws, "src/parse.rs", fixed.as_bytes()).await;
            }
            std::fs::remove_file(f.store.dir().join("blobs/1-0.pack")).unwrap();
            let tree = f.ws.snapshot();
            let err = f
                .store
                .revert(&f.ws, TurnId(1), start("revert"))
                .await
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    UndoError::Unrevertible {
                        turn: TurnId(1),
                        ..
                    }
                ),
                "merge {merge}: {err}"
            );
            assert!(
                err.to_string()
                    .starts_with("cannot revert turn #1: cannot restore "),
                "{err}"
            );
            assert_eq!(f.ws.snapshot(), tree);
            let log = f.store.log().unwrap();
            assert_eq!(log.len(), 2);
            assert!(
                log[1]
                    .damage
                    .as_deref()
                    .unwrap()
                    .starts_with("its revert cannot be made")
            );
        }
    });
}
