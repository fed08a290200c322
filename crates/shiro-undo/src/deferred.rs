//! A part of a log record kept as the JSON it was read from, and decoded only when it is
//! asked for.
//!
//! A turn's list of paths is most of its record: about 300 bytes a path, so one `sed -i`
//! over 10,000 files leaves 3 MB in the log. Every command reads the log, and most of them
//! (recording a turn, undoing a later one) never look at that turn's paths: kept as the JSON
//! it was read from, the list costs a scan of its bytes rather than a decode of each path,
//! and is written back as it was read. The bytes were checked against the line's checksum
//! when read, so they are what was written; decoding them checks what a checksum cannot (a
//! path that is not a workspace path), and a part that fails that check fails every use of
//! its turn that needs it, with the reason.

use std::cell::RefCell;
use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// What a deferred part checks once decoded, beyond its JSON's shape.
pub(crate) trait Checked {
    fn check(&self) -> Result<(), String>;
}

/// A value of `T`, or the JSON it is decoded from when first asked for.
///
/// Invariant: `raw` is `Some` or `value` is set.
pub(crate) struct Deferred<T> {
    /// The JSON it was read from, while the value is still what it says: written back as is.
    raw: Option<Raw>,
    value: OnceLock<Result<T, String>>,
}

/// The JSON of a part as it was read.
#[derive(Clone)]
enum Raw {
    /// Where it lies in the bytes it was read from, which it shares (see [`SharedSource`]):
    /// a turn's paths read from a log of megabytes are not copied out of it.
    Span {
        source: Arc<Vec<u8>>,
        start: usize,
        len: usize,
    },
    /// A copy of its own. (The box is shared as it is: an `Arc<RawValue>` made from it would
    /// copy the JSON.)
    Copied(Arc<Box<RawValue>>),
}

impl Raw {
    /// `raw`, where it lies in `source` when it lies there, else copied.
    fn within(source: Arc<Vec<u8>>, raw: &RawValue) -> Self {
        let json = raw.get();
        let (base, at) = (source.as_ptr() as usize, json.as_ptr() as usize);
        match at.checked_sub(base) {
            Some(start) if start + json.len() <= source.len() => Self::Span {
                source,
                start,
                len: json.len(),
            },
            _ => Self::Copied(Arc::new(raw.to_owned())),
        }
    }

    /// The JSON. A span was text where it was read, and its bytes are never changed.
    fn json(&self) -> Result<&str, String> {
        match self {
            Self::Span { source, start, len } => (source.get(*start..start + len))
                .and_then(|bytes| std::str::from_utf8(bytes).ok())
                .ok_or_else(|| "its JSON is no longer where it was read".to_owned()),
            Self::Copied(raw) => Ok(raw.get()),
        }
    }
}

thread_local! {
    /// The bytes being read on this thread whose parts are shared rather than copied.
    static SOURCE: RefCell<Option<Arc<Vec<u8>>>> = const { RefCell::new(None) };
}

/// While it lives, the parts read on this thread from `bytes` (as `serde_json::from_str` of a
/// piece of them reads them) keep where they lie in those bytes, sharing them, instead of a
/// copy of their JSON: reading a log, the whole of it is held once rather than twice.
pub(crate) struct SharedSource {
    previous: Option<Arc<Vec<u8>>>,
}

impl SharedSource {
    pub(crate) fn set(bytes: Arc<Vec<u8>>) -> Self {
        let previous = SOURCE.with(|source| source.borrow_mut().replace(bytes));
        Self { previous }
    }
}

impl Drop for SharedSource {
    fn drop(&mut self) {
        let previous = self.previous.take();
        SOURCE.with(|source| *source.borrow_mut() = previous);
    }
}

impl<T: DeserializeOwned + Checked> Deferred<T> {
    /// A value known from the start.
    pub(crate) fn new(value: T) -> Self {
        Self {
            raw: None,
            value: OnceLock::from(Ok(value)),
        }
    }

    /// The value, decoded and checked the first time it is asked for; `Err` says why it
    /// cannot be (every time it is asked).
    pub(crate) fn get(&self) -> Result<&T, String> {
        let decoded = self.value.get_or_init(|| {
            let raw = self.raw.as_ref().ok_or("it holds nothing")?;
            let value: T = serde_json::from_str(raw.json()?).map_err(|err| err.to_string())?;
            value.check()?;
            Ok(value)
        });
        decoded.as_ref().map_err(String::clone)
    }

    /// The value, to change: from then on it is written as it is, no longer as read.
    pub(crate) fn get_mut(&mut self) -> Result<&mut T, String> {
        self.get()?;
        self.raw = None;
        match self.value.get_mut() {
            Some(Ok(value)) => Ok(value),
            Some(Err(reason)) => Err(reason.clone()),
            None => Err("it holds nothing".to_owned()),
        }
    }

    /// Whether it is still the JSON it was read from, not decoded yet (for tests).
    #[cfg(test)]
    pub(crate) fn is_deferred(&self) -> bool {
        self.value.get().is_none()
    }

    /// Whether its JSON is where it lies in what it was read from (for tests).
    #[cfg(test)]
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self.raw, Some(Raw::Span { .. }))
    }
}

impl<T: Clone> Clone for Deferred<T> {
    fn clone(&self) -> Self {
        Self {
            // Shared, not copied: a turn's paths may take megabytes.
            raw: self.raw.clone(),
            value: self.value.clone(),
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Deferred<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.value.get(), &self.raw) {
            (Some(value), _) => value.fmt(f),
            (None, Some(raw)) => match raw.json() {
                Ok(json) => write!(f, "Deferred({} bytes)", json.len()),
                Err(reason) => write!(f, "Deferred({reason})"),
            },
            (None, None) => f.write_str("Deferred(nothing)"),
        }
    }
}

/// Two are equal when they decode to the same value, or cannot be decoded from the same
/// JSON.
impl<T: DeserializeOwned + Checked + PartialEq> PartialEq for Deferred<T> {
    fn eq(&self, other: &Self) -> bool {
        match (self.get(), other.get()) {
            (Ok(one), Ok(two)) => one == two,
            (Err(_), Err(_)) => {
                fn json<T>(part: &Deferred<T>) -> Option<Result<&str, String>> {
                    part.raw.as_ref().map(Raw::json)
                }
                json(self) == json(other)
            }
            _ => false,
        }
    }
}

impl<T: DeserializeOwned + Checked + Eq> Eq for Deferred<T> {}

impl<T: Serialize> Serialize for Deferred<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match (&self.raw, self.value.get()) {
            (Some(Raw::Copied(raw)), _) => raw.serialize(serializer),
            // Only serde_json's `RawValue` writes JSON as it is; made from the span, it checks
            // the JSON once more (a part the log is rewritten with, seldom).
            (Some(raw @ Raw::Span { .. }), _) => {
                let json = raw.json().map_err(serde::ser::Error::custom)?;
                let raw: &RawValue =
                    serde_json::from_str(json).map_err(serde::ser::Error::custom)?;
                raw.serialize(serializer)
            }
            (None, Some(Ok(value))) => value.serialize(serializer),
            (None, Some(Err(reason))) => Err(serde::ser::Error::custom(reason)),
            (None, None) => Err(serde::ser::Error::custom("a deferred part holds nothing")),
        }
    }
}

/// Read as the JSON it is, unchecked until asked for. Only serde_json's deserializer can
/// hand over the JSON of a part, which is the only one the log is read with. Inside a
/// [`SharedSource`], the JSON is borrowed from what is read (`serde_json::from_str` lends it)
/// and kept as where it lies there.
impl<'de, T> Deserialize<'de> for Deferred<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = match SOURCE.with(|source| source.borrow().clone()) {
            Some(source) => Raw::within(source, <&RawValue>::deserialize(deserializer)?),
            None => Raw::Copied(Arc::new(Box::<RawValue>::deserialize(deserializer)?)),
        };
        Ok(Self {
            raw: Some(raw),
            value: OnceLock::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    struct Even(Vec<u32>);

    impl Checked for Even {
        fn check(&self) -> Result<(), String> {
            match self.0.iter().find(|n| *n % 2 == 1) {
                Some(odd) => Err(format!("{odd} is odd")),
                None => Ok(()),
            }
        }
    }

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    struct Holder {
        part: Deferred<Even>,
    }

    #[test]
    fn a_part_read_is_decoded_when_asked_for_and_written_back_as_read() {
        // Spacing a writer of today's code would not make: written back as it was read.
        let json = r#"{"part":[2, 4,6]}"#;
        let read: Holder = serde_json::from_str(json).unwrap();
        assert!(read.part.is_deferred());
        assert_eq!(serde_json::to_string(&read).unwrap(), json);
        assert_eq!(read.part.get().unwrap(), &Even(vec![2, 4, 6]));
        assert!(!read.part.is_deferred());
        // Decoded but not changed: still written as read.
        assert_eq!(serde_json::to_string(&read).unwrap(), json);
    }

    #[test]
    fn a_part_changed_is_written_as_it_now_is() {
        let mut read: Holder = serde_json::from_str(r#"{"part":[2, 4]}"#).unwrap();
        read.part.get_mut().unwrap().0.push(8);
        assert_eq!(serde_json::to_string(&read).unwrap(), r#"{"part":[2,4,8]}"#);
        let made = Holder {
            part: Deferred::new(Even(vec![0])),
        };
        assert_eq!(serde_json::to_string(&made).unwrap(), r#"{"part":[0]}"#);
    }

    #[test]
    fn a_part_that_fails_its_check_or_its_shape_says_why_every_time() {
        let odd: Holder = serde_json::from_str(r#"{"part":[2,3]}"#).unwrap();
        assert_eq!(odd.part.get().unwrap_err(), "3 is odd");
        assert_eq!(odd.part.get().unwrap_err(), "3 is odd");
        assert_eq!(odd.clone().part.get_mut().unwrap_err(), "3 is odd");
        // Still written as read: what cannot be decoded is not lost.
        assert_eq!(serde_json::to_string(&odd).unwrap(), r#"{"part":[2,3]}"#);
        let shape: Holder = serde_json::from_str(r#"{"part":{"not":"a list"}}"#).unwrap();
        assert!(shape.part.get().unwrap_err().contains("expected"));
        // Equal only to the same JSON.
        assert_eq!(odd, odd.clone());
        assert_ne!(odd, shape);
    }

    #[test]
    fn parts_read_from_a_shared_source_lie_in_it_and_read_as_copies_do() {
        let line = r#"{"part":[2, 4]}"#;
        let bytes = Arc::new(format!("{line}\n{{\"part\":[3]}}\n").into_bytes());
        let elsewhere = r#"{"part":[6]}"#.to_owned();
        let (shared, odd, other) = {
            let _shared = SharedSource::set(Arc::clone(&bytes));
            let text = std::str::from_utf8(&bytes).unwrap();
            let (first, second) = text.split_once('\n').unwrap();
            let shared: Holder = serde_json::from_str(first).unwrap();
            let odd: Holder = serde_json::from_str(second.trim_end()).unwrap();
            // Not from the source: copied.
            let other: Holder = serde_json::from_str(&elsewhere).unwrap();
            (shared, odd, other)
        };
        assert!(shared.part.is_shared() && odd.part.is_shared());
        assert!(!other.part.is_shared());
        // Outside any source, copied too.
        let copied: Holder = serde_json::from_str(line).unwrap();
        assert!(!copied.part.is_shared());
        // The bytes are held as long as a part lies in them.
        assert_eq!(Arc::strong_count(&bytes), 3);
        assert_eq!(serde_json::to_string(&shared).unwrap(), line);
        assert_eq!(shared, copied);
        assert_eq!(shared.part.get().unwrap(), &Even(vec![2, 4]));
        assert_eq!(serde_json::to_string(&shared).unwrap(), line);
        assert_eq!(odd.part.get().unwrap_err(), "3 is odd");
        assert_eq!(serde_json::to_string(&odd).unwrap(), r#"{"part":[3]}"#);
        assert_eq!(other.part.get().unwrap(), &Even(vec![6]));
        assert_eq!(format!("{:?}", odd.part), "Err(\"3 is odd\")");
        drop((shared, odd));
        assert_eq!(Arc::strong_count(&bytes), 1);
    }

    #[test]
    fn a_shared_source_set_inside_another_gives_it_back_when_dropped() {
        let outer = Arc::new(br#"{"part":[2]}"#.to_vec());
        let inner = Arc::new(br#"{"part":[4]}"#.to_vec());
        let _outer = SharedSource::set(Arc::clone(&outer));
        {
            let _inner = SharedSource::set(Arc::clone(&inner));
            let read: Holder = serde_json::from_slice(&inner).unwrap();
            assert!(read.part.is_shared());
        }
        let read: Holder = serde_json::from_slice(&outer).unwrap();
        assert!(read.part.is_shared(), "the outer source is no longer set");
        assert_eq!(Arc::strong_count(&inner), 1);
    }

    #[test]
    fn clones_share_the_json_and_decode_on_their_own() {
        let read: Holder = serde_json::from_str(r#"{"part":[4]}"#).unwrap();
        let mut copy = read.clone();
        copy.part.get_mut().unwrap().0.push(6);
        assert_eq!(read.part.get().unwrap(), &Even(vec![4]));
        assert_eq!(copy.part.get().unwrap(), &Even(vec![4, 6]));
        assert_eq!(
            read,
            Holder {
                part: Deferred::new(Even(vec![4]))
            }
        );
    }
}
