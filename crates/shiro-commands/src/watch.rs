//! Hot reload: a notify watcher feeding a debouncing thread that calls `Registry::reload`.

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

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

impl Registry {
    /// Starts hot reload: watches `<workspace>/.shiro` (recursively), the workspace root
    /// (non-recursively, so that a `.shiro` created later is noticed and then watched) and
    /// the user config directory if it exists. Changes are debounced (150 ms of quiet) and
    /// then [`Registry::reload`] runs on a background thread.
    pub fn watch(&self) -> Result<WatchHandle, WatchError> {
        let (tx, rx) = mpsc::channel::<notify::Result<notify::Event>>();
        let watcher = notify::recommended_watcher(move |event| {
            // A send fails only after the reload thread has ended, when nobody listens.
            let _ = tx.send(event);
        })
        .map_err(WatchError::Start)?;
        let watcher = Arc::new(Mutex::new(watcher));

        let sources = self.sources();
        let project = sources.project_dir();
        let mut targets = vec![(sources.workspace_root.clone(), RecursiveMode::NonRecursive)];
        if project.is_dir() {
            targets.push((project.clone(), RecursiveMode::Recursive));
        }
        if let Some(user) = sources.user_config_dir.as_ref().filter(|d| d.is_dir()) {
            targets.push((user.clone(), RecursiveMode::Recursive));
        }
        let mut watched = Vec::new();
        {
            let mut guard = watcher
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (path, mode) in targets {
                guard
                    .watch(&path, mode)
                    .map_err(|source| WatchError::Watch {
                        path: path.clone(),
                        source,
                    })?;
                watched.push(path);
            }
        }
        let project_watched = watched.contains(&project);

        let registry = self.clone();
        let weak = Arc::downgrade(&watcher);
        std::thread::Builder::new()
            .name("shiro-commands-watch".to_owned())
            .spawn(move || reload_loop(&registry, &rx, &weak, project_watched))
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
    project_watched: bool,
) {
    // Whether `.shiro` needs a (new) watch: it did not exist at start, or was replaced.
    let mut rewatch = !project_watched;
    let sources = registry.sources();
    let wanted = |event: &notify::Result<notify::Event>| match event {
        Ok(event) => relevant(event.kind) && event.paths.iter().any(|p| is_source_path(sources, p)),
        // An error may mean missed events: reloading is the safe answer.
        Err(_) => true,
    };
    loop {
        // Wait for a relevant event; a disconnect means the handle was dropped.
        let project = sources.project_dir();
        let touches_project = |event: &notify::Result<notify::Event>| {
            event.as_ref().is_ok_and(|e| e.paths.contains(&project))
        };
        match rx.recv() {
            Ok(event) if wanted(&event) => rewatch |= touches_project(&event),
            Ok(_) => continue,
            Err(_) => return,
        }
        let start = Instant::now();
        loop {
            match rx.recv_timeout(DEBOUNCE) {
                Ok(event) if start.elapsed() < MAX_DELAY => rewatch |= touches_project(&event),
                Ok(_) | Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        if rewatch && project.is_dir() {
            let Some(watcher) = watcher.upgrade() else {
                return;
            };
            let mut guard = watcher
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            rewatch = guard.watch(&project, RecursiveMode::Recursive).is_err();
        }
        registry.reload();
    }
}
