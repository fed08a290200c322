//! Section 6: the read tools against ripgrep, on the same tree with the same ignore rules.
//! Both run as whole processes: `rg` as a user runs it, `shiro tool NAME` as a script does.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::Result;

use crate::cases::Case;
use crate::inputs::{self, Rng};
use crate::report::{Table, duration, ratio};
use crate::{Plan, Runner, Verdicts, command_line};

/// The budget the section checks.
const SEARCH_BUDGET: &str = "grep, glob and list_dir at most 1.3x ripgrep on 100,000 files";

/// The line planted in one file in a hundred, for the rare-match search.
const NEEDLE: &str = "needle_7f3a: found";

/// How many files go straight into one directory, for `list_dir`.
const FLAT_FILES: usize = 5_000;

pub fn search(
    doc: &mut String,
    plan: &Plan,
    shiro: &Path,
    work: &Path,
    runner: &mut Runner,
    verdicts: &mut Verdicts,
) -> Result<()> {
    let rg_version = command_line("rg", &["--version"]);
    if rg_version == "unknown" {
        let why = "ripgrep (`rg`) is not installed here, so there is nothing to compare with";
        let _ = write!(
            doc,
            "\n## 6. grep, glob and list_dir against ripgrep\n\n{why}.\n"
        );
        verdicts.add(SEARCH_BUDGET, None, format!("{why}; section 6"));
        return Ok(());
    }
    let ws = work.join("ws-search");
    let total = build_tree(&ws, plan.search_files)?;
    super::settle()?;

    // ripgrep set up to search what shiro searches: ignore files apply without a git
    // repository, and dotfiles are searched (shiro hides only `.git` and `.shiro/undo`).
    let rg = |args: &[&str]| -> Vec<String> {
        ["--no-require-git", "--hidden"]
            .iter()
            .chain(args)
            .map(|a| (*a).to_owned())
            .collect()
    };
    let tool = |name: &str, args: serde_json::Value| -> Vec<String> {
        vec![
            "tool".to_owned(),
            name.to_owned(),
            "--args".to_owned(),
            args.to_string(),
        ]
    };
    let rows: Vec<(String, Vec<String>, Vec<String>)> = vec![
        (
            format!("grep, a literal in 1 file in 100 (`{NEEDLE}`)"),
            rg(&["-n", NEEDLE]),
            tool("grep", serde_json::json!({ "pattern": NEEDLE })),
        ),
        (
            "grep, a regular expression on many lines (`match \\w+ =>`)".to_owned(),
            rg(&["-n", r"match \w+ =>"]),
            tool("grep", serde_json::json!({ "pattern": r"match \w+ =>" })),
        ),
        (
            "grep, case-insensitive (`NEEDLE_7F3A`)".to_owned(),
            rg(&["-n", "-i", "NEEDLE_7F3A"]),
            tool(
                "grep",
                serde_json::json!({ "pattern": "NEEDLE_7F3A", "case_insensitive": true }),
            ),
        ),
        (
            "glob `*.rs` (`rg --files -g`)".to_owned(),
            rg(&["--files", "-g", "*.rs"]),
            tool("glob", serde_json::json!({ "pattern": "*.rs" })),
        ),
        (
            "glob `a00*/**/*.md`".to_owned(),
            rg(&["--files", "-g", "a00*/**/*.md"]),
            tool("glob", serde_json::json!({ "pattern": "a00*/**/*.md" })),
        ),
        (
            format!("list_dir of a directory of {FLAT_FILES} files (`rg --files --max-depth 1`)"),
            rg(&["--files", "--max-depth", "1", "flat"]),
            tool("list_dir", serde_json::json!({ "path": "flat" })),
        ),
    ];

    let mut table = Table {
        row_header: "search".into(),
        columns: vec!["`rg`".into(), "`shiro tool`".into()],
        baseline: 0,
        rows: Vec::new(),
    };
    let mut ratios = Vec::new();
    for (label, rg_args, shiro_args) in rows {
        let spawn = |program: &Path, args: Vec<String>| Case::Spawn {
            program: program.to_owned(),
            args,
            reps: plan.search_reps,
            dir: Some(ws.clone()),
        };
        let base = runner.cell(
            "search",
            &format!("rg: {label}"),
            &spawn(Path::new("rg"), rg_args),
        );
        let ours = runner.cell(
            "search",
            &format!("shiro: {label}"),
            &spawn(shiro, shiro_args),
        );
        if let (Ok(b), Ok(o)) = (&base, &ours) {
            ratios.push((label.clone(), o.median, b.median));
        }
        table.rows.push((label, vec![base, ours]));
    }
    let _ = write!(
        doc,
        "\n## 6. grep, glob and list_dir against ripgrep\n\n\
         A tree of {files} files ({size}) in three levels of directories, sizes mixed as in \
         section 1, with a `.gitignore` that leaves out the `.json` fifth of them and a \
         directory of {FLAT_FILES} more; one file in a hundred holds the needle line. Each \
         cell spawns the program in the tree until it exits ({reps} repetitions): `{rg_version}` \
         with `--no-require-git --hidden` (so that it honours the `.gitignore` without a git \
         repository and, like shiro, searches dotfiles) and, for searches, `-n` (shiro prints \
         line numbers; `rg` counts lines only when asked, or when it prints to a terminal), \
         and `shiro tool` with the same pattern. ripgrep prints every match; shiro's tools print at most 200 lines (grep) \
         or 500 paths (glob, list_dir) but count every match, so both read every file.\n\n{}",
        table.render(),
        files = plan.search_files + FLAT_FILES,
        size = crate::report::bytes(total),
        reps = plan.search_reps,
    );
    if ratios.len() == table.rows.len() {
        let worst = ratios
            .iter()
            .max_by(|a, b| (a.1 * b.2).cmp(&(b.1 * a.2)))
            .map(|(label, ours, base)| (label.clone(), *ours, *base));
        if let Some((label, ours, base)) = worst {
            verdicts.add(
                SEARCH_BUDGET,
                Some(ours * 10 <= base * 13),
                format!(
                    "worst ×{} ({} against {}) at {label}; section 6",
                    ratio(ours, base),
                    duration(ours),
                    duration(base)
                ),
            );
        }
    } else {
        verdicts.add(SEARCH_BUDGET, None, "a case failed; see section 6".into());
    }
    fs::remove_dir_all(&ws)?;
    Ok(())
}

/// The tree: `files` files of mixed sizes, a flat directory, a needle in every hundredth
/// file, and a `.gitignore`. Returns its size in bytes.
fn build_tree(ws: &Path, files: usize) -> Result<u64> {
    if ws.exists() {
        fs::remove_dir_all(ws)?;
    }
    let mut total = inputs::workspace(ws, files, 66, |rng, _| inputs::mixed_size(rng))?;
    for index in (0..files).step_by(100) {
        let path = ws.join(inputs::file_path(index));
        let mut bytes = fs::read(&path)?;
        bytes.extend_from_slice(format!("{NEEDLE}\n").as_bytes());
        total += NEEDLE.len() as u64 + 1;
        fs::write(&path, bytes)?;
    }
    let flat = ws.join("flat");
    fs::create_dir_all(&flat)?;
    let mut rng = Rng::new(67);
    for index in 0..FLAT_FILES {
        let bytes = inputs::text(&mut rng, 256);
        total += bytes.len() as u64;
        fs::write(flat.join(format!("g{index:05}.txt")), bytes)?;
    }
    fs::write(ws.join(".gitignore"), "*.json\n")?;
    Ok(total)
}
