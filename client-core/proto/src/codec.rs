//! Bounds-checked decoding and little-endian encoding helpers.
//!
//! Every decoder in this crate reads through [`Reader`], which never panics and never allocates
//! based on a length taken from the wire before checking it against the bytes actually present.
//! Offsets in SMB2 messages are relative to the start of the SMB2 header, so a `Reader` is always
//! created over one whole message (header included) and positioned past the header when a body
//! is decoded.

use bytes::{BufMut, Bytes, BytesMut};

/// Why a message could not be decoded. The server broke the rules (or the bytes were corrupted):
/// the connection that produced them cannot be trusted any more.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The buffer ended before a field that must be present.
    #[error(
        "{what}: message too short (needed {needed} bytes at offset {offset}, have {available})"
    )]
    Truncated {
        /// The field or structure being read.
        what: &'static str,
        /// Offset (from the start of the message) where the read began.
        offset: usize,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// An offset/length pair points outside the message or into the fixed part.
    #[error("{what}: offset {offset} + length {length} is outside the {message_len}-byte message")]
    BadOffset {
        /// The buffer being located.
        what: &'static str,
        /// Offset as sent by the server.
        offset: usize,
        /// Length as sent by the server.
        length: usize,
        /// Length of the whole message.
        message_len: usize,
    },
    /// A fixed field had a value the specification forbids (wrong StructureSize, bad magic...).
    #[error("{what}: invalid value {value:#x}")]
    InvalidValue {
        /// The field.
        what: &'static str,
        /// The value found.
        value: u64,
    },
    /// A count or length is internally inconsistent (e.g. a list longer than its container).
    #[error("{what}: inconsistent length or count ({detail})")]
    Inconsistent {
        /// The structure.
        what: &'static str,
        /// What did not add up, in words.
        detail: &'static str,
    },
    /// A UTF-16 string was not valid UTF-16 or had an odd byte length.
    #[error("{what}: invalid UTF-16 string")]
    BadString {
        /// The field.
        what: &'static str,
    },
}

/// A cursor over one SMB2 message (or a sub-structure) that checks every read.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader positioned at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// A reader over `buf`, positioned at `pos` (e.g. 64 to skip the SMB2 header).
    pub fn at(buf: &'a [u8], pos: usize) -> Result<Self, DecodeError> {
        if pos > buf.len() {
            return Err(DecodeError::Truncated {
                what: "message",
                offset: 0,
                needed: pos,
                available: buf.len(),
            });
        }
        Ok(Self { buf, pos })
    }

    /// Current offset from the start of the underlying buffer.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left after the current position.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The whole underlying buffer (for offset-based sub-buffers).
    pub fn buffer(&self) -> &'a [u8] {
        self.buf
    }

    /// Take the next `n` bytes.
    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated {
                what,
                offset: self.pos,
                needed: n,
                available: self.remaining(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// Skip `n` bytes (reserved fields, padding).
    pub fn skip(&mut self, n: usize, what: &'static str) -> Result<(), DecodeError> {
        self.bytes(n, what).map(|_| ())
    }

    /// Read a fixed-size array.
    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N, what)?);
        Ok(out)
    }

    /// Read one byte.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.bytes(1, what)?[0])
    }

    /// Read a little-endian u16.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    /// Read a little-endian u32.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// Read a little-endian u64.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Read a 16-byte GUID / FileId half pair as raw bytes.
    pub fn guid(&mut self, what: &'static str) -> Result<[u8; 16], DecodeError> {
        self.array(what)
    }

    /// Check the StructureSize field every SMB2 body starts with.
    pub fn structure_size(&mut self, expected: u16, what: &'static str) -> Result<(), DecodeError> {
        let got = self.u16(what)?;
        if got != expected {
            return Err(DecodeError::InvalidValue {
                what,
                value: got.into(),
            });
        }
        Ok(())
    }

    /// Locate a variable buffer given by an (offset, length) pair measured from the start of the
    /// message. A zero length is always accepted (servers often send offset 0 then).
    pub fn slice_at(
        &self,
        offset: usize,
        length: usize,
        what: &'static str,
    ) -> Result<&'a [u8], DecodeError> {
        if length == 0 {
            return Ok(&[]);
        }
        match offset.checked_add(length) {
            Some(end) if end <= self.buf.len() => Ok(&self.buf[offset..end]),
            _ => Err(DecodeError::BadOffset {
                what,
                offset,
                length,
                message_len: self.buf.len(),
            }),
        }
    }

    /// Fail unless every byte has been consumed.
    pub fn finish(&self, what: &'static str) -> Result<(), DecodeError> {
        if self.remaining() != 0 {
            return Err(DecodeError::Inconsistent {
                what,
                detail: "trailing bytes after the structure",
            });
        }
        Ok(())
    }
}

/// How a chain of entries linked by a leading u32 NextEntryOffset is laid out (directory
/// listings, change notifications).
pub struct EntryChain {
    /// Bytes every entry takes at least: a NextEntryOffset below it is refused.
    pub min_entry: usize,
    /// Every NextEntryOffset is a multiple of this (1: any).
    pub align: usize,
    /// The NextEntryOffset field, for errors.
    pub what_next: &'static str,
    /// The entry, for errors.
    pub what: &'static str,
}

impl EntryChain {
    /// Decode every entry of `buf` with `decode(entry, start)`, `entry` spanning exactly one
    /// entry (up to the next one, or the buffer's end for the last) and `start` its offset in
    /// `buf`. NextEntryOffset 0 ends the chain; any other must be aligned, cover at least
    /// `min_entry` and stay inside the buffer. An empty buffer is no entries. The walk is
    /// bounded by what the buffer can hold even if a check were wrong.
    pub fn decode<'a, T>(
        &self,
        buf: &'a [u8],
        mut decode: impl FnMut(&'a [u8], usize) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let mut entries = Vec::new();
        if buf.is_empty() {
            return Ok(entries);
        }
        let max_entries = buf.len() / self.min_entry.max(1) + 1;
        let mut start = 0usize;
        loop {
            if entries.len() >= max_entries {
                return Err(DecodeError::Inconsistent {
                    what: self.what,
                    detail: "more entries than the buffer can hold",
                });
            }
            let rest = buf.get(start..).unwrap_or_default();
            let next = Reader::new(rest).u32(self.what_next)? as usize;
            if next != 0
                && (next % self.align.max(1) != 0 || next < self.min_entry || next > rest.len())
            {
                return Err(DecodeError::BadOffset {
                    what: self.what_next,
                    offset: start,
                    length: next,
                    message_len: buf.len(),
                });
            }
            let entry = if next == 0 { rest } else { &rest[..next] };
            entries.push(decode(entry, start)?);
            if next == 0 {
                return Ok(entries);
            }
            start += next;
        }
    }
}

/// Zero-copy variant of [`Reader::slice_at`] for payloads that stay `Bytes` (READ data).
pub fn bytes_at(
    msg: &Bytes,
    offset: usize,
    length: usize,
    what: &'static str,
) -> Result<Bytes, DecodeError> {
    if length == 0 {
        return Ok(Bytes::new());
    }
    match offset.checked_add(length) {
        Some(end) if end <= msg.len() => Ok(msg.slice(offset..end)),
        _ => Err(DecodeError::BadOffset {
            what,
            offset,
            length,
            message_len: msg.len(),
        }),
    }
}

/// The variable buffer of a response whose fixed part ends at `fixed_end`: zero-copy, and it
/// must lie after the fixed part and inside the message (an empty one may point anywhere).
pub fn buffer_after(
    msg: &Bytes,
    fixed_end: usize,
    offset: usize,
    length: usize,
    what: &'static str,
) -> Result<Bytes, DecodeError> {
    if length != 0 && offset < fixed_end {
        return Err(DecodeError::BadOffset {
            what,
            offset,
            length,
            message_len: msg.len(),
        });
    }
    bytes_at(msg, offset, length, what)
}

/// Decode a UTF-16LE string (file names, share paths).
pub fn utf16le_to_string(raw: &[u8], what: &'static str) -> Result<String, DecodeError> {
    if raw.len() % 2 != 0 {
        return Err(DecodeError::BadString { what });
    }
    let units = raw
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]));
    char::decode_utf16(units)
        .collect::<Result<String, _>>()
        .map_err(|_| DecodeError::BadString { what })
}

/// Append `s` as UTF-16LE (no terminator).
pub fn put_utf16le(out: &mut BytesMut, s: &str) {
    for unit in s.encode_utf16() {
        out.put_u16_le(unit);
    }
}

/// Byte length of `s` once encoded as UTF-16LE.
pub fn utf16le_len(s: &str) -> usize {
    s.encode_utf16().count() * 2
}

/// Pad `out` with zeros until `out.len() - base` is a multiple of `align`.
pub fn pad_to(out: &mut BytesMut, base: usize, align: usize) {
    while (out.len() - base) % align != 0 {
        out.put_u8(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounds_checked() {
        let mut r = Reader::new(&[1, 0, 2]);
        assert_eq!(r.u16("a").unwrap(), 1);
        assert!(matches!(r.u16("b"), Err(DecodeError::Truncated { .. })));
        assert_eq!(r.u8("c").unwrap(), 2);
        r.finish("x").unwrap();
    }

    #[test]
    fn slice_at_rejects_overflow() {
        let r = Reader::new(&[0; 10]);
        assert!(r.slice_at(usize::MAX, 2, "x").is_err());
        assert!(r.slice_at(8, 3, "x").is_err());
        assert_eq!(r.slice_at(8, 2, "x").unwrap().len(), 2);
        assert_eq!(r.slice_at(9999, 0, "x").unwrap().len(), 0);
    }

    #[test]
    fn utf16_round_trip() {
        let mut b = BytesMut::new();
        put_utf16le(&mut b, "dé🎉");
        assert_eq!(b.len(), utf16le_len("dé🎉"));
        assert_eq!(utf16le_to_string(&b, "s").unwrap(), "dé🎉");
        assert!(utf16le_to_string(&[0, 0xd8], "s").is_err());
        assert!(utf16le_to_string(&[0], "s").is_err());
    }
}
