//! What a path held at one moment: the unit the log records, compares and restores.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use shiro_tools::{Mutator, MutatorError, Stat, WorkspacePath};

/// The blake3 hash of a file's raw bytes; also the name of its blob in the store.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash([u8; 32]);

impl ContentHash {
    /// The hash of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(*blake3::hash(bytes).as_bytes())
    }

    /// The hash with these 32 bytes.
    pub(crate) fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The 32 bytes of the hash.
    pub(crate) fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64 lowercase hex digits of the hash.
    pub fn to_hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }

    /// Parses 64 hex digits; `None` for anything else.
    pub fn from_hex(hex: &str) -> Option<Self> {
        blake3::Hash::from_hex(hex)
            .ok()
            .map(|hash| Self(*hash.as_bytes()))
    }

    /// The first 12 hex digits, enough to tell hashes apart in a report.
    pub fn short(&self) -> String {
        let mut hex = self.to_hex();
        hex.truncate(12);
        hex
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentHash({})", self.short())
    }
}

impl Serialize for ContentHash {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let hex = String::deserialize(deserializer)?;
        Self::from_hex(&hex).ok_or_else(|| serde::de::Error::custom("invalid content hash"))
    }
}

/// The exact state of one path: what kind of entry it is and everything needed to put it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Image {
    /// Nothing was there.
    Absent,
    /// A regular file; its bytes are the blob named by `hash` (when the store holds them).
    File {
        /// Unix permission bits.
        mode: u32,
        /// Length in bytes.
        len: u64,
        /// The blake3 hash of the bytes.
        hash: ContentHash,
    },
    /// A directory with its permission bits (its entries are images of their own).
    Dir {
        /// Unix permission bits.
        mode: u32,
    },
    /// A symbolic link and its target text.
    Symlink {
        /// The link's target, as stored in the link.
        target: String,
    },
}

impl Image {
    /// Whether something is at the path.
    pub fn exists(&self) -> bool {
        !matches!(self, Image::Absent)
    }

    /// Whether it is a directory.
    pub fn is_dir(&self) -> bool {
        matches!(self, Image::Dir { .. })
    }

    /// The hash of the file's bytes, for a file.
    pub fn hash(&self) -> Option<ContentHash> {
        match self {
            Image::File { hash, .. } => Some(*hash),
            _ => None,
        }
    }
}

impl fmt::Display for Image {
    /// `absent`, `file 644 (12 bytes, 1a2b3c4d5e6f)`, `directory 755`, `symlink -> target`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Image::Absent => f.write_str("absent"),
            Image::File { mode, len, hash } => {
                let unit = if *len == 1 { "byte" } else { "bytes" };
                write!(f, "file {mode:o} ({len} {unit}, {})", hash.short())
            }
            Image::Dir { mode } => write!(f, "directory {mode:o}"),
            Image::Symlink { target } => write!(f, "symlink -> {target}"),
        }
    }
}

/// The image of the entry at `path` itself (see [`Mutator::real_stat`]), with a file's bytes.
pub(crate) async fn real_image(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    spares: &Spares,
) -> Result<(Image, Option<Vec<u8>>), MutatorError> {
    let stat = mutator.real_stat(path).await?;
    image_of(mutator, path, stat, spares).await
}

/// The image of the entry at `path` itself (see [`Mutator::real_stat`]), hashing a file's
/// bytes as they are read instead of keeping them (see [`Mutator::read_with`]).
pub(crate) async fn hashed_image(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
) -> Result<Image, MutatorError> {
    Ok(match mutator.real_stat(path).await? {
        Stat::File { mode, .. } => {
            let (len, hash) = hash_file(mutator, path).await?;
            Image::File { mode, len, hash }
        }
        stat => image_of(mutator, path, stat, &Spares::none()).await?.0,
    })
}

/// As [`real_image`], but a file of `stream` bytes or more is hashed a piece at a time and
/// its bytes are not returned: a file of any size then costs bounded memory.
pub(crate) async fn bounded_image(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    stream: u64,
    spares: &Spares,
) -> Result<(Image, Option<Vec<u8>>), MutatorError> {
    match mutator.real_stat(path).await? {
        Stat::File { mode, len } if len >= stream => {
            let (len, hash) = hash_file(mutator, path).await?;
            Ok((Image::File { mode, len, hash }, None))
        }
        stat => image_of(mutator, path, stat, spares).await,
    }
}

/// Hands the file at `path` to `sink` a piece at a time, and stops handing at the first
/// piece the sink fails to take; `op` names what failed in the error (as
/// [`MutatorError::Io`] does).
pub(crate) async fn copy_into(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    sink: &mut (dyn FnMut(&[u8]) -> std::io::Result<()> + Send),
    op: &'static str,
) -> Result<(), MutatorError> {
    let mut failed = None;
    mutator
        .read_with(path, &mut |piece| {
            if failed.is_none()
                && let Err(err) = sink(piece)
            {
                failed = Some(err);
            }
        })
        .await?;
    match failed {
        Some(source) => Err(MutatorError::Io {
            op,
            path: path.clone(),
            source,
        }),
        None => Ok(()),
    }
}

/// The length and hash of the file at `path`, read a piece at a time.
pub(crate) async fn hash_file(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
) -> Result<(u64, ContentHash), MutatorError> {
    let mut hasher = blake3::Hasher::new();
    let len = mutator
        .read_with(path, &mut |piece| {
            hasher.update(piece);
        })
        .await?;
    Ok((len, ContentHash(*hasher.finalize().as_bytes())))
}

/// The image of what `stat` found at `path`, reading the bytes of a file (into a spare
/// buffer, when there is one for a file that big).
pub(crate) async fn image_of(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    stat: Stat,
    spares: &Spares,
) -> Result<(Image, Option<Vec<u8>>), MutatorError> {
    Ok(match stat {
        Stat::Absent => (Image::Absent, None),
        Stat::Dir { mode } => (Image::Dir { mode }, None),
        Stat::Symlink { target } => (Image::Symlink { target }, None),
        Stat::File { mode, len } => {
            let bytes = match spares.take(len) {
                Some(buf) => mutator.read_into(path, buf).await?,
                None => mutator.read(path).await?,
            };
            let image = Image::File {
                mode,
                len: bytes.len() as u64,
                hash: ContentHash::of(&bytes),
            };
            (image, Some(bytes))
        }
    })
}

/// Buffers of big files kept from one turn to read the next turn's into. A long session that
/// edits a big file turn after turn then reads each version into memory it already has:
/// fresh memory must be cleared and mapped page by page (about 4 ms for 10 MiB), and giving
/// it back costs as much again. It holds at most two buffers of at most 64 MiB each.
#[derive(Debug, Default)]
pub(crate) struct Spares {
    /// Buffers of files at least this big are kept; 0 keeps none.
    from: u64,
    buffers: std::sync::Mutex<Vec<Vec<u8>>>,
}

impl Spares {
    /// At most this many buffers are kept, each of at most [`Spares::KEEP_MAX`] bytes.
    const KEEP: usize = 2;
    const KEEP_MAX: usize = 64 << 20;

    /// Spares for files of at least `from` bytes.
    pub(crate) fn new(from: u64) -> Self {
        Self {
            from: from.max(1),
            buffers: std::sync::Mutex::default(),
        }
    }

    /// None: nothing is kept and nothing is given out (crash recovery).
    pub(crate) fn none() -> Self {
        Self::default()
    }

    /// A kept buffer for a file of `len` bytes, if the file is big and one is kept.
    pub(crate) fn take(&self, len: u64) -> Option<Vec<u8>> {
        if self.from == 0 || len < self.from {
            return None;
        }
        self.buffers.lock().ok()?.pop()
    }

    /// Keeps what it can of `buffers` (the biggest), and frees the rest.
    pub(crate) fn give(&self, buffers: impl IntoIterator<Item = Vec<u8>>) {
        if self.from == 0 {
            return;
        }
        let Ok(mut kept) = self.buffers.lock() else {
            return;
        };
        let from = usize::try_from(self.from).unwrap_or(usize::MAX);
        kept.extend(
            buffers
                .into_iter()
                .filter(|buf| (from..=Self::KEEP_MAX).contains(&buf.capacity())),
        );
        kept.sort_by_key(|buf| std::cmp::Reverse(buf.capacity()));
        kept.truncate(Self::KEEP);
    }
}
