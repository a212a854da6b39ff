//! The layering of docs/ARCHITECTURE.md holds: no module of any crate of the workspace
//! imports, directly or not, a module that imports it back, among files or among top-level
//! modules (`scripts/module-graph.py`), and every top-level module of client-core imports only
//! modules of its own layer or of earlier layers of the table in docs/ARCHITECTURE.md.
//!
//! The checker's own tests build small crate trees in a temporary folder, so a checker that
//! goes blind (sees no cycle where one is, or passes an empty folder) fails here too.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn module_graph(args: &[&str], dir: &Path) -> Output {
    Command::new("python3")
        .arg(workspace().join("scripts/module-graph.py"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("python3 runs scripts/module-graph.py")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn no_crate_of_the_workspace_has_an_import_cycle() {
    let out = module_graph(&[], &workspace());
    assert!(out.status.success(), "{}", text(&out));
    let report = text(&out);
    for src in ["client-core/src/lib.rs", "client-core/proto/src/lib.rs"] {
        assert!(report.contains(src), "{src} was not checked:\n{report}");
    }
}

/// Each top-level module of client-core, with the row of the layer table it is in.
fn layers() -> BTreeMap<String, (usize, String)> {
    let doc = fs::read_to_string(workspace().join("docs/ARCHITECTURE.md")).unwrap();
    let section = doc
        .split("## Layers of client-core")
        .nth(1)
        .expect("docs/ARCHITECTURE.md has a section \"Layers of client-core\"");
    let mut out = BTreeMap::new();
    let rows = section
        .lines()
        .skip_while(|l| !l.starts_with("| layer |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'));
    for (row, line) in rows.enumerate() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (layer, modules) = (cells[1], cells[2]);
        for name in modules.split('`').skip(1).step_by(2) {
            let top = name.split("::").next().unwrap();
            if top.contains('-') {
                continue; // another crate (smb3-proto)
            }
            if let Some((_, other)) = out.insert(top.to_owned(), (row, layer.to_owned())) {
                assert_eq!(other, layer, "{top} is in two layers");
            }
        }
    }
    assert!(
        out.len() > 10,
        "no layer table found in docs/ARCHITECTURE.md"
    );
    out
}

#[test]
fn client_modules_import_only_their_own_layer_or_earlier_ones() {
    let out = module_graph(&["--top-graph", "client-core/src"], &workspace());
    assert!(out.status.success(), "{}", text(&out));
    let layers = layers();
    let layer_of = |m: &str| {
        layers.get(m).cloned().unwrap_or_else(|| {
            panic!("module {m} is in no layer of docs/ARCHITECTURE.md (\"Layers of client-core\")")
        })
    };
    let mut wrong = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((from, to)) = line.split_once(" -> ") else {
            continue;
        };
        if from.ends_with(".rs") {
            continue; // the crate root
        }
        let (row, layer) = layer_of(from);
        for target in to.split(", ") {
            let (target_row, target_layer) = layer_of(target);
            if target_row > row {
                wrong.push(format!(
                    "{from} ({layer}) imports {target} ({target_layer})"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports up the layers:\n{}",
        wrong.join("\n")
    );
}

/// A crate tree in a fresh temporary folder, removed on drop.
struct Tree(PathBuf);

impl Tree {
    fn new(files: &[(&str, &str)]) -> Tree {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "module-graph-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&dir).unwrap();
        for (path, body) in files {
            let path = dir.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, body).unwrap();
        }
        Tree(dir)
    }

    fn check(&self, args: &[&str]) -> (Option<i32>, String) {
        let out = module_graph(args, &self.0);
        (out.status.code(), text(&out))
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_checker_sees_a_cycle_through_super_paths() {
    let tree = Tree::new(&[
        ("src/lib.rs", "mod nic;\n"),
        ("src/nic/mod.rs", "mod inventory;\nmod planner;\n"),
        (
            "src/nic/inventory.rs",
            "use super::planner;\npub(crate) struct Local;\nfn rss() -> bool { planner::assumes() }\n",
        ),
        (
            "src/nic/planner.rs",
            "use super::inventory::Local;\npub(crate) fn assumes() -> bool { true }\nfn plan(_: Local) {}\n",
        ),
    ]);
    let (code, out) = tree.check(&["src"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("cycle among 2 files: nic/inventory, nic/planner"),
        "{out}"
    );
    assert!(
        out.contains("nic/inventory.rs:3 `planner::assumes`"),
        "{out}"
    );

    // Two levels up, and back through `self::` from the parent's side.
    let tree = Tree::new(&[
        ("src/lib.rs", "mod a;\n"),
        ("src/a/mod.rs", "mod b;\nmod d;\n"),
        ("src/a/b/mod.rs", "mod c;\n"),
        (
            "src/a/b/c.rs",
            "pub(crate) struct Y;\nfn f() { super::super::d::x(); }\n",
        ),
        (
            "src/a/d.rs",
            "pub(crate) fn x() {}\nfn g(_: self::super::b::c::Y) {}\n",
        ),
    ]);
    let (code, out) = tree.check(&["src"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("cycle among 2 files: a/b/c, a/d"), "{out}");
}

#[test]
fn the_checker_sees_a_cycle_among_top_level_modules_through_re_exports() {
    // No two files import each other, but `engine` and `failover` do.
    let tree = Tree::new(&[
        ("src/lib.rs", "mod engine;\nmod failover;\n"),
        (
            "src/engine.rs",
            "pub(crate) struct Core;\nfn send() { crate::failover::replay(); }\n",
        ),
        (
            "src/failover/mod.rs",
            "mod replay;\nmod watchdog;\npub(crate) use self::replay::replay;\n",
        ),
        ("src/failover/replay.rs", "pub(crate) fn replay() {}\n"),
        (
            "src/failover/watchdog.rs",
            "use crate::engine::Core;\nfn watch(_: &Core) {}\n",
        ),
    ]);
    let (code, out) = tree.check(&["src"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("0 cycle(s) among files, 1 among top-level"),
        "{out}"
    );
    assert!(
        out.contains("cycle among 2 top-level modules: engine, failover"),
        "{out}"
    );
    assert!(out.contains("engine -> failover/replay"), "{out}");
}

#[test]
fn the_checker_ignores_comments_strings_tests_and_a_module_using_its_parent() {
    let tree = Tree::new(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        (
            "src/a/mod.rs",
            "mod part;\npub(crate) struct Shared;\nfn f() { part::g(); }\n",
        ),
        (
            "src/a/part.rs",
            "use super::Shared;\npub(crate) fn g() -> Option<Shared> { None }\n",
        ),
        (
            "src/b.rs",
            concat!(
                "// crate::a::Shared in a comment\n",
                "/* crate::a::Shared /* nested */ */\n",
                "const S: &str = \"crate::a::Shared\";\n",
                "const R: &str = r#\"crate::a::Shared\"#;\n",
                "pub(crate) fn h() {}\n",
                "#[cfg(test)]\n",
                "mod tests { use crate::a::Shared; }\n",
                "#[cfg(test)]\n",
                "mod more;\n",
            ),
        ),
        ("src/b/more.rs", "use crate::a::Shared;\n"),
        ("src/a/user.rs", "// not declared: not a module\n"),
    ]);
    let (code, out) = tree.check(&["--graph", "src"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("4 modules (3 top-level), no cycle"), "{out}");
    assert!(!out.contains("b ->"), "{out}");
    // Counting the use of the parent, the strict reading sees a and a/part import each other.
    let (code, out) = tree.check(&["--strict", "src"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("cycle among 2 files: a, a/part"), "{out}");
}

#[test]
fn the_checker_refuses_a_folder_with_no_modules() {
    let tree = Tree::new(&[("empty/README", "no Rust here\n")]);
    for folder in ["empty", "missing"] {
        let (code, out) = tree.check(&[folder]);
        assert_eq!(code, Some(2), "{folder}: {out}");
        assert!(out.contains(folder), "{out}");
    }
    let (code, out) = tree.check(&["--help"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("usage:"), "{out}");
}
