//! Guests get WASI 0.2 through `wasmtime-wasi` with a locked-down context: a plugin built from ordinary crates
//! (`uuid`, `chrono`, `rand`, `println!`, the default panic hook; `plugins/fixtures/ordinary`) runs instead of
//! trapping, finds no environment, no files and no network, and its stdout and stderr reach the host's log
//! tagged with the plugin.

use std::io::Write;
use std::sync::{Arc, Mutex};

use flowhost_runtime::{InvocationContext, InvokeError, Plugin, Runtime, RuntimeConfig};
use flowhost_runtime_fixtures as fixtures;
use serde_json::Value;

async fn ordinary() -> Plugin {
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    runtime.load(&fixtures::bytes("ordinary"), &[]).await.expect("load ordinary")
}

/// A log sink for `tracing`, shared with the test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[tokio::test]
async fn ordinary_crates_run_and_find_nothing_outside_the_sandbox() {
    // Secrets live in the host's environment: a guest must not see any of it.
    std::env::set_var("FLOWHOST_TEST_SECRET", "must-not-leak");
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);

    let plugin = ordinary().await;
    let context = InvocationContext {
        tenant_id: Some("12".into()),
        idempotency_key: "rule-1/in/0/7".into(),
        attempt: 2,
        ..InvocationContext::default()
    };
    let limits = plugin.limits().clone();
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let output = plugin.invoke_in(&context, "ordinary", "{}", &limits).await.expect("ordinary runs");
    let output: Value = serde_json::from_str(&output).unwrap();

    let uuid = output["uuid"].as_str().unwrap();
    assert_eq!((uuid.len(), &uuid[14..15]), (36, "4"), "a v4 UUID from WASI random: {uuid}");
    let now = output["now"].as_str().unwrap();
    assert!(now.starts_with("20") && now.contains('T'), "chrono read the wall clock: {now}");
    let random = output["random"].as_u64().unwrap();
    assert!((1..=1_000_000).contains(&random), "{random}");
    assert_eq!(output["env_vars"], 0, "no environment");
    assert_eq!(output["args"], 0, "no arguments");
    assert_eq!(output["root_listable"], false, "no preopened directory");
    assert_eq!(output["file_readable"], false, "no file");
    assert_eq!(output["tcp_connects"], false, "no network");
    // The invocation context reached the guest.
    assert_eq!(output["idempotency_key"], "rule-1/in/0/7");
    assert_eq!(output["attempt"], 2);
    assert_eq!(output["tenant_id"], "12");
    let deadline = output["deadline_ms"].as_u64().unwrap();
    assert!(deadline >= before + limits.timeout.as_millis() as u64 - 5, "{deadline} vs {before}");

    let text = log.text();
    assert!(text.contains("ordinary: hello from stdout") && text.contains("stream=\"stdout\""), "{text}");
    assert!(text.contains("ordinary: hello from stderr") && text.contains("stream=\"stderr\""), "{text}");
    assert!(text.contains("plugin=\"ordinary@0.1.0\""), "{text}");
    assert!(!text.contains("must-not-leak"), "{text}");
}

#[tokio::test]
async fn a_panic_with_the_default_hook_is_a_trap_and_its_message_is_logged() {
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let _default = tracing::subscriber::set_default(subscriber);

    let plugin = ordinary().await;
    let error = plugin.invoke("panic", "{}").await.unwrap_err();
    assert!(matches!(error, InvokeError::Trap(_)), "{error:?}");
    assert!(log.text().contains("the ordinary fixture panics with the default hook"), "{}", log.text());
    // The plugin still serves.
    assert!(plugin.invoke("ordinary", "{}").await.is_ok());
}

/// A guest's log calls are one line each (control characters escaped, so it cannot forge another line), and an
/// invocation's log calls and stdout share one 64 KiB budget: past it the rest is dropped, once said.
#[tokio::test]
async fn log_calls_cannot_forge_lines_and_share_the_output_budget() {
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    let runtime = Runtime::new(RuntimeConfig::default()).expect("runtime");
    let caps = runtime.load(&fixtures::bytes("caps"), &flowhost_runtime::Capability::ALL).await.expect("load caps");

    let forged =
        serde_json::json!({"text": "ok\n2026-11-27T00:00:00Z  INFO forged: admin logged in\u{1b}[2J", "times": 1});
    caps.invoke("shout", &forged.to_string()).await.expect("shout once");
    let text = log.text();
    assert!(!text.lines().any(|line| line.starts_with("2026-11-27T00:00:00Z")), "a forged line: {text}");
    assert!(text.contains("ok\\n2026-11-27T00:00:00Z  INFO forged") && text.contains("\\u{1b}[2J"), "{text}");
    assert!(!text.contains('\u{1b}'), "no escape sequence reaches the log");

    let before = log.text().len();
    let loud = serde_json::json!({"text": "x".repeat(4000), "times": 100});
    caps.invoke("shout", &loud.to_string()).await.expect("shout 100 times");
    let written = log.text()[before..].to_owned();
    let kept = written.matches(&"x".repeat(4000)).count();
    assert!((15..=17).contains(&kept), "about 64 KiB of 4,000-byte messages, not {kept}");
    assert!(written.contains("the plugin logged more than the limit per invocation"), "the drop is said");
    assert_eq!(written.matches("logged more than the limit").count(), 1, "once");
    assert!(!written.contains("printed"), "stdout shares the spent budget");
    assert!(written.contains("wrote more than the limit of output"), "and its drop is said too");
}
