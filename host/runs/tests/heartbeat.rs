//! The in-process service's manifest heartbeat (spec 001: a service posts its manifest on boot and every
//! 5 minutes): the service endpoint re-registers the active component's catalog manifest every heartbeat, so
//! its catalog row's `last_seen_at` follows the clock. The interval is shortened here; the clock is the
//! injected one, so the test never waits minutes.

use std::sync::Arc;
use std::time::Duration;

use flowhost_catalog::{Catalog, ComponentManifestRow};
use flowhost_components::{ComponentStore, StoreConfig};
use flowhost_core::digest::iso_utc;
use flowhost_core::ports::Ports;
use flowhost_core::{Clock, ManualClock};
use flowhost_embedded::EmbeddedStore;
use flowhost_runs::endpoint::MANIFEST_HEARTBEAT;
use flowhost_runs::ServiceEndpoint;
use flowhost_runtime::{Runtime, RuntimeConfig};
use tokio_util::sync::CancellationToken;

const T0: i64 = 1_790_000_000_000;

async fn noop_row(ports: &Ports) -> ComponentManifestRow {
    let rows = Catalog::new(ports).list().await.unwrap();
    rows.into_iter().find(|row| row.component_id == "noop").expect("the noop component is registered")
}

/// Waits (a few seconds at most) until the noop row was last seen at `at_ms`.
async fn seen_at(ports: &Ports, at_ms: i64) {
    let expected = iso_utc(at_ms);
    for _ in 0..200 {
        if noop_row(ports).await.last_seen_at == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("last_seen_at stayed {:?}, expected {expected:?}", noop_row(ports).await.last_seen_at);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_posts_its_manifest_on_start_and_every_heartbeat() {
    assert_eq!(MANIFEST_HEARTBEAT, Duration::from_secs(300), "the spec's interval");
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(T0));
    let shared: Arc<dyn Clock> = clock.clone();
    let ports = EmbeddedStore::open(dir.path(), 1, shared.clone()).unwrap().ports(shared);
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let store = Arc::new(ComponentStore::new(ports.clone(), runtime, StoreConfig::default()));
    let noop = flowhost_runtime_fixtures::bytes("noop");
    let installed = store.install_bundled(&[("noop", &noop)]).await.unwrap();
    let service = installed[0].0.manifest().service.clone().unwrap_or_else(|| "noop".to_owned());
    let first = noop_row(&ports).await;
    assert_eq!((first.first_registered_at.as_str(), first.last_seen_at.as_str()), (&*iso_utc(T0), &*iso_utc(T0)));

    // Five minutes later the service starts: it posts its manifest at once (a heartbeat, nothing new).
    clock.advance_ms(5 * 60_000);
    let endpoint = ServiceEndpoint::new(store, ports.clone(), "heartbeat", "http://127.0.0.1:8787")
        .with_heartbeat(Duration::from_millis(50));
    let shutdown = CancellationToken::new();
    let serving = tokio::spawn(endpoint.run(service, shutdown.clone()));
    seen_at(&ports, T0 + 5 * 60_000).await;

    // And again every heartbeat while it runs.
    clock.advance_ms(5 * 60_000);
    seen_at(&ports, T0 + 10 * 60_000).await;
    let row = noop_row(&ports).await;
    assert_eq!(row.first_registered_at, iso_utc(T0), "a heartbeat registers nothing new");
    assert_eq!(Catalog::new(&ports).list().await.unwrap().len(), 1);

    shutdown.cancel();
    serving.await.unwrap();
    // Stopped: the clock moves, the row does not.
    clock.advance_ms(5 * 60_000);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(noop_row(&ports).await.last_seen_at, iso_utc(T0 + 10 * 60_000));
}
