//! The overlay runner with a fallback to detection, taken once and for all the first time the
//! overlay cannot be set up, with a notice that says why.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::process::Command;

use super::{
    BashRunner, CaptureError, CaptureMode, Captured, CommandCapture, Detect, Ended, Overlay,
    Started,
};
use crate::mutator::Mutator;

/// Runs commands over an [`Overlay`]; where that cannot be set up, with [`Detect`] from then
/// on. The first command run by detection carries a note of the fallback and its reason.
#[derive(Debug, Clone)]
pub struct Auto {
    overlay: Overlay,
    detect: Detect,
    state: Arc<Mutex<Fallback>>,
}

#[derive(Debug, Default)]
struct Fallback {
    /// Why the overlay was given up, once it was.
    reason: Option<String>,
    /// Whether a command's notes told of it yet.
    told: bool,
}

impl Auto {
    /// Tries `overlay` first, `detect` once it fails.
    pub fn new(overlay: Overlay, detect: Detect) -> Self {
        Self {
            overlay,
            detect,
            state: Arc::new(Mutex::new(Fallback::default())),
        }
    }

    /// Why the overlay was given up, if it was.
    pub fn fallback_reason(&self) -> Option<String> {
        lock(&self.state).reason.clone()
    }
}

fn lock(state: &Mutex<Fallback>) -> std::sync::MutexGuard<'_, Fallback> {
    // A poisoned lock only means a panic elsewhere; the state itself is intact.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn fall_back(state: &Mutex<Fallback>, why: String) {
    let mut state = lock(state);
    if state.reason.is_none() {
        state.reason = Some(why);
    }
}

#[async_trait]
impl BashRunner for Auto {
    fn mode(&self) -> CaptureMode {
        if lock(&self.state).reason.is_some() {
            CaptureMode::Detect
        } else {
            CaptureMode::Overlay
        }
    }

    async fn begin(&self, mutator: &dyn Mutator) -> Result<Box<dyn CommandCapture>, CaptureError> {
        if lock(&self.state).reason.is_none() {
            match self.overlay.begin(mutator).await {
                Ok(inner) => {
                    return Ok(Box::new(Watched {
                        inner,
                        state: Arc::clone(&self.state),
                        tell: false,
                    }));
                }
                Err(CaptureError::NotStarted(why)) => fall_back(&self.state, why),
                Err(err) => return Err(err),
            }
        }
        let inner = self.detect.begin(mutator).await?;
        let tell = !std::mem::replace(&mut lock(&self.state).told, true);
        Ok(Box::new(Watched {
            inner,
            state: Arc::clone(&self.state),
            tell,
        }))
    }
}

/// A capture whose setup failure makes its runner fall back.
struct Watched {
    inner: Box<dyn CommandCapture>,
    state: Arc<Mutex<Fallback>>,
    /// Whether this command's notes tell of the fallback.
    tell: bool,
}

#[async_trait]
impl CommandCapture for Watched {
    fn command(&self, program: &str, script: &str) -> Command {
        self.inner.command(program, script)
    }

    async fn start_ready(&self, program: &str, script: &str) -> Option<Started> {
        self.inner.start_ready(program, script).await
    }

    fn kill(&self) -> bool {
        self.inner.kill()
    }

    fn refused_note(&self, output: &str) -> Option<String> {
        self.inner.refused_note(output)
    }

    async fn finish(
        self: Box<Self>,
        mutator: &dyn Mutator,
        ended: Ended,
    ) -> Result<Captured, CaptureError> {
        let Watched { inner, state, tell } = *self;
        match inner.finish(mutator, ended).await {
            Err(CaptureError::NotStarted(why)) => {
                fall_back(&state, why.clone());
                Err(CaptureError::NotStarted(why))
            }
            Ok(mut captured) if tell => {
                let why = lock(&state).reason.clone().unwrap_or_default();
                captured.notes.insert(
                    0,
                    format!(
                        "bash capture fell back to detect-only: {why}; from now on shiro names \
                         the files commands change but cannot undo them"
                    ),
                );
                Ok(captured)
            }
            other => other,
        }
    }
}
