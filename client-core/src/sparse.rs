//! Sparse files and space: marking a file sparse (FSCTL_SET_SPARSE, MS-FSCC 2.3.64), asking
//! which of its ranges hold data (FSCTL_QUERY_ALLOCATED_RANGES, 2.3.47), so a backup reads only
//! those and restores the holes as holes (mark the copy sparse, write the ranges, set its
//! length), zeroing a range (FSCTL_SET_ZERO_DATA, 2.3.85: a hole where the file is sparse)
//! and reserving space (FileAllocationInformation, 2.4.4): what `fallocate(2)` asks of a mount.

use smb3_proto::msg::fscc::FileAllocationInformation;
use smb3_proto::msg::ioctl::{
    IoctlRequest, FSCTL_QUERY_ALLOCATED_RANGES, FSCTL_SET_SPARSE, FSCTL_SET_ZERO_DATA,
};
use smb3_proto::msg::sparse::{
    encode_set_sparse, encode_zero_data, AllocatedRangeBuffer, RANGE_LEN,
};
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
/// Requests in a row that may end without covering more of the file: the buffer doubles up
/// to MaxTransactSize (at most 12 times from 4 KiB to 8 MiB), then the window halves (at most
/// 64 times). More means a server that keeps answering "more" and never gives.
const MAX_STALLED: u32 = 80;
/// Most requests one query may take in all.
const MAX_REQUESTS: u32 = 4096;

/// The statuses that mean "more ranges than fit": BUFFER_OVERFLOW (an IOCTL body with as many
/// whole ranges as fit, MS-FSCC 2.3.48) and BUFFER_TOO_SMALL (not even one fit).
const MORE: &[NtStatus] = &[NtStatus::BUFFER_OVERFLOW, NtStatus::BUFFER_TOO_SMALL];

impl File {
    /// Mark the file sparse (`true`), so ranges never written and ranges zeroed take no
    /// space, or clear the mark (`false`: a server may then allocate the holes). The handle
    /// needs write access. Samba records the mark in the file's DOS attributes
    /// (FILE_ATTRIBUTE_SPARSE_FILE); the holes themselves are the underlying file system's.
    pub async fn set_sparse(&self, sparse: bool) -> Result<()> {
        self.fsctl_without_output(FSCTL_SET_SPARSE, encode_set_sparse(sparse))
            .await
    }

    /// Make the `len` bytes at `offset` read as zeros (FSCTL_SET_ZERO_DATA), without changing
    /// the file's length: a range past the end stays past it. On a sparse file the server
    /// frees the space of the whole clusters inside the range (a hole, as
    /// `FALLOC_FL_PUNCH_HOLE`); on one that is not, it writes zeros and keeps the space
    /// (Samba punches and then allocates again). The handle needs write access.
    pub async fn zero_range(&self, offset: u64, len: u64) -> Result<()> {
        let input = offset
            .checked_add(len)
            .and_then(|end| encode_zero_data(offset, end))
            .ok_or(Error::ApiMisuse(
                "zero_range: the range ends past the largest file offset",
            ))?;
        if len == 0 {
            return Ok(());
        }
        self.fsctl_without_output(FSCTL_SET_ZERO_DATA, input).await
    }

    /// Send an FSCTL that answers nothing but its status.
    async fn fsctl_without_output(&self, code: u32, input: bytes::Bytes) -> Result<()> {
        let req = IoctlRequest::fsctl(code, self.file_id(), input, 0);
        let resp = self
            .core()
            .send(&req, self.on_open())
            .await
            .map_err(|e| self.err(e))?;
        decode_ioctl(&req, &resp.msg).map(drop)
    }

    /// Reserve space for the file up to `end` bytes (FileAllocationInformation), and with
    /// `extend` make it that long too: `fallocate(2)`, where `extend` is the absence of
    /// `FALLOC_FL_KEEP_SIZE`.
    /// Nothing is sent when the file already reaches `end`: an allocation size below the
    /// end of file truncates the file (MS-FSCC 2.4.4; Samba does the same), so a reservation
    /// is only ever asked beyond it. A server short of space answers DISK_FULL (ENOSPC).
    /// Whether the space is really set aside is the server's: Samba asks its file system for
    /// it only with `strict allocate = yes`, and otherwise checks that enough is free. The
    /// length is read and then changed in two requests: a writer elsewhere that extends the
    /// file between them can see it grow less far than it made it (set the length with
    /// [`File::set_len`] under a lock when that matters). The handle needs write access.
    pub async fn allocate(&self, end: u64, extend: bool) -> Result<()> {
        if end > i64::MAX as u64 {
            return Err(Error::ApiMisuse(
                "allocate: the end is past the largest file offset",
            ));
        }
        let now = self.metadata().await?;
        if end <= now.len {
            return Ok(());
        }
        if end > now.allocation_size {
            self.set_file_info(&FileAllocationInformation {
                allocation_size: end,
            })
            .await?;
        }
        if extend {
            self.set_len(end).await?;
        }
        Ok(())
    }

    /// The ranges within `len` bytes at `offset` that hold data, in order (ranges that touch
    /// are joined). A file that is not sparse is reported as one range (servers do not look
    /// for holes in it: MS-FSCC 2.3.48). The handle needs read access. Long lists take
    /// several requests: from the last range received with a bigger buffer while the answer
    /// does not fit, over smaller windows when even the largest buffer gets nothing.
    pub async fn allocated_ranges(&self, offset: u64, len: u64) -> Result<Vec<AllocatedRange>> {
        let max = self.core().negotiated.max_transact.max(FIRST_OUTPUT);
        let mut walk = RangeWalk::new(offset, len, max)
            .ok_or(Error::ApiMisuse("allocated_ranges: offset + len overflows"))?;
        while let Some((from, length, output)) = walk.next_request() {
            let (ranges, more) = self.query_ranges(from, length, output).await?;
            if more {
                tracing::debug!(
                    path = self.path(),
                    from,
                    length,
                    output,
                    ranges = ranges.len(),
                    "allocated ranges did not fit; asking again"
                );
            }
            walk.absorb(ranges, more)
                .map_err(|what| self.err(walk_error(what)))?;
        }
        Ok(walk.ranges)
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

/// Why a walk over the allocated ranges stopped short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WalkError {
    /// The answer went backwards, overlapped itself or left the window asked about.
    Disorder,
    /// The server kept saying "more" without giving any.
    NoProgress,
}

fn walk_error(what: WalkError) -> Error {
    match what {
        WalkError::Disorder => ProtocolError::DisorderedRanges.into(),
        WalkError::NoProgress => Error::Status {
            status: NtStatus::BUFFER_OVERFLOW,
            command: Command::IOCTL,
            path: None,
        },
    }
}

/// The requests of one [`File::allocated_ranges`] query, as a pure state machine.
///
/// Each request asks about a window `[from, from + window)` with an output buffer. An answer
/// that fits covers the window: the walk moves past it. An answer that did not fit
/// (BUFFER_OVERFLOW with as many ranges as fit, as MS-FSCC 2.3.48 has it, or nothing at all)
/// is followed by a request from the last range received (the server may have cut that one
/// short), with twice the buffer up to the server's MaxTransactSize. Samba answers all or
/// nothing (no ranges when they do not fit), so when even the largest buffer gets nothing the
/// window is halved: a region with more ranges than one reply can hold is listed piece by
/// piece.
#[derive(Debug)]
struct RangeWalk {
    /// The ranges so far.
    ranges: Vec<AllocatedRange>,
    from: u64,
    end: u64,
    window: u64,
    output: u32,
    max_output: u32,
    stalled: u32,
    requests: u32,
    /// The window of the request in flight.
    asked: u64,
}

impl RangeWalk {
    fn new(offset: u64, len: u64, max_output: u32) -> Option<RangeWalk> {
        Some(RangeWalk {
            ranges: Vec::new(),
            from: offset,
            end: offset.checked_add(len)?,
            window: len,
            output: FIRST_OUTPUT.min(max_output),
            max_output,
            stalled: 0,
            requests: 0,
            asked: 0,
        })
    }

    /// The next request (offset, length, output buffer), or `None` when the walk is done.
    fn next_request(&mut self) -> Option<(u64, u64, u32)> {
        if self.from >= self.end {
            return None;
        }
        self.asked = self.window.min(self.end - self.from);
        Some((self.from, self.asked, self.output))
    }

    /// Take the answer to the last request: its ranges, and whether the server had more.
    fn absorb(
        &mut self,
        answer: Vec<AllocatedRangeBuffer>,
        more: bool,
    ) -> std::result::Result<(), WalkError> {
        self.requests += 1;
        let window_end = self.from + self.asked;
        let mut at = self.from;
        for r in answer {
            let r_end = r.offset.checked_add(r.length).ok_or(WalkError::Disorder)?;
            if r.offset < at || r_end > window_end {
                return Err(WalkError::Disorder);
            }
            at = r_end;
            if r.length == 0 {
                continue;
            }
            match self.ranges.last_mut() {
                // A follow-up starts at the last range: the server reports it again, perhaps
                // longer; or the range goes on from where the last one (or last window) ended.
                Some(last) if r.offset <= last.offset + last.len => {
                    last.len = r_end.max(last.offset + last.len) - last.offset
                }
                _ => self.ranges.push(AllocatedRange {
                    offset: r.offset,
                    len: r.length,
                }),
            }
        }
        let before = self.from;
        if !more {
            self.from = window_end;
            // A window that was halved may have been dense only in places: widen it again.
            self.window = self.window.saturating_mul(2);
        } else {
            // Go on from the start of the last range received within this window, with a
            // bigger buffer; when nothing came back at the largest, ask about less.
            let last = self.ranges.last().map_or(0, |l| l.offset);
            let at_max = self.output >= self.max_output;
            self.output = self.output.saturating_mul(2).min(self.max_output);
            if last > self.from {
                self.from = last;
            } else if at_max {
                self.window = (self.asked / 2).max(1);
            }
        }
        if self.from > before {
            self.stalled = 0;
        } else {
            self.stalled += 1;
        }
        if self.stalled > MAX_STALLED || (self.requests >= MAX_REQUESTS && self.from < self.end) {
            return Err(WalkError::NoProgress);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(offset: u64, length: u64) -> AllocatedRangeBuffer {
        AllocatedRangeBuffer { offset, length }
    }

    fn range(offset: u64, len: u64) -> AllocatedRange {
        AllocatedRange { offset, len }
    }

    /// The data of a file: `n` ranges of 10 bytes, one every 100.
    fn data(n: u64) -> Vec<AllocatedRange> {
        (0..n).map(|i| range(i * 100, 10)).collect()
    }

    /// A server answering about `file`: clipped to the window; with `partial`, as many
    /// whole ranges as fit and BUFFER_OVERFLOW (Windows), else nothing when not all fit
    /// (Samba).
    fn serve(
        file: &[AllocatedRange],
        from: u64,
        len: u64,
        output: u32,
        partial: bool,
    ) -> (Vec<AllocatedRangeBuffer>, bool) {
        let end = from + len;
        let all: Vec<AllocatedRangeBuffer> = file
            .iter()
            .filter(|x| x.offset < end && x.offset + x.len > from)
            .map(|x| {
                let s = x.offset.max(from);
                r(s, (x.offset + x.len).min(end) - s)
            })
            .collect();
        let fit = output as usize / RANGE_LEN;
        match (all.len() <= fit, partial) {
            (true, _) => (all, false),
            (false, true) => (all[..fit].to_vec(), true),
            (false, false) => (Vec::new(), true),
        }
    }

    fn walk(
        file: &[AllocatedRange],
        offset: u64,
        len: u64,
        max: u32,
        partial: bool,
    ) -> (Vec<AllocatedRange>, u32) {
        let mut w = RangeWalk::new(offset, len, max).unwrap();
        while let Some((from, length, output)) = w.next_request() {
            let (answer, more) = serve(file, from, length, output, partial);
            w.absorb(answer, more).unwrap();
        }
        (w.ranges, w.requests)
    }

    #[test]
    fn partial_answers_go_on_from_the_last_range() {
        let file = data(1000);
        let (got, requests) = walk(&file, 0, 100_000, 1 << 20, true);
        assert_eq!(got, file);
        // 256, then 512 from the 256th, then the rest fits.
        assert_eq!(requests, 3);
    }

    #[test]
    fn all_or_nothing_answers_grow_the_buffer_then_halve_the_window() {
        let file = data(1000);
        // Up to 16 KiB (1024 ranges): the buffer grows until all fit.
        let (got, requests) = walk(&file, 0, 100_000, 16384, false);
        assert_eq!(got, file);
        assert_eq!(requests, 3);
        // Capped at 4 KiB (256 ranges): the window is halved until a piece fits.
        let (got, _) = walk(&file, 0, 100_000, 4096, false);
        assert_eq!(got, file);
    }

    #[test]
    fn clipped_and_joined_ranges() {
        let file = vec![range(0, 1000), range(5000, 10)];
        // A window inside a range gives that window; ranges split by windows join again.
        assert_eq!(walk(&file, 100, 50, 4096, false).0, vec![range(100, 50)]);
        let mut w = RangeWalk::new(0, 10_000, 4096).unwrap();
        w.window = 300;
        while let Some((from, length, output)) = w.next_request() {
            let (answer, more) = serve(&file, from, length, output, false);
            w.absorb(answer, more).unwrap();
        }
        assert_eq!(w.ranges, file);
        assert_eq!(walk(&file, 2000, 1000, 4096, true).0, vec![]);
        assert_eq!(walk(&file, 0, 0, 4096, true), (vec![], 0));
    }

    #[test]
    fn bad_answers_end_the_walk() {
        let mut w = RangeWalk::new(0, 1000, 4096).unwrap();
        w.next_request();
        assert_eq!(
            w.absorb(vec![r(10, 5), r(12, 1)], false),
            Err(WalkError::Disorder)
        );
        let mut w = RangeWalk::new(10, 1000, 4096).unwrap();
        w.next_request();
        assert_eq!(w.absorb(vec![r(5, 1)], false), Err(WalkError::Disorder));
        let mut w = RangeWalk::new(0, 1000, 4096).unwrap();
        w.next_request();
        assert_eq!(w.absorb(vec![r(900, 200)], false), Err(WalkError::Disorder));
        let mut w = RangeWalk::new(0, 1000, 4096).unwrap();
        w.next_request();
        assert_eq!(
            w.absorb(vec![r(u64::MAX, 2)], false),
            Err(WalkError::Disorder)
        );
        // "More", for ever, with nothing: stops.
        let mut w = RangeWalk::new(0, u64::MAX / 2, 4096).unwrap();
        let mut result = Ok(());
        while w.next_request().is_some() {
            result = w.absorb(vec![], true);
            if result.is_err() {
                break;
            }
        }
        assert_eq!(result, Err(WalkError::NoProgress));
        assert!(RangeWalk::new(u64::MAX, 1, 4096).is_none());
    }
}
