//! Issue 13, item 6: a directory swapped with a link to the outside (`renameat2` with
//! `RENAME_EXCHANGE`, one atomic step) in a loop, while the file tools write into it and the
//! read tools list and search it. Before
//! the jail resolved every path beneath a handle on the root, about one round in 2,400 landed
//! a file outside. `SHIRO_RACE_ROUNDS` sets the rounds (`cargo xtask soak` runs many more).
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::symlink;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustix::fs::{CWD, RenameFlags};
use shiro_tools::{FsMutator, Tool, tools};

#[test]
fn a_directory_swapped_with_an_outside_link_never_lets_a_write_out() {
    let rounds: u64 = std::env::var("SHIRO_RACE_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5_000);
    let top = tempfile::tempdir().unwrap();
    let ws = top.path().join("ws");
    let outside = top.path().join("outside");
    std::fs::create_dir_all(ws.join("d/sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("victim"), "orig\n").unwrap();
    std::fs::write(outside.join("OUTSIDE_ONLY.txt"), "outside-secret\n").unwrap();
    std::fs::write(ws.join("d/inside.txt"), "inside\n").unwrap();
    symlink(&outside, ws.join("swap")).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (stop, swaps, ws) = (Arc::clone(&stop), Arc::clone(&swaps), ws.clone());
        std::thread::spawn(move || {
            let (d, swap) = (ws.join("d"), ws.join("swap"));
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(CWD, &d, CWD, &swap, RenameFlags::EXCHANGE).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mutator = FsMutator::new(&ws).unwrap().inline();
    let (write, patch) = (tools::write_file(), tools::apply_patch());
    let (glob, list, grep) = (tools::glob(), tools::list_dir(), tools::grep());
    let mut written = 0u64;
    let mut leaks = Vec::new();
    runtime.block_on(async {
        for round in 0..rounds {
            let name = ["victim", "new.txt", "sub/deep.txt"][(round % 3) as usize];
            let args = serde_json::json!({"path": format!("d/{name}"), "content": "PWNED\n"});
            written += u64::from(write.call(&mutator, args).await.is_ok());
            // The read tools, now and then: nothing they report may come from outside.
            if round % 50 == 0 {
                let reads = [
                    glob.call(&mutator, serde_json::json!({"pattern": "**/*.txt"}))
                        .await,
                    list.call(&mutator, serde_json::json!({"path": "d"})).await,
                    grep.call(&mutator, serde_json::json!({"pattern": "secret"}))
                        .await,
                ];
                for out in reads.into_iter().flatten() {
                    if out.text.contains("OUTSIDE_ONLY") || out.text.contains("outside-secret") {
                        leaks.push(out.text);
                    }
                }
            }
            if round % 7 == 0 {
                let body = format!("*** Add File: d/p{round}.txt\n+PWNED\n");
                let args =
                    serde_json::json!({"patch": format!("*** Begin Patch\n{body}*** End Patch\n")});
                let _ = patch.call(&mutator, args).await;
            }
        }
    });
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();

    let mut names: Vec<String> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["OUTSIDE_ONLY.txt", "victim"],
        "something was created outside"
    );
    assert!(
        leaks.is_empty(),
        "a read tool reported outside entries: {leaks:?}"
    );
    assert_eq!(std::fs::read(outside.join("victim")).unwrap(), b"orig\n");
    // The race was real: the swapper ran throughout and some writes still got through.
    assert!(swaps.load(Ordering::Relaxed) > 0, "the swapper never ran");
    assert!(written > 0, "no write ever landed inside");
    eprintln!(
        "{rounds} rounds, {} swaps, {written} writes landed inside",
        swaps.load(Ordering::Relaxed)
    );
}
