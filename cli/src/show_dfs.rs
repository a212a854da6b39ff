//! How `smbctl dfs` shows the DFS referrals followed to reach a path, for people and as JSON
//! (the referral chain, each link's targets in the server's order, which one was used and
//! why the ones before it were not, and how long the server lets a referral be kept).

use smb3_client::dfs::{DfsHop, DfsRoute};

/// The lines `smbctl dfs` prints for `route`, reached from `asked` (`//host/share/path`).
pub fn route_lines(asked: &str, route: &DfsRoute) -> Vec<String> {
    let mut lines = Vec::new();
    if route.hops.is_empty() {
        lines.push(format!("{asked}: no DFS link on the way"));
    }
    for (n, hop) in route.hops.iter().enumerate() {
        lines.extend(hop_lines(n + 1, hop));
    }
    lines.push(format!("reached: {}", reached(route)));
    lines
}

/// Where `route` ends, as `//server/share/path` (the port only when it is not 445).
fn reached(route: &DfsRoute) -> String {
    let addr = route.share.client().server_addr();
    let server = if addr.port() == 445 {
        addr.ip().to_string()
    } else {
        addr.to_string()
    };
    let mut s = format!("//{server}/{}", route.share.name());
    if !route.path.is_empty() {
        s.push('/');
        s.push_str(&route.path);
    }
    s
}

fn hop_lines(n: usize, hop: &DfsHop) -> Vec<String> {
    let r = &hop.referral;
    let mut lines = vec![format!(
        "referral {n}: \\{} covers \\{} ({}, ttl {} s)",
        r.asked,
        r.covered,
        if r.root { "root targets" } else { "link" },
        r.ttl.as_secs()
    )];
    for (i, target) in r.targets.iter().enumerate() {
        let state = if i == hop.used {
            "used".to_string()
        } else if let Some((_, why)) = hop.failed.iter().find(|(f, _)| *f == i) {
            format!("failed: {why}")
        } else {
            "not tried".to_string()
        };
        lines.push(format!("  target {}: {} ({state})", i + 1, target.unc()));
    }
    lines
}

/// `route` as JSON: `{"hops": [{"asked", "covered", "rest", "root", "ttl_seconds",
/// "targets": [{"unc", "server", "share", "path", "state", "error"}]}], "reached": {...}}`.
pub fn route_json(route: &DfsRoute) -> serde_json::Value {
    let hops: Vec<serde_json::Value> = route
        .hops
        .iter()
        .map(|hop| {
            let r = &hop.referral;
            let targets: Vec<serde_json::Value> = r
                .targets
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let failed = hop.failed.iter().find(|(f, _)| *f == i);
                    let state = match (i == hop.used, failed) {
                        (true, _) => "used",
                        (false, Some(_)) => "failed",
                        (false, None) => "not_tried",
                    };
                    serde_json::json!({
                        "unc": t.unc(),
                        "server": t.server,
                        "share": t.share,
                        "path": t.path,
                        "state": state,
                        "error": failed.map(|(_, why)| why.clone()),
                    })
                })
                .collect();
            serde_json::json!({
                "asked": r.asked,
                "covered": r.covered,
                "rest": r.rest,
                "root": r.root,
                "ttl_seconds": r.ttl.as_secs(),
                "targets": targets,
            })
        })
        .collect();
    serde_json::json!({
        "hops": hops,
        "reached": {
            "server": route.share.client().server_addr().to_string(),
            "share": route.share.name(),
            "path": route.path,
        },
    })
}
