//! The payloads of the sparse-file FSCTLs: FSCTL_SET_SPARSE (MS-FSCC 2.3.64, input
//! FILE_SET_SPARSE_BUFFER 2.3.65), FSCTL_QUERY_ALLOCATED_RANGES (2.3.47, input and output
//! FILE_ALLOCATED_RANGE_BUFFER 2.3.48) and FSCTL_SET_ZERO_DATA (2.3.85, input
//! FILE_ZERO_DATA_INFORMATION).

use bytes::{BufMut, Bytes, BytesMut};

use crate::codec::{DecodeError, Reader};

/// FILE_SET_SPARSE_BUFFER: one byte, SetSparse (TRUE to mark the file sparse, FALSE to clear
/// the mark; clearing fills the holes with allocated zeros on NTFS).
pub fn encode_set_sparse(sparse: bool) -> Bytes {
    Bytes::from(vec![u8::from(sparse)])
}

/// FILE_ZERO_DATA_INFORMATION (MS-FSCC 2.3.85), the FSCTL_SET_ZERO_DATA input: zero the bytes
/// from `offset` up to (not including) `beyond_final_zero`. Both are signed 64-bit on the
/// wire and must be >= 0, with the start not after the end; `None` when they are not.
pub fn encode_zero_data(offset: u64, beyond_final_zero: u64) -> Option<Bytes> {
    if offset > beyond_final_zero || beyond_final_zero > i64::MAX as u64 {
        return None;
    }
    let mut out = BytesMut::with_capacity(16);
    out.put_u64_le(offset);
    out.put_u64_le(beyond_final_zero);
    Some(out.freeze())
}

/// One FILE_ALLOCATED_RANGE_BUFFER: `length` bytes at `offset`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AllocatedRangeBuffer {
    /// FileOffset.
    pub offset: u64,
    /// Length.
    pub length: u64,
}

/// Bytes of one FILE_ALLOCATED_RANGE_BUFFER.
pub const RANGE_LEN: usize = 16;

impl AllocatedRangeBuffer {
    /// The FSCTL_QUERY_ALLOCATED_RANGES input: the range to look at.
    pub fn encode(&self) -> Bytes {
        let mut out = BytesMut::with_capacity(RANGE_LEN);
        out.put_u64_le(self.offset);
        out.put_u64_le(self.length);
        out.freeze()
    }

    /// The FSCTL_QUERY_ALLOCATED_RANGES output: an array of ranges, filling the buffer. A
    /// length that is not a whole number of entries, or a range whose end overflows, is an
    /// error (the offsets are signed 64-bit on the wire: MS-FSCC 2.3.48 has them >= 0).
    pub fn decode_list(buf: &[u8]) -> Result<Vec<AllocatedRangeBuffer>, DecodeError> {
        if buf.len() % RANGE_LEN != 0 {
            return Err(DecodeError::Inconsistent {
                what: "FILE_ALLOCATED_RANGE_BUFFER list",
                detail: "not a whole number of 16-byte entries",
            });
        }
        let mut r = Reader::new(buf);
        let mut out = Vec::with_capacity(buf.len() / RANGE_LEN);
        while r.remaining() > 0 {
            let offset = r.u64("FILE_ALLOCATED_RANGE_BUFFER FileOffset")?;
            let length = r.u64("FILE_ALLOCATED_RANGE_BUFFER Length")?;
            if offset > i64::MAX as u64
                || offset
                    .checked_add(length)
                    .is_none_or(|e| e > i64::MAX as u64)
            {
                return Err(DecodeError::InvalidValue {
                    what: "FILE_ALLOCATED_RANGE_BUFFER",
                    value: offset,
                });
            }
            out.push(AllocatedRangeBuffer { offset, length });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::test_util::hex;

    #[test]
    fn zero_data_golden_bytes_and_bounds() {
        assert_eq!(
            encode_zero_data(0x1000, 0x3_0000).unwrap(),
            hex("00100000000000000000030000000000")
        );
        assert!(encode_zero_data(5, 4).is_none());
        assert!(encode_zero_data(0, u64::MAX).is_none());
        assert!(encode_zero_data(7, 7).is_some());
    }

    #[test]
    fn golden_bytes() {
        assert_eq!(&encode_set_sparse(true)[..], [1]);
        assert_eq!(&encode_set_sparse(false)[..], [0]);
        let q = AllocatedRangeBuffer {
            offset: 0x10,
            length: 0x0800_0000,
        };
        assert_eq!(
            hex::encode(q.encode()),
            "1000000000000000 0000000800000000".replace(' ', "")
        );
        let list = hex("0000000000000000 0000100000000000 0000000400000000 0000100000000000");
        assert_eq!(
            AllocatedRangeBuffer::decode_list(&list).unwrap(),
            vec![
                AllocatedRangeBuffer {
                    offset: 0,
                    length: 0x10_0000
                },
                AllocatedRangeBuffer {
                    offset: 0x400_0000,
                    length: 0x10_0000
                },
            ]
        );
        assert_eq!(AllocatedRangeBuffer::decode_list(&[]).unwrap(), vec![]);
    }

    #[test]
    fn malformed_lists_fail() {
        assert!(AllocatedRangeBuffer::decode_list(&[0; 15]).is_err());
        assert!(AllocatedRangeBuffer::decode_list(&[0; 17]).is_err());
        let overflow = hex("ffffffffffffff7f 0100000000000000");
        assert!(AllocatedRangeBuffer::decode_list(&overflow).is_err());
        let negative = hex("0000000000000080 0000000000000000");
        assert!(AllocatedRangeBuffer::decode_list(&negative).is_err());
    }
}
