//! The deployment artefacts in `examples/deploy` (the container build and the Kubernetes manifests of the
//! specification's topology) hold what the specification and the configuration say:
//! - checkov (PyPI, installed by `tests/scripts/servers.sh`) finds no failed check in the Dockerfile and the
//!   manifests. The checks skipped are in `examples/deploy/.checkov.yaml` and the manifests' `checkov.io/skip`
//!   annotations, each with its reason.
//! - Every environment variable the artefacts name (a container's `env`, the ConfigMaps loaded with `envFrom`,
//!   the keys of `secrets.env.example`) is a setting the configuration reads. The names come from the code:
//!   `Config::apply_env` asks for every name it knows, so the test records what it asks.
//! - Every container port and probe port is a listener the deployment's roles open with the settings its
//!   manifest gives, on an address other pods can reach, and every such listener is declared; probes ask
//!   `/health` and `/ready` there (the gateway worker has no HTTP readiness); Services, the edge Ingress (one
//!   host, the exact path), the edge's autoscaler and resources, the NetworkPolicy around private ingest, the
//!   development overlay and the Dockerfile's `EXPOSE` agree with them.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use flowhost_core::config::{parse_roles, Config};
use serde_json::Value;
use yaml_rust2::{Yaml, YamlLoader};

fn deploy_dir() -> PathBuf {
    flowhost_tests::cli::repository_root().join("examples/deploy")
}

/// Every environment variable the configuration reads, the roles' sections' included: `apply_env` asks for
/// each of them by name.
fn configuration_names() -> BTreeSet<String> {
    let asked = RefCell::new(BTreeSet::new());
    flowhost::default_config()
        .apply_env(|name| {
            asked.borrow_mut().insert(name.to_owned());
            None
        })
        .expect("no variable set, nothing to refuse");
    let names = asked.into_inner();
    for known in ["API_PORT", "FLOWHOST_ROLES", "GATEWAY_EDGE_HTTP_PORT", "PRESENCE_HTTP_ADDR", "DOCDB_URI"] {
        assert!(names.contains(known), "the recorder missed {known}: {names:?}");
    }
    names
}

/// One YAML document of a manifest, with the file it came from.
struct Doc {
    file: String,
    yaml: Yaml,
}

impl Doc {
    fn kind(&self) -> &str {
        self.yaml["kind"].as_str().unwrap_or("")
    }
    fn name(&self) -> &str {
        self.yaml["metadata"]["name"].as_str().unwrap_or("")
    }
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "yaml") {
            out.push(path);
        }
    }
}

/// Every document of every `*.yaml` under `examples/deploy/k8s`, the kustomizations included.
fn manifests() -> Vec<Doc> {
    let mut files = Vec::new();
    yaml_files(&deploy_dir().join("k8s"), &mut files);
    files.sort();
    assert!(!files.is_empty(), "no manifests under examples/deploy/k8s");
    let mut docs = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = path.strip_prefix(deploy_dir()).unwrap().display().to_string();
        for yaml in YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}")) {
            if !yaml.is_null() {
                docs.push(Doc { file: file.clone(), yaml });
            }
        }
    }
    docs
}

fn list(yaml: &Yaml) -> &[Yaml] {
    yaml.as_vec().map(Vec::as_slice).unwrap_or(&[])
}

/// A scalar as Kubernetes reads it (`cpu: 1` and `cpu: "1"` are the same quantity).
fn scalar(yaml: &Yaml) -> String {
    match yaml {
        Yaml::String(s) | Yaml::Real(s) => s.clone(),
        Yaml::Integer(i) => i.to_string(),
        Yaml::Boolean(b) => b.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

fn string_map(yaml: &Yaml) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    if let Some(hash) = yaml.as_hash() {
        for (key, value) in hash {
            map.insert(key.as_str().expect("string keys").to_owned(), scalar(value));
        }
    }
    map
}

/// Whether `selector` (a `matchLabels` map) selects pods labelled `labels`.
fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    selector.iter().all(|(key, value)| labels.get(key) == Some(value))
}

/// A Deployment's single container as the tests need it.
struct Workload {
    file: String,
    name: String,
    labels: BTreeMap<String, String>,
    replicas: Option<i64>,
    roles: String,
    container: Yaml,
    /// Environment as the process sees it: the `envFrom` ConfigMaps, then the literal `env` values (values
    /// from Secrets are not known here and set no listener).
    env: BTreeMap<String, String>,
    ports: BTreeMap<String, u16>,
}

impl Workload {
    fn config(&self) -> Config {
        let mut config = flowhost::default_config();
        config
            .apply_env(|name| self.env.get(name).cloned())
            .unwrap_or_else(|e| panic!("{}: a setting does not parse: {e}", self.file));
        config.roles = parse_roles(&self.roles).unwrap_or_else(|e| panic!("{}: --roles: {e}", self.file));
        config
    }

    /// The addresses of the listeners this process opens (docs/operations.md, "Roles and listeners").
    fn listeners(&self) -> Vec<(&'static str, SocketAddr)> {
        let config = self.config();
        let roles = &config.roles;
        let mut listeners = vec![("main listener (FLOWHOST_API_HOST, API_PORT)", config.api_addr())];
        if roles.iter().any(|role| role == "push-api") {
            if let Some(listen) = &config.section::<flowhost_push_api::PushConfig>().listen {
                listeners.push(("push API (FLOWHOST_PUSH_API_LISTEN)", listen.clone()));
            }
        }
        let parts: Vec<_> = roles.iter().filter_map(|role| flowhost_gateway::GatewayParts::of(role)).collect();
        let gateway = &config.section::<flowhost_gateway::GatewayConfig>();
        if parts.iter().any(|p| p.edge) {
            listeners.push(("gateway edge (GATEWAY_EDGE_HTTP_PORT)", gateway.addr(gateway.edge_port)));
        }
        let ingest = parts.iter().any(|p| p.ingest);
        if ingest {
            listeners.push(("gateway ingest probes (GATEWAY_INGEST_HTTP_PORT)", gateway.addr(gateway.ingest_port)));
            listeners.push(("gateway queue admin (GATEWAY_ADMIN_HTTP_PORT)", gateway.addr(gateway.admin_port)));
            listeners.push(("gateway private ingest (GATEWAY_INGEST_PRIVATE_PORT)", gateway.ingest_private_addr()));
        }
        if !parts.is_empty() {
            listeners.push(("gateway metrics (GATEWAY_METRICS_PORT)", gateway.addr(gateway.metrics_port)));
        }
        if roles.iter().any(|role| role == "presence") {
            listeners.push((
                "presence (PRESENCE_HTTP_ADDR)",
                config.section::<flowhost_presence::PresenceConfig>().listen_addr(ingest).unwrap(),
            ));
        }
        if roles.iter().any(|role| role == "campaigns") {
            listeners.push((
                "campaigns (FLOWHOST_CAMPAIGNS_LISTEN)",
                config.section::<flowhost_campaigns::CampaignsConfig>().listen.clone(),
            ));
        }
        listeners
            .into_iter()
            .map(|(what, addr)| (what, addr.parse().unwrap_or_else(|e| panic!("{}: {what} {addr:?}: {e}", self.file))))
            .collect()
    }

    /// A probe's or a Service's port: a number or one of the container's port names.
    fn port(&self, port: &Yaml) -> Option<u16> {
        match port {
            Yaml::Integer(number) => u16::try_from(*number).ok(),
            Yaml::String(name) => self.ports.get(name).copied(),
            _ => None,
        }
    }
}

fn workloads(docs: &[Doc]) -> Vec<Workload> {
    let config_maps: BTreeMap<&str, BTreeMap<String, String>> = docs
        .iter()
        .filter(|doc| doc.kind() == "ConfigMap")
        .map(|doc| (doc.name(), string_map(&doc.yaml["data"])))
        .collect();
    let mut out = Vec::new();
    for doc in docs.iter().filter(|doc| doc.kind() == "Deployment") {
        let pod = &doc.yaml["spec"]["template"];
        let containers = list(&pod["spec"]["containers"]);
        assert_eq!(containers.len(), 1, "{}: one container per pod", doc.file);
        let container = containers[0].clone();
        let args: Vec<&str> = list(&container["args"]).iter().filter_map(Yaml::as_str).collect();
        let ["serve", "--roles", roles] = args.as_slice() else {
            panic!("{}: args must be `serve --roles ...`: {args:?}", doc.file);
        };
        let mut env = BTreeMap::new();
        for from in list(&container["envFrom"]) {
            let name = from["configMapRef"]["name"].as_str().unwrap_or_else(|| panic!("{}: envFrom", doc.file));
            env.extend(config_maps.get(name).unwrap_or_else(|| panic!("{}: no ConfigMap {name}", doc.file)).clone());
        }
        for var in list(&container["env"]) {
            if let Some(value) = var["value"].as_str() {
                env.insert(var["name"].as_str().unwrap().to_owned(), value.to_owned());
            }
        }
        let ports = list(&container["ports"])
            .iter()
            .map(|port| {
                let name = port["name"].as_str().unwrap_or_else(|| panic!("{}: a port without a name", doc.file));
                (name.to_owned(), u16::try_from(port["containerPort"].as_i64().unwrap()).unwrap())
            })
            .collect();
        out.push(Workload {
            file: doc.file.clone(),
            name: doc.name().to_owned(),
            labels: string_map(&pod["metadata"]["labels"]),
            replicas: doc.yaml["spec"]["replicas"].as_i64(),
            roles: roles.to_string(),
            container,
            env,
            ports,
        });
    }
    out
}

/// `NAME=value` lines of `secrets.env.example` (the Secret's keys).
fn secret_keys() -> Vec<String> {
    std::fs::read_to_string(deploy_dir().join("secrets.env.example"))
        .unwrap()
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| line.split_once('=').expect("NAME=value").0.to_owned())
        .collect()
}

#[test]
fn checkov_finds_no_failed_check() {
    let checkov = std::env::var("FLOWHOST_TEST_CHECKOV")
        .expect("FLOWHOST_TEST_CHECKOV names checkov: run the suite through tests/run.sh");
    let root = flowhost_tests::cli::repository_root();
    let out = Command::new(&checkov)
        .current_dir(&root)
        .args(["--config-file", "examples/deploy/.checkov.yaml", "-d", "examples/deploy", "-o", "json"])
        .output()
        .expect("checkov runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("checkov's report is not JSON ({e}):\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr))
    });
    let reports = match report {
        Value::Array(reports) => reports,
        report => vec![report],
    };
    let mut failures = Vec::new();
    let mut scanned = BTreeMap::new();
    for report in &reports {
        let check_type = report["check_type"].as_str().unwrap_or("?").to_owned();
        let summary = &report["summary"];
        println!("checkov {check_type}: {summary}");
        if summary["parsing_errors"].as_u64().unwrap_or(0) > 0 {
            failures.push(format!("{check_type}: parsing errors: {}", summary["parsing_errors"]));
        }
        for failed in report["results"]["failed_checks"].as_array().into_iter().flatten() {
            failures.push(format!(
                "{} {} ({}) in {}:{}",
                failed["check_id"].as_str().unwrap_or("?"),
                failed["resource"].as_str().unwrap_or("?"),
                failed["check_name"].as_str().unwrap_or("?"),
                failed["file_path"].as_str().unwrap_or("?"),
                failed["file_line_range"],
            ));
        }
        scanned.insert(check_type, summary["passed"].as_u64().unwrap_or(0));
    }
    assert!(failures.is_empty(), "checkov failed checks:\n{}", failures.join("\n"));
    // Both artefacts were read: a path or framework typo would pass with nothing checked.
    for framework in ["kubernetes", "dockerfile"] {
        assert!(
            scanned.get(framework).is_some_and(|passed| *passed > 0),
            "checkov checked no {framework}: {scanned:?}"
        );
    }
}

#[test]
fn every_environment_name_is_a_setting() {
    let known = configuration_names();
    let docs = manifests();
    let mut named = Vec::new();
    let mut env_config_maps = BTreeSet::new();
    for doc in docs.iter().filter(|doc| doc.kind() == "Deployment") {
        let container = &doc.yaml["spec"]["template"]["spec"]["containers"][0];
        for var in list(&container["env"]) {
            let name = var["name"].as_str().unwrap().to_owned();
            if let Some(key) = var["valueFrom"]["secretKeyRef"]["key"].as_str() {
                assert_eq!(key, name, "{}: the Secret's key is the setting's name", doc.file);
                assert!(secret_keys().contains(&name), "{}: {name} is not in secrets.env.example", doc.file);
            }
            named.push((doc.file.clone(), name));
        }
        for from in list(&container["envFrom"]) {
            env_config_maps.insert(from["configMapRef"]["name"].as_str().unwrap().to_owned());
        }
    }
    for doc in docs.iter().filter(|doc| doc.kind() == "ConfigMap" && env_config_maps.contains(doc.name())) {
        named.extend(string_map(&doc.yaml["data"]).into_keys().map(|name| (doc.file.clone(), name)));
    }
    named.extend(secret_keys().into_iter().map(|name| ("secrets.env.example".to_owned(), name)));
    assert!(named.len() > 20, "too few names found: {named:?}");
    let unknown: Vec<String> =
        named.iter().filter(|(_, name)| !known.contains(name)).map(|(file, name)| format!("{file}: {name}")).collect();
    assert!(unknown.is_empty(), "not a configuration setting (host/core/src/config.rs):\n{}", unknown.join("\n"));
}

#[test]
fn ports_and_probes_are_the_configured_listeners() {
    let docs = manifests();
    let workloads = workloads(&docs);
    let mut topology: Vec<(&str, Option<i64>)> = workloads.iter().map(|w| (w.roles.as_str(), w.replicas)).collect();
    topology.sort();
    // The specification's topology (issue 30): the edge's replicas are its autoscaler's.
    assert_eq!(
        topology,
        [
            ("admin,engine", Some(2)),
            ("campaigns", Some(2)),
            ("gateway-edge", None),
            ("gateway-ingest", Some(2)),
            ("gateway-worker", Some(1)),
            ("presence", Some(2)),
            ("push-api", Some(2)),
            ("sender", Some(2)),
        ]
    );
    let mut all_ports = BTreeSet::new();
    for workload in &workloads {
        let file = &workload.file;
        let reachable: BTreeMap<u16, &str> = workload
            .listeners()
            .into_iter()
            .filter(|(_, addr)| !addr.ip().is_loopback())
            .map(|(what, addr)| (addr.port(), what))
            .collect();
        let declared: BTreeSet<u16> = workload.ports.values().copied().collect();
        let listening: BTreeSet<u16> = reachable.keys().copied().collect();
        assert_eq!(
            declared, listening,
            "{file}: container ports must be exactly the listeners other pods can reach ({reachable:?})"
        );
        all_ports.extend(declared.iter().copied());
        for (kind, path) in [("livenessProbe", "/health"), ("readinessProbe", "/ready")] {
            let probe = &workload.container[kind];
            if probe.is_badvalue() {
                // Seed 002: the gateway worker has no HTTP readiness; every other process has both probes.
                assert!(kind == "readinessProbe" && workload.roles == "gateway-worker", "{file}: {kind} missing");
                continue;
            }
            assert_eq!(probe["httpGet"]["path"].as_str(), Some(path), "{file}: {kind}");
            let port = workload.port(&probe["httpGet"]["port"]);
            assert!(port.is_some_and(|p| declared.contains(&p)), "{file}: {kind} on an undeclared port {port:?}");
        }
        assert!(
            workload.roles != "gateway-worker" || workload.container["readinessProbe"].is_badvalue(),
            "{file}: the worker answers no HTTP readiness (seed 002)"
        );
        let resources = &workload.container["resources"];
        for bound in ["requests", "limits"] {
            for resource in ["cpu", "memory"] {
                assert!(!resources[bound][resource].is_badvalue(), "{file}: resources.{bound}.{resource} missing");
            }
        }
        if workload.roles == "gateway-edge" {
            // Seed 002, limits: requests 250m CPU and 256 MiB, limits 1 CPU and 512 MiB.
            assert_eq!(scalar(&resources["requests"]["cpu"]), "250m", "{file}");
            assert_eq!(scalar(&resources["requests"]["memory"]), "256Mi", "{file}");
            assert_eq!(scalar(&resources["limits"]["cpu"]), "1", "{file}");
            assert_eq!(scalar(&resources["limits"]["memory"]), "512Mi", "{file}");
        }
    }

    // Every Service selects one deployment and targets its declared ports.
    let mut services = BTreeMap::new();
    for doc in docs.iter().filter(|doc| doc.kind() == "Service") {
        let selector = string_map(&doc.yaml["spec"]["selector"]);
        let selected: Vec<&Workload> = workloads.iter().filter(|w| selects(&selector, &w.labels)).collect();
        assert_eq!(selected.len(), 1, "{}: Service {} selects {} deployments", doc.file, doc.name(), selected.len());
        let mut ports = BTreeMap::new();
        for port in list(&doc.yaml["spec"]["ports"]) {
            let target = selected[0].port(&port["targetPort"]);
            assert!(
                target.is_some_and(|t| selected[0].ports.values().any(|p| *p == t)),
                "{}: Service {} targets {:?}, not a port of {}",
                doc.file,
                doc.name(),
                port["targetPort"],
                selected[0].name
            );
            ports.insert(port["name"].as_str().unwrap().to_owned(), (port["port"].as_i64().unwrap(), target.unwrap()));
        }
        services.insert(doc.name().to_owned(), (selected[0], ports));
    }

    // The edge posts to the ingest Service's private port, which is the ingest pods' private listener.
    let edge = workloads.iter().find(|w| w.roles == "gateway-edge").unwrap();
    let ingest = workloads.iter().find(|w| w.roles == "gateway-ingest").unwrap();
    let ingest_config = ingest.config();
    let url = url::Url::parse(&edge.config().section::<flowhost_gateway::GatewayConfig>().ingest_url).unwrap();
    assert_eq!(url.path(), "/internal/v1/events");
    let service_name = url.host_str().unwrap().split('.').next().unwrap();
    let (target, ports) = services.get(service_name).unwrap_or_else(|| panic!("no Service {service_name}"));
    assert_eq!(target.name, ingest.name, "GATEWAY_EDGE_INGEST_URL names the ingest Service");
    assert!(
        ports.values().any(|(port, target)| Some(*port) == url.port().map(i64::from)
            && *target == ingest_config.section::<flowhost_gateway::GatewayConfig>().ingest_private_port),
        "GATEWAY_EDGE_INGEST_URL {url} does not reach the private ingest port"
    );

    // The edge Ingress: one host, TLS for it, the exact path only, to the edge listener. No other Ingress
    // reaches a gateway Service.
    let edge_port = edge.config().section::<flowhost_gateway::GatewayConfig>().edge_port;
    let mut edge_ingresses = 0;
    for doc in docs.iter().filter(|doc| doc.kind() == "Ingress") {
        let rules = list(&doc.yaml["spec"]["rules"]);
        let backends: Vec<(&str, &Yaml)> = rules
            .iter()
            .flat_map(|rule| list(&rule["http"]["paths"]))
            .map(|path| {
                let service = &path["backend"]["service"];
                (service["name"].as_str().unwrap(), &service["port"])
            })
            .collect();
        let to_gateway = backends.iter().any(|(name, _)| services[*name].0.roles.starts_with("gateway"));
        if !backends.iter().any(|(name, _)| services[*name].0.name == edge.name) {
            assert!(!to_gateway, "{}: only the edge Ingress routes to the gateway", doc.file);
            continue;
        }
        edge_ingresses += 1;
        assert_eq!(rules.len(), 1, "{}: one host", doc.file);
        assert_eq!(backends.len(), 1, "{}: one path", doc.file);
        let path = &list(&rules[0]["http"]["paths"])[0];
        assert_eq!(path["path"].as_str(), Some("/api/gateway/events"), "{}", doc.file);
        assert_eq!(path["pathType"].as_str(), Some("Exact"), "{}", doc.file);
        assert_eq!(services[backends[0].0].0.name, edge.name, "{}: to the edge", doc.file);
        let (_, ports) = &services[backends[0].0];
        let port = &backends[0].1;
        let target = match (&port["name"], &port["number"]) {
            (Yaml::String(name), _) => ports.get(name).map(|(_, target)| *target),
            (_, Yaml::Integer(number)) => ports.values().find(|(p, _)| p == number).map(|(_, target)| *target),
            _ => None,
        };
        assert_eq!(target, Some(edge_port), "{}: the backend is the edge listener", doc.file);
        let host = rules[0]["host"].as_str().expect("a host");
        let tls = list(&doc.yaml["spec"]["tls"]);
        assert!(
            tls.len() == 1 && list(&tls[0]["hosts"]).iter().filter_map(Yaml::as_str).eq([host]),
            "{}: TLS for the one host",
            doc.file
        );
    }
    assert_eq!(edge_ingresses, 1, "one edge Ingress");

    // The edge's autoscaler: 2 to 20 replicas at 60 percent CPU.
    let hpa: Vec<&Doc> = docs.iter().filter(|doc| doc.kind() == "HorizontalPodAutoscaler").collect();
    assert_eq!(hpa.len(), 1);
    let spec = &hpa[0].yaml["spec"];
    assert_eq!(spec["scaleTargetRef"]["name"].as_str(), Some(edge.name.as_str()));
    assert_eq!((spec["minReplicas"].as_i64(), spec["maxReplicas"].as_i64()), (Some(2), Some(20)));
    let metric = &list(&spec["metrics"])[0]["resource"];
    assert_eq!(metric["name"].as_str(), Some("cpu"));
    assert_eq!(metric["target"]["averageUtilization"].as_i64(), Some(60));

    // Private ingest: some policy selects the ingest pods, and every rule of such a policy that opens the
    // private port (or every port) admits edge pods only.
    let private = i64::from(ingest_config.section::<flowhost_gateway::GatewayConfig>().ingest_private_port);
    let mut guarded = false;
    for doc in docs.iter().filter(|doc| doc.kind() == "NetworkPolicy") {
        if !selects(&string_map(&doc.yaml["spec"]["podSelector"]["matchLabels"]), &ingest.labels) {
            continue;
        }
        guarded = true;
        for rule in list(&doc.yaml["spec"]["ingress"]) {
            let ports = list(&rule["ports"]);
            if !ports.is_empty() && !ports.iter().any(|p| p["port"].as_i64() == Some(private)) {
                continue;
            }
            let from = list(&rule["from"]);
            assert!(
                !from.is_empty()
                    && from.iter().all(|peer| {
                        peer["namespaceSelector"].is_badvalue()
                            && peer["ipBlock"].is_badvalue()
                            && selects(&string_map(&peer["podSelector"]["matchLabels"]), &edge.labels)
                            && !string_map(&peer["podSelector"]["matchLabels"]).is_empty()
                    }),
                "{}: {} lets more than the edge pods reach private ingest",
                doc.file,
                doc.name()
            );
        }
    }
    assert!(guarded, "no NetworkPolicy selects the ingest pods");
    for workload in &workloads {
        assert!(
            docs.iter()
                .filter(|doc| doc.kind() == "NetworkPolicy")
                .any(|doc| selects(&string_map(&doc.yaml["spec"]["podSelector"]["matchLabels"]), &workload.labels)),
            "{}: no NetworkPolicy selects its pods",
            workload.file
        );
    }

    // Development: the production resources without the campaign events API's direct ingress.
    let dev = docs.iter().find(|doc| doc.file == "k8s/development/kustomization.yaml").expect("development overlay");
    assert!(list(&dev.yaml["resources"]).iter().any(|r| r.as_str() == Some("..")));
    let campaigns = workloads.iter().find(|w| w.roles == "campaigns").unwrap();
    let deleted: Vec<Yaml> = list(&dev.yaml["patches"])
        .iter()
        .flat_map(|p| YamlLoader::load_from_str(p["patch"].as_str().unwrap()).unwrap())
        .filter(|p| p["$patch"].as_str() == Some("delete"))
        .collect();
    let campaigns_ingresses: Vec<&Doc> = docs
        .iter()
        .filter(|doc| doc.kind() == "Ingress")
        .filter(|doc| {
            list(&doc.yaml["spec"]["rules"]).iter().flat_map(|rule| list(&rule["http"]["paths"])).any(|path| {
                let name = path["backend"]["service"]["name"].as_str().unwrap();
                services[name].0.name == campaigns.name
            })
        })
        .collect();
    assert!(!campaigns_ingresses.is_empty(), "the campaign events API has its direct ingress in production");
    for ingress in campaigns_ingresses {
        assert!(
            deleted.iter().any(
                |p| p["kind"].as_str() == Some("Ingress") && p["metadata"]["name"].as_str() == Some(ingress.name())
            ),
            "the development overlay keeps {}",
            ingress.name()
        );
    }

    // The image declares the container ports the manifests use, and nothing else.
    let dockerfile = std::fs::read_to_string(deploy_dir().join("Dockerfile")).unwrap();
    let exposed: BTreeSet<u16> = dockerfile
        .lines()
        .filter_map(|line| line.strip_prefix("EXPOSE "))
        .flat_map(|ports| ports.split_whitespace().map(|p| p.parse::<u16>().unwrap()))
        .collect();
    assert_eq!(exposed, all_ports, "Dockerfile EXPOSE");
    let user = dockerfile.lines().rev().find_map(|line| line.strip_prefix("USER ")).expect("a USER");
    let uid: u32 = user.split(':').next().unwrap().parse().expect("a numeric user");
    assert_ne!(uid, 0, "runs as a non-root user");
}
