//! The layering of docs/ARCHITECTURE.md holds: no module of client-core or of its proto crate
//! imports, directly or not, a module that imports it back (`scripts/module-graph.py`).

use std::path::Path;
use std::process::Command;

fn graph(src: &str) -> (bool, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .arg(root.join("../scripts/module-graph.py"))
        .arg(root.join(src))
        .output()
        .expect("python3 runs scripts/module-graph.py");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.success(), text)
}

#[test]
fn client_modules_import_each_other_in_layers_without_a_cycle() {
    let (ok, text) = graph("src");
    assert!(ok, "{text}");
    // The engine imports no background task and no API module.
    let engine = text.lines().find(|l| l.starts_with("engine ->")).unwrap();
    let imports: Vec<&str> = engine["engine ->".len()..]
        .split(',')
        .map(str::trim)
        .collect();
    let above = [
        "multichannel/manager",
        "multichannel/binding",
        "failover/watchdog",
        "failover/reconnect",
        "lease/breaks",
        "client",
        "tree",
        "share",
        "file",
        "watch",
        "fs_ops",
    ];
    for module in above {
        assert!(
            !imports.contains(&module),
            "the engine imports {module}: {engine}"
        );
    }
}

#[test]
fn proto_modules_import_each_other_without_a_cycle() {
    let (ok, text) = graph("proto/src");
    assert!(ok, "{text}");
}
