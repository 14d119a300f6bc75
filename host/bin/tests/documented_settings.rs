//! The configuration tables in `docs/` are the settings' declarations, rendered: each page holds its sections'
//! tables between `<!-- settings:NAME -->` and `<!-- /settings:NAME -->`, and this test fails when a page and the
//! declarations differ. `FLOWHOST_BLESS=1 cargo test -p flowhost --test documented_settings` rewrites the pages
//! from the declarations. The tables are the process-wide ones (`flowhost_core::config::documentation`) and one per
//! section of the roles this binary runs (`flowhost::sections`).

use std::path::PathBuf;

const HEADER: &str = "| Setting (file) | Environment | Default | Bounds | Meaning |\n|---|---|---|---|---|\n";

fn docs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

/// Every table: its name, its page and its rows.
fn tables() -> Vec<(&'static str, &'static str, String)> {
    let mut tables = flowhost_core::config::documentation();
    tables.extend(flowhost::sections().iter().map(|section| (section.name, section.page, (section.documentation)())));
    tables
}

#[test]
fn every_documented_table_is_the_declarations() {
    let bless = std::env::var_os("FLOWHOST_BLESS").is_some();
    let mut differ = Vec::new();
    for (section, page, rows) in tables() {
        let path = docs().join(page);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (open, close) = (format!("<!-- settings:{section} -->\n"), format!("<!-- /settings:{section} -->"));
        let start = text.find(&open).unwrap_or_else(|| panic!("{page} has no {open:?}")) + open.len();
        let end = start + text[start..].find(&close).unwrap_or_else(|| panic!("{page} has no {close:?}"));
        let wanted = format!("{HEADER}{rows}");
        if text[start..end] != wanted {
            if bless {
                std::fs::write(&path, format!("{}{wanted}{}", &text[..start], &text[end..])).unwrap();
            } else {
                differ.push(format!("{page} ({section})"));
            }
        }
    }
    assert!(
        differ.is_empty(),
        "the settings tables of {differ:?} differ from the declarations; run \
         `FLOWHOST_BLESS=1 cargo test -p flowhost --test documented_settings` and review the diff"
    );
}

/// No two settings share a variable, and every one is in some table.
#[test]
fn every_setting_has_one_variable() {
    let mut seen = std::collections::BTreeSet::new();
    for (_, _, rows) in tables() {
        for row in rows.lines() {
            let env = row.split(" | ").nth(1).unwrap();
            assert!(env == "(file only)" || seen.insert(env.to_owned()), "{env} is declared twice");
        }
    }
    assert!(seen.len() > 150, "{} settings", seen.len());
}
