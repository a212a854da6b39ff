//! Reading request fields and writing reply bodies.
//!
//! Everything a request carries is checked against the message it came in: a field that
//! points outside it is a malformed request (STATUS_INVALID_PARAMETER), never a panic. The
//! server is for tests, but a client bug that sends garbage must show up as an error the test
//! can see, not as a crashed server.

use bytes::{BufMut, BytesMut};
use smb3_proto::header::HEADER_LEN;
use smb3_proto::NtStatus;

/// What a handler returns: a reply body, or a status for an error reply.
pub(crate) type Handled = Result<Reply, NtStatus>;

/// A successful reply's body (after the 64-byte header), and the status to send it with
/// (SUCCESS, or a warning such as BUFFER_OVERFLOW that still carries data).
pub(crate) struct Reply {
    pub(crate) status: NtStatus,
    pub(crate) body: BytesMut,
    /// The request was answered apart from its frame (it went async, and its interim response
    /// is queued on the connection already): the frame's replies have nothing for it.
    pub(crate) sent_apart: bool,
}

impl Reply {
    pub(crate) fn ok(body: BytesMut) -> Reply {
        Reply::with_status(NtStatus::SUCCESS, body)
    }

    /// A reply with a status that still carries a body (a warning such as BUFFER_OVERFLOW).
    pub(crate) fn with_status(status: NtStatus, body: BytesMut) -> Reply {
        Reply {
            status,
            body,
            sent_apart: false,
        }
    }

    /// Nothing for the frame: the request was answered on its own (see `sent_apart`).
    pub(crate) fn sent_apart() -> Reply {
        Reply {
            status: NtStatus::PENDING,
            body: BytesMut::new(),
            sent_apart: true,
        }
    }

    /// A body of `structure_size` bytes that are all zero but the size itself, for the
    /// replies that carry nothing (FLUSH, ECHO, LOGOFF, TREE_DISCONNECT, SET_INFO).
    pub(crate) fn empty(structure_size: u16) -> Reply {
        let mut body = BytesMut::with_capacity(4);
        body.put_u16_le(structure_size);
        body.put_u16_le(0);
        Reply::ok(body)
    }
}

/// A cursor over one request message (header included; offsets are from its start).
pub(crate) struct Fields<'a> {
    msg: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    /// Fields of the body, which starts right after the header.
    pub(crate) fn body(msg: &'a [u8]) -> Fields<'a> {
        Fields {
            msg,
            at: HEADER_LEN,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], NtStatus> {
        let end = self.at.checked_add(n).ok_or(NtStatus::INVALID_PARAMETER)?;
        let out = self
            .msg
            .get(self.at..end)
            .ok_or(NtStatus::INVALID_PARAMETER)?;
        self.at = end;
        Ok(out)
    }

    pub(crate) fn skip(&mut self, n: usize) -> Result<(), NtStatus> {
        self.take(n).map(|_| ())
    }

    pub(crate) fn u8(&mut self) -> Result<u8, NtStatus> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, NtStatus> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().unwrap_or_default(),
        ))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, NtStatus> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or_default(),
        ))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, NtStatus> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], NtStatus> {
        self.take(N)?
            .try_into()
            .map_err(|_| NtStatus::INVALID_PARAMETER)
    }

    /// The StructureSize every request starts with must be the command's.
    pub(crate) fn structure_size(&mut self, expected: u16) -> Result<(), NtStatus> {
        match self.u16()? {
            n if n == expected => Ok(()),
            _ => Err(NtStatus::INVALID_PARAMETER),
        }
    }
}

/// `len` bytes at `offset` (from the header's start) of `msg`, or INVALID_PARAMETER.
pub(crate) fn slice_at(msg: &[u8], offset: usize, len: usize) -> Result<&[u8], NtStatus> {
    if len == 0 {
        return Ok(&[]);
    }
    let end = offset.checked_add(len).ok_or(NtStatus::INVALID_PARAMETER)?;
    msg.get(offset..end).ok_or(NtStatus::INVALID_PARAMETER)
}

/// UTF-16LE bytes to a string; odd lengths and unpaired surrogates are malformed names.
pub(crate) fn utf16(bytes: &[u8]) -> Result<String, NtStatus> {
    if bytes.len() % 2 != 0 {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16(&units).map_err(|_| NtStatus::OBJECT_NAME_INVALID)
}

/// Append `s` as UTF-16LE.
pub(crate) fn put_utf16(out: &mut BytesMut, s: &str) {
    for unit in s.encode_utf16() {
        out.put_u16_le(unit);
    }
}

/// Length of `s` in UTF-16LE bytes.
pub(crate) fn utf16_len(s: &str) -> usize {
    s.encode_utf16().count() * 2
}

/// Zero bytes up to the next multiple of `align` of `out.len()`.
pub(crate) fn pad(out: &mut BytesMut, align: usize) {
    while out.len() % align != 0 {
        out.put_u8(0);
    }
}

/// Offset of a reply body's buffer that starts `at` bytes into the body.
pub(crate) fn body_offset(at: usize) -> u16 {
    (HEADER_LEN + at) as u16
}
