//! Naming a snapshot ("previous version") and asking for it in a CREATE: the `Snapshot`
//! value, the FILETIME the TWrp create context carries (MS-SMB2 2.2.13.2.7), and the token
//! naming it. Pure values, below the API: the open path, reclaims and the options use them;
//! listing a share's snapshots is `snapshots.rs`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use smb3_proto::msg::create::{CreateContextRequest, CreateRequest};
use smb3_proto::msg::fscc::{filetime_to_system_time, system_time_to_filetime};
use smb3_proto::msg::snapshots::{format_gmt_token, parse_gmt_token};

/// One snapshot of a share, as the server lists it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Snapshot {
    /// When the snapshot was taken (UTC, whole seconds).
    pub time: SystemTime,
    /// Its token, `@GMT-YYYY.MM.DD-HH.MM.SS`, as the server names it.
    pub token: String,
}

impl Snapshot {
    /// A snapshot named by its `@GMT-YYYY.MM.DD-HH.MM.SS` token; `None` when `token` is not
    /// one.
    pub fn from_token(token: &str) -> Option<Snapshot> {
        Some(Snapshot {
            time: parse_gmt_token(token)?,
            token: token.to_string(),
        })
    }

    /// A snapshot named by its time (a fraction of a second is dropped); `None` for a time
    /// outside the years 0000–9999 a token can express.
    pub fn from_time(time: SystemTime) -> Option<Snapshot> {
        let token = format_gmt_token(time)?;
        Snapshot::from_token(&token)
    }
}

impl std::fmt::Display for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.token)
    }
}

/// The FILETIME the TWrp context carries for `time`: whole seconds, because the server
/// compares it with its snapshots' tokens, which have no fractions.
pub(crate) fn timewarp_filetime(time: SystemTime) -> u64 {
    let whole = match time.duration_since(UNIX_EPOCH) {
        Ok(d) => UNIX_EPOCH + Duration::from_secs(d.as_secs()),
        Err(e) => {
            let d = e.duration();
            let up = u64::from(d.subsec_nanos() > 0);
            UNIX_EPOCH - Duration::from_secs(d.as_secs() + up)
        }
    };
    system_time_to_filetime(whole)
}

/// The token naming the snapshot at `filetime`, for messages.
pub(crate) fn token_of(filetime: u64) -> String {
    filetime_to_system_time(filetime)
        .and_then(format_gmt_token)
        .unwrap_or_else(|| format!("at FILETIME {filetime}"))
}

/// Add the TWrp context for the snapshot at `filetime` to a CREATE.
pub(crate) fn add_timewarp(req: &mut CreateRequest, filetime: Option<u64>) {
    if let Some(timestamp) = filetime {
        req.contexts
            .push(CreateContextRequest::TimewarpToken { timestamp });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timewarp_times_are_whole_seconds() {
        let t = UNIX_EPOCH + Duration::new(1_795_168_800, 999_999_999);
        let ft = timewarp_filetime(t);
        assert_eq!(ft % 10_000_000, (116_444_736_000_000_000u64) % 10_000_000);
        assert_eq!(token_of(ft), "@GMT-2026.11.20-10.00.00");
        assert_eq!(
            filetime_to_system_time(ft),
            Some(UNIX_EPOCH + Duration::from_secs(1_795_168_800))
        );
        let before = UNIX_EPOCH - Duration::from_millis(1500);
        assert_eq!(
            filetime_to_system_time(timewarp_filetime(before)),
            Some(UNIX_EPOCH - Duration::from_secs(2))
        );
    }

    #[test]
    fn snapshots_from_time_and_token_agree() {
        let a = Snapshot::from_token("@GMT-2026.11.20-10.00.00").unwrap();
        let b = Snapshot::from_time(UNIX_EPOCH + Duration::from_millis(1_795_168_800_250)).unwrap();
        assert_eq!(a, b);
        assert!(Snapshot::from_token("2026-11-20").is_none());
    }
}
