//! Every input kept for a target, replayed through it on stable without libFuzzer: the seed corpus
//! (`corpus/<target>/`) and every input that once found a bug (`regressions/<target>/`). This is what keeps a
//! found input as a regression test under `cargo test`.

use std::path::{Path, PathBuf};

/// The files of `tests/fuzz/<kind>/<target>/`, sorted (none when the folder does not exist).
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join(kind).join(target);
    let Ok(entries) = std::fs::read_dir(&folder) else { return Vec::new() };
    let mut files: Vec<PathBuf> =
        entries.filter_map(Result::ok).map(|entry| entry.path()).filter(|path| path.is_file()).collect();
    files.sort();
    files
}

#[test]
fn every_kept_input_passes_its_target() {
    let mut replayed = 0;
    for (name, target) in flowhost_fuzz::TARGETS {
        let seeds = inputs("corpus", name);
        assert!(!seeds.is_empty(), "corpus/{name}/ has no seed");
        for path in seeds.iter().chain(&inputs("regressions", name)) {
            let data = std::fs::read(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            println!("{name}: {}", path.display());
            target(&data);
            replayed += 1;
        }
    }
    // The `component` target's real seeds are built, not checked in: the guests of plugins/.
    let component = flowhost_fuzz::TARGETS.iter().find(|(name, _)| *name == "component").expect("a component target").1;
    for guest in ["noop", "greeter", "caps"] {
        component(&flowhost_runtime_fixtures::bytes(guest));
        replayed += 1;
    }
    flowhost_fuzz::remove_scratch();
    println!("{replayed} inputs replayed");
}

#[test]
fn every_target_has_a_cargo_fuzz_binary() {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("cargo-fuzz/Cargo.toml"))
        .expect("cargo-fuzz/Cargo.toml");
    for (name, _) in flowhost_fuzz::TARGETS {
        assert!(manifest.contains(&format!("name = \"{name}\"")), "cargo-fuzz/Cargo.toml has no [[bin]] {name}");
        let wrapper = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("cargo-fuzz/fuzz_targets/{name}.rs"));
        assert!(wrapper.is_file(), "{} is missing", wrapper.display());
    }
}
