//! Section 2's process-start table: what starting a program costs, `shiro` against `true` and
//! the smallest Rust program, with the minor page faults of each start, and the trade-offs of
//! making `shiro` start faster (issue 33, item 4).

use std::fmt::Write as _;
use std::path::Path;

use crate::cases::Case;
use crate::report::{Cell, duration, ratio};
use crate::{Runner, series_cell};

/// The time the last step of the release build (compiling `shiro`'s `main.rs`, where every
/// generic function the program uses is instantiated, and linking) took when measured for
/// this page: `touch crates/shiro-cli/src/main.rs && cargo build --release -p shiro-cli`,
/// on this machine, 2026-12-05.
const FINAL_STEP_SECS: u64 = 72;

/// The starts measured, and what the undo budget's text quotes: `true`, and `shiro --version`.
pub struct Starts {
    pub floor: Cell,
    pub shiro: Cell,
}

/// Times each start `reps` times and writes the table and the trade-offs into `doc`. `ws` is
/// the undo section's workspace, whose store has turns of up to `max_files` files, for
/// `shiro log`.
pub fn report(
    doc: &mut String,
    runner: &mut Runner,
    reps: usize,
    shiro: &Path,
    ws: &Path,
    max_files: usize,
) -> Starts {
    let small = runner.exe.with_file_name("start_floor");
    let shiro_dir = Some(ws.to_owned());
    let rows: [(&str, &Path, &[&str], Option<std::path::PathBuf>); 4] = [
        ("`true`", Path::new("true"), &[], None),
        (
            "the smallest Rust program (`println!` in `main`)",
            &small,
            &[],
            None,
        ),
        ("`shiro --version`", shiro, &["--version"], None),
        (
            "`shiro log` in this section's workspace",
            shiro,
            &["log"],
            shiro_dir,
        ),
    ];
    let mut measured = Vec::new();
    for (label, program, args, dir) in rows {
        let case = Case::Spawn {
            program: program.to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            reps,
            dir,
        };
        let result = runner.run("undo", &format!("spawn {label}"), &case);
        let faults =
            (result.as_ref().ok()).and_then(|r| r.values.get("minor_faults_per_run").copied());
        measured.push((label, series_cell(&result, "time"), faults));
    }
    let size = std::fs::metadata(shiro).map(|m| m.len()).unwrap_or(0);
    let small_size = std::fs::metadata(&small).map(|m| m.len()).unwrap_or(0);
    let _ = write!(
        doc,
        "\n### Process start\n\nEvery whole-process row pays for starting its program. Each \
         program below started {reps} times from the harness (which spawns a bigger process \
         than a shell does, so even `true` costs more here than from `sh`), with the minor page \
         faults of each start (`getrusage(RUSAGE_CHILDREN)`). `shiro` is {} on disk, the \
         smallest Rust program {}.\n\n\
         | program | start | minor page faults per start | × `true` |\n|---|---|---|---|\n",
        crate::report::bytes(size),
        crate::report::bytes(small_size),
    );
    let floor = measured
        .first()
        .and_then(|(_, cell, _)| cell.as_ref().ok().map(|s| s.median));
    for (label, cell, faults) in &measured {
        let faults = faults.map_or_else(|| "–".to_owned(), |f| f.to_string());
        match cell {
            Ok(stats) => {
                let times = floor.map_or_else(|| "–".to_owned(), |f| ratio(stats.median, f.max(1)));
                let _ = writeln!(
                    doc,
                    "| {label} | {} ({}–{}) | {faults} | ×{times} |",
                    duration(stats.median),
                    duration(stats.min),
                    duration(stats.max),
                );
            }
            Err(why) => {
                let _ = writeln!(
                    doc,
                    "| {label} | not measured ({}) | – | – |",
                    crate::report::one_line(why)
                );
            }
        }
    }
    let _ = write!(
        doc,
        "\nWhere `shiro`'s extra start goes, and what was tried (measured with `perf` and \
         `strace`):\n\n\
         - **Relocated data, not code.** `shiro` is a position-independent executable (PIE). \
         At start the dynamic loader applies about 41,000 relative relocations, which write \
         into about 724 KiB of `.data.rel.ro` and 152 KiB of the GOT (vtables, and tables of \
         pointers such as static strings). Every 4 KiB page written is a copy-on-write page \
         fault: that is most of the difference in page faults above, and most of the time.\n\
         - **What the relocations fill, and why stable Rust cannot shrink them** (counted in \
         the build of 2026-12-07, about 56,900 relative relocations): 18,800 fill the GOT with the addresses of \
         functions called through it (Rust on x86-64 Linux compiles a call into another crate \
         as an indirect call through the GOT, with relocations the linker may not turn into \
         direct calls; the option that allows it, `-Z relax-elf-relocations`, is nightly-only), \
         and 38,600 fill `.data.rel.ro`: 21,000 of those point at string constants (the file \
         names of panic locations, the pieces of format strings, tables of names), most of the \
         rest at functions (vtables). `perf` over 300 starts of `shiro --version` (1.35 ms of \
         processor time each, all of it running, none waiting) counted about 650 µs in page \
         faults, 165 µs in the loader's relocation loop and 27 µs in its processor probe. A \
         `shiro undo` of one file, timed from within (an untimed build with timestamps at \
         each step): 1.2 ms from the spawn to `main` (0.67 ms for the smallest Rust program), \
         175 µs parsing the command line, 120 µs for the async runtime and the signal \
         thread, 200 µs locating the workspace, its state and configuration, 200 µs opening \
         the store, 0.85–1.35 ms for the restore (its four flushes about 0.6 ms of it), and \
         450 µs from the end of `main` to the exit seen by the parent (140 µs for the \
         smallest program). A program linked statically (`+crt-static`, still \
         position-independent) started in 0.52 ms against 0.76 ms dynamically; not taken: \
         its target flag reaches the build's procedural macros, which cannot be linked so, \
         unless every build names its target, and a static glibc resolves host names only \
         through the shared libraries of the exact version it was linked with.\n\
         - **Packed relocations (`-z pack-relative-relocs`, RELR): tried, not kept.** The \
         relocation table shrank from 1.35 MB to 14 KB, but `shiro --version` took 1.54 ms \
         both ways: the loader still writes the same pages. Build cost: none (a linker flag).\n\
         - **A non-PIE binary: not taken.** Its data would need no relocation, so those pages \
         would only be read, and faulted in only when touched. But it gives up ASLR (address \
         space randomisation) for the program that runs model-chosen commands and parses files \
         it did not write, and the user loses that hardening: the issue keeps ASLR unless a \
         user loses nothing. Build cost: none (a codegen flag, though every crate rebuilds \
         once).\n\
         - **A thin binary for `shiro undo` and `shiro tool`** (the store, the tools and the \
         command line, without the agent, the terminal UI, the providers and MCP): \
         prototyped, not kept. `shiro`'s own `main` with the agent, `shiro mcp` and the demo \
         left out linked to 15 MB with 23,000 relative relocations, against 34 MB and 57,000, \
         and `--version` took 2.11 ms against 2.46 ms (`perf stat`, 300 starts each), with \
         the same CPU time (1.60 against 1.57 ms): the headless commands still link the store, \
         the tools with their searches and the bash capture, tokio and clap, and every \
         dynamically linked program pays for mapping its libraries and for the loader's probe \
         of the processor (`cpuid`, which a virtual machine traps). A third of a millisecond \
         of a 5 ms `shiro undo` does not bring it under ×1.5 of `cp`, and the `shiro` the user \
         types would have to start the full binary for the agent (a second start) unless users \
         typed another name, and it would add a second final build step like `shiro`'s, which \
         takes {FINAL_STEP_SECS} s of the release build (compiling `main.rs`, where every \
         generic function is instantiated, and linking), against the 4-minute budget of the \
         release build.\n\
         - **Opening the store once.** `shiro undo` opens the store (taking its lock, \
         reading the log, completing what a crash left), then the undo operates. It used to \
         let the lock go in between, so the undo took it again and read and hashed the log \
         again, since another process might have changed it. Now it keeps the lock it opened \
         with for the operation, which then reads nothing more (see `formats.md`, \
         `log.jsonl`): the `shiro log` row above opens this section's store, whose log by \
         then lists every turn above, up to {max_files} files each, and reads it once.\n\
         - **Fewer threads and files at start.** `shiro` no longer asks how many processors \
         there are (which reads five cgroup files) before a restore of fewer than four \
         copies, a pack write under 1 MiB, or the hash of a file under 32 MiB. The thread \
         that catches SIGINT and SIGTERM waits on the pipe their handlers write to, with no \
         runtime of its own: its own runtime cost every command a second runtime's setup, \
         and a wait for the thread to start.\n",
    );
    let cell = |n: usize| {
        measured
            .get(n)
            .map_or_else(|| Err("not run".to_owned()), |m| m.1.clone())
    };
    Starts {
        floor: cell(0),
        shiro: cell(2),
    }
}
