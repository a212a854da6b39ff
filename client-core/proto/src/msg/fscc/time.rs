//! FILETIME (MS-DTYP 2.3.3): 100 ns intervals since 1601-01-01 UTC, the time stamp of every
//! MS-FSCC structure, and its conversion to and from `SystemTime`; and the values SET_INFO
//! gives a special meaning.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// FILETIME of 1970-01-01T00:00:00Z: 100 ns intervals between 1601-01-01 and the Unix epoch
/// (MS-DTYP 2.3.3).
pub const FILETIME_UNIX_EPOCH: u64 = 116_444_736_000_000_000;

/// In SET_INFO FileBasicInformation, a time of 0 leaves the time unchanged (MS-FSCC 2.4.7).
pub const FILETIME_UNCHANGED: u64 = 0;

/// In SET_INFO FileBasicInformation, -1 stops the server from updating this time for
/// operations on the handle (MS-FSCC 2.4.7).
pub const FILETIME_FREEZE: u64 = u64::MAX;

/// In SET_INFO FileBasicInformation, -2 resumes automatic updates after [`FILETIME_FREEZE`]
/// (MS-FSCC 2.4.7).
pub const FILETIME_UNFREEZE: u64 = u64::MAX - 1;

const TICKS_PER_SECOND: u64 = 10_000_000;
const NANOS_PER_TICK: u64 = 100;

/// Convert a FILETIME (100 ns intervals since 1601-01-01 UTC) to a `SystemTime`. 0 means "no
/// time" and gives `None`, as does a value the platform's `SystemTime` cannot represent.
pub fn filetime_to_system_time(filetime: u64) -> Option<SystemTime> {
    if filetime == 0 {
        return None;
    }
    let ticks_to_duration = |ticks: u64| {
        Duration::new(
            ticks / TICKS_PER_SECOND,
            ((ticks % TICKS_PER_SECOND) * NANOS_PER_TICK) as u32,
        )
    };
    if filetime >= FILETIME_UNIX_EPOCH {
        UNIX_EPOCH.checked_add(ticks_to_duration(filetime - FILETIME_UNIX_EPOCH))
    } else {
        UNIX_EPOCH.checked_sub(ticks_to_duration(FILETIME_UNIX_EPOCH - filetime))
    }
}

/// Convert a `SystemTime` to a FILETIME, truncating to 100 ns. Times at or before
/// 1601-01-01 become 1, because 0 means "no time" / "don't change"; times past the signed
/// 64-bit range saturate at `i64::MAX` so they never collide with the special values -1 / -2.
pub fn system_time_to_filetime(time: SystemTime) -> u64 {
    let duration_ticks = |d: Duration| {
        d.as_secs()
            .saturating_mul(TICKS_PER_SECOND)
            .saturating_add(u64::from(d.subsec_nanos()) / NANOS_PER_TICK)
    };
    let filetime = match time.duration_since(UNIX_EPOCH) {
        Ok(after) => FILETIME_UNIX_EPOCH.saturating_add(duration_ticks(after)),
        Err(before) => FILETIME_UNIX_EPOCH.saturating_sub(duration_ticks(before.duration())),
    };
    filetime.clamp(1, i64::MAX as u64)
}

#[cfg(test)]
mod tests {
    use super::super::SAMPLE_TIME;
    use super::*;

    #[test]
    fn filetime_conversions() {
        assert_eq!(filetime_to_system_time(0), None);
        assert_eq!(
            filetime_to_system_time(FILETIME_UNIX_EPOCH),
            Some(UNIX_EPOCH)
        );
        let t = UNIX_EPOCH + Duration::new(1_714_566_896, 789_000_000);
        let ft = system_time_to_filetime(t);
        assert_eq!(ft, FILETIME_UNIX_EPOCH + 17_145_668_967_890_000);
        assert_eq!(ft, SAMPLE_TIME);
        assert_eq!(filetime_to_system_time(ft), Some(t));
        // Sub-100 ns precision is truncated.
        assert_eq!(
            system_time_to_filetime(UNIX_EPOCH + Duration::from_nanos(199)),
            FILETIME_UNIX_EPOCH + 1
        );
        // Before the Unix epoch.
        let early = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(
            system_time_to_filetime(early),
            FILETIME_UNIX_EPOCH - 10_000_000
        );
        assert_eq!(
            filetime_to_system_time(FILETIME_UNIX_EPOCH - 10_000_000),
            Some(early)
        );
        // 1601-01-01 itself would be 0 ("no time"), so it is clamped to 1.
        let year_1601 = UNIX_EPOCH - Duration::from_secs(FILETIME_UNIX_EPOCH / TICKS_PER_SECOND);
        assert_eq!(system_time_to_filetime(year_1601), 1);
    }
}
