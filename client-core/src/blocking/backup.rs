//! What backup software needs beyond data, in the blocking facade: times and attributes,
//! hard links, named streams, security descriptors, sparse ranges, byte-range locks and
//! server-side copies. Each call runs its async twin on the client's runtime and waits.

use bytes::Bytes;

use super::{File, Share};
use crate::error::Result;
use crate::{
    AllocatedRange, DosAttributes, FileSecurity, FileTimes, IfExists, IfLocked, LockKind,
    SecurityDescriptor, SecurityParts, StreamInfo,
};

impl Share {
    /// Set times of `path`; see [`crate::Share::set_times`].
    pub fn set_times(&self, path: &str, times: &FileTimes) -> Result<()> {
        let (share, path, times) = (self.inner.clone(), path.to_string(), *times);
        self.rt
            .run(async move { share.set_times(&path, &times).await })?
    }

    /// Set the DOS attributes of `path`; see [`crate::Share::set_attributes`].
    pub fn set_attributes(&self, path: &str, attributes: DosAttributes) -> Result<()> {
        let (share, path) = (self.inner.clone(), path.to_string());
        self.rt
            .run(async move { share.set_attributes(&path, attributes).await })?
    }

    /// Set times and DOS attributes of `path` at once; see
    /// [`crate::Share::set_times_and_attributes`].
    pub fn set_times_and_attributes(
        &self,
        path: &str,
        times: &FileTimes,
        attributes: DosAttributes,
    ) -> Result<()> {
        let (share, path, times) = (self.inner.clone(), path.to_string(), *times);
        self.rt.run(async move {
            share
                .set_times_and_attributes(&path, &times, attributes)
                .await
        })?
    }

    /// Make `new` another name of the file `existing`; see [`crate::Share::hard_link`].
    pub fn hard_link(&self, existing: &str, new: &str, if_exists: IfExists) -> Result<()> {
        let share = self.inner.clone();
        let (existing, new) = (existing.to_string(), new.to_string());
        self.rt
            .run(async move { share.hard_link(&existing, &new, if_exists).await })?
    }

    /// The data streams of `path`; see [`crate::Share::streams`].
    pub fn streams(&self, path: &str) -> Result<Vec<StreamInfo>> {
        let (share, path) = (self.inner.clone(), path.to_string());
        self.rt.run(async move { share.streams(&path).await })?
    }

    /// The `parts` of the security descriptor of `path`; see
    /// [`crate::Share::security_descriptor`].
    pub fn security_descriptor(&self, path: &str, parts: SecurityParts) -> Result<FileSecurity> {
        let (share, path) = (self.inner.clone(), path.to_string());
        self.rt
            .run(async move { share.security_descriptor(&path, parts).await })?
    }

    /// Set the `parts` of the security descriptor of `path`; see
    /// [`crate::Share::set_security_descriptor`].
    pub fn set_security_descriptor(
        &self,
        path: &str,
        descriptor: &SecurityDescriptor,
        parts: SecurityParts,
    ) -> Result<()> {
        let (share, path, descriptor) = (self.inner.clone(), path.to_string(), descriptor.clone());
        self.rt.run(async move {
            share
                .set_security_descriptor(&path, &descriptor, parts)
                .await
        })?
    }

    /// Set the `parts` of the security descriptor of `path` from self-relative bytes; see
    /// [`crate::Share::set_security_descriptor_raw`].
    pub fn set_security_descriptor_raw(
        &self,
        path: &str,
        raw: Bytes,
        parts: SecurityParts,
    ) -> Result<()> {
        let (share, path) = (self.inner.clone(), path.to_string());
        self.rt
            .run(async move { share.set_security_descriptor_raw(&path, raw, parts).await })?
    }

    /// Copy the file `from` of this share to `to` on `dest` inside the server; see
    /// [`crate::Share::copy_file_on_server`]. Returns the bytes copied.
    pub fn copy_file_on_server(&self, from: &str, dest: &Share, to: &str) -> Result<u64> {
        let (share, dest) = (self.inner.clone(), dest.inner.clone());
        let (from, to) = (from.to_string(), to.to_string());
        self.rt
            .run(async move { share.copy_file_on_server(&from, &dest, &to).await })?
    }
}

impl File {
    /// Set this file's times through its handle; see [`crate::File::set_times`].
    pub fn set_times(&self, times: &FileTimes) -> Result<()> {
        let (file, times) = (self.file()?, *times);
        self.rt.run(async move { file.set_times(&times).await })?
    }

    /// Take a byte-range lock; see [`crate::File::lock`].
    pub fn lock(&self, offset: u64, len: u64, kind: LockKind, if_locked: IfLocked) -> Result<()> {
        let file = self.file()?;
        self.rt
            .run(async move { file.lock(offset, len, kind, if_locked).await })?
    }

    /// Release a byte-range lock; see [`crate::File::unlock`].
    pub fn unlock(&self, offset: u64, len: u64) -> Result<()> {
        let file = self.file()?;
        self.rt.run(async move { file.unlock(offset, len).await })?
    }

    /// This file's data streams; see [`crate::File::streams`].
    pub fn streams(&self) -> Result<Vec<StreamInfo>> {
        let file = self.file()?;
        self.rt.run(async move { file.streams().await })?
    }

    /// The `parts` of this file's security descriptor; see
    /// [`crate::File::security_descriptor`].
    pub fn security_descriptor(&self, parts: SecurityParts) -> Result<FileSecurity> {
        let file = self.file()?;
        self.rt
            .run(async move { file.security_descriptor(parts).await })?
    }

    /// Set the `parts` of this file's security descriptor; see
    /// [`crate::File::set_security_descriptor`].
    pub fn set_security_descriptor(
        &self,
        descriptor: &SecurityDescriptor,
        parts: SecurityParts,
    ) -> Result<()> {
        let (file, descriptor) = (self.file()?, descriptor.clone());
        self.rt
            .run(async move { file.set_security_descriptor(&descriptor, parts).await })?
    }

    /// Mark the file sparse or not; see [`crate::File::set_sparse`].
    pub fn set_sparse(&self, sparse: bool) -> Result<()> {
        let file = self.file()?;
        self.rt.run(async move { file.set_sparse(sparse).await })?
    }

    /// The ranges of `offset..offset + len` that hold data; see
    /// [`crate::File::allocated_ranges`].
    pub fn allocated_ranges(&self, offset: u64, len: u64) -> Result<Vec<AllocatedRange>> {
        let file = self.file()?;
        self.rt
            .run(async move { file.allocated_ranges(offset, len).await })?
    }

    /// Copy `len` bytes of `source` at `source_offset` to this file at `offset` inside the
    /// server; see [`crate::File::copy_range_from`]. Returns the bytes copied.
    pub fn copy_range_from(
        &mut self,
        source: &File,
        source_offset: u64,
        offset: u64,
        len: u64,
    ) -> Result<u64> {
        self.ahead = Bytes::new();
        let (file, source) = (self.file()?, source.file()?);
        self.rt.run(async move {
            file.copy_range_from(&source, source_offset, offset, len)
                .await
        })?
    }
}
