//! Content-addressed, compressed, deduplicated blobs: the bytes of pre-images.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;

use crate::image::ContentHash;

/// The `blobs/` directory of a store. Each blob is named by the hex blake3 hash of its raw
/// bytes and holds them zlib-compressed.
#[derive(Debug)]
pub(crate) struct Blobs {
    dir: PathBuf,
}

impl Blobs {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, hash: &ContentHash) -> PathBuf {
        self.dir.join(hash.to_hex())
    }

    /// Like [`Blobs::put_all`], with fast compression: for a restore's copies of what it
    /// replaces, which are made on its path.
    pub(crate) fn put_fast<'a>(
        &self,
        items: impl IntoIterator<Item = (&'a ContentHash, &'a [u8])>,
    ) -> io::Result<()> {
        self.put_all(items, |_| Compression::fast())
    }

    /// Stores every `(hash, bytes)` not stored yet, at `level`, and returns once all of them
    /// are on disk: each blob is written to a temporary file, flushed and renamed into place,
    /// then the directory is flushed once for all of them.
    ///
    /// A blob is flushed before it is renamed, so a blob that exists is always complete, even
    /// after a crash before the directory is flushed: existence is enough for deduplication.
    /// The directory is flushed even when every blob was there already: one may have been
    /// renamed into place by an attempt that failed before flushing it.
    pub(crate) fn put_all<'a>(
        &self,
        items: impl IntoIterator<Item = (&'a ContentHash, &'a [u8])>,
        level: impl Fn(usize) -> Compression,
    ) -> io::Result<()> {
        let mut wrote = false;
        for (hash, bytes) in items {
            let path = self.path(hash);
            if path.exists() {
                continue;
            }
            wrote = true;
            let mut temp = tempfile::Builder::new()
                .prefix(".tmp-")
                .tempfile_in(&self.dir)?;
            {
                let mut encoder = ZlibEncoder::new(temp.as_file_mut(), level(bytes.len()));
                encoder.write_all(bytes)?;
                encoder.finish()?;
            }
            temp.persist(&path).map_err(|err| err.error)?;
        }
        if wrote {
            // One flush of the file system makes every blob and its directory entry durable;
            // an fsync per blob cost a flush per restored file.
            let dir = fs::File::open(&self.dir)?;
            rustix::fs::syncfs(&dir)?;
        }
        Ok(())
    }

    /// The zlib level for a finished turn's pre-image of `len` bytes. Level 6 compresses about
    /// a third better than level 1 but runs at only 15-20 MB/s on a slow machine, so it is
    /// kept for the sizes of source files (under 17 ms each); larger files get level 1, so a
    /// turn on a 10 MiB file does not wait half a second. Recompressing those later, off the
    /// turn's path, would win both; see docs/performance.md.
    pub(crate) fn finish_level(len: usize) -> Compression {
        const WELL_COMPRESSED_MAX: usize = 256 * 1024;
        if len <= WELL_COMPRESSED_MAX {
            Compression::default()
        } else {
            Compression::fast()
        }
    }

    /// Whether the blob is stored.
    pub(crate) fn contains(&self, hash: &ContentHash) -> bool {
        self.path(hash).exists()
    }

    /// The raw bytes of a blob, checked against its hash. `Ok(None)` when it is missing;
    /// an error names a blob that is damaged.
    pub(crate) fn get(&self, hash: &ContentHash) -> io::Result<Option<Vec<u8>>> {
        let stored = match fs::read(self.path(hash)) {
            Ok(stored) => stored,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err),
        };
        // One read of the whole blob, then inflating from memory: a reader over the file
        // made a system call per 32 KiB.
        let mut bytes = Vec::with_capacity(stored.len().saturating_mul(3));
        ZlibDecoder::new(stored.as_slice()).read_to_end(&mut bytes)?;
        if ContentHash::of(&bytes) != *hash {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "blob content does not match its hash",
            ));
        }
        Ok(Some(bytes))
    }

    /// Every blob with its size on disk. Files that are not blobs (temporary files left by a
    /// crash) are listed under `None`.
    pub(crate) fn list(&self) -> io::Result<(BTreeMap<ContentHash, u64>, Vec<PathBuf>)> {
        let mut blobs = BTreeMap::new();
        let mut strays = Vec::new();
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok((blobs, strays)),
            Err(err) => return Err(err),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            match name.to_str().and_then(ContentHash::from_hex) {
                Some(hash) => {
                    blobs.insert(hash, entry.metadata()?.len());
                }
                None => strays.push(entry.path()),
            }
        }
        Ok((blobs, strays))
    }

    /// Removes every blob not in `keep`, and any stray file. Returns how many were removed.
    ///
    /// The removals are not flushed: the log no longer refers to these blobs, so one that a
    /// crash brings back is only collected again.
    pub(crate) fn collect(&self, keep: &BTreeSet<ContentHash>) -> io::Result<usize> {
        let (blobs, strays) = self.list()?;
        let mut removed = 0;
        for hash in blobs.keys().filter(|hash| !keep.contains(hash)) {
            fs::remove_file(self.path(hash))?;
            removed += 1;
        }
        for stray in strays {
            // Only files: a directory here is not ours to remove.
            if stray.is_file() {
                fs::remove_file(stray)?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}
