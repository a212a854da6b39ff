//! Unix modes kept in a file's DACL on a share without the SMB3 POSIX extensions, after the
//! Linux kernel client's `modefromsid` (fs/smb/client/cifsacl.c): the mode is the last
//! sub-authority of an ACE naming S-1-5-88-3-MODE, the SID family Windows' NFS server uses for
//! modes (the same one a chmod on a POSIX share sends, see `posix_modes`).
//!
//! Writing a mode (a chmod) rewrites the DACL: the mode ACE, and allow / deny ACEs for the
//! file's owner, its group and Everyone derived from the rwx bits, so the server's own access
//! checks agree with the mode shown. The kernel writes an "Authenticated Users: full control"
//! ACE beside its mode ACE instead, which leaves every check to the client; here the server
//! refuses what the mode refuses, for every client. What the kernel keeps of the old DACL is
//! kept: ACEs for other trustees (extra users and groups, CREATOR OWNER) and inherited ACEs;
//! the ones for the owner, the group, Everyone, Authenticated Users and any earlier mode ACE
//! are replaced, since they would grant more (or less) than the mode. Those that also pass on
//! to new children (OBJECT_INHERIT / CONTAINER_INHERIT) stay for the children only
//! (INHERIT_ONLY added), so a directory's chmod does not change what is made in it later, as
//! on a POSIX file system.
//!
//! Samba with acl_xattr or acl_tdb (seen with 4.17; the check is in today's
//! source3/modules/vfs_acl_common.c) stores no DACL that names an S-1-5-88 SID: it takes
//! such a set for a macOS chmod request and answers success without storing anything
//! (`fset_nt_acl_common`, `security_descriptor_with_ms_nfs`). A chmod therefore
//! reads the DACL back, and when the mode ACE is not there writes the derived ACEs alone;
//! reading then recognises a DACL whose ACEs for owner, group and Everyone are exactly what
//! this mapping writes for some mode, and takes the rwx bits (and a directory's sticky bit)
//! from them. setuid and setgid cannot be kept that way.
//!
//! Everything read is untrusted: the mode ACE is the first one, allow or deny (the kernel
//! writes it as a deny of nothing), of exactly three sub-authorities, that applies to the
//! file itself (an INHERIT_ONLY ACE speaks of children only); bits above 0o7777 are dropped.

use futures_util::stream::{self, StreamExt};
use smb3_proto::msg::close::CloseRequest;
use smb3_proto::msg::create::{AccessMask, CreateDisposition, CreateOptions, CreateRequest};
use smb3_proto::msg::fscc::FileAllInformation;
use smb3_proto::msg::query_info::{QueryInfoRequest, QueryInfoResponse};
use smb3_proto::msg::security_descriptor::{
    ace_flags, control, Ace, AceType, Acl, SecurityDescriptor, Sid,
};
use smb3_proto::msg::{FileId, RequestBody};
use smb3_proto::{Command, NtStatus};

use crate::error::ProtocolError;
use crate::error::{decode, Error, Result};
use crate::file_security::{encode, SecurityParts};
use crate::info_query::{FIRST_BUFFER, TOO_SMALL};
use crate::metadata::{metadata_from_reply, Metadata};
use crate::names::wire_path;
use crate::share::Share;
use crate::tree::leaves_reparse_point_to_client;

/// The rights every class keeps whatever its bits: reading the attributes and the
/// descriptor (`stat` needs no permission on the file in POSIX).
const MINIMUM: u32 =
    AccessMask::FILE_READ_ATTRIBUTES | AccessMask::READ_CONTROL | AccessMask::SYNCHRONIZE;

/// What the owner may do whatever the bits, as in POSIX: change the mode (WRITE_DAC), the
/// times and attributes, offer the file to a group (WRITE_OWNER), and delete or rename it
/// (DELETE; in a sticky directory, where others lose FILE_DELETE_CHILD, this is what lets
/// each owner remove their own files).
const OWNER_ALWAYS: u32 = AccessMask::WRITE_DAC
    | AccessMask::WRITE_OWNER
    | AccessMask::DELETE
    | AccessMask::FILE_WRITE_ATTRIBUTES;

/// How many descriptors [`Share::mode_descriptors`] asks for at once.
const IN_FLIGHT: usize = 32;

fn everyone() -> Sid {
    Sid::new(1, &[0]).expect("S-1-1-0 is valid")
}

fn authenticated_users() -> Sid {
    Sid::new(5, &[11]).expect("S-1-5-11 is valid")
}

/// The SID that carries `mode`: S-1-5-88-3-MODE.
pub(crate) fn mode_sid(mode: u32) -> Sid {
    Sid::new(5, &[88, 3, mode & 0o7777]).expect("three sub-authorities under authority 5")
}

/// The mode an S-1-5-88-3-MODE SID carries (exactly three sub-authorities), bits above
/// 0o7777 dropped.
fn mode_of_sid(sid: &Sid) -> Option<u32> {
    match (sid.authority(), sid.sub_authorities()) {
        (5, [88, 3, mode]) => Some(mode & 0o7777),
        _ => None,
    }
}

/// Whether `sid` is of the mode family (S-1-5-88-3-…, however many sub-authorities): a
/// chmod replaces every such ACE.
fn is_mode_family(sid: &Sid) -> bool {
    sid.authority() == 5 && sid.sub_authorities().starts_with(&[88, 3])
}

/// Whether `ace` is an allow or deny ACE that applies to the object itself (MS-DTYP
/// 2.4.4.1: INHERIT_ONLY means it is only passed on to children).
fn applies_here(ace: &Ace) -> bool {
    matches!(
        ace.ace_type,
        AceType::ACCESS_ALLOWED | AceType::ACCESS_DENIED
    ) && ace.flags & ace_flags::INHERIT_ONLY == 0
}

/// The mode a DACL keeps in an S-1-5-88-3-MODE ACE: the first that applies to the object,
/// allow or deny, whatever its mask (the kernel writes a deny of nothing); `None` without one.
pub fn mode_in_dacl(dacl: &Acl) -> Option<u32> {
    dacl.aces
        .iter()
        .filter(|a| applies_here(a))
        .find_map(|a| a.sid.as_ref().and_then(mode_of_sid))
}

/// The mode `sd` keeps for a file (`directory` false) or directory: from its mode ACE, else
/// from ACEs for owner, group and Everyone that are exactly those [`dacl_with_mode`] derives
/// for some mode (a server that would not store the mode ACE, see the module's text);
/// `None` when neither is there.
pub fn mode_from_descriptor(sd: &SecurityDescriptor, directory: bool) -> Option<u32> {
    let dacl = sd.dacl.as_ref()?;
    mode_in_dacl(dacl).or_else(|| mode_in_derived_aces(sd, dacl, directory))
}

/// The rights `bits` (rwx, 0-7) give; a directory's w includes FILE_DELETE_CHILD unless
/// `delete_child` is false (sticky, for group and others).
fn rights(bits: u32, directory: bool, delete_child: bool) -> u32 {
    let mut r = 0;
    if bits & 4 != 0 {
        r |= AccessMask::FILE_READ_DATA | AccessMask::FILE_READ_EA;
    }
    if bits & 2 != 0 {
        r |= AccessMask::FILE_WRITE_DATA
            | AccessMask::FILE_APPEND_DATA
            | AccessMask::FILE_WRITE_EA
            | AccessMask::FILE_WRITE_ATTRIBUTES;
        if directory && delete_child {
            r |= AccessMask::FILE_DELETE_CHILD;
        }
    }
    if bits & 1 != 0 {
        r |= AccessMask::FILE_EXECUTE;
    }
    r
}

/// The ACEs for owner, group and Everyone that grant what `mode` grants, in the order the
/// access check must meet them (MS-DTYP 2.5.3.2: the first ACE to decide a right wins):
/// a deny for the owner of what group or others may but the owner may not, the owner's
/// allow, a deny for the group of what others may but the group may not (after the owner's
/// allow, so it takes nothing from an owner who is in the group), the group's allow,
/// Everyone's allow. A group that is the owner gets the owner's ACEs only, with the bits both
/// classes have (as the kernel does).
fn derived_aces(mode: u32, directory: bool, owner: Option<&Sid>, group: Option<&Sid>) -> Vec<Ace> {
    let same = owner.is_some() && owner == group;
    let (user, grp) = if same {
        let both = (mode >> 6) & (mode >> 3) & 7;
        (both, both)
    } else {
        ((mode >> 6) & 7, (mode >> 3) & 7)
    };
    let other = mode & 7;
    let sticky = directory && mode & 0o1000 != 0;
    let mut aces = Vec::new();
    if let Some(o) = owner {
        let deny = rights(!user & (grp | other) & 7, directory, true) & !(MINIMUM | OWNER_ALWAYS);
        if deny != 0 {
            aces.push(Ace::deny(o.clone(), deny, 0));
        }
        let allow = rights(user, directory, true) | MINIMUM | OWNER_ALWAYS;
        aces.push(Ace::allow(o.clone(), allow, 0));
    }
    if let Some(g) = group.filter(|_| !same) {
        let deny = rights(!grp & other & 7, directory, true) & !MINIMUM;
        if deny != 0 {
            aces.push(Ace::deny(g.clone(), deny, 0));
        }
        aces.push(Ace::allow(
            g.clone(),
            rights(grp, directory, !sticky) | MINIMUM,
            0,
        ));
    }
    aces.push(Ace::allow(
        everyone(),
        rights(other, directory, !sticky) | MINIMUM,
        0,
    ));
    aces
}

/// Whether a chmod replaces `ace` (see the module's text).
fn replaced(ace: &Ace, owner: Option<&Sid>, group: Option<&Sid>) -> bool {
    let Some(sid) = &ace.sid else {
        return false;
    };
    is_mode_family(sid)
        || Some(sid) == owner
        || Some(sid) == group
        || *sid == everyone()
        || *sid == authenticated_users()
}

/// The DACL a chmod to `mode` writes over `old` (the file's DACL, `None` for none or a NULL
/// DACL), for a file or directory owned by `owner` with group `group`: the ACEs of `old` that
/// stay (see the module's text) with the derived ones after the explicit and before the
/// inherited ones, led by the mode ACE when `with_mode_ace`.
pub(crate) fn dacl_with_mode(
    old: Option<&Acl>,
    mode: u32,
    directory: bool,
    owner: Option<&Sid>,
    group: Option<&Sid>,
    with_mode_ace: bool,
) -> Acl {
    let mut explicit = Vec::new();
    let mut inherited = Vec::new();
    for ace in old.map_or(&[][..], |a| &a.aces[..]) {
        let mut ace = ace.clone();
        if replaced(&ace, owner, group) {
            let passes_on = ace.flags & (ace_flags::OBJECT_INHERIT | ace_flags::CONTAINER_INHERIT);
            let mode_ace = ace.sid.as_ref().is_some_and(is_mode_family);
            if !directory || passes_on == 0 || mode_ace {
                continue;
            }
            ace.flags |= ace_flags::INHERIT_ONLY;
        }
        if ace.flags & ace_flags::INHERITED != 0 {
            inherited.push(ace);
        } else {
            explicit.push(ace);
        }
    }
    let mut aces = explicit;
    if with_mode_ace {
        // A deny of nothing, as the kernel writes it: inert in every access check, and first
        // so the ACL stays in canonical order (denies before allows).
        aces.push(Ace::deny(mode_sid(mode), 0, 0));
    }
    aces.extend(derived_aces(mode, directory, owner, group));
    aces.extend(inherited);
    Acl {
        revision: old.map_or(smb3_proto::msg::security_descriptor::ACL_REVISION, |a| {
            a.revision
        }),
        aces,
    }
}

/// The mode whose derived ACEs (without a mode ACE) are exactly the explicit ACEs of `dacl`
/// that name the owner, the group or Everyone, compared as a set (a server may reorder).
fn mode_in_derived_aces(sd: &SecurityDescriptor, dacl: &Acl, directory: bool) -> Option<u32> {
    let (owner, group) = (sd.owner.as_ref()?, sd.group.as_ref());
    let ours: Vec<&Ace> = dacl
        .aces
        .iter()
        .filter(|a| a.flags & ace_flags::INHERITED == 0 && applies_here(a))
        .filter(|a| {
            a.sid
                .as_ref()
                .is_some_and(|s| s == owner || Some(s) == group || *s == everyone())
        })
        .collect();
    let bits_of = |sid: &Sid| -> u32 {
        ours.iter()
            .find(|a| a.ace_type == AceType::ACCESS_ALLOWED && a.sid.as_ref() == Some(sid))
            .map_or(0, |a| {
                let m = a.access_mask;
                u32::from(m & AccessMask::FILE_READ_DATA != 0) << 2
                    | u32::from(m & AccessMask::FILE_WRITE_DATA != 0) << 1
                    | u32::from(m & AccessMask::FILE_EXECUTE != 0)
            })
    };
    let user = bits_of(owner);
    let grp = match group {
        Some(g) if g != owner => bits_of(g),
        _ => user,
    };
    let rwx = user << 6 | grp << 3 | bits_of(&everyone());
    let candidates = if directory {
        &[0, 0o1000][..]
    } else {
        &[0][..]
    };
    candidates.iter().map(|s| rwx | s).find(|&mode| {
        let want = derived_aces(mode, directory, Some(owner), group);
        want.len() == ours.len() && want.iter().all(|w| ours.contains(&w))
    })
}

/// The descriptor a chmod sends with DACL_SECURITY_INFORMATION: the new DACL, with the
/// old descriptor's DACL inheritance bits (MS-DTYP 2.4.6: SE_DACL_AUTO_INHERITED,
/// SE_DACL_PROTECTED), which the DACL part carries.
fn chmod_descriptor(
    old: &SecurityDescriptor,
    mode: u32,
    directory: bool,
    with_mode_ace: bool,
) -> SecurityDescriptor {
    SecurityDescriptor {
        control: control::SELF_RELATIVE
            | control::DACL_PRESENT
            | old.control & (control::DACL_AUTO_INHERITED | control::DACL_PROTECTED),
        rm_control: 0,
        owner: None,
        group: None,
        sacl: None,
        dacl: Some(dacl_with_mode(
            old.dacl.as_ref(),
            mode,
            directory,
            old.owner.as_ref(),
            old.group.as_ref(),
            with_mode_ace,
        )),
    }
}

impl Share {
    /// The owner, group and DACL of `path` for [`mode_from_descriptor`], in one round trip
    /// (CREATE with READ_CONTROL + QUERY_INFO + CLOSE compounded); `None` when the server
    /// will not give them (no READ_CONTROL, a link it leaves to the client, ...) or sends a
    /// descriptor that does not decode.
    pub async fn mode_descriptor(&self, path: &str) -> Result<Option<SecurityDescriptor>> {
        let found = self
            .across_links(path, |s: Share, p: String| async move {
                s.mode_descriptor_here(&p).await
            })
            .await;
        match found {
            Ok(sd) => Ok(sd),
            Err(e @ Error::Status { .. }) => {
                tracing::debug!(path, error = %e, "no security descriptor for the mode");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// [`Share::metadata_and_name`] and [`Share::mode_descriptor`] of `path` in one round
    /// trip and one open: CREATE with FILE_READ_ATTRIBUTES and READ_CONTROL, QUERY_INFO of
    /// FileAllInformation, QUERY_INFO of the owner, group and DACL, CLOSE. Where the server
    /// will not open the file that way (no READ_CONTROL, a link it leaves to the client) the
    /// metadata is asked alone, with no descriptor. A file that is not there costs the one
    /// round trip, as without the descriptor.
    pub async fn metadata_name_and_descriptor(
        &self,
        path: &str,
    ) -> Result<(Metadata, Option<String>, Option<SecurityDescriptor>)> {
        let found = if self.is_posix() || self.snapshot_filetime().is_some() {
            // POSIX shares carry their modes; a snapshot's misses are explained by the
            // metadata's own path.
            None
        } else {
            let at = self
                .across_links(path, |s: Share, p: String| async move {
                    s.metadata_and_descriptor_here(&p).await
                })
                .await;
            match at {
                Err(e)
                    if e.status() == Some(NtStatus::ACCESS_DENIED)
                        || leaves_reparse_point_to_client(&e) =>
                {
                    None
                }
                other => Some(other?),
            }
        };
        match found {
            Some(found) => Ok(found),
            None => {
                let (m, name) = self.metadata_and_name(path).await?;
                Ok((m, name, None))
            }
        }
    }

    /// [`Share::metadata_name_and_descriptor`] on this share, with no DFS link on the way.
    async fn metadata_and_descriptor_here(
        &self,
        path: &str,
    ) -> Result<(Metadata, Option<String>, Option<SecurityDescriptor>)> {
        let core = &self.tree.core;
        let tree = Some(self.tree.context);
        let parts = SecurityParts::standard();
        let create = CreateRequest::new(
            wire_path(path)?,
            AccessMask::FILE_READ_ATTRIBUTES | AccessMask::READ_CONTROL,
            CreateDisposition::OPEN,
        );
        let all = QueryInfoRequest::file_info::<FileAllInformation>(FileId::ANY, 4096);
        let sd = QueryInfoRequest::security(FileId::ANY, parts.bits(), FIRST_BUFFER);
        let reqs = vec![
            core.prepare(&create, tree),
            core.prepare(&all, tree),
            core.prepare(&sd, tree),
            core.prepare(&CloseRequest::new(FileId::ANY), tree),
        ];
        let replies = core
            .send_related(reqs, create.replay(), self.tree.call())
            .await?;
        self.close_left_open(&replies).await;
        let Ok([created, all, sd, _]) = <[_; 4]>::try_from(replies) else {
            // The channel answers a compound with one reply per request.
            return Err(ProtocolError::Unexpected("compound reply count").into());
        };
        created?.check(&[]).map_err(|e| e.with_path(path))?;
        let all = all?
            .check(&[NtStatus::BUFFER_OVERFLOW])
            .map_err(|e| e.with_path(path))?;
        let name = QueryInfoResponse::decode(&all.msg)
            .and_then(|r| r.file_info::<FileAllInformation>())
            .ok()
            .filter(|a| !a.name_truncated)
            .map(|a| a.name);
        let metadata = metadata_from_reply(&all.msg)?;
        let descriptor = match sd {
            Ok(r) if TOO_SMALL.contains(&r.header.status) => {
                // Over 4 KiB: asked again, growing the buffer.
                self.mode_descriptor(path).await?
            }
            Ok(r) if r.header.status == NtStatus::SUCCESS => QueryInfoResponse::decode(&r.msg)
                .ok()
                .and_then(|q| SecurityDescriptor::decode(&q.output).ok()),
            _ => None,
        };
        Ok((metadata, name, descriptor))
    }

    /// [`Share::mode_descriptor`] of each of `paths`, several in flight at once; answers in
    /// the order of `paths`.
    pub async fn mode_descriptors(
        &self,
        paths: &[String],
    ) -> Vec<Result<Option<SecurityDescriptor>>> {
        // Owned paths and share handles: a future that borrows from a closure's argument
        // is not `Send` for every lifetime, which a spawned caller needs.
        stream::iter(paths.to_vec())
            .map(|p| {
                let share = self.clone();
                async move { share.mode_descriptor(&p).await }
            })
            .buffered(IN_FLIGHT)
            .collect()
            .await
    }

    /// [`Share::mode_descriptor`] on this share, with no DFS link on the way.
    async fn mode_descriptor_here(&self, path: &str) -> Result<Option<SecurityDescriptor>> {
        let parts = SecurityParts::standard();
        let mut create = CreateRequest::new(
            wire_path(path)?,
            AccessMask::READ_CONTROL,
            CreateDisposition::OPEN,
        );
        create.create_options = CreateOptions(self.tree.metadata_open_options());
        crate::timewarp::add_timewarp(&mut create, self.snapshot_filetime());
        self.tree.posix_open(&mut create, 0);
        let ask = QueryInfoRequest::security(FileId::ANY, parts.bits(), FIRST_BUFFER);
        let reply = self.open_ask_close(&create, &ask, path).await??;
        let raw = if TOO_SMALL.contains(&reply.header.status) {
            // A descriptor over 4 KiB: ask again, growing the buffer.
            self.security_descriptor(path, parts).await?.raw
        } else {
            let reply = reply.check(&[]).map_err(|e| e.with_path(path))?;
            decode(Command::QUERY_INFO, QueryInfoResponse::decode(&reply.msg))?.output
        };
        match SecurityDescriptor::decode(&raw) {
            Ok(sd) => Ok(Some(sd)),
            Err(e) => {
                tracing::debug!(path, error = %e, "a security descriptor that does not decode");
                Ok(None)
            }
        }
    }

    /// Keep `mode` (permission bits with setuid, setgid and sticky) in the DACL of `path`,
    /// a file or a `directory`, as `-o modefromsid` does (see the module's text): one open
    /// with READ_CONTROL and WRITE_DAC, the descriptor read, the new DACL set, and read back
    /// to see whether the server kept the mode ACE; if not, the derived ACEs are set alone.
    pub async fn set_mode_in_dacl(&self, path: &str, mode: u32, directory: bool) -> Result<()> {
        self.across_links(path, |s: Share, p: String| async move {
            s.set_mode_in_dacl_here(&p, mode, directory).await
        })
        .await
    }

    /// [`Share::set_mode_in_dacl`] on this share, with no DFS link on the way.
    async fn set_mode_in_dacl_here(&self, path: &str, mode: u32, directory: bool) -> Result<()> {
        let access = AccessMask::READ_CONTROL | AccessMask::WRITE_DAC;
        self.on_path(path, access, |id| async move {
            let old = self.descriptor_on(id, SecurityParts::standard()).await?;
            self.set_dacl_on(id, &chmod_descriptor(&old, mode, directory, true))
                .await?;
            let back = self.descriptor_on(id, SecurityParts::DACL).await?;
            if back.dacl.as_ref().and_then(mode_in_dacl) == Some(mode & 0o7777) {
                return Ok(());
            }
            tracing::debug!(
                path,
                "the server did not keep the mode ACE: the derived ACEs alone"
            );
            self.set_dacl_on(id, &chmod_descriptor(&old, mode, directory, false))
                .await
        })
        .await
    }

    async fn descriptor_on(&self, id: FileId, parts: SecurityParts) -> Result<SecurityDescriptor> {
        let raw = self.security_descriptor_on(id, parts).await?;
        decode(Command::QUERY_INFO, SecurityDescriptor::decode(&raw))
    }

    async fn set_dacl_on(&self, id: FileId, sd: &SecurityDescriptor) -> Result<()> {
        self.set_security_descriptor_on(id, encode(sd)?, SecurityParts::DACL)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(s: &str) -> Sid {
        s.parse().unwrap()
    }

    const OWNER: &str = "S-1-5-21-1-2-3-1000";
    const GROUP: &str = "S-1-22-2-100";

    fn descriptor(dacl: Acl) -> SecurityDescriptor {
        SecurityDescriptor {
            control: control::SELF_RELATIVE | control::DACL_PRESENT,
            rm_control: 0,
            owner: Some(sid(OWNER)),
            group: Some(sid(GROUP)),
            sacl: None,
            dacl: Some(dacl),
        }
    }

    fn chmodded(mode: u32, directory: bool, with_mode_ace: bool) -> SecurityDescriptor {
        let (o, g) = (sid(OWNER), sid(GROUP));
        let dacl = dacl_with_mode(None, mode, directory, Some(&o), Some(&g), with_mode_ace);
        // Through the wire form, as a server would send it back.
        SecurityDescriptor::decode(&descriptor(dacl).encode().unwrap()).unwrap()
    }

    /// What an access check (MS-DTYP 2.5.3.2) grants a token holding `sids`: each ACE that
    /// names one of them decides the rights it names that no earlier ACE decided.
    fn granted(dacl: &Acl, sids: &[Sid]) -> u32 {
        let (mut allowed, mut denied) = (0u32, 0u32);
        for ace in dacl.aces.iter().filter(|a| applies_here(a)) {
            if !ace.sid.as_ref().is_some_and(|s| sids.contains(s)) {
                continue;
            }
            let open = ace.access_mask & !(allowed | denied);
            if ace.ace_type == AceType::ACCESS_ALLOWED {
                allowed |= open;
            } else {
                denied |= open;
            }
        }
        allowed
    }

    #[test]
    fn the_mode_ace_is_read_back_after_the_wire() {
        for mode in [0o640, 0o755, 0o600, 0o4755, 0o2770, 0o1777, 0] {
            let sd = chmodded(mode, false, true);
            assert_eq!(mode_from_descriptor(&sd, false), Some(mode), "{mode:o}");
            let first = &sd.dacl.as_ref().unwrap().aces[0];
            assert_eq!(first.ace_type, AceType::ACCESS_DENIED);
            assert_eq!((first.access_mask, first.flags), (0, 0));
            assert_eq!(
                first.sid.as_ref().unwrap().to_string(),
                format!("S-1-5-88-3-{mode}")
            );
        }
    }

    #[test]
    fn without_the_mode_ace_the_derived_aces_give_the_rwx_bits_back() {
        for mode in 0..=0o777 {
            for directory in [false, true] {
                let sd = chmodded(mode, directory, false);
                assert_eq!(mode_from_descriptor(&sd, directory), Some(mode), "{mode:o}");
            }
            // Sticky shows only where it takes FILE_DELETE_CHILD from group or others.
            let sd = chmodded(mode | 0o1000, true, false);
            let want = if mode & 0o022 != 0 {
                mode | 0o1000
            } else {
                mode
            };
            assert_eq!(mode_from_descriptor(&sd, true), Some(want), "{mode:o}");
            // setuid and setgid have nowhere to go.
            let sd = chmodded(mode | 0o6000, false, false);
            assert_eq!(mode_from_descriptor(&sd, false), Some(mode), "{mode:o}");
        }
    }

    #[test]
    fn the_servers_access_check_follows_the_mode() {
        let (o, g, e) = (sid(OWNER), sid(GROUP), everyone());
        let stranger = sid("S-1-5-21-1-2-3-2000");
        for mode in 0..=0o777 {
            for directory in [false, true] {
                let dacl = dacl_with_mode(None, mode, directory, Some(&o), Some(&g), true);
                let class = |shift: u32| rights((mode >> shift) & 7, directory, true) | MINIMUM;
                // The owner is in the group too, as a user usually is in its primary group.
                let owner = granted(&dacl, &[o.clone(), g.clone(), e.clone()]);
                assert_eq!(owner, class(6) | OWNER_ALWAYS, "owner, {mode:o}");
                let member = granted(&dacl, &[stranger.clone(), g.clone(), e.clone()]);
                assert_eq!(member, class(3), "group member, {mode:o}");
                let other = granted(&dacl, &[stranger.clone(), e.clone()]);
                assert_eq!(other, class(0), "other, {mode:o}");
            }
        }
        // Sticky: group and others may add to the directory but not delete others' files.
        let dacl = dacl_with_mode(None, 0o1777, true, Some(&o), Some(&g), true);
        let other = granted(&dacl, &[stranger, e]);
        assert_eq!(other & AccessMask::FILE_DELETE_CHILD, 0);
        assert_ne!(other & AccessMask::FILE_WRITE_DATA, 0);
    }

    #[test]
    fn an_owner_that_is_its_group_gets_what_both_classes_have() {
        let o = sid(OWNER);
        let dacl = dacl_with_mode(None, 0o750, false, Some(&o), Some(&o), false);
        assert!(dacl.aces.iter().all(|a| a.sid != Some(sid(GROUP))));
        assert_eq!(
            granted(&dacl, &[o.clone(), everyone()]),
            rights(0o5, false, true) | MINIMUM | OWNER_ALWAYS
        );
        let mut sd = descriptor(dacl);
        sd.group = Some(o);
        assert_eq!(mode_from_descriptor(&sd, false), Some(0o550));
    }

    #[test]
    fn a_chmod_keeps_other_trustees_and_inherited_aces() {
        let (o, g) = (sid(OWNER), sid(GROUP));
        let admin = sid("S-1-5-32-544");
        let creator = sid("S-1-3-0");
        let inherit = ace_flags::OBJECT_INHERIT | ace_flags::CONTAINER_INHERIT;
        let old = Acl::new(vec![
            Ace::allow(admin.clone(), 0x001f_01ff, 0),
            Ace::allow(o.clone(), 0x001f_01ff, inherit),
            Ace::deny(mode_sid(0o777), 0, 0),
            Ace::allow(authenticated_users(), 0x1000_0000, 0),
            Ace::allow(everyone(), 0x0012_00a9, ace_flags::INHERITED),
            Ace::allow(
                creator.clone(),
                0x1000_0000,
                inherit | ace_flags::INHERIT_ONLY | ace_flags::INHERITED,
            ),
        ]);
        let new = dacl_with_mode(Some(&old), 0o750, true, Some(&o), Some(&g), true);
        let derived = derived_aces(0o750, true, Some(&o), Some(&g));
        let mut want = vec![
            Ace::allow(admin.clone(), 0x001f_01ff, 0),
            // Passes on to children as before, no longer applies to the directory.
            Ace::allow(o.clone(), 0x001f_01ff, inherit | ace_flags::INHERIT_ONLY),
            Ace::deny(mode_sid(0o750), 0, 0),
        ];
        want.extend(derived);
        want.push(Ace::allow(
            creator,
            0x1000_0000,
            inherit | ace_flags::INHERIT_ONLY | ace_flags::INHERITED,
        ));
        assert_eq!(new.aces, want);
        // A file passes nothing on: its owner's ACE is replaced outright.
        let new = dacl_with_mode(Some(&old), 0o640, false, Some(&o), Some(&g), true);
        assert_eq!(
            new.aces
                .iter()
                .filter(|a| a.sid.as_ref() == Some(&o))
                .count(),
            1
        );
        assert!(new
            .aces
            .iter()
            .all(|a| a.sid != Some(authenticated_users())));
        // The DACL's inheritance bits stay; the SACL and owner are not sent.
        let mut sd = descriptor(old);
        sd.control |= control::DACL_PROTECTED | control::SACL_PRESENT;
        let out = chmod_descriptor(&sd, 0o600, false, true);
        assert_eq!(
            out.control,
            control::SELF_RELATIVE | control::DACL_PRESENT | control::DACL_PROTECTED
        );
        assert!(out.owner.is_none() && out.sacl.is_none());
    }

    #[test]
    fn hostile_mode_aces_get_a_defined_answer() {
        let acl = |aces: Vec<Ace>| mode_in_dacl(&Acl::new(aces));
        // Several: the first that applies to the file wins; an INHERIT_ONLY one speaks of
        // children, an audit ACE of nothing.
        assert_eq!(
            acl(vec![
                Ace::allow(mode_sid(0o777), 0, ace_flags::INHERIT_ONLY),
                Ace {
                    ace_type: AceType::SYSTEM_AUDIT,
                    ..Ace::allow(mode_sid(0o111), 0, 0)
                },
                Ace::allow(mode_sid(0o640), 0, 0),
                Ace::deny(mode_sid(0o600), 0, 0),
            ]),
            Some(0o640)
        );
        // A deny that denies something still carries the mode (it denies rights to a SID
        // no user holds).
        assert_eq!(
            acl(vec![Ace::deny(mode_sid(0o755), 0x001f_01ff, 0)]),
            Some(0o755)
        );
        // Bits above 0o7777 (a file type, garbage) are dropped.
        let huge = Sid::new(5, &[88, 3, u32::MAX]).unwrap();
        assert_eq!(acl(vec![Ace::allow(huge, 0, 0)]), Some(0o7777));
        // Only exactly S-1-5-88-3-MODE: not a prefix, not a longer SID, not another family.
        for s in [
            "S-1-5-88-3",
            "S-1-5-88-3-420-1",
            "S-1-5-88-1-420",
            "S-1-5-87-3-420",
            "S-1-5",
        ] {
            assert_eq!(acl(vec![Ace::allow(sid(s), 0, 0)]), None, "{s}");
        }
        // An object ACE has no SID we look at.
        assert_eq!(
            acl(vec![Ace {
                ace_type: AceType(0x05),
                flags: 0,
                access_mask: 0,
                sid: None,
                extra: vec![0; 20],
            }]),
            None
        );
        // No DACL (NULL or absent): no mode, the mount's file_mode.
        let mut sd = descriptor(Acl::new(vec![]));
        assert_eq!(mode_from_descriptor(&sd, false), None);
        sd.dacl = None;
        assert_eq!(mode_from_descriptor(&sd, false), None);
    }

    #[test]
    fn hostile_descriptor_bytes_fail_to_decode_and_never_panic() {
        let good = descriptor(Acl::new(vec![Ace::deny(mode_sid(0o640), 0, 0)]))
            .encode()
            .unwrap();
        let dacl_at = u32::from_le_bytes(good[16..20].try_into().unwrap()) as usize;
        let ace_sid = dacl_at + 8 + 8; // ACL header, ACE header and mask
                                       // A sub-authority count of 255 (at most 15 exist) in the mode ACE's SID.
        let mut bad = good.to_vec();
        bad[ace_sid + 1] = 255;
        assert!(SecurityDescriptor::decode(&bad).is_err());
        // 15 sub-authorities that the ACE's size does not hold.
        let mut bad = good.to_vec();
        bad[ace_sid + 1] = 15;
        assert!(SecurityDescriptor::decode(&bad).is_err());
        // AceCount 65535 in an ACL of one ACE.
        let mut bad = good.to_vec();
        bad[dacl_at + 4..dacl_at + 6].copy_from_slice(&[0xff, 0xff]);
        assert!(SecurityDescriptor::decode(&bad).is_err());
        // An AclSize past the end of the descriptor.
        let mut bad = good.to_vec();
        bad[dacl_at + 2..dacl_at + 4].copy_from_slice(&[0xff, 0xff]);
        assert!(SecurityDescriptor::decode(&bad).is_err());
        // Every truncation and every single-byte corruption: an error or a descriptor, and
        // whatever decodes gives a mode or none without panicking.
        for n in 0..good.len() {
            let _ = SecurityDescriptor::decode(&good[..n]);
        }
        for i in 0..good.len() {
            for v in [0u8, 1, 3, 0x7f, 0xff] {
                let mut b = good.to_vec();
                b[i] = v;
                if let Ok(sd) = SecurityDescriptor::decode(&b) {
                    let _ = mode_from_descriptor(&sd, false);
                    let _ = mode_from_descriptor(&sd, true);
                }
            }
        }
    }
}
