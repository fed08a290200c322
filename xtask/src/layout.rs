//! The two rules of the crates' layout that `cargo xtask ci` enforces (see
//! `docs/architecture.md`):
//!
//! - **No import cycles between the modules of a crate.** A module depends on another when its
//!   code (tests excluded) names it: `crate::a::b`, `super::b`, `self::b`, or a child module
//!   declared in it (`b::f`). Naming an ancestor is not a dependency: a module lives inside
//!   its parent, and `use super::Thing` is how a child reads what its parent holds. Every
//!   other edge counts, so a parent that calls into its child and a child that calls into a
//!   module that uses the parent close a cycle.
//! - **No module over [`MAX_CODE_LINES`] lines of code without a reason at its top**: a
//!   `//! Length:` line in its module doc. Lines of code exclude blank lines, comments and the
//!   tests.
//! - **Every integration test file runs.** A crate's integration tests are the modules of
//!   one binary, `tests/integration.rs` (`autotests = false`), so cargo builds no other file
//!   under `tests/`: each `tests/*.rs` must be declared there (`mod name;`).
//!
//! The reading is lexical, not a compiler's: comments, strings and character literals are
//! blanked first, so a path in a doc or a message is no dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The longest a module may be without a written reason.
pub const MAX_CODE_LINES: usize = 800;

/// The marker of a long module's reason.
const LENGTH_MARKER: &str = "//! Length:";

/// A module: its path from the crate's root (`[]` for `lib.rs` or `main.rs`).
type ModPath = Vec<String>;

/// One module file, read.
#[derive(Debug)]
struct Module {
    file: PathBuf,
    /// The module's code with comments, strings and tests blanked out.
    code: String,
    /// The whole text, for the module doc.
    text: String,
}

/// Checks every crate under `crates/` of `root`; returns each problem found, as a line.
pub fn check(root: &Path) -> Result<Vec<String>, String> {
    let crates = root.join("crates");
    let mut problems = Vec::new();
    let mut dirs: Vec<PathBuf> = fs::read_dir(&crates)
        .map_err(|err| format!("{}: {err}", crates.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path().join("src")))
        .filter(|src| src.is_dir())
        .collect();
    dirs.sort();
    for src in dirs {
        let mut modules = read_crate(&src)?;
        for module in modules.values_mut() {
            if let Ok(relative) = module.file.strip_prefix(root) {
                module.file = relative.to_path_buf();
            }
        }
        problems.extend(cycles(&modules));
        problems.extend(long_modules(&modules));
    }
    let mut test_dirs: Vec<PathBuf> = fs::read_dir(&crates)
        .map_err(|err| format!("{}: {err}", crates.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path().join("tests")))
        .chain([root.join("tests/tests")])
        .filter(|tests| tests.join(INTEGRATION).is_file())
        .collect();
    test_dirs.sort();
    for tests in test_dirs {
        problems.extend(undeclared_tests(&tests)?);
    }
    Ok(problems)
}

/// The root of a crate's integration-test binary, in its `tests/` directory.
const INTEGRATION: &str = "integration.rs";

/// The files of `tests` (a crate's `tests/` directory) that its `integration.rs` does not
/// declare as modules: cargo builds only that file, so they would never run.
fn undeclared_tests(tests: &Path) -> Result<Vec<String>, String> {
    let root = tests.join(INTEGRATION);
    let text = fs::read_to_string(&root).map_err(|err| format!("{}: {err}", root.display()))?;
    let declared: BTreeSet<&str> = (text.lines())
        .filter_map(|line| line.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let mut stems: Vec<String> = fs::read_dir(tests)
        .map_err(|err| format!("{}: {err}", tests.display()))?
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            Some(name.strip_suffix(".rs")?.to_owned())
        })
        .filter(|stem| format!("{stem}.rs") != INTEGRATION && !declared.contains(stem.as_str()))
        .collect();
    stems.sort();
    Ok(stems
        .into_iter()
        .map(|stem| {
            format!(
                "{}: not declared in {} (`mod {stem};`), so it never runs",
                tests.join(format!("{stem}.rs")).display(),
                root.display()
            )
        })
        .collect())
}

/// Reads the modules of the crate whose sources are in `src` (binaries in `src/bin` are
/// crates of their own and left out, as are modules declared only for tests).
fn read_crate(src: &Path) -> Result<BTreeMap<ModPath, Module>, String> {
    let mut files = Vec::new();
    collect_files(src, &mut files)?;
    let mut modules = BTreeMap::new();
    for file in files {
        let Some(path) = module_path(src, &file) else {
            continue;
        };
        let text = fs::read_to_string(&file).map_err(|err| format!("{}: {err}", file.display()))?;
        let code = without_tests(&blank_literals(&text));
        modules.insert(path, Module { file, code, text });
    }
    // Modules that only tests declare (`#[cfg(test)] mod x;`) are tests too.
    let test_only: BTreeSet<ModPath> = modules
        .iter()
        .flat_map(|(path, module)| {
            test_modules(&module.text)
                .into_iter()
                .map(move |name| child(path, &name))
        })
        .collect();
    modules.retain(|path, _| !test_only.iter().any(|test| path.starts_with(test)));
    Ok(modules)
}

fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|err| format!("{}: {err}", dir.display()))?;
    for entry in entries {
        let path = entry
            .map_err(|err| format!("{}: {err}", dir.display()))?
            .path();
        if path.is_dir() {
            collect_files(&path, files)?;
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files.sort();
    Ok(())
}

/// The module a file under `src` holds; `None` for a binary's root in `src/bin`.
fn module_path(src: &Path, file: &Path) -> Option<ModPath> {
    let relative = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if parts.first().is_some_and(|first| first == "bin") {
        return None;
    }
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    match stem {
        "mod" => {}
        "lib" | "main" if parts.is_empty() => {}
        stem => parts.push(stem.to_owned()),
    }
    Some(parts)
}

fn child(path: &[String], name: &str) -> ModPath {
    let mut child = path.to_vec();
    child.push(name.to_owned());
    child
}

/// `text` with the insides of comments, strings and character literals replaced by spaces
/// (line breaks are kept, so line counts stay right).
fn blank_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && matches!(next, Some('"' | '#')) && !ident_before(&chars, i) {
            // A raw string: r"…", r#"…"#, …
            let mut hashes = 0;
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            out.push('"');
            i = j + 1;
            while i < chars.len() {
                if chars[i..]
                    .iter()
                    .take(close.len())
                    .copied()
                    .eq(close.chars())
                {
                    out.push('"');
                    out.extend(std::iter::repeat_n(' ', hashes));
                    i += close.len();
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if let Some(&inside) = chars.get(i) {
                    out.push(blank(inside));
                }
                i += 1;
            }
            out.push('"');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}'), or a lifetime, which stays.
            let end = match (next, chars.get(i + 2)) {
                (Some('\\'), _) => chars
                    .get(i + 3..)
                    .and_then(|rest| rest.iter().position(|&c| c == '\''))
                    .map(|p| i + 3 + p),
                (Some(_), Some('\'')) => Some(i + 2),
                _ => None,
            };
            match end {
                Some(end) => {
                    out.push('\'');
                    out.extend(std::iter::repeat_n(' ', end - i - 1));
                    out.push('\'');
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0
        && chars
            .get(i - 1)
            .is_some_and(|&c| c.is_alphanumeric() || c == '_')
}

/// `code` without its test module: everything from a `#[cfg(test)]` that opens a `mod … {`
/// on. Test modules come last in this project's files.
fn without_tests(code: &str) -> String {
    let lines: Vec<&str> = code.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        if line.trim() != "#[cfg(test)]" {
            continue;
        }
        let opens_module = lines[index + 1..]
            .iter()
            .map(|line| line.trim())
            .find(|line| !line.is_empty() && !line.starts_with("#["))
            .is_some_and(|line| {
                let line = line.strip_prefix("pub(crate) ").unwrap_or(line);
                line.starts_with("mod ") && line.ends_with('{')
            });
        if opens_module {
            return lines[..index].join("\n");
        }
    }
    code.to_owned()
}

/// The names of the modules `text` declares for tests only: `#[cfg(test)] mod x;`.
fn test_modules(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|pair| pair[0] == "#[cfg(test)]")
        .filter_map(|pair| declared_module(pair[1]))
        .collect()
}

/// The module `line` declares without a body (`mod x;`, `pub(crate) mod x;`).
fn declared_module(line: &str) -> Option<String> {
    let rest = line.strip_suffix(';')?;
    let name = rest.rsplit_once("mod ")?.1.trim();
    let before = rest.rsplit_once("mod ")?.0.trim();
    let visibility_only = before.is_empty() || before.starts_with("pub");
    (visibility_only && is_ident(name)).then(|| name.to_owned())
}

fn is_ident(text: &str) -> bool {
    !text.is_empty()
        && text.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !text.starts_with(|c: char| c.is_ascii_digit())
}

/// The paths `code` names, each as written after its anchor, resolved from `module`:
/// `crate::a::{b, c::D}` gives `[a, b]` and `[a, c, D]`.
fn referenced_paths(module: &[String], code: &str) -> Vec<ModPath> {
    let children: BTreeSet<String> = code
        .lines()
        .filter_map(|line| declared_module(line.trim()))
        .collect();
    let chars: Vec<char> = code.chars().collect();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if ident_before(&chars, i) || (i >= 2 && chars[i - 1] == ':' && chars[i - 2] == ':') {
            i += 1;
            continue;
        }
        let word: String = chars[i..]
            .iter()
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect();
        if word.is_empty() {
            i += 1;
            continue;
        }
        let after = i + word.chars().count();
        let followed_by_path = chars.get(after) == Some(&':') && chars.get(after + 1) == Some(&':');
        if !followed_by_path {
            i = after;
            continue;
        }
        let base = match word.as_str() {
            "crate" => Some(Vec::new()),
            "self" => Some(module.to_vec()),
            "super" => module.split_last().map(|(_, parent)| parent.to_vec()),
            name if children.contains(name) => Some(child(module, name)),
            _ => None,
        };
        let Some(mut base) = base else {
            i = after;
            continue;
        };
        let mut j = after + 2;
        // `super::super::…`
        while word == "super" && chars[j..].starts_with(&['s', 'u', 'p', 'e', 'r', ':', ':']) {
            base.pop();
            j += 7;
        }
        let (tails, end) = parse_tree(&chars, j);
        for tail in tails {
            let mut path = base.clone();
            path.extend(tail);
            paths.push(path);
        }
        i = end.max(after + 2);
    }
    paths
}

/// Reads a use tree at `start`: `a::b`, `a::{b, c::d}`, `*`. Returns each path (as segment
/// lists) and where the tree ends.
fn parse_tree(chars: &[char], start: usize) -> (Vec<Vec<String>>, usize) {
    let mut i = skip_space(chars, start);
    if chars.get(i) == Some(&'{') {
        let mut paths = Vec::new();
        i += 1;
        loop {
            i = skip_space(chars, i);
            match chars.get(i) {
                None => return (paths, i),
                Some('}') => return (paths, i + 1),
                Some(',') => i += 1,
                Some(_) => {
                    let (inner, end) = parse_tree(chars, i);
                    if end == i {
                        // Something no path starts with: skip it.
                        i += 1;
                    } else {
                        paths.extend(inner);
                        i = end;
                    }
                }
            }
        }
    }
    let word: String = chars[i..]
        .iter()
        .take_while(|c| c.is_alphanumeric() || **c == '_')
        .collect();
    if word.is_empty() {
        return (vec![Vec::new()], i);
    }
    let end = i + word.chars().count();
    if chars.get(end) == Some(&':') && chars.get(end + 1) == Some(&':') {
        let (tails, after) = parse_tree(chars, end + 2);
        let paths = tails
            .into_iter()
            .map(|tail| std::iter::once(word.clone()).chain(tail).collect())
            .collect();
        return (paths, after);
    }
    (vec![vec![word]], end)
}

fn skip_space(chars: &[char], mut i: usize) -> usize {
    while chars.get(i).is_some_and(|c| c.is_whitespace()) {
        i += 1;
    }
    i
}

/// The module-to-module edges of a crate: for each module, the modules it depends on.
fn edges(modules: &BTreeMap<ModPath, Module>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (from, module) in modules {
        let targets = edges.entry(from.clone()).or_default();
        for path in referenced_paths(from, &module.code) {
            // The longest prefix of the path that is a module.
            let target = (0..=path.len())
                .rev()
                .map(|len| &path[..len])
                .find(|prefix| modules.contains_key(*prefix));
            let Some(target) = target else { continue };
            // Naming an ancestor (or itself) is reading its own namespace.
            if from.starts_with(target) {
                continue;
            }
            targets.insert(target.to_vec());
        }
    }
    edges
}

/// One line for each cycle among a crate's modules: the modules of each strongly connected
/// group of more than one, with one cycle through them.
fn cycles(modules: &BTreeMap<ModPath, Module>) -> Vec<String> {
    let edges = edges(modules);
    let mut problems = Vec::new();
    for group in strongly_connected(&edges) {
        if group.len() < 2 {
            continue;
        }
        let cycle = one_cycle(&edges, &group);
        let names: Vec<String> = cycle
            .iter()
            .map(|path| {
                modules
                    .get(path)
                    .map_or_else(|| name(path), |m| m.file.display().to_string())
            })
            .collect();
        problems.push(format!("import cycle: {}", names.join(" → ")));
    }
    problems
}

fn name(path: &[String]) -> String {
    if path.is_empty() {
        "crate".to_owned()
    } else {
        path.join("::")
    }
}

/// Tarjan's algorithm, iteratively: the strongly connected groups of `edges`.
fn strongly_connected(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    let nodes: Vec<&ModPath> = edges.keys().collect();
    let index_of: BTreeMap<&ModPath, usize> =
        nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let successors: Vec<Vec<usize>> = nodes
        .iter()
        .map(|node| {
            edges[*node]
                .iter()
                .filter_map(|target| index_of.get(target).copied())
                .collect()
        })
        .collect();
    let mut index = vec![usize::MAX; nodes.len()];
    let mut low = vec![0; nodes.len()];
    let mut on_stack = vec![false; nodes.len()];
    let mut stack = Vec::new();
    let mut groups = Vec::new();
    let mut counter = 0;
    for root in 0..nodes.len() {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, next successor to look at)
        let mut work = vec![(root, 0)];
        index[root] = counter;
        low[root] = counter;
        counter += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (node, ref mut next)) = work.last_mut() {
            if let Some(&succ) = successors[node].get(*next) {
                *next += 1;
                if index[succ] == usize::MAX {
                    index[succ] = counter;
                    low[succ] = counter;
                    counter += 1;
                    stack.push(succ);
                    on_stack[succ] = true;
                    work.push((succ, 0));
                } else if on_stack[succ] {
                    low[node] = low[node].min(index[succ]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == index[node] {
                let mut group = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    group.push(nodes[member].clone());
                    if member == node {
                        break;
                    }
                }
                group.sort();
                groups.push(group);
            }
        }
    }
    groups
}

/// A cycle through the first module of `group`, within the group (breadth first, so the
/// shortest), ending where it starts.
fn one_cycle(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>, group: &[ModPath]) -> Vec<ModPath> {
    let members: BTreeSet<&ModPath> = group.iter().collect();
    let Some(start) = group.first() else {
        return Vec::new();
    };
    let mut came_from: BTreeMap<&ModPath, &ModPath> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for next in edges.get(node).into_iter().flatten() {
            if !members.contains(next) {
                continue;
            }
            if next == start {
                let mut cycle = vec![start.clone()];
                let mut at = node;
                while at != start {
                    cycle.push(at.clone());
                    at = came_from[at];
                }
                cycle.push(start.clone());
                cycle.reverse();
                return cycle;
            }
            if !came_from.contains_key(next) {
                came_from.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    group.to_vec()
}

/// One line for each module over the limit without a reason at its top.
fn long_modules(modules: &BTreeMap<ModPath, Module>) -> Vec<String> {
    modules
        .values()
        .filter_map(|module| {
            let lines = code_lines(&module.code);
            let reasoned = module
                .text
                .lines()
                .take_while(|line| line.starts_with("//!") || line.trim().is_empty())
                .any(|line| line.starts_with(LENGTH_MARKER));
            (lines > MAX_CODE_LINES && !reasoned).then(|| {
                format!(
                    "{}: {lines} lines of code, over {MAX_CODE_LINES}: split it, or say why it is one module in a `{LENGTH_MARKER}` line of its doc",
                    module.file.display()
                )
            })
        })
        .collect()
}

/// The lines of `code` (comments already blanked) that hold something.
fn code_lines(code: &str) -> usize {
    code.lines().filter(|line| !line.trim().is_empty()).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crate_of(files: &[(&str, &str)]) -> BTreeMap<ModPath, Module> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("xtask-layout-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        for (path, text) in files {
            let file = dir.join(path);
            fs::create_dir_all(file.parent().expect("a parent")).expect("a directory");
            fs::write(&file, text).expect("written");
        }
        let modules = read_crate(&dir).expect("read");
        let _ = fs::remove_dir_all(&dir);
        modules
    }

    fn path(text: &str) -> ModPath {
        text.split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn a_test_file_the_integration_binary_does_not_declare_is_a_problem() {
        let dir = std::env::temp_dir().join(format!("xtask-tests-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("made");
        fs::write(dir.join(INTEGRATION), "//! Doc.\n\nmod support;\nmod a;\n").expect("written");
        for file in ["a.rs", "b.rs", "notes.md"] {
            fs::write(dir.join(file), "").expect("written");
        }
        let problems = undeclared_tests(&dir).expect("read");
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("b.rs: not declared"), "{problems:?}");
    }

    #[test]
    fn paths_are_read_through_groups_and_anchors() {
        let code = "use crate::{a::X, b::{c::Y, Z}};\nuse super::d;\nfn f() { self::e::g(); kid::h(); other::i(); }\nmod kid;\n";
        let found = referenced_paths(&path("m::n"), code);
        assert_eq!(
            found,
            vec![
                path("a::X"),
                path("b::c::Y"),
                path("b::Z"),
                path("m::d"),
                path("m::n::e::g"),
                path("m::n::kid::h"),
            ]
        );
        assert_eq!(
            referenced_paths(&path("m::n"), "use super::super::q::R;"),
            vec![path("q::R")]
        );
    }

    #[test]
    fn comments_strings_and_chars_name_nothing() {
        let code = "// crate::a::X\n/* crate::b */ let s = \"crate::c\"; let r = r#\"crate::d\"#; let c = '\"'; crate::e::f();\n";
        let blanked = blank_literals(code);
        assert_eq!(blanked.lines().count(), code.lines().count());
        assert_eq!(referenced_paths(&[], &blanked), vec![path("e::f")]);
    }

    #[test]
    fn a_cycle_is_found_and_named_and_a_parent_is_no_dependency() {
        let modules = crate_of(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\npub struct Root;\n"),
            ("a.rs", "use crate::b::B;\nuse crate::Root;\n"),
            ("b/mod.rs", "mod inner;\npub use inner::B;\n"),
            ("b/inner.rs", "use crate::a::A;\nuse super::Thing;\n"),
            ("c.rs", "use crate::a::A;\n"),
        ]);
        let found = cycles(&modules);
        assert_eq!(found.len(), 1, "{found:?}");
        let cycle = &found[0];
        assert!(cycle.starts_with("import cycle: "), "{cycle}");
        for file in ["a.rs", "b/mod.rs", "b/inner.rs"] {
            assert!(cycle.contains(file), "{cycle}");
        }
        assert!(!cycle.contains("c.rs"), "{cycle}");
        // Without the edge a → b there is none: children naming their parents do not count.
        let modules = crate_of(&[
            ("lib.rs", "mod a;\nmod b;\npub struct Root;\n"),
            ("a.rs", "use crate::Root;\n"),
            ("b/mod.rs", "mod inner;\npub use inner::B;\n"),
            ("b/inner.rs", "use crate::a::A;\nuse super::Thing;\n"),
        ]);
        assert_eq!(cycles(&modules), Vec::<String>::new());
    }

    #[test]
    fn tests_are_left_out() {
        let modules = crate_of(&[
            ("lib.rs", "mod a;\nmod b;\n#[cfg(test)]\nmod b_tests;\n"),
            (
                "a.rs",
                "use crate::b::B;\n#[cfg(test)]\nmod tests {\n    use crate::b::B;\n}\n",
            ),
            (
                "b.rs",
                "pub struct B;\n#[cfg(test)]\npub(crate) mod tests {\n    use crate::a::A;\n}\n",
            ),
            ("b_tests.rs", "use crate::a::A;\nuse crate::b::B;\n"),
        ]);
        assert!(!modules.contains_key(&path("b_tests")));
        assert_eq!(cycles(&modules), Vec::<String>::new());
    }

    #[test]
    fn a_long_module_needs_a_reason() {
        let body = "fn f() {}\n".repeat(MAX_CODE_LINES + 1);
        let tests = format!(
            "#[cfg(test)]\nmod tests {{\n{}}}\n",
            "fn t() {}\n".repeat(900)
        );
        let modules = crate_of(&[
            ("lib.rs", "mod long;\nmod reasoned;\nmod short;\n"),
            ("long.rs", &format!("//! A module.\n{body}")),
            (
                "reasoned.rs",
                &format!("//! A module.\n//!\n//! Length: one grammar, read in one pass.\n{body}"),
            ),
            (
                "short.rs",
                &format!(
                    "//! Code and many tests.\n// comment\n\n{}{tests}",
                    "fn f() {}\n".repeat(10)
                ),
            ),
        ]);
        let found = long_modules(&modules);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("long.rs: 801 lines of code"),
            "{}",
            found[0]
        );
    }
}
