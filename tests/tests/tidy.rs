//! House rules that keep the tree readable, checked over every source file of the repository:
//! - every Rust file opens with a `//!` comment saying what it owns;
//! - no value is turned into a document or body with `to_value(..).unwrap_or(Value::Null)` (or
//!   `.unwrap_or_default()`), which stores `null` when serialization fails: `flowhost_core::stored::encode`
//!   answers an error instead;
//! - no source file grows past [`LINE_BUDGET`] lines unless it says why in a comment holding [`OVER_BUDGET`];
//! - within a host crate, no module reaches back, through the modules it uses, to itself: a name two modules
//!   share lives in a module of its own.

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
                .filter(|(_, line)| serializes_to_null(line))
                .map(|(n, _)| format!("{}:{}", relative(path), n + 1))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(offenders.is_empty(), "use flowhost_core::stored::encode (an error, not `null`): {offenders:#?}");
}

/// Whether `line` turns a failed `to_value(..)` straight into `null`: `.unwrap_or(Value::Null)` or
/// `.unwrap_or_default()` right after the call's closing parenthesis.
fn serializes_to_null(line: &str) -> bool {
    line.match_indices("to_value(").any(|(at, call)| {
        let open = at + call.len() - 1;
        let mut depth = 0;
        for (offset, c) in line[open..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => continue,
            }
            if depth == 0 {
                let rest = &line[open + offset + 1..];
                return rest.starts_with(".unwrap_or_default()")
                    || (rest.starts_with(".unwrap_or(") && rest.contains("Null)"));
            }
        }
        false
    })
}

#[test]
fn the_null_check_reads_the_call() {
    assert!(serializes_to_null("let v = serde_json::to_value(&x).unwrap_or(Value::Null);"));
    assert!(serializes_to_null("serde_json::to_value(f(a, (b))).unwrap_or_default()"));
    assert!(!serializes_to_null("serde_json::to_value(self).ok().and_then(|v| v.as_str()).unwrap_or_default()"));
    assert!(!serializes_to_null("stored::encode(COLLECTION, &value)?"));
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

/// The top-level modules of one crate's `src/` and, for each, the other top-level modules it names as
/// `crate::<module>` outside comments.
fn module_uses(src: &Path) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut uses: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
    let mut files = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    for path in files {
        let relative = path.strip_prefix(src).expect("under src");
        let first = relative.components().next().expect("a file").as_os_str().to_string_lossy().to_string();
        let module = first.trim_end_matches(".rs").to_owned();
        if matches!(module.as_str(), "lib" | "main") {
            continue;
        }
        let named = uses.entry(module.clone()).or_default();
        for line in read(&path).lines() {
            let code = line.split("//").next().unwrap_or("");
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() && name != module {
                    named.insert(name);
                }
            }
        }
    }
    let modules: std::collections::BTreeSet<String> = uses.keys().cloned().collect();
    for named in uses.values_mut() {
        named.retain(|name| modules.contains(name));
    }
    uses
}

/// The modules of the crate at `src` that reach themselves through the modules they use.
fn circles_in(src: &Path) -> Vec<String> {
    let uses = module_uses(src);
    uses.keys()
        .filter(|start| {
            let mut seen = std::collections::BTreeSet::new();
            let mut frontier: Vec<&String> = uses[*start].iter().collect();
            while let Some(module) = frontier.pop() {
                if module == *start {
                    return true;
                }
                if seen.insert(module) {
                    frontier.extend(uses.get(module).into_iter().flatten());
                }
            }
            false
        })
        .cloned()
        .collect()
}

#[test]
fn no_module_imports_back_into_a_module_that_uses_it() {
    let mut circles = Vec::new();
    for crate_dir in std::fs::read_dir(repository_root().join("host")).expect("host/").flatten() {
        let src = crate_dir.path().join("src");
        if src.is_dir() {
            circles.extend(circles_in(&src).into_iter().map(|module| format!("{}: {module}", relative(&src))));
        }
    }
    assert!(circles.is_empty(), "these modules reach themselves through the modules they use: {circles:#?}");
}

/// The check finds a circle through three modules and a nested one, and ignores names in comments.
#[test]
fn a_circle_through_modules_is_found() {
    let dir = tempfile::tempdir().expect("temporary crate");
    let src = dir.path();
    std::fs::create_dir(src.join("c")).expect("nested module");
    std::fs::write(src.join("lib.rs"), "//! root\nmod a;\nmod b;\nmod c;\nuse crate::a::A;\n").expect("lib");
    std::fs::write(src.join("a.rs"), "use crate::b::B;\n// crate::d is only mentioned\n").expect("a");
    std::fs::write(src.join("b.rs"), "pub fn f() { crate::c::g(); }\n").expect("b");
    std::fs::write(src.join("c").join("mod.rs"), "pub use crate::a::A; // crate::b\n").expect("c");
    std::fs::write(src.join("d.rs"), "use crate::a::A;\n").expect("d");
    assert_eq!(circles_in(src), vec!["a", "b", "c"]);
    std::fs::write(src.join("c").join("mod.rs"), "pub fn g() {}\n").expect("c untied");
    assert!(circles_in(src).is_empty());
}
