//! Deltas between two versions of a big file: the bytes of one (the target) as copies from
//! the other (the base) plus the bytes that differ. A store keeps the newest version of a big
//! file whole and the older ones as deltas against their successor, so twenty one-line edits
//! of a 10 MiB file cost one copy of it and twenty small deltas, not twenty copies.
//!
//! The instructions are a byte string: `0, offset, len` copies `len` bytes of the base from
//! `offset`; `1, len, bytes` adds `len` literal bytes. Numbers are LEB128 varints. Applying
//! checks every bound, so a damaged delta is an error, never a panic.

use std::ops::Range;
use std::time::{Duration, Instant};

use similar::{Algorithm, DiffOp, capture_diff_slices_deadline};

const COPY: u8 = 0;
const ADD: u8 = 1;

/// Prefixes and suffixes are compared in blocks of this many bytes (one `memcmp` each).
const BLOCK: usize = 4096;

/// How long the line diff of the changed middle may take before it settles for a coarser
/// answer (still correct, only larger).
const DIFF_DEADLINE: Duration = Duration::from_millis(20);

/// The instructions that rebuild `target` from `base`, or `None` when more than half of the
/// target would be literal bytes (then a delta saves too little to be worth a chain).
///
/// The common prefix and suffix are found first (a one-line edit leaves only that line);
/// what lies between is diffed line by line.
pub(crate) fn encode(target: &[u8], base: &[u8]) -> Option<Vec<u8>> {
    let ops = instructions(target, base);
    (ops.literal * 2 <= target.len()).then(|| ops.finish())
}

fn instructions(target: &[u8], base: &[u8]) -> Ops {
    let prefix = common_prefix(target, base);
    let suffix = common_suffix(&target[prefix..], &base[prefix..]);
    let target_mid = prefix..target.len() - suffix;
    let base_mid = prefix..base.len() - suffix;

    let mut ops = Ops::default();
    ops.copy(0, prefix);
    middle(&mut ops, target, target_mid, base, base_mid);
    ops.copy(base.len() - suffix, suffix);
    ops
}

/// Rebuilds the target from `base` and the instructions of [`encode`].
pub(crate) fn apply(delta: &[u8], base: &[u8]) -> Result<Vec<u8>, &'static str> {
    let mut out = Vec::with_capacity(base.len());
    let mut rest = delta;
    while let Some((&op, tail)) = rest.split_first() {
        rest = tail;
        match op {
            COPY => {
                let offset = varint(&mut rest)?;
                let len = varint(&mut rest)?;
                let range = offset
                    .checked_add(len)
                    .filter(|end| *end <= base.len())
                    .map(|end| offset..end)
                    .ok_or("a copy reaches past the end of its base")?;
                out.extend_from_slice(&base[range]);
            }
            ADD => {
                let len = varint(&mut rest)?;
                if len > rest.len() {
                    return Err("an addition reaches past the end of the delta");
                }
                let (bytes, tail) = rest.split_at(len);
                out.extend_from_slice(bytes);
                rest = tail;
            }
            _ => return Err("unknown delta instruction"),
        }
    }
    Ok(out)
}

/// Diffs the changed middles line by line, emitting copies for the lines they share.
fn middle(
    ops: &mut Ops,
    target: &[u8],
    target_mid: Range<usize>,
    base: &[u8],
    base_mid: Range<usize>,
) {
    if target_mid.is_empty() {
        return;
    }
    if base_mid.is_empty() {
        ops.add(&target[target_mid]);
        return;
    }
    let target_lines = lines(target, target_mid);
    let base_lines = lines(base, base_mid);
    // The lines themselves are the items: Myers only compares them, exactly.
    let diff = capture_diff_slices_deadline(
        Algorithm::Myers,
        &items(&base_lines, base),
        &items(&target_lines, target),
        Some(Instant::now() + DIFF_DEADLINE),
    );
    let span = |lines: &[Range<usize>], from: usize, len: usize| -> Range<usize> {
        match (lines.get(from), lines.get(from + len - 1)) {
            (Some(first), Some(last)) if len > 0 => first.start..last.end,
            _ => 0..0,
        }
    };
    for op in diff {
        match op {
            DiffOp::Equal { old_index, len, .. } => {
                let range = span(&base_lines, old_index, len);
                ops.copy(range.start, range.len());
            }
            DiffOp::Delete { .. } => {}
            DiffOp::Insert {
                new_index, new_len, ..
            }
            | DiffOp::Replace {
                new_index, new_len, ..
            } => ops.add(&target[span(&target_lines, new_index, new_len)]),
        }
    }
}

fn items<'a>(lines: &[Range<usize>], bytes: &'a [u8]) -> Vec<&'a [u8]> {
    lines.iter().map(|line| &bytes[line.clone()]).collect()
}

/// The lines of `bytes[range]` (each with its newline), as ranges of `bytes`.
fn lines(bytes: &[u8], range: Range<usize>) -> Vec<Range<usize>> {
    let mut lines = Vec::new();
    let mut start = range.start;
    for (i, byte) in bytes[range.clone()].iter().enumerate() {
        if *byte == b'\n' {
            let end = range.start + i + 1;
            lines.push(start..end);
            start = end;
        }
    }
    if start < range.end {
        lines.push(start..range.end);
    }
    lines
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let mut n = 0;
    for (x, y) in a.chunks(BLOCK).zip(b.chunks(BLOCK)) {
        if x == y {
            n += x.len();
        } else {
            return n + x.iter().zip(y).take_while(|(p, q)| p == q).count();
        }
    }
    n
}

fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let mut n = 0;
    for (x, y) in a.rchunks(BLOCK).zip(b.rchunks(BLOCK)) {
        if x == y {
            n += x.len();
        } else {
            return n + x
                .iter()
                .rev()
                .zip(y.iter().rev())
                .take_while(|(p, q)| p == q)
                .count();
        }
    }
    n
}

/// Instructions being written; adjacent copies and additions are merged.
#[derive(Default)]
struct Ops {
    bytes: Vec<u8>,
    /// The pending copy, not written yet, so that a following adjacent one joins it.
    copy: Option<Range<usize>>,
    /// The pending addition.
    add: Vec<u8>,
    /// Literal bytes so far.
    literal: usize,
}

impl Ops {
    fn copy(&mut self, offset: usize, len: usize) {
        if len == 0 {
            return;
        }
        self.flush_add();
        match &mut self.copy {
            Some(pending) if pending.end == offset => pending.end += len,
            _ => {
                self.flush_copy();
                self.copy = Some(offset..offset + len);
            }
        }
    }

    fn add(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.flush_copy();
        self.literal += bytes.len();
        self.add.extend_from_slice(bytes);
    }

    fn flush_copy(&mut self) {
        if let Some(range) = self.copy.take() {
            self.bytes.push(COPY);
            put_varint(&mut self.bytes, range.start);
            put_varint(&mut self.bytes, range.len());
        }
    }

    fn flush_add(&mut self) {
        if !self.add.is_empty() {
            self.bytes.push(ADD);
            put_varint(&mut self.bytes, self.add.len());
            self.bytes.append(&mut self.add);
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.flush_copy();
        self.flush_add();
        self.bytes
    }
}

fn put_varint(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn varint(rest: &mut &[u8]) -> Result<usize, &'static str> {
    let mut n: usize = 0;
    for shift in (0..usize::BITS).step_by(7) {
        let (&byte, tail) = rest.split_first().ok_or("the delta ends inside a number")?;
        *rest = tail;
        let bits = usize::from(byte & 0x7f);
        n |= bits
            .checked_shl(shift)
            .filter(|v| v >> shift == bits)
            .ok_or("a number overflows")?;
        if byte & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err("a number overflows")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(lines: usize, seed: u8) -> Vec<u8> {
        (0..lines)
            .flat_map(|i| {
                format!("line {i} of version {seed}: some words to fill it\n").into_bytes()
            })
            .collect()
    }

    #[test]
    fn a_one_line_edit_costs_about_that_line() {
        let base = text(50_000, 1);
        let mut target = base.clone();
        let at = target.len() / 2;
        target[at] = b'#';
        let ops = encode(&target, &base).unwrap();
        assert!(ops.len() < 32, "{} bytes of instructions", ops.len());
        assert_eq!(apply(&ops, &base).unwrap(), target);
    }

    #[test]
    fn scattered_line_edits_copy_the_lines_between() {
        let base = text(20_000, 1);
        let mut lines: Vec<Vec<u8>> = base
            .split_inclusive(|b| *b == b'\n')
            .map(<[u8]>::to_vec)
            .collect();
        for i in (0..lines.len()).step_by(100) {
            lines[i] = format!("changed {i}\n").into_bytes();
        }
        lines.insert(10, b"inserted\n".to_vec());
        lines.remove(5_000);
        let target = lines.concat();
        let ops = encode(&target, &base).unwrap();
        assert!(
            ops.len() < target.len() / 20,
            "{} bytes of instructions",
            ops.len()
        );
        assert_eq!(apply(&ops, &base).unwrap(), target);
    }

    #[test]
    fn unrelated_contents_are_not_worth_a_delta() {
        assert_eq!(encode(&text(1000, 1), &text(1000, 2)), None);
        assert_eq!(encode(b"something", b""), None);
    }

    #[test]
    fn damaged_instructions_are_errors() {
        let base = b"0123456789";
        assert!(apply(&[COPY, 5, 6], base).is_err(), "past the end");
        assert!(apply(&[ADD, 4, b'a'], base).is_err(), "short literal");
        assert!(apply(&[7], base).is_err(), "unknown instruction");
        assert!(apply(&[COPY, 0x80], base).is_err(), "cut number");
        assert!(
            apply(
                &[COPY; 1]
                    .iter()
                    .chain(&[0xff; 12])
                    .copied()
                    .collect::<Vec<_>>(),
                base
            )
            .is_err()
        );
        assert_eq!(apply(&[COPY, 2, 3, ADD, 1, b'x'], base).unwrap(), b"234x");
    }

    /// Random edits of random text: whenever a delta is made, it rebuilds the target exactly.
    fn edited() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
        let line = prop::collection::vec(prop::sample::select(b"ab\n".to_vec()), 0..12);
        (
            prop::collection::vec(line.clone(), 0..60),
            prop::collection::vec((any::<prop::sample::Index>(), prop::option::of(line)), 0..8),
        )
            .prop_map(|(lines, edits)| {
                let base: Vec<u8> = lines.concat();
                let mut target = lines;
                for (at, replacement) in edits {
                    if target.is_empty() {
                        break;
                    }
                    let i = at.index(target.len());
                    match replacement {
                        Some(line) => target[i] = line,
                        None => {
                            target.remove(i);
                        }
                    }
                }
                (target.concat(), base)
            })
    }

    proptest! {
        #[test]
        fn a_delta_rebuilds_its_target((target, base) in edited()) {
            // The diff has a deadline, so two encodings of one pair may differ (a coarser
            // one when the machine is slow); each must rebuild the target all the same.
            let ops = instructions(&target, &base).finish();
            prop_assert_eq!(&apply(&ops, &base).unwrap(), &target);
            if let Some(kept) = encode(&target, &base) {
                prop_assert_eq!(&apply(&kept, &base).unwrap(), &target);
            }
        }

        #[test]
        fn any_bytes_apply_without_panicking(
            delta in prop::collection::vec(any::<u8>(), 0..64),
            base in prop::collection::vec(any::<u8>(), 0..64),
        ) {
            let _ = apply(&delta, &base);
        }
    }
}
