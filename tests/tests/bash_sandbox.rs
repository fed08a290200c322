//! The bash sandbox end to end, through the built `shiro`: a command in the default
//! `workspace-write` sandbox writes in the workspace, the temp directories and the configured
//! writable paths, and nowhere else, however it tries; `.git/config` and `.git/hooks` stay as
//! they were; `network = false` keeps it off the host's network; `read-only` keeps the
//! workspace as it was too.
//!
//! The sandbox needs the overlay's namespaces and Landlock; where the machine refuses either,
//! the tests print why and skip. The paths that must stay untouched are made outside the
//! temp directories, which the sandbox leaves writable.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use crate::support;

use std::path::{Path, PathBuf};

use support::{Ws, overlay_refused};

/// A directory for the test's files that no sandbox leaves writable: not under a temp
/// directory (where `tempfile` would put it).
fn outside() -> Option<PathBuf> {
    let temp = ["/tmp", "/var/tmp", "/dev/shm"];
    let candidates = [
        Some(PathBuf::from(env!("CARGO_TARGET_TMPDIR"))),
        std::env::var_os("HOME").map(PathBuf::from),
    ];
    let found = candidates.into_iter().flatten().find(|dir| {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        dir.is_absolute() && !temp.iter().any(|t| dir.starts_with(t))
    });
    if found.is_none() {
        eprintln!("skipped: no directory outside the temp directories to test writes against");
    }
    found
}

/// A workspace (and its user's home and config) outside the temp directories, with a git
/// repository that has a commit, and a sibling directory beside it; `None` (the test skips)
/// where the sandbox cannot run.
fn setting() -> Option<(Ws, tempfile::TempDir)> {
    setting_in(&outside()?)
}

/// The same in `parent`.
fn setting_in(parent: &Path) -> Option<(Ws, tempfile::TempDir)> {
    if overlay_refused().is_some() || support::git_missing() {
        return None;
    }
    let ws = Ws::new_in(parent);
    ws.write("a.txt", "a\n");
    support::git(ws.path(), &["init", "-q"]);
    support::git(ws.path(), &["add", "."]);
    support::git(ws.path(), &["commit", "-qm", "first"]);
    let sibling = tempfile::tempdir_in(parent).unwrap();
    std::fs::write(sibling.path().join("theirs.txt"), "theirs\n").unwrap();
    Some((ws, sibling))
}

fn bash(ws: &Ws, script: &str) -> support::Run {
    let args = serde_json::json!({ "command": script }).to_string();
    ws.run_bounded(&["tool", "bash", "--args", &args])
}

fn config(ws: &Ws, text: &str) {
    std::fs::write(ws.config.path().join("config.toml"), text).unwrap();
}

fn file(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[test]
fn writes_outside_the_workspace_fail_and_the_disk_is_untouched() {
    let Some((ws, sibling)) = setting() else {
        return;
    };
    let home = ws.config.path();
    let allowed = tempfile::tempdir_in(ws.config.path()).unwrap();
    config(
        &ws,
        &format!(
            "[bash]\nwritable = [{:?}]\n",
            allowed.path().display().to_string()
        ),
    );
    let git_config = ws.read(".git/config");
    let probe = format!("shiro-sandbox-probe-{}", std::process::id());
    let script = format!(
        "echo x >> {home}/.bashrc; echo x > /etc/{probe}; echo x > {sibling}/theirs.txt; \
         echo x > .git/hooks/pre-commit; echo x >> .git/config; \
         echo ok > /tmp/{probe} && echo ok > {allowed}/made.txt && echo ok > inside.txt \
         && git -c user.email=a@b -c user.name=n add inside.txt \
         && git -c user.email=a@b -c user.name=n commit -qm second && echo committed",
        home = home.display(),
        sibling = sibling.path().display(),
        allowed = allowed.path().display(),
    );
    let run = bash(&ws, &script);
    assert_eq!(run.code, 0, "{}", run.show());
    assert!(run.stdout.contains("committed"), "{}", run.show());
    // Refused, and untouched.
    assert_eq!(file(&home.join(".bashrc")), None, "{}", run.show());
    assert_eq!(file(&PathBuf::from("/etc").join(&probe)), None);
    assert_eq!(
        file(&sibling.path().join("theirs.txt")).unwrap(),
        "theirs\n"
    );
    assert!(!ws.exists(".git/hooks/pre-commit"));
    assert_eq!(ws.read(".git/config"), git_config);
    // Allowed.
    assert_eq!(file(&PathBuf::from("/tmp").join(&probe)).unwrap(), "ok\n");
    std::fs::remove_file(PathBuf::from("/tmp").join(&probe)).unwrap();
    assert_eq!(file(&allowed.path().join("made.txt")).unwrap(), "ok\n");
    assert_eq!(ws.read("inside.txt"), "ok\n");
    // The model is told which write was refused and how to allow one.
    assert!(
        // The output names the home directory `<config>`, as every test's does.
        run.stdout
            .contains("[note: the workspace-write sandbox refused a write to <config>/.bashrc: "),
        "{}",
        run.show()
    );
    assert!(
        run.stdout
            .contains("add a directory that holds it to `writable` under [bash]"),
        "{}",
        run.show()
    );
    // What it wrote in the workspace is captured as ever.
    assert!(run.stdout.contains("A inside.txt"), "{}", run.show());
}

#[test]
fn the_easy_escapes_land_no_write_outside() {
    let Some((ws, sibling)) = setting() else {
        return;
    };
    let theirs = sibling.path().join("theirs.txt");
    // Planted beforehand: a link out of the workspace, and a hard link to a file outside.
    std::os::unix::fs::symlink(&theirs, ws.path().join("out")).unwrap();
    std::fs::hard_link(&theirs, ws.path().join("hard")).unwrap();
    let git_config = ws.read(".git/config");
    let script = format!(
        "mount -o remount,rw / ; mount -o remount,rw {ws}/.git/hooks ; umount -l {ws}/.git/hooks ; \
         umount -l /proc ; \
         for root in /proc/*/root; do echo x > $root{theirs} ; done ; \
         echo x > out ; echo x >> hard ; \
         git config core.fsmonitor 'touch {theirs}.planted' ; \
         unshare -Urm sh -c 'mount -o remount,rw / ; echo x > {theirs}' ; \
         echo done",
        ws = ws.path().display(),
        theirs = theirs.display(),
    );
    let run = bash(&ws, &script);
    assert!(run.stdout.contains("done"), "{}", run.show());
    assert_eq!(file(&theirs).unwrap(), "theirs\n", "{}", run.show());
    assert_eq!(ws.read(".git/config"), git_config);
    // The hard link was written in the workspace's layer, and committed as a file of its
    // own: the file outside keeps its bytes.
    assert_eq!(ws.read("hard"), "theirs\nx\n");
    assert!(!Path::new(&format!("{}.planted", theirs.display())).exists());
}

#[test]
fn network_off_reaches_no_server_outside_but_has_a_loopback() {
    let Some((ws, _sibling)) = setting() else {
        return;
    };
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let connect = format!(
        "if exec 3<>/dev/tcp/127.0.0.1/{port}; then echo reached; else echo unreachable; fi"
    );
    // With the network on (the default), the server outside is reached: the probe works.
    let on = bash(&ws, &connect);
    assert!(on.stdout.contains("reached"), "{}", on.show());
    config(&ws, "[bash]\nnetwork = false\n");
    let off = bash(&ws, &connect);
    assert!(off.stdout.contains("unreachable"), "{}", off.show());
    // Its own loopback is up: nothing listens there, so the connection is refused, not
    // unreachable.
    assert!(off.stdout.contains("Connection refused"), "{}", off.show());
}

#[test]
fn a_read_only_sandbox_changes_nothing_in_the_workspace() {
    let Some((outside_ws, _sibling)) = setting() else {
        return;
    };
    // Also a workspace under the temp directory, which the sandbox leaves writable: the
    // workspace stays read-only there too.
    let in_temp = Ws::new();
    in_temp.write("a.txt", "a\n");
    support::git(in_temp.path(), &["init", "-q"]);
    for ws in [outside_ws, in_temp] {
        config(&ws, "[bash]\nsandbox = \"read-only\"\n");
        let before = ws.tree();
        let probe = format!("/tmp/shiro-read-only-{}", std::process::id());
        let run = bash(
            &ws,
            &format!(
                "echo x > $PWD/a.txt; echo y > new.txt; rm -f a.txt; echo z > .git/x; \
                 echo t > {probe} && cat a.txt"
            ),
        );
        assert_eq!(run.code, 0, "{}", run.show());
        assert_eq!(ws.tree(), before, "{}", run.show());
        assert!(!ws.exists(".git/x"), "{}", run.show());
        assert!(
            run.stdout
                .contains("[note: the read-only sandbox refused a write to"),
            "{}",
            run.show()
        );
        assert_eq!(file(Path::new(&probe)).unwrap(), "t\n");
        std::fs::remove_file(&probe).unwrap();
        let log = ws.ok(&["log"]);
        assert!(log.stdout.contains("no turns"), "{}", log.show());
    }
}

#[test]
fn a_workspace_config_cannot_widen_the_sandbox() {
    let Some((ws, _sibling)) = setting() else {
        return;
    };
    config(&ws, "[bash]\nsandbox = \"workspace-write\"\n");
    for (text, says) in [
        ("[bash]\nsandbox = \"off\"\n", "may only make it stricter"),
        (
            "[bash]\nwritable = [\"/etc\"]\n",
            "read only from your user config",
        ),
    ] {
        ws.write(".shiro/config.toml", text);
        let run = bash(&ws, "echo x > /etc/shiro-never");
        assert_eq!(run.code, 1, "{}", run.show());
        assert!(run.stderr.contains(says), "{}", run.show());
    }
    assert!(!Path::new("/etc/shiro-never").exists());
}

/// Writes `tiny-1.0-py3-none-any.whl`, a wheel of one module, as pip expects it.
const MAKE_WHEEL: &str = r#"import zipfile, hashlib, base64
files = {
    'tiny/__init__.py': 'X = 42\n',
    'tiny-1.0.dist-info/METADATA': 'Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n',
    'tiny-1.0.dist-info/WHEEL': 'Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
}
def digest(text):
    raw = hashlib.sha256(text.encode()).digest()
    return base64.urlsafe_b64encode(raw).rstrip(b'=').decode()
record = ''.join(f'{name},sha256={digest(text)},{len(text)}\n' for name, text in files.items())
record += 'tiny-1.0.dist-info/RECORD,,\n'
with zipfile.ZipFile('tiny-1.0-py3-none-any.whl', 'w') as whl:
    for name, text in files.items():
        whl.writestr(name, text)
    whl.writestr('tiny-1.0.dist-info/RECORD', record)
"#;

/// cargo, git, and python's venv and pip work inside the default sandbox as they do outside
/// it: the same script, run natively in one copy of a workspace and through shiro in
/// another, prints the same. Nothing reaches the network: the crate has no dependencies and
/// the wheel is made on the spot.
#[test]
fn real_tools_work_in_the_default_sandbox_as_natively() {
    let Some((ws, _sibling)) = setting() else {
        return;
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let rustup = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|home| home.join(".rustup")));
    let python = std::process::Command::new("python3")
        .args(["-c", "import venv, ensurepip"])
        .status()
        .is_ok_and(|status| status.success());
    let mut script = String::from("set -e\n");
    if let Some(rustup) = rustup {
        script.push_str(&format!("export RUSTUP_HOME={}\n", rustup.display()));
    }
    script.push_str(
        // A workspace of its own: the test's directory may lie in another cargo workspace.
        "mkdir -p demo/src\n\
         printf '[package]\\nname = \"demo\"\\nversion = \"0.1.0\"\\nedition = \"2021\"\\n[workspace]\\n' > demo/Cargo.toml\n\
         printf 'fn main() {\\n    println!(\"Hello, world!\");\\n}\\n' > demo/src/main.rs\n\
         (cd demo && cargo build --offline -q --target-dir target && ./target/debug/demo)\n\
         git -c user.email=a@b -c user.name=n add demo/Cargo.toml demo/src\n\
         git -c user.email=a@b -c user.name=n commit -qm demo\n\
         git log --oneline | wc -l\n",
    );
    if python {
        script.push_str(
            &"python3 -m venv venv\npython3 - <<'PY'\n{MAKE_WHEEL}PY\n\
             ./venv/bin/pip install -q --no-index --disable-pip-version-check tiny-1.0-py3-none-any.whl\n\
             ./venv/bin/python -c 'import tiny; print(tiny.X)'\n"
                .replace("{MAKE_WHEEL}", MAKE_WHEEL),
        );
    } else {
        eprintln!("python3 with venv and ensurepip is missing: only cargo and git are tried");
    }
    // Natively, in a copy of the workspace.
    let native = tempfile::tempdir_in(outside().unwrap()).unwrap();
    std::process::Command::new("cp")
        .args(["-a", &format!("{}/.", ws.path().display())])
        .arg(native.path())
        .status()
        .unwrap();
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .current_dir(native.path())
        .output()
        .unwrap();
    let natively = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{natively}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let args = serde_json::json!({ "command": script, "timeout_secs": 600 }).to_string();
    let run = ws.run_bounded(&["tool", "bash", "--args", &args]);
    assert!(run.stdout.contains("[exit code 0]"), "{}", run.show());
    let sandboxed = run.stdout.split("[exit code").next().unwrap();
    assert_eq!(sandboxed, natively, "{}", run.show());
    assert!(natively.starts_with("Hello, world!\n2\n"), "{natively}");
    if python {
        assert!(natively.ends_with("42\n"), "{natively}");
    }
}

/// Without privilege (a user namespace instead of root), the sandbox holds the same: a file
/// outside that the user may write natively is refused to the command, however it tries.
/// The command tries to trace, stop and write the memory of the very `shiro` that runs it:
/// its PID namespace does not show it, Landlock scopes its signals and its ptrace to its
/// own domain, and as root it has no `CAP_SYS_PTRACE`. Every attempt fails, and `shiro`
/// runs to its end.
#[test]
fn the_command_cannot_trace_or_stop_shiro() {
    let Some((ws, _sibling)) = setting() else {
        return;
    };
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: python3 (for ptrace through ctypes) is not installed");
        return;
    }
    // Where the test tells the command shiro's process id, once it is known.
    let told = tempfile::tempdir().unwrap();
    let pid_file = told.path().join("pid");
    let script = format!(
        "while [ ! -s {pid_file} ]; do sleep 0.05; done; pid=$(cat {pid_file}); \
         python3 -c 'import ctypes,sys; libc = ctypes.CDLL(None, use_errno=True); \
         r = libc.ptrace(16, int(sys.argv[1]), None, None); \
         print(\"attach\", r, ctypes.get_errno())' $pid; \
         kill -STOP $pid 2>/dev/null; echo \"stop $?\"; \
         (echo x > /proc/$pid/mem) 2>/dev/null; echo \"mem $?\"; echo done",
        pid_file = pid_file.display(),
    );
    let args = serde_json::json!({ "command": script }).to_string();
    let mut child = ws
        .command(&["tool", "bash", "--args", &args])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::fs::write(&pid_file, child.id().to_string()).unwrap();
    // Stopped by the command, it would never end: the test fails rather than hang.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("shiro never ended: the command stopped it");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let run = ws.finish(child);
    assert_eq!(run.code, 0, "{}", run.show());
    assert!(run.stdout.contains("done"), "{}", run.show());
    assert!(run.stdout.contains("attach -1 "), "{}", run.show());
    assert!(!run.stdout.contains("stop 0"), "{}", run.show());
    assert!(!run.stdout.contains("mem 0"), "{}", run.show());
}

#[test]
fn without_root_the_sandbox_holds_too() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: not root, so the other tests already run without privilege");
        return;
    }
    let Some(setpriv) = support::setpriv() else {
        return;
    };
    // A directory outside the temp directories that nobody can reach (`HOME` may be
    // `/root`, which nobody cannot enter).
    let temp = ["/tmp", "/var/tmp", "/dev/shm"];
    let reachable = [
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")),
        "/var/lib".into(),
        "/opt".into(),
    ]
    .into_iter()
    .find(|dir| {
        let real = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        !temp.iter().any(|t| real.starts_with(t))
            && support::nobody_command(setpriv, "test")
                .arg("-x")
                .arg(dir)
                .status()
                .is_ok_and(|status| status.success())
    });
    let Some(parent) = reachable else {
        eprintln!("skipped: no directory outside the temp directories that nobody can reach");
        return;
    };
    let Some((ws, sibling)) = setting_in(&parent) else {
        return;
    };
    let theirs = sibling.path().join("theirs.txt");
    std::os::unix::fs::symlink(&theirs, ws.path().join("out")).unwrap();
    support::give_to_nobody(&[ws.path(), ws.config.path(), sibling.path()]);
    // Natively, the user may write the file: only the sandbox keeps the command off it.
    let writable = support::nobody_command(setpriv, "test")
        .arg("-w")
        .arg(&theirs)
        .status()
        .unwrap();
    assert!(writable.success());
    let script = format!(
        "echo x > {theirs} ; echo x > out ; for root in /proc/*/root; do echo x > $root{theirs} ; done ; \
         unshare -Urm sh -c 'mount -o remount,rw / ; echo x > {theirs}' ; \
         echo ok > inside.txt && echo done",
        theirs = theirs.display(),
    );
    let args = serde_json::json!({ "command": script }).to_string();
    let (code, stdout, stderr) = ws.run_as_nobody(setpriv, &["tool", "bash", "--args", &args]);
    if code != Some(0) && stderr.contains("Permission denied") {
        eprintln!("skipped: nobody cannot run the shiro binary here ({stderr})");
        return;
    }
    if let Some(at) = stdout.find("fell back to detect-only") {
        eprintln!(
            "skipped: unprivileged user namespaces are refused here ({})",
            &stdout[at..]
        );
        return;
    }
    assert!(stdout.contains("done"), "{stdout}{stderr}");
    assert!(stdout.contains("A inside.txt"), "{stdout}{stderr}");
    assert_eq!(file(&theirs).unwrap(), "theirs\n", "{stdout}{stderr}");
}
