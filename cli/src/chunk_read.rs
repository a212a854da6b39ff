//! Reading an upload's chunks from the local file, cheaply.
//!
//! Beyond the two copies no client can avoid (page cache to buffer, buffer to socket), reading
//! each chunk into a fresh buffer on tokio's blocking pool makes an upload pay for two more
//! things per chunk (measured on 1 GiB uploads, docs/PERFORMANCE.md):
//! - fresh buffers: a chunk allocated on whichever blocking-pool thread reads it lands in one
//!   of a dozen glibc per-thread arenas, which keep faulting in new zeroed pages (about 15,000
//!   extra page faults per GiB);
//! - a thread hand-off: a chunk read on a blocking-pool thread is signed and written to the
//!   socket on a runtime thread, usually on the other core, with the data cold in its cache.
//!
//! So buffers come from the library's [`BufferPool`] and go back to it when the library drops
//! the last reference (after the WRITE's reply), and a read first asks the kernel with `RWF_NOWAIT`
//! for what the page cache already holds, on the calling runtime thread: the kernel answers that
//! without waiting on a device, or says it would have to. Only what is not cached is read on
//! tokio's blocking pool, so a cold disk never stalls the runtime. Files on tmpfs or ramfs
//! (which answer `RWF_NOWAIT` with `EOPNOTSUPP`) are memory already and are read in place.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use smb3_client::BufferPool;

/// A local file being uploaded, and where its data lives.
pub(crate) struct ChunkSource {
    file: Arc<File>,
    /// On tmpfs or ramfs: reading is a memory copy, never a wait on a device.
    in_memory: bool,
}

impl ChunkSource {
    /// Wrap an open file, looking up once which file system holds it.
    pub(crate) fn new(file: File) -> ChunkSource {
        let in_memory = is_in_memory(&file);
        ChunkSource {
            file: Arc::new(file),
            in_memory,
        }
    }

    /// The file itself (for its metadata).
    pub(crate) fn file(&self) -> &File {
        &self.file
    }
}

/// `len` bytes of `src` from `off`: what the page cache holds is read on this thread, the rest
/// on the blocking pool. A file that ends early (truncated while being copied) is an error
/// naming the offset.
pub(crate) async fn read_chunk(
    buffers: &BufferPool,
    src: &ChunkSource,
    off: u64,
    len: usize,
) -> io::Result<Bytes> {
    let mut buf = buffers.take(len);
    let read_here = if src.in_memory {
        read_all_at(&src.file, &mut buf[..len], off)?;
        len
    } else {
        read_cached(&src.file, &mut buf[..len], off)?
    };
    if read_here < len {
        let file = src.file.clone();
        buf = tokio::task::spawn_blocking(move || {
            read_all_at(&file, &mut buf[read_here..len], off + read_here as u64).map(|_| buf)
        })
        .await
        .map_err(io::Error::other)??;
    }
    Ok(buffers.into_bytes(buf, len))
}

/// Read into `buf` from `off` only as far as the kernel can without waiting on a device;
/// returns how many bytes that was (0 when nothing is cached or the file system cannot say,
/// e.g. tmpfs answers `EOPNOTSUPP`).
#[cfg(all(target_os = "linux", not(target_env = "musl")))]
fn read_cached(src: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    use rustix::io::{preadv2, Errno, ReadWriteFlags};
    let mut done = 0;
    while done < buf.len() {
        let mut slice = [io::IoSliceMut::new(&mut buf[done..])];
        match preadv2(src, &mut slice, off + done as u64, ReadWriteFlags::NOWAIT) {
            // End of file: let the blocking read report it with the offset.
            Ok(0) => break,
            Ok(n) => done += n,
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN | Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL) => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(done)
}

#[cfg(not(all(target_os = "linux", not(target_env = "musl"))))]
fn read_cached(_src: &File, _buf: &mut [u8], _off: u64) -> io::Result<usize> {
    Ok(0)
}

/// Whether `file` lives on tmpfs or ramfs (f_type values from linux/magic.h).
#[cfg(target_os = "linux")]
fn is_in_memory(file: &File) -> bool {
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    const RAMFS_MAGIC: u64 = 0x8584_58f6;
    rustix::fs::fstatfs(file).is_ok_and(|fs| {
        // f_type is signed on some targets; the magic numbers fit in 32 bits either way.
        let kind = fs.f_type as u64 & 0xffff_ffff;
        kind == TMPFS_MAGIC || kind == RAMFS_MAGIC
    })
}

#[cfg(not(target_os = "linux"))]
fn is_in_memory(_file: &File) -> bool {
    false
}

/// Fill `buf` from `off`, or fail with the offset where the file ended.
fn read_all_at(src: &File, buf: &mut [u8], off: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let at = off + done as u64;
        match src.read_at(&mut buf[done..], at) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("file ended at byte {at} while being copied (was it truncated?)"),
                ))
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file holding `data` in `dir`, already unlinked (its name is unique to this test).
    fn file_in(dir: &std::path::Path, data: &[u8], test: &str) -> ChunkSource {
        let path = dir.join(format!("smbcp-{test}-{}", std::process::id()));
        std::fs::write(&path, data).unwrap();
        let file = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        ChunkSource::new(file)
    }

    fn file_with(data: &[u8], test: &str) -> ChunkSource {
        file_in(&std::env::temp_dir(), data, test)
    }

    /// Where test files can go: the package directory (usually a disk, where `RWF_NOWAIT`
    /// works), /dev/shm (tmpfs: read in place), the temp directory (either).
    fn places() -> Vec<std::path::PathBuf> {
        let mut places = vec![std::env::current_dir().unwrap(), std::env::temp_dir()];
        if std::path::Path::new("/dev/shm").is_dir() {
            places.push("/dev/shm".into());
        }
        places
    }

    fn pattern(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[tokio::test]
    async fn chunks_read_at_their_offsets_and_report_a_short_file() {
        for place in places() {
            read_at_offsets(&place).await;
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn files_in_memory_are_recognised() {
        assert!(file_in("/dev/shm".as_ref(), b"x", "shm").in_memory);
    }

    async fn read_at_offsets(place: &std::path::Path) {
        let data = pattern(300_000);
        let src = file_in(place, &data, "offsets");
        let buffers = BufferPool::new(1 << 20);
        assert_eq!(read_chunk(&buffers, &src, 0, 0).await.unwrap().len(), 0);
        let small = read_chunk(&buffers, &src, 7, 1000).await.unwrap();
        assert_eq!(&small[..], &data[7..1007]);
        let big = read_chunk(&buffers, &src, 100_000, 128 * 1024)
            .await
            .unwrap();
        assert_eq!(&big[..], &data[100_000..100_000 + 128 * 1024]);
        let tail = read_chunk(&buffers, &src, 299_000, 1000).await.unwrap();
        assert_eq!(&tail[..], &data[299_000..]);
        let short = read_chunk(&buffers, &src, 250_000, 100_000)
            .await
            .unwrap_err();
        assert_eq!(short.kind(), io::ErrorKind::UnexpectedEof);
        assert!(short.to_string().contains("byte 300000"), "{short}");
    }

    #[tokio::test]
    async fn buffers_return_to_the_pool_when_the_last_clone_drops() {
        let data = pattern(1 << 20);
        let src = file_with(&data, "pool");
        let buffers = BufferPool::new(1 << 20);
        let a = read_chunk(&buffers, &src, 0, 256 * 1024).await.unwrap();
        let a_slice = a.slice(10..20);
        drop(a);
        assert_eq!(buffers.idle_bytes(), 0, "a slice still holds the buffer");
        drop(a_slice);
        assert_eq!(buffers.idle_bytes(), 256 * 1024);
        // A reused buffer holds old bytes past the new chunk's end: only `len` are visible.
        let again = read_chunk(&buffers, &src, 768 * 1024, 200 * 1024)
            .await
            .unwrap();
        assert_eq!(&again[..], &data[768 * 1024..968 * 1024]);
        assert_eq!(buffers.idle_bytes(), 0, "reused, not allocated");
    }
}
