//! The headline property: any sequence of turns, undone turn by turn, walks the tree back
//! through every intermediate state to the start, exactly (content, mode and kind); redone
//! turn by turn, it walks forward again to the end.
//!
//! A state machine: turns are lists of abstract operations whose targets are indices into the
//! paths that make sense in the current model tree, so every generated sequence is valid and
//! shrinking gives short, readable counterexamples (the resolved operations are printed).
#![allow(clippy::unwrap_used)]

use crate::common;

use std::collections::BTreeMap;
use std::fmt;

use common::{Tree, base_cases, disk_tree, fast_tempdir, mem_tree, p, runtime};
use proptest::prelude::*;
use proptest::sample::Index;
use shiro_tools::{FsMutator, MemMutator, Mutator, Stat, create_parent_dirs};
use shiro_undo::{StoreOptions, TurnStart, UndoError, UndoOptions, UndoStore};

const NAMES: [&str; 3] = ["a", "b", "c"];
const MAX_DEPTH: usize = 3;
const FILE_MODES: [u32; 5] = [0o644, 0o600, 0o755, 0o444, 0o640];
const DIR_MODES: [u32; 3] = [0o755, 0o700, 0o750];
const LINK_TARGETS: [&str; 3] = ["nowhere", "../outside", "x/y"];

/// An operation as generated: targets are picked from the model when it runs.
#[derive(Debug, Clone)]
enum Abstract {
    Write {
        at: Index,
        bytes: Vec<u8>,
        mode: Option<u32>,
    },
    WriteNested {
        under: Index,
        names: Vec<Index>,
        bytes: Vec<u8>,
    },
    Delete {
        at: Index,
    },
    RemoveDir {
        at: Index,
    },
    RemoveTree {
        at: Index,
    },
    Move {
        from: Index,
        to: Index,
    },
    SetMode {
        at: Index,
        mode: Index,
    },
    Symlink {
        at: Index,
        target: Index,
    },
    Mkdir {
        at: Index,
    },
}

/// An operation resolved against the model: what the counterexample shows.
#[derive(Clone)]
enum Op {
    Write {
        path: String,
        bytes: Vec<u8>,
        mode: Option<u32>,
    },
    WriteNested {
        path: String,
        bytes: Vec<u8>,
    },
    Delete(String),
    RemoveDir(String),
    RemoveTree(String),
    Move(String, String),
    SetMode(String, u32),
    Symlink {
        target: String,
        path: String,
    },
    Mkdir(String),
}

impl fmt::Debug for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = |b: &[u8]| match std::str::from_utf8(b) {
            Ok(s) => format!("{s:?}"),
            Err(_) => format!("{} binary bytes", b.len()),
        };
        match self {
            Op::Write {
                path,
                bytes: b,
                mode,
            } => {
                write!(f, "write {path} {}", bytes(b))?;
                if let Some(mode) = mode {
                    write!(f, " mode {mode:o}")?;
                }
                Ok(())
            }
            Op::WriteNested { path, bytes: b } => {
                write!(f, "write (with parents) {path} {}", bytes(b))
            }
            Op::Delete(path) => write!(f, "delete {path}"),
            Op::RemoveDir(path) => write!(f, "rmdir {path}"),
            Op::RemoveTree(path) => write!(f, "rm -r {path}"),
            Op::Move(from, to) => write!(f, "mv {from} {to}"),
            Op::SetMode(path, mode) => write!(f, "chmod {mode:o} {path}"),
            Op::Symlink { target, path } => write!(f, "ln -s {target} {path}"),
            Op::Mkdir(path) => write!(f, "mkdir {path}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    File { bytes: Vec<u8>, mode: u32 },
    Dir { mode: u32 },
    Link { target: String },
}

#[derive(Debug, Clone, Default)]
struct Model {
    nodes: BTreeMap<String, Node>,
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

fn depth(path: &str) -> usize {
    if path.is_empty() {
        0
    } else {
        path.split('/').count()
    }
}

impl Model {
    fn paths(&self, keep: impl Fn(&Node) -> bool) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| keep(n))
            .map(|(p, _)| p.clone())
            .collect()
    }

    fn dirs_with_root(&self) -> Vec<String> {
        let mut dirs = vec![String::new()];
        dirs.extend(self.paths(|n| matches!(n, Node::Dir { .. })));
        dirs
    }

    /// Absent paths directly under an existing directory.
    fn free_slots(&self) -> Vec<String> {
        let mut slots = Vec::new();
        for dir in self.dirs_with_root() {
            if depth(&dir) >= MAX_DEPTH {
                continue;
            }
            for name in NAMES {
                let path = join(&dir, name);
                if !self.nodes.contains_key(&path) {
                    slots.push(path);
                }
            }
        }
        slots
    }

    fn children(&self, dir: &str) -> Vec<String> {
        let prefix = format!("{dir}/");
        self.nodes
            .keys()
            .filter(|k| k.starts_with(&prefix))
            .cloned()
            .collect()
    }

    fn pick(list: &[String], index: &Index) -> Option<String> {
        (!list.is_empty()).then(|| index.get(list).clone())
    }

    /// Resolves an abstract operation; `None` when it has no valid target now.
    fn resolve(&self, op: &Abstract) -> Option<Op> {
        let files = self.paths(|n| matches!(n, Node::File { .. }));
        let entries = self.paths(|n| !matches!(n, Node::Dir { .. }));
        Some(match op {
            Abstract::Write { at, bytes, mode } => {
                let mut targets = files;
                targets.extend(self.free_slots());
                targets.sort();
                Op::Write {
                    path: Self::pick(&targets, at)?,
                    bytes: bytes.clone(),
                    mode: *mode,
                }
            }
            Abstract::WriteNested {
                under,
                names,
                bytes,
            } => {
                let mut path = Self::pick(&self.dirs_with_root(), under)?;
                for name in names {
                    let name: &&str = name.get(&NAMES[..]);
                    path = join(&path, name);
                    if depth(&path) > MAX_DEPTH + 1 {
                        return None;
                    }
                    match self.nodes.get(&path) {
                        Some(Node::Dir { .. }) | None => {}
                        Some(_) => return None,
                    }
                }
                if self.nodes.contains_key(&path) || path.is_empty() {
                    return None;
                }
                Op::WriteNested {
                    path,
                    bytes: bytes.clone(),
                }
            }
            Abstract::Delete { at } => Op::Delete(Self::pick(&entries, at)?),
            Abstract::RemoveDir { at } => {
                let empty: Vec<String> = self
                    .paths(|n| matches!(n, Node::Dir { .. }))
                    .into_iter()
                    .filter(|d| self.children(d).is_empty())
                    .collect();
                Op::RemoveDir(Self::pick(&empty, at)?)
            }
            Abstract::RemoveTree { at } => Op::RemoveTree(Self::pick(
                &self.paths(|n| matches!(n, Node::Dir { .. })),
                at,
            )?),
            Abstract::Move { from, to } => {
                let from = Self::pick(&entries, from)?;
                let mut targets: Vec<String> =
                    entries.iter().filter(|e| **e != from).cloned().collect();
                targets.extend(self.free_slots());
                targets.sort();
                Op::Move(from, Self::pick(&targets, to)?)
            }
            Abstract::SetMode { at, mode } => {
                let path = Self::pick(&self.paths(|n| !matches!(n, Node::Link { .. })), at)?;
                let mode = match self.nodes.get(&path)? {
                    Node::Dir { .. } => *mode.get(&DIR_MODES),
                    _ => *mode.get(&FILE_MODES),
                };
                Op::SetMode(path, mode)
            }
            Abstract::Symlink { at, target } => Op::Symlink {
                target: (*target.get(&LINK_TARGETS[..])).to_owned(),
                path: Self::pick(&self.free_slots(), at)?,
            },
            Abstract::Mkdir { at } => Op::Mkdir(Self::pick(&self.free_slots(), at)?),
        })
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Write { path, bytes, mode } => {
                let mode = mode.unwrap_or(match self.nodes.get(path) {
                    Some(Node::File { mode, .. }) => *mode,
                    _ => 0o644,
                });
                self.nodes.insert(
                    path.clone(),
                    Node::File {
                        bytes: bytes.clone(),
                        mode,
                    },
                );
            }
            Op::WriteNested { path, bytes } => {
                for ancestor in p(path).ancestors() {
                    self.nodes
                        .entry(ancestor.to_string())
                        .or_insert(Node::Dir { mode: 0o755 });
                }
                self.nodes.insert(
                    path.clone(),
                    Node::File {
                        bytes: bytes.clone(),
                        mode: 0o644,
                    },
                );
            }
            Op::Delete(path) | Op::RemoveDir(path) => {
                self.nodes.remove(path);
            }
            Op::RemoveTree(path) => {
                for child in self.children(path) {
                    self.nodes.remove(&child);
                }
                self.nodes.remove(path);
            }
            Op::Move(from, to) => {
                let node = self.nodes.remove(from).unwrap();
                self.nodes.insert(to.clone(), node);
            }
            Op::SetMode(path, new) => match self.nodes.get_mut(path) {
                Some(Node::File { mode, .. } | Node::Dir { mode }) => *mode = *new,
                _ => unreachable!("resolve picks files and directories"),
            },
            Op::Symlink { target, path } => {
                self.nodes.insert(
                    path.clone(),
                    Node::Link {
                        target: target.clone(),
                    },
                );
            }
            Op::Mkdir(path) => {
                self.nodes.insert(path.clone(), Node::Dir { mode: 0o755 });
            }
        }
    }

    fn tree(&self) -> Tree {
        self.nodes
            .iter()
            .map(|(path, node)| {
                let entry = match node {
                    Node::File { bytes, mode } => (
                        Stat::File {
                            mode: *mode,
                            len: bytes.len() as u64,
                        },
                        Some(bytes.clone()),
                    ),
                    Node::Dir { mode } => (Stat::Dir { mode: *mode }, None),
                    Node::Link { target } => (
                        Stat::Symlink {
                            target: target.clone(),
                        },
                        None,
                    ),
                };
                (path.clone(), entry)
            })
            .collect()
    }
}

/// Performs `op` through `m`, as a tool would.
async fn perform(m: &dyn Mutator, model: &Model, op: &Op) {
    let result = match op {
        Op::Write { path, bytes, mode } => m.write(&p(path), bytes, *mode).await,
        Op::WriteNested { path, bytes } => match create_parent_dirs(m, &p(path)).await {
            Ok(()) => m.write(&p(path), bytes, None).await,
            Err(err) => Err(err),
        },
        Op::Delete(path) => m.remove_file(&p(path)).await,
        Op::RemoveDir(path) => m.remove_dir(&p(path)).await,
        Op::RemoveTree(path) => {
            let mut children = model.children(path);
            children.sort_by_key(|c| std::cmp::Reverse(depth(c)));
            for child in children {
                match model.nodes.get(&child) {
                    Some(Node::Dir { .. }) => m.remove_dir(&p(&child)).await.unwrap(),
                    _ => m.remove_file(&p(&child)).await.unwrap(),
                }
            }
            m.remove_dir(&p(path)).await
        }
        Op::Move(from, to) => m.rename(&p(from), &p(to)).await,
        Op::SetMode(path, mode) => m.set_mode(&p(path), *mode).await,
        Op::Symlink { target, path } => m.symlink(target, &p(path)).await,
        Op::Mkdir(path) => m.create_dir(&p(path)).await,
    };
    if let Err(err) = result {
        panic!("{op:?} failed: {err}");
    }
}

fn abstract_op() -> impl Strategy<Value = Abstract> {
    let bytes = prop_oneof![
        Just(Vec::new()),
        Just(b"hello\n".to_vec()),
        Just(b"hello\r\nworld".to_vec()),
        // Versions of one text, which big-file deltas encode as a few changed lines.
        Just(b"first line\nsecond line\nthird line\nfourth line\n".to_vec()),
        Just(b"first line\nsecond line, edited\nthird line\nfourth line\n".to_vec()),
        Just(b"first line\nthird line\nfourth line\nand a fifth\n".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..48),
    ];
    let mode = proptest::option::of(proptest::sample::select(FILE_MODES.to_vec()));
    prop_oneof![
        4 => (any::<Index>(), bytes.clone(), mode).prop_map(|(at, bytes, mode)| Abstract::Write { at, bytes, mode }),
        2 => (any::<Index>(), proptest::collection::vec(any::<Index>(), 1..3), bytes)
            .prop_map(|(under, names, bytes)| Abstract::WriteNested { under, names, bytes }),
        2 => any::<Index>().prop_map(|at| Abstract::Delete { at }),
        1 => any::<Index>().prop_map(|at| Abstract::RemoveDir { at }),
        1 => any::<Index>().prop_map(|at| Abstract::RemoveTree { at }),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(from, to)| Abstract::Move { from, to }),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(at, mode)| Abstract::SetMode { at, mode }),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(at, target)| Abstract::Symlink { at, target }),
        1 => any::<Index>().prop_map(|at| Abstract::Mkdir { at }),
    ]
}

/// A starting tree (set up without recording) and the turns.
fn scenario() -> impl Strategy<Value = (Vec<Abstract>, Vec<Vec<Abstract>>)> {
    (
        proptest::collection::vec(abstract_op(), 0..10),
        proptest::collection::vec(proptest::collection::vec(abstract_op(), 1..7), 1..6),
    )
}

/// Which workspace the scenario runs on.
trait Workspace {
    type M: Mutator + Clone + 'static;
    fn mutator(&self) -> Self::M;
    fn tree(&self) -> Tree;
}

struct Mem(MemMutator);
impl Workspace for Mem {
    type M = MemMutator;
    fn mutator(&self) -> MemMutator {
        self.0.clone()
    }
    fn tree(&self) -> Tree {
        mem_tree(&self.0)
    }
}

struct Disk(FsMutator, std::path::PathBuf);
impl Workspace for Disk {
    type M = FsMutator;
    fn mutator(&self) -> FsMutator {
        self.0.clone()
    }
    fn tree(&self) -> Tree {
        disk_tree(&self.1)
    }
}

/// Runs the scenario and checks the property; the error names the resolved operations.
fn run(
    ws: &impl Workspace,
    state_dir: &std::path::Path,
    options: StoreOptions,
    setup: &[Abstract],
    turns: &[Vec<Abstract>],
) -> Result<(), TestCaseError> {
    runtime().block_on(async {
        let inner = ws.mutator();
        let mut model = Model::default();
        let mut script = String::from("setup:\n");
        for op in setup {
            if let Some(op) = model.resolve(op) {
                script.push_str(&format!("  {op:?}\n"));
                perform(&inner, &model, &op).await;
                model.apply(&op);
            }
        }
        let store = UndoStore::open_with(&common::state(state_dir), &inner, options)
            .await
            .unwrap();
        let recording = store.recorder(inner.clone());
        let mut states = vec![ws.tree()];
        prop_assert_eq!(
            &states[0],
            &model.tree(),
            "model and workspace disagree after setup"
        );
        for (number, turn) in turns.iter().enumerate() {
            script.push_str(&format!("turn {}:\n", number + 1));
            recording
                .begin_turn(TurnStart {
                    summary: format!("turn {}", number + 1),
                    history_marker: number as u64,
                    session: None,
                })
                .await
                .unwrap();
            for op in turn {
                if let Some(op) = model.resolve(op) {
                    script.push_str(&format!("  {op:?}\n"));
                    perform(&recording, &model, &op).await;
                    model.apply(&op);
                }
            }
            let finished = recording.finish_turn().await.unwrap();
            let tree = ws.tree();
            prop_assert_eq!(
                &tree,
                &model.tree(),
                "model and workspace disagree\n{}",
                script
            );
            match finished {
                Some(_) => states.push(tree),
                None => prop_assert_eq!(
                    &tree,
                    states.last().unwrap(),
                    "a turn that changed something was not recorded\n{}",
                    script
                ),
            }
        }
        let recorded = states.len() - 1;
        prop_assert_eq!(store.log().unwrap().len(), recorded);

        for k in (1..=recorded).rev() {
            let conflicts = store.check(&inner).await.unwrap();
            prop_assert!(
                conflicts.is_empty(),
                "unexpected conflicts before undo {}: {:?}\n{}",
                k,
                conflicts,
                script
            );
            let outcome = store.undo(&inner, UndoOptions::default()).await;
            prop_assert!(
                outcome.is_ok(),
                "undo of recorded turn {} failed: {:?}\n{}",
                k,
                outcome.err(),
                script
            );
            prop_assert_eq!(
                &ws.tree(),
                &states[k - 1],
                "undo of recorded turn {} did not restore the tree\n{}",
                k,
                script
            );
        }
        prop_assert!(matches!(
            store.undo(&inner, UndoOptions::default()).await,
            Err(UndoError::NothingToUndo)
        ));
        for (k, state) in states.iter().enumerate().skip(1) {
            let outcome = store.redo(&inner, UndoOptions::default()).await;
            prop_assert!(
                outcome.is_ok(),
                "redo of recorded turn {} failed: {:?}\n{}",
                k,
                outcome.err(),
                script
            );
            prop_assert_eq!(
                &ws.tree(),
                state,
                "redo of recorded turn {} did not reproduce the tree\n{}",
                k,
                script
            );
        }
        prop_assert!(matches!(
            store.redo(&inner, UndoOptions::default()).await,
            Err(UndoError::NothingToRedo)
        ));
        prop_assert!(
            store.take_notices().is_empty(),
            "no notices expected in a clean run"
        );
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: (base_cases() * 8).min(20_000).max(base_cases()), ..ProptestConfig::default() })]

    #[test]
    fn undo_then_redo_every_turn_in_memory((setup, turns) in scenario()) {
        let state = fast_tempdir();
        run(&Mem(MemMutator::new()), state.path(), StoreOptions::default(), &setup, &turns)?;
    }

    /// Every file counts as big, so pre-images become deltas against after-images, and
    /// earlier versions deltas against later ones, across turns, undos and redos.
    #[test]
    fn undo_then_redo_every_turn_with_deltas((setup, turns) in scenario()) {
        let state = fast_tempdir();
        let options = StoreOptions { big_file_bytes: 8, ..StoreOptions::default() };
        run(&Mem(MemMutator::new()), state.path(), options, &setup, &turns)?;
    }

    /// Files of 16 bytes and more are streamed (copied into raw blobs a piece at a time, and
    /// their new versions stored only when an undo needs them); those of 8 to 15 are big
    /// (deltas). Turns move files between the three kinds as they grow and shrink them.
    #[test]
    fn undo_then_redo_every_turn_streamed((setup, turns) in scenario()) {
        let state = fast_tempdir();
        let options = streamed();
        run(&Mem(MemMutator::new()), state.path(), options, &setup, &turns)?;
    }
}

/// Options under which files of 16 bytes and more are streamed, and of 8 to 15 are big, and
/// a turn holds at most 12 bytes of smaller files' pre-images in memory (the rest are read
/// back from the in-flight file).
fn streamed() -> StoreOptions {
    StoreOptions {
        big_file_bytes: 8,
        stream_file_bytes: 16,
        max_held_bytes: 12,
        ..StoreOptions::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: (base_cases() / 2).max(1), ..ProptestConfig::default() })]

    #[test]
    fn undo_then_redo_every_turn_on_disk((setup, turns) in scenario()) {
        let dir = fast_tempdir();
        let fs = FsMutator::new(dir.path()).unwrap();
        run(&Disk(fs, dir.path().to_path_buf()), dir.path(), StoreOptions::default(), &setup, &turns)?;
    }

    /// As `undo_then_redo_every_turn_streamed`, on disk, where reads come a piece at a time.
    #[test]
    fn undo_then_redo_every_turn_streamed_on_disk((setup, turns) in scenario()) {
        let dir = fast_tempdir();
        let fs = FsMutator::new(dir.path()).unwrap();
        run(&Disk(fs, dir.path().to_path_buf()), dir.path(), streamed(), &setup, &turns)?;
    }
}
