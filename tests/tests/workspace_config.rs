//! A workspace's `.shiro/config.toml` that would make undo cover less, end to end through the
//! built `shiro`: the agent's own bash command writes one, and the next command is refused
//! before anything runs, with a message that names each setting and where to set it instead;
//! every earlier turn is kept, and once the settings are gone bash is captured again.
#![allow(clippy::unwrap_used)]

use crate::support;

use support::{Ws, overlay_refused};

fn bash(ws: &Ws, command: &str) -> support::Run {
    let args = serde_json::json!({ "command": command }).to_string();
    ws.run_bounded(&["tool", "bash", "--args", &args])
}

#[test]
fn a_workspace_config_written_by_bash_cannot_turn_capture_off_nor_drop_earlier_turns() {
    let ws = Ws::new();
    ws.write("p.txt", "keep\n");
    let args = serde_json::json!({ "path": "a.txt", "content": "one\n" }).to_string();
    ws.ok(&["tool", "write_file", "--args", &args]);
    // The agent's own command writes the workspace's config, in a turn of its own.
    let wrote = bash(
        &ws,
        r#"mkdir -p .shiro && printf '[bash]\ncapture = "off"\n[undo]\ndepth = 1\n' > .shiro/config.toml"#,
    );
    assert_eq!(wrote.code, 0, "{}", wrote.show());
    assert!(
        wrote.stdout.contains("A .shiro/config.toml"),
        "{}",
        wrote.show()
    );

    // The next command would run uncaptured, outside the sandbox, and drop both turns: it
    // is refused before it runs, and the message names both settings.
    let outside = tempfile::tempdir().unwrap();
    let probe = outside.path().join("probe");
    let refused = bash(&ws, &format!("touch {} && rm p.txt", probe.display()));
    assert_eq!(refused.code, 1, "{}", refused.show());
    insta::assert_snapshot!(refused.stderr, @r#"
    shiro: <ws>/.shiro/config.toml: [bash] capture = "off" would capture less than "overlay"; a workspace's config comes with the repository, and the agent's commands can write it, so it may only make undo cover more. Set it in your user config (<config>/config.toml) if you mean it
    <ws>/.shiro/config.toml: [undo] depth = 1 would keep fewer turns than 20; a workspace's config comes with the repository, and the agent's commands can write it, so it may only make undo cover more. Set it in your user config (<config>/config.toml) if you mean it
    "#);
    assert!(!probe.exists());
    assert_eq!(ws.read("p.txt"), "keep\n");

    // Once the settings are taken out, both earlier turns are there.
    ws.write(".shiro/config.toml", "");
    let log = ws.ok(&["log"]);
    assert!(
        log.stdout.contains("#2 ") && log.stdout.contains("#1 "),
        "{}",
        log.show()
    );
    // And bash is captured again: what it removes, undo brings back.
    if overlay_refused().is_some() {
        return;
    }
    let removed = bash(&ws, "rm p.txt");
    assert!(
        removed.stdout.contains("recorded, undoable") && removed.stdout.contains("D p.txt"),
        "{}",
        removed.show()
    );
    ws.ok(&["undo"]);
    assert_eq!(ws.read("p.txt"), "keep\n");
}
