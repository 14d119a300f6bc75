//! The runtime against real components built from `plugins/` (noop and the fixtures of `plugins/fixtures/`):
//! every failure a guest can cause is stopped and classified, and the runtime keeps serving afterwards.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowhost_core::ManualClock;
use flowhost_runtime::{Capability, InvokeError, Limits, LoadError, Plugin, Runtime, RuntimeConfig};
use flowhost_runtime_fixtures as fixtures;

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).expect("runtime")
}

async fn load(runtime: &Runtime, name: &str) -> Plugin {
    runtime.load(&fixtures::bytes(name), &[]).await.unwrap_or_else(|error| panic!("load {name}: {error}"))
}

/// After any failure the same runtime still loads and serves the noop plugin.
async fn still_serves(runtime: &Runtime) {
    let noop = load(runtime, "noop").await;
    assert_eq!(noop.invoke("noop", r#"{"still":"alive"}"#).await, Ok(r#"{"still":"alive"}"#.to_string()));
}

#[tokio::test]
async fn noop_returns_its_input_and_its_manifest_is_read() {
    let runtime = runtime();
    let noop = load(&runtime, "noop").await;
    let manifest = noop.manifest();
    assert_eq!((manifest.id.as_str(), manifest.version.as_str()), ("noop", "0.1.0"));
    assert_eq!(manifest.actions.len(), 1);
    assert_eq!(manifest.actions[0].name, "noop");
    assert!(noop.capabilities().is_empty());

    let input = r#"{"player":"p-1","amount":12.5,"tags":["a","b"]}"#;
    assert_eq!(noop.invoke("noop", input).await, Ok(input.to_string()));
    // A fresh instance per call: the same plugin serves many calls.
    for i in 0..20 {
        assert_eq!(noop.invoke("noop", &i.to_string()).await, Ok(i.to_string()));
    }
    assert_eq!(noop.invoke("nope", "{}").await, Err(InvokeError::UnknownAction("nope".into())));
}

#[tokio::test]
async fn an_infinite_loop_is_stopped_by_the_deadline() {
    let runtime = runtime();
    let spin = load(&runtime, "spin").await;
    let limits = Limits { timeout: Duration::from_millis(100), fuel: None, ..Limits::default() };
    let started = Instant::now();
    assert_eq!(spin.invoke_with_limits("spin", "{}", &limits).await, Err(InvokeError::Timeout(100)));
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(100) && elapsed < Duration::from_secs(2), "{elapsed:?}");
    still_serves(&runtime).await;
}

/// A guest waiting in a host call (a WASI sleep of an hour) runs no wasm, so no epoch tick reaches it: every
/// export still ends with `timeout` at its deadline (an action, a data source, a node-kind batch and the
/// event-by-event fallback after it, a projector), with its instance freed, and the runtime serves on.
#[tokio::test]
async fn a_guest_waiting_in_a_host_call_ends_at_its_deadline() {
    // Without the deadline the calls below wait an hour: fail in a minute instead.
    tokio::time::timeout(Duration::from_secs(60), guests_waiting_in_host_calls_end_at_their_deadline())
        .await
        .expect("every sleeping call ended within a minute");
}

async fn guests_waiting_in_host_calls_end_at_their_deadline() {
    let mut config = RuntimeConfig::default();
    config.limits.timeout = Duration::from_millis(200);
    config.pool.max_instances = 8;
    let runtime = Runtime::new(config).expect("runtime");
    let sleeper = load(&runtime, "sleeper").await;
    let within_the_deadline = |started: Instant| {
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(200) && elapsed < Duration::from_secs(3), "{elapsed:?}");
    };
    let started = Instant::now();
    assert_eq!(sleeper.invoke("sleep", "{}").await, Err(InvokeError::Timeout(200)));
    within_the_deadline(started);
    let started = Instant::now();
    assert_eq!(sleeper.data_source("slow", &[]).await, Err(InvokeError::Timeout(200)));
    within_the_deadline(started);
    let started = Instant::now();
    let events = vec![flowhost_runtime::NodeEvent { event: "{}".into(), ..Default::default() }; 3];
    let results = sleeper.evaluate("condition", "{}", &flowhost_runtime::BatchContext::default(), events).await;
    assert_eq!(results, vec![Err(InvokeError::Timeout(200)); 3]);
    // The batch, then each of its three events alone: four deadlines.
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(800) && elapsed < Duration::from_secs(6), "{elapsed:?}");

    let compiled = runtime.compile(&fixtures::bytes("sleepy_projector")).expect("compile");
    let projector = runtime.load_projector(compiled, &[]).await.expect("load projector");
    let started = Instant::now();
    assert_eq!(projector.project(None, "{}").await, Err(InvokeError::Timeout(200)));
    within_the_deadline(started);

    // More sleeping calls at once than the pool has instances: each ends at its deadline and gives its
    // instance back, so the pool is not exhausted afterwards.
    let calls: Vec<_> = (0..40).map(|_| sleeper.invoke("sleep", "{}")).collect();
    for result in futures::future::join_all(calls).await {
        assert!(matches!(result, Err(InvokeError::Timeout(200) | InvokeError::Busy(_))), "{result:?}");
    }
    assert_eq!(sleeper.invoke("nap", "{}").await, Ok(r#"{"awake":true}"#.into()));
    still_serves(&runtime).await;
}

#[tokio::test]
async fn an_infinite_loop_is_stopped_by_fuel() {
    let runtime = runtime();
    let spin = load(&runtime, "spin").await;
    let limits = Limits { timeout: Duration::from_secs(60), fuel: Some(10_000_000), ..Limits::default() };
    assert_eq!(spin.invoke_with_limits("spin", "{}", &limits).await, Err(InvokeError::OutOfFuel));
    // The default limits stop it too (whichever of fuel and the 1 s deadline comes first).
    let error = spin.invoke("spin", "{}").await.unwrap_err();
    assert!(matches!(error, InvokeError::OutOfFuel | InvokeError::Timeout(_)), "{error:?}");
    still_serves(&runtime).await;
}

#[tokio::test]
async fn a_memory_bomb_is_stopped_by_the_memory_cap() {
    let runtime = runtime();
    let balloon = load(&runtime, "balloon").await;
    let limits = Limits { memory_bytes: 16 << 20, ..Limits::default() };
    assert_eq!(balloon.invoke_with_limits("inflate", "{}", &limits).await, Err(InvokeError::MemoryLimit(16 << 20)));
    assert_eq!(balloon.invoke("inflate", "{}").await, Err(InvokeError::MemoryLimit(64 << 20)));
    still_serves(&runtime).await;
}

#[tokio::test]
async fn traps_are_classified() {
    let runtime = runtime();
    let trap = load(&runtime, "trap").await;
    for action in ["panic", "unreachable"] {
        let error = trap.invoke(action, "{}").await.unwrap_err();
        let InvokeError::Trap(message) = &error else { panic!("{action}: {error:?}") };
        assert!(message.contains("unreachable"), "{action}: {message}");
    }
    // WASI is linked (locked down): stderr goes into the log instead of trapping.
    assert_eq!(trap.invoke("wasi-stderr", "{}").await, Ok("null".into()));
    still_serves(&runtime).await;
}

#[tokio::test]
async fn garbage_output_is_classified() {
    let runtime = runtime();
    let garbage = load(&runtime, "garbage").await;
    let error = garbage.invoke("not-json", "{}").await.unwrap_err();
    assert!(matches!(error, InvokeError::InvalidOutput(_)), "{error:?}");

    // Within the limit: accepted; one byte over: refused.
    let limits = Limits { max_output_bytes: 1000, ..Limits::default() };
    let output = garbage.invoke_with_limits("huge", r#"{"size":1000}"#, &limits).await.expect("1000 bytes");
    assert_eq!(output.len(), 1000);
    assert_eq!(
        garbage.invoke_with_limits("huge", r#"{"size":1001}"#, &limits).await,
        Err(InvokeError::OutputTooLarge { size: 1001, limit: 1000 })
    );
    // The default limit is 1 MiB.
    let error = garbage.invoke("huge", r#"{"size":2097152}"#).await.unwrap_err();
    assert_eq!(error, InvokeError::OutputTooLarge { size: 2 << 20, limit: 1 << 20 });
    still_serves(&runtime).await;
}

#[tokio::test]
async fn guest_errors_keep_their_outcome_class() {
    let runtime = runtime();
    let garbage = load(&runtime, "garbage").await;
    let fail = |outcome: &str| format!(r#"{{"outcome":"{outcome}","message":"because {outcome}"}}"#);
    assert_eq!(
        garbage.invoke("fail", &fail("skip-forward")).await,
        Err(InvokeError::SkipForward("because skip-forward".into()))
    );
    assert_eq!(
        garbage.invoke("fail", &fail("permanent")).await,
        Err(InvokeError::Permanent("because permanent".into()))
    );
    let retryable = garbage.invoke("fail", &fail("retryable")).await.unwrap_err();
    assert_eq!(retryable, InvokeError::Retryable("because retryable".into()));
    assert!(retryable.is_retryable());
    // Input the SDK cannot decode is a permanent error naming the action.
    let error = garbage.invoke("huge", r#"{"size":"big"}"#).await.unwrap_err();
    let InvokeError::Permanent(message) = &error else { panic!("{error:?}") };
    assert!(message.contains("invalid input for huge"), "{message}");
}

#[tokio::test]
async fn capabilities_are_linked_only_when_granted() {
    let clock = Arc::new(ManualClock::new(1_700_000_000_123));
    let runtime = Runtime::with_clock(RuntimeConfig::default(), clock.clone()).expect("runtime");
    let wasm = fixtures::bytes("caps");

    let error = runtime.load(&wasm, &[Capability::Log]).await.unwrap_err();
    assert!(matches!(&error, LoadError::NotGranted { capability } if capability == "clock"), "{error:?}");
    let error = runtime.load(&wasm, &[]).await.unwrap_err();
    assert!(matches!(error, LoadError::NotGranted { .. }), "{error:?}");

    let caps = runtime.load(&wasm, &Capability::ALL).await.expect("load caps");
    let mut imported = caps.capabilities().to_vec();
    imported.sort();
    assert_eq!(imported, vec![Capability::Log, Capability::Clock]);
    assert_eq!(caps.invoke("now", "{}").await, Ok(r#"{"now_ms":1700000000123}"#.to_string()));
    clock.advance_ms(1000);
    assert_eq!(caps.invoke("now", "{}").await, Ok(r#"{"now_ms":1700000001123}"#.to_string()));
}

#[tokio::test]
async fn documents_are_scoped_to_the_plugin_and_data_sources_get_only_declared_params() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let clock: Arc<dyn flowhost_core::Clock> = Arc::new(flowhost_core::SystemClock);
    let store = flowhost_embedded::EmbeddedStore::open(dir.path(), 1, clock.clone()).expect("embedded store");
    let documents = store.documents();
    let registry = prometheus::Registry::new();
    let metrics = flowhost_runtime::RuntimeMetrics::register(&registry).expect("metrics");
    let host =
        Runtime::with_host(RuntimeConfig::default(), clock, Some(documents.clone()), Some(metrics)).expect("runtime");
    let v1 = host.load(&fixtures::bytes("greeter"), &Capability::ALL).await.expect("load greeter");
    let v2 = host.load(&fixtures::bytes("greeter_v2"), &Capability::ALL).await.expect("load greeter_v2");
    assert_eq!((v1.manifest().version.as_str(), v2.manifest().version.as_str()), ("0.1.0", "0.2.0"));
    assert!(v1.capabilities().contains(&Capability::Documents) && v1.has_data_sources());

    assert_eq!(v1.invoke("count", r#"{"key":"visits"}"#).await, Ok(r#"{"count":1,"version":"0.1.0"}"#.into()));
    // Documents belong to the plugin id, so the next version sees them.
    assert_eq!(v2.invoke("count", r#"{"key":"visits"}"#).await, Ok(r#"{"count":2,"version":"0.2.0"}"#.into()));
    let stored = documents.get(flowhost_core::collections::PLUGIN_DOCUMENTS, "greeter/visits").await.unwrap();
    assert_eq!(stored.unwrap()["value"], serde_json::json!(2));
    let error = v1.invoke("count", &format!(r#"{{"key":"{}"}}"#, "k".repeat(300))).await.unwrap_err();
    assert!(matches!(&error, InvokeError::Retryable(m) if m.contains("document key")), "{error:?}");

    let params = [("lang".to_string(), "fr".to_string()), ("secret".to_string(), "x".to_string())];
    assert_eq!(
        v1.data_source("greetings", &params).await,
        Ok(r#"{"params":{"lang":"fr"},"version":"0.1.0"}"#.to_string())
    );
    assert_eq!(v1.data_source("nope", &[]).await, Err(InvokeError::UnknownDataSource("nope".into())));
    // Every call is counted by plugin and result, and timed.
    let counted = |result: &str| {
        registry
            .gather()
            .iter()
            .filter(|family| family.name() == "flowhost_plugin_invocations_total")
            .flat_map(|family| family.get_metric().to_vec())
            .filter(|m| m.get_label().iter().any(|l| l.name() == "result" && l.value() == result))
            .map(|m| m.get_counter().get_value())
            .sum::<f64>()
    };
    assert_eq!((counted("ok"), counted("retryable"), counted("permanent")), (3.0, 1.0, 1.0));

    // Without a document store the capability answers with an error the SDK reports as retryable.
    let bare = runtime().load(&fixtures::bytes("greeter"), &Capability::ALL).await.unwrap();
    let error = bare.invoke("count", r#"{"key":"visits"}"#).await.unwrap_err();
    assert!(matches!(&error, InvokeError::Retryable(m) if m.contains("no document store")), "{error:?}");
}

#[tokio::test]
async fn the_compile_cache_is_reused_and_damage_is_repaired() {
    let runtime = runtime();
    let dir = tempfile::tempdir().expect("temporary directory");
    let wasm = fixtures::bytes("noop");
    let compiled = runtime.compile_cached(&wasm, dir.path()).expect("first compile");
    let plugin = runtime.load_compiled(compiled, &[]).await.expect("load");
    assert_eq!(plugin.invoke("noop", "1").await, Ok("1".into()));
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let cached = &entries[0];
    assert!(cached.to_string_lossy().ends_with(".cwasm"), "{cached:?}");

    // A compile always rewrites the entry (a new file renamed over it); a cache hit leaves the file alone.
    let written = std::fs::metadata(cached).unwrap().modified().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let compiled = runtime.compile_cached(&wasm, dir.path()).expect("cached load");
    assert_eq!(std::fs::metadata(cached).unwrap().modified().unwrap(), written, "the entry was read, not rewritten");
    assert_eq!(runtime.load_compiled(compiled, &[]).await.unwrap().invoke("noop", "2").await, Ok("2".into()));

    // A damaged entry is not trusted: compiled again and rewritten.
    let mut file = std::fs::read(cached).unwrap();
    let last = file.len() - 1;
    file[last] ^= 0xff;
    std::fs::write(cached, &file).unwrap();
    let compiled = runtime.compile_cached(&wasm, dir.path()).expect("recompile");
    assert_eq!(runtime.load_compiled(compiled, &[]).await.unwrap().invoke("noop", "3").await, Ok("3".into()));
    assert_ne!(std::fs::read(cached).unwrap(), file, "the damaged entry was rewritten");
}

/// A projector folds records into a key's state in a fresh instance per call, and rejects what it refuses;
/// an action plugin is not a projector and a projector is not an action plugin.
#[tokio::test]
async fn a_projector_folds_records_into_state_and_rejects_out_of_order_ones() {
    let runtime = runtime();
    let compiled = runtime.compile(&fixtures::bytes("visits")).expect("compile");
    let visits = runtime.load_projector(compiled, &Capability::ALL).await.expect("load projector");
    assert_eq!((visits.manifest().id.as_str(), visits.manifest().actions.len()), ("visits", 0));

    let state = visits.project(None, r#"{"at_ms": 100}"#).await.expect("first visit");
    assert_eq!(state, r#"{"visits":1,"last_ms":100}"#);
    let state = visits.project(Some(&state), r#"{"at_ms": 250}"#).await.expect("second visit");
    assert_eq!(state, r#"{"visits":2,"last_ms":250}"#);
    let error = visits.project(Some(&state), r#"{"at_ms": 200}"#).await.unwrap_err();
    assert!(matches!(&error, InvokeError::Permanent(m) if m.contains("older than the state")), "{error:?}");
    let error = visits.project(None, "not json").await.unwrap_err();
    assert!(matches!(&error, InvokeError::Permanent(m) if m.contains("bad record")), "{error:?}");

    // The component store loads every world: as a plain plugin, a projector projects and has no action.
    let plugin = runtime.load(&fixtures::bytes("visits"), &Capability::ALL).await.expect("load as a plugin");
    assert!(plugin.is_projector());
    assert_eq!(plugin.project(None, r#"{"at_ms": 1}"#).await, Ok(r#"{"visits":1,"last_ms":1}"#.into()));
    assert_eq!(plugin.invoke("visits", "{}").await, Err(InvokeError::UnknownAction("visits".into())));
    let noop = load(&runtime, "noop").await;
    assert_eq!(noop.project(None, "{}").await, Err(InvokeError::UnknownAction("project".into())));
    let noop = runtime.compile(&fixtures::bytes("noop")).unwrap();
    let error = runtime.load_projector(noop, &Capability::ALL).await.unwrap_err();
    assert!(matches!(error, LoadError::Link(_)), "an action plugin has no project: {error:?}");
}

/// The runtime reads a manifest's `config_schema` as given; judging it is the component catalog's job (an upload
/// of this fixture is refused there, see tests/tests/plugins.rs).
#[tokio::test]
async fn a_config_schema_is_carried_as_declared() {
    let plugin = load(&runtime(), "badschema").await;
    assert_eq!(plugin.manifest().actions[0].config_schema, Some(serde_json::json!({ "type": "nope" })));
    assert_eq!(plugin.invoke("noop", "[1]").await, Ok("[1]".into()));
}

#[tokio::test]
async fn a_capability_missing_from_the_manifest_is_refused() {
    let runtime = runtime();
    let error = runtime.load(&fixtures::bytes("sneaky"), &Capability::ALL).await.unwrap_err();
    assert!(matches!(&error, LoadError::Undeclared { capability } if capability == "log"), "{error:?}");
    still_serves(&runtime).await;
}

#[tokio::test]
async fn malformed_components_are_refused() {
    let runtime = runtime();
    for bytes in [b"not wasm at all".to_vec(), b"\0asm\x01\0\0\0".to_vec(), fixtures::bytes("noop")[..100].to_vec()] {
        let error = runtime.load(&bytes, &Capability::ALL).await.unwrap_err();
        assert!(matches!(error, LoadError::InvalidComponent(_)), "{error:?}");
    }
    still_serves(&runtime).await;
}

#[tokio::test]
#[allow(unsafe_code)]
async fn a_precompiled_component_loads_and_runs() {
    let runtime = runtime();
    let precompiled = runtime.precompile(&fixtures::bytes("noop")).expect("precompile");
    // SAFETY: the bytes come straight from `precompile` of this runtime.
    let noop = unsafe { runtime.load_precompiled(&precompiled, &[]) }.await.expect("load precompiled");
    assert_eq!(noop.invoke("noop", "[1]").await, Ok("[1]".to_string()));
    // A `.wasm` is not a precompiled artifact.
    // SAFETY: wasmtime rejects bytes without its header before running anything.
    let error = unsafe { runtime.load_precompiled(&fixtures::bytes("noop"), &[]) }.await.unwrap_err();
    assert!(matches!(error, LoadError::InvalidComponent(_)), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_invocations_are_isolated() {
    let runtime = runtime();
    let noop = load(&runtime, "noop").await;
    let spin = load(&runtime, "spin").await;
    let limits = Limits { timeout: Duration::from_millis(200), fuel: None, ..Limits::default() };
    let spinning = tokio::spawn(async move { spin.invoke_with_limits("spin", "{}", &limits).await });
    let mut calls = Vec::new();
    for i in 0..50 {
        let noop = noop.clone();
        calls.push(tokio::spawn(async move { noop.invoke("noop", &format!("[{i}]")).await }));
    }
    for (i, call) in calls.into_iter().enumerate() {
        assert_eq!(call.await.expect("join"), Ok(format!("[{i}]")));
    }
    assert_eq!(spinning.await.expect("join"), Err(InvokeError::Timeout(200)));
}

/// A busy guest yields to the executor every epoch tick: on a single-threaded runtime, another invocation
/// finishes while it spins.
#[tokio::test(flavor = "current_thread")]
async fn a_spinning_guest_does_not_hold_the_thread() {
    let runtime = runtime();
    let noop = load(&runtime, "noop").await;
    let spin = load(&runtime, "spin").await;
    let limits = Limits { timeout: Duration::from_millis(500), fuel: None, ..Limits::default() };
    let started = Instant::now();
    // Both wait in the run queue: the spinning guest runs first, until the next epoch tick.
    let spinning =
        tokio::spawn(async move { (spin.invoke_with_limits("spin", "{}", &limits).await, started.elapsed()) });
    let quick = tokio::spawn(async move { (noop.invoke("noop", "[7]").await, started.elapsed()) });
    let (spin_result, spin_done) = spinning.await.expect("join");
    let (noop_result, noop_done) = quick.await.expect("join");
    assert_eq!(spin_result, Err(InvokeError::Timeout(500)));
    assert_eq!(noop_result, Ok("[7]".to_string()));
    // On one thread, the quick call can only finish first if the spinning guest yielded at an epoch tick.
    assert!(noop_done < spin_done, "noop finished at {noop_done:?}, the spinning guest at {spin_done:?}");
}

/// Every crate in `plugins/fixtures` is loaded by name by a test of this directory (`host/runtime/tests`) or
/// of the integration tests (`tests/tests`): the check reads the test sources, so a fixture whose test is
/// removed fails here too, not only a new fixture (a hand-kept list would keep passing). `greeter-v2` is
/// built as the component `greeter_v2`, so both spellings count.
#[test]
fn every_fixture_has_a_test() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = String::new();
    for dir in [root.join("tests"), root.join("../../tests/tests")] {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display())) {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|ext| ext == "rs") {
                sources.push_str(&std::fs::read_to_string(&path).expect("test source"));
            }
        }
    }
    let mut untested = Vec::new();
    for entry in std::fs::read_dir(fixtures::fixtures_source_dir()).expect("plugins/fixtures") {
        let name = entry.expect("entry").file_name().to_string_lossy().into_owned();
        let component = name.replace('-', "_");
        let referenced = [&name, &component].iter().any(|name| sources.contains(&format!("\"{name}\"")));
        if !referenced {
            untested.push(name);
        }
    }
    assert!(untested.is_empty(), "fixtures no test loads by name (\"<name>\"): {untested:?}");
    for name in fixtures::COMPONENTS {
        assert!(fixtures::path(name).exists(), "{name} was not built");
    }
}
