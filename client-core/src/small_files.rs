//! Whole small files in one round trip each: CREATE + WRITE + CLOSE, or CREATE + READ +
//! CLOSE, sent as one related compound (MS-SMB2 3.2.4.1.4). Opening, moving the bytes and
//! closing one by one costs three round trips and three passes through the server's request
//! loop; a tree of thousands of small files is bound by exactly those, not by bytes.

use bytes::Bytes;
use smb3_proto::msg::close::CloseRequest;
use smb3_proto::msg::create::{
    AccessMask, CreateDisposition, CreateOptions, CreateRequest, CreateResponse,
};
use smb3_proto::msg::fscc::FileAttributes;
use smb3_proto::msg::read::{ReadRequest, ReadResponse};
use smb3_proto::msg::write::WriteRequest;
use smb3_proto::msg::{FileId, RequestBody};
use smb3_proto::{Command, NtStatus};

use crate::channel::Response;
use crate::error::{decode, ProtocolError, Result};
use crate::file::written_whole;
use crate::names::wire_path;
use crate::open_options::OpenOptions;
use crate::share::Share;
use crate::timewarp;

impl Share {
    /// Create the file `path`, which must not exist yet, holding `data`: CREATE
    /// (FILE_CREATE), WRITE and CLOSE in one round trip when `data` fits in one WRITE, else
    /// an open and chunked writes.
    ///
    /// Fails with status OBJECT_NAME_COLLISION when `path` exists (nothing is changed then).
    /// When the server created the file but refused the write (a full disk, a quota), the
    /// file is deleted again before the error is returned, so no empty or short file is left
    /// under the name. Should that delete fail too (the connection went down in between),
    /// the file stays, empty or short, and the error returned is still the write's.
    ///
    /// A lost connection is not retried here: a CREATE of a new file that may already have
    /// run cannot be sent again (it would fail on the file it created), so the error is
    /// [`Error::ConnectionLost`] with the cause
    /// [`ConnectionLossCause::NotReplayable`](crate::ConnectionLossCause::NotReplayable); the
    /// file may then exist, whole. A caller that must have it replaces it by another route
    /// (write a temporary name and rename it over).
    pub async fn write_new_file(&self, path: &str, data: Bytes) -> Result<()> {
        self.write_new_file_with_mode(path, data, crate::posix::DEFAULT_FILE_MODE)
            .await
    }

    /// [`Share::write_new_file`], the new file getting the permission bits `permissions`
    /// on a share with the SMB3 POSIX extensions (as [`OpenOptions::mode`]: the caller
    /// applies its umask, the server its own create mask); other shares keep no mode.
    pub async fn write_new_file_with_mode(
        &self,
        path: &str,
        data: Bytes,
        permissions: u32,
    ) -> Result<()> {
        self.across_links(path, |s: Share, p: String| {
            let data = data.clone();
            async move { s.write_new_file_here(&p, data, permissions).await }
        })
        .await
    }

    /// [`Share::write_new_file_with_mode`] on this share, with no DFS link on the way.
    async fn write_new_file_here(&self, path: &str, data: Bytes, permissions: u32) -> Result<()> {
        self.check_writable()?;
        let core = &self.tree.core;
        if data.len() > core.negotiated.max_write as usize {
            return self.write_new_file_in_chunks(path, data, permissions).await;
        }
        let mut create = CreateRequest::new(
            wire_path(path)?,
            AccessMask::FILE_WRITE_DATA
                | AccessMask::FILE_APPEND_DATA
                | AccessMask::FILE_WRITE_ATTRIBUTES
                | AccessMask::FILE_READ_ATTRIBUTES,
            CreateDisposition::CREATE,
        );
        create.create_options = CreateOptions(CreateOptions::NON_DIRECTORY_FILE);
        create.file_attributes = FileAttributes(FileAttributes::NORMAL);
        self.tree.posix_open(&mut create, permissions & 0o7777);
        let sent = data.len();
        let mut replies = self
            .send_chain(
                &create,
                (!data.is_empty()).then(|| WriteRequest::new(FileId::ANY, 0, data)),
            )
            .await?;
        let close = replies.pop();
        let write = if sent > 0 { replies.pop() } else { None };
        let created = replies
            .pop()
            .ok_or(ProtocolError::Unexpected("compound reply count"))?;
        created?.check(&[]).map_err(|e| e.with_path(path))?;
        if let Some(write) = write {
            if let Err(e) = check_write(write, sent) {
                // The file exists under its real name and is empty or short: take it away.
                if let Err(undo) = self.remove_file(path).await {
                    tracing::warn!(path, error = %undo, "removing a file whose write failed");
                }
                return Err(e.with_path(path));
            }
        }
        // A failed CLOSE after a good write leaves the file complete; the server closes the
        // handle with the session at the latest. Reported all the same.
        close
            .ok_or(ProtocolError::Unexpected("compound reply count"))??
            .check(&[NtStatus::FILE_CLOSED])
            .map_err(|e| e.with_path(path))?;
        Ok(())
    }

    /// `write_new_file` for data larger than one WRITE: open, chunked writes, close.
    async fn write_new_file_in_chunks(
        &self,
        path: &str,
        data: Bytes,
        permissions: u32,
    ) -> Result<()> {
        let options = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(permissions);
        let file = self.open(path, &options).await?;
        if let Err(e) = file.write_at(0, data).await {
            drop(file);
            if let Err(undo) = self.remove_file(path).await {
                tracing::warn!(path, error = %undo, "removing a file whose write failed");
            }
            return Err(e);
        }
        file.close().await
    }

    /// The whole content of `path` when it holds at most `limit` bytes, in one round trip
    /// (CREATE + READ + CLOSE); `None` when it is larger (read it with [`Share::open`] then).
    ///
    /// The READ asks for one byte more than `limit`, so a file that grew past what the
    /// caller expected is noticed rather than cut. A `limit` beyond the server's largest READ
    /// is read with an open and chunked reads instead.
    pub async fn read_small_file(&self, path: &str, limit: u32) -> Result<Option<Bytes>> {
        self.across_links(path, |s: Share, p: String| async move {
            s.read_small_file_here(&p, limit).await
        })
        .await
    }

    /// [`Share::read_small_file`] on this share, with no DFS link on the way.
    async fn read_small_file_here(&self, path: &str, limit: u32) -> Result<Option<Bytes>> {
        let core = &self.tree.core;
        let ask = limit.saturating_add(1);
        if ask > core.negotiated.max_read {
            return self.read_small_file_in_chunks(path, limit).await;
        }
        let mut create = CreateRequest::new(
            wire_path(path)?,
            AccessMask::FILE_READ_DATA | AccessMask::FILE_READ_ATTRIBUTES,
            CreateDisposition::OPEN,
        );
        create.create_options = CreateOptions(CreateOptions::NON_DIRECTORY_FILE);
        timewarp::add_timewarp(&mut create, self.snapshot_filetime());
        self.tree.posix_open(&mut create, 0);
        let mut replies = self
            .send_chain(&create, Some(ReadRequest::new(FileId::ANY, 0, ask)))
            .await?
            .into_iter();
        let (Some(created), Some(read), Some(_closed)) =
            (replies.next(), replies.next(), replies.next())
        else {
            return Err(ProtocolError::Unexpected("compound reply count").into());
        };
        let created = match created.and_then(|r| r.check(&[])) {
            Ok(r) => decode(Command::CREATE, CreateResponse::decode(&r.msg))?,
            Err(e) => {
                let e = e.with_path(path);
                return Err(self
                    .explain_snapshot_miss(e, path, self.snapshot_filetime())
                    .await);
            }
        };
        let read = read?
            .check(&[NtStatus::END_OF_FILE])
            .map_err(|e| e.with_path(path))?;
        let data = if read.header.status == NtStatus::END_OF_FILE {
            Bytes::new()
        } else {
            decode(Command::READ, ReadResponse::decode(&read.msg))?.data
        };
        if data.len() > ask as usize {
            return Err(ProtocolError::TooMuchOutput {
                command: Command::READ,
                got: data.len(),
                allowed: ask,
            }
            .into());
        }
        if data.len() > limit as usize || created.end_of_file > u64::from(limit) {
            return Ok(None);
        }
        // The READ ran right after the CREATE on the same handle: a size that differs means
        // another client changed the file in between; what was read is one state of it.
        Ok(Some(data))
    }

    /// `read_small_file` for limits beyond one READ.
    async fn read_small_file_in_chunks(&self, path: &str, limit: u32) -> Result<Option<Bytes>> {
        let file = self.open(path, &OpenOptions::new().read(true)).await?;
        let data = file.read_at(0, limit as usize + 1).await;
        let closed = file.close().await;
        let data = data?;
        closed?;
        Ok((data.len() <= limit as usize).then_some(data))
    }

    /// Send `create`, then `middle` (a READ or WRITE on the handle it opens, if any), then a
    /// CLOSE of that handle, as one related compound. One reply per request, in order.
    pub(crate) async fn send_chain<M: RequestBody>(
        &self,
        create: &CreateRequest,
        middle: Option<M>,
    ) -> Result<Vec<Result<Response>>> {
        let core = &self.tree.core;
        let tree = Some(self.tree.context);
        let mut reqs = vec![core.prepare(create, tree)];
        if let Some(m) = &middle {
            reqs.push(core.prepare(m, tree));
        }
        reqs.push(core.prepare(&CloseRequest::new(FileId::ANY), tree));
        let expected = reqs.len();
        // The CLOSE in the chain closes the handle whatever happens to this future, so no
        // abandon hook is needed; the chain is sent again whole only when the CREATE allows.
        let replies = core
            .send_related(reqs, create.replay(), self.tree.call())
            .await?;
        if replies.len() != expected {
            return Err(ProtocolError::Unexpected("compound reply count").into());
        }
        self.close_left_open(&replies).await;
        Ok(replies)
    }

    /// After a CREATE ... CLOSE chain: when the CREATE opened the file but the CLOSE failed,
    /// close the handle by its id. MS-SMB2 3.3.5.2.7.2 lets a server fail every related
    /// request after one that failed (a READ at the end of the file, a QUERY_INFO refused),
    /// the CLOSE included, which would leave the handle open until the session ends. Windows
    /// and Samba fail the rest of a chain only after a failed CREATE, so this is rare.
    pub(crate) async fn close_left_open(&self, replies: &[Result<Response>]) {
        let (Some(Ok(created)), Some(Ok(closed))) = (replies.first(), replies.last()) else {
            return;
        };
        let still_open = created.header.status == NtStatus::SUCCESS
            && !matches!(
                closed.header.status,
                NtStatus::SUCCESS | NtStatus::FILE_CLOSED | NtStatus::INVALID_HANDLE
            );
        if !still_open {
            return;
        }
        if let Ok(created) = CreateResponse::decode(&created.msg) {
            // Best effort: a handle that cannot be closed now goes with the session.
            let _ = self.tree.close(created.file_id).await;
        }
    }
}

/// The WRITE's reply: success and every byte written.
fn check_write(reply: Result<Response>, sent: usize) -> Result<()> {
    written_whole(&reply?.check(&[])?, sent)
}
