//! The harness's guard against timing a case in the shadow of the case before it.
//!
//! On ext4 without a journal (the file system of the machine the page is made on: its
//! `fdatasync` runs `ext4_fsync_nojournal`), allocating an inode passes over every inode
//! freed in the last minute (six minutes while the inode table is not yet written back),
//! reading each one's deletion time. After a case removes 20,000 files, creating one file
//! takes 100 µs to 1 ms instead of 10–20 µs, from about a second after the removal until a
//! minute after it reached the disk. Every case that creates files (the overlay's layer,
//! the store's packs, the copy-up of a changed file) would pay for the removals of the case
//! before it, and the same code would read faster or slower with the order of the cases.
//!
//! So before each case the harness flushes the disk, then times creating files in a
//! directory of its own, and waits while that is slow. A case still pays for what it removes
//! itself, as the same command would on that file system.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::report::duration;

/// Files created (and removed) per probe; the probe's time is the median creation.
const PROBE_FILES: usize = 32;
/// After a flush, freed inodes start to be passed over about a second later.
const ONSET: Duration = Duration::from_millis(1_500);
/// Between probes while waiting.
const PATIENCE: Duration = Duration::from_secs(5);
/// Freed inodes whose deletion reached the disk are passed over for a minute.
const MAX_WAIT: Duration = Duration::from_secs(90);

/// Waits, before each case, until creating a file costs what it usually does.
pub(crate) struct Quiet {
    dir: PathBuf,
    /// The fastest probe of this run: what creating a file costs here, unshadowed.
    usual: Option<Duration>,
    /// Each case it waited before: its label, how long, and whether it gave up.
    waits: Vec<(String, Duration, bool)>,
    cases: usize,
}

impl Quiet {
    pub(crate) fn new(work: &Path) -> Result<Self> {
        let dir = work.join("quiet-probe");
        fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        Ok(Self {
            dir,
            usual: None,
            waits: Vec::new(),
            cases: 0,
        })
    }

    /// Flushes the disk, then waits while creating a file is slow (at most [`MAX_WAIT`]).
    pub(crate) fn settle(&mut self, label: &str) -> Result<()> {
        self.cases += 1;
        crate::settle()?;
        std::thread::sleep(ONSET);
        let start = Instant::now();
        loop {
            let probe = self.probe()?;
            let usual = *self
                .usual
                .insert(self.usual.map_or(probe, |u| u.min(probe)));
            if probe <= usual * 3 + Duration::from_micros(10) {
                break;
            }
            if start.elapsed() >= MAX_WAIT {
                self.waits.push((label.to_owned(), start.elapsed(), true));
                eprintln!(
                    "shiro_bench:   creating a file still takes {} (usually {}); measuring anyway",
                    duration(nanos(probe)),
                    duration(nanos(usual))
                );
                return Ok(());
            }
            std::thread::sleep(PATIENCE);
            crate::settle()?;
        }
        let waited = start.elapsed();
        if waited >= PATIENCE {
            self.waits.push((label.to_owned(), waited, false));
        }
        Ok(())
    }

    /// The median time of creating one empty file in the probe directory.
    fn probe(&self) -> Result<Duration> {
        let mut times = Vec::with_capacity(PROBE_FILES);
        for i in 0..PROBE_FILES {
            let path = self.dir.join(format!("p{i}"));
            let start = Instant::now();
            let file =
                fs::File::create(&path).with_context(|| format!("create {}", path.display()))?;
            times.push(start.elapsed());
            drop(file);
            fs::remove_file(&path).with_context(|| format!("remove {}", path.display()))?;
        }
        times.sort_unstable();
        Ok(times[PROBE_FILES / 2])
    }

    /// What the page says of the guard: the usual cost and every wait.
    pub(crate) fn report(&self) -> String {
        let Some(usual) = self.usual else {
            return String::new();
        };
        let total: Duration = self.waits.iter().map(|(_, d, _)| *d).sum();
        let mut text = format!(
            "Before each of the {} cases the harness flushed the disk and timed creating an empty file in a directory of its own, beside the workspaces: {} at best in this run. On this machine's file system (ext4 without a journal) creating a file passes over the inodes freed in the last minute near it, so for a minute after a case removes thousands of files it can cost a hundred times as much. The harness waited while it cost more than three times its best, so that a case is not timed in the shadow of the removals of the case before it (a case still pays for its own): ",
            self.cases,
            duration(nanos(usual)),
        );
        if self.waits.is_empty() {
            text.push_str("it never had to.\n");
            return text;
        }
        let list: Vec<String> = (self.waits.iter())
            .map(|(label, waited, gave_up)| {
                let gave_up = if *gave_up {
                    ", then measured anyway"
                } else {
                    ""
                };
                format!("{} before {label}{gave_up}", duration(nanos(*waited)))
            })
            .collect();
        text.push_str(&format!(
            "{} s in all, before {} cases ({}).\n",
            total.as_secs(),
            self.waits.len(),
            list.join("; ")
        ));
        text
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
