//! Replays, on the stable toolchain and without fuzzing instrumentation, the inputs kept for
//! the client's fuzz targets (`fuzz/regressions/<target>/*`) and byte streams made of the
//! golden Samba replies, through the bodies the libFuzzer targets run
//! (`smb3_client::fuzzing`). The decoders' own targets are replayed by smb3-proto's
//! `tests/fuzz_replay.rs`.

use std::fs;
use std::path::{Path, PathBuf};

use smb3_client::fuzzing::TARGETS;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The entries directly in `dir`, sorted (none when it does not exist).
fn entries(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = read
        .map(|e| e.expect("readable directory").path())
        .collect();
    out.sort();
    out
}

#[test]
fn kept_regression_inputs_do_not_crash() {
    for (name, body) in TARGETS {
        for file in entries(&repo().join("fuzz/regressions").join(name)) {
            eprintln!("{name}: {}", file.display());
            body(&fs::read(&file).expect("readable input"));
        }
    }
}

#[test]
fn every_regression_directory_names_a_target() {
    // A directory no replay test knows would be silently skipped.
    let known: Vec<&str> = TARGETS
        .iter()
        .chain(smb3_proto::fuzzing::TARGETS)
        .map(|(name, _)| *name)
        .collect();
    for dir in entries(&repo().join("fuzz/regressions")) {
        if !dir.is_dir() {
            continue; // the README
        }
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        assert!(known.contains(&name.as_str()), "unknown fuzz target {name}");
    }
}

/// `msg` behind a Direct TCP transport header.
fn framed(msg: &[u8]) -> Vec<u8> {
    let len = u32::try_from(msg.len()).unwrap();
    let mut out = (len & 0x00FF_FFFF).to_be_bytes().to_vec();
    out.extend_from_slice(msg);
    out
}

#[test]
fn golden_replies_as_streams_go_through_every_target() {
    let dir = repo().join("client-core/proto/tests/fixtures/samba-4.17");
    let manifest = fs::read_to_string(dir.join("MANIFEST")).expect("fixture manifest");
    // The replies of the first connection of the 3.1.1 capture, in the order they were sent.
    let mut session = Vec::new();
    let mut singles = Vec::new();
    for line in manifest.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 || f[4] != "<-" {
            continue;
        }
        let msg = fs::read(dir.join(f[0])).expect("fixture named in MANIFEST");
        if f[1] == "client-3.1.1.pcap" && f[2] == "c1" && !f[0].starts_with("compound_") {
            session.extend_from_slice(&framed(&msg));
        }
        singles.push(framed(&msg));
    }
    assert!(
        singles.len() > 30 && session.len() > 2000,
        "fixtures not found"
    );
    for (_, body) in TARGETS {
        for stream in singles.iter().chain([&session]) {
            // Every mode and a few read sizes.
            for selector in [0u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x40, 0xFF] {
                let mut input = vec![selector];
                input.extend_from_slice(stream);
                body(&input);
            }
        }
    }
}
