//! Instance reuse (`reuse_instances` in the manifest) against the `tally` fixture (an action) and the
//! `tally-projector` fixture (a projector), whose static counters show which instance served a call: an instance serves one tenant only, every call gets its own deadline and fuel,
//! an instance whose call failed in the host's sense (trap, timeout, fuel, memory) is never used again, a guest's
//! own error keeps it, and the runtime keeps at most a quarter of its pool idle.

use std::time::Duration;

use flowhost_runtime::{InvocationContext, InvokeError, Limits, Plugin, PoolConfig, Runtime, RuntimeConfig};
use flowhost_runtime_fixtures as fixtures;
use serde_json::Value;

async fn tally(config: RuntimeConfig) -> (Runtime, Plugin) {
    let runtime = Runtime::new(config).expect("runtime");
    let plugin = runtime.load(&fixtures::bytes("tally"), &[]).await.expect("load tally");
    assert!(plugin.manifest().reuse_instances);
    (runtime, plugin)
}

fn tenant(id: Option<&str>) -> InvocationContext {
    InvocationContext { tenant_id: id.map(str::to_owned), ..InvocationContext::default() }
}

/// The calls the serving instance has made, this one included.
async fn count(plugin: &Plugin, tenant_id: Option<&str>) -> u64 {
    let output = plugin.invoke_in(&tenant(tenant_id), "count", "{}", plugin.limits()).await.expect("count");
    let output: Value = serde_json::from_str(&output).expect("JSON");
    assert_eq!(output["tenant"].as_str(), tenant_id);
    output["calls"].as_u64().expect("calls")
}

#[tokio::test]
async fn an_instance_serves_one_tenant_only() {
    let (_runtime, plugin) = tally(RuntimeConfig::default()).await;
    assert_eq!(count(&plugin, Some("a")).await, 1);
    assert_eq!(count(&plugin, Some("a")).await, 2);
    assert_eq!(count(&plugin, Some("b")).await, 1);
    assert_eq!(count(&plugin, None).await, 1);
    assert_eq!(count(&plugin, Some("a")).await, 3);
    assert_eq!(count(&plugin, Some("b")).await, 2);
    // A one-off call without a tenant (`Plugin::invoke`) reuses the tenant-less instance.
    let output: Value = serde_json::from_str(&plugin.invoke("count", "{}").await.expect("count")).expect("JSON");
    assert_eq!(output["calls"], 2);
}

#[tokio::test]
async fn a_failed_instance_is_never_used_again() {
    let (_runtime, plugin) = tally(RuntimeConfig::default()).await;
    let a = tenant(Some("a"));
    assert_eq!(count(&plugin, Some("a")).await, 1);
    // The guest's own error is a normal return: the instance is kept.
    assert_eq!(
        plugin.invoke_in(&a, "fail", "{}", plugin.limits()).await,
        Err(InvokeError::Permanent("failed on call 2".into()))
    );
    assert_eq!(count(&plugin, Some("a")).await, 3);

    // A trap, the deadline, fuel and the memory cap each end the instance: the next call starts from a fresh one.
    assert!(matches!(plugin.invoke_in(&a, "panic", "{}", plugin.limits()).await, Err(InvokeError::Trap(_))));
    assert_eq!(count(&plugin, Some("a")).await, 1);

    let timeout = Limits { timeout: Duration::from_millis(100), fuel: None, ..plugin.limits().clone() };
    assert_eq!(plugin.invoke_in(&a, "spin", "{}", &timeout).await, Err(InvokeError::Timeout(100)));
    assert_eq!(count(&plugin, Some("a")).await, 1);

    let fuel = Limits { fuel: Some(1_000_000), ..plugin.limits().clone() };
    assert_eq!(plugin.invoke_in(&a, "spin", "{}", &fuel).await, Err(InvokeError::OutOfFuel));
    assert_eq!(count(&plugin, Some("a")).await, 1);

    // A store's memory cap is part of what an idle instance is kept for: a call with another cap gets its own.
    let small = Limits { memory_bytes: 16 << 20, ..plugin.limits().clone() };
    assert_eq!(plugin.invoke_in(&a, "grow", "{}", &small).await, Err(InvokeError::MemoryLimit(16 << 20)));
    assert_eq!(plugin.invoke_in(&a, "count", "{}", &small).await.map(|out| out.contains(r#""calls":1"#)), Ok(true));
    assert_eq!(count(&plugin, Some("a")).await, 2);
}

#[tokio::test]
async fn every_call_of_a_kept_instance_has_its_own_deadline_and_fuel() {
    let (_runtime, plugin) = tally(RuntimeConfig::default()).await;
    let limits = Limits { fuel: Some(3_000_000), timeout: Duration::from_millis(200), ..plugin.limits().clone() };
    // The most rounds of `burn` one call can run on the fuel, each probe on a fresh instance (a tenant of its
    // own): a call of that many rounds spends nearly all of it, so two calls on fuel left over would not fit.
    let (mut fits, mut fails) = (0_u64, 1_u64 << 24);
    while fails - fits > 1_000 {
        let rounds = (fits + fails) / 2;
        let probe = tenant(Some(&format!("probe-{rounds}")));
        match plugin.invoke_in(&probe, "burn", &rounds.to_string(), &limits).await {
            Ok(_) => fits = rounds,
            Err(InvokeError::OutOfFuel) => fails = rounds,
            Err(other) => panic!("burn {rounds}: {other:?}"),
        }
    }
    assert!(fits > 10_000, "one call must burn a measurable share of the fuel ({fits} rounds fit)");
    let a = tenant(Some("a"));
    for _ in 0..4 {
        assert_eq!(plugin.invoke_in(&a, "burn", &fits.to_string(), &limits).await, Ok(fits.to_string()));
    }
    // Past the first call's deadline, a kept instance still runs a call within its own.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(plugin.invoke_in(&a, "burn", &fits.to_string(), &limits).await, Ok(fits.to_string()));
    assert_eq!(count(&plugin, Some("a")).await, 6);
}

#[tokio::test]
async fn at_most_a_quarter_of_the_pool_is_idle() {
    // A pool of 4 instances keeps at most one idle.
    let pool = PoolConfig { max_instances: 4, ..PoolConfig::default() };
    let (_runtime, plugin) = tally(RuntimeConfig { pool, ..RuntimeConfig::default() }).await;
    assert_eq!(count(&plugin, Some("a")).await, 1);
    assert_eq!(count(&plugin, Some("b")).await, 1);
    assert_eq!(count(&plugin, Some("a")).await, 2);
    assert_eq!(count(&plugin, Some("b")).await, 1);
    // The idle one leaves room for as many calls at once as the pool has slots left.
    let calls: Vec<_> = ["c", "d", "e"].iter().map(|id| count(&plugin, Some(id))).collect();
    assert_eq!(futures::future::join_all(calls).await, [1, 1, 1]);
}

/// A projector that declares `reuse_instances` projects in a kept instance; its own error keeps the instance,
/// a trap ends it.
#[tokio::test]
async fn a_projector_reuses_its_instance_until_it_fails() {
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let plugin = runtime.load(&fixtures::bytes("tally_projector"), &[]).await.expect("load tally-projector");
    assert!(plugin.is_projector() && plugin.manifest().reuse_instances);
    let calls = async || -> u64 {
        let output = plugin.project(None, "{}").await.expect("project");
        serde_json::from_str::<Value>(&output).expect("JSON")["calls"].as_u64().expect("calls")
    };
    assert_eq!(calls().await, 1);
    assert_eq!(calls().await, 2);
    assert_eq!(plugin.project(Some("{}"), "\"fail\"").await, Err(InvokeError::Permanent("failed on call 3".into())));
    assert_eq!(calls().await, 4);
    assert!(matches!(plugin.project(None, "\"panic\"").await, Err(InvokeError::Trap(_))));
    assert_eq!(calls().await, 1, "a trapped instance is never used again");
}
