//! The origin map: which exact browser origin belongs to which tenant and site, and where its players are
//! validated. The runtime reads it from `GATEWAY_EDGE_ORIGINS_FILE` (at most [`MAX_FILE_BYTES`]) or, for local
//! use, `GATEWAY_EDGE_ORIGINS_JSON` (at most [`MAX_INLINE_BYTES`]):
//!
//! ```json
//! {"schema_version": 1, "origins": [{"origin": "https://play.example.com", "tenant_id": "12", "site_id": "34",
//!   "player_url": "https://players.internal"}]}
//! ```
//!
//! Operators do not write it by hand: [`generate`] builds it from one normalized, pre-reconciled input file
//! (`flowhost gateway origin-map generate`), deterministically (origins sorted), and fails closed: unknown
//! fields, an unsupported environment, a host that is not canonical or appears twice, a host list and a mapping
//! list that name different hosts, or a player URL without TLS reject the whole input, and nothing is written.
//! The input:
//!
//! ```json
//! {"schema_version": 1, "environment": "production", "player_url": "https://players.internal",
//!  "hosts": ["play.example.com"], "mappings": [{"host": "play.example.com", "tenant_id": "12", "site_id": "34"}]}
//! ```
//!
//! `environment` is `production`, `staging` or `development`; origins are `https://<host>` (in `development`, a
//! loopback host may be served over plain HTTP: `http://localhost:8080` is written as a host `localhost:8080`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The largest origin-map file the runtime reads.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;
/// The largest inline origin map (`GATEWAY_EDGE_ORIGINS_JSON`).
pub const MAX_INLINE_BYTES: usize = 128 * 1024;
/// The largest map the generator writes (room under the runtime's file limit).
pub const MAX_GENERATED_BYTES: usize = 900 * 1024;
/// The environments the generator knows.
pub const ENVIRONMENTS: [&str; 3] = ["production", "staging", "development"];

/// One origin of the map.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OriginEntry {
    /// The exact origin a browser sends (`https://play.example.com`).
    pub origin: String,
    /// A positive decimal id.
    pub tenant_id: String,
    /// A positive decimal id.
    pub site_id: String,
    /// The player-validation backend (`GET {player_url}/getPlayer`).
    pub player_url: String,
}

/// The origin map as the runtime uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OriginMap {
    pub schema_version: u32,
    pub origins: Vec<OriginEntry>,
}

/// Why an origin map or a generator input was refused: every problem found, each naming where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct OriginsError(pub Vec<String>);

/// Whether `id` is a positive decimal id without sign, leading zero or spaces.
fn positive_decimal(id: &str) -> bool {
    !id.is_empty() && id.len() <= 19 && id.bytes().all(|b| b.is_ascii_digit()) && !id.starts_with('0')
}

fn is_loopback(host: &str) -> bool {
    let name = host
        .rsplit_once(':')
        .map_or(host, |(name, port)| if port.bytes().all(|b| b.is_ascii_digit()) { name } else { host });
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

/// The canonical form of `host` (`name` or `name:port`): lowercase, no scheme, path, user info, trailing dot or
/// default port. `None` when `host` is not already canonical.
fn canonical_host(host: &str) -> Option<String> {
    if host.is_empty() || host.contains(['/', '@', '?', '#', ' ']) || host.ends_with('.') {
        return None;
    }
    let url = url::Url::parse(&format!("https://{host}")).ok()?;
    let mut canonical = url.host_str()?.to_owned();
    if let Some(port) = url.port() {
        canonical.push_str(&format!(":{port}"));
    }
    (canonical == host).then_some(canonical)
}

/// Checks a player-validation URL: https (http only to a loopback host in `development`), no query or fragment.
fn check_player_url(value: &str, development: bool, at: &str, problems: &mut Vec<String>) {
    match url::Url::parse(value) {
        Ok(url) if url.query().is_some() || url.fragment().is_some() => {
            problems.push(format!("{at}: must not have a query or fragment"))
        }
        Ok(url) if url.scheme() == "https" => {}
        Ok(url) if url.scheme() == "http" && development && url.host_str().is_some_and(is_loopback) => {}
        Ok(_) => problems.push(format!("{at}: must use TLS (https)")),
        Err(error) => problems.push(format!("{at}: not a URL ({error})")),
    }
}

impl OriginMap {
    /// Parses and checks a map (from the file or the inline setting): schema version 1, canonical unique
    /// origins, positive decimal ids, https player URLs (http only to loopback).
    pub fn parse(text: &str, limit: usize) -> Result<OriginMap, OriginsError> {
        if text.len() > limit {
            return Err(OriginsError(vec![format!(
                "the origin map is {} bytes; at most {limit} are read",
                text.len()
            )]));
        }
        let map: OriginMap =
            serde_json::from_str(text).map_err(|error| OriginsError(vec![format!("not an origin map: {error}")]))?;
        let mut problems = Vec::new();
        if map.schema_version != 1 {
            problems.push(format!("schema_version: {} is not supported (1 is)", map.schema_version));
        }
        let mut seen = BTreeSet::new();
        for (index, entry) in map.origins.iter().enumerate() {
            let at = format!("origins[{index}]");
            let host = entry.origin.strip_prefix("https://").or_else(|| entry.origin.strip_prefix("http://"));
            match host.and_then(canonical_host) {
                Some(host) if entry.origin.starts_with("http://") && !is_loopback(&host) => {
                    problems.push(format!("{at}.origin: plain http only for a loopback host"))
                }
                Some(_) => {}
                None => problems.push(format!("{at}.origin: {:?} is not a canonical origin", entry.origin)),
            }
            if !seen.insert(entry.origin.clone()) {
                problems.push(format!("{at}.origin: {:?} appears twice", entry.origin));
            }
            for (field, id) in [("tenant_id", &entry.tenant_id), ("site_id", &entry.site_id)] {
                if !positive_decimal(id) {
                    problems.push(format!("{at}.{field}: must be a positive decimal id"));
                }
            }
            check_player_url(&entry.player_url, true, &format!("{at}.player_url"), &mut problems);
        }
        if problems.is_empty() {
            Ok(map)
        } else {
            Err(OriginsError(problems))
        }
    }

    /// Reads the map the gateway serves: the file (`GATEWAY_EDGE_ORIGINS_FILE`, at most [`MAX_FILE_BYTES`],
    /// refused before it is read when larger) or the inline value (`GATEWAY_EDGE_ORIGINS_JSON`, at most
    /// [`MAX_INLINE_BYTES`]); both set is ambiguous and refused.
    pub fn load(file: Option<&str>, inline: Option<&str>) -> Result<OriginMap, OriginsError> {
        match (file, inline) {
            (Some(_), Some(_)) => Err(OriginsError(vec![
                "GATEWAY_EDGE_ORIGINS_FILE and GATEWAY_EDGE_ORIGINS_JSON are both set; use one".to_owned(),
            ])),
            (Some(path), None) => {
                let problem = |e: std::io::Error| OriginsError(vec![format!("GATEWAY_EDGE_ORIGINS_FILE {path}: {e}")]);
                let size = std::fs::metadata(path).map_err(problem)?.len();
                if size > MAX_FILE_BYTES as u64 {
                    return Err(OriginsError(vec![format!(
                        "GATEWAY_EDGE_ORIGINS_FILE {path}: {size} bytes; at most {MAX_FILE_BYTES} are read"
                    )]));
                }
                OriginMap::parse(&std::fs::read_to_string(path).map_err(problem)?, MAX_FILE_BYTES)
            }
            (None, Some(text)) => OriginMap::parse(text, MAX_INLINE_BYTES),
            (None, None) => Err(OriginsError(vec!["no origin map is configured".to_owned()])),
        }
    }

    /// The entry of the exact `origin`.
    pub fn entry(&self, origin: &str) -> Option<&OriginEntry> {
        self.origins.iter().find(|entry| entry.origin == origin)
    }
}

/// One host-to-tenant/site mapping of the generator's input.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Mapping {
    host: String,
    tenant_id: String,
    site_id: String,
}

/// The generator's input (see the module documentation).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct GeneratorInput {
    schema_version: u32,
    environment: String,
    player_url: String,
    hosts: Vec<String>,
    mappings: Vec<Mapping>,
}

/// Builds the origin map from the generator's input `text`, as the JSON to write (pretty, origins sorted, a final
/// newline); any problem rejects the whole input (see the module documentation).
pub fn generate(text: &str) -> Result<String, OriginsError> {
    let input: GeneratorInput =
        serde_json::from_str(text).map_err(|error| OriginsError(vec![format!("input: {error}")]))?;
    let mut problems = Vec::new();
    if input.schema_version != 1 {
        problems.push(format!("schema_version: {} is not supported (1 is)", input.schema_version));
    }
    let development = input.environment == "development";
    if !ENVIRONMENTS.contains(&input.environment.as_str()) {
        problems.push(format!("environment: {:?} is not one of {}", input.environment, ENVIRONMENTS.join(", ")));
    }
    check_player_url(&input.player_url, development, "player_url", &mut problems);
    let mut hosts = BTreeSet::new();
    for (index, host) in input.hosts.iter().enumerate() {
        if canonical_host(host).is_none() {
            problems.push(format!(
                "hosts[{index}]: {host:?} is not a canonical host (lowercase, no scheme, path or default port)"
            ));
        } else if !hosts.insert(host.clone()) {
            problems.push(format!("hosts[{index}]: {host:?} appears twice"));
        }
    }
    let mut mapped = BTreeSet::new();
    let mut origins = Vec::new();
    for (index, mapping) in input.mappings.iter().enumerate() {
        let at = format!("mappings[{index}]");
        if canonical_host(&mapping.host).is_none() {
            problems.push(format!("{at}.host: {:?} is not a canonical host", mapping.host));
        } else if !mapped.insert(mapping.host.clone()) {
            problems.push(format!("{at}.host: {:?} is mapped twice", mapping.host));
        }
        for (field, id) in [("tenant_id", &mapping.tenant_id), ("site_id", &mapping.site_id)] {
            if !positive_decimal(id) {
                problems.push(format!("{at}.{field}: must be a positive decimal id"));
            }
        }
        let scheme = if development && is_loopback(&mapping.host) { "http" } else { "https" };
        origins.push(OriginEntry {
            origin: format!("{scheme}://{}", mapping.host),
            tenant_id: mapping.tenant_id.clone(),
            site_id: mapping.site_id.clone(),
            player_url: input.player_url.trim_end_matches('/').to_owned(),
        });
    }
    for host in hosts.difference(&mapped) {
        problems.push(format!("hosts: {host:?} has no mapping"));
    }
    for host in mapped.difference(&hosts) {
        problems.push(format!("mappings: {host:?} is not in hosts"));
    }
    if input.hosts.is_empty() {
        problems.push("hosts: at least one host is needed".to_owned());
    }
    if !problems.is_empty() {
        return Err(OriginsError(problems));
    }
    origins.sort();
    let map = OriginMap { schema_version: 1, origins };
    let mut json = serde_json::to_string_pretty(&map).map_err(|error| OriginsError(vec![error.to_string()]))?;
    json.push('\n');
    if json.len() > MAX_GENERATED_BYTES {
        return Err(OriginsError(vec![format!(
            "the origin map would be {} bytes; at most {MAX_GENERATED_BYTES} are written",
            json.len()
        )]));
    }
    Ok(json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn input() -> Value {
        json!({"schema_version": 1, "environment": "production", "player_url": "https://players.internal",
            "hosts": ["play.example.com", "casino.example.org"],
            "mappings": [{"host": "play.example.com", "tenant_id": "12", "site_id": "34"},
                         {"host": "casino.example.org", "tenant_id": "12", "site_id": "35"}]})
    }

    #[test]
    fn generation_is_deterministic_and_the_runtime_reads_it() {
        let first = generate(&input().to_string()).unwrap();
        let mut shuffled = input();
        shuffled["hosts"] = json!(["casino.example.org", "play.example.com"]);
        shuffled["mappings"].as_array_mut().unwrap().reverse();
        assert_eq!(generate(&shuffled.to_string()).unwrap(), first, "the same input in another order");
        let map = OriginMap::parse(&first, MAX_FILE_BYTES).unwrap();
        assert_eq!(map.origins[0].origin, "https://casino.example.org");
        assert_eq!(map.entry("https://play.example.com").unwrap().site_id, "34");
        assert!(map.entry("https://play.example.com:443").is_none(), "exact origins only");
    }

    /// Every fail-closed case of the generator: (what, a change to the valid input, text the error contains).
    #[test]
    fn one_invalid_entry_rejects_the_whole_input() {
        type Change = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(&str, Change, &str)> = vec![
            ("unknown field", Box::new(|v| v["extra"] = json!(1)), "unknown field"),
            ("unknown mapping field", Box::new(|v| v["mappings"][0]["tenant"] = json!("1")), "unknown field"),
            ("schema version", Box::new(|v| v["schema_version"] = json!(2)), "schema_version"),
            ("environment", Box::new(|v| v["environment"] = json!("prod")), "environment"),
            ("uppercase host", Box::new(|v| v["hosts"][0] = json!("Play.example.com")), "canonical"),
            ("host with scheme", Box::new(|v| v["hosts"][0] = json!("https://play.example.com")), "canonical"),
            ("host with default port", Box::new(|v| v["hosts"][0] = json!("play.example.com:443")), "canonical"),
            ("trailing dot", Box::new(|v| v["hosts"][0] = json!("play.example.com.")), "canonical"),
            ("duplicate host", Box::new(|v| v["hosts"][1] = json!("play.example.com")), "twice"),
            ("host without mapping", Box::new(|v| v["hosts"][1] = json!("other.example.com")), "has no mapping"),
            ("mapping without host", Box::new(|v| v["mappings"][1]["host"] = json!("x.example.com")), "not in hosts"),
            ("mapped twice", Box::new(|v| v["mappings"][1]["host"] = json!("play.example.com")), "mapped twice"),
            ("tenant id", Box::new(|v| v["mappings"][0]["tenant_id"] = json!("012")), "tenant_id"),
            ("site id", Box::new(|v| v["mappings"][0]["site_id"] = json!("-3")), "site_id"),
            ("no TLS", Box::new(|v| v["player_url"] = json!("http://players.internal")), "TLS"),
            (
                "no hosts",
                Box::new(|v| {
                    v["hosts"] = json!([]);
                    v["mappings"] = json!([]);
                }),
                "at least one host",
            ),
        ];
        for (what, change, needle) in cases {
            let mut bad = input();
            change(&mut bad);
            let error = generate(&bad.to_string()).unwrap_err().to_string();
            assert!(error.contains(needle), "{what}: {error}");
        }
        // Development allows plain HTTP to loopback only.
        let mut local = input();
        local["environment"] = json!("development");
        local["player_url"] = json!("http://127.0.0.1:9000");
        local["hosts"] = json!(["localhost:8080"]);
        local["mappings"] = json!([{"host": "localhost:8080", "tenant_id": "1", "site_id": "2"}]);
        let map = OriginMap::parse(&generate(&local.to_string()).unwrap(), MAX_INLINE_BYTES).unwrap();
        assert_eq!(map.origins[0].origin, "http://localhost:8080");
        local["environment"] = json!("staging");
        assert!(generate(&local.to_string()).unwrap_err().to_string().contains("TLS"));
    }

    #[test]
    fn the_runtime_refuses_bad_maps_and_oversized_ones() {
        let good = generate(&input().to_string()).unwrap();
        assert!(OriginMap::parse(&good, 100).unwrap_err().to_string().contains("at most 100"));
        for (map, needle) in [
            (
                json!({"schema_version": 1, "origins": [{"origin": "https://a.example/", "tenant_id": "1", "site_id": "1", "player_url": "https://p"}]}),
                "canonical",
            ),
            (
                json!({"schema_version": 1, "origins": [{"origin": "http://a.example", "tenant_id": "1", "site_id": "1", "player_url": "https://p"}]}),
                "loopback",
            ),
            (
                json!({"schema_version": 1, "origins": [{"origin": "https://a.example", "tenant_id": "x", "site_id": "1", "player_url": "https://p"}]}),
                "tenant_id",
            ),
            (json!({"schema_version": 1, "origins": [], "more": 1}), "unknown field"),
        ] {
            let error = OriginMap::parse(&map.to_string(), MAX_FILE_BYTES).unwrap_err().to_string();
            assert!(error.contains(needle), "{map}: {error}");
        }
    }
}
