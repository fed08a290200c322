//! A runner that starts each command's helper ahead (`Overlay::start_ahead`, as the agent
//! runs commands): the next command runs in the helper that waited, with `/dev/null` as its
//! standard input; a helper that died while it waited is passed over; the one that waits
//! goes with its runner.
#![allow(clippy::unwrap_used)]

use crate::support;

use std::sync::Arc;

use shiro_tools::capture::{BashRunner, HELPER_OVERLAY, HELPER_READY, Overlay};
use shiro_tools::tools::Bash;
use shiro_tools::{FsMutator, Tool};
use support::{Ws, overlay_refused, shiro_bin};

/// Writes, into `helper.txt`, the id of the process that started the command's init (the
/// overlay helper; `/proc` is the host's without a sandbox, so ids are the test's) and the
/// first argument it was started with; into `stdin.txt`, the command's standard input.
const WHO_RAN: &str = "read -r _ _ _ init _ < /proc/self/stat; \
                       read -r _ _ _ helper _ < /proc/$init/stat; \
                       echo $helper $(tr '\\0' '\\n' < /proc/$helper/cmdline | sed -n 2p) \
                       > helper.txt; readlink /proc/self/fd/0 > stdin.txt";

/// Waits until the process `pid` has ended (a zombie or gone): it was killed, and the
/// kernel finishes that on its own time.
fn wait_ended(pid: u32) {
    let start = std::time::Instant::now();
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| stat.rsplit_once(") ").map(|(_, rest)| rest.to_owned()));
        if state.is_none_or(|rest| rest.starts_with('Z')) {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "process {pid} was killed but never ended"
        );
        std::thread::yield_now();
    }
}

fn read(ws: &Ws, name: &str) -> String {
    std::fs::read_to_string(ws.path().join(name))
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn a_helper_started_ahead_runs_the_next_command_and_goes_with_its_runner() {
    if let Some(why) = overlay_refused() {
        eprintln!("skipped: overlays are refused here ({why})");
        return;
    }
    let ws = Ws::new();
    // The layers are made in the state directory, which opening a store would make.
    std::fs::create_dir_all(ws.state().dir()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let overlay = Arc::new(Overlay::new(shiro_bin(), ws.state().layers_dir()).start_ahead());
        let bash = Bash::new(Arc::clone(&overlay) as Arc<dyn BashRunner>);
        let workspace = FsMutator::new(ws.path()).unwrap();
        let call = |script: &str| {
            let args = serde_json::json!({ "command": script });
            let (bash, workspace) = (&bash, &workspace);
            async move { bash.call(workspace, args).await.unwrap() }
        };

        // The first command starts its own helper; as it finishes, the next one's starts.
        assert_eq!(overlay.waiting_helper().await, None);
        let first = call(WHO_RAN).await;
        assert!(first.text.contains("[exit code 0]"), "{}", first.text);
        let started = read(&ws, "helper.txt");
        assert!(started.ends_with(HELPER_OVERLAY), "{started}");
        let waiting = overlay.waiting_helper().await.expect("a helper waits");

        // The next command runs in it, reading nothing: its input is /dev/null.
        let second = call(&format!("{WHO_RAN}; echo two > two.txt")).await;
        assert!(second.text.contains("[exit code 0]"), "{}", second.text);
        assert_eq!(read(&ws, "helper.txt"), format!("{waiting} {HELPER_READY}"));
        assert_eq!(read(&ws, "stdin.txt"), "/dev/null");
        assert_eq!(second.changes.len(), 2, "{:?}", second.changes);
        let next = overlay.waiting_helper().await.expect("another waits");
        assert_ne!(next, waiting);

        // One that died while it waited is passed over: the command starts its own, and
        // runs exactly once.
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(i32::try_from(next).unwrap()).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
        wait_ended(next);
        let third = call(&format!("{WHO_RAN}; echo x >> runs.txt")).await;
        assert!(third.text.contains("[exit code 0]"), "{}", third.text);
        let started = read(&ws, "helper.txt");
        assert!(started.ends_with(HELPER_OVERLAY), "{started}");
        assert_eq!(read(&ws, "runs.txt"), "x");
        let last = overlay.waiting_helper().await.expect("a new one waits");

        // The one that waits goes with its runner, and leaves no layer behind.
        drop(bash);
        drop(overlay);
        wait_ended(last);
        assert!(support::bash_layers(&ws.state().layers_dir()).is_empty());
    });
}
