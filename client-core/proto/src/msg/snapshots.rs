//! MS-SMB2 2.2.32.2 SRV_SNAPSHOT_ARRAY, the output of FSCTL_SRV_ENUMERATE_SNAPSHOTS, and the
//! `@GMT-YYYY.MM.DD-HH.MM.SS` tokens it lists ("previous versions", MS-SMB2 3.3.5.15.1).
//!
//! A snapshot is named on the wire in two ways: as a token in this array, and as a FILETIME
//! in the SMB2_CREATE_TIMEWARP_TOKEN create context (2.2.13.2.7) that opens a file as it was
//! in that snapshot. The token is always UTC with one-second resolution, so the conversions
//! here are exact both ways for whole seconds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::codec::{utf16le_to_string, DecodeError, Reader};

/// Length of the fixed part: NumberOfSnapShots, NumberOfSnapShotsReturned, SnapShotArraySize.
pub const SNAPSHOT_ARRAY_HEADER_LEN: usize = 12;

/// Length in characters of a token: `@GMT-2026.11.20-10.00.00`.
pub const GMT_TOKEN_LEN: usize = 24;

/// MS-SMB2 2.2.32.2 SRV_SNAPSHOT_ARRAY.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotArray {
    /// NumberOfSnapShots: how many snapshots the volume has.
    pub number_of_snapshots: u32,
    /// SnapShotArraySize: bytes the whole token list takes; when the output buffer was too
    /// small for it, the server returns no tokens and the caller asks again with
    /// [`SnapshotArray::needed_output`] bytes (3.3.5.15.1).
    pub array_size: u32,
    /// The tokens returned (NumberOfSnapShotsReturned of them), in the server's order.
    pub tokens: Vec<String>,
}

impl SnapshotArray {
    /// The MaxOutputResponse that holds the whole array.
    pub fn needed_output(&self) -> u32 {
        self.array_size
            .saturating_add(SNAPSHOT_ARRAY_HEADER_LEN as u32)
    }

    /// Whether the tokens returned are all there are.
    pub fn is_complete(&self) -> bool {
        self.tokens.len() as u64 >= u64::from(self.number_of_snapshots)
    }

    /// Decode the IOCTL output. The token list is UTF-16LE strings, each NUL-terminated, the
    /// list ended by one more NUL; NumberOfSnapShotsReturned must match the strings found.
    pub fn decode(output: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(output);
        let number_of_snapshots = r.u32("SRV_SNAPSHOT_ARRAY NumberOfSnapShots")?;
        let returned = r.u32("SRV_SNAPSHOT_ARRAY NumberOfSnapShotsReturned")?;
        let array_size = r.u32("SRV_SNAPSHOT_ARRAY SnapShotArraySize")?;
        if returned > number_of_snapshots {
            return Err(DecodeError::Inconsistent {
                what: "SRV_SNAPSHOT_ARRAY",
                detail: "more snapshots returned than exist",
            });
        }
        if returned == 0 {
            // Only the sizes: the buffer was too small, or there are no snapshots. Windows
            // sends no array bytes then; Samba may send the terminating NULs; both are fine.
            return Ok(Self {
                number_of_snapshots,
                array_size,
                tokens: Vec::new(),
            });
        }
        let array = r.bytes(array_size as usize, "SRV_SNAPSHOT_ARRAY SnapShots")?;
        let tokens = split_multi_sz(array)?;
        if tokens.len() != returned as usize {
            return Err(DecodeError::Inconsistent {
                what: "SRV_SNAPSHOT_ARRAY",
                detail: "NumberOfSnapShotsReturned differs from the tokens in the array",
            });
        }
        Ok(Self {
            number_of_snapshots,
            array_size,
            tokens,
        })
    }
}

/// Split a list of NUL-terminated UTF-16LE strings ended by an empty one. Anything after the
/// empty string is padding and ignored; a list that never ends is refused.
fn split_multi_sz(raw: &[u8]) -> Result<Vec<String>, DecodeError> {
    const WHAT: &str = "SRV_SNAPSHOT_ARRAY SnapShots";
    if raw.len() % 2 != 0 {
        return Err(DecodeError::BadString { what: WHAT });
    }
    let mut out = Vec::new();
    let mut start = 0;
    for i in (0..raw.len()).step_by(2) {
        if raw[i] == 0 && raw[i + 1] == 0 {
            if i == start {
                return Ok(out);
            }
            out.push(utf16le_to_string(&raw[start..i], WHAT)?);
            start = i + 2;
        }
    }
    Err(DecodeError::Inconsistent {
        what: WHAT,
        detail: "token list not terminated by an empty string",
    })
}

/// The time a `@GMT-YYYY.MM.DD-HH.MM.SS` token names (UTC), or `None` when `token` is not
/// exactly that shape or names no valid date.
pub fn parse_gmt_token(token: &str) -> Option<SystemTime> {
    let b = token.as_bytes();
    if b.len() != GMT_TOKEN_LEN || !token.starts_with("@GMT-") {
        return None;
    }
    // Separators at fixed places; every other character a digit.
    for (i, &c) in b.iter().enumerate().skip(5) {
        let sep = match i {
            9 | 12 | 18 | 21 => Some(b'.'),
            15 => Some(b'-'),
            _ => None,
        };
        match sep {
            Some(s) if c != s => return None,
            None if !c.is_ascii_digit() => return None,
            _ => {}
        }
    }
    let num = |from: usize, len: usize| -> u32 {
        b[from..from + len]
            .iter()
            .fold(0, |n, &d| n * 10 + u32::from(d - b'0'))
    };
    let (year, month, day) = (num(5, 4), num(10, 2), num(13, 2));
    let (hour, minute, second) = (num(16, 2), num(19, 2), num(22, 2));
    if !(1..=12).contains(&month)
        || day == 0
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let days = days_from_civil(i64::from(year), month, day);
    let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
    if secs >= 0 {
        UNIX_EPOCH.checked_add(Duration::from_secs(secs as u64))
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))
    }
}

/// The `@GMT-…` token for `time` (UTC, truncated to the second), or `None` for a time
/// outside years 0000–9999, which the token cannot express.
pub fn format_gmt_token(time: SystemTime) -> Option<String> {
    let secs: i64 = match time.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).ok()?,
        Err(e) => {
            let d = e.duration();
            // Round towards the past so 0.5 s before the epoch is 23:59:59 of the day before.
            let whole = i64::try_from(d.as_secs()).ok()?;
            -whole - i64::from(d.subsec_nanos() > 0)
        }
    };
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return None;
    }
    Some(format!(
        "@GMT-{year:04}.{month:02}.{day:02}-{:02}.{:02}.{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    ))
}

fn is_leap(year: u32) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date. Counts in 400-year eras starting on
/// March 1st, so the leap day is the last day of its "year" and needs no special case.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let m = i64::from(month);
    let day_of_year = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16z(s: &str) -> Vec<u8> {
        let mut v: Vec<u8> = s.encode_utf16().flat_map(u16::to_le_bytes).collect();
        v.extend_from_slice(&[0, 0]);
        v
    }

    fn array(total: u32, returned: u32, tokens: &[&str], trailer: &[u8]) -> Vec<u8> {
        let mut list: Vec<u8> = tokens.iter().flat_map(|t| utf16z(t)).collect();
        list.extend_from_slice(&[0, 0]);
        list.extend_from_slice(trailer);
        let mut out = Vec::new();
        out.extend_from_slice(&total.to_le_bytes());
        out.extend_from_slice(&returned.to_le_bytes());
        out.extend_from_slice(&(list.len() as u32).to_le_bytes());
        out.extend_from_slice(&list);
        out
    }

    #[test]
    fn two_tokens_decode_in_order() {
        let a = "@GMT-2026.11.20-10.00.00";
        let b = "@GMT-2026.11.19-09.30.15";
        let bytes = array(2, 2, &[a, b], &[]);
        let got = SnapshotArray::decode(&bytes).unwrap();
        assert_eq!(got.tokens, vec![a.to_string(), b.to_string()]);
        assert_eq!(got.number_of_snapshots, 2);
        // 2 × (24 + 1) UTF-16 units + the final NUL.
        assert_eq!(got.array_size, 2 * 50 + 2);
        assert_eq!(got.needed_output(), 12 + 102);
        assert!(got.is_complete());
    }

    #[test]
    fn sizes_only_when_the_buffer_was_too_small() {
        // 3.3.5.15.1: too small for the array, the server returns the counts and the size
        // with NumberOfSnapShotsReturned 0.
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&3u32.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&152u32.to_le_bytes());
        let got = SnapshotArray::decode(&bytes).unwrap();
        assert!(got.tokens.is_empty());
        assert!(!got.is_complete());
        assert_eq!(got.needed_output(), 164);
        // No snapshots at all: complete and empty.
        let none = SnapshotArray::decode(&array(0, 0, &[], &[])).unwrap();
        assert!(none.is_complete() && none.tokens.is_empty());
    }

    #[test]
    fn malformed_arrays_are_refused_not_panicked_on() {
        let good = array(1, 1, &["@GMT-2026.11.20-10.00.00"], &[]);
        for cut in 0..good.len() {
            let _ = SnapshotArray::decode(&good[..cut]);
        }
        assert!(SnapshotArray::decode(&good[..11]).is_err());
        // Array shorter than SnapShotArraySize says.
        assert!(SnapshotArray::decode(&good[..good.len() - 2]).is_err());
        // Returned > total.
        assert!(SnapshotArray::decode(&array(1, 2, &["a", "b"], &[])).is_err());
        // Returned disagrees with the strings present.
        assert!(SnapshotArray::decode(&array(3, 2, &["a"], &[])).is_err());
        // No terminating empty string.
        let mut open_ended = array(1, 1, &["a"], &[]);
        open_ended.truncate(open_ended.len() - 2);
        let n = (open_ended.len() - 12) as u32;
        open_ended[8..12].copy_from_slice(&n.to_le_bytes());
        assert!(SnapshotArray::decode(&open_ended).is_err());
        // Odd array length.
        let mut odd = good.clone();
        odd.push(0);
        let n = (odd.len() - 12) as u32;
        odd[8..12].copy_from_slice(&n.to_le_bytes());
        assert!(SnapshotArray::decode(&odd).is_err());
        // Huge SnapShotArraySize is a typed error, not an allocation.
        let mut huge = good.clone();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(SnapshotArray::decode(&huge).is_err());
    }

    #[test]
    fn padding_after_the_list_is_ignored() {
        let got = SnapshotArray::decode(&array(1, 1, &["@GMT-2026.11.20-10.00.00"], &[0, 0, 0, 0]))
            .unwrap();
        assert_eq!(got.tokens.len(), 1);
    }

    #[test]
    fn tokens_convert_to_times_and_back() {
        let t = parse_gmt_token("@GMT-2026.11.20-10.00.00").unwrap();
        // 2026-11-20T10:00:00Z, from `date -u -d 2026-11-20T10:00:00 +%s`.
        assert_eq!(t, UNIX_EPOCH + Duration::from_secs(1_795_168_800));
        assert_eq!(format_gmt_token(t).unwrap(), "@GMT-2026.11.20-10.00.00");
        assert_eq!(
            parse_gmt_token("@GMT-1970.01.01-00.00.00"),
            Some(UNIX_EPOCH)
        );
        let leap = parse_gmt_token("@GMT-2024.02.29-23.59.59").unwrap();
        assert_eq!(format_gmt_token(leap).unwrap(), "@GMT-2024.02.29-23.59.59");
        let before = parse_gmt_token("@GMT-1969.12.31-23.59.59").unwrap();
        assert_eq!(before, UNIX_EPOCH - Duration::from_secs(1));
        assert_eq!(
            format_gmt_token(before).unwrap(),
            "@GMT-1969.12.31-23.59.59"
        );
        assert_eq!(
            format_gmt_token(UNIX_EPOCH - Duration::from_millis(500)).unwrap(),
            "@GMT-1969.12.31-23.59.59"
        );
        // Sub-second parts are cut, as the token has none.
        assert_eq!(
            format_gmt_token(t + Duration::from_millis(999)).unwrap(),
            "@GMT-2026.11.20-10.00.00"
        );
        // Days spread over years 0053-9909 round-trip.
        for day in (-700_000i64..2_900_000).step_by(997) {
            let t = if day >= 0 {
                UNIX_EPOCH + Duration::from_secs(day as u64 * 86_400 + 3723)
            } else {
                UNIX_EPOCH - Duration::from_secs(day.unsigned_abs() * 86_400 - 3723)
            };
            let s = format_gmt_token(t).unwrap();
            assert_eq!(parse_gmt_token(&s), Some(t), "{s}");
        }
    }

    #[test]
    fn bad_tokens_are_refused() {
        for bad in [
            "",
            "@GMT-2026.11.20-10.00",
            "@GMT-2026.11.20-10.00.000",
            "GMT-2026.11.20-10.00.00x",
            "@GMT-2026-11-20-10.00.00",
            "@GMT-2026.13.20-10.00.00",
            "@GMT-2026.00.20-10.00.00",
            "@GMT-2026.02.29-10.00.00",
            "@GMT-2026.11.31-10.00.00",
            "@GMT-2026.11.20-24.00.00",
            "@GMT-2026.11.20-10.60.00",
            "@GMT-2026.11.20-10.00.60",
            "@GMT-2026.11.2a-10.00.00",
            "@GMT-2026.11.20-10.00.0é",
        ] {
            assert_eq!(parse_gmt_token(bad), None, "{bad:?}");
        }
    }
}
