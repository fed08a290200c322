//! What the server tells clients each of its tools does: MCP's tool annotations, which
//! clients read to decide what to ask the user before, and what they may run side by side.
//! Each tool's are set here by name, on purpose, rather than derived from what shiro-tools
//! says of it: `is_mutating` is about files, and `bash_kill`, which changes none, stops a
//! process. The reasons are in `docs/mcp.md`.

use rmcp::model::ToolAnnotations;

/// The annotations of the tool called `name`. A tool not named here (one shiro-tools gains
/// later) gets the most cautious ones until someone decides: it may change anything, destroy
/// what it changes, and reach outside the workspace.
pub(super) fn annotations(name: &str) -> ToolAnnotations {
    // Both kinds reach nothing outside the workspace, the server and its undo log.
    let reads = ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .open_world(false);
    let changes = ToolAnnotations::new().read_only(false).open_world(false);
    match name {
        "read_file" | "list_dir" | "glob" | "grep" => reads.idempotent(true),
        // It changes nothing but where its next read starts: a second call returns what the
        // command printed since the first.
        "bash_output" => reads.idempotent(false),
        // Every change of these is a turn that undo reverts exactly. Writing the same content
        // again changes nothing; editing or patching again may.
        "write_file" => changes.destructive(false).idempotent(true),
        "edit_file" | "multi_edit" | "apply_patch" => changes.destructive(false).idempotent(false),
        // A command can do anything, outside the workspace too, and what it does there (or
        // without capture) cannot be undone.
        "bash" => ToolAnnotations::new()
            .read_only(false)
            .destructive(true)
            .idempotent(false)
            .open_world(true),
        // It stops a running process, which nothing brings back; stopping one that has
        // ended does nothing.
        "bash_kill" => changes.destructive(true).idempotent(true),
        // Each opens a group (closing the open one as a turn).
        "begin_turn" => changes.destructive(false).idempotent(false),
        // Each closes the open group as a turn: `log` too, so that it lists it. A second
        // call finds none open.
        "end_turn" | "log" => changes.destructive(false).idempotent(true),
        // Each restores another turn; what one overwrote, the other brings back (even after
        // `force`).
        "undo" | "redo" => changes.destructive(false).idempotent(false),
        _ => ToolAnnotations::new()
            .read_only(false)
            .destructive(true)
            .idempotent(false)
            .open_world(true),
    }
}
