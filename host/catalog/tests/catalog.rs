//! The catalog as a domain over the embedded store: registration, heartbeats, immutability across a whole
//! manifest, the dry-run check, the compatibility report, and the "new manifest" events.

use std::sync::Arc;
use std::time::Duration;

use flowhost_catalog::{subscribe, Catalog, CatalogError, ManifestChanged, ServiceManifest};
use flowhost_core::ports::Ports;
use flowhost_core::{Clock, ManualClock};
use flowhost_embedded::EmbeddedStore;
use futures::StreamExt;
use serde_json::json;

fn ports(dir: &std::path::Path, clock: Arc<ManualClock>) -> Ports {
    let clock: Arc<dyn Clock> = clock;
    EmbeddedStore::open(dir, 1, clock.clone()).unwrap().ports(clock)
}

fn manifest(version: &str, actions: serde_json::Value) -> ServiceManifest {
    serde_json::from_value(json!({
        "service": "notifications",
        "components": [{"id": "sender", "version": version, "actions": actions}, {"id": "templates", "version": "1.0.0"}],
        "service_sources": ["nats"],
    }))
    .unwrap()
}

async fn next(events: &mut futures::stream::BoxStream<'static, ManifestChanged>) -> ManifestChanged {
    tokio::time::timeout(Duration::from_secs(5), events.next()).await.expect("an event").expect("open")
}

#[tokio::test]
async fn registration_heartbeat_conflict_and_events() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let ports = ports(dir.path(), clock.clone());
    let catalog = Catalog::new(&ports);
    let mut events = subscribe(ports.subjects.as_ref()).await.unwrap();

    let v1 = manifest("1.0.0", json!([{"name": "send_webpush"}, {"name": "send_inapp"}]));
    catalog.check(&v1).await.expect("a new manifest passes the check");
    assert!(catalog.list().await.unwrap().is_empty(), "the check writes nothing");
    let registered = catalog.register(v1.clone()).await.unwrap();
    assert_eq!((registered.new.len(), registered.heartbeats), (2, 0));
    let first = next(&mut events).await;
    let second = next(&mut events).await;
    let mut announced = vec![first.component_id.clone(), second.component_id.clone()];
    announced.sort();
    assert_eq!(announced, ["sender", "templates"]);
    assert_eq!(first.service, "notifications");
    assert_eq!(first.content_hash.len(), 64);

    // The same manifest again is a heartbeat: last_seen_at moves, nothing is announced.
    clock.advance_ms(60_000);
    let registered = catalog.register(v1.clone()).await.unwrap();
    assert_eq!((registered.new.len(), registered.heartbeats), (0, 2));
    let view = catalog.service("notifications").await.unwrap().expect("registered");
    assert_eq!(view.components.len(), 2);
    assert!(view.components.iter().all(|row| row.last_seen_at != row.first_registered_at));

    // Other content under a registered version: refused whole, by the check and by the registration.
    let changed = manifest("1.0.0", json!([{"name": "send_webpush"}]));
    assert!(matches!(catalog.check(&changed).await, Err(CatalogError::Conflict(_))));
    assert!(matches!(catalog.register(changed).await, Err(CatalogError::Conflict(_))));

    // A new version: registered with its compatibility report and announced; the unchanged sibling is a heartbeat.
    clock.advance_ms(60_000);
    let v2 = manifest("2.0.0", json!([{"name": "send_webpush"}]));
    let registered = catalog.register(v2).await.unwrap();
    assert_eq!((registered.new.len(), registered.heartbeats), (1, 1));
    let event = next(&mut events).await;
    assert_eq!((event.component_id.as_str(), event.version.as_str()), ("sender", "2.0.0"));
    let latest = catalog.latest("sender").await.unwrap().expect("sender");
    assert_eq!(latest.version, "2.0.0");
    let report = latest.server_compatibility.expect("a report against 1.0.0");
    assert_eq!(report.removed_actions, ["send_inapp"]);
    assert!(!report.compatible);
    let versions: Vec<String> = catalog.list().await.unwrap().into_iter().map(|r| r.version).collect();
    assert_eq!(versions, ["1.0.0", "2.0.0", "1.0.0"]);
}

#[tokio::test]
async fn malformed_manifests_name_every_problem_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ports = ports(dir.path(), Arc::new(ManualClock::new(0)));
    let catalog = Catalog::new(&ports);
    let bad: ServiceManifest = serde_json::from_value(json!({
        "service": "a/b",
        "components": [{"id": "x", "version": "1"}, {"id": "x", "version": ""}],
        "service_sources": ["smtp"],
        "actions": [{"name": "go", "config_schema": {"type": 7}}],
    }))
    .unwrap();
    let Err(CatalogError::Invalid(problems)) = catalog.register(bad.clone()).await else { panic!("refused") };
    assert_eq!(problems.len(), 5, "{problems:?}");
    for needle in ["'/'", "listed twice", "version must be non-empty", "smtp", "config_schema"] {
        assert!(problems.iter().any(|p| p.contains(needle)), "{needle} in {problems:?}");
    }
    assert!(matches!(catalog.check(&bad).await, Err(CatalogError::Invalid(_))));
    assert!(catalog.list().await.unwrap().is_empty());
}
