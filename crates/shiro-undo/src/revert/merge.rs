//! The three-way merge of a revert, line by line: the changes from `base` to `theirs` are
//! applied to `ours` where `ours` did not change the same lines.
//!
//! Lines keep their terminators (`\n`, `\r\n`, or none for a last line without one), and a
//! byte-order mark is part of the first line, so every byte of a file survives exactly.
//! Each side is diffed from the base with `similar`'s Myers diff; the changed regions of both
//! sides are then walked together in base order. Changes of one side only are taken. Changes
//! of both sides that overlap, or touch (no unchanged base line between them, as git rules),
//! form one region: taken when both sides made it the same, a conflict otherwise.

use std::ops::Range;
use std::time::{Duration, Instant};

use similar::{Algorithm, DiffOp, capture_diff_slices_deadline};

/// How long one diff may take before it settles for a coarser answer: still a correct diff,
/// only with larger regions, so a merge can only conflict more, never merge wrongly. Far more
/// than any source file needs.
const DIFF_DEADLINE: Duration = Duration::from_secs(2);

/// Whether `bytes` are text a revert merges: valid UTF-8 without a NUL byte.
pub(crate) fn is_text(bytes: &[u8]) -> bool {
    !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok()
}

/// What merging came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Merged {
    /// The merged bytes.
    Clean(Vec<u8>),
    /// The regions both sides changed differently, in order.
    Conflicts(Vec<ConflictHunk>),
}

/// A region of a file that a revert cannot merge: the turn changed these lines, and they
/// were changed since in another way.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConflictHunk {
    /// The first line of the region in the current file, counting from 1. When the current
    /// file has no line there (`lines` is 0), the region sits just before this line.
    pub line: usize,
    /// How many lines of the current file the region covers.
    pub lines: usize,
    /// Those lines, as they are now (with their line endings).
    pub now: String,
    /// What the turn left there (its after-image's lines).
    pub turn_made: String,
    /// What was there before the turn: what the revert would put back.
    pub before_turn: String,
}

/// One changed region of a side: the base lines it replaces and the side's lines there.
#[derive(Debug, Clone)]
struct Hunk {
    base: Range<usize>,
    side: Range<usize>,
}

/// Splits `bytes` into lines, each with its terminator (the last may have none).
fn lines(bytes: &[u8]) -> Vec<&[u8]> {
    bytes.split_inclusive(|byte| *byte == b'\n').collect()
}

/// The regions where `side` differs from `base`, in order, each separated from the next by
/// at least one unchanged line.
fn hunks(base: &[&[u8]], side: &[&[u8]]) -> Vec<Hunk> {
    let deadline = Instant::now().checked_add(DIFF_DEADLINE);
    let mut out: Vec<Hunk> = Vec::new();
    for op in capture_diff_slices_deadline(Algorithm::Myers, base, side, deadline) {
        if let DiffOp::Equal { .. } = op {
            continue;
        }
        let (base_range, side_range) = (op.old_range(), op.new_range());
        match out.last_mut() {
            Some(last)
                if last.base.end == base_range.start && last.side.end == side_range.start =>
            {
                last.base.end = base_range.end;
                last.side.end = side_range.end;
            }
            _ => out.push(Hunk {
                base: base_range,
                side: side_range,
            }),
        }
    }
    out
}

/// The lines of `side` for the base lines `range`, given the side's `hunks` that lie within it.
fn region<'a>(
    base: &[&'a [u8]],
    side: &[&'a [u8]],
    hunks: &[&Hunk],
    range: &Range<usize>,
) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut at = range.start;
    for hunk in hunks {
        out.extend_from_slice(&base[at..hunk.base.start]);
        out.extend_from_slice(&side[hunk.side.clone()]);
        at = hunk.base.end;
    }
    out.extend_from_slice(&base[at..range.end]);
    out
}

fn text(lines: &[&[u8]]) -> String {
    String::from_utf8_lossy(&lines.concat()).into_owned()
}

/// Merges the change from `base` to `theirs` into `ours`.
pub(crate) fn merge(base: &[u8], ours: &[u8], theirs: &[u8]) -> Merged {
    let base = lines(base);
    let ours = lines(ours);
    let theirs = lines(theirs);
    let ours_hunks = hunks(&base, &ours);
    let theirs_hunks = hunks(&base, &theirs);

    let mut merged: Vec<&[u8]> = Vec::with_capacity(ours.len());
    let mut conflicts = Vec::new();
    // Where the base has been copied up to, and how many more lines ours has than the base
    // before that point (to number the current file's lines).
    let mut copied = 0;
    let mut shift: isize = 0;
    let (mut o, mut t) = (0, 0);
    loop {
        // The next region: the earliest hunk of either side, with every hunk of either side
        // that overlaps or touches what the region covers so far.
        let start = match (ours_hunks.get(o), theirs_hunks.get(t)) {
            (None, None) => break,
            (Some(a), None) => a.base.start,
            (None, Some(b)) => b.base.start,
            (Some(a), Some(b)) => a.base.start.min(b.base.start),
        };
        let mut end = start;
        let (o_first, t_first) = (o, t);
        loop {
            if let Some(h) = ours_hunks.get(o).filter(|h| h.base.start <= end) {
                end = end.max(h.base.end);
                o += 1;
            } else if let Some(h) = theirs_hunks.get(t).filter(|h| h.base.start <= end) {
                end = end.max(h.base.end);
                t += 1;
            } else {
                break;
            }
        }
        let ours_in: Vec<&Hunk> = ours_hunks[o_first..o].iter().collect();
        let theirs_in: Vec<&Hunk> = theirs_hunks[t_first..t].iter().collect();
        let range = start..end;
        merged.extend_from_slice(&base[copied..start]);
        let ours_region = region(&base, &ours, &ours_in, &range);
        let theirs_region = region(&base, &theirs, &theirs_in, &range);
        if theirs_in.is_empty() || ours_region == theirs_region {
            merged.extend_from_slice(&ours_region);
        } else if ours_in.is_empty() {
            merged.extend_from_slice(&theirs_region);
        } else {
            let first = start.saturating_add_signed(shift);
            conflicts.push(ConflictHunk {
                line: first + 1,
                lines: ours_region.len(),
                now: text(&ours_region),
                turn_made: text(&base[range.clone()]),
                before_turn: text(&theirs_region),
            });
        }
        shift += ours_region.len() as isize - range.len() as isize;
        copied = end;
    }
    if !conflicts.is_empty() {
        return Merged::Conflicts(conflicts);
    }
    merged.extend_from_slice(&base[copied..]);
    Merged::Clean(merged.concat())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn clean(base: &str, ours: &str, theirs: &str) -> String {
        match merge(base.as_bytes(), ours.as_bytes(), theirs.as_bytes()) {
            Merged::Clean(bytes) => String::from_utf8(bytes).unwrap(),
            Merged::Conflicts(hunks) => panic!("conflicts: {hunks:#?}"),
        }
    }

    fn conflicts(base: &str, ours: &str, theirs: &str) -> Vec<ConflictHunk> {
        match merge(base.as_bytes(), ours.as_bytes(), theirs.as_bytes()) {
            Merged::Clean(bytes) => panic!("merged: {:?}", String::from_utf8_lossy(&bytes)),
            Merged::Conflicts(hunks) => hunks,
        }
    }

    #[test]
    fn changes_apart_merge() {
        // The turn changed line 2 (theirs puts it back); the user changed line 4 since.
        let base = "one\nTWO\nthree\nfour\nfive\n";
        let ours = "one\nTWO\nthree\nFOUR\nfive\n";
        let theirs = "one\ntwo\nthree\nfour\nfive\n";
        assert_eq!(clean(base, ours, theirs), "one\ntwo\nthree\nFOUR\nfive\n");
        // Lines added and removed on both sides, apart.
        let base = "a\nb\nc\nd\ne\nf\ng\n";
        let ours = "new\na\nb\nc\nd\ne\ng\n";
        let theirs = "a\nc\nextra\nd\ne\nf\ng\n";
        assert_eq!(clean(base, ours, theirs), "new\na\nc\nextra\nd\ne\ng\n");
    }

    #[test]
    fn one_side_alone_is_taken() {
        let base = "a\nb\n";
        assert_eq!(clean(base, base, "a\nB\n"), "a\nB\n");
        assert_eq!(clean(base, "a\nB\n", base), "a\nB\n");
        assert_eq!(clean(base, base, base), base);
    }

    #[test]
    fn the_same_change_on_both_sides_is_no_conflict() {
        // The user already undid the turn's change to line 2 by hand, and changed line 4.
        let base = "1\nTWO\n3\n4\n";
        let ours = "1\n2\n3\nfour\n";
        let theirs = "1\n2\n3\n4\n";
        assert_eq!(clean(base, ours, theirs), "1\n2\n3\nfour\n");
    }

    #[test]
    fn overlapping_changes_conflict_with_their_lines() {
        let base = "fn main() {\n    run(1);\n}\n";
        let ours = "fn main() {\n    run(2);\n    log();\n}\n";
        let theirs = "fn main() {\n    start(1);\n}\n";
        let hunks = conflicts(base, ours, theirs);
        assert_eq!(
            hunks,
            [ConflictHunk {
                line: 2,
                lines: 2,
                now: "    run(2);\n    log();\n".to_owned(),
                turn_made: "    run(1);\n".to_owned(),
                before_turn: "    start(1);\n".to_owned(),
            }]
        );
    }

    #[test]
    fn touching_changes_conflict() {
        // Line 2 changed by the turn, line 3 since: no unchanged line between them.
        let base = "1\n2\n3\n4\n";
        let hunks = conflicts(base, "1\n2\nthree\n4\n", "1\ntwo\n3\n4\n");
        assert_eq!((hunks[0].line, hunks[0].lines), (2, 2));
        // Lines inserted at the same place by both sides.
        let hunks = conflicts("1\n2\n", "1\nmine\n2\n", "1\ntheirs\n2\n");
        assert_eq!((hunks[0].line, hunks[0].lines), (2, 1));
        assert_eq!(hunks[0].turn_made, "");
    }

    #[test]
    fn conflicts_are_numbered_in_the_current_file() {
        // Ours added three lines at the top; the conflict is at base line 5, now line 8.
        let base = "a\nb\nc\nd\ne\nf\n";
        let ours = "x\ny\nz\na\nb\nc\nd\nE\nf\n";
        let theirs = "a\nb\nc\nd\nee\nf\n";
        let hunks = conflicts(base, ours, theirs);
        assert_eq!(hunks.len(), 1);
        assert_eq!((hunks[0].line, hunks[0].lines), (8, 1));
        assert_eq!(hunks[0].now, "E\n");
        // A deletion in ours: the region has no current line and sits before line 2.
        let hunks = conflicts("1\n2\n3\n", "1\n3\n", "1\ntwo\n3\n");
        assert_eq!((hunks[0].line, hunks[0].lines), (2, 0));
        // Two separate conflicts in one file.
        let hunks = conflicts("1\n2\n3\n4\n5\n", "1\nB\n3\nD\n5\n", "1\nb\n3\nd\n5\n");
        let at: Vec<(usize, usize)> = hunks.iter().map(|h| (h.line, h.lines)).collect();
        assert_eq!(at, [(2, 1), (4, 1)]);
    }

    #[test]
    fn crlf_lines_survive_exactly() {
        let base = "one\r\nTWO\r\nthree\r\nfour\r\n";
        let ours = "one\r\nTWO\r\nthree\r\nFOUR\r\n";
        let theirs = "one\r\ntwo\r\nthree\r\nfour\r\n";
        assert_eq!(clean(base, ours, theirs), "one\r\ntwo\r\nthree\r\nFOUR\r\n");
        // Mixed endings stay as each line has them.
        let base = "a\r\nb\nc\r\nd\n";
        let ours = "a\r\nb\nc\r\nD\n";
        let theirs = "A\r\nb\nc\r\nd\n";
        assert_eq!(clean(base, ours, theirs), "A\r\nb\nc\r\nD\n");
    }

    #[test]
    fn a_missing_final_newline_survives() {
        // Neither side touches the last line, which has no newline.
        let base = "1\n2\nTHREE\n4\nlast";
        let ours = "one\n2\nTHREE\n4\nlast";
        let theirs = "1\n2\n3\n4\nlast";
        assert_eq!(clean(base, ours, theirs), "one\n2\n3\n4\nlast");
        // The turn added a final newline; the user changed the first line since.
        assert_eq!(clean("1\n2\n3\n", "one\n2\n3\n", "1\n2\n3"), "one\n2\n3");
        // The turn removed the final newline; it comes back.
        assert_eq!(clean("1\n2\n3", "one\n2\n3", "1\n2\n3\n"), "one\n2\n3\n");
    }

    #[test]
    fn a_byte_order_mark_survives() {
        let bom = "\u{feff}";
        let base = format!("{bom}a\nB\nc\nd\n");
        let ours = format!("{bom}a\nB\nc\nD\n");
        let theirs = format!("{bom}a\nb\nc\nd\n");
        let merged = clean(&base, &ours, &theirs);
        assert_eq!(merged, format!("{bom}a\nb\nc\nD\n"));
        assert!(merged.as_bytes().starts_with(&[0xef, 0xbb, 0xbf]));
        // The user added a BOM since; the turn's change further down is reverted around it.
        let merged = clean("a\nb\nC\n", &format!("{bom}a\nb\nC\n"), "a\nb\nc\n");
        assert_eq!(merged, format!("{bom}a\nb\nc\n"));
        // The BOM is part of the first line: a change of that line touches it.
        assert_eq!(
            conflicts("a\nB\n", &format!("{bom}a\nB\n"), "a\nb\n").len(),
            1
        );
    }

    #[test]
    fn empty_files() {
        // The turn filled an empty file; the user added a line at its end since: touching.
        assert_eq!(conflicts("a\n", "a\nb\n", "").len(), 1);
        // The turn filled an empty file and the user emptied it since: the same change.
        assert_eq!(clean("a\n", "", ""), "");
        // The turn emptied a file; the user wrote to it since: both inserted at line 1.
        let hunks = conflicts("", "mine\n", "theirs\n");
        assert_eq!((hunks[0].line, hunks[0].lines), (1, 1));
        // All empty.
        assert_eq!(clean("", "", ""), "");
        // Only theirs differs from an empty base.
        assert_eq!(clean("", "", "x\n"), "x\n");
    }

    #[test]
    fn text_is_utf8_without_nul() {
        assert!(is_text(b""));
        assert!(is_text("caf\u{e9}\r\n".as_bytes()));
        assert!(!is_text(b"a\0b"));
        assert!(!is_text(&[0xff, 0xfe, b'a']));
    }
}
