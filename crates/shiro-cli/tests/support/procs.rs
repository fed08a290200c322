//! The processes of the machine, found by their command line (shared with the
//! cross-crate tests, which include this file by path).

/// Every process whose command line holds `marker`, as `PID: COMMAND LINE`.
pub fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if line.contains(marker) {
            found.push(format!("{}: {line}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

/// The processes that still hold `marker` once the kernel has had time to end them: polled
/// for up to ten seconds (a killed namespace's processes go in a moment, but not at once).
pub fn left_after_kill(marker: &str) -> Vec<String> {
    for _ in 0..200 {
        if processes_with(marker).is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    processes_with(marker)
}
