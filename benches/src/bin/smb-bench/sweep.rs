//! `smb-bench sweep`: smbcp with several chunk sizes and depths on the unshaped link, where
//! the CPUs rather than the wire set the pace, smbclient first as the yardstick. The `sweep`
//! section of docs/PERFORMANCE.md.

use crate::bench::{Bench, LinkSetup};
use crate::transfer::Tool;
use crate::Common;

pub(crate) fn run(common: &Common) -> Result<(), String> {
    let mut bench = Bench::new(common, common.size(1024, 256), common.reps(3))?;
    let mut tools = vec![Tool::Smbclient];
    for chunk in ["256K", "1M", "4M", "8M"] {
        for depth in ["4", "16", "64"] {
            tools.push(Tool::smbcp(
                &bench.smbcp,
                &["--chunk-size", chunk, "--depth", depth],
            ));
        }
    }
    let tb = bench.testbed(&LinkSetup::UNSHAPED, &["plain"], "")?;
    bench.both_directions(&tb, "unshaped", "plain", &tools)?;
    drop(tb);
    let body = bench.header() + &bench.results.sweep_table().markdown();
    common.publish("sweep", None, &body)
}
