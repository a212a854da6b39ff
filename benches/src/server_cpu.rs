//! CPU time spent by smbd (the parent and every process below it) while one transfer ran.
//!
//! smbd forks a child per connection, and the child exits when the client disconnects, so the
//! child's own counters are gone by the time the transfer is over. The kernel moves a reaped
//! child's CPU time into its parent's `cutime`/`cstime`, so the sum of all four counters
//! (`utime`, `stime`, `cutime`, `cstime`) over the smbd tree only ever grows, whatever was
//! reaped in between. The meter reads that sum before and after, waiting first until the
//! parent has reaped the connection child (a zombie's time is in neither place).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// `/proc/<pid>/stat` counts in USER_HZ ticks, which is 100 on every Linux architecture.
const TICKS_PER_SECOND: u64 = 100;

/// Started before a transfer, stopped after it.
#[derive(Debug)]
pub struct ServerMeter {
    smbd_pid: u32,
    children_before: BTreeSet<u32>,
    ticks_before: u64,
}

impl ServerMeter {
    /// Takes the starting reading of the smbd tree whose parent is `smbd_pid`.
    pub fn start(smbd_pid: u32) -> Result<Self, String> {
        Ok(ServerMeter {
            smbd_pid,
            children_before: children(smbd_pid),
            ticks_before: tree_ticks(smbd_pid)?,
        })
    }

    /// CPU time smbd used since `start`. Waits (at most 5 s) until the connection children
    /// that appeared meanwhile are reaped.
    pub fn stop(self) -> Result<Duration, String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !children(self.smbd_pid).is_subset(&self.children_before) {
            if Instant::now() > deadline {
                return Err("smbd's connection child did not exit within 5 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let ticks = tree_ticks(self.smbd_pid)?.saturating_sub(self.ticks_before);
        Ok(Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND))
    }
}

/// Direct children of `pid` (of its main thread, which is the one that forks in smbd).
fn children(pid: u32) -> BTreeSet<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// `utime + stime + cutime + cstime` summed over `pid` and all its descendants.
fn tree_ticks(pid: u32) -> Result<u64, String> {
    let mut total = 0;
    let mut stack = vec![pid];
    while let Some(p) = stack.pop() {
        match process_ticks(p) {
            Some(t) => total += t,
            // Only the root must exist; a descendant may exit between listing and reading.
            None if p == pid => return Err(format!("smbd (pid {pid}) is gone")),
            None => {}
        }
        stack.extend(children(p));
    }
    Ok(total)
}

/// CPU time (user and system, all threads, reaped children included) process `pid` has used
/// so far; `None` once it is gone.
pub fn process_cpu(pid: u32) -> Option<Duration> {
    process_ticks(pid).map(|t| Duration::from_millis(t * 1000 / TICKS_PER_SECOND))
}

fn process_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_ticks(&stat)
}

/// Fields 14-17 of `/proc/<pid>/stat` (utime, stime, cutime, cstime) summed. The command name
/// (field 2) may contain spaces and parentheses, so fields are counted after its last `)`.
fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // fields[0] is field 3 (state), so field N is fields[N - 3].
    let sum = fields
        .get(11..15)?
        .iter()
        .map(|f| f.parse::<i64>().ok().map(|v| v.max(0) as u64))
        .sum::<Option<u64>>()?;
    Some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_awkward_command_name() {
        let stat =
            "17066 (smbd (x) y) S 1 17066 17066 0 -1 4194560 2415 482867 15 5 2 1 140 569 20 0";
        assert_eq!(parse_stat_ticks(stat), Some(2 + 1 + 140 + 569));
        assert_eq!(parse_stat_ticks("1 (short) S 1 2"), None);
    }

    #[test]
    fn own_process_has_a_reading() {
        assert!(tree_ticks(std::process::id()).is_ok());
    }
}
