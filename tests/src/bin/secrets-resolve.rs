//! What reading the configuration's secrets from Key Vault adds to a start: every `*_SECRET_NAME` of the spec
//! (Redis host and password, the five push settings) resolved against the loopback stand-in vault, with a new
//! client each time (cold: one token request, then one GET per secret) and with one client whose token is
//! cached (warm: GETs only). Prints a table; the stand-in is on loopback, so the figures are Flowhost's own
//! cost, not a real vault's latency.
//!
//!     cargo run --release -p flowhost-tests --bin secrets-resolve [-- RUNS]

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowhost_bench::Report;
use flowhost_core::config::Config;
use flowhost_core::SystemClock;
use flowhost_keyvault::KeyVault;
use flowhost_tests::keyvault::{CredentialKind, StandInVault};

const NAMES: [(&str, &str); 7] = [
    ("redis-host", "127.0.0.1:6379"),
    ("redis-password", "redis-password-value"),
    ("callers", r#"{"callers":[]}"#),
    ("vapid-public", "public-key"),
    ("vapid-private", "private-key"),
    ("hmac", "interaction-secret"),
    ("editor", "editor-token"),
];

fn config(vault_url: &str) -> Config {
    let mut config = Config { key_vault_url: Some(vault_url.to_owned()), ..Config::default() };
    config.redis.host_secret_name = Some("redis-host".into());
    config.redis.password_secret_name = Some("redis-password".into());
    config.section_mut::<flowhost_push_api::PushConfig>().callers_json_secret_name = Some("callers".into());
    config.section_mut::<flowhost_push_api::PushConfig>().vapid_public_key_secret_name = Some("vapid-public".into());
    config.section_mut::<flowhost_push_api::PushConfig>().vapid_private_key_secret_name = Some("vapid-private".into());
    config.section_mut::<flowhost_push_api::PushConfig>().interaction_token_secret_secret_name = Some("hmac".into());
    config.section_mut::<flowhost_push_api::PushConfig>().editor_token_secret_name = Some("editor".into());
    config
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let mut report = Report::new("secrets-resolve");
    let runs: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let stand_in = StandInVault::start().await;
    for (name, value) in NAMES {
        stand_in.set_secret(name, value);
    }
    let env = stand_in.env(&CredentialKind::ClientSecret);
    let client = || KeyVault::from_env(&stand_in.url, &|name| env.get(name).cloned(), Arc::new(SystemClock)).unwrap();
    let (mut cold, mut warm) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    let shared = client();
    for _ in 0..runs {
        let mut fresh = config(&stand_in.url);
        let started = Instant::now();
        let read = fresh.resolve_secrets(&client()).await.expect("resolve (cold)");
        cold.push(started.elapsed());
        assert_eq!(read, NAMES.len());
        let mut again = config(&stand_in.url);
        let started = Instant::now();
        again.resolve_secrets(&shared).await.expect("resolve (warm)");
        warm.push(started.elapsed());
    }
    assert!(stand_in.problems().is_empty(), "{:?}", stand_in.problems());
    println!("secrets per start: {}, runs: {runs}, token requests: {}", NAMES.len(), stand_in.token_requests());
    println!("| client | median | p95 | max |");
    println!("|---|---|---|---|");
    for (label, samples) in [("cold (token + 7 GETs)", &mut cold), ("warm (7 GETs, cached token)", &mut warm)] {
        let (median, p95, max) = (percentile(samples, 0.5), percentile(samples, 0.95), percentile(samples, 1.0));
        println!("| {label} | {median:.2?} | {p95:.2?} | {max:.2?} |");
        for (statistic, value) in [("median", median), ("p95", p95), ("max", max)] {
            report.lower(&format!("{label}: {statistic}"), "ms", value.as_secs_f64() * 1e3);
        }
    }
}
