//! Replays, on the stable toolchain and without fuzzing instrumentation, the inputs the fuzz
//! targets of this crate keep (`fuzz/regressions/<target>/*`: every crash ever found, after its
//! fix) and every golden fixture, through the very bodies the libFuzzer targets run
//! (`smb3_proto::fuzzing`). A decoder change that brings a crash back fails here, in the
//! ordinary `cargo test`.

use std::fs;
use std::path::{Path, PathBuf};

use smb3_proto::fuzzing::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files directly in `dir`, sorted (none when it does not exist).
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .map(|e| e.expect("readable directory").path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

#[test]
fn kept_regression_inputs_do_not_crash() {
    let mut replayed = 0;
    for (name, body) in TARGETS {
        for file in files(&fuzz_dir().join("regressions").join(name)) {
            eprintln!("{name}: {}", file.display());
            body(&fs::read(&file).expect("readable input"));
            replayed += 1;
        }
    }
    eprintln!("{replayed} regression inputs replayed");
}

#[test]
fn every_golden_fixture_goes_through_every_target() {
    let fixtures = files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/samba-4.17"));
    let fixtures: Vec<Vec<u8>> = fixtures
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .map(|p| fs::read(p).expect("readable fixture"))
        .collect();
    assert!(fixtures.len() > 50, "fixtures not found");
    for (_, body) in TARGETS {
        for fixture in &fixtures {
            body(fixture);
            // Targets that read a selector byte first: every selector, with the fixture after.
            for selector in 0..16u8 {
                let mut input = vec![selector];
                input.extend_from_slice(fixture);
                body(&input);
            }
        }
    }
}
