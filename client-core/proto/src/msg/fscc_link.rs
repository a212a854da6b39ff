//! MS-FSCC 2.4.21.2 FileLinkInformation for SMB2 SET_INFO: make a hard link.

use bytes::{BufMut, BytesMut};

use crate::codec::{put_utf16le, utf16le_len};
use crate::msg::fscc::{FileInformationClass, SetFileInfo};

/// MS-FSCC 2.4.21.2 FILE_LINK_INFORMATION_TYPE_2 (class 11), sent with SET_INFO on an open of
/// the existing file: ReplaceIfExists, 7 reserved bytes, RootDirectory (MUST be 0 over SMB2),
/// FileNameLength, FileName.
///
/// `file_name` is the new name's full path relative to the share root, with backslashes and
/// no leading backslash (e.g. `dir\alias.txt`), as for FileRenameInformation (MS-SMB2
/// 3.3.5.21.1 has the server resolve it against the share, not the open's directory).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct FileLinkInformation {
    /// ReplaceIfExists: replace an existing file of that name.
    pub replace_if_exists: bool,
    /// FileName: the new link's path relative to the share root.
    pub file_name: String,
}

impl SetFileInfo for FileLinkInformation {
    const CLASS: FileInformationClass = FileInformationClass::LINK;
    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(u8::from(self.replace_if_exists));
        out.put_bytes(0, 7); // Reserved
        out.put_u64_le(0); // RootDirectory: 0 for SMB2 (MS-FSCC 2.4.21.2)
        out.put_u32_le(utf16le_len(&self.file_name) as u32);
        put_utf16le(out, &self.file_name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes() {
        let info = FileLinkInformation {
            replace_if_exists: true,
            file_name: "d\\ab".into(),
        };
        let mut out = BytesMut::new();
        info.encode(&mut out);
        assert_eq!(
            hex::encode(&out),
            concat!(
                "01",
                "00000000000000",   // ReplaceIfExists, Reserved
                "0000000000000000", // RootDirectory
                "08000000",         // FileNameLength: 4 UTF-16 code units
                "64005c0061006200", // "d\ab"
            )
        );
        assert_eq!(FileLinkInformation::CLASS, FileInformationClass(11));
    }
}
