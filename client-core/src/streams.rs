//! Alternate data streams: the list of a file's streams (QUERY_INFO FileStreamInformation,
//! MS-FSCC 2.4.44). A named stream is read and written like a file, by opening
//! `path:name` (or `path:name:$DATA`) with [`Share::open`]: SMB passes the colon through to
//! the server, which parses the stream name (MS-FSCC 2.1.5.1). Samba keeps streams in
//! extended attributes (`vfs objects = streams_xattr`, `user.DosStream.NAME:$DATA`) or in
//! separate files (`streams_depot`); without either module it refuses stream names with
//! OBJECT_NAME_INVALID.

use smb3_proto::msg::create::AccessMask;
use smb3_proto::msg::fscc::QueryFileInfo;
use smb3_proto::msg::fscc_stream::{FileStreamInformation, StreamEntry};
use smb3_proto::msg::query_info::QueryInfoRequest;
use smb3_proto::Command;

use crate::error::{decode, Error, Result};
use crate::file::File;
use crate::info_query::{query_growing, FIRST_BUFFER, TOO_SMALL};
use crate::names::check_name;
use crate::share::Share;

/// One data stream of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamInfo {
    /// The stream's name as the server gives it: `::$DATA` for the default (unnamed) stream,
    /// which holds the file's ordinary contents, `:name:$DATA` for a named stream. Appended
    /// to the file's path it opens the stream (`file.txt:name:$DATA`).
    pub name: String,
    /// Length in bytes.
    pub size: u64,
    /// Bytes allocated to it on the server.
    pub allocation_size: u64,
}

impl StreamInfo {
    /// Whether this is the default stream `::$DATA` (the file's ordinary data).
    pub fn is_default(&self) -> bool {
        self.stream_name().is_empty()
    }

    /// The bare name: `name` for `:name:$DATA`, empty for the default stream. Opening
    /// `path:NAME` reaches it.
    pub fn stream_name(&self) -> &str {
        let n = self.name.strip_prefix(':').unwrap_or(&self.name);
        match n.rsplit_once(':') {
            Some((bare, kind)) if kind.eq_ignore_ascii_case("$DATA") => bare,
            _ => n,
        }
    }
}

impl From<StreamEntry> for StreamInfo {
    fn from(e: StreamEntry) -> Self {
        StreamInfo {
            name: e.name,
            size: e.size,
            allocation_size: e.allocation_size,
        }
    }
}

/// The streams of the file `owner` from a FileStreamInformation reply. A stream name is
/// appended to the file's path to open it, and smbcp creates streams of that name: one that
/// is not a single name (`..`, `a\b`) is refused like a listing's entry.
fn stream_list(output: &[u8], owner: &str) -> Result<Vec<StreamInfo>> {
    let info = decode(Command::QUERY_INFO, FileStreamInformation::decode(output))?;
    let streams: Vec<StreamInfo> = info.entries.into_iter().map(StreamInfo::from).collect();
    for s in streams.iter().filter(|s| !s.is_default()) {
        if let Err(reason) = check_name(s.stream_name()) {
            return Err(Error::UnsafeName {
                dir: owner.to_string(),
                name: s.name.clone(),
                reason,
            });
        }
    }
    Ok(streams)
}

impl Share {
    /// The data streams of the file or directory `path`: the default stream `::$DATA` (files
    /// only) and its named streams, with their sizes. A directory without named streams has
    /// none. Opening needs only FILE_READ_ATTRIBUTES.
    pub async fn streams(&self, path: &str) -> Result<Vec<StreamInfo>> {
        self.across_links(path, |s: Share, p: String| async move {
            s.streams_here(&p).await
        })
        .await
    }

    /// [`Share::streams`] on this share, with no DFS link on the way.
    async fn streams_here(&self, path: &str) -> Result<Vec<StreamInfo>> {
        let max = self.tree.core.negotiated.max_transact;
        let output = self
            .on_path(
                path,
                AccessMask::FILE_READ_ATTRIBUTES | AccessMask::SYNCHRONIZE,
                |id| {
                    query_growing(FIRST_BUFFER, max, move |len| async move {
                        let req = QueryInfoRequest::file(id, FileStreamInformation::CLASS, len);
                        self.tree
                            .core
                            .send(&req, self.tree.call().allowing(TOO_SMALL))
                            .await
                    })
                },
            )
            .await?;
        stream_list(&output, path)
    }
}

impl File {
    /// The data streams of this file (see [`Share::streams`]). Ask on a handle to the file
    /// itself: Samba refuses the query on a handle to one of its named streams
    /// (STATUS_INVALID_PARAMETER).
    pub async fn streams(&self) -> Result<Vec<StreamInfo>> {
        let max = self.core().negotiated.max_transact;
        let output = query_growing(FIRST_BUFFER, max, |len| async move {
            let req = QueryInfoRequest::file(self.file_id(), FileStreamInformation::CLASS, len);
            self.core()
                .send(&req, self.on_open().allowing(TOO_SMALL))
                .await
                .map_err(|e| self.err(e))
        })
        .await?;
        stream_list(&output, self.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str) -> StreamInfo {
        StreamInfo {
            name: name.into(),
            size: 0,
            allocation_size: 0,
        }
    }

    #[test]
    fn bare_names() {
        assert!(info("::$DATA").is_default());
        assert_eq!(info(":foo:$DATA").stream_name(), "foo");
        assert!(!info(":foo:$DATA").is_default());
        assert_eq!(info(":a:b:$data").stream_name(), "a:b");
        assert_eq!(info(":odd").stream_name(), "odd");
    }

    /// One FileStreamInformation entry (MS-FSCC 2.4.44) named `name`.
    fn entry(name: &str, last: bool) -> Vec<u8> {
        let units: Vec<u8> = name.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let len = 24 + units.len();
        let padded = len.div_ceil(8) * 8;
        let mut e = Vec::with_capacity(padded);
        e.extend_from_slice(&(if last { 0 } else { padded as u32 }).to_le_bytes());
        e.extend_from_slice(&(units.len() as u32).to_le_bytes());
        e.extend_from_slice(&5u64.to_le_bytes());
        e.extend_from_slice(&8u64.to_le_bytes());
        e.extend_from_slice(&units);
        if !last {
            e.resize(padded, 0);
        }
        e
    }

    #[test]
    fn a_stream_name_that_is_not_one_name_is_refused() {
        let mut ok = entry("::$DATA", false);
        ok.extend(entry(":tag:$DATA", true));
        let got = stream_list(&ok, "f.txt").unwrap();
        assert_eq!(got.len(), 2);
        for bad in [":..\\..\\x:$DATA", ":a/b:$DATA", ":..:$DATA"] {
            let mut list = entry("::$DATA", false);
            list.extend(entry(bad, true));
            match stream_list(&list, "f.txt") {
                Err(crate::Error::UnsafeName { dir, name, .. }) => {
                    assert_eq!(dir, "f.txt");
                    assert_eq!(name, bad);
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }
}
