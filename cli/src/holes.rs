//! Sparse copies: where a file's data lies, so that a copy reads and sends only that and
//! leaves the holes as holes on the other side. Locally the holes are found with
//! `lseek(SEEK_DATA/SEEK_HOLE)`; on the server, for a file marked sparse, with
//! FSCTL_QUERY_ALLOCATED_RANGES (a server reports a file not marked sparse as all data,
//! MS-FSCC 2.3.48, so it is copied whole). The copy itself skips the holes and then sets the
//! length, which leaves a hole at the end too.

use std::io;

use smb3_client::{DosAttributes, File};

/// Holes shorter than this are copied as zeros: skipping each would cost a request (a READ
/// or WRITE of its own on either side of it) for little space.
const MIN_HOLE: u64 = 64 * 1024;

/// The data of a file, as ranges in order that neither overlap nor touch; what lies between
/// and after them is holes of at least [`MIN_HOLE`] bytes (but the last, which may be
/// shorter).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DataRanges(Vec<(u64, u64)>);

impl DataRanges {
    /// The ranges of data of a file of `size` bytes, or `None` when it has no hole: then
    /// there is nothing to skip.
    fn of(ranges: Vec<(u64, u64)>, size: u64) -> Option<DataRanges> {
        let mut joined: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (offset, len) in ranges.into_iter().filter(|&(_, len)| len > 0) {
            match joined.last_mut() {
                Some((o, l)) if offset < *o + *l + MIN_HOLE => {
                    *l = (offset + len).max(*o + *l) - *o
                }
                _ => joined.push((offset, len)),
            }
        }
        let data: u64 = joined.iter().map(|&(_, len)| len).sum();
        (data < size).then_some(DataRanges(joined))
    }

    /// The pieces of data inside the chunk of `len` bytes at `offset`, in order.
    pub(crate) fn within(&self, offset: u64, len: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        let end = offset + len;
        // The first range that ends after the chunk starts.
        let first = self.0.partition_point(|&(o, l)| o + l <= offset);
        self.0[first..]
            .iter()
            .take_while(move |&&(o, _)| o < end)
            .map(move |&(o, l)| {
                let from = o.max(offset);
                (from, (o + l).min(end) - from)
            })
    }

    /// Bytes of data in all.
    #[cfg(test)]
    fn data_bytes(&self) -> u64 {
        self.0.iter().map(|&(_, len)| len).sum()
    }
}

/// Where the data of the local `file` of `size` bytes lies, or `None` when it takes as much
/// space as its length (no hole worth looking for) or its file system cannot say.
pub(crate) fn local(file: &std::fs::File, size: u64) -> io::Result<Option<DataRanges>> {
    use rustix::fs::SeekFrom;
    use std::os::unix::fs::MetadataExt as _;
    if file.metadata()?.blocks() * 512 >= size {
        return Ok(None);
    }
    let mut ranges = Vec::new();
    let mut at = 0;
    // Each turn moves past one range of data, so the loop ends within the file's ranges.
    while at < size {
        let data = match rustix::fs::seek(file, SeekFrom::Data(at)) {
            Ok(d) => d,
            // No data at or after `at`: the rest is a hole.
            Err(rustix::io::Errno::NXIO) => break,
            // A file system without SEEK_DATA: copy it whole.
            Err(rustix::io::Errno::INVAL) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if data >= size {
            break;
        }
        let hole = rustix::fs::seek(file, SeekFrom::Hole(data))?.min(size);
        if hole <= data {
            // A file system that does not move forward: trust nothing it said.
            return Ok(None);
        }
        ranges.push((data, hole - data));
        at = hole;
    }
    Ok(DataRanges::of(ranges, size))
}

/// Where the data of the remote `file` of `size` bytes lies, or `None` when the server does
/// not keep it sparse (then every byte is data to it) or will not say where its data is (then
/// every byte is copied, which is never wrong).
pub(crate) async fn remote(file: &File, size: u64) -> Option<DataRanges> {
    let sparse = file
        .metadata_at_open()
        .attributes
        .contains(DosAttributes::SPARSE_FILE);
    if !sparse || size == 0 {
        return None;
    }
    match file.allocated_ranges(0, size).await {
        Ok(ranges) => DataRanges::of(
            ranges.into_iter().map(|r| (r.offset, r.len)).collect(),
            size,
        ),
        Err(e) => {
            tracing::info!(file = file.path(), error = %e, "allocated ranges refused; copied whole");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_inside_a_chunk() {
        const K: u64 = 1024;
        let d = DataRanges::of(vec![(0, 10), (100 * K, 50), (1000 * K, 1)], 2000 * K).unwrap();
        let pieces = |o, l| d.within(o, l).collect::<Vec<_>>();
        assert_eq!(pieces(0, 64 * K), [(0, 10)]);
        assert_eq!(pieces(64 * K, 64 * K), [(100 * K, 50)]);
        assert_eq!(pieces(100 * K + 20, 64 * K), [(100 * K + 20, 30)]);
        assert_eq!(pieces(192 * K, 64 * K), []);
        assert_eq!(pieces(0, 2000 * K), [(0, 10), (100 * K, 50), (1000 * K, 1)]);
        assert_eq!(pieces(1000 * K, 1), [(1000 * K, 1)]);
        assert_eq!(pieces(1000 * K + 1, 999 * K), []);
        assert_eq!(d.data_bytes(), 61);
        // All data: nothing to skip.
        assert_eq!(DataRanges::of(vec![(0, 10)], 10), None);
        // Holes shorter than 64 KiB are copied: the ranges around them join.
        let d = DataRanges::of(vec![(0, 4 * K), (8 * K, 4 * K), (200 * K, K)], 400 * K).unwrap();
        assert_eq!(pieces_of(&d), [(0, 12 * K), (200 * K, K)]);
        assert_eq!(
            DataRanges::of(vec![(0, 4 * K), (8 * K, 4 * K)], 12 * K),
            None
        );
    }

    fn pieces_of(d: &DataRanges) -> Vec<(u64, u64)> {
        d.within(0, u64::MAX / 2).collect()
    }

    #[test]
    fn a_local_file_with_holes() {
        use std::io::{Seek, SeekFrom, Write};
        let dir = std::env::temp_dir().join(format!("smbcp-holes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sparse");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&[1u8; 4096]).unwrap();
        f.seek(SeekFrom::Start(8 << 20)).unwrap();
        f.write_all(&[2u8; 4096]).unwrap();
        f.set_len(16 << 20).unwrap();
        let found = local(&f, 16 << 20).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        // A file system without holes (or coarser blocks) may report more data; this
        // machine's ext4 and tmpfs keep 4 KiB blocks.
        let found = found.expect("holes seen");
        assert_eq!(found.data_bytes(), 8192);
        assert_eq!(found.within(0, 16 << 20).count(), 2);
    }
}
