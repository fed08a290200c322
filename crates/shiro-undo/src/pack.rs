//! Packs: many copies in one file, written and flushed once.
//!
//! Stored one blob per file, each copy cost a new file, its flush and a rename: for a turn of
//! many small files, seconds. So a turn, when it finishes, writes the new pre-images it
//! stores into one pack (`blobs/<id>-0.pack`), and a restore writes the copies it keeps of
//! what it replaces (for the opposite operation) into another (`blobs/<id>-<n>.pack`). Every
//! pack is named in the records of the turns that need it, and kept as long as one of them is
//! in the log; [`Packed`] knows which hashes the named packs hold, for deduplication.
//!
//! A pack is the magic bytes, the copies (each LZ4-compressed, or as they are when that does
//! not shrink them; a format-10 store's are zlib-compressed), an index of `(hash, offset,
//! length)` entries, and a trailer: the index's offset, the number of entries, and the magic
//! bytes again. Every copy read back is checked against its hash.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Weak;
use std::sync::atomic::{AtomicU64, Ordering};

use shiro_tools::on_threads;

use crate::image::ContentHash;

/// The first bytes of a pack, which name its format.
pub(crate) const MAGIC: &[u8; 8] = b"SHIROPK1";
/// A hash, an offset, a length.
const INDEX_ENTRY: usize = 32 + 8 + 8;
/// The index's offset, the number of entries, the magic bytes.
const TRAILER: usize = 8 + 8 + 8;
/// The name suffix of a pack in `blobs/`.
pub(crate) const PACK_SUFFIX: &str = ".pack";

/// The path of the pack `name` in the blobs directory `dir`.
pub(crate) fn pack_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}{PACK_SUFFIX}"))
}

/// A pack being written: a temporary file in the blobs directory until [`PackWriter::finish`].
#[derive(Debug)]
pub(crate) struct PackWriter {
    /// Buffered: a turn of many small files appends many small copies.
    temp: io::BufWriter<tempfile::NamedTempFile>,
    offset: u64,
    index: BTreeMap<ContentHash, (u64, u64)>,
}

impl PackWriter {
    pub(crate) fn create(dir: &Path) -> io::Result<Self> {
        let temp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
        let mut temp = io::BufWriter::with_capacity(WRITE_BUFFER, temp);
        temp.write_all(MAGIC)?;
        Ok(Self {
            temp,
            offset: MAGIC.len() as u64,
            index: BTreeMap::new(),
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub(crate) fn contains(&self, hash: &ContentHash) -> bool {
        self.index.contains_key(hash)
    }

    /// Appends the copy of `bytes`, whose hash is `hash` (once per hash), compressed (see
    /// [`compress`]).
    pub(crate) fn add(&mut self, hash: ContentHash, bytes: &[u8]) -> io::Result<()> {
        if self.index.contains_key(&hash) {
            return Ok(());
        }
        self.add_stored(hash, &compress(bytes))
    }

    /// Appends the copies of `items` (hash, bytes) in their order, as [`Self::add`] does
    /// each, compressing them on up to [`COMPRESS_THREADS`] threads: compression is most of
    /// what a turn of many files costs as it finishes.
    pub(crate) fn add_all(&mut self, items: &[(ContentHash, &[u8])]) -> io::Result<()> {
        let items: Vec<(ContentHash, &[u8], Check)> = (items.iter())
            .map(|(hash, bytes)| (*hash, *bytes, Check::Trusted))
            .collect();
        self.add_all_checked(&items)
    }

    /// As [`Self::add_all`], each item's bytes first checked against its hash where the item
    /// says so (bytes read back from a file that could have changed), on the compressing
    /// threads. A mismatch is `InvalidData`, and then nothing of `items` is added.
    pub(crate) fn add_all_checked(
        &mut self,
        items: &[(ContentHash, &[u8], Check)],
    ) -> io::Result<()> {
        let mut seen = BTreeSet::new();
        let fresh: Vec<&(ContentHash, &[u8], Check)> = (items.iter())
            .filter(|(hash, ..)| !self.index.contains_key(hash) && seen.insert(*hash))
            .collect();
        let total: usize = fresh.iter().map(|(_, bytes, _)| bytes.len()).sum();
        let threads = if total < PARALLEL_FROM {
            1
        } else {
            worker_threads(COMPRESS_THREADS)
        };
        let compressed = |part: &[&(ContentHash, &[u8], Check)]| -> io::Result<Vec<Vec<u8>>> {
            (part.iter())
                .map(|(hash, bytes, check)| {
                    check.bytes(hash, bytes)?;
                    Ok(compress(bytes))
                })
                .collect()
        };
        let parts: Vec<io::Result<Vec<Vec<u8>>>> = if threads < 2 {
            vec![compressed(&fresh)]
        } else {
            on_threads(
                &fresh,
                fresh.len().div_ceil(threads),
                |_, part| compressed(part),
                |_, _| Err(io::Error::other("a compressing thread failed")),
            )
        };
        let mut stored = Vec::with_capacity(fresh.len());
        for part in parts {
            stored.extend(part?);
        }
        for ((hash, ..), stored) in fresh.into_iter().zip(stored) {
            self.add_stored(*hash, &stored)?;
        }
        Ok(())
    }

    /// Appends a copy as another pack stores it (compressed), unchecked: for a pack
    /// rewritten with fewer copies, whose reader checks each copy against its hash.
    pub(crate) fn add_stored(&mut self, hash: ContentHash, stored: &[u8]) -> io::Result<()> {
        if self.index.contains_key(&hash) {
            return Ok(());
        }
        self.temp.write_all(stored)?;
        let len = stored.len() as u64;
        self.index.insert(hash, (self.offset, len));
        self.offset += len;
        Ok(())
    }

    /// Writes the index and names the pack `target`, a name no record refers to (a new
    /// turn's or restore's pack, which a record will name once this returns): once this
    /// returns, the pack is on disk whole, under its name.
    ///
    /// The pack is renamed first, then it and its directory are flushed at once, on two
    /// threads: the two flushes wait for the disk together rather than one after the other
    /// (about a tenth of a millisecond of every turn here). Renaming before the pack's bytes
    /// are on disk is safe only for such a name: a crash may leave it holding less than was
    /// written, but no record names it, so nothing reads it, and collection removes it (or
    /// the turn, finished again, replaces it). A named pack is replaced by
    /// [`PackWriter::finish_over`].
    pub(crate) fn finish(self, target: &Path) -> io::Result<()> {
        note_pack_written();
        let pack = self.write_index()?;
        let file = pack.persist(target).map_err(|err| err.error)?;
        let dir = crate::ground::open_read(parent(target))?;
        std::thread::scope(|scope| {
            // Without a thread (the system refused one), the directory is flushed after.
            let dir_flushed = std::thread::Builder::new().spawn_scoped(scope, || dir.sync_all());
            let pack_flushed = file.sync_data();
            let dir_flushed = match dir_flushed {
                Ok(thread) => (thread.join()).unwrap_or_else(|_| {
                    Err(io::Error::other("the thread flushing a directory failed"))
                }),
                Err(_) => dir.sync_all(),
            };
            pack_flushed.and(dir_flushed)
        })
    }

    /// Writes the index, flushes the pack, and renames it to `target`, replacing the pack
    /// there, then flushes the directory: at every moment the name holds the old pack or
    /// this one, each whole.
    pub(crate) fn finish_over(self, target: &Path) -> io::Result<()> {
        note_pack_written();
        let pack = self.write_index()?;
        pack.as_file().sync_data()?;
        pack.persist(target).map_err(|err| err.error)?;
        crate::ground::open_read(parent(target))?.sync_all()
    }

    /// Appends the index and the trailer; returns the temporary file, not flushed.
    fn write_index(mut self) -> io::Result<tempfile::NamedTempFile> {
        let mut tail = Vec::with_capacity(self.index.len() * INDEX_ENTRY + TRAILER);
        for (hash, (offset, len)) in &self.index {
            tail.extend_from_slice(hash.as_bytes());
            tail.extend_from_slice(&offset.to_le_bytes());
            tail.extend_from_slice(&len.to_le_bytes());
        }
        tail.extend_from_slice(&self.offset.to_le_bytes());
        tail.extend_from_slice(&(self.index.len() as u64).to_le_bytes());
        tail.extend_from_slice(MAGIC);
        self.temp.write_all(&tail)?;
        (self.temp.into_inner()).map_err(io::IntoInnerError::into_error)
    }
}

/// Whether [`PackWriter::add_all_checked`] checks a copy's bytes against its hash.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Check {
    /// Bytes the caller holds since it hashed them.
    Trusted,
    /// Bytes read back from a file.
    Hash,
}

impl Check {
    fn bytes(self, hash: &ContentHash, bytes: &[u8]) -> io::Result<()> {
        match self {
            Check::Hash if ContentHash::of(bytes) != *hash => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the bytes read back for {hash} do not match that hash"),
            )),
            _ => Ok(()),
        }
    }
}

/// The directory of the file at `path`.
fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("."))
}

/// The buffer of a [`PackWriter`]'s writes.
const WRITE_BUFFER: usize = 1 << 16;
/// How many threads [`PackWriter::add_all`] compresses on at most.
const COMPRESS_THREADS: usize = 4;
/// Below this many bytes in all, [`PackWriter::add_all`] compresses on the calling thread:
/// starting threads would cost more than it saves.
const PARALLEL_FROM: usize = 1 << 20;

/// The first byte of a copy stored as it is.
const FORM_RAW: u8 = 0;
/// The first byte of an LZ4-compressed copy, followed by the length of its bytes (a
/// little-endian `u64`) and one LZ4 block. Neither form byte starts a zlib stream (whose first
/// byte's low four bits are 8), which is how a format-10 pack's copies begin.
const FORM_LZ4: u8 = 1;

/// The copy of `bytes` as a pack stores it: LZ4-compressed, or as they are when that does not
/// make them smaller (a file compressed already).
///
/// LZ4, not zlib: a restore reads back every copy it writes, and inflating them was the
/// largest share of the processor's time in an undo of 100 files. On this project's source
/// files, in pieces of 21 KiB, LZ4 decodes about five times faster than zlib-rs inflates
/// (2.5 GB/s against 0.5) and compresses more than twice as fast as zlib's fastest level
/// (0.5 GB/s against 0.2), for copies about a tenth bigger than that level's (a ratio of 2.1
/// against 2.35; zlib's default level, 3.3).
fn compress(bytes: &[u8]) -> Vec<u8> {
    let head = 1 + 8;
    let mut stored = vec![0u8; head + lz4_flex::block::get_maximum_output_size(bytes.len())];
    if let Ok(len) = lz4_flex::block::compress_into(bytes, &mut stored[head..])
        && len < bytes.len()
    {
        stored[0] = FORM_LZ4;
        stored[1..head].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
        stored.truncate(head + len);
        // Room was made for the worst case, a tenth more than the bytes: a turn holds a
        // window of copies at once, which would each keep it.
        stored.shrink_to_fit();
        return stored;
    }
    let mut raw = Vec::with_capacity(1 + bytes.len());
    raw.push(FORM_RAW);
    raw.extend_from_slice(bytes);
    raw
}

/// The bytes of a copy as [`compress`] stored it, or as a format-10 pack did (zlib). Anything
/// else is damage (`InvalidData`), found before memory is taken for it where the copy says
/// it holds more than it could.
fn decompress(mut stored: Vec<u8>) -> io::Result<Vec<u8>> {
    let damaged = |reason: &str| io::Error::new(io::ErrorKind::InvalidData, reason.to_owned());
    match stored.split_first() {
        // Its bytes are the copy's own, moved down over the form byte rather than copied out.
        Some((&FORM_RAW, _)) => {
            stored.remove(0);
            Ok(stored)
        }
        Some((&FORM_LZ4, rest)) => {
            let (len, block) = rest
                .split_first_chunk::<8>()
                .ok_or_else(|| damaged("compressed copy cut short"))?;
            // One byte of an LZ4 block makes at most 255 (and a few more at its start).
            let most = (block.len() as u64).saturating_mul(255).saturating_add(64);
            let len = u64::from_le_bytes(*len);
            let len = (usize::try_from(len).ok())
                .filter(|_| len <= most)
                .ok_or_else(|| damaged("compressed copy claims more than it could hold"))?;
            let mut bytes = vec![0u8; len];
            match lz4_flex::block::decompress_into(block, &mut bytes) {
                Ok(written) if written == len => Ok(bytes),
                Ok(_) => Err(damaged("compressed copy ends early")),
                Err(err) => Err(damaged(&err.to_string())),
            }
        }
        _ => crate::codec::inflate(&stored),
    }
}

/// A pack opened for reading.
#[derive(Debug)]
pub(crate) struct Pack {
    path: PathBuf,
    file: File,
    /// The pack's size on disk.
    size: u64,
    index: BTreeMap<ContentHash, (u64, u64)>,
}

impl Pack {
    /// Opens the pack at `path` and reads its index. A pack that is not whole is damage
    /// (`InvalidData`).
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        let file = crate::ground::open_read(path)?;
        let size = file.metadata()?.len();
        // Gathered, then built at once: sorted first and built bottom-up, rather than inserted
        // one by one (a pack of 10,000 copies is opened by every restore while it is kept).
        let mut entries = Vec::new();
        read_index(&file, size, &mut entries, |hash, at| (hash, at))?;
        Ok(Self {
            path: path.to_owned(),
            file,
            size,
            index: BTreeMap::from_iter(entries),
        })
    }

    /// The hashes the pack at `path` holds, sorted, each once: its index without the rest.
    pub(crate) fn hashes_at(path: &Path) -> io::Result<Vec<ContentHash>> {
        let file = crate::ground::open_read(path)?;
        let size = file.metadata()?.len();
        let mut hashes = Vec::new();
        read_index(&file, size, &mut hashes, |hash, _| hash)?;
        hashes.sort_unstable();
        hashes.dedup();
        Ok(hashes)
    }

    /// How many bytes the stored copies take, and how many of them the copies of `live`.
    pub(crate) fn live_share(&self, live: impl Fn(&ContentHash) -> bool) -> (u64, u64) {
        let total = self.index.values().map(|(_, len)| len).sum();
        let kept = (self.index.iter())
            .filter(|(hash, _)| live(hash))
            .map(|(_, (_, len))| len)
            .sum();
        (total, kept)
    }

    /// Whether collection rewrites the pack when only the copies of `live` are still needed
    /// (see [`Pack::rewrite`]): when they take less than half of its copies' bytes.
    pub(crate) fn worth_rewriting(&self, live: impl Fn(&ContentHash) -> bool) -> bool {
        let (total, kept) = self.live_share(live);
        kept.saturating_mul(2) < total
    }

    /// The bytes the pack takes on disk once collection is done with it, when only the
    /// copies of `live` are still needed: its size, or the size of the pack rewritten with
    /// those copies alone when it is worth rewriting.
    pub(crate) fn collected_size(&self, live: impl Fn(&ContentHash) -> bool) -> u64 {
        if !self.worth_rewriting(&live) {
            return self.size;
        }
        let kept = self.index.iter().filter(|(hash, _)| live(hash));
        let (count, bytes) = kept.fold((0u64, 0u64), |(count, bytes), (_, (_, len))| {
            (count + 1, bytes + len)
        });
        (MAGIC.len() + TRAILER) as u64 + bytes + count * INDEX_ENTRY as u64
    }

    /// Rewrites the pack without the copies that do not read back as their hash, when it
    /// has any: so that no later turn trusts them.
    pub(crate) fn scrub(&self) -> io::Result<()> {
        let bad: BTreeSet<ContentHash> = (self.index.keys())
            .filter(|hash| self.get(hash).is_err())
            .copied()
            .collect();
        if bad.is_empty() {
            return Ok(());
        }
        self.rewrite(|hash| !bad.contains(hash))
    }

    /// Replaces the pack, under its name, with one that holds only the copies `keep`
    /// accepts, as they are stored (a reader checks each against its hash): written to a
    /// temporary file, flushed, renamed over this one, and the directory flushed. At every
    /// moment the name holds the old pack or the new one, both whole.
    pub(crate) fn rewrite(&self, keep: impl Fn(&ContentHash) -> bool) -> io::Result<()> {
        let mut writer = PackWriter::create(parent(&self.path))?;
        for hash in self.index.keys().filter(|hash| keep(hash)) {
            if let Some(stored) = self.stored(hash)? {
                writer.add_stored(*hash, &stored)?;
            }
        }
        writer.finish_over(&self.path)
    }

    pub(crate) fn contains(&self, hash: &ContentHash) -> bool {
        self.index.contains_key(hash)
    }

    /// Where the copy of `hash` starts in the pack.
    #[cfg(test)]
    pub(crate) fn offset_of(&self, hash: &ContentHash) -> Option<u64> {
        self.index.get(hash).map(|(offset, _)| *offset)
    }

    /// The copy of `hash` as stored (compressed), unchecked; `Ok(None)` when the pack does
    /// not hold it.
    pub(crate) fn stored(&self, hash: &ContentHash) -> io::Result<Option<Vec<u8>>> {
        let Some(&(offset, len)) = self.index.get(hash) else {
            return Ok(None);
        };
        let damaged = || io::Error::new(io::ErrorKind::InvalidData, "damaged pack");
        let mut stored = vec![0u8; usize::try_from(len).map_err(|_| damaged())?];
        self.file.read_exact_at(&mut stored, offset)?;
        Ok(Some(stored))
    }

    /// The bytes of `hash`, checked; `Ok(None)` when the pack does not hold them.
    pub(crate) fn get(&self, hash: &ContentHash) -> io::Result<Option<Vec<u8>>> {
        let damaged = |reason: &str| io::Error::new(io::ErrorKind::InvalidData, reason.to_owned());
        let Some(stored) = self.stored(hash)? else {
            return Ok(None);
        };
        let bytes = decompress(stored)?;
        if ContentHash::of(&bytes) != *hash {
            return Err(damaged("copy in pack does not match its hash"));
        }
        Ok(Some(bytes))
    }
}

/// Which file a pack is: shiro never changes a pack in place, only replaces it (by a rewrite
/// with fewer copies), so a pack with the same identity holds the same copies. The time of
/// its last change counts too, so that damage done in place makes it read again.
type FileId = (u64, u64, u64, i64, i64);

fn file_id(meta: &std::fs::Metadata) -> FileId {
    (
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
    )
}

/// Reads the index of the pack `file`, `size` bytes: appends to `entries` what `each` makes of
/// each copy's hash, offset and length, in the order written. A pack that is not whole is
/// damage (`InvalidData`), and what was appended then is to be dropped.
///
/// The index is read a piece at a time: a pack of 20,000 copies has an index of about a
/// megabyte, which every command that deduplicates reads.
fn read_index<T>(
    file: &File,
    size: u64,
    entries: &mut Vec<T>,
    mut each: impl FnMut(ContentHash, (u64, u64)) -> T,
) -> io::Result<()> {
    /// Index entries read at a time.
    const PIECE: usize = 1024;
    let damaged = || io::Error::new(io::ErrorKind::InvalidData, "damaged pack");
    if size < (MAGIC.len() + TRAILER) as u64 {
        return Err(damaged());
    }
    let mut trailer = [0u8; TRAILER];
    file.read_exact_at(&mut trailer, size - TRAILER as u64)?;
    let (numbers, magic) = trailer.split_at(16);
    let number = |at: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&numbers[at..at + 8]);
        u64::from_le_bytes(bytes)
    };
    let (index_at, count) = (number(0), number(8));
    let index_len = count.checked_mul(INDEX_ENTRY as u64).ok_or_else(damaged)?;
    if magic != MAGIC || index_at.checked_add(index_len) != Some(size - TRAILER as u64) {
        return Err(damaged());
    }
    entries.reserve(usize::try_from(count).map_err(|_| damaged())?);
    let whole = usize::try_from(index_len).map_err(|_| damaged())?;
    let mut piece = vec![0u8; whole.min(INDEX_ENTRY * PIECE)];
    let mut done = 0;
    while done < whole {
        let raw = &mut piece[..(whole - done).min(INDEX_ENTRY * PIECE)];
        file.read_exact_at(raw, index_at + done as u64)?;
        done += raw.len();
        for entry in raw.chunks_exact(INDEX_ENTRY) {
            let mut hash = [0u8; 32];
            hash.copy_from_slice(&entry[..32]);
            let mut field = [0u8; 8];
            field.copy_from_slice(&entry[32..40]);
            let offset = u64::from_le_bytes(field);
            field.copy_from_slice(&entry[40..48]);
            let len = u64::from_le_bytes(field);
            if offset.checked_add(len).is_none_or(|end| end > index_at) {
                return Err(damaged());
            }
            entries.push(each(ContentHash::from_bytes(hash), (offset, len)));
        }
    }
    Ok(())
}

/// The hashes the packs named in the log hold: what deduplication looks up before it stores
/// a copy, and where a turn that needs a copy stored already finds the pack to name.
///
/// It is kept in memory from one operation to the next and refreshed under the store's lock
/// from the log's names (see [`Packed::refresh`]); a pack another process rewrote since is
/// known by its new identity and read again.
#[derive(Debug, Default)]
pub(crate) struct Packed {
    /// Each pack's identity on disk, and its hashes (sorted, each once).
    packs: BTreeMap<String, (FileId, Vec<ContentHash>)>,
    /// When the identity of every known pack was last checked on disk: under which hold of
    /// the store's lock, and how many packs this process had written by then (see
    /// [`PACKS_WRITTEN`]).
    checked: Option<(Weak<()>, u64)>,
}

/// How many packs this process has written or rewritten, in any store. A check of the packs'
/// identities holds until one more is.
static PACKS_WRITTEN: AtomicU64 = AtomicU64::new(0);

/// Notes that this process writes a pack (before it does, so that no check made meanwhile
/// counts as after it).
fn note_pack_written() {
    PACKS_WRITTEN.fetch_add(1, Ordering::SeqCst);
}

impl Packed {
    /// Forgets the packs not in `names`, and reads the index of each of `names` not known
    /// yet, or replaced since. A pack that cannot be opened holds nothing: what only it held
    /// is stored afresh by the next turn that needs it.
    ///
    /// `under` is the hold of the store's lock this runs under. While it is held, no other
    /// process changes a pack, so the packs known are checked on disk once per hold (a turn
    /// refreshes when it captures and again when it commits), and again whenever this
    /// process has written a pack since: a rewrite replaces a known pack, and a pack written
    /// under a name that left the log is another file than the one known by that name.
    /// Without a hold (`under` dangling), every refresh checks them all.
    pub(crate) fn refresh(&mut self, dir: &Path, names: &BTreeSet<String>, under: &Weak<()>) {
        let written = PACKS_WRITTEN.load(Ordering::SeqCst);
        let held = under.upgrade().is_some();
        let checked = held
            && (self.checked.as_ref())
                .is_some_and(|(hold, at)| hold.ptr_eq(under) && *at == written);
        self.packs.retain(|name, _| names.contains(name));
        for name in names {
            if checked && self.packs.contains_key(name) {
                continue;
            }
            let path = pack_path(dir, name);
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                self.packs.remove(name);
                continue;
            };
            let id = file_id(&meta);
            if self.packs.get(name).is_some_and(|(known, _)| *known == id) {
                continue;
            }
            match Pack::hashes_at(&path) {
                Ok(hashes) => {
                    self.packs.insert(name.clone(), (id, hashes));
                }
                Err(_) => {
                    self.packs.remove(name);
                }
            }
        }
        self.checked = held.then(|| (under.clone(), written));
    }

    /// A named pack that holds `hash`.
    pub(crate) fn find(&self, hash: &ContentHash) -> Option<&str> {
        (self.packs.iter())
            .find(|(_, (_, hashes))| hashes.binary_search(hash).is_ok())
            .map(|(name, _)| name.as_str())
    }
}

/// How many threads to split work over: the processors this process may use, at most
/// `at_most`. Asking reads the cgroup's limits from /proc and /sys, so callers ask only for
/// work big enough to split.
pub(crate) fn worker_threads(at_most: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, at_most)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Whatever a pack holds reads back exactly, compressed or not; a hash it does not
        /// hold reads as none.
        #[test]
        fn a_pack_reads_back_what_was_put_in(
            copies in proptest::collection::vec(copy(), 0..20),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut writer = PackWriter::create(dir.path()).unwrap();
            for bytes in &copies {
                writer.add(ContentHash::of(bytes), bytes).unwrap();
            }
            let target = pack_path(dir.path(), "p");
            writer.finish(&target).unwrap();
            let pack = Pack::open(&target).unwrap();
            for bytes in &copies {
                prop_assert_eq!(pack.get(&ContentHash::of(bytes)).unwrap(), Some(bytes.clone()));
            }
            let absent = ContentHash::of(b"in no pack");
            if !copies.iter().any(|c| ContentHash::of(c) == absent) {
                prop_assert!(pack.get(&absent).unwrap().is_none());
            }
        }

        /// A stored copy with any byte changed, or cut short, decodes to some bytes or is
        /// damage, never a panic (a length it could not hold is refused before memory is
        /// taken for it: see the test of the forms below).
        #[test]
        fn a_damaged_copy_decodes_or_is_damage(
            bytes in copy(),
            at in any::<prop::sample::Index>(),
            flip in 1..=255u8,
            cut in any::<bool>(),
        ) {
            let mut stored = compress(&bytes);
            let at = at.index(stored.len());
            if cut {
                stored.truncate(at);
            } else {
                stored[at] ^= flip;
            }
            if let Err(err) = decompress(stored) {
                prop_assert_eq!(err.kind(), io::ErrorKind::InvalidData);
            }
        }
    }

    /// Bytes as files hold them: random (which LZ4 cannot shrink), or a short run repeated
    /// (which it can, by far).
    fn copy() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..5000),
            (proptest::collection::vec(any::<u8>(), 1..12), 0..3000usize)
                .prop_map(|(unit, times)| unit.repeat(times)),
        ]
    }

    /// Copies that shrink are stored LZ4-compressed, others as they are, and a format-10
    /// pack's zlib copies still read; a copy that claims more bytes than its block could hold
    /// is damage before any memory is taken for it.
    #[test]
    fn copies_are_stored_in_the_form_that_suits_them_and_zlib_still_reads() {
        let text = b"fn main() { println!(\"hello\"); }\n".repeat(200);
        let lz4 = compress(&text);
        assert_eq!(lz4[0], FORM_LZ4);
        assert!(lz4.len() < text.len() / 4, "{}", lz4.len());
        assert_eq!(decompress(lz4.clone()).unwrap(), text);

        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 32) as u8
            })
            .collect();
        let raw = compress(&noise);
        assert_eq!((raw[0], raw.len()), (FORM_RAW, noise.len() + 1));
        assert_eq!(decompress(raw).unwrap(), noise);
        assert_eq!(decompress(compress(b"")).unwrap(), b"");

        let zeros = vec![0u8; 1 << 20];
        assert_eq!(decompress(compress(&zeros)).unwrap(), zeros);

        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        io::Write::write_all(&mut zlib, &text).unwrap();
        assert_eq!(decompress(zlib.finish().unwrap()).unwrap(), text);

        let mut boastful = lz4.clone();
        boastful[1..9].copy_from_slice(&u64::MAX.to_le_bytes());
        let err = decompress(boastful).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("more than it could hold"), "{err}");
        let err = decompress(lz4[..5].to_vec()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let err = decompress(Vec::new()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    /// The packs' files are looked at again whenever anything but this process may have
    /// changed them since: under a new hold of the store's lock, without one, and after this
    /// process wrote a pack. (Within one hold they need not be, and are not, looked at twice:
    /// other tests write packs meanwhile, so that is not asserted.)
    #[test]
    fn packs_changed_on_disk_are_read_again_under_a_new_hold_or_after_a_write() {
        let dir = tempfile::tempdir().unwrap();
        let aside = tempfile::tempdir().unwrap();
        let pack_of = |at: &Path, bytes: &[u8]| {
            let mut writer = PackWriter::create(at).unwrap();
            writer.add(ContentHash::of(bytes), bytes).unwrap();
            let path = pack_path(at, &format!("{}", bytes.len()));
            writer.finish(&path).unwrap();
            path
        };
        let (one, two) = (
            pack_of(aside.path(), b"one"),
            pack_of(aside.path(), b"two!"),
        );
        let target = pack_path(dir.path(), "1-0");
        // Copied over in place: another file's bytes under the same name, unlike any pack
        // this process writes.
        let swap = |from: &Path| {
            std::fs::copy(from, &target).unwrap();
        };
        let holds = |packed: &Packed, bytes: &[u8]| packed.find(&ContentHash::of(bytes)).is_some();
        let names = BTreeSet::from(["1-0".to_owned()]);
        let mut packed = Packed::default();

        swap(&one);
        let first = std::sync::Arc::new(());
        packed.refresh(dir.path(), &names, &std::sync::Arc::downgrade(&first));
        assert!(holds(&packed, b"one"));
        drop(first);

        swap(&two);
        let second = std::sync::Arc::new(());
        let under = std::sync::Arc::downgrade(&second);
        packed.refresh(dir.path(), &names, &under);
        assert!(
            holds(&packed, b"two!") && !holds(&packed, b"one"),
            "a new hold"
        );

        swap(&one);
        pack_of(dir.path(), b"written here");
        packed.refresh(dir.path(), &names, &under);
        assert!(
            holds(&packed, b"one") && !holds(&packed, b"two!"),
            "after a write"
        );

        swap(&two);
        packed.refresh(dir.path(), &names, &Weak::new());
        assert!(
            holds(&packed, b"two!") && !holds(&packed, b"one"),
            "without a hold"
        );
    }

    /// Copies read back from a file are checked against their hashes before they are
    /// compressed, on the calling thread or on several: one that does not match is damage,
    /// and nothing of the call is added; copies held since they were hashed are not checked.
    #[test]
    fn copies_that_do_not_match_their_hash_are_refused_whole() {
        for size in [100, 40_000] {
            let copies: Vec<Vec<u8>> = (0..64u32)
                .map(|n| {
                    (0..size)
                        .map(|i: u32| (i.wrapping_mul(31) ^ n) as u8)
                        .collect()
                })
                .collect();
            let dir = tempfile::tempdir().unwrap();
            let mut writer = PackWriter::create(dir.path()).unwrap();
            let mut items: Vec<(ContentHash, &[u8], Check)> = (copies.iter())
                .map(|bytes| (ContentHash::of(bytes), bytes.as_slice(), Check::Hash))
                .collect();
            let wrong = ContentHash::of(b"other bytes");
            items[40].0 = wrong;
            let err = writer.add_all_checked(&items).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData);
            assert!(err.to_string().contains(&wrong.to_hex()), "{err}");
            assert!(writer.is_empty());
            // Trusted, the same items are taken as they are; checked, the others pass.
            items[40].2 = Check::Trusted;
            writer.add_all_checked(&items).unwrap();
            assert!(writer.contains(&wrong));
            assert_eq!(writer.index.len(), copies.len());
        }
    }

    /// Copies compressed on several threads land in the pack in the order given, once each,
    /// and read back exactly.
    #[test]
    fn copies_added_together_keep_their_order() {
        let copies: Vec<Vec<u8>> = (0..64u32)
            .map(|n| {
                (0..40_000u32)
                    .map(|i| (i.wrapping_mul(2_654_435_761) >> 13 ^ n) as u8)
                    .collect()
            })
            .collect();
        assert!(copies.iter().map(Vec::len).sum::<usize>() >= PARALLEL_FROM);
        let dir = tempfile::tempdir().unwrap();
        let mut writer = PackWriter::create(dir.path()).unwrap();
        let mut items: Vec<(ContentHash, &[u8])> = (copies.iter())
            .map(|bytes| (ContentHash::of(bytes), bytes.as_slice()))
            .collect();
        // A copy given twice is stored once.
        items.push(items[3]);
        writer.add_all(&items).unwrap();
        let target = pack_path(dir.path(), "p");
        writer.finish(&target).unwrap();
        let pack = Pack::open(&target).unwrap();
        assert_eq!(pack.index.len(), copies.len());
        let offsets: Vec<u64> = (copies.iter())
            .map(|bytes| pack.offset_of(&ContentHash::of(bytes)).unwrap())
            .collect();
        assert!(
            offsets.windows(2).all(|pair| pair[0] < pair[1]),
            "{offsets:?}"
        );
        for bytes in &copies {
            assert_eq!(
                pack.get(&ContentHash::of(bytes)).unwrap().as_ref(),
                Some(bytes)
            );
        }
    }

    #[test]
    fn a_damaged_pack_is_refused_and_a_damaged_copy_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = PackWriter::create(dir.path()).unwrap();
        let bytes = b"the copy".repeat(100);
        writer.add(ContentHash::of(&bytes), &bytes).unwrap();
        let target = pack_path(dir.path(), "p");
        writer.finish(&target).unwrap();
        let whole = std::fs::read(&target).unwrap();

        // Cut short anywhere: not a pack.
        for cut in [0, 5, whole.len() / 2, whole.len() - 1] {
            std::fs::write(&target, &whole[..cut]).unwrap();
            let err = Pack::open(&target).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "cut at {cut}");
        }
        // A flipped byte in the copy: the index reads, the copy does not.
        let mut flipped = whole;
        flipped[MAGIC.len() + 3] ^= 0x40;
        std::fs::write(&target, &flipped).unwrap();
        let pack = Pack::open(&target).unwrap();
        let err = pack.get(&ContentHash::of(&bytes)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
