//! Space and holes: FALLOCATE (reserve space, punch a hole, zero a range) and LSEEK with
//! SEEK_DATA / SEEK_HOLE (the kernel answers the other `whence` values itself).
//!
//! Reserving maps to FileAllocationInformation, zeroing and punching to FSCTL_SET_ZERO_DATA
//! (with the file marked sparse first for a hole, as the Linux kernel client does in
//! `smb3_punch_hole`), holes are found with FSCTL_QUERY_ALLOCATED_RANGES. What SMB cannot say
//! is refused with EOPNOTSUPP (collapsing and inserting ranges, unsharing), as on file
//! systems without them. Every call first waits for the writes in flight on the file, so the
//! server sees the bytes in the order the applications wrote them.

use smb3_client::AllocatedRange;

use super::SmbFs;
use crate::errno::{errno_of, FsError, FsResult};

/// `fallocate(2)` mode bits, as the Linux kernel sends them (linux/falloc.h).
const FALLOC_FL_KEEP_SIZE: i32 = 0x01;
const FALLOC_FL_PUNCH_HOLE: i32 = 0x02;
const FALLOC_FL_ZERO_RANGE: i32 = 0x10;

/// `lseek(2)` whence values for holes, as the Linux kernel sends them (they differ on macOS,
/// whose FUSE does not forward them).
pub const SEEK_DATA: i32 = 3;
/// See [`SEEK_DATA`].
pub const SEEK_HOLE: i32 = 4;

/// What one `fallocate(2)` call asks, in SMB terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fallocate {
    /// Reserve space up to the end of the range, and make the file that long unless
    /// `keep_size`.
    Reserve { keep_size: bool },
    /// Free the range: it reads as zeros and takes no space.
    PunchHole,
    /// Make the range read as zeros, and make the file reach its end unless `keep_size`.
    Zero { keep_size: bool },
}

impl Fallocate {
    fn of_mode(mode: i32) -> Option<Fallocate> {
        const KEEP: i32 = FALLOC_FL_KEEP_SIZE;
        match mode {
            0 => Some(Fallocate::Reserve { keep_size: false }),
            KEEP => Some(Fallocate::Reserve { keep_size: true }),
            // The kernel refuses PUNCH_HOLE without KEEP_SIZE before asking.
            m if m == FALLOC_FL_PUNCH_HOLE | KEEP => Some(Fallocate::PunchHole),
            FALLOC_FL_ZERO_RANGE => Some(Fallocate::Zero { keep_size: false }),
            m if m == FALLOC_FL_ZERO_RANGE | KEEP => Some(Fallocate::Zero { keep_size: true }),
            _ => None,
        }
    }
}

/// Where SEEK_DATA (`data`) or SEEK_HOLE (`!data`) from `offset` lands in a file of `size`
/// bytes whose data lies in `ranges` (in order, not touching: as the library joins them).
/// `None` is ENXIO: no data at or after `offset`, or `offset` at or past the end. The end of
/// the file counts as a hole (lseek(2)).
fn seek(ranges: &[AllocatedRange], size: u64, offset: u64, data: bool) -> Option<u64> {
    if offset >= size {
        return None;
    }
    let mut ranges = ranges
        .iter()
        .filter(|r| r.len > 0 && r.offset + r.len > offset && r.offset < size);
    if data {
        return ranges.next().map(|r| r.offset.max(offset));
    }
    let mut hole = offset;
    for r in ranges {
        if r.offset > hole {
            break;
        }
        hole = r.offset + r.len;
    }
    Some(hole.min(size))
}

impl SmbFs {
    /// FALLOCATE on the open handle `fh`: `len` bytes at `offset`, `mode` as `fallocate(2)`.
    pub async fn fallocate(&self, fh: u64, offset: u64, len: u64, mode: i32) -> FsResult<()> {
        let what = Fallocate::of_mode(mode).ok_or(FsError::new(libc::EOPNOTSUPP))?;
        self.writable()?;
        let h = self.handle(fh)?;
        if !h.writable {
            return Err(FsError::new(libc::EBADF));
        }
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= i64::MAX as u64)
            .ok_or(FsError::new(libc::EFBIG))?;
        self.drain_ino(h.ino).await;
        match what {
            Fallocate::Reserve { keep_size } => {
                self.retry(|| h.file.allocate(end, !keep_size)).await?;
            }
            Fallocate::PunchHole => {
                self.drop_prefetched(h.ino);
                self.retry(|| h.file.set_sparse(true)).await?;
                self.retry(|| h.file.zero_range(offset, len)).await?;
            }
            Fallocate::Zero { keep_size } => {
                self.drop_prefetched(h.ino);
                self.retry(|| h.file.zero_range(offset, len)).await?;
                if !keep_size {
                    self.retry(|| h.file.allocate(end, true)).await?;
                }
            }
        }
        Ok(())
    }

    /// LSEEK with SEEK_DATA or SEEK_HOLE on the open handle `fh`. A server that will not say
    /// where the holes are (the query refused) is answered as a file without holes, which
    /// lseek(2) allows.
    pub async fn seek_hole_or_data(&self, fh: u64, offset: i64, whence: i32) -> FsResult<u64> {
        let data = match whence {
            SEEK_DATA => true,
            SEEK_HOLE => false,
            _ => return Err(FsError::new(libc::EINVAL)),
        };
        let offset = u64::try_from(offset).map_err(|_| FsError::new(libc::ENXIO))?;
        let h = self.handle(fh)?;
        self.drain_ino(h.ino).await;
        let size = self.retry(|| h.file.metadata()).await?.len;
        if offset >= size {
            return Err(FsError::new(libc::ENXIO));
        }
        let ranges = match self
            .retry(|| h.file.allocated_ranges(offset, size - offset))
            .await
        {
            Ok(r) => r,
            Err(e) if matches!(errno_of(&e), libc::EACCES | libc::EOPNOTSUPP) => {
                tracing::debug!(error = %e, "allocated ranges refused; the file shows no holes");
                vec![AllocatedRange {
                    offset,
                    len: size - offset,
                }]
            }
            Err(e) => return Err(e.into()),
        };
        seek(&ranges, size, offset, data).ok_or(FsError::new(libc::ENXIO))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(offset: u64, len: u64) -> AllocatedRange {
        AllocatedRange { offset, len }
    }

    #[test]
    fn modes() {
        assert_eq!(
            Fallocate::of_mode(0),
            Some(Fallocate::Reserve { keep_size: false })
        );
        assert_eq!(
            Fallocate::of_mode(1),
            Some(Fallocate::Reserve { keep_size: true })
        );
        assert_eq!(Fallocate::of_mode(3), Some(Fallocate::PunchHole));
        assert_eq!(
            Fallocate::of_mode(0x11),
            Some(Fallocate::Zero { keep_size: true })
        );
        // Collapse, insert, unshare, and punch without keep-size.
        for m in [0x02, 0x08, 0x20, 0x40, 0x04] {
            assert_eq!(Fallocate::of_mode(m), None, "{m:#x}");
        }
    }

    #[test]
    fn data_and_holes() {
        // 0..4k data, 4k..1M hole, 1M..1M+4k data, hole to the end at 2M.
        let ranges = [r(0, 4096), r(1 << 20, 4096)];
        let size = 2 << 20;
        assert_eq!(seek(&ranges, size, 0, true), Some(0));
        assert_eq!(seek(&ranges, size, 100, true), Some(100));
        assert_eq!(seek(&ranges, size, 5000, true), Some(1 << 20));
        assert_eq!(seek(&ranges, size, (1 << 20) + 4096, true), None);
        assert_eq!(seek(&ranges, size, 0, false), Some(4096));
        assert_eq!(seek(&ranges, size, 5000, false), Some(5000));
        assert_eq!(seek(&ranges, size, 1 << 20, false), Some((1 << 20) + 4096));
        assert_eq!(seek(&ranges, size, size, false), None);
        // A file that is all data: its only hole is its end.
        assert_eq!(seek(&[r(0, 10)], 10, 3, false), Some(10));
        assert_eq!(seek(&[r(0, 10)], 10, 3, true), Some(3));
        // All hole.
        assert_eq!(seek(&[], 10, 3, true), None);
        assert_eq!(seek(&[], 10, 3, false), Some(3));
        // Space allocated past the end (reserved with keep-size) is not data.
        assert_eq!(seek(&[r(0, 100)], 10, 0, false), Some(10));
    }
}
