//! Damage to any store file never makes shiro write wrong bytes, and never wedges the store.
//!
//! A few turns are recorded (some undone, so that packs exist too), then one store file (the
//! log, the in-flight file, a blob or a pack) has a byte range flipped, is cut short, is
//! deleted, or gains garbage. Then undo, redo, log and a new turn run. Each either succeeds
//! with exact bytes or fails with an error that names the problem; no path ever holds bytes
//! it never legitimately held; and a new turn can always be recorded and undone.
//!
//! A second property aims at the pack of one turn: the turns after it undo and redo exactly
//! (but the next one, when the pack holds what the turn left, which that turn found), its own
//! undo is exact or a clear error, and the store goes on working.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::{base_cases, fast_tempdir, mem_tree, p, runtime};
use proptest::prelude::*;
use shiro_tools::{MemMutator, Mutator, Stat};
use shiro_undo::{StoreOptions, TurnId, TurnStart, UndoOptions, UndoStore};

/// The paths the turns write; `big` is over the big-file threshold, so it is stored raw and
/// as deltas.
const PATHS: [&str; 4] = ["f0", "f1", "dir/f2", "big"];
const BIG: u64 = 256;

fn options() -> StoreOptions {
    StoreOptions {
        big_file_bytes: BIG,
        ..StoreOptions::default()
    }
}

/// The bytes a turn writes to a path (`None` removes it).
fn content(path: &str, seed: u8) -> Option<Vec<u8>> {
    if seed % 5 == 4 {
        return None;
    }
    if path == "big" {
        // Mostly the same bytes from version to version, as an edited big file is.
        let mut bytes: Vec<u8> = (0..BIG as usize * 3).map(|i| (i % 251) as u8).collect();
        let at = usize::from(seed) * 7 % bytes.len();
        bytes[at] = seed;
        return Some(bytes);
    }
    Some(format!("{path} version {seed}\n").into_bytes())
}

/// A workspace tree as path -> bytes (`None`: a directory); a missing key is absence.
type Files = BTreeMap<String, Option<Vec<u8>>>;

fn files(ws: &MemMutator) -> Files {
    mem_tree(ws)
        .into_iter()
        .map(|(path, (stat, bytes))| {
            (
                path,
                if matches!(stat, Stat::Dir { .. }) {
                    None
                } else {
                    bytes
                },
            )
        })
        .collect()
}

/// One change to a store file.
#[derive(Debug, Clone)]
enum Damage {
    /// XOR `len` bytes from a position with a nonzero byte.
    Flip {
        at: prop::sample::Index,
        len: usize,
        with: u8,
    },
    /// Cut the file short at a position.
    Truncate { at: prop::sample::Index },
    /// Remove the file.
    Delete,
    /// Append bytes that are no record.
    Garbage { bytes: Vec<u8> },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        4 => (any::<prop::sample::Index>(), 1usize..24, 1u8..=255).prop_map(|(at, len, with)| Damage::Flip { at, len, with }),
        2 => any::<prop::sample::Index>().prop_map(|at| Damage::Truncate { at }),
        2 => Just(Damage::Delete),
        1 => proptest::collection::vec(any::<u8>(), 1..64).prop_map(|bytes| Damage::Garbage { bytes }),
    ]
}

fn apply_damage(path: &Path, damage: &Damage) {
    let mut bytes = std::fs::read(path).unwrap_or_default();
    match damage {
        Damage::Flip { at, len, with } => {
            if bytes.is_empty() {
                bytes.push(*with);
            } else {
                let start = at.index(bytes.len());
                let end = (start + len).min(bytes.len());
                for byte in &mut bytes[start..end] {
                    *byte ^= with;
                }
            }
        }
        Damage::Truncate { at } => bytes.truncate(at.index(bytes.len() + 1)),
        Damage::Delete => {
            let _ = std::fs::remove_file(path);
            return;
        }
        Damage::Garbage { bytes: extra } => bytes.extend_from_slice(extra),
    }
    std::fs::write(path, bytes).unwrap();
}

/// The store files damage can hit, sorted: the log, the in-flight file, blobs and packs.
fn store_files(store: &Path) -> Vec<PathBuf> {
    let mut files = vec![store.join("log.jsonl"), store.join("inflight.jsonl")];
    let mut blobs: Vec<PathBuf> = std::fs::read_dir(store.join("blobs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    blobs.sort();
    files.extend(blobs);
    files
}

/// What the test knows of the turns: the tree before and after each, by id.
struct History {
    before: BTreeMap<TurnId, Files>,
    after: BTreeMap<TurnId, Files>,
    /// Every version each path ever held (`None`: absent or a directory).
    versions: BTreeMap<String, BTreeSet<Option<Vec<u8>>>>,
}

impl History {
    fn note(&mut self, files: &Files) {
        for path in PATHS.iter().chain(&["dir", "fresh"]) {
            let version = files.get(*path).cloned().flatten();
            self.versions
                .entry((*path).to_owned())
                .or_default()
                .insert(version);
        }
    }

    /// Checks that every path holds a version it legitimately held.
    fn check_legit(&self, ws: &MemMutator, when: &str) -> Result<(), TestCaseError> {
        let now = files(ws);
        for (path, version) in &now {
            let known = self.versions.get(path);
            prop_assert!(
                known.is_some_and(|v| v.contains(version)),
                "{when}: {path} holds bytes it never held: {:?}",
                version
                    .as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
            );
        }
        for path in PATHS {
            if !now.contains_key(path) {
                prop_assert!(
                    self.versions[path].contains(&None),
                    "{when}: {path} vanished"
                );
            }
        }
        Ok(())
    }
}

/// The paths where two trees differ.
fn differing(a: &Files, b: &Files) -> BTreeSet<String> {
    a.keys()
        .chain(b.keys())
        .filter(|path| a.get(*path) != b.get(*path))
        .cloned()
        .collect()
}

async fn record(store: &UndoStore, ws: &MemMutator, writes: &[(usize, u8)]) -> Option<TurnId> {
    let rec = store.recorder(ws.clone());
    rec.begin_turn(TurnStart {
        summary: "turn".to_owned(),
        ..TurnStart::default()
    })
    .await
    .unwrap();
    for (index, seed) in writes {
        let name = PATHS[index % PATHS.len()];
        let path = p(name);
        match content(name, *seed) {
            Some(bytes) => {
                shiro_tools::create_parent_dirs(&rec, &path).await.unwrap();
                rec.write(&path, &bytes, None).await.unwrap();
            }
            None => {
                if matches!(rec.stat(&path).await.unwrap(), Stat::File { .. }) {
                    rec.remove_file(&path).await.unwrap();
                }
            }
        }
    }
    rec.finish_turn().await.unwrap()
}

async fn run_case(
    turns: Vec<Vec<(usize, u8)>>,
    undos: usize,
    target: prop::sample::Index,
    harm: Damage,
) -> Result<(), TestCaseError> {
    let dir = fast_tempdir();
    let ws = MemMutator::new();
    for name in PATHS {
        let path = p(name);
        shiro_tools::create_parent_dirs(&ws, &path).await.unwrap();
        ws.write(&path, &content(name, 0).unwrap(), None)
            .await
            .unwrap();
    }
    let mut history = History {
        before: BTreeMap::new(),
        after: BTreeMap::new(),
        versions: BTreeMap::new(),
    };
    history.note(&files(&ws));
    let store = UndoStore::open_with(&common::state(dir.path()), &ws, options())
        .await
        .unwrap();
    for writes in &turns {
        let before = files(&ws);
        if let Some(id) = record(&store, &ws, writes).await {
            history.before.insert(id, before);
            history.after.insert(id, files(&ws));
            history.note(&files(&ws));
        }
    }
    for _ in 0..undos {
        if store.undo(&ws, UndoOptions::default()).await.is_err() {
            break;
        }
    }
    drop(store);

    let files_of_store = store_files(&dir.path().join(".shiro/undo"));
    let victim = &files_of_store[target.index(files_of_store.len())];
    apply_damage(victim, &harm);
    let damaged = format!("{} after {harm:?}", victim.display());

    let store = UndoStore::open_with(&common::state(dir.path()), &ws, options())
        .await
        .map_err(|err| TestCaseError::fail(format!("{damaged}: open failed: {err}")))?;
    history.check_legit(&ws, &damaged)?;

    for redo in [false, true] {
        let before = files(&ws);
        let result = if redo {
            store.redo(&ws, UndoOptions::default()).await
        } else {
            store.undo(&ws, UndoOptions::default()).await
        };
        history.check_legit(&ws, &damaged)?;
        match result {
            Ok(outcome) => {
                // Exact: every path of the turn is as it was before it (undo) or after it
                // (redo), and nothing else changed.
                let id = outcome.turn.id;
                let expected = if redo {
                    &history.after[&id]
                } else {
                    &history.before[&id]
                };
                let now = files(&ws);
                for path in outcome.paths.iter().map(|o| o.path.as_str()) {
                    prop_assert_eq!(
                        now.get(path),
                        expected.get(path),
                        "{}: {} of {}",
                        damaged,
                        path,
                        id
                    );
                }
                let touched: BTreeSet<String> =
                    outcome.paths.iter().map(|o| o.path.to_string()).collect();
                prop_assert!(differing(&before, &now).is_subset(&touched), "{}", damaged);
            }
            Err(err) => {
                // Nothing changed, and the message says what is wrong.
                let text = err.to_string();
                prop_assert!(
                    !text.is_empty() && !text.ends_with('.'),
                    "{}: {}",
                    damaged,
                    text
                );
                prop_assert_eq!(
                    &files(&ws),
                    &before,
                    "{}: failed with changes: {}",
                    damaged,
                    text
                );
            }
        }
    }
    store
        .log()
        .map_err(|err| TestCaseError::fail(format!("{damaged}: log: {err}")))?;
    store.redo_log().unwrap();

    // A new turn can be recorded and undone, exactly.
    let before = files(&ws);
    let rec = store.recorder(ws.clone());
    rec.begin_turn(TurnStart::default())
        .await
        .map_err(|err| TestCaseError::fail(format!("{damaged}: begin: {err}")))?;
    rec.write(&p("fresh"), b"fresh\n", None).await.unwrap();
    let id = rec
        .finish_turn()
        .await
        .map_err(|err| TestCaseError::fail(format!("{damaged}: finish: {err}")))?;
    prop_assert!(id.is_some(), "{}", damaged);
    let outcome = store
        .undo(&ws, UndoOptions::default())
        .await
        .map_err(|err| TestCaseError::fail(format!("{damaged}: undo of the new turn: {err}")))?;
    prop_assert_eq!(outcome.turn.id, id.unwrap());
    prop_assert_eq!(files(&ws), before, "{}", damaged);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: base_cases(), ..ProptestConfig::default() })]

    #[test]
    fn damage_to_any_store_file_never_writes_wrong_bytes(
        turns in proptest::collection::vec(proptest::collection::vec((0usize..4, 1u8..40), 1..4), 1..4),
        undos in 0usize..3,
        target in any::<prop::sample::Index>(),
        harm in damage(),
    ) {
        runtime().block_on(run_case(turns, undos, target, harm))?;
    }
}

/// The bytes turn `turn` writes to a small path: new each turn, so that every turn's pack
/// holds its own copies and no other turn's, but what it left when it stores that: the next
/// turn's pre-images.
fn own_content(path: &str, turn: usize) -> Vec<u8> {
    format!("{path} as turn {turn} left it\n").into_bytes()
}

/// The store's options for the pack property: with `afters`, each turn stores what it
/// leaves of the small files in its pack, which the next turn then finds its pre-images in;
/// without, a turn's pack holds its own pre-images alone.
fn pack_options(afters: bool) -> StoreOptions {
    StoreOptions {
        max_small_after_bytes: if afters {
            StoreOptions::default().max_small_after_bytes
        } else {
            0
        },
        ..options()
    }
}

async fn run_pack_case(
    turns: usize,
    victim: prop::sample::Index,
    harm: Damage,
    afters: bool,
) -> Result<(), TestCaseError> {
    const SMALL: [&str; 3] = ["f0", "f1", "dir/f2"];
    let options = || pack_options(afters);
    let dir = fast_tempdir();
    let ws = MemMutator::new();
    for name in SMALL {
        shiro_tools::create_parent_dirs(&ws, &p(name))
            .await
            .unwrap();
        ws.write(&p(name), &own_content(name, 0), None)
            .await
            .unwrap();
    }
    let store = UndoStore::open_with(&common::state(dir.path()), &ws, options())
        .await
        .unwrap();
    let mut before = Vec::new();
    for turn in 1..=turns {
        before.push(files(&ws));
        let rec = store.recorder(ws.clone());
        rec.begin_turn(TurnStart::default()).await.unwrap();
        for name in SMALL {
            rec.write(&p(name), &own_content(name, turn), None)
                .await
                .unwrap();
        }
        rec.finish_turn().await.unwrap().unwrap();
    }
    let top = files(&ws);
    drop(store);
    let hit = victim.index(turns) + 1;
    let pack = dir.path().join(format!(".shiro/undo/blobs/{hit}-0.pack"));
    prop_assert!(pack.is_file(), "turn {} has its pack", hit);
    apply_damage(&pack, &harm);
    let damaged = format!("the pack of turn {hit} of {turns} after {harm:?}");

    let store = UndoStore::open_with(&common::state(dir.path()), &ws, options())
        .await
        .map_err(|err| TestCaseError::fail(format!("{damaged}: open failed: {err}")))?;
    // The turns the damage can reach: the hit one, and the next when it found its
    // pre-images in that pack (what the hit turn left). Those after are untouched by it.
    let reach = if afters { (hit + 1).min(turns) } else { hit };
    for turn in (reach + 1..=turns).rev() {
        store
            .undo(&ws, UndoOptions::default())
            .await
            .map_err(|err| TestCaseError::fail(format!("{damaged}: undo of {turn}: {err}")))?;
        prop_assert_eq!(
            &files(&ws),
            &before[turn - 1],
            "{}: undo of {}",
            damaged,
            turn
        );
    }
    for turn in (hit..=reach).rev() {
        let found = files(&ws);
        match store.undo(&ws, UndoOptions::default()).await {
            Ok(_) => prop_assert_eq!(&files(&ws), &before[turn - 1], "{}", damaged),
            Err(err) => {
                let text = err.to_string();
                prop_assert!(
                    text.contains("damaged") || text.contains("missing"),
                    "{}: undo of {}: {}",
                    damaged,
                    turn,
                    text
                );
                prop_assert_eq!(
                    &files(&ws),
                    &found,
                    "{}: failed with changes: {}",
                    damaged,
                    text
                );
                // They redo exactly.
                for _ in turn + 1..=turns {
                    store
                        .redo(&ws, UndoOptions::default())
                        .await
                        .map_err(|err| TestCaseError::fail(format!("{damaged}: redo: {err}")))?;
                }
                prop_assert_eq!(&files(&ws), &top, "{}: redone", damaged);
                break;
            }
        }
    }
    // The store goes on: the damaged copies' bytes, written again and then replaced, are
    // stored afresh (never trusted to the damaged pack), and both turns undo exactly.
    let now = files(&ws);
    for (n, bytes) in [(1, None), (2, Some(b"fresh".to_vec()))] {
        let rec = store.recorder(ws.clone());
        rec.begin_turn(TurnStart::default()).await.unwrap();
        for name in SMALL {
            let bytes = bytes.clone().unwrap_or_else(|| own_content(name, hit - 1));
            rec.write(&p(name), &bytes, None).await.unwrap();
        }
        prop_assert!(
            rec.finish_turn().await.unwrap().is_some() || n == 1,
            "{}",
            damaged
        );
    }
    let again: Files = SMALL
        .iter()
        .map(|name| ((*name).to_owned(), Some(own_content(name, hit - 1))))
        .chain(
            now.iter()
                .filter(|(path, _)| !SMALL.contains(&path.as_str()))
                .map(|(k, v)| (k.clone(), v.clone())),
        )
        .collect();
    store
        .undo(&ws, UndoOptions::default())
        .await
        .map_err(|err| TestCaseError::fail(format!("{damaged}: undo of a new turn: {err}")))?;
    prop_assert_eq!(&files(&ws), &again, "{}", damaged);
    if again != now {
        store
            .undo(&ws, UndoOptions::default())
            .await
            .map_err(|err| {
                TestCaseError::fail(format!("{damaged}: undo of the other new turn: {err}"))
            })?;
    }
    prop_assert_eq!(files(&ws), now, "{}", damaged);
    Ok(())
}

/// A pack whose index cannot be read is named, as damaged, by the undo it stops; nothing
/// changes, and the store goes on.
#[test]
fn an_unreadable_pack_is_named_as_damaged() {
    runtime().block_on(async {
        let dir = fast_tempdir();
        let ws = MemMutator::new();
        ws.write(&p("f"), b"before\n", None).await.unwrap();
        let store = UndoStore::open_with(&common::state(dir.path()), &ws, options())
            .await
            .unwrap();
        let rec = store.recorder(ws.clone());
        rec.begin_turn(TurnStart::default()).await.unwrap();
        rec.write(&p("f"), b"after\n", None).await.unwrap();
        rec.finish_turn().await.unwrap().unwrap();
        let pack = dir.path().join(".shiro/undo/blobs/1-0.pack");
        let whole = std::fs::read(&pack).unwrap();
        std::fs::write(&pack, &whole[..whole.len() / 2]).unwrap();
        let err = store
            .undo(&ws, UndoOptions::default())
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("cannot restore f: its stored copy (blob ")
                && err.contains(") is damaged: the turn's pack blobs/1-0.pack cannot be read ("),
            "{err}"
        );
        assert_eq!(ws.read(&p("f")).await.unwrap(), b"after\n");
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: base_cases(), ..ProptestConfig::default() })]

    #[test]
    fn damage_to_a_turns_pack_reaches_that_turn_alone(
        turns in 1usize..5,
        victim in any::<prop::sample::Index>(),
        harm in damage(),
        afters in any::<bool>(),
    ) {
        runtime().block_on(run_pack_case(turns, victim, harm, afters))?;
    }
}
