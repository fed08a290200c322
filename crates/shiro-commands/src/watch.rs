//! Hot reload: a notify watcher feeding a debouncing thread that calls `Registry::reload`.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use crate::parse::Origin;
use crate::registry::{Registry, is_source_path};

/// How long the sources must stay quiet before a reload.
const DEBOUNCE: Duration = Duration::from_millis(150);
/// The longest a burst of changes can delay a reload.
const MAX_DELAY: Duration = Duration::from_secs(1);

/// Why hot reload could not start. Not fatal: the registry still works and
/// [`Registry::reload`] can be called by hand.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The platform watcher could not be created.
    #[error("cannot start the file watcher")]
    Start(#[source] notify::Error),
    /// A directory could not be watched.
    #[error("cannot watch {}", path.display())]
    Watch {
        /// The directory.
        path: PathBuf,
        /// What notify said.
        #[source]
        source: notify::Error,
    },
    /// The debouncing thread could not be spawned.
    #[error("cannot spawn the reload thread")]
    Thread(#[source] std::io::Error),
}

/// Keeps hot reload running; dropping it stops watching.
#[derive(Debug)]
pub struct WatchHandle {
    // The reload thread holds only a weak reference: once this strong one is dropped, the
    // watcher and its event sender go too, and the thread's receive loop ends.
    _watcher: Arc<Mutex<RecommendedWatcher>>,
    watched: Vec<PathBuf>,
}

impl WatchHandle {
    /// The directories being watched when the watch started.
    pub fn watched(&self) -> &[PathBuf] {
        &self.watched
    }
}

fn relevant(kind: EventKind) -> bool {
    match kind {
        // Reading the sources on reload opens them; reacting to that would loop forever.
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// The directories hot reload watches, as `(path, recursive)`: the workspace root (to see
/// `.shiro` or `.claude` appear), `.shiro` whole, the other tools' project folders (not
/// recursively: `.opencode` may hold a `node_modules`), every command and skills folder and
/// the user's shiro directory. Only those that exist are returned, and the root always
/// (watching it is what must work). A project folder that leads out of the workspace is
/// not read, so it is not watched either: a `.shiro` that links to the home directory must
/// not have all of it watched.
fn targets(sources: &crate::Sources) -> Vec<(PathBuf, RecursiveMode)> {
    let root = &sources.workspace_root;
    // `(path, mode, whether it is the project's)`.
    let mut out = vec![(root.clone(), RecursiveMode::NonRecursive, false)];
    out.push((root.join(".shiro"), RecursiveMode::Recursive, true));
    for base in [".agents", ".claude", ".opencode", ".gemini"] {
        out.push((root.join(base), RecursiveMode::NonRecursive, true));
    }
    if let Some(user) = &sources.user_config_dir {
        out.push((user.clone(), RecursiveMode::Recursive, false));
    }
    for location in sources.locations() {
        if location.kind.is_folder() {
            let project = location.origin == Origin::Project;
            out.push((location.path, RecursiveMode::Recursive, project));
        }
    }
    let jail = root.canonicalize().ok();
    let leads_out = |path: &Path| match (&jail, path.canonicalize()) {
        (Some(jail), Ok(real)) => !real.starts_with(jail),
        _ => false,
    };
    let mut seen = std::collections::HashSet::new();
    out.into_iter()
        .filter(|(path, _, project)| {
            (path == root || path.is_dir())
                && !(*project && leads_out(path))
                && seen.insert(path.clone())
        })
        .map(|(path, mode, _)| (path, mode))
        .collect()
}

/// Adds watches for every target not watched yet (a target inside a folder watched
/// recursively needs none). At start (`strict`) the first error is returned; later ones are
/// retried on the next reload.
fn add_watches(
    watcher: &mut RecommendedWatcher,
    sources: &crate::Sources,
    watched: &mut Vec<(PathBuf, RecursiveMode)>,
    strict: bool,
) -> Result<(), WatchError> {
    for (path, mode) in targets(sources) {
        let covered = watched
            .iter()
            .any(|(w, m)| w == &path || (*m == RecursiveMode::Recursive && path.starts_with(w)));
        if covered {
            continue;
        }
        match watcher.watch(&path, mode) {
            Ok(()) => watched.push((path, mode)),
            Err(source) if strict => return Err(WatchError::Watch { path, source }),
            Err(_) => {}
        }
    }
    Ok(())
}

impl Registry {
    /// Starts hot reload: watches the command folders that exist, `.shiro` and the user's
    /// shiro directory recursively, and the workspace root and the other tools' project
    /// folders non-recursively, so that a folder created later is noticed and then watched.
    /// Changes are debounced (150 ms of quiet) and then [`Registry::reload`] runs on a
    /// background thread.
    pub fn watch(&self) -> Result<WatchHandle, WatchError> {
        let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
        let watcher = notify::recommended_watcher(move |event| {
            // A send fails only after the reload thread has ended, when nobody listens.
            let _ = tx.send(event);
        })
        .map_err(WatchError::Start)?;
        let watcher = Arc::new(Mutex::new(watcher));
        let mut in_thread = Vec::new();
        {
            let mut guard = watcher
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            add_watches(&mut guard, self.sources(), &mut in_thread, true)?;
        }
        let watched = in_thread.iter().map(|(path, _)| path.clone()).collect();
        let registry = self.clone();
        let weak = Arc::downgrade(&watcher);
        std::thread::Builder::new()
            .name("shiro-commands-watch".to_owned())
            .spawn(move || reload_loop(&registry, &rx, &weak, &mut in_thread))
            .map_err(WatchError::Thread)?;
        Ok(WatchHandle {
            _watcher: watcher,
            watched,
        })
    }
}

fn reload_loop(
    registry: &Registry,
    rx: &mpsc::Receiver<notify::Result<notify::Event>>,
    watcher: &Weak<Mutex<RecommendedWatcher>>,
    watched: &mut Vec<(PathBuf, RecursiveMode)>,
) {
    let sources = registry.sources();
    let wanted = |event: &notify::Result<notify::Event>| match event {
        Ok(event) => relevant(event.kind) && event.paths.iter().any(|p| is_source_path(sources, p)),
        // An error may mean missed events: reloading is the safe answer.
        Err(_) => true,
    };
    // A watched folder that was itself removed or replaced needs a new watch.
    let mut replaced = Vec::new();
    let note = |event: &notify::Result<notify::Event>,
                watched: &[(PathBuf, RecursiveMode)],
                replaced: &mut Vec<PathBuf>| {
        if let Ok(event) = event {
            replaced.extend(
                event
                    .paths
                    .iter()
                    .filter(|p| watched.iter().any(|(w, _)| w == *p))
                    .cloned(),
            );
        }
    };
    loop {
        // Wait for a relevant event; a disconnect means the handle was dropped.
        match rx.recv() {
            Ok(event) if wanted(&event) => note(&event, watched, &mut replaced),
            Ok(_) => continue,
            Err(_) => return,
        }
        let start = Instant::now();
        loop {
            match rx.recv_timeout(DEBOUNCE) {
                Ok(event) if start.elapsed() < MAX_DELAY => note(&event, watched, &mut replaced),
                Ok(_) | Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        // A folder created (or replaced) since the last reload gets its watch now.
        let Some(watcher) = watcher.upgrade() else {
            return;
        };
        {
            let mut guard = watcher
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            watched.retain(|(path, _)| path.is_dir() && !replaced.contains(path));
            replaced.clear();
            let _ = add_watches(&mut guard, sources, watched, false);
        }
        drop(watcher);
        registry.reload();
    }
}
