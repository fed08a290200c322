//! Checksummed JSON lines: every record of the log and of the in-flight turn (and of the
//! journal of a format-3 store).
//!
//! A line is `<blake3 hex of the JSON> <JSON>\n`. A line whose checksum does not match, that
//! does not parse, or that lacks its newline (a write cut short) is reported and never used;
//! the lines around it stay usable.

use std::fs::{self, File};
use std::io::{self, BufRead, Read, Write};
use std::path::Path;

use flate2::{Decompress, FlushDecompress, Status};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ground::{no_follow, open_read};

/// The length of a checksum and the space after it.
const SUM_LEN: usize = 2 * blake3::OUT_LEN + 1;

/// One checksummed line, newline included. The JSON is measured first and then written
/// once, in place after room kept for its checksum: a turn of many paths makes a record of
/// tens of MiB, which is neither copied nor given room to spare.
pub(crate) fn encode<T: Serialize>(value: &T) -> io::Result<String> {
    let (_, len) = tally(value, None)?;
    let mut line = Vec::with_capacity(SUM_LEN + len + 1);
    line.resize(SUM_LEN, b' ');
    serde_json::to_writer(&mut line, value).map_err(io::Error::other)?;
    let sum = blake3::hash(&line[SUM_LEN..]).to_hex();
    line[..SUM_LEN - 1].copy_from_slice(sum.as_bytes());
    line.push(b'\n');
    String::from_utf8(line).map_err(io::Error::other)
}

/// Writes one checksummed line, newline included, to `out`, without holding it: the JSON is
/// made once to checksum it and once more to write it (see [`write_summed_line`]).
pub(crate) fn write_line<T: Serialize>(value: &T, out: &mut dyn Write) -> io::Result<()> {
    let (sum, _) = line_sum(value)?;
    write_summed_line(value, &sum, out)
}

/// The checksum of `value`'s line and the length of the whole line, newline included,
/// without holding it.
pub(crate) fn line_sum<T: Serialize>(value: &T) -> io::Result<(blake3::Hash, u64)> {
    let (sum, len) = tally(value, None)?;
    Ok((sum, (SUM_LEN + len + 1) as u64))
}

/// Writes the line of `value`, whose checksum [`line_sum`] gave as `sum`, to `out`. The JSON
/// is made again to write it; the two must agree (serialising the same value is
/// deterministic). If they did not, the line written would be unusable, so that is an error.
pub(crate) fn write_summed_line<T: Serialize>(
    value: &T,
    sum: &blake3::Hash,
    out: &mut dyn Write,
) -> io::Result<()> {
    out.write_all(sum.to_hex().as_bytes())?;
    out.write_all(b" ")?;
    if tally(value, Some(&mut *out))?.0 != *sum {
        return Err(io::Error::other("a record read differently when written"));
    }
    out.write_all(b"\n")
}

/// The hash and the length of `value`'s JSON, passed on to `out` if there is one. The JSON
/// comes in many small pieces; they are hashed and passed on gathered, [`TALLY_PIECE`] bytes
/// at a time (hashing each piece alone took most of the time of writing a turn of 10,000
/// paths).
fn tally<T: Serialize>(
    value: &T,
    out: Option<&mut dyn Write>,
) -> io::Result<(blake3::Hash, usize)> {
    let tally = Tally {
        out,
        ..Tally::default()
    };
    let mut pieces = io::BufWriter::with_capacity(TALLY_PIECE, tally);
    serde_json::to_writer(&mut pieces, value).map_err(io::Error::other)?;
    let tally = pieces
        .into_inner()
        .map_err(io::IntoInnerError::into_error)?;
    Ok((tally.hasher.finalize(), tally.len))
}

/// How many bytes of JSON [`tally`] gathers before it hashes them.
const TALLY_PIECE: usize = 1 << 14;

/// A writer that counts and hashes what passes through it, on to `out` if there is one.
#[derive(Default)]
struct Tally<'w> {
    hasher: blake3::Hasher,
    len: usize,
    out: Option<&'w mut dyn Write>,
}

impl Write for Tally<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = match &mut self.out {
            Some(out) => out.write(buf)?,
            None => buf.len(),
        };
        self.hasher.update(&buf[..n]);
        self.len += n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.out {
            Some(out) => out.flush(),
            None => Ok(()),
        }
    }
}

/// A line that could not be used: its 1-based number and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadLine {
    pub line: usize,
    pub reason: String,
}

/// One line of a file of records, as found: its 1-based number, its bytes (without the
/// newline), and the offset just past it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawLine<'a> {
    pub number: usize,
    pub text: &'a [u8],
    pub end: usize,
    /// Whether it has its final newline (a write cut short lacks it).
    pub complete: bool,
}

impl RawLine<'_> {
    /// Decodes the line; `Err` says why it cannot be used.
    pub(crate) fn decode<T: DeserializeOwned>(&self) -> Result<T, String> {
        self.decode_with(|json| serde_json::from_str(json))
    }

    /// Decodes the line with `parse`, which reads the JSON after its checksum is checked.
    pub(crate) fn decode_with<T>(
        &self,
        parse: impl FnOnce(&str) -> serde_json::Result<T>,
    ) -> Result<T, String> {
        if !self.complete {
            return Err("truncated record (no final newline)".to_owned());
        }
        decode_line_with(self.text, parse)
    }
}

/// The lines of `bytes`, in order.
pub(crate) fn raw_lines(bytes: &[u8]) -> impl Iterator<Item = RawLine<'_>> {
    let mut start = 0;
    let mut number = 0;
    std::iter::from_fn(move || {
        let rest = bytes.get(start..).filter(|rest| !rest.is_empty())?;
        number += 1;
        let (text, end, complete) = match memchr::memchr(b'\n', rest) {
            Some(at) => (&rest[..at], start + at + 1, true),
            None => (rest, bytes.len(), false),
        };
        start = end;
        Some(RawLine {
            number,
            text,
            end,
            complete,
        })
    })
}

/// Decodes every line of `bytes`, in order, keeping the good and reporting the bad.
pub(crate) fn decode_all<T: DeserializeOwned>(bytes: &[u8]) -> (Vec<(usize, T)>, Vec<BadLine>) {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for line in raw_lines(bytes) {
        match line.decode() {
            Ok(value) => good.push((line.number, value)),
            Err(reason) => bad.push(BadLine {
                line: line.number,
                reason,
            }),
        }
    }
    (good, bad)
}

/// What [`read_framed`] reads: each record with its number and what was made of the payload
/// that followed it, then the record it stopped at, if any, and whether that one was torn.
pub(crate) type Framed<T, P> = (Vec<(usize, T, Option<P>)>, Option<(BadLine, bool)>);

/// Reads records that may each be followed by a binary payload (the in-flight file) from
/// `reader`, one at a time: a record's line is read as by [`decode_all`], then its
/// `payload_len` raw bytes after its newline are handed to `payload`, with their offset from
/// the start and a reader of exactly them, so that no payload need be held. Records are
/// numbered from 1.
///
/// Reading stops at the first record that cannot be used, which is returned with `torn`
/// set when nothing follows it (a write that a crash cut short, or never flushed): after a
/// damaged record the framing of the rest is unknown, so nothing after it is trusted.
pub(crate) fn read_framed<T: DeserializeOwned, P>(
    mut reader: impl BufRead,
    payload_len: impl Fn(&T) -> Option<u64>,
    mut payload: impl FnMut(&T, u64, &mut dyn Read) -> io::Result<P>,
) -> io::Result<Framed<T, P>> {
    let mut good = Vec::new();
    let mut line = Vec::new();
    let mut offset = 0u64;
    let mut number = 0;
    loop {
        line.clear();
        let read = reader.read_until(b'\n', &mut line)?;
        if read == 0 {
            return Ok((good, None));
        }
        number += 1;
        offset += read as u64;
        let bad = |reason: &str, torn: bool| {
            Some((
                BadLine {
                    line: number,
                    reason: reason.to_owned(),
                },
                torn,
            ))
        };
        let Some(text) = line.strip_suffix(b"\n") else {
            return Ok((good, bad("truncated record (no final newline)", true)));
        };
        let value: T = match decode_line(text) {
            Ok(value) => value,
            Err(reason) => {
                let torn = reader.fill_buf()?.is_empty();
                return Ok((good, bad(&reason, torn)));
            }
        };
        let made = match payload_len(&value) {
            None => None,
            Some(len) => {
                let mut bytes = (&mut reader).take(len);
                let made = payload(&value, offset, &mut bytes);
                // What the payload did not read is skipped, to frame the next record.
                io::copy(&mut bytes, &mut io::sink())?;
                if bytes.limit() > 0 {
                    return Ok((good, bad("truncated record (payload cut short)", true)));
                }
                offset += len;
                Some(made?)
            }
        };
        good.push((number, value, made));
    }
}

fn decode_line<T: DeserializeOwned>(line: &[u8]) -> Result<T, String> {
    decode_line_with(line, |json| serde_json::from_str(json))
}

fn decode_line_with<T>(
    line: &[u8],
    parse: impl FnOnce(&str) -> serde_json::Result<T>,
) -> Result<T, String> {
    let text = std::str::from_utf8(line).map_err(|_| "record is not UTF-8".to_owned())?;
    let Some((sum, json)) = text.split_once(' ') else {
        return Err("record has no checksum".to_owned());
    };
    if blake3::hash(json.as_bytes()).to_hex().as_str() != sum {
        return Err("checksum mismatch".to_owned());
    }
    parse(json).map_err(|err| format!("unreadable record: {err}"))
}

pub(crate) use crate::ground::read_optional;

/// Inflates from memory (a reader over the file made a system call per 32 KiB), straight
/// into the bytes it returns: a decoder that reads would copy the stream through a buffer of
/// its own, allocated for each copy. Any failure is damage (`InvalidData`): the stream is
/// already in memory.
pub(crate) fn inflate(stored: &[u8]) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(stored.len().saturating_mul(3));
    let mut stream = Decompress::new(true);
    loop {
        let (read, written) = (stream.total_in(), stream.total_out());
        let rest = (usize::try_from(read).ok())
            .and_then(|read| stored.get(read..))
            .ok_or_else(|| invalid("compressed copy read past its end"))?;
        if bytes.len() == bytes.capacity() {
            bytes.reserve(bytes.capacity().max(1 << 16));
        }
        match stream.decompress_vec(rest, &mut bytes, FlushDecompress::Finish) {
            Ok(Status::StreamEnd) => return Ok(bytes),
            // Room to write and nothing read or written: the stream stops short.
            Ok(_) if (stream.total_in(), stream.total_out()) == (read, written) => {
                return Err(invalid("compressed copy ends early"));
            }
            Ok(_) => {}
            Err(err) => return Err(invalid(&err.to_string())),
        }
    }
}

fn invalid(reason: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason.to_owned())
}

/// Replaces `path` with `contents` atomically and durably: a temporary file beside it is
/// written and flushed, renamed over the target, and the directory is flushed so the rename
/// itself survives a crash.
pub(crate) fn write_atomic(path: &Path, contents: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |out| out.write_all(contents)).map(drop)
}

/// As [`write_atomic`], with the contents written by `write` through a buffer; returns the
/// length written.
pub(crate) fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<u64> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let temp = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    let mut out = io::BufWriter::with_capacity(1 << 16, temp);
    write(&mut out)?;
    let temp = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    temp.as_file().sync_all()?;
    let len = temp.as_file().metadata()?.len();
    temp.persist(path).map_err(|err| err.error)?;
    sync_dir(dir)?;
    Ok(len)
}

/// Flushes a directory's entries (a created, renamed or removed file) to disk.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    open_read(dir)?.sync_all()
}

/// Removes a file if it is there, and makes the removal durable.
pub(crate) fn remove_durably(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Ok(()) => sync_dir(path.parent().unwrap_or(Path::new("."))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    }
}

/// Opens a file for appending records, emptied. An existing file is emptied without a flush
/// (the first flushed append makes that durable too); a missing one is created, and its
/// directory flushed so that the file is there after a crash.
pub(crate) fn open_emptied(path: &Path) -> io::Result<File> {
    match no_follow().append(true).open(path) {
        Ok(file) => {
            file.set_len(0)?;
            Ok(file)
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            let file = no_follow().create(true).append(true).open(path)?;
            sync_dir(path.parent().unwrap_or(Path::new(".")))?;
            Ok(file)
        }
        Err(err) => Err(err),
    }
}

/// Empties a file if it is there; with `durably`, the emptying is flushed.
pub(crate) fn empty_file(path: &Path, durably: bool) -> io::Result<()> {
    match no_follow().write(true).open(path) {
        Ok(file) => {
            file.set_len(0)?;
            if durably {
                file.sync_data()?;
            }
            Ok(())
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inflating gives back the bytes whatever they grow to (a megabyte of zeros is about a
    /// kilobyte compressed), and a stream cut short, or not one at all, is damage.
    #[test]
    fn inflating_gives_the_bytes_back_or_says_the_copy_is_damaged() {
        let zlib = |bytes: &[u8]| {
            let mut encoder =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(bytes).unwrap();
            encoder.finish().unwrap()
        };
        let text: Vec<u8> = (0..100_000u32).flat_map(|n| n.to_le_bytes()).collect();
        for bytes in [Vec::new(), b"a".to_vec(), vec![0u8; 1 << 20], text] {
            let stored = zlib(&bytes);
            assert_eq!(inflate(&stored).unwrap(), bytes);
            // Cut anywhere short of its end, or empty, it is damage.
            for cut in [0, 1, stored.len() / 2, stored.len() - 1] {
                let err = inflate(&stored[..cut]).unwrap_err();
                assert_eq!(err.kind(), io::ErrorKind::InvalidData, "cut at {cut}");
            }
        }
        let err = inflate(b"not a zlib stream at all").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn a_record_that_reads_differently_the_second_time_is_refused() {
        struct Fickle(std::cell::Cell<u32>);
        impl Serialize for Fickle {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.0.set(self.0.get() + 1);
                s.serialize_u32(self.0.get())
            }
        }
        let err = write_line(&Fickle(std::cell::Cell::new(0)), &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("differently"), "{err}");
    }

    #[test]
    fn a_line_written_in_place_is_the_line_encoded() {
        let value = serde_json::json!({"record": "push", "paths": ["a", "b\\c", "é"]});
        let mut written = Vec::new();
        write_line(&value, &mut written).unwrap();
        let encoded = encode(&value).unwrap();
        assert_eq!(String::from_utf8(written).unwrap(), encoded);
        assert!(encoded.ends_with("}\n") && !encoded.ends_with("\n\n"));
        let (good, bad) = decode_all::<serde_json::Value>(encoded.as_bytes());
        assert!(bad.is_empty(), "{bad:?}");
        assert_eq!(good, vec![(1, value)]);
    }

    #[test]
    fn round_trips_and_reports_bad_lines() {
        let mut bytes = Vec::new();
        bytes.extend(encode(&1u32).unwrap().into_bytes());
        let mut flipped = encode(&2u32).unwrap().into_bytes();
        let last = flipped.len() - 2;
        flipped[last] = b'7';
        bytes.extend(flipped);
        bytes.extend(encode(&3u32).unwrap().into_bytes());
        let mut cut = encode(&4u32).unwrap().into_bytes();
        cut.truncate(cut.len() - 3);
        bytes.extend(cut);
        let (good, bad) = decode_all::<u32>(&bytes);
        assert_eq!(good, vec![(1, 1), (3, 3)]);
        assert_eq!(bad.iter().map(|b| b.line).collect::<Vec<_>>(), vec![2, 4]);
        assert_eq!(bad[0].reason, "checksum mismatch");
    }

    #[test]
    fn framed_records_carry_payloads_and_stop_at_damage() {
        // A record `n` is followed by `n` payload bytes; the payload is read whole here.
        let len = |n: &u64| (*n > 0).then_some(*n);
        let read = |bytes: &[u8]| {
            read_framed::<u64, (u64, Vec<u8>)>(bytes, len, |_, offset, payload| {
                let mut held = Vec::new();
                payload.read_to_end(&mut held)?;
                Ok((offset, held))
            })
            .unwrap()
        };
        let mut bytes = Vec::new();
        bytes.extend(encode(&3u64).unwrap().into_bytes());
        let at = bytes.len() as u64;
        bytes.extend(b"a\nb");
        bytes.extend(encode(&0u64).unwrap().into_bytes());
        let whole = bytes.clone();
        let (good, bad) = read(&whole);
        assert_eq!(
            good,
            vec![(1, 3, Some((at, b"a\nb".to_vec()))), (2, 0, None)]
        );
        assert!(bad.is_none());

        // A payload that is not read is skipped all the same.
        let (good, bad) = read_framed::<u64, ()>(&whole[..], len, |_, _, _| Ok(())).unwrap();
        assert_eq!(good, vec![(1, 3, Some(())), (2, 0, None)]);
        assert!(bad.is_none());

        // A payload cut short is a torn tail.
        let mut torn = whole.clone();
        torn.extend(encode(&5u64).unwrap().into_bytes());
        torn.extend(b"xy");
        let (good, bad) = read(&torn);
        assert_eq!(good.len(), 2);
        assert_eq!(bad.map(|(b, torn)| (b.line, torn)), Some((3, true)));

        // A damaged record with more after it is not torn, and nothing after it is read.
        let mut damaged = encode(&1u64).unwrap().into_bytes();
        damaged[0] ^= 1;
        damaged.extend(b"z");
        damaged.extend(encode(&0u64).unwrap().into_bytes());
        let (good, bad) = read(&damaged);
        assert!(good.is_empty());
        assert_eq!(bad.map(|(b, torn)| (b.line, torn)), Some((1, false)));

        // A damaged last record is torn.
        let mut last = whole;
        let mut cut = encode(&0u64).unwrap().into_bytes();
        cut[0] ^= 1;
        last.extend(cut);
        let (good, bad) = read(&last);
        assert_eq!(good.len(), 2);
        assert_eq!(bad.map(|(b, torn)| (b.line, torn)), Some((3, true)));
    }
}
