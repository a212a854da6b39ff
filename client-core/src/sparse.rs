//! Sparse files: marking a file sparse (FSCTL_SET_SPARSE, MS-FSCC 2.3.64) and asking which of
//! its ranges hold data (FSCTL_QUERY_ALLOCATED_RANGES, 2.3.47), so a backup reads only those
//! and restores the holes as holes (mark the copy sparse, write the ranges, set its length).

use smb3_proto::msg::ioctl::{IoctlRequest, FSCTL_QUERY_ALLOCATED_RANGES, FSCTL_SET_SPARSE};
use smb3_proto::msg::sparse::{encode_set_sparse, AllocatedRangeBuffer, RANGE_LEN};
use smb3_proto::{Command, NtStatus};

use crate::error::{decode, decode_ioctl, Error, ProtocolError, Result};
use crate::file::File;

/// A range of a file that holds data (is allocated); what lies between ranges are holes that
/// read as zeros.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocatedRange {
    /// Where the range starts.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
}

/// First output buffer: 256 ranges.
const FIRST_OUTPUT: u32 = 256 * RANGE_LEN as u32;
/// Most requests one query may take. Each asks for at least twice the ranges of the one
/// before (up to the server's transaction size), so this is only reached by a server that
/// keeps answering "more" without progress.
const MAX_ROUNDS: usize = 32;

/// The statuses that mean "more ranges than fit": BUFFER_OVERFLOW (an IOCTL body with as many
/// whole ranges as fit, MS-FSCC 2.3.48) and BUFFER_TOO_SMALL (not even one fit).
const MORE: &[NtStatus] = &[NtStatus::BUFFER_OVERFLOW, NtStatus::BUFFER_TOO_SMALL];

impl File {
    /// Mark the file sparse (`true`), so ranges never written and ranges zeroed take no
    /// space, or clear the mark (`false`: a server may then allocate the holes). The handle
    /// needs write access. Samba records the mark in the file's DOS attributes
    /// (FILE_ATTRIBUTE_SPARSE_FILE); the holes themselves are the underlying file system's.
    pub async fn set_sparse(&self, sparse: bool) -> Result<()> {
        let req = IoctlRequest::fsctl(
            FSCTL_SET_SPARSE,
            self.file_id(),
            encode_set_sparse(sparse),
            0,
        );
        let resp = self
            .core()
            .send(&req, self.on_open())
            .await
            .map_err(|e| self.err(e))?;
        decode_ioctl(&req, &resp.msg).map(drop)
    }

    /// The ranges within `len` bytes at `offset` that hold data, in order. A file that is not
    /// sparse is reported as one range (servers do not look for holes in it: MS-FSCC 2.3.48).
    /// The handle needs read access. Long lists take several requests: when the answer does
    /// not fit, the query goes on from the last range received with a larger buffer.
    pub async fn allocated_ranges(&self, offset: u64, len: u64) -> Result<Vec<AllocatedRange>> {
        let end = offset
            .checked_add(len)
            .ok_or(Error::ApiMisuse("allocated_ranges: offset + len overflows"))?;
        let max = self.core().negotiated.max_transact.max(FIRST_OUTPUT);
        let mut out: Vec<AllocatedRange> = Vec::new();
        let mut from = offset;
        let mut output = FIRST_OUTPUT;
        for _ in 0..MAX_ROUNDS {
            if from >= end {
                return Ok(out);
            }
            let (ranges, more) = self.query_ranges(from, end - from, output).await?;
            match merge(&mut out, ranges, from) {
                Some(next) if more => from = next,
                Some(_) => return Ok(out),
                None => {
                    return Err(ProtocolError::Unexpected(
                        "the server's allocated ranges are out of order or outside the query",
                    )
                    .into())
                }
            }
            // The answer was cut (or nothing fit): ask for twice as many at once next time,
            // so even a follow-up that starts where the last one did makes progress.
            output = output.saturating_mul(2).min(max);
        }
        Err(self.err(Error::Status {
            status: NtStatus::BUFFER_OVERFLOW,
            command: Command::IOCTL,
            path: None,
        }))
    }

    /// One FSCTL_QUERY_ALLOCATED_RANGES: the ranges, and whether the server had more.
    async fn query_ranges(
        &self,
        offset: u64,
        length: u64,
        output: u32,
    ) -> Result<(Vec<AllocatedRangeBuffer>, bool)> {
        let input = AllocatedRangeBuffer { offset, length }.encode();
        let req = IoctlRequest::fsctl(FSCTL_QUERY_ALLOCATED_RANGES, self.file_id(), input, output);
        let resp = self
            .core()
            .send(&req, self.on_open().allowing(MORE))
            .await
            .map_err(|e| self.err(e))?;
        if resp.header.status == NtStatus::BUFFER_TOO_SMALL {
            return Ok((Vec::new(), true));
        }
        let more = resp.header.status == NtStatus::BUFFER_OVERFLOW;
        let body = decode_ioctl(&req, &resp.msg)?;
        let ranges = decode(
            Command::IOCTL,
            AllocatedRangeBuffer::decode_list(&body.output),
        )?;
        Ok((ranges, more))
    }
}

/// Append `ranges` (the answer to a query starting at `from`) to `out`, replacing the last
/// range of `out` when the answer reports it again (a follow-up query starts there). Returns
/// where a follow-up query would start: the start of the last range, which the server may
/// have reported short when it ran out of room. `None` when the answer goes backwards,
/// overlaps itself or starts before `from`.
fn merge(
    out: &mut Vec<AllocatedRange>,
    ranges: Vec<AllocatedRangeBuffer>,
    from: u64,
) -> Option<u64> {
    let mut at = from;
    for r in ranges {
        if r.offset < at {
            return None;
        }
        at = r.offset.checked_add(r.length)?;
        match out.last_mut() {
            Some(last) if last.offset == r.offset => last.len = r.length,
            _ => out.push(AllocatedRange {
                offset: r.offset,
                len: r.length,
            }),
        }
    }
    Some(out.last().map_or(from, |r| r.offset.max(from)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(offset: u64, length: u64) -> AllocatedRangeBuffer {
        AllocatedRangeBuffer { offset, length }
    }

    #[test]
    fn follow_up_answers_replace_the_cut_last_range() {
        let mut out = Vec::new();
        // First answer: two ranges, the second cut short by the buffer.
        let next = merge(&mut out, vec![r(0, 10), r(100, 5)], 0).unwrap();
        assert_eq!(next, 100);
        // The follow-up from 100 reports it whole, then one more.
        let next = merge(&mut out, vec![r(100, 50), r(500, 1)], next).unwrap();
        assert_eq!(next, 500);
        assert_eq!(
            out,
            vec![
                AllocatedRange { offset: 0, len: 10 },
                AllocatedRange {
                    offset: 100,
                    len: 50
                },
                AllocatedRange {
                    offset: 500,
                    len: 1
                },
            ]
        );
    }

    #[test]
    fn answers_that_go_backwards_are_refused() {
        let mut out = Vec::new();
        assert_eq!(merge(&mut out, vec![r(10, 5), r(12, 1)], 0), None);
        let mut out = Vec::new();
        assert_eq!(merge(&mut out, vec![r(5, 1)], 10), None);
        let mut out = Vec::new();
        assert_eq!(merge(&mut out, vec![r(u64::MAX, 2)], 0), None);
    }
}
