//! Content-addressed, deduplicated blobs: the bytes of pre-images, and of the states a
//! restore replaced.
//!
//! `blobs/<hash>` holds the bytes whose blake3 hash is `<hash>`: zlib-compressed, or raw after
//! a zero byte (which no zlib stream starts with) for the first version of a big file in a
//! chain. `blobs/<hash>.delta` holds them as a delta against another blob (see
//! [`crate::delta`]): the base's 32-byte hash, then the zlib-compressed instructions.
//! `blobs/<hash>.file` holds them as they are, with no form byte: a file too big to hold that
//! a turn replaced whole, kept by giving it a second name rather than by copying it (see
//! [`Blobs::keep_file`]).
//!
//! A blob never changes form once written, and a delta is only written against a blob that
//! exists already, so every base is older than the deltas that need it: chains never loop.
//! Collection keeps the bases a kept delta needs.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::ZlibEncoder;

use shiro_tools::sync_data_all;

use crate::codec::inflate;
use crate::delta;
use crate::ground::{open_read, read_optional};
use crate::image::ContentHash;
use crate::pack::{PACK_SUFFIX, pack_path};

/// The first byte of a raw blob.
const RAW: u8 = 0;
/// The name suffix of a delta blob.
const DELTA_SUFFIX: &str = ".delta";
/// The name suffix of a blob that is a kept file: its bytes, with no form byte.
const FILE_SUFFIX: &str = ".file";
/// Longer delta chains are refused as damage (writers stop at [`MAX_DELTA_DEPTH`]).
const MAX_CHAIN: usize = 256;
/// A new version of a big file is stored whole rather than as a delta when its base is this
/// deep in a chain already, so reading any version applies at most this many deltas.
pub(crate) const MAX_DELTA_DEPTH: usize = 16;
/// Blobs of at most this many bytes are compressed at the default level; see
/// [`Blobs::finish_level`].
const WELL_COMPRESSED_MAX: usize = 256 * 1024;

/// How a new blob is stored. (Other pre-images go into their turn's pack, see
/// [`crate::pack`]; blobs stored zlib-compressed by format 6 and older are still read.)
#[derive(Debug)]
pub(crate) enum Form<'a> {
    /// zlib at a level: how format 6 and older stored every pre-image, which tests use to
    /// make such a store.
    #[cfg(test)]
    Zlib(&'a [u8], Compression),
    /// The bytes as they are: the start of a chain of deltas.
    Raw(&'a [u8]),
    /// Instructions that rebuild the bytes from the blob `base`, which must be stored already
    /// (or earlier in the same batch).
    Delta { base: ContentHash, ops: Vec<u8> },
}

/// The `blobs/` directory of a store.
#[derive(Debug)]
pub(crate) struct Blobs {
    dir: PathBuf,
}

/// What `blobs/` holds: the whole blobs and the deltas with their sizes on disk (a hash may
/// have both, after a crash), the packs (by name), and the files that are none of these.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    whole: BTreeMap<ContentHash, u64>,
    deltas: BTreeMap<ContentHash, u64>,
    packs: BTreeMap<String, u64>,
    strays: Vec<PathBuf>,
}

impl Listing {
    /// The bytes every blob and pack takes.
    pub(crate) fn bytes(&self) -> u64 {
        (self.whole.values())
            .chain(self.deltas.values())
            .chain(self.packs.values())
            .sum()
    }

    /// The bytes the blob of `hash` takes (both files, when it has two).
    fn size(&self, hash: &ContentHash) -> u64 {
        [&self.whole, &self.deltas]
            .iter()
            .filter_map(|files| files.get(hash))
            .sum()
    }
}

/// [`Blobs::contains`] for a caller about to ask it of many hashes while nobody else writes
/// `blobs/` (under the store's lock): which loose blobs exist is listed once, so a hash the
/// listing does not name (the common answer: pre-images go into packs) costs no look on disk,
/// where each look costs two lookups of missing files.
#[derive(Debug)]
pub(crate) struct Contains<'a> {
    blobs: &'a Blobs,
    /// The loose blobs, whole or delta; `None` when not listed (few questions, or the
    /// listing failed), and each question then looks on disk.
    loose: Option<BTreeSet<ContentHash>>,
}

impl Contains<'_> {
    /// From how many questions the listing pays for itself.
    pub(crate) const LIST_FROM: usize = 64;

    /// Whether a blob holds the bytes of `hash` (see [`Blobs::contains`]), as of the listing
    /// for a hash it does not name.
    pub(crate) fn contains(&self, hash: &ContentHash) -> bool {
        self.loose.as_ref().is_none_or(|loose| loose.contains(hash)) && self.blobs.contains(hash)
    }
}

impl Blobs {
    /// See [`Contains`]: for `questions` questions to come.
    pub(crate) fn contains_many(&self, questions: usize) -> Contains<'_> {
        let loose = (questions >= Contains::LIST_FROM)
            .then(|| self.list().ok())
            .flatten()
            .map(|listing| {
                (listing.whole.into_keys())
                    .chain(listing.deltas.into_keys())
                    .collect()
            });
        Contains { blobs: self, loose }
    }

    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, hash: &ContentHash) -> PathBuf {
        self.dir.join(hash.to_hex())
    }

    fn delta_path(&self, hash: &ContentHash) -> PathBuf {
        self.dir.join(format!("{}{DELTA_SUFFIX}", hash.to_hex()))
    }

    fn file_path(&self, hash: &ContentHash) -> PathBuf {
        self.dir.join(format!("{}{FILE_SUFFIX}", hash.to_hex()))
    }

    /// Whether the blob of `hash` exists in any of its forms (a delta's base is not looked
    /// for: see [`Blobs::contains`]).
    fn stored(&self, hash: &ContentHash) -> bool {
        present(&self.path(hash)) || self.kept(hash) || present(&self.delta_path(hash))
    }

    /// Whether `blobs/<hash>.file` is a blob: a kept file with no other name. One that still
    /// shares its file with the workspace (a turn under way, or one a crash cut short before
    /// it replaced the file) is not, since a write there would change it.
    fn kept(&self, hash: &ContentHash) -> bool {
        fs::symlink_metadata(self.file_path(hash))
            .is_ok_and(|meta| meta.is_file() && meta.nlink() == 1)
    }

    /// A name in `blobs/` that nothing has, for [`Blobs::keep_file`]: `.tmp-` names are
    /// collected as strays.
    pub(crate) fn keep_name(&self) -> PathBuf {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |time| time.subsec_nanos());
        self.dir
            .join(format!(".tmp-keep-{}-{n}-{nanos}", std::process::id()))
    }

    /// Removes `other` when it is another name of the kept file of `hash`: one outside the
    /// workspace, such as the copy of a tree moved out of it whole, which the caller is about
    /// to remove anyway. Anything else there is left alone.
    pub(crate) fn release(&self, hash: &ContentHash, other: &Path) -> io::Result<()> {
        let (Ok(kept), Ok(named)) = (
            fs::symlink_metadata(self.file_path(hash)),
            fs::symlink_metadata(other),
        ) else {
            return Ok(());
        };
        if named.is_file() && (named.dev(), named.ino()) == (kept.dev(), kept.ino()) {
            fs::remove_file(other)?;
        }
        Ok(())
    }

    /// Removes the kept files of `hashes` that still share their file with the workspace.
    pub(crate) fn remove_shared(&self, hashes: &[ContentHash]) -> io::Result<()> {
        for hash in hashes {
            let path = self.file_path(hash);
            match fs::symlink_metadata(&path) {
                Ok(meta) if meta.nlink() > 1 => fs::remove_file(&path)?,
                Ok(_) => {}
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// Stores as a copy of its own (see [`Blobs::unshare`]) the kept file of `hash` if it
    /// still has another name: the turn that kept it did not replace the workspace's file.
    pub(crate) fn unshare_if_shared(&self, hash: &ContentHash) -> io::Result<()> {
        match fs::symlink_metadata(self.file_path(hash)) {
            Ok(meta) if meta.nlink() > 1 => self.unshare(hash),
            Ok(_) => Ok(()),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Makes the file at `kept` (in `blobs/`, a name the caller gave to a file of the
    /// workspace it is about to replace whole) the blob of `hash`, its bytes: flushed, renamed
    /// to `<hash>.file`, then the directory flushed, as [`Blobs::put_all`] stores one. The
    /// caller hashed it through that name. Where the blob is stored already, in any form, the
    /// name is removed instead and `false` returned. Either way `kept` is gone.
    ///
    /// Nothing is copied: a file of any size costs a rename and the flush of whatever of its
    /// bytes the disk does not hold yet. The caller must then replace the workspace's name of
    /// the file by another file, never write into it (see [`Blobs::unshare`]).
    pub(crate) fn keep_file(&self, kept: &Path, hash: &ContentHash) -> io::Result<bool> {
        if self.stored(hash) {
            fs::remove_file(kept)?;
            return Ok(false);
        }
        open_read(kept)?.sync_data()?;
        fs::rename(kept, self.file_path(hash))?;
        open_read(&self.dir)?.sync_all()?;
        Ok(true)
    }

    /// Stores the kept file of `hash` (see [`Blobs::keep_file`]) as a copy of its own, raw, and
    /// removes the kept one: for a caller that kept a file of the workspace and then did not
    /// replace it, so that writes into the workspace's file cannot reach the blob. A kept file
    /// whose bytes no longer match the hash (written through the workspace's name meanwhile,
    /// by another program) is removed and nothing stored: the turn cannot restore that
    /// version, and says so when asked.
    pub(crate) fn unshare(&self, hash: &ContentHash) -> io::Result<()> {
        let kept = self.file_path(hash);
        let mut source = open_read(&kept)?;
        let mut writer = self.raw_writer()?;
        let mut piece = vec![0u8; 1 << 20];
        loop {
            match source.read(&mut piece) {
                Ok(0) => break,
                Ok(n) => writer.write(&piece[..n])?,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        if writer.peek().0 == *hash {
            writer.finish_beside_kept()?;
        }
        fs::remove_file(kept)
    }

    /// Stores every new blob (a hash stored in any form is skipped), and returns once all of
    /// them are on disk: each is written to a temporary file, flushed, and renamed into place,
    /// then the directory is flushed once. A blob that exists is therefore complete, and
    /// existence is enough for deduplication. Only these files are flushed, never the whole
    /// file system, whose other unflushed writes (a build's) could take seconds.
    pub(crate) fn put_all<'a>(
        &self,
        items: impl IntoIterator<Item = (ContentHash, Form<'a>)>,
    ) -> io::Result<()> {
        // At most this many temporary files are open at once; their flushes run side by side.
        const AT_ONCE: usize = 256;
        let items: Vec<(ContentHash, Form<'a>)> = items
            .into_iter()
            .filter(|(hash, _)| !self.stored(hash))
            .collect();
        if items.is_empty() {
            return Ok(());
        }
        let mut items = items.into_iter().peekable();
        while items.peek().is_some() {
            let mut written = Vec::new();
            for (hash, form) in items.by_ref().take(AT_ONCE) {
                let target = match &form {
                    Form::Delta { .. } => self.delta_path(&hash),
                    Form::Raw(_) => self.path(&hash),
                    #[cfg(test)]
                    Form::Zlib(..) => self.path(&hash),
                };
                written.push((self.write_temp(form)?, target));
            }
            let files: Vec<&fs::File> = written.iter().map(|(temp, _)| temp.as_file()).collect();
            sync_data_all(&files)?;
            for (temp, target) in written {
                temp.persist(&target).map_err(|err| err.error)?;
            }
        }
        open_read(&self.dir)?.sync_all()
    }

    fn write_temp(&self, form: Form<'_>) -> io::Result<tempfile::NamedTempFile> {
        let mut temp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&self.dir)?;
        let file = temp.as_file_mut();
        match form {
            #[cfg(test)]
            Form::Zlib(bytes, level) => compress_into(file, bytes, level)?,
            Form::Raw(bytes) => {
                file.write_all(&[RAW])?;
                file.write_all(bytes)?;
            }
            Form::Delta { base, ops } => {
                file.write_all(base.as_bytes())?;
                compress_into(file, &ops, Blobs::finish_level(ops.len()))?;
            }
        }
        Ok(temp)
    }

    /// Removes the raw blobs and kept files of `hashes` (one that is not there is no error).
    pub(crate) fn remove_raw(&self, hashes: &[ContentHash]) -> io::Result<()> {
        for hash in hashes {
            for path in [self.path(hash), self.file_path(hash)] {
                match fs::remove_file(path) {
                    Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// A raw blob to write a piece at a time (see [`RawWriter`]).
    pub(crate) fn raw_writer(&self) -> io::Result<RawWriter> {
        let mut temp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(&self.dir)?;
        temp.as_file_mut().write_all(&[RAW])?;
        Ok(RawWriter {
            temp: io::BufWriter::with_capacity(RawWriter::BUFFER, temp),
            hasher: blake3::Hasher::new(),
            len: 0,
            target: self.dir.clone(),
        })
    }

    /// Removes the stored form of each of `hashes` that does not read back as its bytes.
    ///
    /// Blobs are flushed before they are renamed into place, but a disk error, or a store
    /// written by a version that flushed after renaming, can leave one that exists and is
    /// damaged; deduplication would then trust it. Crash recovery calls this for the blobs of
    /// the turn it finishes, so they are written again.
    pub(crate) fn discard_damaged<'a>(
        &self,
        hashes: impl IntoIterator<Item = &'a ContentHash>,
    ) -> io::Result<()> {
        for hash in hashes {
            if let Err(err) = self.get(hash) {
                if err.kind() != io::ErrorKind::InvalidData {
                    return Err(err);
                }
                for path in [self.path(hash), self.file_path(hash), self.delta_path(hash)] {
                    match fs::remove_file(&path) {
                        Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err),
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// The zlib level for a delta of `len` bytes. Level 6 compresses about a third better than
    /// level 1 but runs at only 15-25 MB/s on a slow machine, so it is kept for the sizes of
    /// source files (under 17 ms each); larger ones get level 1. Big files are mostly stored
    /// as deltas instead (see `docs/formats.md`).
    fn finish_level(len: usize) -> Compression {
        if len <= WELL_COMPRESSED_MAX {
            Compression::default()
        } else {
            Compression::fast()
        }
    }

    /// Whether the blob can be read: stored whole, or as a delta whose bases can be.
    pub(crate) fn contains(&self, hash: &ContentHash) -> bool {
        self.walk_chain(hash, MAX_CHAIN).1
    }

    /// How many deltas reading the blob applies (0 for a whole blob), counting at most to
    /// `limit`.
    pub(crate) fn chain_depth(&self, hash: &ContentHash, limit: usize) -> usize {
        self.walk_chain(hash, limit).0
    }

    /// Follows the blob's chain of deltas for at most `limit` links: how many it crossed, and
    /// whether it ended at a whole blob.
    fn walk_chain(&self, hash: &ContentHash, limit: usize) -> (usize, bool) {
        let mut next = *hash;
        for depth in 0..limit {
            if present(&self.path(&next)) || self.kept(&next) {
                return (depth, true);
            }
            match self.base_of(&next) {
                Some(base) => next = base,
                None => return (depth, false),
            }
        }
        (limit, false)
    }

    /// The base a delta blob names, when `hash` is stored as a delta.
    fn base_of(&self, hash: &ContentHash) -> Option<ContentHash> {
        let mut base = [0u8; 32];
        open_read(&self.delta_path(hash))
            .and_then(|mut file| file.read_exact(&mut base))
            .ok()
            .map(|()| ContentHash::from_bytes(base))
    }

    /// The raw bytes of a blob, checked against its hash. `Ok(None)` when it is missing;
    /// an error names a blob that is damaged (a missing base included).
    pub(crate) fn get(&self, hash: &ContentHash) -> io::Result<Option<Vec<u8>>> {
        let bytes = self.get_in_chain(hash, 0)?;
        if bytes
            .as_ref()
            .is_some_and(|bytes| ContentHash::of(bytes) != *hash)
        {
            return Err(damaged("blob content does not match its hash"));
        }
        Ok(bytes)
    }

    /// A blob stored raw, checked against its hash (read a piece at a time), opened at the
    /// start of its bytes, with their length: for a restore to copy into place without
    /// holding them in memory. `Ok(None)` when the blob is not stored raw.
    pub(crate) fn open_raw(&self, hash: &ContentHash) -> io::Result<Option<(fs::File, u64)>> {
        let Some((mut file, start)) = self.open_raw_bytes(hash)? else {
            return Ok(None);
        };
        let (found, len) = crate::file_hash::hash_file_from(&mut file, start)?;
        if ContentHash::from(found) != *hash {
            return Err(damaged("blob content does not match its hash"));
        }
        file.seek(io::SeekFrom::Start(start))?;
        Ok(Some((file, len)))
    }

    /// A blob stored raw, opened at the start of its bytes, with their length, without
    /// reading it through: for a restore that checked it (with [`Blobs::open_raw`]) just
    /// before, under the store's lock. `Ok(None)` when the blob is not stored raw.
    pub(crate) fn open_raw_checked_already(
        &self,
        hash: &ContentHash,
    ) -> io::Result<Option<(fs::File, u64)>> {
        let Some((file, start)) = self.open_raw_bytes(hash)? else {
            return Ok(None);
        };
        let len = file.metadata()?.len().saturating_sub(start);
        Ok(Some((file, len)))
    }

    /// The blob of `hash` opened at the start of its bytes, with where they start in the
    /// file, when it is stored raw (just past its form byte) or as a kept file (at the
    /// start); `None` when it is missing or stored otherwise.
    fn open_raw_bytes(&self, hash: &ContentHash) -> io::Result<Option<(fs::File, u64)>> {
        match open_read(&self.path(hash)) {
            Ok(mut file) => {
                let mut first = [0u8; 1];
                if file.read(&mut first)? != 1 || first[0] != RAW {
                    return Ok(None);
                }
                return Ok(Some((file, 1)));
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(err),
        }
        match open_read(&self.file_path(hash)) {
            Ok(file) => Ok(Some((file, 0))),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// The bytes of a blob, following its chain, unchecked: checking the end of a chain checks
    /// every link, since a wrong link would change the result.
    fn get_in_chain(&self, hash: &ContentHash, depth: usize) -> io::Result<Option<Vec<u8>>> {
        let bytes = match read_optional(&self.path(hash))? {
            Some(mut stored) => match stored.first() {
                // In place: a copy would take as much memory again, page by page.
                Some(&RAW) => {
                    stored.remove(0);
                    stored
                }
                _ => inflate(&stored)?,
            },
            None => {
                if let Some(kept) = read_optional(&self.file_path(hash))? {
                    return Ok(Some(kept));
                }
                let Some(stored) = read_optional(&self.delta_path(hash))? else {
                    return Ok(None);
                };
                if depth >= MAX_CHAIN {
                    return Err(damaged("delta chain too long"));
                }
                if stored.len() < 32 {
                    return Err(damaged("delta too short"));
                }
                let (base_hash, ops) = stored.split_at(32);
                let mut base_bytes = [0u8; 32];
                base_bytes.copy_from_slice(base_hash);
                let base_hash = ContentHash::from_bytes(base_bytes);
                let base = self.get_in_chain(&base_hash, depth + 1)?.ok_or_else(|| {
                    damaged(&format!("its base blob {} is missing", base_hash.short()))
                })?;
                delta::apply(&inflate(ops)?, &base).map_err(damaged)?
            }
        };
        Ok(Some(bytes))
    }

    /// Every blob with its size on disk, and the files that are not blobs (temporary files
    /// left by a crash).
    pub(crate) fn list(&self) -> io::Result<Listing> {
        let mut listing = Listing::default();
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(listing),
            Err(err) => return Err(err),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_str().unwrap_or_default();
            if let Some(pack) = name.strip_suffix(PACK_SUFFIX)
                && !pack.starts_with('.')
            {
                listing
                    .packs
                    .insert(pack.to_owned(), entry.metadata()?.len());
                continue;
            }
            // A kept file counts as whole: it is read as it is, and collected with the others.
            // One that still shares its file with the workspace is no blob (see
            // `Blobs::kept`): a leftover of a turn a crash cut short, collected as a stray.
            let meta = entry.metadata()?;
            let (hex, is_delta) = match name.strip_suffix(DELTA_SUFFIX) {
                Some(hex) => (hex, true),
                None => match name.strip_suffix(FILE_SUFFIX) {
                    Some(_) if meta.nlink() > 1 => {
                        listing.strays.push(entry.path());
                        continue;
                    }
                    Some(hex) => (hex, false),
                    None => (name, false),
                },
            };
            match ContentHash::from_hex(hex) {
                Some(hash) => {
                    let files = if is_delta {
                        &mut listing.deltas
                    } else {
                        &mut listing.whole
                    };
                    *files.entry(hash).or_default() += meta.len();
                }
                None => listing.strays.push(entry.path()),
            }
        }
        Ok(listing)
    }

    /// `keep` and every blob a delta among them needs, transitively.
    pub(crate) fn closure(
        &self,
        keep: &BTreeSet<ContentHash>,
        listing: &Listing,
    ) -> BTreeSet<ContentHash> {
        let mut live = keep.clone();
        let mut pending: Vec<ContentHash> = keep.iter().copied().collect();
        while let Some(hash) = pending.pop() {
            if listing.deltas.contains_key(&hash)
                && !listing.whole.contains_key(&hash)
                && let Some(base) = self.base_of(&hash)
                && live.insert(base)
            {
                pending.push(base);
            }
        }
        live
    }

    /// The bytes on disk of `keep`, the bases they need, and the packs `packs`.
    pub(crate) fn size_of(
        &self,
        keep: &BTreeSet<ContentHash>,
        packs: &BTreeSet<String>,
        listing: &Listing,
    ) -> u64 {
        let blobs: u64 = (self.closure(keep, listing).iter())
            .map(|hash| listing.size(hash))
            .sum();
        let packs: u64 = (packs.iter())
            .filter_map(|name| listing.packs.get(name))
            .sum();
        blobs + packs
    }

    /// Removes every blob neither in `keep` nor needed by one there, the delta of a hash also
    /// stored whole, every pack not in `packs`, and any stray file. Returns what remains, so a
    /// caller need not list the directory again.
    ///
    /// The removals are not flushed: the log no longer refers to these blobs, so one that a
    /// crash brings back is only collected again.
    ///
    /// `keep` is asked only when there are blobs outside packs: a store whose copies are all
    /// packed is collected without going through every path of every turn.
    pub(crate) fn collect(
        &self,
        keep: impl FnOnce() -> Option<BTreeSet<ContentHash>>,
        packs: &BTreeSet<String>,
    ) -> io::Result<Listing> {
        let mut listing = self.list()?;
        for name in listing.packs.keys().filter(|name| !packs.contains(*name)) {
            fs::remove_file(pack_path(&self.dir, name))?;
        }
        listing.packs.retain(|name, _| packs.contains(name));
        let live = match listing.whole.is_empty() && listing.deltas.is_empty() {
            true => BTreeSet::new(),
            false => match keep() {
                Some(keep) => self.closure(&keep, &listing),
                // What is needed is not known: nothing is removed.
                None => return Ok(listing),
            },
        };
        let mut removed = Vec::new();
        for hash in listing.whole.keys().filter(|hash| !live.contains(hash)) {
            for path in [self.path(hash), self.file_path(hash)] {
                match fs::remove_file(path) {
                    Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err),
                    _ => {}
                }
            }
            removed.push(*hash);
        }
        listing.whole.retain(|hash, _| live.contains(hash));
        let whole = &listing.whole;
        for hash in listing.deltas.keys() {
            if !live.contains(hash) || whole.contains_key(hash) {
                fs::remove_file(self.delta_path(hash))?;
            }
        }
        listing
            .deltas
            .retain(|hash, _| live.contains(hash) && !whole.contains_key(hash));
        for stray in std::mem::take(&mut listing.strays) {
            // Only files: a directory here is not ours to remove.
            if fs::symlink_metadata(&stray).is_ok_and(|meta| !meta.is_dir()) {
                fs::remove_file(stray)?;
            }
        }
        Ok(listing)
    }
}

/// The bytes of a file too big to hold in memory, stored raw as they are read: each piece is
/// hashed and appended to a temporary file in `blobs/`, and [`RawWriter::finish`] names the
/// file by the hash. Memory stays at one buffer, whatever the file's size.
pub(crate) struct RawWriter {
    temp: io::BufWriter<tempfile::NamedTempFile>,
    hasher: blake3::Hasher,
    len: u64,
    /// The `blobs/` directory.
    target: PathBuf,
}

impl RawWriter {
    const BUFFER: usize = 1 << 20;

    /// Appends the next piece of the bytes.
    pub(crate) fn write(&mut self, piece: &[u8]) -> io::Result<()> {
        self.hasher.update(piece);
        self.len += piece.len() as u64;
        self.temp.write_all(piece)
    }

    /// The hash and length of what was written so far.
    pub(crate) fn peek(&self) -> (ContentHash, u64) {
        let hash = ContentHash::from(self.hasher.finalize());
        (hash, self.len)
    }

    /// Makes what was written a blob, named by its hash (see [`RawWriter::peek`]): flushed
    /// and renamed into place, then the directory flushed, as [`Blobs::put_all`] stores one.
    /// Where a blob of the hash exists already, the copy is dropped. Dropping the writer
    /// instead of finishing it leaves nothing behind.
    pub(crate) fn finish(self) -> io::Result<()> {
        let (hash, _) = self.peek();
        let blobs = Blobs::new(self.target.clone());
        if blobs.stored(&hash) {
            return Ok(());
        }
        self.persist()
    }

    /// [`RawWriter::finish`] where the only other form of the blob is the kept file it copies
    /// (see [`Blobs::unshare`]).
    fn finish_beside_kept(self) -> io::Result<()> {
        let hash = self.peek().0;
        let blobs = Blobs::new(self.target.clone());
        if present(&blobs.path(&hash)) || present(&blobs.delta_path(&hash)) {
            return Ok(());
        }
        self.persist()
    }

    fn persist(self) -> io::Result<()> {
        let (hash, _) = self.peek();
        let blobs = Blobs::new(self.target);
        let temp = (self.temp.into_inner()).map_err(io::IntoInnerError::into_error)?;
        temp.as_file().sync_data()?;
        temp.persist(blobs.path(&hash)).map_err(|err| err.error)?;
        open_read(blobs.dir())?.sync_all()
    }
}

impl std::fmt::Debug for RawWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawWriter")
            .field("len", &self.len)
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

fn compress_into(file: &mut fs::File, bytes: &[u8], level: Compression) -> io::Result<()> {
    let mut encoder = ZlibEncoder::new(file, level);
    encoder.write_all(bytes)?;
    encoder.finish().map(drop)
}

/// Whether a regular file is at `path` (a link there is no blob: reading it would fail).
fn present(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|meta| meta.is_file())
}

fn damaged(reason: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A kept file is a blob, read as it is, only once it has no other name: while it shares
    /// its file, it is not stored, and listing it names it a stray; unsharing it stores a copy
    /// (or nothing, when the shared file no longer matches the hash).
    #[test]
    fn a_kept_file_is_a_blob_only_once_it_has_one_name() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::new(dir.path().join("blobs"));
        fs::create_dir(blobs.dir()).unwrap();
        let bytes = b"the old version of a big file\n".repeat(100);
        let hash = ContentHash::of(&bytes);
        let workspace = dir.path().join("big");
        fs::write(&workspace, &bytes).unwrap();

        let name = blobs.keep_name();
        fs::hard_link(&workspace, &name).unwrap();
        assert!(blobs.keep_file(&name, &hash).unwrap());
        assert!(!name.exists());
        assert!(!blobs.contains(&hash), "a shared file counts as stored");
        let listing = blobs.list().unwrap();
        assert_eq!(listing.strays, [blobs.file_path(&hash)]);

        // Replaced in the workspace: now the blob.
        fs::remove_file(&workspace).unwrap();
        assert!(blobs.contains(&hash));
        assert_eq!(blobs.get(&hash).unwrap().unwrap(), bytes);
        let (mut file, len) = blobs.open_raw(&hash).unwrap().unwrap();
        let mut read = Vec::new();
        file.read_to_end(&mut read).unwrap();
        assert_eq!((read, len), (bytes.clone(), bytes.len() as u64));
        assert!(blobs.list().unwrap().strays.is_empty());
        // Stored already: a second keep drops its name.
        fs::write(&workspace, &bytes).unwrap();
        let again = blobs.keep_name();
        fs::hard_link(&workspace, &again).unwrap();
        assert!(!blobs.keep_file(&again, &hash).unwrap());
        assert!(!again.exists());
        blobs.unshare_if_shared(&hash).unwrap();
        assert!(blobs.kept(&hash), "unshared a file with one name");

        // Shared, then unshared: a copy of its own, and the workspace's file alone again.
        fs::remove_file(blobs.file_path(&hash)).unwrap();
        let name = blobs.keep_name();
        fs::hard_link(&workspace, &name).unwrap();
        assert!(blobs.keep_file(&name, &hash).unwrap());
        blobs.unshare_if_shared(&hash).unwrap();
        assert!(!blobs.file_path(&hash).exists());
        assert_eq!(fs::metadata(&workspace).unwrap().nlink(), 1);
        assert_eq!(blobs.get(&hash).unwrap().unwrap(), bytes);

        // Shared and written through the workspace's name: nothing is stored for the hash.
        let other = ContentHash::of(b"x");
        fs::write(&workspace, b"x").unwrap();
        let name = blobs.keep_name();
        fs::hard_link(&workspace, &name).unwrap();
        assert!(blobs.keep_file(&name, &other).unwrap());
        fs::write(&workspace, b"y").unwrap();
        blobs.unshare_if_shared(&other).unwrap();
        assert!(!blobs.contains(&other));
        assert!(!blobs.file_path(&other).exists());
    }

    /// Listed once or looked up each time, the answers are those of `contains` for what the
    /// directory held when listed.
    #[test]
    fn contains_many_answers_as_contains_does() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::new(dir.path().to_path_buf());
        let base = "a line of the base\n".repeat(200);
        let target = format!("{base}one more\n");
        let (whole, delta) = (
            ContentHash::of(base.as_bytes()),
            ContentHash::of(target.as_bytes()),
        );
        let ops = delta::encode(target.as_bytes(), base.as_bytes()).unwrap();
        blobs
            .put_all([
                (whole, Form::Raw(base.as_bytes())),
                (delta, Form::Delta { base: whole, ops }),
            ])
            .unwrap();
        let missing = ContentHash::of(b"never stored");
        for questions in [0, Contains::LIST_FROM] {
            let contains = blobs.contains_many(questions);
            assert_eq!(contains.loose.is_some(), questions > 0);
            for hash in [whole, delta, missing] {
                assert_eq!(
                    contains.contains(&hash),
                    blobs.contains(&hash),
                    "{questions}"
                );
            }
        }
        // Stored after the listing: only a look on disk sees it.
        let listed = blobs.contains_many(Contains::LIST_FROM);
        blobs
            .put_all([(missing, Form::Raw(b"never stored"))])
            .unwrap();
        assert!(!listed.contains(&missing));
        assert!(blobs.contains_many(1).contains(&missing));
    }
}
