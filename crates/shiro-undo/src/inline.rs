//! Copies a turn's own log record holds (format 11): the new copies of a small turn, kept in
//! the record that commits it rather than in a pack of their own.
//!
//! A pack costs a turn two flushes besides the log's: the pack's bytes, then the directory
//! that names it, before the log may name the pack. The copies of a one-file edit are a few
//! KiB compressed; held in the record, they are flushed with it, at no extra cost. A record
//! holds them only when the turn's new copies (its pre-images, and what it left of small
//! files) come to at most `StoreOptions::max_inline_bytes` (by default [`INLINE_MAX`])
//! before compression, so that the log (which every process that opens the store reads)
//! stays small: at the default depth of 20 turns, under 1 MiB.
//!
//! A copy held in a record belongs to that record alone. Whether the store holds a copy
//! already is asked of the blobs and the packs, never of another turn's record (see
//! [`crate::pack::Packed`]): that turn may leave the log while this one still needs the
//! bytes. A turn made from others (a rewind's, a revert's) takes the copies it needs along.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use flate2::Compression;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::image::ContentHash;

/// The most bytes, before compression, of the new copies a turn keeps in its record, by
/// default (`StoreOptions::max_inline_bytes`).
pub(crate) const INLINE_MAX: u64 = 32 << 10;

/// Copies held in a record, each zlib-compressed (RFC 1950), by the hash of its bytes.
/// Written in the record as an object of base64 strings (RFC 4648, with padding) by hash.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Inline(BTreeMap<ContentHash, Vec<u8>>);

impl Inline {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn contains(&self, hash: &ContentHash) -> bool {
        self.0.contains_key(hash)
    }

    /// Holds `bytes`, whose hash is `hash`, compressed at `level`.
    pub(crate) fn put(
        &mut self,
        hash: ContentHash,
        bytes: &[u8],
        level: Compression,
    ) -> io::Result<()> {
        if self.contains(&hash) {
            return Ok(());
        }
        let mut encoder = ZlibEncoder::new(Vec::with_capacity(bytes.len() / 2 + 64), level);
        io::Write::write_all(&mut encoder, bytes)?;
        self.0.insert(hash, encoder.finish()?);
        Ok(())
    }

    /// Holds the copy of `hash` that `from` holds, as it is; whether it did.
    pub(crate) fn take_from(&mut self, from: &Inline, hash: &ContentHash) -> bool {
        match from.0.get(hash) {
            Some(stored) => {
                self.0.entry(*hash).or_insert_with(|| stored.clone());
                true
            }
            None => false,
        }
    }

    /// Holds every copy `from` holds too.
    pub(crate) fn extend(&mut self, from: &Inline) {
        for (hash, stored) in &from.0 {
            self.0.entry(*hash).or_insert_with(|| stored.clone());
        }
    }

    /// Keeps only the copies of the hashes `keep` says yes to.
    pub(crate) fn retain(&mut self, keep: impl Fn(&ContentHash) -> bool) {
        self.0.retain(|hash, _| keep(hash));
    }

    /// The bytes of `hash`, checked against it; `Ok(None)` when not held. A copy that does
    /// not inflate, or not to its hash, is damage (`InvalidData`).
    pub(crate) fn get(&self, hash: &ContentHash) -> io::Result<Option<Vec<u8>>> {
        let Some(stored) = self.0.get(hash) else {
            return Ok(None);
        };
        let damaged = |reason: &str| io::Error::new(io::ErrorKind::InvalidData, reason.to_owned());
        let mut bytes = Vec::with_capacity(stored.len().saturating_mul(3));
        ZlibDecoder::new(&stored[..])
            .read_to_end(&mut bytes)
            .map_err(|err| damaged(&format!("copy in the log record: {err}")))?;
        if ContentHash::of(&bytes) != *hash {
            return Err(damaged("copy in the log record does not match its hash"));
        }
        Ok(Some(bytes))
    }
}

impl fmt::Debug for Inline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sizes: BTreeMap<String, usize> = (self.0.iter())
            .map(|(hash, stored)| (hash.short(), stored.len()))
            .collect();
        f.debug_tuple("Inline").field(&sizes).finish()
    }
}

impl Serialize for Inline {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (hash, stored) in &self.0 {
            map.serialize_entry(hash, &STANDARD.encode(stored))?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Inline {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(InlineVisitor)
    }
}

struct InlineVisitor;

impl<'de> Visitor<'de> for InlineVisitor {
    type Value = Inline;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of base64 strings by content hash")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Inline, A::Error> {
        let mut copies = BTreeMap::new();
        while let Some((hash, text)) =
            map.next_entry::<ContentHash, std::borrow::Cow<'de, str>>()?
        {
            let stored = STANDARD.decode(text.as_bytes()).map_err(|err| {
                serde::de::Error::custom(format!("copy of {hash} is not base64: {err}"))
            })?;
            if copies.insert(hash, stored).is_some() {
                return Err(serde::de::Error::custom(format!(
                    "copy of {hash} given twice"
                )));
            }
        }
        Ok(Inline(copies))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn copies_read_back_through_the_record_text() {
        let mut inline = Inline::default();
        let (one, two) = (b"fn main() {}\n".repeat(40), vec![0u8, 255, 7, 1]);
        inline
            .put(ContentHash::of(&one), &one, Compression::default())
            .unwrap();
        inline
            .put(ContentHash::of(&two), &two, Compression::fast())
            .unwrap();
        let text = serde_json::to_string(&inline).unwrap();
        let read: Inline = serde_json::from_str(&text).unwrap();
        assert_eq!(read, inline);
        assert_eq!(read.get(&ContentHash::of(&one)).unwrap().unwrap(), one);
        assert_eq!(read.get(&ContentHash::of(&two)).unwrap().unwrap(), two);
        assert_eq!(read.get(&ContentHash::of(b"other")).unwrap(), None);
    }

    #[test]
    fn a_damaged_copy_is_an_error_never_other_bytes() {
        let bytes = b"the pre-image\n".repeat(10);
        let hash = ContentHash::of(&bytes);
        // Bytes that inflate, but to something else.
        let mut wrong = Inline::default();
        wrong
            .put(hash, b"not the pre-image", Compression::default())
            .unwrap();
        let err = wrong.get(&hash).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("does not match"), "{err}");
        // Bytes that do not inflate.
        let text = format!(r#"{{"{}":"AAAA"}}"#, hash.to_hex());
        let garbled: Inline = serde_json::from_str(&text).unwrap();
        assert_eq!(
            garbled.get(&hash).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
    }

    #[test]
    fn a_record_with_a_bad_copy_does_not_read() {
        let hash = ContentHash::of(b"x").to_hex();
        for text in [
            format!(r#"{{"{hash}":"not base64!"}}"#),
            format!(r#"{{"{hash}":"AAAA","{hash}":"AAAA"}}"#),
            r#"{"abc":"AAAA"}"#.to_owned(),
            format!(r#"{{"{hash}":7}}"#),
        ] {
            assert!(serde_json::from_str::<Inline>(&text).is_err(), "{text}");
        }
    }
}
