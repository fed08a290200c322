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
    let hashed = each_on_a_thread(&spans, |(from, to)| {
        let hashed = read_span(file, start, *from, *to)?;
        Ok(hashed.map(|hasher| hasher.finalize_non_root()))
    })?;
    let Some(values) = hashed else {
        return Ok(None);
    };
    let mut values = values.into_iter();
    Ok(match (left.join(&mut values), right.join(&mut values)) {
        (Some(left), Some(right)) => Some(merge_subtrees_root(&left, &right, Mode::Hash)),
        _ => None,
    })
}

/// What `work` gives for each of `items`, each on a thread of its own (see [`on_threads`]);
/// `None` when it gives `None` for any.
fn each_on_a_thread<T: Sync, V: Send>(
    items: &[T],
    work: impl Fn(&T) -> io::Result<Option<V>> + Sync,
) -> io::Result<Option<Vec<V>>> {
    let done = on_threads(
        items,
        1,
        |_, part| part.iter().map(&work).collect::<Vec<_>>(),
        |_, _| vec![Err(io::Error::other("a hashing thread failed"))],
    );
    done.into_iter().flatten().collect()
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

/// The hashes and lengths of `old` and `new`, two versions of one file, hashing what they
/// share once.
///
/// A command that appends a line to a file of a gigabyte leaves two versions that differ in
/// that line alone, and hashing both reads and hashes two gigabytes. BLAKE3's tree lets the
/// common part be hashed once: every span of a power of two of whole chunks, aligned to its
/// length and lying wholly inside both versions, is a node of both trees (unless it is one of
/// them whole, whose value is the root's). Each such span is read from both files and
/// compared as it is hashed, and its chaining value serves both trees when the bytes are the
/// same; the rest of each file is hashed on its own. The spans are read on threads of their
/// own, as [`hash_file_from`] reads a big file's. Versions shorter than
/// [`PARALLEL_HASH_FROM`], or whose lengths change meanwhile, are hashed one after the other.
pub(crate) fn hash_pair(
    old: &mut fs::File,
    new: &mut fs::File,
) -> io::Result<[(blake3::Hash, u64); 2]> {
    let lens = [old.metadata()?.len(), new.metadata()?.len()];
    if lens[0].min(lens[1]) >= PARALLEL_HASH_FROM {
        let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        let most = lens[0]
            .max(lens[1])
            .div_ceil(2 * threads.clamp(1, 4) as u64);
        if let Some([old_hash, new_hash]) = hash_pair_in_parts([old, new], lens, most)?
            && old.metadata()?.len() == lens[0]
            && new.metadata()?.len() == lens[1]
        {
            return Ok([(old_hash, lens[0]), (new_hash, lens[1])]);
        }
    }
    Ok([hash_file_from(old, 0)?, hash_file_from(new, 0)?])
}

/// A span of bytes hashed as a subtree of one or both files' trees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Job {
    /// A span of both files, a node of both trees: read from both, hashed once if the same.
    Shared { from: u64, to: u64 },
    /// A span of one file (0 the old, 1 the new) alone.
    Own { file: usize, from: u64, to: u64 },
}

/// A file's tree, down to the jobs whose values make it.
enum Shape {
    Job(usize),
    Join(Box<Shape>, Box<Shape>),
}

impl Shape {
    /// The shape of the node over `from..to` of the tree of file `file`, whose length is
    /// `lens[file]`, splitting it as BLAKE3 does until each part is a span both files share
    /// ([`Job::Shared`], at most `most` bytes), or lies past what they could share, or is one
    /// chunk.
    fn of(
        file: usize,
        (from, to): (u64, u64),
        lens: [u64; 2],
        most: u64,
        jobs: &mut Vec<Job>,
    ) -> Self {
        const CHUNK: u64 = blake3::CHUNK_LEN as u64;
        let shared_end = lens[0].min(lens[1]) / CHUNK * CHUNK;
        let len = to - from;
        let whole = from == 0 && lens.contains(&to);
        let shared = to <= shared_end
            && len % CHUNK == 0
            && (len / CHUNK).is_power_of_two()
            && from % len == 0
            && !whole;
        // A shared chunk is a job even if `most` is smaller: it cannot be split.
        let job = if shared && (len <= most || len <= CHUNK) {
            Some(Job::Shared { from, to })
        } else if (!shared && len <= CHUNK) || (from >= shared_end && len <= most) {
            Some(Job::Own { file, from, to })
        } else {
            None
        };
        if let Some(job) = job {
            let index = jobs.iter().position(|j| *j == job).unwrap_or_else(|| {
                jobs.push(job);
                jobs.len() - 1
            });
            return Shape::Job(index);
        }
        let mid = from + blake3::hazmat::left_subtree_len(len);
        Shape::Join(
            Box::new(Shape::of(file, (from, mid), lens, most, jobs)),
            Box::new(Shape::of(file, (mid, to), lens, most, jobs)),
        )
    }

    /// The chaining value of this node of file `file`'s tree, from the jobs' values.
    fn value(
        &self,
        file: usize,
        values: &[[blake3::hazmat::ChainingValue; 2]],
    ) -> Option<blake3::hazmat::ChainingValue> {
        use blake3::hazmat::{Mode, merge_subtrees_non_root};
        match self {
            Shape::Job(index) => values.get(*index).map(|value| value[file]),
            Shape::Join(left, right) => Some(merge_subtrees_non_root(
                &left.value(file, values)?,
                &right.value(file, values)?,
                Mode::Hash,
            )),
        }
    }
}

/// The hashes of `files`, of `lens` bytes each (both more than one chunk), from jobs of at
/// most `most` bytes on threads of their own; `None` when a file ended early.
fn hash_pair_in_parts(
    files: [&fs::File; 2],
    lens: [u64; 2],
    most: u64,
) -> io::Result<Option<[blake3::Hash; 2]>> {
    use blake3::hazmat::{Mode, merge_subtrees_root};
    let mut jobs = Vec::new();
    let mut roots = Vec::with_capacity(2);
    for (file, len) in lens.into_iter().enumerate() {
        if len <= blake3::CHUNK_LEN as u64 {
            return Err(io::Error::other("a file of one chunk has no subtrees"));
        }
        let mid = blake3::hazmat::left_subtree_len(len);
        let left = Shape::of(file, (0, mid), lens, most, &mut jobs);
        let right = Shape::of(file, (mid, len), lens, most, &mut jobs);
        roots.push((left, right));
    }
    let Some(values) = each_on_a_thread(&jobs, |job| run(files, *job))? else {
        return Ok(None);
    };
    let mut hashes = [blake3::Hash::from_bytes([0; 32]); 2];
    for (file, (left, right)) in roots.iter().enumerate() {
        match (left.value(file, &values), right.value(file, &values)) {
            (Some(left), Some(right)) => {
                hashes[file] = merge_subtrees_root(&left, &right, Mode::Hash);
            }
            _ => return Ok(None),
        }
    }
    Ok(Some(hashes))
}

/// The chaining values `job` gives the old file's tree and the new one's (the same value
/// twice for a span of one file alone); `None` when a file ended before the span did.
fn run(files: [&fs::File; 2], job: Job) -> io::Result<Option<[blake3::hazmat::ChainingValue; 2]>> {
    use blake3::hazmat::HasherExt;
    let (from, to) = match job {
        Job::Own { file, from, to } => {
            let hashed = read_span(files[file], 0, from, to)?;
            return Ok(hashed.map(|hasher| [hasher.finalize_non_root(); 2]));
        }
        Job::Shared { from, to } => (from, to),
    };
    let mut old = blake3::Hasher::new();
    old.set_input_offset(from);
    // Made from the old one's state at the first piece that differs.
    let mut new: Option<blake3::Hasher> = None;
    let mut pieces = [vec![0u8; HASH_PIECE], vec![0u8; HASH_PIECE]];
    let mut at = from;
    while at < to {
        let want = usize::try_from(to - at).map_or(HASH_PIECE, |rest| rest.min(HASH_PIECE));
        let [a, b] = &mut pieces;
        if !read_full_at(files[0], &mut a[..want], at)?
            || !read_full_at(files[1], &mut b[..want], at)?
        {
            return Ok(None);
        }
        if new.is_none() && a[..want] != b[..want] {
            new = Some(old.clone());
        }
        old.update(&a[..want]);
        if let Some(new) = &mut new {
            new.update(&b[..want]);
        }
        at += want as u64;
    }
    let old = old.finalize_non_root();
    Ok(Some([old, new.map_or(old, |new| new.finalize_non_root())]))
}

/// Fills `buf` from `file` at `offset`; `false` when the file ends first.
fn read_full_at(file: &fs::File, mut buf: &mut [u8], mut offset: u64) -> io::Result<bool> {
    while !buf.is_empty() {
        match file.read_at(buf, offset) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(true)
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

    /// How a test changes the old version into the new one.
    #[derive(Debug, Clone)]
    enum Edit {
        Append(Vec<u8>),
        Truncate(usize),
        Overwrite { at: prop::sample::Index, byte: u8 },
        Same,
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            prop::collection::vec(any::<u8>(), 1..5000).prop_map(Edit::Append),
            (1usize..5000).prop_map(Edit::Truncate),
            (any::<prop::sample::Index>(), any::<u8>())
                .prop_map(|(at, byte)| Edit::Overwrite { at, byte }),
            Just(Edit::Same),
        ]
    }

    use proptest::prelude::*;

    /// A length past one chunk: any, or a power of two of chunks (where one version is a
    /// node of the other's tree), or one either side of one.
    fn length() -> impl Strategy<Value = u64> {
        prop_oneof![
            1025u64..(8 << 20),
            (11u32..23, -1i64..=1).prop_map(|(power, side)| ((1i64 << power) + side) as u64),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Two versions hashed together have the hashes of their bytes, whatever the change
        /// between them (bytes appended, cut off, one overwritten, none), the lengths (one
        /// chunk and a byte up, powers of two and odd sizes) and the size of the jobs.
        #[test]
        fn two_versions_hashed_together_have_the_hashes_of_their_bytes(
            len in prop_oneof![1025usize..70_000, Just(16 << 10), Just(32 << 10), Just((32 << 10) + 1)],
            edit in edit(),
            most in prop_oneof![Just(1024u64), Just(3000), Just(8192), Just(1 << 20)],
            seed in any::<u8>(),
        ) {
            let old: Vec<u8> = (0..len).map(|i| (i as u32 * 31 + u32::from(seed)) as u8).collect();
            let mut new = old.clone();
            match edit {
                Edit::Append(tail) => new.extend_from_slice(&tail),
                Edit::Truncate(cut) => new.truncate(len.saturating_sub(cut).max(1025)),
                Edit::Overwrite { at, byte } => {
                    let at = at.index(len);
                    new[at] = new[at].wrapping_add(byte.max(1));
                }
                Edit::Same => {}
            }
            let dir = tempfile::tempdir().unwrap();
            fs::write(dir.path().join("old"), &old).unwrap();
            fs::write(dir.path().join("new"), &new).unwrap();
            let files = [
                fs::File::open(dir.path().join("old")).unwrap(),
                fs::File::open(dir.path().join("new")).unwrap(),
            ];
            let lens = [old.len() as u64, new.len() as u64];
            let got = hash_pair_in_parts([&files[0], &files[1]], lens, most).unwrap();
            prop_assert_eq!(got, Some([blake3::hash(&old), blake3::hash(&new)]));
            // Asked for more than a file holds, there is no hash.
            let longer = [lens[0], lens[1] + 1];
            prop_assert_eq!(hash_pair_in_parts([&files[0], &files[1]], longer, most).unwrap(), None);
        }

        /// Every whole chunk that both versions hold is read once, as part of a span of both,
        /// and each file's own jobs hold only what lies past that: what they share is hashed
        /// once when it is the same.
        #[test]
        fn all_that_two_versions_could_share_is_read_once(
            lens in (length(), length()),
            most in prop_oneof![1u64..2048, 2048u64..(4 << 20)],
        ) {
            let lens = [lens.0, lens.1];
            let mut jobs = Vec::new();
            for (file, len) in lens.into_iter().enumerate() {
                let mid = blake3::hazmat::left_subtree_len(len);
                Shape::of(file, (0, mid), lens, most, &mut jobs);
                Shape::of(file, (mid, len), lens, most, &mut jobs);
            }
            let shared_end = lens[0].min(lens[1]) / 1024 * 1024;
            let mut shared = 0;
            let mut own = [0; 2];
            for job in &jobs {
                match *job {
                    Job::Shared { from, to } => shared += to - from,
                    Job::Own { file, from, to } => {
                        prop_assert!(from >= shared_end, "{job:?} lies in what both hold");
                        own[file] += to - from;
                    }
                }
            }
            prop_assert_eq!(shared, shared_end);
            prop_assert_eq!(own, [lens[0] - shared_end, lens[1] - shared_end]);
        }
    }

    /// Versions past the size hashed in parts, appended to, have their bytes' hashes through
    /// [`hash_pair`], and so do smaller ones.
    #[test]
    fn a_big_file_appended_to_hashes_as_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let big = PARALLEL_HASH_FROM as usize + 4096 + 3;
        let old: Vec<u8> = (0..big as u32).map(|i| (i % 239) as u8).collect();
        for len in [5000, big] {
            let mut new = old[..len].to_vec();
            new.extend_from_slice(b"tail\n");
            fs::write(dir.path().join("old"), &old[..len]).unwrap();
            fs::write(dir.path().join("new"), &new).unwrap();
            let mut files = [
                fs::File::open(dir.path().join("old")).unwrap(),
                fs::File::open(dir.path().join("new")).unwrap(),
            ];
            let [a, b] = &mut files;
            let got = hash_pair(a, b).unwrap();
            assert_eq!(
                got,
                [
                    (blake3::hash(&old[..len]), len as u64),
                    (blake3::hash(&new), new.len() as u64)
                ]
            );
        }
    }
}
