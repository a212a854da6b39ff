//! The command lines that copy a whole tree, one per client: `smbcp -r` with its defaults,
//! and `smbclient` with `mput`/`mget` under `recurse ON`, over one connection to link 1.

use std::path::Path;
use std::process::Command;

use smb3_tests::Testbed;

use crate::transfer::{Direction, Tool};

/// The share every run uses.
pub const SHARE: &str = "plain";
/// The directory on the share uploads go into (downloads read the tree from the share's root).
pub const INCOMING: &str = "incoming";

/// Where a tree named `name` is read and written: the local directories hold trees under
/// that name, as on the share.
#[derive(Debug, Clone, Copy)]
pub struct Places<'a> {
    /// Local directory holding the source tree of uploads.
    pub local_source: &'a Path,
    /// Local directory downloads write their tree into.
    pub local_target: &'a Path,
    /// The tree's directory name, the same locally and on the share.
    pub name: &'a str,
}

/// The `smbclient -c` script: the same shape both ways, so the two directions differ only in
/// where they stand and in `mput` against `mget`. With `recurse ON` both walk directories
/// (`mput` creates the remote ones, `mget` the local ones); `prompt OFF` answers every
/// per-file question with yes.
pub fn smbclient_script(direction: Direction, places: &Places<'_>) -> String {
    match direction {
        Direction::Upload => format!(
            "prompt OFF; recurse ON; lcd {}; cd {INCOMING}; mput {}",
            places.local_source.display(),
            places.name
        ),
        Direction::Download => format!(
            "prompt OFF; recurse ON; lcd {}; mget {}",
            places.local_target.display(),
            places.name
        ),
    }
}

/// `smbcp -q --json -r SOURCE DEST` for the tree (DEST does not exist beforehand, so smbcp
/// creates it under that name, as `cp -r` does).
fn smbcp_args(tb: &Testbed, direction: Direction, places: &Places<'_>) -> Vec<String> {
    let base = format!(
        "smb://{};{}@{}/{SHARE}",
        tb.domain(),
        tb.user(),
        tb.server_addr(1)
    );
    let (source, dest) = match direction {
        Direction::Upload => (
            places.local_source.join(places.name).display().to_string(),
            format!("{base}/{INCOMING}/{}", places.name),
        ),
        Direction::Download => (
            format!("{base}/{}", places.name),
            places.local_target.join(places.name).display().to_string(),
        ),
    };
    vec!["-q".into(), "--json".into(), "-r".into(), source, dest]
}

/// The command that copies the tree `direction` with `tool`, run in the client namespace.
/// Passwords go through the environment, never argv. Fails on a local path smbclient's
/// script could not carry (`;` separates its commands, blanks its arguments).
pub fn command(
    tool: &Tool,
    tb: &Testbed,
    direction: Direction,
    places: &Places<'_>,
) -> Result<Command, String> {
    match tool {
        Tool::Smbcp { binary, extra, .. } => {
            let mut cmd = tb.client_command(binary);
            cmd.env("SMB_PASSWORD", tb.password())
                .args(extra)
                .args(smbcp_args(tb, direction, places));
            Ok(cmd)
        }
        Tool::Smbclient => {
            for p in [places.local_source, places.local_target] {
                let text = p.display().to_string();
                if text.contains(|c: char| c == ';' || c.is_whitespace()) {
                    return Err(format!(
                        "{text}: smbclient's -c script cannot carry this path"
                    ));
                }
            }
            let mut cmd = tb.client_command("smbclient");
            cmd.arg(tb.unc(1, SHARE))
                .args(["-U", &format!("{}/{}", tb.domain(), tb.user())])
                .args(["-m", "SMB3"])
                // smbclient reads the password from PASSWD when -U has none.
                .env("PASSWD", tb.password())
                .args(["-c", &smbclient_script(direction, places)]);
            Ok(cmd)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smbclient_scripts_stand_where_the_tree_goes() {
        let places = Places {
            local_source: Path::new("/dev/shm/x/source"),
            local_target: Path::new("/dev/shm/x/download"),
            name: "tree-10x4kib",
        };
        assert_eq!(
            smbclient_script(Direction::Upload, &places),
            "prompt OFF; recurse ON; lcd /dev/shm/x/source; cd incoming; mput tree-10x4kib"
        );
        assert_eq!(
            smbclient_script(Direction::Download, &places),
            "prompt OFF; recurse ON; lcd /dev/shm/x/download; mget tree-10x4kib"
        );
    }
}
