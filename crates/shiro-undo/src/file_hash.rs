//! Hashing a file: in parts on threads of their own when it is big.

use std::fs;
use std::io::{self, Read, Seek};
use std::os::unix::fs::FileExt;

use shiro_tools::on_threads;

/// From this many bytes, [`hash_file_from`] hashes a file in parts on threads of their own.
pub(crate) const PARALLEL_HASH_FROM: u64 = 32 << 20;

/// How many bytes each thread of [`hash_file_from`] reads at a time.
const HASH_PIECE: usize = 1 << 20;

/// How many bytes [`hash_file_from`] reads at a time on one thread, for a smaller file: a
/// buffer of 128 KiB or more is a mapping of fresh pages of its own, worth it only for a file
/// of many of them.
const SMALL_PIECE: usize = 64 << 10;

/// The BLAKE3 hash and the length of what `file` holds from `start` to its end, leaving the
/// file's position anywhere.
///
/// Hashing a file the system holds in memory is mostly copying its pages out, which runs at
/// one processor's speed. So a file of [`PARALLEL_HASH_FROM`] bytes or more (a version of a
/// file too big to hold) is hashed as subtrees of BLAKE3's tree of about equal size, each
/// read and hashed on a thread of its own, and the subtrees joined: the same hash, in about
/// half the time on two processors (a gigabyte took 0.2 s on one here). Should the file's
/// length change meanwhile (another program writing a file shared with the workspace), it is
/// hashed again on one thread, to its end as it is then, as a smaller file is.
pub(crate) fn hash_file_from(file: &mut fs::File, start: u64) -> io::Result<(blake3::Hash, u64)> {
    let len = file.metadata()?.len().saturating_sub(start);
    // Asked only for a big file: the answer opens and reads five files of the cgroup tree, a
    // cost the hash of a smaller one (a restore's check of a 1 MiB copy) need not pay.
    let threads = || std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    if len >= PARALLEL_HASH_FROM
        && let threads = threads()
        && threads >= 2
        && let Some(hash) = hash_in_parts(file, start, len, 2 * threads.min(4))?
        && file.metadata()?.len() == start + len
    {
        return Ok((hash, len));
    }
    file.seek(io::SeekFrom::Start(start))?;
    let mut hasher = blake3::Hasher::new();
    let mut piece = vec![0u8; SMALL_PIECE];
    let mut len = 0u64;
    loop {
        match file.read(&mut piece) {
            Ok(0) => return Ok((hasher.finalize(), len)),
            Ok(n) => {
                hasher.update(&piece[..n]);
                len += n as u64;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
}

/// A subtree of BLAKE3's tree over the bytes hashed: a span of them hashed as one, or two
/// subtrees joined.
enum Subtree {
    Span { from: u64, to: u64 },
    Join(Box<Subtree>, Box<Subtree>),
}

impl Subtree {
    /// The subtree over the bytes `from..to`, split as BLAKE3's tree splits it (its left side
    /// the largest power of two of chunks that leaves the right something) until no span is
    /// longer than `most` bytes.
    fn of(from: u64, to: u64, most: u64) -> Self {
        let len = to - from;
        if len <= most || len <= blake3::CHUNK_LEN as u64 {
            return Subtree::Span { from, to };
        }
        let mid = from + blake3::hazmat::left_subtree_len(len);
        Subtree::Join(
            Box::new(Subtree::of(from, mid, most)),
            Box::new(Subtree::of(mid, to, most)),
        )
    }

    /// Its spans, in order.
    fn spans(&self, into: &mut Vec<(u64, u64)>) {
        match self {
            Subtree::Span { from, to } => into.push((*from, *to)),
            Subtree::Join(left, right) => {
                left.spans(into);
                right.spans(into);
            }
        }
    }

    /// Joins the chaining values of its spans, taken in order from `values`.
    fn join(
        &self,
        values: &mut impl Iterator<Item = blake3::hazmat::ChainingValue>,
    ) -> Option<blake3::hazmat::ChainingValue> {
        use blake3::hazmat::{Mode, merge_subtrees_non_root};
        match self {
            Subtree::Span { .. } => values.next(),
            Subtree::Join(left, right) => Some(merge_subtrees_non_root(
                &left.join(values)?,
                &right.join(values)?,
                Mode::Hash,
            )),
        }
    }
}

/// The hash of the `len` bytes of `file` from `start`, as subtrees of BLAKE3's tree of at
/// most `len / parts` bytes (rounded up), each read and hashed on a thread of its own, then
/// joined (bytes that make one such subtree are hashed as one); `None` when the file ended
/// before `len` bytes.
///
/// BLAKE3's own halves are only as even as the length is close to a power of two: a file one
/// line longer than a gigabyte has a gigabyte on the left and the line on the right. Spans of
/// at most `len / parts` bytes keep the threads about equally busy whatever the length.
fn hash_in_parts(
    file: &fs::File,
    start: u64,
    len: u64,
    parts: usize,
) -> io::Result<Option<blake3::Hash>> {
    use blake3::hazmat::{HasherExt, Mode, merge_subtrees_root};
    let (left, right) = match Subtree::of(0, len, len.div_ceil(parts.max(1) as u64)) {
        Subtree::Join(left, right) => (left, right),
        Subtree::Span { .. } => return Ok(read_span(file, start, 0, len)?.map(|h| h.finalize())),
    };
    let mut spans = Vec::new();
    left.spans(&mut spans);
    right.spans(&mut spans);
    let span = |from: u64, to: u64| {
        let hashed = read_span(file, start, from, to)?;
        Ok(hashed.map(|hasher| hasher.finalize_non_root()))
    };
    let hashed = on_threads(
        &spans,
        1,
        |_, part| {
            part.iter()
                .map(|(from, to)| span(*from, *to))
                .collect::<Vec<_>>()
        },
        |_, _| vec![Err(io::Error::other("a hashing thread failed"))],
    );
    let mut values = Vec::with_capacity(spans.len());
    for value in hashed.into_iter().flatten() {
        match value? {
            Some(value) => values.push(value),
            None => return Ok(None),
        }
    }
    let mut values = values.into_iter();
    Ok(match (left.join(&mut values), right.join(&mut values)) {
        (Some(left), Some(right)) => Some(merge_subtrees_root(&left, &right, Mode::Hash)),
        _ => None,
    })
}

/// A hasher that has read the bytes `from..to` of `file` (counted from `start`) as that
/// part of BLAKE3's input; `None` when the file ended before them.
fn read_span(
    file: &fs::File,
    start: u64,
    from: u64,
    to: u64,
) -> io::Result<Option<blake3::Hasher>> {
    use blake3::hazmat::HasherExt;
    let mut hasher = blake3::Hasher::new();
    if from > 0 {
        hasher.set_input_offset(from);
    }
    let mut piece = vec![0u8; HASH_PIECE];
    let mut at = from;
    while at < to {
        let want = usize::try_from(to - at).map_or(HASH_PIECE, |rest| rest.min(HASH_PIECE));
        match file.read_at(&mut piece[..want], start + at) {
            Ok(0) => return Ok(None),
            Ok(n) => {
                hasher.update(&piece[..n]);
                at += n as u64;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(Some(hasher))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Hashing subtrees of BLAKE3's tree on threads of their own gives the hash of the whole,
    /// wherever the bytes start in the file, whatever their length (each past one chunk:
    /// powers of two, one byte either side, odd sizes) and however many parts; a file that
    /// ends early gives none.
    #[test]
    fn a_file_hashed_in_parts_has_the_hash_of_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..(3 << 20) + 5u32).map(|i| (i * 7 % 251) as u8).collect();
        for len in [
            1025usize,
            2047,
            2048,
            2049,
            4096 * 3 + 1,
            1 << 20,
            (1 << 20) + 1,
            3 << 20,
        ] {
            for (start, parts) in [(0usize, 1usize), (1, 2), (5, 3), (0, 4), (1, 8)] {
                fs::write(&path, &bytes[..start + len]).unwrap();
                let file = fs::File::open(&path).unwrap();
                let want = blake3::hash(&bytes[start..start + len]);
                let got = hash_in_parts(&file, start as u64, len as u64, parts).unwrap();
                assert_eq!(got, Some(want), "{len} bytes from {start} in {parts} parts");
                let short = hash_in_parts(&file, start as u64, len as u64 + 1, parts).unwrap();
                assert_eq!(short, None, "{len} bytes from {start}, one more asked");
            }
        }
    }

    /// The parts are about even, whatever BLAKE3's own halves are: a length one line past a
    /// power of two is four even spans and the line, not the power of two and the line.
    #[test]
    fn the_parts_are_about_even() {
        let spans = |len: u64, parts: u64| {
            let mut spans = Vec::new();
            Subtree::of(0, len, len.div_ceil(parts)).spans(&mut spans);
            spans.iter().map(|(from, to)| to - from).collect::<Vec<_>>()
        };
        assert_eq!(
            spans((1 << 30) + 5, 4),
            [1 << 28, 1 << 28, 1 << 28, 1 << 28, 5]
        );
        // 700 MiB: 512 MiB on the left (four of 128), then 128 and 60.
        let mib = 1 << 20;
        assert_eq!(
            spans(700 * mib, 4),
            [
                128 * mib,
                128 * mib,
                128 * mib,
                128 * mib,
                128 * mib,
                60 * mib
            ]
        );
        for len in [PARALLEL_HASH_FROM, 3 << 30, (5 << 30) + 1, 1_000_000_007] {
            let spans = spans(len, 8);
            assert_eq!(spans.iter().sum::<u64>(), len);
            assert!(
                spans.iter().all(|span| *span <= len.div_ceil(8)),
                "{len}: {spans:?}"
            );
        }
    }

    /// A file past the size hashed on two threads reads as the hash of its bytes, and so
    /// does a small one, from any start.
    #[test]
    fn files_big_and_small_hash_as_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let big = PARALLEL_HASH_FROM as usize + 3 * 1024 + 17;
        let bytes: Vec<u8> = (0..big as u32).map(|i| (i % 241) as u8).collect();
        for len in [0, 5, 70_000, big - 1] {
            fs::write(&path, &bytes[..=len]).unwrap();
            let mut file = fs::File::open(&path).unwrap();
            let (hash, found) = hash_file_from(&mut file, 1).unwrap();
            assert_eq!((hash, found), (blake3::hash(&bytes[1..=len]), len as u64));
        }
    }
}
