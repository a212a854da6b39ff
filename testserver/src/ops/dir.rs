//! QUERY_DIRECTORY (MS-SMB2 3.3.5.18) in the information classes of MS-FSCC 2.4 that list a
//! directory, with `*` and `?` patterns, restarts and single-entry queries.

use bytes::{BufMut, BytesMut};
use smb3_proto::NtStatus;

use super::{name_at, Ctx};
use crate::files::{Files, Node, NodeId};
use crate::state::Enumeration;
use crate::wire::{body_offset, put_utf16, utf16_len, Fields, Handled, Reply};

const RESTART_SCANS: u8 = 0x01;
const RETURN_SINGLE_ENTRY: u8 = 0x02;
const REOPEN: u8 = 0x10;

/// Bytes before the name in each class's entry.
fn fixed_len(class: u8) -> Result<usize, NtStatus> {
    Ok(match class {
        1 => 64,   // FileDirectoryInformation
        2 => 68,   // FileFullDirectoryInformation
        3 => 94,   // FileBothDirectoryInformation
        12 => 12,  // FileNamesInformation
        37 => 104, // FileIdBothDirectoryInformation
        38 => 80,  // FileIdFullDirectoryInformation
        _ => return Err(NtStatus::INVALID_INFO_CLASS),
    })
}

/// Whether `name` matches `pattern` (`*` any run, `?` one character), ignoring case.
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let n: Vec<char> = name.to_lowercase().chars().collect();
    // Iterative match with one backtrack point for the last `*`.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

pub(crate) fn query_directory(ctx: &mut Ctx<'_>) -> Handled {
    let mut f = Fields::body(ctx.msg);
    f.structure_size(33)?;
    let class = f.u8()?;
    let flags = f.u8()?;
    f.skip(4 + 16)?;
    let pattern_offset = f.u16()? as usize;
    let pattern_len = f.u16()? as usize;
    let output_len = (f.u32()? as usize).min(ctx.config.max_io as usize);
    let fixed = fixed_len(class)?;
    let pattern = name_at(ctx.msg, pattern_offset, pattern_len)?;
    let id = ctx.open_at(8)?;
    let open = ctx.open(id)?;
    let share = open.share.clone();
    let dir_id = open.node;
    let restart = flags & (RESTART_SCANS | REOPEN) != 0 || open.enumeration.is_none();
    let files = ctx.files(&share)?;
    let dir = files.get(dir_id).ok_or(NtStatus::FILE_CLOSED)?;
    let Some(children) = dir.children() else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    let fresh = restart.then(|| {
        let pattern = if pattern.is_empty() { "*" } else { &pattern };
        let mut entries: Vec<(String, NodeId)> =
            vec![(".".into(), dir_id), ("..".into(), dir.parent)];
        entries.extend(
            children
                .values()
                .filter_map(|c| files.get(*c).map(|n| (n.name.clone(), n.id))),
        );
        entries.retain(|(name, _)| matches(pattern, name));
        entries
    });
    let open = ctx.open_mut(id)?;
    if let Some(entries) = fresh {
        open.enumeration = Some(Enumeration { entries, next: 0 });
    }
    let Some(listing) = open.enumeration.as_mut() else {
        return Err(NtStatus::NO_MORE_FILES);
    };
    let first_call = listing.next == 0;
    let pending: Vec<(String, NodeId)> = listing.entries[listing.next..].to_vec();
    if pending.is_empty() {
        return Err(if first_call && listing.entries.is_empty() {
            NtStatus::NO_SUCH_FILE
        } else {
            NtStatus::NO_MORE_FILES
        });
    }
    let files = ctx.state.shares.get(&share).ok_or(NtStatus::FILE_CLOSED)?;
    let mut out = BytesMut::new();
    let mut last_start = None;
    let mut taken = 0;
    for (name, node_id) in &pending {
        taken += 1;
        // Removed since the enumeration started: skipped, as a real directory read would.
        let Some(node) = files.get(*node_id) else {
            continue;
        };
        let start = out.len().next_multiple_of(8);
        let len = fixed + utf16_len(name);
        if start + len > output_len {
            taken -= 1;
            break;
        }
        while out.len() < start {
            out.put_u8(0);
        }
        if let Some(prev) = last_start {
            let next = (start - prev) as u32;
            out[prev..prev + 4].copy_from_slice(&next.to_le_bytes());
        }
        put_entry(&mut out, class, name, node, files);
        last_start = Some(start);
        if flags & RETURN_SINGLE_ENTRY != 0 {
            break;
        }
    }
    if last_start.is_none() {
        return Err(if taken == 0 {
            NtStatus::BUFFER_OVERFLOW
        } else {
            NtStatus::NO_MORE_FILES
        });
    }
    if let Some(listing) = ctx.open_mut(id)?.enumeration.as_mut() {
        listing.next += taken;
    }
    let mut body = BytesMut::with_capacity(8 + out.len());
    body.put_u16_le(9);
    body.put_u16_le(body_offset(8));
    body.put_u32_le(out.len() as u32);
    body.put_slice(&out);
    Ok(Reply::ok(body))
}

fn put_entry(out: &mut BytesMut, class: u8, name: &str, node: &Node, _files: &Files) {
    out.put_u32_le(0); // NextEntryOffset, set when the next entry is added
    out.put_u32_le(0); // FileIndex
    if class == 12 {
        out.put_u32_le(utf16_len(name) as u32);
        put_utf16(out, name);
        return;
    }
    out.put_u64_le(node.created);
    out.put_u64_le(node.accessed);
    out.put_u64_le(node.written);
    out.put_u64_le(node.changed);
    out.put_u64_le(node.size());
    out.put_u64_le(node.allocation());
    out.put_u32_le(node.wire_attributes());
    out.put_u32_le(utf16_len(name) as u32);
    match class {
        2 => out.put_u32_le(0),
        3 => {
            out.put_u32_le(0);
            out.put_u8(0);
            out.put_u8(0);
            out.put_slice(&[0; 24]);
        }
        37 => {
            out.put_u32_le(0);
            out.put_u8(0);
            out.put_u8(0);
            out.put_slice(&[0; 24]);
            out.put_u16_le(0);
            out.put_u64_le(node.id);
        }
        38 => {
            out.put_u32_le(0);
            out.put_u32_le(0);
            out.put_u64_le(node.id);
        }
        _ => {}
    }
    put_utf16(out, name);
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns() {
        assert!(matches("*", "anything"));
        assert!(matches("*.TXT", "notes.txt"));
        assert!(matches("a?c", "ABC"));
        assert!(!matches("a?c", "abbc"));
        assert!(matches("*b*", "abc"));
        assert!(!matches("*.rs", "main.rs.bak"));
        assert!(matches("exact", "Exact"));
    }
}
