//! The `flowhost` command line: `serve` runs the roles; `events publish` / `events tail` write and read
//! topics on whichever backend the configuration names, so the embedded mode needs no Kafka tools;
//! `webpush vapid-keys` prints a fresh VAPID keypair for operators; `gateway origin-map generate` builds the
//! gateway's origin map from the operators' normalized input file; `health` asks the local process's main
//! listener, as the container image's HEALTHCHECK.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use flowhost::plugin_test::{GuestLogs, TestCall, TestContext};
use flowhost_core::config::{parse_roles, Config, LogFormat};
use flowhost_core::ports::{ConsumerConfig, OutRecord, StartFrom};
use flowhost_presence::PresenceConfig;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(name = "flowhost", version, about = "Event-driven flow engine for player engagement")]
struct Cli {
    /// Configuration file (TOML); environment variables override it.
    #[arg(long, global = true, env = "FLOWHOST_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the roles (all of them by default) until interrupted.
    Serve {
        /// Comma-separated roles to run (admin, engine, push-api, sender, gateway, gateway-edge, gateway-ingest,
        /// gateway-worker) or `all` (the first four); overrides FLOWHOST_ROLES.
        #[arg(long)]
        roles: Option<String>,
    },
    /// Publish to and read from topics.
    #[command(subcommand)]
    Events(EventsCommand),
    /// Run a WebAssembly component locally (plugin authors' test loop), or upload, list, activate and call the
    /// plugins of a running Flowhost.
    #[command(subcommand)]
    Plugin(PluginCommand),
    /// Web-push operator tools.
    #[command(subcommand)]
    Webpush(WebpushCommand),
    /// Edge analytics gateway operator tools.
    #[command(subcommand)]
    Gateway(GatewayCommand),
    /// Exit 0 when the local process answers `GET /health` with 200 on its main listener (`API_PORT`, which
    /// every process opens whatever its roles), else 1: the container image's HEALTHCHECK, which has no shell
    /// or HTTP client of its own.
    Health {
        /// Another URL to ask instead.
        #[arg(long)]
        url: Option<String>,
    },
}

#[derive(Subcommand)]
enum GatewayCommand {
    /// The origin map.
    #[command(subcommand)]
    OriginMap(OriginMapCommand),
}

#[derive(Subcommand)]
enum OriginMapCommand {
    /// Builds the origin map (GATEWAY_EDGE_ORIGINS_FILE) from one normalized input file: deterministic output;
    /// any invalid entry rejects the whole input and nothing is written.
    Generate {
        /// The normalized input (schema_version, environment, player_url, hosts, mappings).
        #[arg(long)]
        input: PathBuf,
        /// Where to write the map (replaced atomically).
        #[arg(long)]
        output: PathBuf,
    },
}

#[derive(Subcommand)]
enum WebpushCommand {
    /// Print a fresh VAPID keypair as the two settings to configure: the public key is the base64url
    /// uncompressed P-256 point, the private key the base64url 32-byte scalar. Keep the private key secret.
    VapidKeys,
}

#[derive(Subcommand)]
enum EventsCommand {
    /// Publish records: the VALUE argument, or one record per line of standard input when it is omitted or `-`.
    Publish(PublishArgs),
    /// Print a topic's records as JSON lines, from the beginning (or the end) and then as they arrive.
    Tail(TailArgs),
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Start a plugin project: the manifest with one action and its `config_schema`, a unit test, a build
    /// script and a README, from templates carried in this binary.
    New {
        /// The plugin's id: lowercase letters, digits and `-`.
        name: String,
        /// The guest language: `rust`, `python` (componentize-py) or `js` (componentize-js), each with every
        /// world.
        #[arg(long, default_value = "rust")]
        lang: String,
        /// What the plugin is: `action` (one action a flow can place), `service` (an action and a data source
        /// Studio's forms read), `node-kind` (a step flows place, evaluated over batches of events) or
        /// `projector` (a pure projection of records onto a stored document, as the presence role runs).
        #[arg(long, default_value = "action")]
        world: String,
        /// Where to write it (default: `./NAME`); it must not exist or be empty.
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Rust only: the SDK dependency as Cargo.toml writes it (default: this binary's SDK when its source is
        /// at hand, e.g. `{ git = "https://..." }`).
        #[arg(long)]
        sdk: Option<String>,
    },
    /// Build the plugin project in DIR (default: the current directory) into a component and print its path:
    /// Rust with cargo and the `wasm32-wasip2` target; Python and JavaScript by the project's `build.sh`, which
    /// installs componentize-py (PyPI) or componentize-js (npm) into the project on the first build.
    Build {
        dir: Option<PathBuf>,
        /// Rust only: cargo's target directory (default: DIR/target).
        #[arg(long)]
        target_dir: Option<PathBuf>,
    },
    /// Print the manifest a component declares.
    Manifest {
        /// The component (`.wasm`), e.g. from `bash plugins/build.sh`.
        path: PathBuf,
    },
    /// Run one action with a JSON input (the INPUT argument, or standard input when omitted or `-`) and print
    /// its output. The guest's `log` calls appear as log lines; failures print their outcome class.
    Invoke {
        path: PathBuf,
        action: String,
        input: Option<String>,
        /// Wall-clock limit of the call in milliseconds (default: the runtime's, 1000).
        #[arg(long)]
        timeout_ms: Option<u64>,
    },
    /// Run one action the way a flow runs it (the host's runtime, limits and capabilities, `documents` on a
    /// temporary store), or a projector's projection of one record, and print its output, outcome class, log
    /// lines and duration. Exits 1 when the call fails.
    Test {
        /// The component (`.wasm`), e.g. from `flowhost plugin build`.
        path: PathBuf,
        /// The action to run. Left out for a projector, which projects the record --input onto --state.
        #[arg(long)]
        action: Option<String>,
        /// A file holding the JSON input (the action's rendered configuration, or a projector's input), or `-`
        /// for standard input.
        #[arg(long, value_name = "FILE|-")]
        input: PathBuf,
        /// A projector's stored state: a file holding the JSON document (default: none, a new key).
        #[arg(long, value_name = "FILE")]
        state: Option<PathBuf>,
        /// The invocation context as JSON: tenant_id, flow_id, run_id, node_id, idempotency_key, attempt.
        #[arg(long, value_name = "JSON")]
        context: Option<String>,
        /// Wall-clock limit of an action's call in milliseconds (default: the runtime's and the manifest's).
        #[arg(long)]
        timeout_ms: Option<u64>,
        /// Keep the `documents` capability's store in DIR across calls (default: a temporary store).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Upload a component to a running Flowhost as the version its manifest declares, and activate it (every
    /// node swaps to it; calls in flight finish on the previous version).
    Upload {
        path: PathBuf,
        /// Store the version without activating it.
        #[arg(long)]
        no_activate: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List the plugins of a running Flowhost with their versions and the active one.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Make a stored version the active one (roll forward or back).
    Activate {
        id: String,
        version: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Call one action of a plugin of a running Flowhost with a JSON input (the INPUT argument, or standard
    /// input when omitted or `-`), as Studio's "test this node" does.
    Call {
        id: String,
        action: String,
        input: Option<String>,
        /// Call this stored version instead of the active one.
        #[arg(long)]
        version: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
}

#[derive(Args)]
struct ServerArgs {
    /// The administration API of the Flowhost to talk to.
    #[arg(long, env = "FLOWHOST_SERVER", default_value = "http://127.0.0.1:8787")]
    server: String,
}

#[derive(Args)]
struct PublishArgs {
    topic: String,
    value: Option<String>,
    /// Record key (records with one key keep their order).
    #[arg(long)]
    key: Option<String>,
    /// A header as `name=value`; repeatable.
    #[arg(long = "header", value_name = "NAME=VALUE")]
    headers: Vec<String>,
}

#[derive(Args)]
struct TailArgs {
    topic: String,
    /// Start at the end of the topic instead of the beginning.
    #[arg(long)]
    from_end: bool,
    /// Exit after this many records.
    #[arg(long, short = 'n')]
    limit: Option<usize>,
    /// Exit when no record arrives for this many milliseconds.
    #[arg(long)]
    idle_timeout_ms: Option<u64>,
    /// Consume as this group and commit (by default a throw-away group that commits nothing).
    #[arg(long)]
    group: Option<String>,
}

fn init_logging(config: &Config) {
    let mut directives = config.log.filter.clone();
    if config.roles.iter().any(|role| role == "presence") {
        // PRESENCE_LOG_LEVEL sets the projector's own lines; FLOWHOST_LOG the rest.
        directives.push_str(&format!(",flowhost_presence={}", config.section::<PresenceConfig>().log_level));
    }
    let filter = EnvFilter::try_new(&directives).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match config.log.format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

/// Logging for `plugin test`: the guest's lines go into the report (`GuestLogs`), the host's own at `warn` and
/// above (or as `FLOWHOST_LOG` says) to standard error.
fn init_test_logging(config: &Config) -> GuestLogs {
    use tracing_log::AsLog;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    let directives = if std::env::var_os("FLOWHOST_LOG").is_some() { config.log.filter.as_str() } else { "warn" };
    let filter = EnvFilter::try_new(directives).unwrap_or_else(|_| EnvFilter::new("warn"));
    let host_level = filter.max_level_hint();
    let is_guest = |meta: &tracing::Metadata<'_>| meta.fields().field("plugin").is_some();
    let not_guest = tracing_subscriber::filter::filter_fn(move |meta| !is_guest(meta));
    let host = tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(filter).with_filter(not_guest);
    // Filtered to the guest's events, or the layer formats every event of the process (cranelift's trace lines
    // while a component compiles: minutes for a component that embeds an interpreter).
    let logs = GuestLogs::default();
    let guest = logs.clone().with_filter(tracing_subscriber::filter::filter_fn(is_guest));
    tracing_subscriber::registry().with(guest).with(host).init();
    // The guest's filter has no level, so the `log` bridge would pass every record of the `log` crate (cranelift
    // logs each function it compiles at trace): only the host's level reaches it.
    tracing_log::log::set_max_level(host_level.unwrap_or(tracing::level_filters::LevelFilter::TRACE).as_log());
    logs
}

/// The JSON in FILE, or standard input for `-`.
fn read_input(path: &Path) -> anyhow::Result<String> {
    if path == Path::new("-") {
        return Ok(std::io::read_to_string(std::io::stdin())?);
    }
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

#[tokio::main]
async fn main() {
    if let Err(error) = run().await {
        eprintln!("flowhost: {error:#}");
        std::process::exit(1);
    }
}

async fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::Webpush(WebpushCommand::VapidKeys) = cli.command {
        // Needs no configuration: an operator runs it before configuring anything.
        let (public, private) = flowhost_notifications::vapid::generate().map_err(|e| anyhow::anyhow!(e))?;
        println!("FLOWHOST_WEBPUSH_VAPID_PUBLIC_KEY={public}");
        println!("FLOWHOST_WEBPUSH_VAPID_PRIVATE_KEY={private}");
        return Ok(());
    }
    // Project commands need no configuration: an author runs them without a server.
    match &cli.command {
        Command::Plugin(PluginCommand::New { name, lang, world, dir, sdk }) => {
            let dir = dir.clone().unwrap_or_else(|| PathBuf::from(name));
            for path in flowhost::scaffold::new_project(&dir, name, lang, world, sdk.as_deref())? {
                println!("{}", path.display());
            }
            eprintln!("next: cd {} && flowhost plugin build", dir.display());
            return Ok(());
        }
        Command::Plugin(PluginCommand::Build { dir, target_dir }) => {
            let dir = dir.as_deref().unwrap_or(Path::new("."));
            let component = flowhost::scaffold::build_project(dir, target_dir.as_deref())?;
            println!("{}", component.display());
            return Ok(());
        }
        _ => {}
    }
    if let Command::Gateway(GatewayCommand::OriginMap(OriginMapCommand::Generate { input, output })) = &cli.command {
        return generate_origin_map(input, output);
    }
    let mut config = flowhost::load_config(cli.config.as_deref(), |name| std::env::var(name).ok())?;
    match cli.command {
        Command::Serve { roles } => {
            if let Some(roles) = roles {
                config.roles = parse_roles(&roles).map_err(|e| anyhow::anyhow!("--roles: {e}"))?;
                // What the roles need is checked for the roles given here (the gateway's key and origin map).
                config.validate()?;
                flowhost::check_roles(&config)?;
            }
            init_logging(&config);
            flowhost::resolve_secrets(&mut config, &|name| std::env::var(name).ok()).await?;
            serve(config).await
        }
        Command::Plugin(PluginCommand::Test { path, action, input, state, context, timeout_ms, data_dir, json }) => {
            let logs = init_test_logging(&config);
            let input = read_input(&input)?;
            let state = state.as_deref().map(read_input).transpose()?;
            let context = context.as_deref().map(TestContext::parse).transpose()?.unwrap_or_default();
            let call = TestCall {
                path: &path,
                action: action.as_deref(),
                input: &input,
                state: state.as_deref(),
                context,
                timeout: timeout_ms.map(Duration::from_millis),
                data_dir: data_dir.as_deref(),
            };
            let report = flowhost::plugin_test::run(&config.plugins, call, &logs).await?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", report.render());
            }
            if report.outcome != "ok" {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Plugin(command) => {
            init_logging(&config);
            plugin(&config, command).await
        }
        Command::Events(command) => {
            // The commands print data on stdout; logs stay quiet unless asked for.
            if std::env::var_os("FLOWHOST_LOG").is_none() {
                config.log.filter = "warn".into();
            }
            init_logging(&config);
            // A short session lets a one-off reader join its throw-away group in seconds (a group join takes
            // up to half the session timeout on some brokers); configured values win.
            config.kafka.properties.entry("session.timeout.ms".to_owned()).or_insert_with(|| "6000".to_owned());
            flowhost::resolve_secrets(&mut config, &|name| std::env::var(name).ok()).await?;
            let ports = flowhost::connect(&config).await?;
            match command {
                EventsCommand::Publish(args) => publish(&ports, args).await,
                EventsCommand::Tail(args) => tail(&ports, args).await,
            }
        }
        Command::Health { url } => {
            let url = url.unwrap_or_else(|| format!("http://127.0.0.1:{}/health", config.api.port));
            health(&url).await
        }
        Command::Webpush(WebpushCommand::VapidKeys) | Command::Gateway(_) => {
            unreachable!("handled before the configuration loads")
        }
    }
}

/// `health`: one `GET` within 3 s; anything but 200 is unhealthy.
async fn health(url: &str) -> anyhow::Result<()> {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(3)).build()?;
    let status = client.get(url).send().await.with_context(|| format!("GET {url}"))?.status();
    if status != reqwest::StatusCode::OK {
        bail!("GET {url}: {status}");
    }
    Ok(())
}

/// `gateway origin-map generate`: reads the input (at most 4 MiB), writes the map through a temporary file
/// renamed into place, so a failure leaves `output` as it was.
fn generate_origin_map(input: &std::path::Path, output: &std::path::Path) -> anyhow::Result<()> {
    const MAX_INPUT_BYTES: u64 = 4 * 1024 * 1024;
    let size = std::fs::metadata(input).with_context(|| format!("reading {}", input.display()))?.len();
    if size > MAX_INPUT_BYTES {
        bail!("{}: {size} bytes; the input may have at most {MAX_INPUT_BYTES}", input.display());
    }
    let text = std::fs::read_to_string(input).with_context(|| format!("reading {}", input.display()))?;
    let map = flowhost_gateway::origins::generate(&text)
        .map_err(|error| anyhow::anyhow!("{}: rejected, nothing written: {error}", input.display()))?;
    let temporary = output.with_extension("tmp");
    std::fs::write(&temporary, &map).with_context(|| format!("writing {}", temporary.display()))?;
    std::fs::rename(&temporary, output).with_context(|| format!("writing {}", output.display()))?;
    eprintln!("wrote {} ({} bytes)", output.display(), map.len());
    Ok(())
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    let signal_token = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down");
        signal_token.cancel();
    });
    let ports = flowhost::connect_with_retry(&config, &shutdown).await?;
    let addr = config.api_addr();
    let listener =
        flowhost_role::bind(&addr).await.with_context(|| format!("cannot listen on {addr} (api.host / API_PORT)"))?;
    flowhost::serve(config, ports, listener, shutdown).await
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(term) => term,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

async fn plugin(config: &Config, command: PluginCommand) -> anyhow::Result<()> {
    use flowhost_runtime::{Limits, Runtime};

    let path = match &command {
        PluginCommand::Manifest { path } | PluginCommand::Invoke { path, .. } => path.clone(),
        PluginCommand::New { .. } | PluginCommand::Build { .. } | PluginCommand::Test { .. } => {
            unreachable!("handled before the configuration loads")
        }
        PluginCommand::Upload { .. }
        | PluginCommand::List { .. }
        | PluginCommand::Activate { .. }
        | PluginCommand::Call { .. } => return remote_plugin(config, command).await,
    };
    let runtime = Runtime::new(flowhost::runtime_config(&config.plugins))?;
    let plugin = flowhost::load_local(&runtime, &config.plugins, &path).await?;
    match command {
        PluginCommand::Manifest { .. } => {
            println!("{}", serde_json::to_string_pretty(plugin.manifest())?);
        }
        PluginCommand::Invoke { action, input, timeout_ms, .. } => {
            let input = match input.as_deref() {
                Some("-") | None => std::io::read_to_string(std::io::stdin())?,
                Some(input) => input.to_owned(),
            };
            let mut limits: Limits = runtime.config().limits.clone();
            if let Some(ms) = timeout_ms {
                limits.timeout = Duration::from_millis(ms);
            }
            let output = plugin.invoke_with_limits(&action, input.trim(), &limits).await?;
            println!("{output}");
        }
        _ => unreachable!("remote commands return above"),
    }
    Ok(())
}

/// The plugin commands that talk to a running Flowhost's administration API; they print its JSON answer.
async fn remote_plugin(config: &Config, command: PluginCommand) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let request = match command {
        PluginCommand::Upload { path, no_activate, server } => {
            let wasm = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            // The route names the version; read it from the component itself.
            let runtime = flowhost_runtime::Runtime::new(flowhost::runtime_config(&config.plugins))?;
            let plugin = flowhost::load_local(&runtime, &config.plugins, &path).await?;
            let manifest = plugin.manifest();
            let url = format!("{}/api/v1/plugins/{}/versions/{}", base(&server), manifest.id, manifest.version);
            http.put(url)
                .query(&[("activate", !no_activate)])
                .header(reqwest::header::CONTENT_TYPE, "application/wasm")
                .body(wasm)
        }
        PluginCommand::List { server } => http.get(format!("{}/api/v1/plugins", base(&server))),
        PluginCommand::Activate { id, version, server } => {
            http.post(format!("{}/api/v1/plugins/{id}/activate", base(&server))).json(&json!({ "version": version }))
        }
        PluginCommand::Call { id, action, input, version, server } => {
            let input = match input.as_deref() {
                Some("-") | None => std::io::read_to_string(std::io::stdin())?,
                Some(input) => input.to_owned(),
            };
            let input: Value = serde_json::from_str(input.trim()).context("the input must be JSON")?;
            let mut body = json!({ "action": action, "input": input });
            if let Some(version) = version {
                body["version"] = json!(version);
            }
            http.post(format!("{}/api/v1/plugins/{id}/invoke", base(&server))).json(&body)
        }
        PluginCommand::Manifest { .. }
        | PluginCommand::Invoke { .. }
        | PluginCommand::New { .. }
        | PluginCommand::Build { .. }
        | PluginCommand::Test { .. } => unreachable!("local commands"),
    };
    // The same FLOWHOST_ADMIN_TOKEN the server checks authorizes the CLI.
    let request = match &config.api.admin_token {
        Some(token) => request.bearer_auth(token.expose()),
        None => request,
    };
    let response = request.send().await.context("cannot reach the Flowhost server (--server / FLOWHOST_SERVER)")?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    println!("{}", serde_json::to_string_pretty(&body)?);
    if !status.is_success() {
        bail!("the server answered {status}: {}", body.get("error").and_then(Value::as_str).unwrap_or("no message"));
    }
    Ok(())
}

fn base(server: &ServerArgs) -> &str {
    server.server.trim_end_matches('/')
}

async fn publish(ports: &flowhost_core::Ports, args: PublishArgs) -> anyhow::Result<()> {
    let mut headers = Vec::new();
    for header in &args.headers {
        let Some((name, value)) = header.split_once('=') else { bail!("--header {header:?}: use NAME=VALUE") };
        headers.push((name.to_owned(), value.to_owned()));
    }
    let values: Vec<String> = match args.value.as_deref() {
        Some("-") | None => std::io::stdin()
            .lock()
            .lines()
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .filter(|line| !line.trim().is_empty())
            .collect(),
        Some(value) => vec![value.to_owned()],
    };
    if values.is_empty() {
        bail!("nothing to publish: give a VALUE or lines on standard input");
    }
    let records: Vec<OutRecord> = values
        .into_iter()
        .map(|value| {
            let mut record = OutRecord::new(&args.topic, value.into_bytes());
            record.key = args.key.clone().map(String::into_bytes);
            for (name, value) in &headers {
                record = record.with_header(name, value.as_bytes());
            }
            record
        })
        .collect();
    let count = records.len();
    ports.topics.publish(&records).await.with_context(|| format!("publishing to {}", args.topic))?;
    eprintln!("published {count} record(s) to {}", args.topic);
    Ok(())
}

async fn tail(ports: &flowhost_core::Ports, args: TailArgs) -> anyhow::Result<()> {
    let commit = args.group.is_some();
    let group = args.group.unwrap_or_else(|| format!("flowhost-tail-{}", uuid::Uuid::new_v4().simple()));
    let start = if args.from_end { StartFrom::Latest } else { StartFrom::Earliest };
    let mut consumer = ports.topics.consumer(ConsumerConfig { group, topics: vec![args.topic.clone()], start }).await?;
    let mut printed = 0usize;
    let mut idle_since = tokio::time::Instant::now();
    let stdout = std::io::stdout();
    loop {
        let batch = consumer.poll(100, Duration::from_millis(200)).await?;
        if batch.is_empty() {
            if args.idle_timeout_ms.is_some_and(|ms| idle_since.elapsed() >= Duration::from_millis(ms)) {
                return Ok(());
            }
            continue;
        }
        idle_since = tokio::time::Instant::now();
        let mut out = stdout.lock();
        for (index, record) in batch.iter().enumerate() {
            let value = serde_json::from_slice::<Value>(&record.value)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&record.value).into_owned()));
            let headers: serde_json::Map<String, Value> = record
                .headers
                .iter()
                .map(|h| (h.key.clone(), Value::String(String::from_utf8_lossy(&h.value).into_owned())))
                .collect();
            let line = json!({
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "key": record.key.as_ref().map(|k| String::from_utf8_lossy(k).into_owned()),
                "headers": headers,
                "value": value,
            });
            writeln!(out, "{line}")?;
            printed += 1;
            if args.limit.is_some_and(|limit| printed >= limit) {
                out.flush()?;
                if commit {
                    consumer.commit(&flowhost_core::ports::next_positions(&batch[..=index])).await?;
                }
                return Ok(());
            }
        }
        out.flush()?;
        if commit {
            consumer.commit(&flowhost_core::ports::next_positions(&batch)).await?;
        }
    }
}
