//! File system information classes (MS-FSCC 2.5) read with QUERY_INFO: sizes and free space,
//! and what the file system supports.

use super::classes::{FsInformationClass, QueryFsInfo};
use crate::codec::{utf16le_to_string, DecodeError, Reader};

/// MS-FSCC 2.5.8 FileFsSizeInformation (FS class 3), 24 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FileFsSizeInformation {
    /// TotalAllocationUnits.
    pub total_allocation_units: u64,
    /// AvailableAllocationUnits (for the caller, honouring quotas).
    pub available_allocation_units: u64,
    /// SectorsPerAllocationUnit.
    pub sectors_per_allocation_unit: u32,
    /// BytesPerSector.
    pub bytes_per_sector: u32,
}

impl QueryFsInfo for FileFsSizeInformation {
    const CLASS: FsInformationClass = FsInformationClass::SIZE;
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        Ok(Self {
            total_allocation_units: r.u64("FileFsSizeInformation.TotalAllocationUnits")?,
            available_allocation_units: r.u64("FileFsSizeInformation.AvailableAllocationUnits")?,
            sectors_per_allocation_unit: r.u32("FileFsSizeInformation.SectorsPerAllocationUnit")?,
            bytes_per_sector: r.u32("FileFsSizeInformation.BytesPerSector")?,
        })
    }
}

/// MS-FSCC 2.5.4 FileFsFullSizeInformation (FS class 7), 32 bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct FileFsFullSizeInformation {
    /// TotalAllocationUnits.
    pub total_allocation_units: u64,
    /// CallerAvailableAllocationUnits (honouring the caller's quota).
    pub caller_available_allocation_units: u64,
    /// ActualAvailableAllocationUnits (free on the volume).
    pub actual_available_allocation_units: u64,
    /// SectorsPerAllocationUnit.
    pub sectors_per_allocation_unit: u32,
    /// BytesPerSector.
    pub bytes_per_sector: u32,
}

impl FileFsFullSizeInformation {
    /// Bytes in one allocation unit.
    pub fn bytes_per_allocation_unit(&self) -> u64 {
        u64::from(self.sectors_per_allocation_unit) * u64::from(self.bytes_per_sector)
    }
}

impl QueryFsInfo for FileFsFullSizeInformation {
    const CLASS: FsInformationClass = FsInformationClass::FULL_SIZE;
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        Ok(Self {
            total_allocation_units: r.u64("FileFsFullSizeInformation.TotalAllocationUnits")?,
            caller_available_allocation_units: r
                .u64("FileFsFullSizeInformation.CallerAvailableAllocationUnits")?,
            actual_available_allocation_units: r
                .u64("FileFsFullSizeInformation.ActualAvailableAllocationUnits")?,
            sectors_per_allocation_unit: r
                .u32("FileFsFullSizeInformation.SectorsPerAllocationUnit")?,
            bytes_per_sector: r.u32("FileFsFullSizeInformation.BytesPerSector")?,
        })
    }
}

/// MS-FSCC 2.5.1 FileFsAttributeInformation (FS class 5).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct FileFsAttributeInformation {
    /// FileSystemAttributes (FILE_CASE_SENSITIVE_SEARCH, ... see the constants).
    pub file_system_attributes: u32,
    /// MaximumComponentNameLength: longest file name component, in characters.
    pub maximum_component_name_length: u32,
    /// FileSystemName, e.g. "NTFS".
    pub file_system_name: String,
}

impl FileFsAttributeInformation {
    /// FILE_CASE_SENSITIVE_SEARCH.
    pub const CASE_SENSITIVE_SEARCH: u32 = 0x0000_0001;
    /// FILE_CASE_PRESERVED_NAMES.
    pub const CASE_PRESERVED_NAMES: u32 = 0x0000_0002;
    /// FILE_UNICODE_ON_DISK.
    pub const UNICODE_ON_DISK: u32 = 0x0000_0004;
    /// FILE_PERSISTENT_ACLS.
    pub const PERSISTENT_ACLS: u32 = 0x0000_0008;
    /// FILE_SUPPORTS_SPARSE_FILES.
    pub const SUPPORTS_SPARSE_FILES: u32 = 0x0000_0040;
    /// FILE_SUPPORTS_REPARSE_POINTS.
    pub const SUPPORTS_REPARSE_POINTS: u32 = 0x0000_0080;
    /// FILE_SUPPORTS_OBJECT_IDS.
    pub const SUPPORTS_OBJECT_IDS: u32 = 0x0001_0000;
    /// FILE_NAMED_STREAMS.
    pub const NAMED_STREAMS: u32 = 0x0004_0000;
    /// FILE_READ_ONLY_VOLUME.
    pub const READ_ONLY_VOLUME: u32 = 0x0008_0000;
}

impl QueryFsInfo for FileFsAttributeInformation {
    const CLASS: FsInformationClass = FsInformationClass::ATTRIBUTE;
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        let file_system_attributes = r.u32("FileFsAttributeInformation.FileSystemAttributes")?;
        let maximum_component_name_length =
            r.u32("FileFsAttributeInformation.MaximumComponentNameLength")?;
        let name_length = r.u32("FileFsAttributeInformation.FileSystemNameLength")? as usize;
        let raw = r.bytes(name_length, "FileFsAttributeInformation.FileSystemName")?;
        Ok(Self {
            file_system_attributes,
            maximum_component_name_length,
            file_system_name: utf16le_to_string(raw, "FileFsAttributeInformation.FileSystemName")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::test_util::hex;

    #[test]
    fn fs_size_information() {
        let buf = hex("0000400000000000 0000100000000000 08000000 00020000");
        let info = FileFsSizeInformation::decode(&buf).unwrap();
        assert_eq!(info.total_allocation_units, 0x40_0000);
        assert_eq!(info.available_allocation_units, 0x10_0000);
        assert_eq!(info.sectors_per_allocation_unit, 8);
        assert_eq!(info.bytes_per_sector, 512);
        assert!(FileFsSizeInformation::decode(&buf[..20]).is_err());
    }

    #[test]
    fn fs_full_size_information() {
        let buf = hex("0000400000000000 0000100000000000 0000200000000000 08000000 00020000");
        let info = FileFsFullSizeInformation::decode(&buf).unwrap();
        assert_eq!(info.total_allocation_units, 0x40_0000);
        assert_eq!(info.caller_available_allocation_units, 0x10_0000);
        assert_eq!(info.actual_available_allocation_units, 0x20_0000);
        assert_eq!(info.sectors_per_allocation_unit, 8);
        assert_eq!(info.bytes_per_sector, 512);
        assert_eq!(info.bytes_per_allocation_unit(), 4096);
        assert!(FileFsFullSizeInformation::decode(&buf[..31]).is_err());
    }

    #[test]
    fn fs_attribute_information() {
        // Samba: case sensitive search | case preserved | unicode | persistent ACLs |
        // sparse | named streams ...
        let buf = hex("4f000400 ff000000 08000000 4e00540046005300");
        let info = FileFsAttributeInformation::decode(&buf).unwrap();
        assert_eq!(info.file_system_attributes, 0x0004_004f);
        assert_eq!(info.maximum_component_name_length, 255);
        assert_eq!(info.file_system_name, "NTFS");
        assert_ne!(
            info.file_system_attributes & FileFsAttributeInformation::NAMED_STREAMS,
            0
        );
        // Name longer than the buffer.
        assert!(FileFsAttributeInformation::decode(&buf[..18]).is_err());
        // Odd name length.
        let mut odd = buf.to_vec();
        odd[8] = 7;
        assert!(FileFsAttributeInformation::decode(&odd[..19]).is_err());
    }
}
