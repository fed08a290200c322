//! One process at a time appends to a session file. A process that has a session open for
//! appending (made, forked or resumed) holds an advisory exclusive `flock` on its file for
//! as long as it keeps the [`Session`](super::Session); a second process that tries to
//! resume it is refused with [`InUse`], rather than both appending and the file replaying
//! into a mix of two conversations. The lock belongs to the open file, so dropping the
//! session, the end of the process and a crash all release it, and a lock is never left
//! behind. Reading a session (listing it, forking a copy of it) takes no lock a holder would
//! notice: a listing looks whether a session is in use with a shared lock that it lets go
//! at once ([`held_elsewhere`]), and a resume that comes in that instant waits it out
//! ([`try_lock_patiently`]).

use std::fs::File;
use std::time::{Duration, Instant};

use rustix::fs::FlockOperation;
use rustix::io::Errno;

/// Takes the exclusive lock on an open session file without waiting: `Ok(false)` when
/// another open file (another process's, or another [`Session`](super::Session) of this
/// one) holds it.
pub(super) fn try_lock(file: &File) -> std::io::Result<bool> {
    match rustix::fs::flock(file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(Errno::WOULDBLOCK) => Ok(false),
        Err(errno) => Err(errno.into()),
    }
}

/// Takes the exclusive lock as [`try_lock`] does, but waits out a listing that is looking
/// at the lock that instant ([`held_elsewhere`] holds a shared lock for as long as it
/// looks): `Ok(false)` only when the lock is still held after [`PATIENCE`], as a session
/// open elsewhere keeps it.
pub(super) fn try_lock_patiently(file: &File) -> std::io::Result<bool> {
    let start = Instant::now();
    loop {
        if try_lock(file)? {
            return Ok(true);
        }
        if start.elapsed() >= PATIENCE {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// How long [`try_lock_patiently`] waits for a lock: far longer than a listing looks, and
/// short enough that a refusal still comes at once to a person.
const PATIENCE: Duration = Duration::from_millis(200);

/// Whether another open file holds the exclusive lock on the session file `file`: another
/// shiro process has the session open (or this one does, through another file). It looks
/// by taking a shared lock without waiting and letting it go at once, which a holder never
/// notices; a resume that comes in that instant waits it out ([`try_lock_patiently`]).
pub(super) fn held_elsewhere(file: &File) -> std::io::Result<bool> {
    match rustix::fs::flock(file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => {
            rustix::fs::flock(file, FlockOperation::Unlock)?;
            Ok(false)
        }
        Err(Errno::WOULDBLOCK) => Ok(true),
        Err(errno) => Err(errno.into()),
    }
}

/// A session another process has open: it holds the lock on the session's file and may
/// append to it at any moment, so it is not opened for appending here too. Nothing was
/// changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InUse {
    /// The session's id.
    pub id: String,
    /// How the session was asked for, which decides what the message suggests.
    pub asked: Asked,
}

/// How a session was asked for when it was reopened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// By its id (`--resume ID`, `/resume`, a picker).
    ById,
    /// As the newest session (`--continue`, `--resume` without an id in the line
    /// interface).
    Newest,
}

impl std::fmt::Display for InUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = &self.id;
        match self.asked {
            Asked::ById => write!(
                f,
                "session {id} is open in another shiro process, which may still append to it; wait until that process ends, go on in a copy of it (`shiro --resume {id} --fork-session`), or start a new session"
            ),
            Asked::Newest => write!(
                f,
                "the newest session, {id}, is open in another shiro process, which may still append to it (--continue takes no older session in its place); wait until that process ends, go on in a copy of it (`shiro --continue --fork-session`), or start a new session"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    use shiro_providers::Message;
    use shiro_undo::StateDir;

    use super::super::{Line, Session, list, load};
    use super::*;

    /// A state directory in a temporary directory of its own, apart from any workspace.
    fn state() -> (tempfile::TempDir, StateDir) {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::of_workspace(&dir.path().join("home"), Path::new("/work/ws"));
        (dir, state)
    }

    fn user(text: &str) -> Line {
        Line::Message {
            message: Message::user(text),
            time: None,
        }
    }

    /// A new session with the prompts `prompts`, its file last written `age` seconds after
    /// a fixed moment in the past.
    fn session_with(state: &StateDir, prompts: &[&str], age: u64) -> Session {
        let mut session = Session::create(state).unwrap();
        for prompt in prompts {
            session.append(&user(prompt)).unwrap();
        }
        let base = SystemTime::now() - Duration::from_secs(100);
        File::options()
            .append(true)
            .open(session.path())
            .unwrap()
            .set_modified(base + Duration::from_secs(age))
            .unwrap();
        session
    }

    /// What reopening `id` (or the newest session) was refused for, with the id replaced.
    fn refusal(state: &StateDir, id: Option<&str>, held: &str) -> (InUse, String) {
        let err = Session::reopen(state, id).unwrap_err();
        let in_use = err
            .downcast_ref::<InUse>()
            .unwrap_or_else(|| panic!("not refused as in use: {err:#}"))
            .clone();
        (in_use, format!("{err:#}").replace(held, "[ID]"))
    }

    /// Two opens of one session for appending: while the first (made here, or resumed) has
    /// it, the second is refused and the file is left as it was; once the first is dropped,
    /// as at the end of its process, the session opens again.
    #[test]
    fn a_session_open_for_appending_is_refused_to_a_second_open_until_the_first_is_dropped() {
        let (_dir, root) = state();
        let first = session_with(&root, &["one"], 1);
        let id = first.id().to_owned();
        let before = std::fs::read(first.path()).unwrap();

        let (in_use, text) = refusal(&root, Some(&id), &id);
        assert_eq!(in_use.asked, Asked::ById);
        insta::assert_snapshot!(text, @"session [ID] is open in another shiro process, which may still append to it; wait until that process ends, go on in a copy of it (`shiro --resume [ID] --fork-session`), or start a new session");
        assert_eq!(std::fs::read(first.path()).unwrap(), before);

        drop(first);
        let mut resumed = Session::reopen(&root, Some(&id)).unwrap().session;
        // A resumed session holds the lock as a made one does.
        refusal(&root, Some(&id), &id);
        resumed.append(&user("two")).unwrap();
        drop(resumed);
        let again = Session::reopen(&root, Some(&id)).unwrap();
        assert_eq!(
            again.history.transcript(),
            [Message::user("one"), Message::user("two")]
        );
    }

    /// A listing marks a session whose lock another open file holds (as another shiro
    /// process's would) as in use, and stops marking it once that file is closed.
    #[test]
    fn a_listing_marks_a_session_another_open_file_holds_as_in_use() {
        let (_dir, root) = state();
        let held = session_with(&root, &["held"], 2);
        let free = session_with(&root, &["free"], 1);
        let free_id = free.id().to_owned();
        drop(free);
        let in_use = |root: &StateDir| -> Vec<(String, bool)> {
            (list(root).unwrap().into_iter())
                .map(|summary| (summary.first_prompt, summary.in_use))
                .collect()
        };
        assert_eq!(
            in_use(&root),
            [("held".to_owned(), true), ("free".to_owned(), false)]
        );
        // Looking takes no lock a holder would notice: the free session still opens, and the
        // held one is still refused.
        drop(Session::reopen(&root, Some(&free_id)).unwrap());
        refusal(&root, Some(held.id()), held.id());
        drop(held);
        assert_eq!(
            in_use(&root),
            [("held".to_owned(), false), ("free".to_owned(), false)]
        );
    }

    /// `--continue` whose newest session is open elsewhere is refused, and does not go on
    /// with an older one in its place. The session is still listed, and it can be read and
    /// forked (`--fork-session`), which never appends to it.
    #[test]
    fn continue_refuses_the_newest_session_while_another_open_has_it() {
        let (_dir, root) = state();
        let older = session_with(&root, &["older"], 1);
        let older_id = older.id().to_owned();
        drop(older);
        let newest = session_with(&root, &["newest"], 2);
        let id = newest.id().to_owned();

        let (in_use, text) = refusal(&root, None, &id);
        assert_eq!(in_use.asked, Asked::Newest);
        insta::assert_snapshot!(text, @"the newest session, [ID], is open in another shiro process, which may still append to it (--continue takes no older session in its place); wait until that process ends, go on in a copy of it (`shiro --continue --fork-session`), or start a new session");

        let listed: Vec<String> = (list(&root).unwrap().into_iter())
            .map(|summary| summary.id)
            .collect();
        assert_eq!(listed, [id.clone(), older_id.clone()]);
        let loaded = load(&root, None).unwrap();
        assert_eq!(loaded.id, id);
        assert_eq!(loaded.history.transcript(), [Message::user("newest")]);
        let fork = Session::fork(&root, &loaded.id, 2, &loaded.history).unwrap();
        assert_ne!(fork.id(), id);

        // The older session was never locked.
        assert_eq!(
            Session::reopen(&root, Some(&older_id))
                .unwrap()
                .session
                .id(),
            older_id
        );
        drop(newest);
        assert_eq!(Session::reopen(&root, Some(&id)).unwrap().session.id(), id);
    }
}
