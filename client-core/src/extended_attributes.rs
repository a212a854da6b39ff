//! Extended attributes (EAs) of a file or directory: name and value pairs the server keeps
//! beside the data (QUERY_INFO and SET_INFO of FileFullEaInformation, MS-FSCC 2.4.15). Samba
//! stores each as the extended attribute `user.NAME` of the file on its disk (and hides its
//! own: `user.DOSATTRIB`, `user.SAMBA_PAI`, streams), which is why a mount shows them in the
//! `user.` namespace, as the Linux kernel client does.
//!
//! Names are 8-bit strings on the wire. Here each byte is the `char` of that code point (ASCII
//! as it is, anything above as Latin-1), both ways, so whatever bytes a name has survive a
//! round trip. Servers compare names without regard to case (Windows keeps them upper-case;
//! Samba as given, matching case-insensitively). A value is 1 to 65,535 bytes: an empty one
//! would mean "remove" on the wire, so it is refused rather than silently removing.
//!
//! Samba answers the list of all EAs whatever names are asked for (its QUERY_INFO ignores the
//! FILE_GET_EA_INFORMATION filter), so one EA is read by listing and picking.

use bytes::Bytes;
use smb3_proto::msg::create::AccessMask;
use smb3_proto::msg::fscc::FileInformationClass;
use smb3_proto::msg::fscc_ea::{EaEncodeError, FileFullEaInformation, FullEa, FILE_NEED_EA};
pub use smb3_proto::msg::fscc_ea::{MAX_EA_NAME_LEN, MAX_EA_VALUE_LEN};
use smb3_proto::msg::query_info::QueryInfoRequest;
use smb3_proto::msg::set_info::SetInfoRequest;
use smb3_proto::msg::FileId;
use smb3_proto::{Command, NtStatus};

use crate::error::{decode, Error, Result};
use crate::file::File;
use crate::info_query::{query_growing, TOO_SMALL};
use crate::share::Share;

/// One extended attribute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtendedAttribute {
    /// Its name (8-bit: see the module's documentation).
    pub name: String,
    /// Its value, 1 to 65,535 bytes.
    pub value: Bytes,
    /// FILE_NEED_EA: the file is not to be understood without it (a Windows flag; Samba
    /// never sets it).
    pub needed: bool,
}

/// First output buffer: the most a Linux file system keeps per file (64 KiB of xattrs), one
/// credit. Bigger lists ask again up to the server's MaxTransactSize.
const FIRST_BUFFER: u32 = 64 * 1024;

/// The wire bytes of `name`, each `char` one byte; `None` when a char is above U+00FF.
fn name_bytes(name: &str) -> Option<Vec<u8>> {
    name.chars().map(|c| u8::try_from(c).ok()).collect()
}

/// The name as a `String`, each byte the `char` of its code point.
fn name_string(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// The SET_INFO body that sets `name` to `value` (empty: removes it), checked before sending.
fn one_ea(name: &str, value: Bytes) -> Result<FileFullEaInformation> {
    let name = name_bytes(name).ok_or(Error::ApiMisuse(
        "extended attribute names are 8-bit (no char above U+00FF)",
    ))?;
    FileFullEaInformation::new(vec![FullEa {
        flags: 0,
        name,
        value,
    }])
    .map_err(|e| match e {
        EaEncodeError::BadName => {
            Error::ApiMisuse("an extended attribute name is 1-255 bytes without NUL")
        }
        EaEncodeError::ValueTooLong => {
            Error::ApiMisuse("an extended attribute value holds at most 65535 bytes")
        }
    })
}

fn checked_value(value: Bytes) -> Result<Bytes> {
    if value.is_empty() {
        return Err(Error::ApiMisuse(
            "an extended attribute value cannot be empty (SMB removes an EA set to nothing)",
        ));
    }
    if value.len() > MAX_EA_VALUE_LEN {
        return Err(Error::ApiMisuse(
            "an extended attribute value holds at most 65535 bytes",
        ));
    }
    Ok(value)
}

/// The EAs in a FileFullEaInformation answer.
fn ea_list(output: &[u8]) -> Result<Vec<ExtendedAttribute>> {
    let list = decode(Command::QUERY_INFO, FileFullEaInformation::decode(output))?;
    Ok(list
        .entries
        .into_iter()
        .map(|e| ExtendedAttribute {
            name: name_string(&e.name),
            value: e.value,
            needed: e.flags & FILE_NEED_EA != 0,
        })
        .collect())
}

/// The EA named `name` (without regard to ASCII case, as servers compare them) in `list`.
fn find(list: Vec<ExtendedAttribute>, name: &str) -> Option<ExtendedAttribute> {
    list.into_iter()
        .find(|ea| ea.name.eq_ignore_ascii_case(name))
}

impl Share {
    /// The extended attributes of the file or directory `path`, in the server's order; none
    /// is an empty list. A share that keeps none answers EAS_NOT_SUPPORTED (ENOTSUP).
    pub async fn extended_attributes(&self, path: &str) -> Result<Vec<ExtendedAttribute>> {
        self.across_links(path, |s: Share, p: String| async move {
            s.extended_attributes_here(&p).await
        })
        .await
    }

    /// The value of the extended attribute `name` of `path`, `None` when it has none of that
    /// name.
    pub async fn extended_attribute(&self, path: &str, name: &str) -> Result<Option<Bytes>> {
        Ok(find(self.extended_attributes(path).await?, name).map(|ea| ea.value))
    }

    /// Set the extended attribute `name` of `path` to `value` (1 to 65,535 bytes), creating
    /// or replacing it.
    pub async fn set_extended_attribute(&self, path: &str, name: &str, value: Bytes) -> Result<()> {
        let body = one_ea(name, checked_value(value)?)?;
        self.across_links(path, |s: Share, p: String| {
            let body = body.clone();
            async move { s.set_eas_here(&p, body).await }
        })
        .await
    }

    /// Remove the extended attribute `name` of `path`. Removing one that is not there
    /// succeeds (as it does on Samba and Windows): ask first when the difference matters.
    pub async fn remove_extended_attribute(&self, path: &str, name: &str) -> Result<()> {
        let body = one_ea(name, Bytes::new())?;
        self.across_links(path, |s: Share, p: String| {
            let body = body.clone();
            async move { s.set_eas_here(&p, body).await }
        })
        .await
    }

    async fn extended_attributes_here(&self, path: &str) -> Result<Vec<ExtendedAttribute>> {
        let max = self.tree.core.negotiated.max_transact;
        let output = self
            .on_path(
                path,
                AccessMask::FILE_READ_EA | AccessMask::SYNCHRONIZE,
                |id| async move {
                    query_growing(FIRST_BUFFER, max, move |len| async move {
                        self.tree
                            .core
                            .send(&ea_query(id, len), self.tree.call().allowing(TOO_SMALL))
                            .await
                    })
                    .await
                    .map(Some)
                    .or_else(no_eas)
                },
            )
            .await?;
        output.map_or(Ok(Vec::new()), |o| ea_list(&o))
    }

    async fn set_eas_here(&self, path: &str, body: FileFullEaInformation) -> Result<()> {
        self.on_path(
            path,
            AccessMask::FILE_WRITE_EA | AccessMask::SYNCHRONIZE,
            |id| async move {
                self.tree
                    .core
                    .send(&SetInfoRequest::file_info(id, &body), self.tree.call())
                    .await
                    .map(drop)
            },
        )
        .await
    }
}

/// QUERY_INFO of every EA, from the first (RESTART_SCAN).
fn ea_query(id: FileId, len: u32) -> QueryInfoRequest {
    let mut req = QueryInfoRequest::file(id, FileInformationClass::FULL_EA, len);
    req.flags = QueryInfoRequest::RESTART_SCAN;
    req
}

/// NO_EAS_ON_FILE is an empty list, not an error.
fn no_eas(e: Error) -> Result<Option<Bytes>> {
    match e.status() {
        Some(NtStatus::NO_EAS_ON_FILE) => Ok(None),
        _ => Err(e),
    }
}

impl File {
    /// The extended attributes of this file (see [`Share::extended_attributes`]); the handle
    /// needs FILE_READ_EA (any open for reading has it).
    pub async fn extended_attributes(&self) -> Result<Vec<ExtendedAttribute>> {
        let max = self.core().negotiated.max_transact;
        let output = query_growing(FIRST_BUFFER, max, |len| async move {
            self.core()
                .send(
                    &ea_query(self.file_id(), len),
                    self.on_open().allowing(TOO_SMALL),
                )
                .await
                .map_err(|e| self.err(e))
        })
        .await
        .map(Some)
        .or_else(no_eas)?;
        output.map_or(Ok(Vec::new()), |o| ea_list(&o))
    }

    /// Set the extended attribute `name` of this file to `value` (1 to 65,535 bytes); the
    /// handle needs FILE_WRITE_EA (any open for writing has it).
    pub async fn set_extended_attribute(&self, name: &str, value: Bytes) -> Result<()> {
        self.set_file_info(&one_ea(name, checked_value(value)?)?)
            .await
    }

    /// Remove the extended attribute `name` of this file (succeeds when there is none).
    pub async fn remove_extended_attribute(&self, name: &str) -> Result<()> {
        self.set_file_info(&one_ea(name, Bytes::new())?).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_byte_for_byte() {
        let raw: Vec<u8> = (1..=255).collect();
        let s = name_string(&raw);
        assert_eq!(name_bytes(&s).unwrap(), raw);
        assert_eq!(name_bytes("user.tag").unwrap(), b"user.tag");
        assert!(name_bytes("€").is_none());
    }

    #[test]
    fn what_cannot_be_sent_is_refused_here() {
        assert!(one_ea("€", Bytes::from_static(b"v")).is_err());
        assert!(one_ea("", Bytes::from_static(b"v")).is_err());
        assert!(one_ea(&"n".repeat(256), Bytes::from_static(b"v")).is_err());
        assert!(checked_value(Bytes::new()).is_err());
        assert!(checked_value(Bytes::from(vec![0; 65_536])).is_err());
        assert!(checked_value(Bytes::from(vec![0; 65_535])).is_ok());
    }

    #[test]
    fn a_name_is_found_whatever_its_case() {
        let list = vec![ExtendedAttribute {
            name: "Colour".into(),
            value: Bytes::from_static(b"red"),
            needed: false,
        }];
        assert_eq!(find(list.clone(), "COLOUR").unwrap().value, "red");
        assert!(find(list, "color").is_none());
    }
}
