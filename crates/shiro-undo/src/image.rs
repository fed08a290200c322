//! What a path held at one moment: the unit the log records, compares and restores.

use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use shiro_tools::{Mutator, MutatorError, Stat, WorkspacePath};

/// The blake3 hash of a file's raw bytes; also the name of its blob in the store.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash([u8; 32]);

impl From<blake3::Hash> for ContentHash {
    fn from(hash: blake3::Hash) -> Self {
        Self(*hash.as_bytes())
    }
}

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

    /// Parses 64 hex digits (either case); `None` for anything else.
    pub fn from_hex(hex: &str) -> Option<Self> {
        // By table: a log holds two hashes a path, and `blake3::Hash::from_hex` took a sixth
        // of the time of reading one.
        const NOT_HEX: u8 = 0xff;
        const DIGITS: [u8; 256] = {
            let mut table = [NOT_HEX; 256];
            let mut i = 0;
            while i < 10 {
                table[b'0' as usize + i] = i as u8;
                i += 1;
            }
            let mut i = 0;
            while i < 6 {
                table[b'a' as usize + i] = 10 + i as u8;
                table[b'A' as usize + i] = 10 + i as u8;
                i += 1;
            }
            table
        };
        let hex = hex.as_bytes();
        if hex.len() != 64 {
            return None;
        }
        let mut bytes = [0u8; 32];
        let mut seen = 0;
        for (byte, pair) in bytes.iter_mut().zip(hex.chunks_exact(2)) {
            let (high, low) = match *pair {
                [high, low] => (DIGITS[usize::from(high)], DIGITS[usize::from(low)]),
                _ => (NOT_HEX, NOT_HEX),
            };
            seen |= high | low;
            *byte = (high << 4) | low;
        }
        // A digit is under 16; only a byte that is not one sets the high bits.
        (seen < 16).then_some(Self(bytes))
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
        serializer.serialize_str(blake3::Hash::from_bytes(self.0).to_hex().as_str())
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(HexVisitor)
    }
}

/// Reads a hash from its hex digits as they stand in the input, without a copy of them.
struct HexVisitor;

impl Visitor<'_> for HexVisitor {
    type Value = ContentHash;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a content hash: 64 hex digits")
    }

    fn visit_str<E: de::Error>(self, hex: &str) -> Result<ContentHash, E> {
        ContentHash::from_hex(hex).ok_or_else(|| E::custom("invalid content hash"))
    }
}

/// The exact state of one path: what kind of entry it is and everything needed to put it back.
///
/// In JSON, an object whose `kind` names the variant, beside the variant's fields; read in
/// any order of its fields, and an unknown field is ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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

impl<'de> Deserialize<'de> for Image {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ImageVisitor)
    }
}

/// Reads an image's fields as they come, whatever their order. serde's derive for an
/// internally tagged enum first copies each object into a tree of its own, to find the tag
/// wherever it stands: for a log that lists many paths, two images each, most of the cost of
/// reading it.
struct ImageVisitor;

/// The fields of any image.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum ImageField {
    Kind,
    Mode,
    Len,
    Hash,
    Target,
    #[serde(other)]
    Other,
}

/// The kinds of image, as `kind` names them.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum ImageKind {
    Absent,
    File,
    Dir,
    Symlink,
}

impl<'de> Visitor<'de> for ImageVisitor {
    type Value = Image;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an image: an object with a `kind`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Image, A::Error> {
        fn once<T, E: de::Error>(
            slot: &mut Option<T>,
            value: T,
            name: &'static str,
        ) -> Result<(), E> {
            match slot.replace(value) {
                Some(_) => Err(E::duplicate_field(name)),
                None => Ok(()),
            }
        }
        let (mut kind, mut mode, mut len, mut hash, mut target) = (None, None, None, None, None);
        while let Some(field) = map.next_key::<ImageField>()? {
            match field {
                ImageField::Kind => once(&mut kind, map.next_value::<ImageKind>()?, "kind")?,
                ImageField::Mode => once(&mut mode, map.next_value::<u32>()?, "mode")?,
                ImageField::Len => once(&mut len, map.next_value::<u64>()?, "len")?,
                ImageField::Hash => once(&mut hash, map.next_value::<ContentHash>()?, "hash")?,
                ImageField::Target => once(&mut target, map.next_value::<String>()?, "target")?,
                ImageField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let needed = |name: &'static str| <A::Error as de::Error>::missing_field(name);
        Ok(match kind.ok_or_else(|| needed("kind"))? {
            ImageKind::Absent => Image::Absent,
            ImageKind::File => Image::File {
                mode: mode.ok_or_else(|| needed("mode"))?,
                len: len.ok_or_else(|| needed("len"))?,
                hash: hash.ok_or_else(|| needed("hash"))?,
            },
            ImageKind::Dir => Image::Dir {
                mode: mode.ok_or_else(|| needed("mode"))?,
            },
            ImageKind::Symlink => Image::Symlink {
                target: target.ok_or_else(|| needed("target"))?,
            },
        })
    }
}

impl Image {
    /// The image of a regular file with permission bits `mode` holding `bytes`.
    pub(crate) fn file(mode: u32, bytes: &[u8]) -> Self {
        Image::File {
            mode,
            len: bytes.len() as u64,
            hash: ContentHash::of(bytes),
        }
    }

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

    /// The hash of the file's bytes, for a file too big to hold (`stream` bytes or more):
    /// the versions the store may keep under a second name (see `Blobs::keep_file`).
    pub(crate) fn streamed_hash(&self, stream: u64) -> Option<ContentHash> {
        match self {
            Image::File { hash, len, .. } if *len >= stream => Some(*hash),
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
        Stat::File { mode, len } => {
            let (len, hash) = hash_file(mutator, path, Some(len)).await?;
            Image::File { mode, len, hash }
        }
        stat => image_of(mutator, path, stat, &Spares::none()).await?.0,
    })
}

/// As [`real_image`], but a file of `stream` bytes or more is hashed a piece at a time and
/// its bytes are not returned: a file of any size then costs bounded memory. `known` is the
/// hash of a file read before, with its stamp: a file found at the path with that stamp is
/// not read again.
pub(crate) async fn bounded_image(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    stream: u64,
    spares: &Spares,
    known: Option<&KnownHash>,
) -> Result<(Image, Option<Vec<u8>>), MutatorError> {
    match mutator.real_stat(path).await? {
        Stat::File { mode, len } if len >= stream => {
            let (len, hash) = hash_file_known(mutator, path, len, known).await?;
            Ok((Image::File { mode, len, hash }, None))
        }
        stat => image_of(mutator, path, stat, spares).await,
    }
}

/// The hash of a file read earlier, with the file's stamp then.
pub(crate) type KnownHash = (FileStamp, ContentHash);

/// Which file a regular file is, and whether it changed since: its device, inode, length
/// and modification time.
///
/// Every write changes the modification time, to the nanosecond here, so a file with the
/// stamp it had when it was hashed still has the bytes it had then, unless a program set the
/// time back on purpose. Taken for a new version that a recorder hashed before it was moved
/// in: a hash wrongly taken for the one the workspace holds could only make an undo find a
/// change where there is none, and keep the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: (i64, i64),
}

impl FileStamp {
    pub(crate) fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified: (meta.mtime(), meta.mtime_nsec()),
        }
    }
}

/// [`hash_file`] of a file of `len` bytes, unless it has the stamp of `known`, whose hash it
/// then has.
async fn hash_file_known(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    len: u64,
    known: Option<&KnownHash>,
) -> Result<(u64, ContentHash), MutatorError> {
    if let Some((stamp, hash)) = known
        && let Some(file) = mutator.open_read(path).await?
        && file
            .metadata()
            .is_ok_and(|meta| FileStamp::of(&meta) == *stamp)
    {
        return Ok((stamp.len, *hash));
    }
    hash_file(mutator, path, Some(len)).await
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

/// The length and hash of the file at `path`, read a piece at a time. `len` is its length
/// when the caller knows it: a big file is then opened and hashed on two threads where the
/// mutator can hand out its files (see [`crate::file_hash::hash_file_from`]).
pub(crate) async fn hash_file(
    mutator: &dyn Mutator,
    path: &WorkspacePath,
    len: Option<u64>,
) -> Result<(u64, ContentHash), MutatorError> {
    if len.is_some_and(|len| len >= crate::file_hash::PARALLEL_HASH_FROM)
        && let Some(mut file) = mutator.open_read(path).await?
    {
        let hashed =
            tokio::task::spawn_blocking(move || crate::file_hash::hash_file_from(&mut file, 0))
                .await
                .map_err(|join| MutatorError::Interrupted(join.to_string()))?;
        let (hash, len) = hashed.map_err(|source| MutatorError::Io {
            op: "read",
            path: path.clone(),
            source,
        })?;
        return Ok((len, hash.into()));
    }
    let mut hasher = blake3::Hasher::new();
    let len = mutator
        .read_with(path, &mut |piece| {
            hasher.update(piece);
        })
        .await?;
    Ok((len, hasher.finalize().into()))
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
            (Image::file(mode, &bytes), Some(bytes))
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    fn image() -> impl Strategy<Value = Image> {
        prop_oneof![
            Just(Image::Absent),
            (any::<u32>(), any::<u64>(), any::<[u8; 32]>()).prop_map(|(mode, len, hash)| {
                Image::File {
                    mode,
                    len,
                    hash: ContentHash(hash),
                }
            }),
            any::<u32>().prop_map(|mode| Image::Dir { mode }),
            ".*".prop_map(|target| Image::Symlink { target }),
        ]
    }

    proptest! {
        /// An image reads back as written, whatever the order of its fields, with a field
        /// of a later version beside them.
        #[test]
        fn an_image_reads_back_in_any_order_of_its_fields(
            image in image(),
            turn in any::<prop::sample::Index>(),
        ) {
            let serde_json::Value::Object(fields) = serde_json::to_value(&image).unwrap() else {
                panic!("an image is an object");
            };
            let mut fields: Vec<_> = fields.into_iter().collect();
            fields.push(("later".to_owned(), serde_json::json!({"nested": [1, 2]})));
            let at = turn.index(fields.len());
            fields.rotate_left(at);
            // Written out by hand: a JSON map of serde_json's own sorts its keys.
            let members: Vec<String> = (fields.iter())
                .map(|(key, value)| format!("{}:{value}", serde_json::to_string(key).unwrap()))
                .collect();
            let text = format!("{{{}}}", members.join(","));
            prop_assert_eq!(serde_json::from_str::<Image>(&text).unwrap(), image);
        }
    }

    proptest! {
        /// A hash reads back from its hex digits, in either case, and nothing else reads as
        /// one.
        #[test]
        fn a_hash_reads_back_from_its_hex_digits(
            bytes in any::<[u8; 32]>(),
            text in prop_oneof![".{0,70}", "[0-9a-fA-Fg ]{62,66}"],
        ) {
            let hash = ContentHash(bytes);
            prop_assert_eq!(ContentHash::from_hex(&hash.to_hex()), Some(hash));
            prop_assert_eq!(ContentHash::from_hex(&hash.to_hex().to_uppercase()), Some(hash));
            let theirs = blake3::Hash::from_hex(&text).ok().map(|h| ContentHash(*h.as_bytes()));
            prop_assert_eq!(ContentHash::from_hex(&text), theirs);
        }
    }

    #[test]
    fn an_image_missing_a_field_or_naming_one_twice_is_refused() {
        let hash = "0".repeat(64);
        let refused = |text: &str| serde_json::from_str::<Image>(text).unwrap_err().to_string();
        assert!(refused(r#"{"mode":420}"#).contains("missing field `kind`"));
        assert!(refused(r#"{"kind":"file","mode":420,"len":1}"#).contains("missing field `hash`"));
        assert!(refused(r#"{"kind":"dir"}"#).contains("missing field `mode`"));
        assert!(refused(r#"{"kind":"symlink"}"#).contains("missing field `target`"));
        assert!(refused(r#"{"kind":"dir","mode":1,"mode":2}"#).contains("duplicate field `mode`"));
        assert!(refused(r#"{"kind":"socket"}"#).contains("unknown variant `socket`"));
        assert!(
            refused(r#"{"kind":"file","mode":1,"len":1,"hash":"xyz"}"#)
                .contains("invalid content hash")
        );
        assert!(refused(r#"["file"]"#).contains("an image"));
        let file = format!(r#"{{"hash":"{hash}","len":3,"kind":"file","mode":420}}"#);
        assert_eq!(
            serde_json::from_str::<Image>(&file).unwrap(),
            Image::File {
                mode: 0o644,
                len: 3,
                hash: ContentHash([0; 32])
            }
        );
    }
}
