//! Hashing a file: on two threads when it is big.

use std::fs;
use std::io::{self, Read, Seek};
use std::os::unix::fs::FileExt;

/// From this many bytes, [`hash_file_from`] hashes a file on two threads.
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
/// file too big to hold) is hashed as the two halves of BLAKE3's tree, each read and hashed
/// on a thread of its own, and the two joined: the same hash, in about half the time on two
/// processors (a gigabyte took 0.2 s on one here). Should the file's length change meanwhile
/// (another program writing a file shared with the workspace), it is hashed again on one
/// thread, to its end as it is then, as a smaller file is.
pub(crate) fn hash_file_from(file: &mut fs::File, start: u64) -> io::Result<(blake3::Hash, u64)> {
    let len = file.metadata()?.len().saturating_sub(start);
    if len >= PARALLEL_HASH_FROM
        && std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
        && let Some(hash) = hash_halves(file, start, len)?
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

/// The hash of the `len` bytes of `file` from `start` (more than one BLAKE3 chunk), as the
/// two subtrees of BLAKE3's tree under its root, each read and hashed on its own thread;
/// `None` when the file ended before `len` bytes.
fn hash_halves(file: &fs::File, start: u64, len: u64) -> io::Result<Option<blake3::Hash>> {
    use blake3::hazmat::{HasherExt, Mode, left_subtree_len, merge_subtrees_root};
    // Every subtree but the rightmost holds a power of two of chunks; the left one, from the
    // start, as many as the tree puts under the root's left, and the right one the rest.
    let left = left_subtree_len(len);
    let half = |from: u64, to: u64| -> io::Result<Option<blake3::hazmat::ChainingValue>> {
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
        Ok(Some(hasher.finalize_non_root()))
    };
    let (left_half, right_half) = std::thread::scope(|scope| {
        // Without a thread (the system refused one), the right half is hashed after.
        let right = std::thread::Builder::new().spawn_scoped(scope, || half(left, len));
        let left_half = half(0, left);
        let right_half = match right {
            Ok(thread) => {
                (thread.join()).unwrap_or_else(|_| Err(io::Error::other("a hashing thread failed")))
            }
            Err(_) => half(left, len),
        };
        (left_half, right_half)
    });
    Ok(match (left_half?, right_half?) {
        (Some(left), Some(right)) => Some(merge_subtrees_root(&left, &right, Mode::Hash)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Hashing the two halves of BLAKE3's tree on two threads gives the hash of the whole,
    /// wherever the bytes start in the file and whatever their length (each past one chunk:
    /// powers of two, one byte either side, odd sizes); a file that ends early gives none.
    #[test]
    fn a_file_hashed_in_halves_has_the_hash_of_its_bytes() {
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
            for start in [0usize, 1, 5] {
                fs::write(&path, &bytes[..start + len]).unwrap();
                let file = fs::File::open(&path).unwrap();
                let want = blake3::hash(&bytes[start..start + len]);
                let got = hash_halves(&file, start as u64, len as u64).unwrap();
                assert_eq!(got, Some(want), "{len} bytes from {start}");
                let short = hash_halves(&file, start as u64, len as u64 + 1).unwrap();
                assert_eq!(short, None, "{len} bytes from {start}, one more asked");
            }
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
