//! The compatibility report of a new component version against the one registered before it, and the order
//! of versions.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::model::{ActionDecl, Compatibility, ComponentManifestRow};

/// Orders versions as semantic versions when both parse, else as text.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (semver::Version::parse(a), semver::Version::parse(b)) {
        (Ok(a), Ok(b)) => a.cmp(&b),
        _ => a.cmp(b),
    }
}

/// How `current` differs from `previous`.
pub fn compatibility(previous: &ComponentManifestRow, current: &ComponentManifestRow) -> Compatibility {
    let before: BTreeMap<&str, &ActionDecl> = previous.actions.iter().map(|a| (a.name.as_str(), a)).collect();
    let after: BTreeMap<&str, &ActionDecl> = current.actions.iter().map(|a| (a.name.as_str(), a)).collect();
    let added_actions: Vec<String> = after.keys().filter(|k| !before.contains_key(*k)).map(|k| k.to_string()).collect();
    let removed_actions: Vec<String> =
        before.keys().filter(|k| !after.contains_key(*k)).map(|k| k.to_string()).collect();
    let mut changed_actions = Vec::new();
    let mut breaking_changes: Vec<String> =
        removed_actions.iter().map(|a| format!("action {a:?} was removed")).collect();
    for (name, action) in &after {
        let Some(old) = before.get(name) else { continue };
        if old.config_schema != action.config_schema {
            changed_actions.push(name.to_string());
            let what = format!("action {name:?}");
            schema_breaks(&what, old.config_schema.as_ref(), action.config_schema.as_ref(), &mut breaking_changes);
        }
    }
    // A node kind a flow places breaks it when it goes away or its configuration narrows, as an action does.
    for kind in &previous.node_kinds {
        let what = format!("node kind {:?}", kind.name);
        match current.node_kind(&kind.name) {
            None => breaking_changes.push(format!("{what} was removed")),
            Some(now) => {
                schema_breaks(&what, Some(&kind.config_schema), Some(&now.config_schema), &mut breaking_changes)
            }
        }
    }
    Compatibility {
        previous_version: previous.version.clone(),
        compatible: breaking_changes.is_empty(),
        added_actions,
        removed_actions,
        changed_actions,
        breaking_changes,
    }
}

/// Top-level object-schema changes that reject configurations the old schema accepted.
fn schema_breaks(what: &str, old: Option<&Value>, new: Option<&Value>, breaks: &mut Vec<String>) {
    let properties = |schema: Option<&Value>| -> Map<String, Value> {
        schema.and_then(|s| s.get("properties")).and_then(Value::as_object).cloned().unwrap_or_default()
    };
    let required = |schema: Option<&Value>| -> BTreeSet<String> {
        schema
            .and_then(|s| s.get("required"))
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    };
    let (old_props, new_props) = (properties(old), properties(new));
    for name in required(new).difference(&required(old)) {
        breaks.push(format!("{what}: config property {name:?} became required"));
    }
    for (name, schema) in &old_props {
        match new_props.get(name) {
            None => breaks.push(format!("{what}: config property {name:?} was removed")),
            Some(new_schema) if schema.get("type") != new_schema.get("type") => {
                breaks.push(format!("{what}: config property {name:?} changed type"))
            }
            Some(_) => {}
        }
    }
    if old.is_some() && new.is_some() && old.and_then(|s| s.get("type")) != new.and_then(|s| s.get("type")) {
        breaks.push(format!("{what}: config schema changed type"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(actions: Value) -> ComponentManifestRow {
        let actions: Vec<ActionDecl> = serde_json::from_value(actions).unwrap();
        ComponentManifestRow {
            service: "s".into(),
            component_id: "c".into(),
            version: "1.0.0".into(),
            actions,
            data_sources: vec![],
            service_sources: vec![],
            supports_nodes: vec![],
            node_kinds: vec![],
            transports: None,
            extra: Map::new(),
            content_hash: String::new(),
            first_registered_at: String::new(),
            last_seen_at: String::new(),
            registered_ms: 0,
            server_compatibility: None,
        }
    }

    #[test]
    fn compatibility_reports_breaking_changes() {
        let old = row(json!([
            {"name": "send", "config_schema": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}},
            {"name": "gone"}
        ]));
        let mut new = row(json!([
            {"name": "send", "config_schema": {"type": "object", "properties": {"a": {"type": "integer"}, "c": {"type": "string"}}, "required": ["c"]}},
            {"name": "fresh"}
        ]));
        new.version = "2.0.0".into();
        let report = compatibility(&old, &new);
        assert_eq!(report.previous_version, "1.0.0");
        assert_eq!(report.added_actions, vec!["fresh"]);
        assert_eq!(report.removed_actions, vec!["gone"]);
        assert_eq!(report.changed_actions, vec!["send"]);
        assert!(!report.compatible);
        assert_eq!(
            report.breaking_changes,
            vec![
                "action \"gone\" was removed",
                "action \"send\": config property \"c\" became required",
                "action \"send\": config property \"a\" changed type",
                "action \"send\": config property \"b\" was removed",
            ]
        );
        let same = compatibility(&old, &old);
        assert!(same.compatible && same.changed_actions.is_empty());
    }

    #[test]
    fn a_dropped_or_narrowed_node_kind_breaks() {
        let kinds = |value: Value| serde_json::from_value::<Vec<crate::NodeKindDecl>>(value).unwrap();
        let mut old = row(json!([]));
        old.node_kinds = kinds(json!([
            {"name": "score", "config_schema": {"type": "object", "properties": {"min": {"type": "number"}}}},
            {"name": "rank", "config_schema": {"type": "object"}}
        ]));
        let mut new = row(json!([]));
        new.node_kinds = kinds(json!([
            {"name": "score", "config_schema": {"type": "object", "properties": {"min": {"type": "string"}}}}
        ]));
        let report = compatibility(&old, &new);
        assert_eq!(
            report.breaking_changes,
            vec!["node kind \"score\": config property \"min\" changed type", "node kind \"rank\" was removed"]
        );
        assert!(compatibility(&old, &old).compatible);
    }

    #[test]
    fn versions_order_semantically() {
        assert_eq!(compare_versions("1.10.0", "1.9.0"), Ordering::Greater);
        assert_eq!(compare_versions("b", "a"), Ordering::Greater);
    }
}
