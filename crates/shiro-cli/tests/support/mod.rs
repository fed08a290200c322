//! Helpers shared by the integration tests.
// Each test binary includes this module and uses only part of it.
#![allow(dead_code)]

// The mock model servers belong to the providers' tests; the agent's tests talk to them too.
#[path = "../../../shiro-providers/tests/support/mock_anthropic.rs"]
pub mod mock_anthropic;
#[path = "../../../shiro-providers/tests/support/mock_openai.rs"]
pub mod mock_openai;
pub mod pty;

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
