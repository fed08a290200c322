//! SIGKILL at random points of a bash turn (while the command runs, while its layer is
//! walked, while its changes are applied) leaves the workspace as it was before the command
//! or as the command left it, with no mount and no layer behind, and the next shiro command
//! says which. 20 rounds here; `cargo xtask soak` runs 200 (`SHIRO_BASH_CRASH_ROUNDS`).
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use crate::support;

use std::time::{Duration, Instant};

use support::{Rng, Ws, env_number, overlay_refused, seed_from};

/// Writes 200 files, removes a tree, changes one file and makes a nested one.
const SCRIPT: &str = "for i in $(seq 1 200); do echo $i > f$i; done; rm -rf old; \
    echo changed > keep.txt; mkdir -p deep/a/b && echo z > deep/a/b/z; sleep 0.05";

fn seeded() -> Ws {
    let ws = Ws::new();
    for i in 0..50 {
        ws.write(&format!("old/{i}"), &format!("old {i}\n"));
    }
    ws.write("keep.txt", "keep\n");
    ws
}

fn args() -> String {
    serde_json::json!({ "command": SCRIPT }).to_string()
}

#[test]
fn sigkill_anywhere_in_a_bash_turn_leaves_before_or_after() {
    if overlay_refused().is_some() {
        return;
    }
    let rounds = env_number("SHIRO_BASH_CRASH_ROUNDS").unwrap_or(20);
    let seed = seed_from("SHIRO_BASH_CRASH_SEED");
    eprintln!("SHIRO_BASH_CRASH_SEED={seed}");
    let mut rng = Rng(seed);

    // The state the command leaves, and how long a whole bash turn takes.
    let reference = seeded();
    let before = reference.tree();
    let started = Instant::now();
    let run = reference.run_bounded(&["tool", "bash", "--args", &args()]);
    let whole = started.elapsed();
    assert_eq!(run.code, 0, "{}", run.show());
    let after = reference.tree();
    assert_ne!(before, after);

    let (mut befores, mut afters, mut finished, mut discarded) = (0, 0, 0, 0);
    for round in 0..rounds {
        let ws = seeded();
        let mut child = ws
            .command(&["tool", "bash", "--args", &args()])
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let wait = Duration::from_micros(rng.below(whole.as_micros() as u64 + 1));
        std::thread::sleep(wait);
        let _ = child.kill();
        let _ = child.wait();
        // The helpers die with shiro; give the kernel a moment to take their namespace down.
        wait_for_no_layer_users(&ws);
        let log = ws.run_bounded(&["log"]);
        assert_eq!(log.code, 0, "round {round}: {}", log.show());
        finished += usize::from(
            log.stderr
                .contains("finished applying the changes of a bash command"),
        );
        discarded += usize::from(
            log.stderr
                .contains("discarded the changes of a bash command"),
        );
        let now = ws.tree();
        let context = format!(
            "round {round} (seed {seed}, killed after {wait:?}):\n{}",
            log.show()
        );
        if now == before {
            befores += 1;
        } else if now == after {
            afters += 1;
            let json = ws.run_bounded(&["log", "--json"]);
            assert!(
                json.stdout.contains("\"ran_bash\": true"),
                "{context}\n{}",
                json.show()
            );
            // Finished by recovery, or by shiro before the kill: either way it is a turn.
            let undo = ws.run_bounded(&["undo"]);
            assert_eq!(undo.code, 0, "{context}\n{}", undo.show());
            assert_eq!(ws.tree(), before, "{context}");
        } else {
            panic!(
                "{context}\nneither before nor after: {:#?}",
                diff(&before, &after, &now)
            );
        }
        let layers = support::bash_layers(&ws.state().layers_dir()).len();
        assert_eq!(layers, 0, "{context}");
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        let root = ws.path().canonicalize().unwrap();
        assert!(!mounts.contains(root.to_str().unwrap()), "{context}");
    }
    eprintln!(
        "{rounds} rounds: {befores} left before the command ({discarded} with a layer \
         discarded by recovery), {afters} after it ({finished} with a commit finished by recovery)"
    );
}

/// Waits (up to 10 s) until no process holds a layer of the workspace: the helpers of a
/// killed shiro are killed by the kernel, but not in the same instant.
fn wait_for_no_layer_users(ws: &Ws) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let root = ws.path().canonicalize().unwrap();
    let needle = root.to_str().unwrap().to_owned();
    while Instant::now() < deadline {
        let busy = std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|cmd| String::from_utf8_lossy(&cmd).contains(&needle))
        });
        if !busy {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("helpers of a killed shiro still run after 10 s");
}

fn diff(
    before: &std::collections::BTreeMap<String, String>,
    after: &std::collections::BTreeMap<String, String>,
    now: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    let mut keys: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .chain(now.keys())
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| !(now.get(*k) == before.get(*k) || now.get(*k) == after.get(*k)))
        .map(|k| {
            format!(
                "{k}: before {:?} after {:?} now {:?}",
                before.get(k),
                after.get(k),
                now.get(k)
            )
        })
        .collect()
}
