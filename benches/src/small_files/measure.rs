//! One measured copy of a tree: the target removed first, the client timed from spawn to exit
//! with its CPU time from `wait4(2)`, smbd's CPU time and the machine's meanwhile, then the
//! client's own report checked and the tree that arrived verified file by file.

use std::path::{Path, PathBuf};

use smb3_tests::Testbed;

use super::command::{command, Places, INCOMING, SHARE};
use super::tree::Manifest;
use crate::child::Finished;
use crate::transfer::{run_metered, Direction, Metered, Sample, Tool};

/// One tree copied one way.
#[derive(Debug, Clone, Copy)]
pub struct TreeJob<'a> {
    /// The testbed (link 1 is the address both clients are given).
    pub tb: &'a Testbed,
    /// Which way.
    pub direction: Direction,
    /// Where the tree is read and written.
    pub places: Places<'a>,
    /// What the tree holds.
    pub manifest: &'a Manifest,
}

impl TreeJob<'_> {
    /// Where the copy lands, on the host: the local download directory, or the share's
    /// tmpfs for uploads.
    pub fn target(&self) -> PathBuf {
        match self.direction {
            Direction::Download => self.places.local_target.join(self.places.name),
            Direction::Upload => self
                .tb
                .share_path(SHARE)
                .join(INCOMING)
                .join(self.places.name),
        }
    }
}

/// Runs `tool` once for `job`, checks and verifies the result, removes it again, and returns
/// the measurement. Fails if the client fails, reports a problem, or the tree that arrived is
/// not exactly the source.
pub fn measure(tool: &Tool, job: &TreeJob<'_>) -> Result<Sample, String> {
    let target = job.target();
    // Every run starts without a target, so no run profits from (or trips over) the last one.
    remove_tree(&target)?;
    let cmd = command(tool, job.tb, job.direction, &job.places)?;
    let Metered {
        run,
        server_cpu,
        machine_cpu,
    } = run_metered(job.tb, cmd)?;
    let what = format!(
        "{} -r {} of {}",
        tool.name(),
        job.direction,
        job.places.name
    );
    if !run.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            run.status,
            run.stderr_tail()
        ));
    }
    if let Tool::Smbcp { .. } = tool {
        check_smbcp_report(&run, job.manifest).map_err(|e| format!("{what}: {e}"))?;
    }
    job.manifest
        .verify(&target)
        .map_err(|e| format!("{what}: {e}"))?;
    remove_tree(&target)?;
    Ok(Sample {
        bytes: job.manifest.total_bytes(),
        wall: run.wall,
        client_cpu: run.cpu(),
        client_max_rss: run.max_rss,
        server_cpu,
        machine_cpu,
    })
}

/// smbcp's `--json` must count every file as copied, none failed, and all the bytes.
/// (smbclient has no such report; its exit status and the tree check stand for it.)
fn check_smbcp_report(run: &Finished, manifest: &Manifest) -> Result<(), String> {
    let json: serde_json::Value = serde_json::from_str(run.stdout.trim())
        .map_err(|e| format!("smbcp --json printed no JSON ({e}): {}", run.stdout))?;
    let files = manifest.files.len() as u64;
    let expected = [
        ("files", files),
        ("copied", files),
        ("failed", 0),
        ("bytes", manifest.total_bytes()),
    ];
    for (key, want) in expected {
        if json[key].as_u64() != Some(want) {
            return Err(format!(
                "smbcp reported {key} = {} (expected {want})",
                json[key]
            ));
        }
    }
    Ok(())
}

/// Removes the directory `path` and everything in it; one that is not there is no error.
pub fn remove_tree(path: &Path) -> Result<(), String> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove {}: {e}", path.display())),
    }
}
