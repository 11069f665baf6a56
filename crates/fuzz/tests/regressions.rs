//! Every input under `crates/fuzz/seeds/TARGET/` and `crates/fuzz/regressions/TARGET/` runs
//! through its target: the seeds the fuzzer starts from and every input that once crashed a
//! target stay checked on the stable toolchain, without libFuzzer.

#![allow(clippy::expect_used)] // test helpers panic on failure

use std::fs;
use std::path::{Path, PathBuf};

fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(kind)
        .join(target);
    let Ok(entries) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("a readable directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_target_has_seeds_and_every_input_runs() {
    for target in hpa_fuzz::TARGETS {
        let seeds = inputs("seeds", target);
        assert!(!seeds.is_empty(), "no seeds for fuzz target {target}");
        for file in seeds.iter().chain(&inputs("regressions", target)) {
            let data = fs::read(file).expect("a readable input");
            assert!(hpa_fuzz::run(target, &data), "unknown target {target}");
        }
    }
}

#[test]
fn every_scenario_of_the_repository_runs_through_the_scenario_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test-fixtures/scenarios");
    let mut stack = vec![root];
    let mut seen = 0;
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("test-fixtures/scenarios is readable") {
            let path = entry.expect("a readable directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "json") {
                hpa_fuzz::scenario(&fs::read(&path).expect("a readable scenario"));
                seen += 1;
            }
        }
    }
    assert!(seen > 100, "only {seen} scenarios found");
}

#[test]
fn an_unknown_target_is_refused() {
    assert!(!hpa_fuzz::run("no-such-target", b""));
}

/// `fuzz/` (built by `cargo fuzz`, outside this workspace and CI's build) wraps each target
/// exactly: one `[[bin]]` per target, whose file calls the target of the same name.
#[test]
fn the_libfuzzer_package_wraps_every_target() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let manifest = fs::read_to_string(fuzz.join("Cargo.toml")).expect("fuzz/Cargo.toml");
    let bins = manifest.matches("[[bin]]").count();
    assert_eq!(bins, hpa_fuzz::TARGETS.len(), "fuzz/Cargo.toml");
    for target in hpa_fuzz::TARGETS {
        assert!(
            manifest.contains(&format!(
                "name = \"{target}\"\npath = \"fuzz_targets/{target}.rs\""
            )),
            "fuzz/Cargo.toml has no [[bin]] for {target}"
        );
        let wrapper = fs::read_to_string(fuzz.join(format!("fuzz_targets/{target}.rs")))
            .expect("the target's wrapper");
        assert!(
            wrapper.contains(&format!("hpa_fuzz::{target}(data)")),
            "fuzz_targets/{target}.rs does not call hpa_fuzz::{target}"
        );
    }
}
