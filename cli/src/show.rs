//! How `smbctl ls` and `smbctl stat` show entries: `ls` lines, `ls -l` columns (times in
//! local time, sizes exact or, with `-h`, in powers of 1024), `stat` in ISO 8601 local time,
//! and the same as JSON.

use std::time::SystemTime;

use smb3_client::{DirEntry, DosAttributes, Metadata};

/// A time as ISO 8601 in the machine's local time zone, with its offset and as many
/// fractional digits as it has (`2026-11-27T20:42:01.1234567+01:00`); `-` when unknown.
pub fn iso_local(t: Option<SystemTime>) -> String {
    match t.and_then(zoned) {
        Some(z) => z.strftime("%Y-%m-%dT%H:%M:%S%.f%:z").to_string(),
        None => "-".into(),
    }
}

/// A time for an `ls -l` column: local, to the second (`2026-11-27 20:42:01`).
pub fn short_local(t: Option<SystemTime>) -> String {
    match t.and_then(zoned) {
        Some(z) => z.strftime("%Y-%m-%d %H:%M:%S").to_string(),
        None => "-                  ".into(),
    }
}

fn zoned(t: SystemTime) -> Option<jiff::Zoned> {
    let ts = jiff::Timestamp::try_from(t).ok()?;
    Some(ts.to_zoned(jiff::tz::TimeZone::system()))
}

/// A size in bytes, or with `human` in powers of 1024 with one decimal (`1.5M`), as `ls -h`.
pub fn size(bytes: u64, human: bool) -> String {
    if !human || bytes < 1024 {
        return bytes.to_string();
    }
    let units = ["K", "M", "G", "T", "P", "E"];
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if value < 10.0 {
        format!("{value:.1}{}", units[unit])
    } else {
        format!("{value:.0}{}", units[unit])
    }
}

/// The type and DOS attributes as five letters, `ls -l` style: `d` or `-`, then `r` (read
/// only), `h` (hidden), `s` (system), `a` (archive), each `-` when unset.
pub fn mode_letters(m: &Metadata) -> String {
    let flag = |a: DosAttributes, c: char| {
        if m.attributes.contains(a) {
            c
        } else {
            '-'
        }
    };
    [
        if m.is_dir() { 'd' } else { '-' },
        flag(DosAttributes::READONLY, 'r'),
        flag(DosAttributes::HIDDEN, 'h'),
        flag(DosAttributes::SYSTEM, 's'),
        flag(DosAttributes::ARCHIVE, 'a'),
    ]
    .iter()
    .collect()
}

/// One line of `smbctl ls`: type, size, name; with `long`, attributes and the modification
/// time too.
pub fn ls_line(e: &DirEntry, long: bool, human: bool) -> String {
    let m = &e.metadata;
    if long {
        format!(
            "{} {:>10} {} {}",
            mode_letters(m),
            size(m.len, human),
            short_local(m.modified),
            e.name
        )
    } else {
        let kind = if m.is_dir() { 'd' } else { '-' };
        format!("{kind} {:>14} {}", size(m.len, human), e.name)
    }
}

/// An entry's metadata as JSON (times in ISO 8601 local time, attributes by name).
pub fn metadata_json(m: &Metadata) -> serde_json::Value {
    let time = |t: Option<SystemTime>| t.map(|t| iso_local(Some(t)));
    serde_json::json!({
        "type": if m.is_dir() { "directory" } else { "file" },
        "size": m.len,
        "allocated": m.allocation_size,
        "attributes": m.attributes.to_string().split('|').filter(|a| *a != "-").collect::<Vec<_>>(),
        "attributes_bits": m.attributes.bits(),
        "created": time(m.created),
        "accessed": time(m.accessed),
        "modified": time(m.modified),
        "changed": time(m.changed),
        "file_id": m.file_id,
        "links": m.links,
    })
}

/// `smbctl stat`'s lines for `m` at `shown`.
pub fn stat_lines(shown: &str, m: &Metadata, human: bool) -> Vec<String> {
    let human_size = if human || m.len >= 1024 {
        format!(" ({})", size(m.len, true))
    } else {
        String::new()
    };
    vec![
        format!("path: {shown}"),
        format!("type: {}", if m.is_dir() { "directory" } else { "file" }),
        format!("size: {}{human_size}", m.len),
        format!("allocated: {}", m.allocation_size),
        format!("attributes: {:#x} ({})", m.attributes.bits(), m.attributes),
        format!("created: {}", iso_local(m.created)),
        format!("accessed: {}", iso_local(m.accessed)),
        format!("modified: {}", iso_local(m.modified)),
        format!("changed: {}", iso_local(m.changed)),
        format!("file id: {:#x}", m.file_id),
        format!("links: {}", m.links),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_ls_h_shows_them() {
        assert_eq!(size(1023, true), "1023");
        assert_eq!(size(1536, true), "1.5K");
        assert_eq!(size(10 << 20, true), "10M");
        assert_eq!(size(3 << 30, true), "3.0G");
        assert_eq!(size(3 << 30, false), "3221225472");
    }

    #[test]
    fn times_are_iso_8601_with_their_offset() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::new(1_795_000_000, 123_400_000);
        let s = iso_local(Some(t));
        // 2026-11-18, whatever the zone; seconds, fraction and an offset like +01:00.
        assert!(s.starts_with("2026-11-"), "{s}");
        assert!(s.contains(".1234"), "{s}");
        let offset = &s[s.len() - 6..];
        assert!(
            offset.starts_with(['+', '-']) && offset.as_bytes()[3] == b':',
            "{s}"
        );
        assert_eq!(iso_local(None), "-");
        assert_eq!(short_local(Some(t)).len(), "2026-11-18 07:06:40".len());
    }
}
