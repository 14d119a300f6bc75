//! The secrets port on Azure Key Vault (`flowhost-keyvault`) against the stand-in vault of
//! `flowhost_tests::keyvault` on loopback: the port's contract with each credential of the chain, the exact
//! request shapes (the stand-in refuses others and records why), token caching by the injected clock, errors
//! that name the setting and the secret but never a value or a response body, and Flowhost started with its
//! push secrets named in the vault, in process and as the `flowhost serve` binary. No test reaches a real
//! Azure host or 169.254.169.254: every endpoint is moved to the stand-in by its environment variable.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use flowhost_core::config::{Config, ConfigError, Secret};
use flowhost_core::ports::{SecretError, SecretStore};
use flowhost_core::{Clock, ManualClock, PortError, SystemClock};
use flowhost_keyvault::KeyVault;
use flowhost_tests::contract::secrets as contract;
use flowhost_tests::keyvault::{CredentialKind, StandInVault, LEAK_MARKER};
use flowhost_tests::{Backends, TestHost};

fn vault_with(stand_in: &StandInVault, kind: &CredentialKind, clock: Arc<dyn Clock>) -> KeyVault {
    let env = stand_in.env(kind);
    KeyVault::from_env(&stand_in.url, &|name| env.get(name).cloned(), clock).expect("a Key Vault client")
}

fn federated_token_file() -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), format!("{}\n", flowhost_tests::keyvault::FEDERATED_TOKEN)).unwrap();
    file
}

#[tokio::test]
async fn the_contract_holds_with_every_credential_of_the_chain() {
    let file = federated_token_file();
    let kinds = [
        CredentialKind::ClientSecret,
        CredentialKind::WorkloadIdentity(file.path().to_path_buf()),
        CredentialKind::AppService,
        CredentialKind::Imds,
    ];
    for kind in kinds {
        let stand_in = StandInVault::start().await;
        stand_in.set_secret("redis-password", "value-of-redis-password");
        let vault = vault_with(&stand_in, &kind, Arc::new(SystemClock));
        contract::reads_a_secret_by_name(&vault, "redis-password", "value-of-redis-password").await;
        contract::a_missing_secret_is_not_found(&vault).await;
        contract::an_invalid_name_is_refused(&vault).await;
        assert_eq!(stand_in.problems(), Vec::<String>::new(), "{kind:?}");
        assert_eq!(stand_in.token_requests(), 1, "{kind:?}: one token for every lookup");
        // The invalid names never left the process.
        assert_eq!(stand_in.secret_requests(), 2, "{kind:?}");
    }
}

#[tokio::test]
async fn the_token_is_cached_until_shortly_before_it_expires() {
    let stand_in = StandInVault::start().await;
    stand_in.set_secret("a", "value-a");
    stand_in.set_secret("b", "value-b");
    stand_in.set_token_lifetime_secs(3600);
    let clock = Arc::new(ManualClock::new(1_000_000));
    let vault = vault_with(&stand_in, &CredentialKind::ClientSecret, clock.clone());
    assert_eq!(vault.get("a").await.unwrap().expose(), "value-a");
    assert_eq!(vault.get("b").await.unwrap().expose(), "value-b");
    assert_eq!((stand_in.token_requests(), stand_in.secret_requests()), (1, 2), "two secrets, one token");
    clock.advance_ms(3_000_000);
    vault.get("a").await.unwrap();
    assert_eq!(stand_in.token_requests(), 1, "still fresh 10 minutes before expiry");
    // Five minutes before expiry a new token is fetched, as Azure's SDKs do.
    clock.advance_ms(300_000);
    vault.get("a").await.unwrap();
    assert_eq!(stand_in.token_requests(), 2);
}

#[tokio::test]
async fn managed_identity_tokens_with_expires_on_are_cached_too() {
    let stand_in = StandInVault::start().await;
    stand_in.set_secret("a", "value-a");
    let vault = vault_with(&stand_in, &CredentialKind::AppService, Arc::new(SystemClock));
    for _ in 0..3 {
        vault.get("a").await.unwrap();
    }
    assert_eq!((stand_in.token_requests(), stand_in.secret_requests()), (1, 3));
}

#[tokio::test]
async fn a_refused_token_is_replaced_once() {
    let stand_in = StandInVault::start().await;
    stand_in.set_secret("a", "value-a");
    let vault = vault_with(&stand_in, &CredentialKind::ClientSecret, Arc::new(SystemClock));
    vault.get("a").await.unwrap();
    stand_in.revoke_tokens();
    assert_eq!(vault.get("a").await.unwrap().expose(), "value-a");
    assert_eq!(stand_in.token_requests(), 2);
}

/// The error's Display and Debug, which must carry neither a body, a token nor a credential.
fn assert_clean(error: &dyn std::fmt::Debug, display: &str) {
    let debug = format!("{error:?}");
    for text in [display, debug.as_str()] {
        for secret in [
            LEAK_MARKER,
            "stand-in-access-token",
            flowhost_tests::keyvault::CLIENT_SECRET,
            flowhost_tests::keyvault::IDENTITY_HEADER,
            flowhost_tests::keyvault::FEDERATED_TOKEN,
            "value-",
        ] {
            assert!(!text.contains(secret), "{secret:?} leaked: {text}");
        }
    }
}

#[tokio::test]
async fn failures_say_the_status_and_the_name_never_the_body() {
    let stand_in = StandInVault::start().await;
    stand_in.set_secret("fine", "value-fine");
    for (name, status) in [("refused", 401), ("forbidden", 403), ("broken", 500), ("throttled", 429)] {
        stand_in.fail_secret(name, status);
    }
    let vault = vault_with(&stand_in, &CredentialKind::ClientSecret, Arc::new(SystemClock));
    for (name, status, transient) in
        [("refused", "401", false), ("forbidden", "403", false), ("broken", "500", true), ("throttled", "429", true)]
    {
        let error = vault.get(name).await.unwrap_err();
        let display = error.to_string();
        assert!(display.contains(status) && display.contains(name), "{display}");
        assert!(matches!(&error, SecretError::Port(port) if port.is_transient() == transient), "{error:?}");
        assert_clean(&error, &display);
    }
    // A credential the token endpoint refuses: its status, not its body.
    let mut env = stand_in.env(&CredentialKind::AppService);
    env.insert("IDENTITY_HEADER".into(), "wrong-header".into());
    let vault = KeyVault::from_env(&stand_in.url, &|name| env.get(name).cloned(), Arc::new(SystemClock)).unwrap();
    let error = vault.get("fine").await.unwrap_err();
    let display = error.to_string();
    assert!(display.contains("400") && display.contains("managed identity"), "{display}");
    assert_clean(&error, &display);
    assert_eq!(stand_in.problems().len(), 1, "the stand-in saw the wrong header");
}

#[tokio::test]
async fn every_call_has_a_time_limit() {
    let stand_in = StandInVault::start().await;
    stand_in.fail_secret("stuck", 0);
    let env = stand_in.env(&CredentialKind::ClientSecret);
    let credential = flowhost_keyvault::Credential::from_env(&|name| env.get(name).cloned()).unwrap();
    let vault =
        KeyVault::with_timeout(&stand_in.url, credential, Arc::new(SystemClock), Duration::from_millis(300)).unwrap();
    match vault.get("stuck").await {
        Err(SecretError::Port(PortError::Unavailable(message))) => assert!(message.contains("in time"), "{message}"),
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[tokio::test]
async fn key_vault_url_must_be_https_off_loopback() {
    let mut config = Config { key_vault_url: Some("http://flowhost.vault.azure.net".into()), ..Config::default() };
    config.section_mut::<flowhost_push_api::PushConfig>().editor_token_secret_name = Some("editor".into());
    let error = flowhost::resolve_secrets(&mut config, &|_| None).await.unwrap_err();
    let config_error = error.downcast_ref::<ConfigError>().expect("a ConfigError");
    assert_eq!(config_error.setting, "KEY_VAULT_URL");
    assert!(config_error.message.contains("https://"), "{config_error}");
}

/// The configuration of a host whose editor token and interaction secret are only named in the vault.
fn named_in_vault(config: &mut Config, stand_in: &StandInVault) {
    config.key_vault_url = Some(stand_in.url.clone());
    config.section_mut::<flowhost_push_api::PushConfig>().editor_token = None;
    config.section_mut::<flowhost_push_api::PushConfig>().editor_token_secret_name = Some("editor-token".into());
    config.section_mut::<flowhost_push_api::PushConfig>().interaction_token_secret = None;
    config.section_mut::<flowhost_push_api::PushConfig>().interaction_token_secret_secret_name =
        Some("interaction-secret".into());
}

#[tokio::test]
async fn a_missing_secret_stops_the_start_naming_the_setting() {
    let stand_in = StandInVault::start().await;
    stand_in.set_secret("editor-token", "value-editor-token");
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(Backends::Embedded, dir.path());
    named_in_vault(&mut config, &stand_in);
    let env = stand_in.env(&CredentialKind::ClientSecret);
    let error = flowhost::resolve_secrets(&mut config, &|name| env.get(name).cloned()).await.unwrap_err();
    let config_error = error.downcast_ref::<ConfigError>().expect("a ConfigError");
    assert_eq!(config_error.setting, "FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_SECRET_NAME");
    assert!(config_error.message.contains("\"interaction-secret\""), "{config_error}");
    assert_clean(&error, &format!("{error:#}"));
}

#[tokio::test]
async fn flowhost_starts_with_push_secrets_from_the_vault() {
    let stand_in = StandInVault::start().await;
    stand_in.set_secret("editor-token", "value-editor-token-from-vault");
    stand_in.set_secret("interaction-secret", "value-interaction-secret-from-vault");
    let dir = tempfile::tempdir().unwrap();
    let mut config = TestHost::config(Backends::Embedded, dir.path());
    named_in_vault(&mut config, &stand_in);
    let env = stand_in.env(&CredentialKind::Imds);
    flowhost::resolve_secrets(&mut config, &|name| env.get(name).cloned()).await.unwrap();
    assert_eq!(
        config.section::<flowhost_push_api::PushConfig>().editor_token,
        Some(Secret::new("value-editor-token-from-vault"))
    );
    assert_eq!((stand_in.token_requests(), stand_in.secret_requests()), (1, 2));
    let host = TestHost::start_with(config).await;
    let tenants = |token: &'static str| {
        let request = host.http.get(host.url("/api/v1/tenants")).bearer_auth(token);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(tenants("value-editor-token-from-vault").await, 200);
    assert_eq!(tenants(flowhost_tests::push::EDITOR_TOKEN).await, 401);
    host.stop().await;
}

/// `flowhost serve` as an operator runs it, with `env` on top of a fresh data directory and `port`.
fn flowhost_serve(dir: &std::path::Path, port: u16, env: &HashMap<String, String>) -> std::process::Child {
    Command::new(flowhost_tests::cli::flowhost_bin())
        .arg("serve")
        .env("FLOWHOST_DATA_DIR", dir)
        .env("API_PORT", port.to_string())
        .env("FLOWHOST_ROLES", "admin,push-api")
        .env("FLOWHOST_PLUGINS_BUNDLED", "false")
        .envs(env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start flowhost serve")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_reads_its_secret_names_from_the_vault() {
    let stand_in = StandInVault::start().await;
    stand_in.set_secret("editor-token", "value-editor-token-binary");
    stand_in.set_secret("interaction-secret", "value-interaction-binary");
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut env = stand_in.env(&CredentialKind::ClientSecret);
    env.insert("INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME".into(), "editor-token".into());
    env.insert("FLOWHOST_WEBPUSH_INTERACTION_TOKEN_SECRET_SECRET_NAME".into(), "interaction-secret".into());
    let mut child = flowhost_serve(dir.path(), port, &env);
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/api/v1/tenants");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Ok(response) = client.get(&url).bearer_auth("value-editor-token-binary").send().await {
            break response.status().as_u16();
        }
        assert!(child.try_wait().unwrap().is_none(), "flowhost serve exited");
        assert!(tokio::time::Instant::now() < deadline, "flowhost serve did not open port {port}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let wrong = client.get(&url).bearer_auth(flowhost_tests::push::EDITOR_TOKEN).send().await.unwrap();
    let _ = child.kill();
    let output = child.wait_with_output().unwrap();
    assert_eq!((status, wrong.status().as_u16()), (200, 401));
    let logs = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(logs.contains("settings read from Key Vault"), "{logs}");
    assert_clean(&logs, &logs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_refuses_to_start_on_a_vault_error() {
    let stand_in = StandInVault::start().await;
    stand_in.fail_secret("editor-token", 403);
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut env = stand_in.env(&CredentialKind::ClientSecret);
    env.insert("INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME".into(), "editor-token".into());
    let mut child = flowhost_serve(dir.path(), port, &env);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(tokio::time::Instant::now() < deadline, "flowhost serve did not stop");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let output = child.wait_with_output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("INAPP_EDITOR_API_AUTH_TOKEN_SECRET_NAME") && stderr.contains("403"), "{stderr}");
    assert_clean(&stderr, &stderr);
}
