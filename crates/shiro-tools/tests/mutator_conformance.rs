//! One conformance suite, run against both mutators: the in-memory tree must behave exactly
//! like the disk. Each scenario writes a transcript of operations and their outcomes; the two
//! transcripts must be equal, and the transcript itself is a reviewed snapshot.
#![allow(clippy::unwrap_used)] // Test helpers outside #[test] fns fail loudly by design.

use std::fmt::Write as _;
use std::path::Path;

use shiro_tools::{FsMutator, MemMutator, Mutator, MutatorError, PathError, Stat, WorkspacePath};

fn p(s: &str) -> WorkspacePath {
    WorkspacePath::from_relative(s).unwrap()
}

/// Error kinds without the details that differ between implementations (OS messages).
fn outcome<T: std::fmt::Debug>(result: Result<T, MutatorError>) -> String {
    match result {
        Ok(value) => format!("ok {value:?}"),
        Err(MutatorError::Io { op, path, .. }) => format!("err io {op} {path}"),
        Err(err) => format!("err {err}"),
    }
}

fn show_stat(stat: &Stat, outside: &str) -> String {
    match stat {
        Stat::Symlink { target } => format!("symlink -> {}", target.replace(outside, "<outside>")),
        Stat::File { mode, len } => format!("file {mode:o} {len}"),
        Stat::Dir { mode } => format!("dir {mode:o}"),
        Stat::Absent => "absent".to_owned(),
    }
}

/// Runs every scenario against `m`; `outside` is an absolute directory outside its root.
async fn transcript(m: &dyn Mutator, outside: &str) -> String {
    let mut t = String::new();
    let root = m.root().to_string_lossy().into_owned();
    macro_rules! step {
        ($label:expr, $e:expr) => {
            writeln!(t, "{:<44} {}", $label, outcome($e.await)).unwrap()
        };
    }
    // `stat!(path)`, or `stat!(real_stat, path)` for another way of asking.
    macro_rules! stat {
        ($path:expr) => {
            stat!(stat, $path)
        };
        ($method:ident, $path:expr) => {
            writeln!(
                t,
                "{:<44} {}",
                format!("{} {}", stringify!($method), $path),
                match m.$method(&p($path)).await {
                    Ok(stat) => show_stat(&stat, outside),
                    Err(err) => format!("err {err}"),
                }
            )
            .unwrap()
        };
    }

    // Files: create, default mode, explicit mode, overwrite keeps mode.
    step!("write a.txt", m.write(&p("a.txt"), b"one", None));
    stat!("a.txt");
    step!("read a.txt", async {
        m.read(&p("a.txt")).await.map(String::from_utf8)
    });
    step!("set_mode a.txt 755", m.set_mode(&p("a.txt"), 0o755));
    step!("write a.txt again", m.write(&p("a.txt"), b"two!", None));
    stat!("a.txt");
    step!(
        "write a.txt mode 600",
        m.write(&p("a.txt"), b"", Some(0o600))
    );
    stat!("a.txt");
    step!(
        "write bin (binary)",
        m.write(&p("bin"), &[0, 159, 146, 150, 255], None)
    );
    step!("read bin", m.read(&p("bin")));

    // Parents must exist; directories are not files.
    step!("write missing/x", m.write(&p("missing/x"), b"x", None));
    step!(
        "write a.txt/x (parent is a file)",
        m.write(&p("a.txt/x"), b"x", None)
    );
    stat!("a.txt/x");
    step!("create_dir d", m.create_dir(&p("d")));
    stat!("d");
    step!("create_dir d again", m.create_dir(&p("d")));
    step!(
        "create_dir missing/deeper",
        m.create_dir(&p("missing/deeper"))
    );
    step!("write d (a directory)", m.write(&p("d"), b"x", None));
    step!("write d/f", m.write(&p("d/f"), b"f", None));
    step!("read d", m.read(&p("d")));
    step!("remove_dir d (not empty)", m.remove_dir(&p("d")));
    step!("remove_file d", m.remove_file(&p("d")));
    step!("remove_dir a.txt", m.remove_dir(&p("a.txt")));
    step!("read_dir d", async {
        m.read_dir(&p("d")).await.map(|entries| {
            entries
                .iter()
                .map(|e| format!("{} {}", e.path, e.stat.kind()))
                .collect::<Vec<_>>()
        })
    });
    step!("read_dir a.txt", async {
        m.read_dir(&p("a.txt")).await.map(|e| e.len())
    });
    step!("set_mode d 700", m.set_mode(&p("d"), 0o700));
    stat!("d");
    step!("set_mode d 755", m.set_mode(&p("d"), 0o755));
    step!("remove_file d/f", m.remove_file(&p("d/f")));
    step!("remove_file d/f again", m.remove_file(&p("d/f")));
    step!("remove_dir d", m.remove_dir(&p("d")));
    step!("remove_dir d again", m.remove_dir(&p("d")));
    step!("set_mode nothing", m.set_mode(&p("nothing"), 0o644));

    // Renames move files and links, replace files, never directories.
    step!("rename a.txt -> b.txt", m.rename(&p("a.txt"), &p("b.txt")));
    stat!("a.txt");
    stat!("b.txt");
    step!("write c.txt", m.write(&p("c.txt"), b"c", None));
    step!(
        "rename c.txt -> b.txt (replaces)",
        m.rename(&p("c.txt"), &p("b.txt"))
    );
    step!("read b.txt", async {
        m.read(&p("b.txt")).await.map(String::from_utf8)
    });
    step!("rename b.txt -> b.txt", m.rename(&p("b.txt"), &p("b.txt")));
    step!("rename gone -> x", m.rename(&p("gone"), &p("x")));
    step!("create_dir e", m.create_dir(&p("e")));
    step!("rename e -> f (directory)", m.rename(&p("e"), &p("f")));
    step!(
        "rename b.txt -> e (onto directory)",
        m.rename(&p("b.txt"), &p("e"))
    );
    step!(
        "rename b.txt -> nowhere/b",
        m.rename(&p("b.txt"), &p("nowhere/b"))
    );
    step!(
        "rename b.txt -> e/b.txt",
        m.rename(&p("b.txt"), &p("e/b.txt"))
    );

    // Symbolic links: not followed in the last component, followed on parents inside by
    // reads and stat; mutations follow none (real_path resolves a path first).
    step!("symlink e -> in", m.symlink("e", &p("in")));
    stat!("in");
    step!("symlink again onto in", m.symlink("e", &p("in")));
    stat!("in/b.txt");
    step!("read in/b.txt", async {
        m.read(&p("in/b.txt")).await.map(String::from_utf8)
    });
    step!("write in/new.txt", m.write(&p("in/new.txt"), b"new", None));
    stat!("e/new.txt");
    step!("real_path in/new.txt", m.real_path(&p("in/new.txt")));
    step!("real_path in", m.real_path(&p("in")));
    step!("symlink ../e -> e/self", m.symlink("../e", &p("e/self")));
    step!(
        "real_path in/self/self/x",
        m.real_path(&p("in/self/self/x"))
    );
    step!("remove_file e/self", m.remove_file(&p("e/self")));
    step!("real_path missing/x", m.real_path(&p("missing/x")));
    step!("real_path b.txt/x (a file)", m.real_path(&p("b.txt/x")));
    step!("read_dir in", async {
        m.read_dir(&p("in")).await.map(|entries| {
            entries
                .iter()
                .map(|e| e.path.to_string())
                .collect::<Vec<_>>()
        })
    });
    step!("symlink e/b.txt -> lnk", m.symlink("e/b.txt", &p("lnk")));
    step!("read lnk", async {
        m.read(&p("lnk")).await.map(String::from_utf8)
    });
    step!("set_mode lnk", m.set_mode(&p("lnk"), 0o600));
    step!("rename lnk -> lnk2", m.rename(&p("lnk"), &p("lnk2")));
    stat!("lnk2");
    step!(
        "write lnk2 (replaces the link)",
        m.write(&p("lnk2"), b"plain", None)
    );
    stat!("lnk2");
    step!("read e/b.txt (untouched)", async {
        m.read(&p("e/b.txt")).await.map(String::from_utf8)
    });
    step!("symlink dangling", m.symlink("nowhere", &p("dangling")));
    stat!("dangling");
    step!("read dangling", m.read(&p("dangling")));
    stat!("dangling/x");
    step!("real_path dangling/x", m.real_path(&p("dangling/x")));
    step!("write dangling/x", m.write(&p("dangling/x"), b"x", None));
    step!("remove_file dangling", m.remove_file(&p("dangling")));
    step!("symlink ../.. -> up", m.symlink("../..", &p("up")));
    step!("read up/etc/passwd", m.read(&p("up/etc/passwd")));
    step!("symlink <outside> -> out", m.symlink(outside, &p("out")));
    stat!("out");
    step!("read out", m.read(&p("out")));
    step!("real_path out/x", m.real_path(&p("out/x")));
    step!("real_path up/x", m.real_path(&p("up/x")));
    step!("write out/x", m.write(&p("out/x"), b"x", None));
    step!("create_dir out/x", m.create_dir(&p("out/x")));
    step!("read out/secret", m.read(&p("out/secret")));
    step!(
        "read_with out/secret",
        m.read_with(&p("out/secret"), &mut |_| {})
    );
    step!("read_dir out", async {
        m.read_dir(&p("out")).await.map(|e| e.len())
    });
    step!(
        "remove_file out (the link itself)",
        m.remove_file(&p("out"))
    );
    step!(
        "symlink absolute in-root -> abs",
        m.symlink(&format!("{root}/e"), &p("abs"))
    );
    step!("read abs/b.txt", async {
        m.read(&p("abs/b.txt")).await.map(String::from_utf8)
    });
    step!("real_path abs/b.txt", m.real_path(&p("abs/b.txt")));
    step!("symlink loop -> loop", m.symlink("loop", &p("loop")));
    step!("real_path loop/x", m.real_path(&p("loop/x")));
    step!("remove_file loop", m.remove_file(&p("loop")));

    // real_stat: the entry itself, reached through real directories only.
    stat!(real_stat, "e/b.txt");
    stat!(real_stat, "in/b.txt");
    stat!(real_stat, "e/b.txt/x");
    stat!(real_stat, "in");
    stat!(real_stat, "nothing/x");

    // overwrite: exact bytes and mode, whatever was there (a link is replaced, not followed).
    step!(
        "overwrite e/b.txt 600",
        m.overwrite(&p("e/b.txt"), b"longer than before", 0o600)
    );
    stat!("e/b.txt");
    step!(
        "overwrite e/b.txt shorter 644",
        m.overwrite(&p("e/b.txt"), b"short", 0o644)
    );
    stat!("e/b.txt");
    step!("read e/b.txt", async {
        m.read(&p("e/b.txt")).await.map(String::from_utf8)
    });
    step!(
        "overwrite e/fresh.txt 755",
        m.overwrite(&p("e/fresh.txt"), b"fresh", 0o755)
    );
    stat!("e/fresh.txt");
    step!("symlink e/b.txt -> e/lnk", m.symlink("b.txt", &p("e/lnk")));
    step!(
        "overwrite e/lnk (the link itself)",
        m.overwrite(&p("e/lnk"), b"was a link", 0o644)
    );
    stat!("e/lnk");
    step!("read e/b.txt (not through the link)", async {
        m.read(&p("e/b.txt")).await.map(String::from_utf8)
    });
    step!("read_into e/b.txt (a used buffer)", async {
        m.read_into(&p("e/b.txt"), b"old contents, longer".to_vec())
            .await
            .map(String::from_utf8)
    });
    step!("read_into nothing", m.read_into(&p("nothing"), Vec::new()));
    // Bigger than the pieces `FsMutator` reads at a time.
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    step!("write big (200000 bytes)", m.write(&p("big"), &big, None));
    step!("read_with big (all bytes, in order)", async {
        let mut got = Vec::new();
        let len = m
            .read_with(&p("big"), &mut |piece| got.extend_from_slice(piece))
            .await?;
        Ok::<_, MutatorError>((len, got == big))
    });
    step!("read_with e/lnk (now a file)", async {
        let mut got = Vec::new();
        m.read_with(&p("e/lnk"), &mut |piece| got.extend_from_slice(piece))
            .await
            .map(|len| (len, String::from_utf8(got)))
    });
    step!("read_with nothing", m.read_with(&p("nothing"), &mut |_| {}));
    // In place over a big file, which `FsMutator` compares block by block: the same bytes,
    // one byte changed in the middle or the last block, shorter, longer.
    let mut versions = vec![big.clone(), big.clone(), big.clone()];
    versions[1][100_000] ^= 1;
    versions[2][199_999] ^= 1;
    versions.push(big[..70_001].to_vec());
    versions.push([&big[..], &big[..100_000]].concat());
    versions.push(big.iter().map(|b| b ^ 0xff).collect());
    for (i, version) in versions.iter().enumerate() {
        step!(format!("overwrite big (version {i}), read back"), async {
            m.overwrite(&p("big"), version, 0o644).await?;
            m.read(&p("big")).await.map(|got| got == *version)
        });
    }
    // The same from a reader, a piece at a time: in reverse order, to change every time.
    for (i, version) in versions.iter().enumerate().rev() {
        step!(
            format!("overwrite_from big (version {i}), read back"),
            async {
                let mut source = &version[..];
                m.overwrite_from(&p("big"), &mut source, version.len() as u64, 0o644)
                    .await?;
                m.read(&p("big")).await.map(|got| got == *version)
            }
        );
    }
    step!("overwrite_from fresh.bin (new file)", async {
        let mut source = &big[..1000];
        m.overwrite_from(&p("fresh.bin"), &mut source, 1000, 0o600)
            .await?;
        m.read(&p("fresh.bin")).await.map(|got| got == big[..1000])
    });
    stat!("fresh.bin");
    step!(
        "overwrite_from big, reader 1 byte short",
        m.overwrite_from(&p("big"), &mut &big[..99_999], 100_000, 0o644)
    );
    step!(
        "read_with e (a directory)",
        m.read_with(&p("e"), &mut |_| {})
    );
    step!(
        "overwrite e (a directory)",
        m.overwrite(&p("e"), b"x", 0o644)
    );
    step!(
        "overwrite nothing/x",
        m.overwrite(&p("nothing/x"), b"x", 0o644)
    );
    step!(
        "overwrite .git/x (protected)",
        m.overwrite(&p(".git/x"), b"x", 0o644)
    );

    // Protected directories are never written.
    step!("write .git/config", m.write(&p(".git/config"), b"x", None));
    step!("create_dir .git", m.create_dir(&p(".git")));
    step!(
        "write .shiro/undo/log",
        m.write(&p(".shiro/undo/log"), b"x", None)
    );
    step!("create_dir .shiro", m.create_dir(&p(".shiro")));
    step!(
        "write .shiro/commands.md",
        m.write(&p(".shiro/commands.md"), b"## x\n", None)
    );
    step!(
        "rename e/b.txt -> .git/b",
        m.rename(&p("e/b.txt"), &p(".git/b"))
    );
    step!(
        "sync",
        m.sync(&[p("e/b.txt"), p("e"), p("gone/x"), p("top")])
    );
    t
}

#[tokio::test]
async fn mem_and_fs_behave_the_same() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "secret").unwrap();
    let outside_str = outside.path().to_str().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let fs = FsMutator::new(dir.path()).unwrap();
    let fs_transcript = transcript(&fs, outside_str).await;

    let mem = MemMutator::new();
    let mem_transcript = transcript(&mem, outside_str).await;

    let inline_dir = tempfile::tempdir().unwrap();
    let inline = FsMutator::new(inline_dir.path()).unwrap().inline();
    assert_eq!(
        transcript(&inline, outside_str).await,
        fs_transcript,
        "running inline changes what the disk does"
    );

    assert_eq!(
        mem_transcript, fs_transcript,
        "the in-memory tree differs from the disk"
    );
    insta::assert_snapshot!(fs_transcript);
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        1,
        "something was created outside"
    );
}

/// `read_with` hands a big file over a piece at a time, running inline or on the blocking
/// pool alike, so that hashing or copying a file of any size needs memory of one piece (a
/// recorder capturing a 10 GiB file must not hold it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_with_streams_a_big_file_in_pieces_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let big: Vec<u8> = (0..5_000_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(dir.path().join("big"), &big).unwrap();
    for (way, m) in [
        ("on the blocking pool", FsMutator::new(dir.path()).unwrap()),
        ("inline", FsMutator::new(dir.path()).unwrap().inline()),
    ] {
        let (mut got, mut largest, mut pieces) = (Vec::new(), 0, 0);
        let len = m
            .read_with(&p("big"), &mut |piece| {
                got.extend_from_slice(piece);
                largest = largest.max(piece.len());
                pieces += 1;
            })
            .await
            .unwrap();
        assert_eq!(len, big.len() as u64, "{way}");
        assert!(got == big, "{way}: the bytes differ");
        assert!(
            largest <= 1 << 20 && pieces >= 5,
            "{way}: {pieces} pieces, the largest {largest} bytes"
        );
    }
}

/// `open_read` hands out the file `read` would read, through the same jail: a link inside is
/// followed, one leading outside and a directory are refused; the in-memory tree has no
/// files to hand out.
#[tokio::test]
async fn open_read_hands_out_what_read_reads() {
    use std::io::Read as _;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "secret").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), "the bytes").unwrap();
    std::os::unix::fs::symlink("a", dir.path().join("in")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("out")).unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    let m = FsMutator::new(dir.path()).unwrap();
    for path in ["a", "in"] {
        let mut text = String::new();
        let file = m.open_read(&p(path)).await.unwrap();
        file.unwrap().read_to_string(&mut text).unwrap();
        assert_eq!(text, "the bytes", "{path}");
    }
    for path in ["out", "d", "nothing"] {
        let read = outcome(m.read(&p(path)).await);
        let opened = outcome(m.open_read(&p(path)).await.map(|_| ()));
        assert!(
            read.starts_with("err") && opened.starts_with("err"),
            "{path}: {opened}"
        );
    }
    let mem = MemMutator::new();
    mem.write(&p("a"), b"the bytes", None).await.unwrap();
    assert!(mem.open_read(&p("a")).await.unwrap().is_none());
}

/// Hostile paths: refused by the jail or by both mutators, and nothing appears outside.
#[tokio::test]
async fn hostile_paths_are_refused_by_both_mutators() {
    let outside = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let fs = FsMutator::new(root).unwrap();
    let mem = MemMutator::new();
    for m in [&fs as &dyn Mutator, &mem] {
        m.symlink(outside.path().to_str().unwrap(), &p("outlink"))
            .await
            .unwrap();
        m.create_dir(&p("sub")).await.unwrap();
        m.symlink("../outlink", &p("sub/via")).await.unwrap();
        m.symlink("/etc", &p("etc")).await.unwrap();
        m.symlink("loop2", &p("loop1")).await.unwrap();
        m.symlink("loop1", &p("loop2")).await.unwrap();
    }
    let hostile = [
        "../x",
        "../../etc/passwd",
        "/etc/passwd",
        "a/../../b",
        "a/../b",
        "..",
        "",
        ".",
        "./",
        "a\0b",
        "\0",
        ".git/config",
        ".git",
        ".git/hooks/pre-commit",
        ".shiro/undo/x",
        ".shiro/undo",
        "outlink/x",
        "outlink/deep/x",
        "sub/via/x",
        "etc/passwd",
        "loop1/x",
        "/",
        "//etc/passwd",
        "/tmp/x",
    ];
    let mut report = String::new();
    for input in hostile {
        for (name, m) in [("fs", &fs as &dyn Mutator), ("mem", &mem)] {
            let outcome = match WorkspacePath::resolve(m.root(), input) {
                Err(err) => format!("jail: {err}"),
                Ok(path) => {
                    let write = m.write(&path, b"pwned", None).await;
                    let dirs = shiro_tools::create_parent_dirs(m, &path).await;
                    assert!(write.is_err(), "{name}: write of {input:?} succeeded");
                    match (write, dirs) {
                        (
                            Err(MutatorError::Path(
                                PathError::SymlinkEscape { .. } | PathError::Protected(_),
                            )),
                            _,
                        ) => {}
                        (Err(MutatorError::NotFound(_)), Err(MutatorError::Path(_))) => {}
                        (Err(MutatorError::Path(_)), _) => {}
                        (other, dirs) => panic!("{name}: {input:?} gave {other:?} / {dirs:?}"),
                    }
                    format!("mutator: {}", outcome(m.write(&path, b"pwned", None).await))
                }
            };
            if name == "fs" {
                writeln!(
                    report,
                    "{input:?}: {}",
                    outcome.replace(outside.path().to_str().unwrap(), "<outside>")
                )
                .unwrap();
            }
        }
    }
    insta::assert_snapshot!(report);
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "something was created outside"
    );
    // The relative root itself is also never a writable path.
    assert!(WorkspacePath::resolve(Path::new("/ws"), "/ws").is_err());
}

/// Links that lead round a loop are reported as a loop, in both mutators, whether they are
/// the path's last component (a read follows it) or a directory on the way; never as an
/// escape from the workspace.
#[tokio::test]
async fn a_link_loop_is_reported_as_a_loop() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FsMutator::new(dir.path()).unwrap();
    let mem = MemMutator::new();
    for (name, m) in [("fs", &fs as &dyn Mutator), ("mem", &mem)] {
        m.symlink("loop2", &p("loop1")).await.unwrap();
        m.symlink("loop1", &p("loop2")).await.unwrap();
        for path in ["loop1", "loop1/x"] {
            let err = m.read(&p(path)).await.unwrap_err();
            assert!(
                matches!(err, MutatorError::Path(PathError::SymlinkLoop { .. })),
                "{name}: read of {path} gave {err:?}"
            );
        }
    }
}

/// A write goes through a temporary file with an unpredictable name created with `O_EXCL`:
/// a link or a file planted under the old fixed name is never written through or destroyed,
/// and what a killed write left is recognised by its name and removed by recovery.
#[tokio::test]
async fn temporary_files_are_unpredictable_and_swept() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("d")).unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "SECRET\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink("../../victim", ws.join("d/.a.txt.shiro-tmp")).unwrap();
    std::fs::write(ws.join("d/.b.txt.shiro-tmp"), "the user's own file").unwrap();
    let fs = FsMutator::new(&ws).unwrap();

    fs.write(&p("d/a.txt"), b"new", None).await.unwrap();
    fs.write(&p("d/b.txt"), b"new", None).await.unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"SECRET\n");
    let mode = std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(fs.read(&p("d/a.txt")).await.unwrap(), b"new");
    assert!(
        std::fs::symlink_metadata(ws.join("d/a.txt"))
            .unwrap()
            .is_file()
    );
    assert_eq!(
        std::fs::read(ws.join("d/.b.txt.shiro-tmp")).unwrap(),
        b"the user's own file"
    );

    // What a killed write leaves matches the pattern; the user's files do not.
    let stale = ".a.txt.0123456789abcdef.shiro-tmp";
    std::fs::write(ws.join("d").join(stale), "junk from a killed write").unwrap();
    std::fs::write(ws.join(".top.fedcba9876543210.shiro-tmp"), "junk").unwrap();
    assert!(shiro_tools::is_partial_write_of(&p("d/a.txt"), stale));
    assert!(!shiro_tools::is_partial_write_of(
        &p("d/a.txt"),
        ".a.txt.shiro-tmp"
    ));
    assert!(!shiro_tools::is_partial_write_of(&p("d/b.txt"), stale));
    let removed = fs
        .remove_partial_writes(&[p("d/a.txt"), p("d/b.txt"), p("top")])
        .await
        .unwrap();
    assert_eq!(removed, 2);
    assert!(!ws.join("d").join(stale).exists());
    assert!(!ws.join(".top.fedcba9876543210.shiro-tmp").exists());
    assert!(ws.join("d/.a.txt.shiro-tmp").is_symlink());
    assert!(ws.join("d/.b.txt.shiro-tmp").exists());
}

/// `overwrite` writes a lone file in place (same inode, as `cp`), but never reaches another
/// name of the file: a file with other hard links is replaced instead.
#[tokio::test]
async fn overwrite_is_in_place_only_for_a_lone_file() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let fs = FsMutator::new(dir.path()).unwrap();
    let inode = |name: &str| std::fs::metadata(dir.path().join(name)).unwrap().ino();

    std::fs::write(dir.path().join("lone.txt"), "old bytes").unwrap();
    let before = inode("lone.txt");
    fs.overwrite(&p("lone.txt"), b"new", 0o600).await.unwrap();
    assert_eq!(inode("lone.txt"), before, "a lone file is written in place");
    assert_eq!(std::fs::read(dir.path().join("lone.txt")).unwrap(), b"new");

    std::fs::write(dir.path().join("linked.txt"), "shared").unwrap();
    std::fs::hard_link(dir.path().join("linked.txt"), dir.path().join("other-name")).unwrap();
    let before = inode("linked.txt");
    fs.overwrite(&p("linked.txt"), b"restored", 0o644)
        .await
        .unwrap();
    assert_ne!(inode("linked.txt"), before, "a linked file is replaced");
    assert_eq!(
        std::fs::read(dir.path().join("linked.txt")).unwrap(),
        b"restored"
    );
    assert_eq!(
        std::fs::read(dir.path().join("other-name")).unwrap(),
        b"shared",
        "the other name keeps its bytes"
    );
}

/// `sync` flushes many paths in chunks and on threads, skipping what is gone or a link.
#[tokio::test]
async fn overwrite_of_a_write_only_file_is_in_place_and_exact() {
    // (Run as root, the file can be read all the same, and is compared as any other.)
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let fs = FsMutator::new(dir.path()).unwrap().inline();
    let path = dir.path().join("write-only");
    let old = vec![7u8; 100_000];
    std::fs::write(&path, &old).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o200)).unwrap();
    let inode = std::fs::metadata(&path).unwrap().ino();
    let mut new = old.clone();
    new[50_000] = 8;
    fs.overwrite(&p("write-only"), &new, 0o644).await.unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode, "in place");
    assert_eq!(std::fs::read(&path).unwrap(), new);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Whatever a file held and whatever replaces it, an overwrite (which compares a big
    /// file block by block) leaves exactly the new bytes, with the mode asked for: from
    /// memory or from a reader, longer, shorter or as long as it was.
    #[test]
    fn overwrite_leaves_exactly_the_new_bytes(
        old in proptest::collection::vec(0u8..4, 0..300_000),
        edits in proptest::collection::vec((0usize..300_000, 1usize..9000, proptest::prelude::any::<u8>()), 0..6),
        new_len in 0usize..300_000,
        same_len in proptest::prelude::any::<bool>(),
        mode in proptest::sample::select(vec![0o644u32, 0o600, 0o755]),
    ) {
        use std::os::unix::fs::PermissionsExt;
        // The new bytes: the old ones resized, with a few runs overwritten.
        let mut new = old.clone();
        new.resize(if same_len { old.len() } else { new_len }, 1);
        for (at, len, byte) in edits {
            let at = at.min(new.len());
            let end = new.len().min(at + len);
            new[at..end].fill(byte);
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), &old).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let path = dir.path().join("f");
        for (inline, reader) in [(true, false), (false, false), (true, true), (false, true)] {
            let fs = FsMutator::new(dir.path()).unwrap();
            let fs = if inline { fs.inline() } else { fs };
            std::fs::write(&path, &old).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
            let written = if reader {
                let mut source = std::io::Cursor::new(new.clone());
                runtime.block_on(fs.overwrite_from(&p("f"), &mut source, new.len() as u64, mode))
            } else {
                runtime.block_on(fs.overwrite(&p("f"), &new, mode))
            };
            written.unwrap();
            proptest::prop_assert!(std::fs::read(&path).unwrap() == new);
            let found = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
            proptest::prop_assert_eq!(found, mode);
        }
    }
}

#[tokio::test]
async fn sync_takes_many_paths_of_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FsMutator::new(dir.path()).unwrap().inline();
    let mut paths = Vec::new();
    fs.create_dir(&p("d")).await.unwrap();
    for i in 0..600 {
        let path = p(&format!("d/f{i}"));
        fs.write(&path, b"x", None).await.unwrap();
        paths.push(path);
    }
    fs.symlink("f0", &p("d/link")).await.unwrap();
    paths.extend([p("d"), p("d/link"), p("gone"), p("gone/deeper")]);
    fs.sync(&paths).await.unwrap();
    assert_eq!(fs.read(&p("d/f599")).await.unwrap(), b"x");
}

/// `Hooked::after` runs once the inner mutator returned, and only for mutations the first
/// hook let through.
#[tokio::test]
async fn the_after_hook_follows_each_mutation_let_through() {
    use std::sync::{Arc, Mutex};
    let ws = MemMutator::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (before, after) = (Arc::clone(&log), Arc::clone(&log));
    let hooked = shiro_tools::Hooked::new(ws.clone(), move |m| {
        before.lock().unwrap().push(format!("before {}", m.name()));
        if m.name() == "remove" {
            return Err(m.fault("refused"));
        }
        Ok(())
    })
    .after(move |m| after.lock().unwrap().push(format!("after {}", m.name())));
    hooked.write(&p("a"), b"1", None).await.unwrap();
    hooked.create_dir(&p("d")).await.unwrap();
    assert!(hooked.remove_file(&p("a")).await.is_err());
    assert_eq!(
        *log.lock().unwrap(),
        [
            "before write",
            "after write",
            "before create directory",
            "after create directory",
            "before remove",
        ]
    );
    assert_eq!(ws.read(&p("a")).await.unwrap(), b"1");
}

/// Every entry under `dir`, each directory before its own entries, as a commit lists a tree
/// before it removes it.
async fn list_tree(m: &dyn Mutator, dir: &str) -> Vec<shiro_tools::DirEntry> {
    let mut out = Vec::new();
    let mut stack = vec![p(dir)];
    while let Some(dir) = stack.pop() {
        for entry in m.read_dir(&dir).await.unwrap() {
            if matches!(entry.stat, Stat::Dir { .. }) {
                stack.push(entry.path.clone());
            }
            out.push(entry);
        }
    }
    out
}

/// What the workspace holds under the names `top`, one line per entry.
async fn dump(m: &dyn Mutator, top: &[&str]) -> String {
    let mut t = String::new();
    for name in top {
        let stat = m.stat(&p(name)).await.unwrap();
        writeln!(t, "  {name} {}", show_stat(&stat, "")).unwrap();
        if matches!(stat, Stat::Dir { .. }) {
            let mut entries = list_tree(m, name).await;
            entries.sort_by(|a, b| a.path.cmp(&b.path));
            for entry in entries {
                writeln!(t, "  {} {}", entry.path, show_stat(&entry.stat, "")).unwrap();
            }
        }
    }
    t
}

/// `remove_tree` scenarios; `aside` is a directory outside the root for what is moved out.
async fn tree_transcript(m: &dyn Mutator, aside: &Path) -> String {
    let mut t = String::new();
    macro_rules! step {
        ($label:expr, $e:expr) => {
            writeln!(t, "{:<44} {}", $label, outcome($e.await)).unwrap()
        };
    }
    for dir in ["t", "t/b", "t/e", "u", "u/y"] {
        m.create_dir(&p(dir)).await.unwrap();
    }
    m.write(&p("t/a"), b"a", Some(0o600)).await.unwrap();
    m.write(&p("t/b/c"), b"c", None).await.unwrap();
    m.symlink("../a", &p("t/b/link")).await.unwrap();
    m.set_mode(&p("t/b"), 0o700).await.unwrap();
    m.write(&p("u/x"), b"x", None).await.unwrap();
    m.write(&p("keep"), b"k", None).await.unwrap();

    // Listed whole: all of it goes.
    let listed = list_tree(m, "t").await;
    step!(
        "remove_tree t (listed whole)",
        m.remove_tree(&p("t"), &listed, &aside.join("0"))
    );
    step!(
        "remove_tree t again",
        m.remove_tree(&p("t"), &listed, &aside.join("1"))
    );
    // Listed, then changed: `u/y/z` made since, and `u/gone` removed since.
    m.write(&p("u/gone"), b"g", None).await.unwrap();
    let listed = list_tree(m, "u").await;
    m.remove_file(&p("u/gone")).await.unwrap();
    m.write(&p("u/y/z"), b"made since", None).await.unwrap();
    m.set_mode(&p("u/y"), 0o750).await.unwrap();
    step!(
        "remove_tree u (u/y/z made since)",
        m.remove_tree(&p("u"), &listed, &aside.join("2"))
    );
    step!("read u/y/z", async {
        m.read(&p("u/y/z")).await.map(String::from_utf8)
    });
    step!(
        "remove_tree nothing",
        m.remove_tree(&p("nothing"), &[], &aside.join("3"))
    );
    step!(
        "remove_tree keep (a file)",
        m.remove_tree(&p("keep"), &[], &aside.join("4"))
    );
    step!(
        "remove_tree .git (protected)",
        m.remove_tree(&p(".git"), &[], &aside.join("5"))
    );
    writeln!(t, "left:\n{}", dump(m, &["keep", "t", "u"]).await).unwrap();
    t
}

#[tokio::test]
async fn remove_tree_takes_what_was_listed_and_leaves_the_rest() {
    let aside = tempfile::tempdir().unwrap();
    let mem_transcript = tree_transcript(&MemMutator::new(), aside.path()).await;
    let dir = tempfile::tempdir().unwrap();
    let fs = FsMutator::new(dir.path()).unwrap();
    let fs_transcript = tree_transcript(&fs, aside.path()).await;
    assert_eq!(
        mem_transcript, fs_transcript,
        "the in-memory tree differs from the disk"
    );
    insta::assert_snapshot!(fs_transcript);
    // On the disk, both trees were moved out whole: `u` with `y` in it, whose `z` came back.
    let moved = |rel: &str| aside.path().join(rel).symlink_metadata().is_ok();
    assert!(moved("0/b/c") && moved("0/b/link") && moved("0/e"));
    assert!(moved("2/x") && moved("2/y") && !moved("2/y/z"));
    let names: Vec<_> = std::fs::read_dir(aside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names.len(),
        2,
        "only the two trees were moved out: {names:?}"
    );

    let inline_dir = tempfile::tempdir().unwrap();
    let inline_aside = tempfile::tempdir().unwrap();
    let inline = FsMutator::new(inline_dir.path()).unwrap().inline();
    assert_eq!(
        tree_transcript(&inline, inline_aside.path()).await,
        fs_transcript,
        "running inline changes what the disk does"
    );
}

/// Where the aside path lies on another file system, the tree is removed entry by entry.
#[tokio::test]
async fn remove_tree_across_file_systems_removes_entry_by_entry() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().unwrap();
    let shm = Path::new("/dev/shm");
    let other_device = shm
        .metadata()
        .is_ok_and(|meta| meta.dev() != dir.path().metadata().unwrap().dev());
    if !other_device {
        eprintln!(
            "skipped: /dev/shm is missing or on the same file system as {:?}",
            dir.path()
        );
        return;
    }
    let aside = tempfile::tempdir_in(shm).unwrap();
    let fs = FsMutator::new(dir.path()).unwrap();
    let fs_transcript = tree_transcript(&fs, aside.path()).await;
    assert_eq!(
        fs_transcript,
        tree_transcript(&MemMutator::new(), aside.path()).await
    );
    assert_eq!(
        std::fs::read_dir(aside.path()).unwrap().count(),
        0,
        "nothing was moved to another file system"
    );
}

/// A tree with a mount point in it is never moved out whole (its removal, later, would reach
/// into the mounted file system, and nothing would say so): it is removed entry by entry,
/// and the mount point stays.
#[tokio::test]
async fn remove_tree_never_moves_a_mount_point() {
    use rustix::mount::{MountFlags, UnmountFlags};
    let dir = tempfile::tempdir().unwrap();
    let aside = tempfile::tempdir().unwrap();
    let point = dir.path().join("m/mnt");
    std::fs::create_dir_all(&point).unwrap();
    std::fs::write(dir.path().join("m/a"), "a").unwrap();
    if let Err(err) = rustix::mount::mount("none", &point, "tmpfs", MountFlags::empty(), None) {
        eprintln!("skipped: cannot mount a tmpfs here ({err}; needs root)");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = rustix::mount::unmount(self.0, UnmountFlags::DETACH);
        }
    }
    let _unmount = Unmount(&point);
    std::fs::write(point.join("inside"), "inside").unwrap();
    let fs = FsMutator::new(dir.path()).unwrap();
    let listed = list_tree(&fs, "m").await;
    let removed = fs
        .remove_tree(&p("m"), &listed, &aside.path().join("0"))
        .await;
    assert!(
        std::fs::read_dir(aside.path()).unwrap().next().is_none(),
        "the tree was moved out with the mount in it"
    );
    // Removed entry by entry: what the mount held too, as `rm -rf` would; the mount point
    // itself cannot be, which the call reports.
    assert!(point.is_dir(), "the mount point went: {removed:?}");
    assert!(!point.join("inside").exists(), "not removed entry by entry");
    assert!(
        matches!(&removed, Err(MutatorError::Io { path, .. }) if path.as_str() == "m/mnt"),
        "{removed:?}"
    );
}

/// What `real_stat_many` answered for each path, or `real_stat` and `read` one path at a
/// time (what the trait's default does), in one comparable text.
fn show_looked(path: &str, looked: Result<shiro_tools::Looked, MutatorError>) -> String {
    match looked {
        Ok(shiro_tools::Looked { stat, bytes }) => format!(
            "{path}: {} {:?}",
            show_stat(&stat, "/outside"),
            bytes.map(|b| (b.len(), b.iter().map(|&x| u64::from(x)).sum::<u64>()))
        ),
        Err(err) => format!("{path}: {}", outcome::<()>(Err(err))),
    }
}

/// `real_stat_many` answers, path by path and in order, what `real_stat` and `read` answer
/// one path at a time, on several threads (enough paths for them) or on one (too few), on
/// disk inline or not, and in memory.
#[tokio::test]
async fn real_stat_many_answers_as_one_path_at_a_time() {
    async fn tree(m: &dyn Mutator) -> Vec<WorkspacePath> {
        let mut paths = Vec::new();
        for index in 0..150usize {
            let path = p(&format!("t/{}/f{index}", index % 5));
            shiro_tools::create_parent_dirs(m, &path).await.unwrap();
            let bytes: Vec<u8> = (0..index * 13).map(|n| (n * index % 251) as u8).collect();
            m.write(&path, &bytes, None).await.unwrap();
            paths.push(path);
        }
        m.create_dir(&p("t/dir")).await.unwrap();
        m.symlink("0/f0", &p("t/link")).await.unwrap();
        m.symlink("/outside/secret", &p("t/outlink")).await.unwrap();
        m.symlink("0", &p("t/linkdir")).await.unwrap();
        let odd = ["t/dir", "t/link", "t/outlink", "t/linkdir", "t/linkdir/f0"];
        paths.extend(odd.map(p));
        paths.extend(["t/nope", "t/0/f0/under", "t/0/f5", "t/0/f0"].map(p));
        paths
    }
    async fn one_at_a_time(m: &dyn Mutator, paths: &[WorkspacePath], below: u64) -> Vec<String> {
        let mut shown = Vec::new();
        for path in paths {
            let looked = match m.real_stat(path).await {
                Ok(stat @ Stat::File { len, .. }) if len < below => match m.read(path).await {
                    Ok(bytes) => Ok(shiro_tools::Looked {
                        stat,
                        bytes: Some(bytes),
                    }),
                    Err(err) => Err(err),
                },
                Ok(stat) => Ok(shiro_tools::Looked { stat, bytes: None }),
                Err(err) => Err(err),
            };
            shown.push(show_looked(path.as_str(), looked));
        }
        shown
    }
    async fn many(m: &dyn Mutator, paths: &[WorkspacePath], below: u64) -> Vec<String> {
        let looked = m.real_stat_many(paths, below).await;
        assert_eq!(looked.len(), paths.len());
        (paths.iter().zip(looked))
            .map(|(path, looked)| show_looked(path.as_str(), looked))
            .collect()
    }

    let (threaded, inline) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let fs = FsMutator::new(threaded.path()).unwrap();
    let fs_inline = FsMutator::new(inline.path()).unwrap().inline();
    let mem = MemMutator::new();
    let mut expected = None;
    for m in [&fs as &dyn Mutator, &fs_inline, &mem] {
        let paths = tree(m).await;
        for (count, below) in [(paths.len(), 1000), (paths.len(), 0), (10, 1000)] {
            let paths = &paths[paths.len() - count..];
            let one = one_at_a_time(m, paths, below).await;
            assert_eq!(many(m, paths, below).await, one, "below {below}");
            if count > 10 && below > 0 {
                assert_eq!(expected.get_or_insert_with(|| one.clone()), &one);
            }
        }
    }
    let shown = expected.unwrap();
    assert!(
        shown.iter().any(|s| s.contains("Some((")),
        "no file was read"
    );
    assert!(
        shown
            .iter()
            .any(|s| s.ends_with("None") && s.contains("file")),
        "every file was read"
    );
}

/// A new tree outside the workspace (a command's layer) is moved in whole where nothing is;
/// where something is, where the path is protected, or across file systems, nothing moves
/// and the caller is told. A mutator without a disk never moves one.
#[tokio::test]
async fn move_tree_in_moves_a_new_tree_whole_or_nothing() {
    use std::os::unix::fs::MetadataExt as _;
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let tree = |name: &str, root: &Path| {
        let source = root.join(name);
        std::fs::create_dir_all(source.join("a")).unwrap();
        std::fs::write(source.join("a/f"), name).unwrap();
        std::os::unix::fs::symlink("a/f", source.join("link")).unwrap();
        source
    };
    let listed = [p("new/a"), p("new/a/f"), p("new/link")];
    let fs = FsMutator::new(dir.path()).unwrap();

    let source = tree("one", outside.path());
    assert!(fs.move_tree_in(&source, &p("new"), &listed).await.unwrap());
    assert!(!source.exists(), "the tree is still in the layer");
    assert_eq!(fs.read(&p("new/a/f")).await.unwrap(), b"one");
    assert!(matches!(
        fs.stat(&p("new/link")).await.unwrap(),
        Stat::Symlink { target } if target == "a/f"
    ));

    // Taken by then: refused, and both trees are as they were.
    let source = tree("two", outside.path());
    assert!(!fs.move_tree_in(&source, &p("new"), &listed).await.unwrap());
    assert_eq!(std::fs::read(source.join("a/f")).unwrap(), b"two");
    assert_eq!(fs.read(&p("new/a/f")).await.unwrap(), b"one");

    let refused = fs.move_tree_in(&source, &p(".git"), &[]).await;
    assert!(refused.is_err(), "{refused:?}");
    assert!(source.join("a/f").exists() && !dir.path().join(".git").exists());

    assert!(
        !(MemMutator::new().move_tree_in(&source, &p("new"), &listed))
            .await
            .unwrap()
    );

    let shm = Path::new("/dev/shm");
    if !shm
        .metadata()
        .is_ok_and(|meta| meta.dev() != dir.path().metadata().unwrap().dev())
    {
        eprintln!(
            "skipped the other file system: /dev/shm is missing or on the same file system as {:?}",
            dir.path()
        );
        return;
    }
    let far = tempfile::tempdir_in(shm).unwrap();
    let source = tree("three", far.path());
    assert!(!fs.move_tree_in(&source, &p("other"), &[]).await.unwrap());
    assert!(source.join("a/f").exists() && !dir.path().join("other").exists());
}

/// A write of 1 MiB or more goes in by exchanging names with the file it replaces (no rename
/// over it, which ext4 makes wait for the new bytes' write-back): to a reader it is the same
/// replacement, a new file with the file's other names left holding the old bytes, the mode
/// kept, and no name left beside it.
#[tokio::test]
async fn a_big_write_replaces_the_file_as_a_small_one_does() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let fs = FsMutator::new(dir.path()).unwrap();
    let target = dir.path().join("big.bin");
    std::fs::write(&target, vec![b'o'; 2 << 20]).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o751)).unwrap();
    std::fs::hard_link(&target, dir.path().join("other-name")).unwrap();
    let before = std::fs::metadata(&target).unwrap().ino();

    let new = vec![b'n'; (1 << 20) + 1];
    fs.write(&p("big.bin"), &new, None).await.unwrap();
    let meta = std::fs::metadata(&target).unwrap();
    assert_ne!(meta.ino(), before, "replaced, not written in place");
    assert_eq!(meta.permissions().mode() & 0o7777, 0o751);
    assert_eq!(std::fs::read(&target).unwrap(), new);
    assert_eq!(
        std::fs::read(dir.path().join("other-name")).unwrap(),
        vec![b'o'; 2 << 20],
        "the other name keeps its bytes"
    );
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["big.bin", "other-name"]);
}
