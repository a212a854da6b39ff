//! The calls that change what a file carries with one SET_INFO of a file information class:
//! its times and DOS attributes (FileBasicInformation, MS-FSCC 2.4.7), and a new name for it
//! (FileLinkInformation, 2.4.21: hard links).
//!
//! Each path form is one open, one SET_INFO (after a QUERY_INFO where the current value
//! matters) and a close, through [`Share::on_path`], which the other path forms of the
//! library (streams, security descriptors) use too; the `File` forms reuse an open handle.

use std::time::SystemTime;

use smb3_proto::msg::create::{AccessMask, CreateDisposition, CreateOptions, CreateRequest};
use smb3_proto::msg::fscc::{
    system_time_to_filetime, FileAttributes, FileBasicInformation, SetFileInfo, FILETIME_UNCHANGED,
};
use smb3_proto::msg::fscc_link::FileLinkInformation;
use smb3_proto::msg::query_info::{QueryInfoRequest, QueryInfoResponse};
use smb3_proto::msg::set_info::SetInfoRequest;
use smb3_proto::msg::FileId;
use smb3_proto::Command;

use crate::attributes::DosAttributes;
use crate::error::decode;
use crate::error::Result;
use crate::file::File;
use crate::names::wire_path;
use crate::open_options::IfExists;
use crate::share::Share;
use crate::tree::ScopedHandle;

/// Times to set on a file; `None` leaves that time as it is.
///
/// Sent as MS-FSCC 2.4.7 FileBasicInformation, where a time of 0 means "unchanged". Servers
/// keep 100 ns resolution (Samba: what the underlying file system keeps).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileTimes {
    /// Creation (birth) time.
    pub created: Option<SystemTime>,
    /// Last access time.
    pub accessed: Option<SystemTime>,
    /// Last write (modification) time.
    pub modified: Option<SystemTime>,
    /// Last attribute change time.
    pub changed: Option<SystemTime>,
}

impl FileTimes {
    /// No times to set yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Set the last access time.
    pub fn accessed(mut self, t: SystemTime) -> Self {
        self.accessed = Some(t);
        self
    }

    /// Set the last write time.
    pub fn modified(mut self, t: SystemTime) -> Self {
        self.modified = Some(t);
        self
    }

    /// Set the creation time.
    pub fn created(mut self, t: SystemTime) -> Self {
        self.created = Some(t);
        self
    }

    fn basic_information(&self) -> FileBasicInformation {
        let ft = |t: Option<SystemTime>| t.map_or(FILETIME_UNCHANGED, system_time_to_filetime);
        FileBasicInformation {
            creation_time: ft(self.created),
            last_access_time: ft(self.accessed),
            last_write_time: ft(self.modified),
            change_time: ft(self.changed),
            // 0: attributes unchanged (MS-FSCC 2.4.7).
            file_attributes: FileAttributes(0),
        }
    }
}

impl Share {
    /// Open `path` (file or directory) with `access` and run `f` on the handle, closing it
    /// whatever `f` returns; errors name the path.
    pub(crate) async fn on_path<T, F, Fut>(&self, path: &str, access: u32, f: F) -> Result<T>
    where
        F: FnOnce(FileId) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut req = CreateRequest::new(wire_path(path)?, access, CreateDisposition::OPEN);
        req.create_options = CreateOptions(self.tree.metadata_open_options());
        crate::timewarp::add_timewarp(&mut req, self.snapshot_filetime());
        self.tree.posix_open(&mut req, 0);
        let created = self.tree.create_name_op(&req, path).await?;
        let handle = ScopedHandle::new(&self.tree, created.file_id);
        let result = f(handle.id()).await;
        let closed = handle.close().await;
        let value = result.map_err(|e| e.with_path(path))?;
        closed.map_err(|e| e.with_path(path))?;
        Ok(value)
    }

    async fn set_info_on<T: SetFileInfo>(&self, id: FileId, info: &T) -> Result<()> {
        self.tree
            .core
            .send(&SetInfoRequest::file_info(id, info), self.tree.call())
            .await
            .map(drop)
    }

    async fn basic_information(&self, id: FileId) -> Result<FileBasicInformation> {
        let req = QueryInfoRequest::file_info::<FileBasicInformation>(
            id,
            FileBasicInformation::SIZE as u32,
        );
        let resp = self.tree.core.send(&req, self.tree.call()).await?;
        decode(
            Command::QUERY_INFO,
            QueryInfoResponse::decode(&resp.msg).and_then(|r| r.file_info()),
        )
    }

    /// Set the times of `path` (a file or a directory); times left `None` keep their value.
    pub async fn set_times(&self, path: &str, times: &FileTimes) -> Result<()> {
        self.across_links(path, |s: Share, p: String| async move {
            s.set_times_here(&p, times).await
        })
        .await
    }

    /// [`Share::set_times`] on this share, with no DFS link on the way.
    async fn set_times_here(&self, path: &str, times: &FileTimes) -> Result<()> {
        let info = times.basic_information();
        self.on_path(
            path,
            AccessMask::FILE_WRITE_ATTRIBUTES | AccessMask::SYNCHRONIZE,
            |id| async move { self.set_info_on(id, &info).await },
        )
        .await
    }

    /// Set the DOS attributes of `path` (a file or a directory) to exactly `attributes`, as
    /// far as a client can change them ([`DosAttributes::SETTABLE`]; the others are left as
    /// the server has them). An empty set clears them all. Samba keeps hidden, system and
    /// archive in an extended attribute (`store dos attributes`, its default), so a share on
    /// a file system without user xattrs may drop them; read-only maps to the write bits.
    pub async fn set_attributes(&self, path: &str, attributes: DosAttributes) -> Result<()> {
        self.set_times_and_attributes(path, &FileTimes::new(), attributes)
            .await
    }

    /// Set times and DOS attributes of `path` in one SET_INFO (FileBasicInformation, MS-FSCC
    /// 2.4.7): what a copy that preserves metadata needs once the data is written. Times
    /// left `None` keep their value; attributes are set as by [`Share::set_attributes`].
    /// Setting READONLY here and writing later fails: set it last.
    pub async fn set_times_and_attributes(
        &self,
        path: &str,
        times: &FileTimes,
        attributes: DosAttributes,
    ) -> Result<()> {
        self.across_links(path, |s: Share, p: String| async move {
            s.set_times_and_attributes_here(&p, times, attributes).await
        })
        .await
    }

    /// [`Share::set_times_and_attributes`] on this share, with no DFS link on the way.
    async fn set_times_and_attributes_here(
        &self,
        path: &str,
        times: &FileTimes,
        attributes: DosAttributes,
    ) -> Result<()> {
        let info = FileBasicInformation {
            file_attributes: FileAttributes(attributes.to_wire_for_set()),
            ..times.basic_information()
        };
        self.on_path(
            path,
            AccessMask::FILE_WRITE_ATTRIBUTES | AccessMask::SYNCHRONIZE,
            |id| async move { self.set_info_on(id, &info).await },
        )
        .await
    }

    /// Set or clear FILE_ATTRIBUTE_READONLY on `path`, keeping its other attributes. Returns
    /// the attributes as they are afterwards. This is what `chmod` can change on a server
    /// without POSIX extensions (mount.cifs does the same): no write bit means read-only.
    pub async fn set_readonly(&self, path: &str, readonly: bool) -> Result<u32> {
        self.across_links(path, |s: Share, p: String| async move {
            s.set_readonly_here(&p, readonly).await
        })
        .await
    }

    /// [`Share::set_readonly`] on this share, with no DFS link on the way.
    async fn set_readonly_here(&self, path: &str, readonly: bool) -> Result<u32> {
        self.on_path(
            path,
            AccessMask::FILE_READ_ATTRIBUTES
                | AccessMask::FILE_WRITE_ATTRIBUTES
                | AccessMask::SYNCHRONIZE,
            |id| async move {
                let now = self.basic_information(id).await?.file_attributes.0;
                let mut want = now & !FileAttributes::READONLY;
                if readonly {
                    want |= FileAttributes::READONLY;
                }
                if want == now {
                    return Ok(now);
                }
                // Attributes of 0 would mean "unchanged": a file with none left is NORMAL
                // (MS-FSCC 2.6).
                let sent = if want == 0 {
                    FileAttributes::NORMAL
                } else {
                    want
                };
                let info = FileBasicInformation {
                    file_attributes: FileAttributes(sent),
                    ..FileBasicInformation::default()
                };
                self.set_info_on(id, &info).await?;
                Ok(want)
            },
        )
        .await
    }

    /// Make `new` another name (hard link) of the existing file `existing`, both
    /// share-relative; `if_exists` says whether an existing file named `new` is replaced.
    /// Directories cannot be linked. Servers without hard links answer NOT_SUPPORTED.
    /// Behind DFS links, both names must lead to one share ([`Error::DifferentShares`]).
    pub async fn hard_link(&self, existing: &str, new: &str, if_exists: IfExists) -> Result<()> {
        self.across_links_to(
            existing,
            new,
            |s: Share, from: String, to: String| async move {
                s.hard_link_here(&from, &to, if_exists).await
            },
        )
        .await
    }

    /// [`Share::hard_link`] on this share, with no DFS link on the way.
    async fn hard_link_here(&self, existing: &str, new: &str, if_exists: IfExists) -> Result<()> {
        let info = FileLinkInformation {
            replace_if_exists: if_exists == IfExists::Replace,
            file_name: self.tree.wire_name(wire_path(new)?),
        };
        self.on_path(
            existing,
            AccessMask::FILE_READ_ATTRIBUTES | AccessMask::SYNCHRONIZE,
            |id| async move { self.set_info_on(id, &info).await },
        )
        .await
    }
}

impl File {
    /// Set this file's times through its handle; times left `None` keep their value. Set
    /// after the last write: the server moves the write time on each write.
    pub async fn set_times(&self, times: &FileTimes) -> Result<()> {
        self.set_file_info(&times.basic_information()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn unset_times_stay_unchanged() {
        let t = UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        let b = FileTimes::new().modified(t).basic_information();
        assert_eq!(b.last_write_time, system_time_to_filetime(t));
        assert_eq!(b.creation_time, FILETIME_UNCHANGED);
        assert_eq!(b.last_access_time, FILETIME_UNCHANGED);
        assert_eq!(b.change_time, FILETIME_UNCHANGED);
        assert_eq!(b.file_attributes.0, 0);
    }
}
