//! The names in directories: LOOKUP and FORGET, and what adds, removes or moves a name
//! (MKDIR, MKNOD, UNLINK, RMDIR, RENAME, LINK). A name that is removed or moved first loses
//! what this mount holds below it: parked handles and directory watches.

use smb3_client::{IfExists, NtStatus, OpenOptions, SpecialKind};

use super::attr::Attr;
use super::{gone_if_deleted, SmbFs};
use crate::errno::{FsError, FsResult};
use crate::inode::at_or_below;

impl SmbFs {
    /// Stat `path` and take one lookup of `(parent, name)` for the kernel.
    async fn entry(&self, parent: u64, name: &str, path: &str) -> FsResult<Attr> {
        // A node known under this name with writes or a close under way: its size and times
        // are the server's only once they are done (as for GETATTR).
        let known = self.inodes.lock().unwrap().child(parent, name);
        if let Some(ino) = known {
            self.drain_ino(ino).await;
        }
        let (m, stored, sd) = self
            .metadata_and_descriptor(path)
            .await
            .map_err(gone_if_deleted)?;
        // A case-insensitive share finds `FOO` when `foo` is there; for POSIX, and for the
        // kernel (which would take them for one file: `mv a A` says "same file", `rename(2)`
        // does nothing), they are two names, and `FOO` does not exist. The name the server
        // keeps says which it is, in the same reply. So does an 8.3 name that Samba gave a
        // name it cannot show (`TF53O1~B`): found, but not under the name asked for. A name
        // that is neither is a symlink on the server's disk that Samba followed (`follow
        // symlinks`, for a client without the POSIX extensions): the name is the target's,
        // the file is what the link shows.
        if let Some(stored) = stored {
            let kept = stored.rsplit(['\\', '/']).next().unwrap_or("");
            let asked = self.names.to_server(name);
            if !kept.is_empty()
                && kept != asked
                && (same_but_case(kept, &asked) || maybe_8dot3(&asked))
            {
                return Err(FsError::new(libc::ENOENT));
            }
        }
        let id = self.server_id(path, m.file_id);
        let ino = self.inodes.lock().unwrap().remember(parent, name, id);
        let mut attr = self.attr(ino, &m);
        super::attr::with_dacl_mode(&mut attr, &m, super::attr::dacl_mode(sd.as_ref(), &m));
        self.with_link_size(path, &m, attr).await
    }

    /// LOOKUP: the entry `name` in directory `parent`.
    pub async fn lookup(&self, parent: u64, name: &str) -> FsResult<Attr> {
        // Files unlinked while open wait under these names: gone for POSIX.
        if crate::hidden_names::is_hidden_name(name) {
            return Err(FsError::new(libc::ENOENT));
        }
        let path = self.child_of(parent, name)?;
        let found = self.entry(parent, name, &path).await;
        if found.is_ok() {
            self.keep_watching(parent);
        }
        found
    }

    /// FORGET: the kernel dropped `n` lookups of `ino`.
    pub fn forget(&self, ino: u64, n: u64) {
        self.inodes.lock().unwrap().forget(ino, n);
    }

    /// Record one lookup of `(parent, name)` (a READDIRPLUS entry); returns its node id.
    pub fn remember(&self, parent: u64, name: &str, file_id: u64) -> u64 {
        let mut inodes = self.inodes.lock().unwrap();
        let id = match inodes.child_path(parent, name) {
            Some(rel) => self.server_id(&self.on_share(&rel), file_id),
            None => file_id,
        };
        inodes.remember(parent, name, id)
    }

    /// The server file id that numbers the node of share path `path`: none (a node id of the
    /// mount's own) behind a DFS link, where ids count another share's files, perhaps another
    /// server's, and could clash with this share's.
    pub(super) fn server_id(&self, path: &str, file_id: u64) -> u64 {
        if self.share.is_behind_link(path) {
            0
        } else {
            file_id
        }
    }

    /// MKDIR with the permission bits `permissions` (umask applied; they are kept on a POSIX
    /// share only).
    pub async fn mkdir(&self, parent: u64, name: &str, permissions: u32) -> FsResult<Attr> {
        self.writable()?;
        let path = self.child_of(parent, name)?;
        self.share.create_dir_with_mode(&path, permissions).await?;
        self.entry(parent, name, &path).await
    }

    /// MKNOD: a regular file anywhere; a FIFO, socket or device node as an NFS-style reparse
    /// point (see `Share::make_special`): on a POSIX share, and elsewhere where the server
    /// keeps reparse points and `reparse=` is not `none` (EPERM otherwise, see `reparse`).
    pub async fn mknod(&self, parent: u64, name: &str, mode: u32, rdev: u32) -> FsResult<Attr> {
        self.writable()?;
        // mode_t is u16 on macOS: the casts are needed there.
        #[allow(clippy::unnecessary_cast)]
        let (fmt, reg) = (libc::S_IFMT as u32, libc::S_IFREG as u32);
        if mode & fmt != reg {
            let kind = special_kind(mode & fmt, rdev).ok_or_else(|| FsError::new(libc::EPERM))?;
            let path = self.child_of(parent, name)?;
            if self.share.is_posix() {
                self.share.make_special(&path, kind, mode & 0o7777).await?;
            } else {
                self.special_as_reparse_point(&path, kind, mode & 0o7777)
                    .await?;
            }
            return self.entry(parent, name, &path).await;
        }
        let path = self.child_of(parent, name)?;
        let opts = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode & 0o7777);
        let f = self.share.open(&path, &opts).await?;
        f.close().await?;
        self.entry(parent, name, &path).await
    }

    /// UNLINK. A read-only file is made writable first, as POSIX lets anyone who may write
    /// the directory remove it.
    pub async fn unlink(&self, parent: u64, name: &str) -> FsResult<()> {
        self.writable()?;
        let path = self.child_of(parent, name)?;
        let node = self.inodes.lock().unwrap().child(parent, name);
        self.close_parked_at(&path).await;
        if let Some(ino) = node.filter(|&ino| !self.share.is_posix() && self.open_here(ino)) {
            // Open here: moved aside to a hidden name, deleted at its last close (`silly`).
            let (hidden, hidden_path) = self.move_aside(parent, name, &path).await?;
            self.adopt(ino, parent, hidden, hidden_path).await;
            return Ok(());
        }
        match self.share.remove_file(&path).await {
            Err(e) if e.status() == Some(NtStatus::CANNOT_DELETE) => {
                self.share.set_readonly(&path, false).await?;
                self.share.remove_file(&path).await?;
            }
            r => r?,
        }
        self.inodes.lock().unwrap().unlinked(parent, name);
        if let Some(ino) = node {
            // A handle of the file parked while it was being deleted (see
            // `DeferredCloses::park`): the name is gone on the server only once it is closed.
            self.deferred.close_now(ino).await;
        }
        Ok(())
    }

    /// RMDIR.
    pub async fn rmdir(&self, parent: u64, name: &str) -> FsResult<()> {
        self.writable()?;
        let path = self.child_of(parent, name)?;
        self.close_parked_at(&path).await;
        self.end_watches_at(&path).await;
        match self.share.remove_dir(&path).await {
            Err(e)
                if e.status() == Some(NtStatus::DIRECTORY_NOT_EMPTY)
                    && !self.share.is_posix()
                    && self.remove_leftovers(&path).await =>
            {
                self.share.remove_dir(&path).await?;
            }
            r => r?,
        }
        self.inodes.lock().unwrap().unlinked(parent, name);
        Ok(())
    }

    /// The directory `path` is not empty for the server: if all it holds are hidden files
    /// this mount is not waiting on (left by a daemon that died while they were open, see
    /// `silly`), delete them, so that `rmdir` does what it would locally. Another mount's
    /// live one is only marked delete-pending (it goes with that mount's last handle, as it
    /// would anyway). Returns whether anything was deleted.
    async fn remove_leftovers(&self, path: &str) -> bool {
        let Ok(entries) = self.share.read_dir(path).await else {
            return false;
        };
        if entries.is_empty()
            || !entries
                .iter()
                .all(|e| crate::hidden_names::is_hidden_name(&e.name))
        {
            return false;
        }
        let ours: Vec<String> = self
            .sillies
            .lock()
            .unwrap()
            .values()
            .map(|s| s.path().to_string())
            .collect();
        let mut removed = false;
        for e in entries {
            let leftover = format!("{path}/{}", e.name);
            if ours.contains(&leftover) {
                return removed;
            }
            match self.share.remove_file(&leftover).await {
                Ok(()) => removed = true,
                Err(err) => {
                    tracing::debug!(leftover, error = %err, "removing a leftover hidden file")
                }
            }
        }
        removed
    }

    /// RENAME, replacing an existing target unless `noreplace`. A directory replaces an empty
    /// directory (POSIX) by removing it first, which SMB cannot do in one step.
    pub async fn rename(
        &self,
        parent: u64,
        name: &str,
        new_parent: u64,
        new_name: &str,
        noreplace: bool,
    ) -> FsResult<()> {
        self.writable()?;
        let from = self.child_of(parent, name)?;
        let to = self.child_of(new_parent, new_name)?;
        self.close_parked_at(&from).await;
        self.close_parked_at(&to).await;
        self.end_watches_at(&from).await;
        self.end_watches_at(&to).await;
        // Held until the inode table has the new name: a RELEASE of a file being renamed
        // (rsync renames its temporary file while the kernel's RELEASE of it is still on its
        // way) then sets its pending times by the name the server has at that moment.
        let writers = self.writers_under(&from);
        let mut closes_held = Vec::with_capacity(writers.len());
        for h in &writers {
            closes_held.push(h.closing.lock().await);
        }
        let if_exists = if noreplace {
            IfExists::Fail
        } else {
            IfExists::Replace
        };
        let posix = self.share.is_posix();
        let source = self.inodes.lock().unwrap().child(parent, name);
        if !posix {
            self.check_case_collision(source, &from, &to, new_name)
                .await?;
        }
        // A target open here moves aside first, to be deleted at its last close (`silly`):
        // Samba refuses to rename over a file the session holds open.
        let target = self.inodes.lock().unwrap().child(new_parent, new_name);
        let aside = match target {
            Some(t) if !posix && !noreplace && Some(t) != source && self.open_here(t) => {
                let (hidden, hidden_path) = self.move_aside(new_parent, new_name, &to).await?;
                Some((t, hidden, hidden_path))
            }
            _ => None,
        };
        let mut renamed = self.share.rename(&from, &to, if_exists).await;
        // A lookup below `from` may have started a watch there meanwhile, which the server
        // counts as an open handle below: end it and try once more.
        if matches!(&renamed, Err(e) if e.status() == Some(NtStatus::ACCESS_DENIED))
            && self.end_watches_at(&from).await > 0
        {
            renamed = self.share.rename(&from, &to, if_exists).await;
        }
        if let (Err(_), Some((_, hidden, _))) = (&renamed, &aside) {
            self.put_back(new_parent, new_name, &to, hidden).await;
        }
        match renamed {
            Ok(()) => {}
            Err(e)
                if !noreplace
                    && matches!(
                        e.status(),
                        Some(NtStatus::ACCESS_DENIED | NtStatus::OBJECT_NAME_COLLISION)
                    ) =>
            {
                let (src, dst) = (
                    self.share.metadata(&from).await?,
                    self.share.metadata(&to).await,
                );
                match dst {
                    Ok(dst) if !dst.is_dir() && !src.is_dir() => {
                        self.replace_open_target(&from, &to).await?;
                    }
                    Ok(dst) if dst.is_dir() && src.is_dir() => {
                        self.share.remove_dir(&to).await?;
                        self.share.rename(&from, &to, IfExists::Fail).await?;
                    }
                    Ok(dst) if dst.is_dir() => return Err(FsError::new(libc::EISDIR)),
                    Ok(_) if src.is_dir() => return Err(FsError::new(libc::ENOTDIR)),
                    _ => return Err(e.into()),
                }
            }
            Err(e) => return Err(e.into()),
        }
        self.inodes
            .lock()
            .unwrap()
            .renamed(parent, name, new_parent, new_name);
        drop(closes_held);
        if let Some((t, hidden, hidden_path)) = aside {
            self.adopt(t, new_parent, hidden, hidden_path).await;
        }
        Ok(())
    }

    /// On a share without the POSIX extensions: `to` may name, case aside, a file that is
    /// there under another name (`FOO` finds `foo` on a case-insensitive share). Renaming onto
    /// it would replace a file whose name is not the one asked for: EEXIST, as a create of
    /// that name gets. Unless it is the file being renamed: a case-only rename (`mv a A`).
    async fn check_case_collision(
        &self,
        source: Option<u64>,
        from: &str,
        to: &str,
        new_name: &str,
    ) -> FsResult<()> {
        let Ok((found, Some(stored))) = self.share.metadata_and_name(to).await else {
            return Ok(());
        };
        let kept = stored.rsplit(['\\', '/']).next().unwrap_or("");
        if kept.is_empty() || kept == self.names.to_server(new_name) {
            return Ok(());
        }
        let source_id = match source {
            Some(ino) if (2..(1 << 63)).contains(&ino) => ino,
            _ => self.share.metadata(from).await?.file_id,
        };
        if found.file_id == source_id && found.file_id != 0 {
            return Ok(());
        }
        Err(FsError::new(libc::EEXIST))
    }

    /// Rename the file `from` over the file `to` that this mount holds open, on a POSIX share.
    /// Samba refuses a rename over a target its own session has open (rename_internals_fsp:
    /// "Target file open", POSIX open or not), while a POSIX unlink of an open file is
    /// allowed. So the target moves aside to a hidden name, `from` takes its name, and the
    /// aside name is unlinked: the open handles keep reading the old file, as on a local file
    /// system. Should `from` fail to move, the target gets its name back: nothing is lost.
    async fn replace_open_target(&self, from: &str, to: &str) -> FsResult<()> {
        let aside = aside_name(to);
        self.share.rename(to, &aside, IfExists::Fail).await?;
        if let Err(e) = self.share.rename(from, to, IfExists::Fail).await {
            if let Err(back) = self.share.rename(&aside, to, IfExists::Fail).await {
                tracing::error!(target = to, aside, error = %back, "could not put a rename's target back");
            }
            return Err(e.into());
        }
        if let Err(e) = self.share.remove_file(&aside).await {
            tracing::warn!(aside, error = %e, "the replaced file stays under its aside name");
        }
        Ok(())
    }

    /// SYMLINK: `name` in `parent` becomes a link to `target`, stored as given: on a POSIX
    /// share as a symlink reparse point; elsewhere with `mfsymlinks` as a Minshall+French
    /// file (see `mfsymlinks`), without it as a reparse point where the server keeps them
    /// (see `reparse`; EPERM where it does not, or with `reparse=none`).
    pub async fn symlink(&self, parent: u64, name: &str, target: &str) -> FsResult<Attr> {
        self.writable()?;
        let path = self.child_of(parent, name)?;
        if self.mfsymlinks() {
            self.write_mfsymlink(&path, target).await?;
        } else if self.share.is_posix() {
            self.share.symlink(target, &path).await?;
        } else {
            self.symlink_as_reparse_point(&path, target).await?;
        }
        self.entry(parent, name, &path).await
    }

    /// READLINK: the target of the link `ino`, as the server keeps it (a Windows absolute
    /// one as `reparse::shown_target` shows it). With `mfsymlinks`, a link that is no
    /// Minshall+French file is a reparse point.
    pub async fn readlink(&self, ino: u64) -> FsResult<String> {
        let path = self.path_of(ino)?;
        if self.mfsymlinks() {
            if let Ok(Some(target)) = self.read_mfsymlink(&path).await {
                return Ok(target);
            }
        }
        let target = self.retry(|| self.share.read_link(&path)).await?;
        Ok(super::reparse::shown_target(&target))
    }

    /// LINK: a new name for the file `ino`.
    pub async fn link(&self, ino: u64, new_parent: u64, new_name: &str) -> FsResult<Attr> {
        self.writable()?;
        let existing = self.path_of(ino)?;
        let new = self.child_of(new_parent, new_name)?;
        self.share
            .hard_link(&existing, &new, IfExists::Fail)
            .await?;
        self.entry(new_parent, new_name, &new).await
    }

    /// Close the parked handles of what a rename or delete of `path` touches: the node itself
    /// and, for a directory, every node below it (Samba refuses to rename a directory with
    /// open files below it, and a file deleted while a handle is open stays until it closes).
    async fn close_parked_at(&self, path: &str) {
        if self.deferred.count() == 0 {
            return;
        }
        self.deferred
            .close_where(|ino| self.path_of(ino).is_ok_and(|p| at_or_below(&p, path)))
            .await;
    }

    /// End the directory watches at and below `path`, closing their directories, before
    /// removing or renaming it (see `dir_watch`'s module notes); returns how many ended.
    async fn end_watches_at(&self, path: &str) -> usize {
        // Share paths on both sides: with the mounted directory's prefix, and the names as
        // the server has them (see `crate::sfm`).
        self.watches
            .end_at_or_below(path, |dir| self.path_of(dir).ok())
            .await
    }
}

/// Whether two names differ in case only, as a case-insensitive server compares them.
fn same_but_case(a: &str, b: &str) -> bool {
    a.chars()
        .flat_map(char::to_lowercase)
        .eq(b.chars().flat_map(char::to_lowercase))
}

/// Whether `name` may be an 8.3 name a server made for a long one (Samba's `mangled names`,
/// Windows' short names; matched in any case): at most eight characters with a `~`, an
/// extension of at most three.
fn maybe_8dot3(name: &str) -> bool {
    let (base, ext) = name.rsplit_once('.').unwrap_or((name, ""));
    base.contains('~') && base.chars().count() <= 8 && ext.chars().count() <= 3
}

/// A hidden name beside `path` for a file about to be replaced (one listings do not show,
/// see `silly`), unique enough that two mounts or two renames do not meet.
fn aside_name(path: &str) -> String {
    let hidden = crate::hidden_names::hidden_name();
    match path.rfind('/') {
        Some(i) => format!("{}/{hidden}", &path[..i]),
        None => hidden,
    }
}

/// What `mknod(2)` asks for, as the library makes it: `fmt` the `S_IFMT` bits, `rdev` the
/// device number (Linux's encoding: major in bits 8-19 and 32-43, minor in 0-7 and 20-31).
fn special_kind(fmt: u32, rdev: u32) -> Option<SpecialKind> {
    // mode_t is u16 on macOS: the casts are needed there.
    #[allow(clippy::unnecessary_cast)]
    let (fifo, sock, chr, blk) = (
        libc::S_IFIFO as u32,
        libc::S_IFSOCK as u32,
        libc::S_IFCHR as u32,
        libc::S_IFBLK as u32,
    );
    let (major, minor) = (
        (rdev >> 8) & 0xfff,
        (rdev & 0xff) | ((rdev >> 12) & 0xfff00),
    );
    match fmt {
        f if f == fifo => Some(SpecialKind::Fifo),
        f if f == sock => Some(SpecialKind::Socket),
        f if f == chr => Some(SpecialKind::CharDevice { major, minor }),
        f if f == blk => Some(SpecialKind::BlockDevice { major, minor }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_refuses_another_case_and_short_names_only() {
        assert!(same_but_case("foo.TXT", "FOO.txt"));
        assert!(same_but_case("Ärger", "äRGER"));
        assert!(!same_but_case("data.txt", "on-disk"));
        for short in ["TF53O1~B", "PROGRA~1", "LONGNA~1.TXT", "tf53o1~b", "A~1.C"] {
            assert!(maybe_8dot3(short), "{short}");
        }
        for long in [
            "on-disk",
            "name~with~long.base",
            "ABCDEFGHI~1",
            "A~1.HTML",
            "plain",
        ] {
            assert!(!maybe_8dot3(long), "{long}");
        }
    }
}
