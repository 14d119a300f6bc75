//! House rules that keep the tree readable, checked over every source file of the repository:
//! - every Rust file opens with a `//!` comment saying what it owns;
//! - no value is turned into a document or body with `to_value(..).unwrap_or(Value::Null)`, which stores `null`
//!   when serialization fails: `flowhost_core::stored::encode` answers an error instead;
//! - no source file grows past [`LINE_BUDGET`] lines unless it says why in a comment holding [`OVER_BUDGET`].

use std::path::{Path, PathBuf};

use flowhost_tests::cli::repository_root;

/// Lines a source file may have before it must say why it is one file.
const LINE_BUDGET: usize = 1_000;
/// The marker of that reason, e.g. `// tidy: over the line budget: one acceptance suite per spec section`.
const OVER_BUDGET: &str = "tidy: over the line budget";

/// Directories never walked: build output, dependencies, version control.
const SKIPPED: &[&str] = &["target", "node_modules", ".git", "dist", "build-tests", "corpus", "artifacts"];

/// Source files under the repository root with one of `extensions`, sorted.
fn sources(extensions: &[&str]) -> Vec<PathBuf> {
    fn walk(dir: &Path, extensions: &[&str], found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if !SKIPPED.contains(&name.to_string_lossy().as_ref()) {
                    walk(&path, extensions, found);
                }
            } else if path.extension().is_some_and(|e| extensions.contains(&e.to_string_lossy().as_ref())) {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(&repository_root(), extensions, &mut found);
    found.sort();
    assert!(found.len() > 100, "the walk found only {} files: is the repository root right?", found.len());
    found
}

fn relative(path: &Path) -> String {
    path.strip_prefix(repository_root()).unwrap_or(path).display().to_string()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

#[test]
fn every_rust_file_says_what_it_owns() {
    let undocumented: Vec<String> = sources(&["rs"])
        .iter()
        .filter(|path| {
            let text = read(path);
            let first = text.lines().find(|line| !line.trim().is_empty()).unwrap_or("");
            !first.starts_with("//!")
        })
        .map(|path| relative(path))
        .collect();
    assert!(undocumented.is_empty(), "these files do not open with a `//!` comment: {undocumented:#?}");
}

#[test]
fn no_serialization_failure_becomes_null() {
    let offenders: Vec<String> = sources(&["rs"])
        .iter()
        .filter(|path| !path.ends_with("tests/tests/tidy.rs"))
        .flat_map(|path| {
            read(path)
                .lines()
                .enumerate()
                .filter(|(_, line)| line.contains("to_value(") && line.contains("unwrap_or(") && line.contains("Null)"))
                .map(|(n, _)| format!("{}:{}", relative(path), n + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(offenders.is_empty(), "use flowhost_core::stored::encode (an error, not `null`): {offenders:#?}");
}

#[test]
fn long_files_say_why() {
    let over: Vec<String> = sources(&["rs", "ts", "tsx", "mjs"])
        .iter()
        .filter_map(|path| {
            let text = read(path);
            let lines = text.lines().count();
            (lines > LINE_BUDGET && !text.contains(OVER_BUDGET)).then(|| format!("{} ({lines} lines)", relative(path)))
        })
        .collect();
    assert!(
        over.is_empty(),
        "split these files, or say why each is one in a comment holding {OVER_BUDGET:?}: {over:#?}"
    );
}
