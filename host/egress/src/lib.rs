//! Outbound HTTP to addresses that someone other than the operator names: a service's registered
//! `transports.http.endpoint` (the catalog's data-source proxy, flow lookups), the reply URL an envelope
//! carries, a segment's HTTP target. One [`Egress`] client holds the policy for all of them:
//!
//! - **Where it may connect.** Link-local addresses (`169.254.0.0/16`, `fe80::/10`), the cloud metadata
//!   addresses (`169.254.169.254`, `fd00:ec2::254`, `100.100.100.200`), unspecified, broadcast and multicast
//!   addresses are refused always, over IPv4, IPv6 and IPv4-mapped IPv6 alike; a name is resolved first and
//!   refused when every address it resolves to is (before any connection). Private ranges and loopback stay
//!   allowed by default: services in a cluster live there, and local development uses loopback. An operator
//!   can narrow it further to a list of networks and host names ([`EgressPolicy::allowed`],
//!   `FLOWHOST_EGRESS_ALLOWED`).
//! - **No redirects**: a 3xx is the answer, never followed to another address.
//! - **Bounded bodies**: [`Egress::read_body`] stops past [`EgressPolicy::max_body_bytes`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Where outbound calls may go, and how much of an answer is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressPolicy {
    /// When set, only these networks and host names (exact, lower case) are reached; the refused addresses
    /// stay refused even inside a listed network.
    pub allowed: Option<Vec<Allowed>>,
    /// The largest answer body read, in bytes.
    pub max_body_bytes: usize,
    /// How long a connection attempt may take.
    pub connect_timeout: Duration,
}

impl Default for EgressPolicy {
    fn default() -> Self {
        EgressPolicy { allowed: None, max_body_bytes: 1 << 20, connect_timeout: Duration::from_secs(5) }
    }
}

/// One entry of an operator's allowlist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    Network(IpNet),
    Host(String),
}

impl std::str::FromStr for Allowed {
    type Err = String;

    /// A network (`10.0.0.0/8`, `fd00::/8`), an address (a network of one), or a host name.
    fn from_str(text: &str) -> Result<Allowed, String> {
        let text = text.trim();
        if let Ok(network) = text.parse::<IpNet>() {
            return Ok(Allowed::Network(network));
        }
        if let Ok(address) = text.parse::<IpAddr>() {
            return Ok(Allowed::Network(IpNet::from(address)));
        }
        let valid = !text.is_empty()
            && text.len() <= 253
            && text
                .split('.')
                .all(|label| !label.is_empty() && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
        if valid {
            Ok(Allowed::Host(text.to_ascii_lowercase()))
        } else {
            Err(format!("{text:?} is neither a network, an address nor a host name"))
        }
    }
}

/// Why an outbound call was not made or its answer not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressError {
    #[error("{0} is not a valid http(s) URL")]
    InvalidUrl(String),
    #[error("{0} may not be reached: {1}")]
    Refused(String, &'static str),
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
    #[error("{0}")]
    Transport(String),
}

/// Why `address` may never be reached, or `None`.
pub fn refused_address(address: IpAddr) -> Option<&'static str> {
    // An IPv4-mapped IPv6 address (`::ffff:169.254.169.254`) is the IPv4 address it maps.
    let address = match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    match address {
        IpAddr::V4(v4) => {
            if v4 == Ipv4Addr::new(169, 254, 169, 254) || v4 == Ipv4Addr::new(100, 100, 100, 200) {
                Some("a cloud metadata address")
            } else if v4.is_link_local() {
                Some("a link-local address")
            } else if v4.is_unspecified() || v4.is_broadcast() || v4.is_multicast() {
                Some("not a unicast address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
                Some("a cloud metadata address")
            } else if (v6.segments()[0] & 0xffc0) == 0xfe80 {
                Some("a link-local address")
            } else if v6.is_unspecified() || v6.is_multicast() {
                Some("not a unicast address")
            } else {
                None
            }
        }
    }
}

impl EgressPolicy {
    /// The policy of the `[egress]` settings; a bad `FLOWHOST_EGRESS_ALLOWED` entry is a configuration error.
    pub fn of(
        config: &flowhost_core::config::EgressConfig,
    ) -> Result<EgressPolicy, flowhost_core::config::ConfigError> {
        EgressPolicy::from_settings(&config.allowed, config.max_body_bytes).map_err(|message| {
            flowhost_core::config::ConfigError { setting: "FLOWHOST_EGRESS_ALLOWED".to_owned(), message }
        })
    }

    /// The policy of the settings: `allowed` empty for no allowlist (else networks, addresses and host names),
    /// and the body cap. An entry that is none of those is refused, named.
    pub fn from_settings(allowed: &[String], max_body_bytes: usize) -> Result<EgressPolicy, String> {
        let allowed = match allowed {
            [] => None,
            entries => Some(entries.iter().map(|entry| entry.parse()).collect::<Result<Vec<Allowed>, String>>()?),
        };
        Ok(EgressPolicy { allowed, max_body_bytes, ..EgressPolicy::default() })
    }

    /// Why `address` (reached as `host`, its name in the URL) may not be reached, or `None`.
    fn refusal(&self, host: &str, address: IpAddr) -> Option<&'static str> {
        if let Some(reason) = refused_address(address) {
            return Some(reason);
        }
        match &self.allowed {
            None => None,
            Some(allowed) => {
                let listed = allowed.iter().any(|entry| match entry {
                    Allowed::Network(network) => network.contains(&address),
                    Allowed::Host(name) => name.eq_ignore_ascii_case(host.trim_end_matches('.')),
                });
                (!listed).then_some("not in FLOWHOST_EGRESS_ALLOWED")
            }
        }
    }
}

/// The HTTP client of outbound calls, with the policy in force (see the crate documentation). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Egress {
    client: reqwest::Client,
    policy: Arc<EgressPolicy>,
}

impl Egress {
    /// A client enforcing `policy`, with `timeout` for each whole request.
    pub fn new(policy: EgressPolicy, timeout: Duration) -> Egress {
        Egress::with_lookup(policy, timeout, Arc::new(SystemLookup))
    }

    fn with_lookup(policy: EgressPolicy, timeout: Duration, lookup: Arc<dyn Lookup>) -> Egress {
        let policy = Arc::new(policy);
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .connect_timeout(policy.connect_timeout)
            .dns_resolver(Arc::new(CheckedResolver { policy: policy.clone(), lookup }))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Egress { client, policy }
    }

    /// The policy in force.
    pub fn policy(&self) -> &EgressPolicy {
        &self.policy
    }

    /// `url` parsed and checked: http or https, and an address literal that may be reached (a name is
    /// checked when it is resolved, before connecting).
    pub fn check(&self, url: &str) -> Result<reqwest::Url, EgressError> {
        let parsed = reqwest::Url::parse(url).map_err(|_| EgressError::InvalidUrl(url.to_owned()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(EgressError::InvalidUrl(url.to_owned()));
        }
        let host = match parsed.host() {
            Some(url::Host::Ipv4(v4)) => Some(IpAddr::V4(v4)),
            Some(url::Host::Ipv6(v6)) => Some(IpAddr::V6(v6)),
            Some(url::Host::Domain(_)) => None,
            None => return Err(EgressError::InvalidUrl(url.to_owned())),
        };
        if let Some(address) = host {
            if let Some(reason) = self.policy.refusal(&address.to_string(), address) {
                return Err(EgressError::Refused(url_origin(&parsed), reason));
            }
        }
        Ok(parsed)
    }

    /// A request builder for `method` on `url`, once [`Egress::check`] passed.
    pub fn request(&self, method: reqwest::Method, url: &str) -> Result<reqwest::RequestBuilder, EgressError> {
        let url = self.check(url)?;
        Ok(self.client.request(method, url))
    }

    /// Sends `request`, mapping a refused resolution to [`EgressError::Refused`].
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, EgressError> {
        request.send().await.map_err(|error| {
            let refused = std::error::Error::source(&error)
                .into_iter()
                .flat_map(|source| std::iter::successors(Some(source), |e| e.source()))
                .any(|cause| cause.downcast_ref::<RefusedName>().is_some());
            match (refused, error.url()) {
                (true, Some(url)) => EgressError::Refused(url_origin(url), "every address it resolves to is refused"),
                _ => EgressError::Transport(error.without_url().to_string()),
            }
        })
    }

    /// The answer's body, up to [`EgressPolicy::max_body_bytes`] (see [`read_capped`]).
    pub async fn read_body(&self, response: reqwest::Response) -> Result<Vec<u8>, EgressError> {
        read_capped(response, self.policy.max_body_bytes).await
    }
}

/// `response`'s body, up to `limit` bytes: a longer one (announced or read) is [`EgressError::TooLarge`], and
/// the rest is not read.
pub async fn read_capped(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, EgressError> {
    if response.content_length().is_some_and(|length| length > limit as u64) {
        return Err(EgressError::TooLarge(limit));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| EgressError::Transport(e.without_url().to_string()))? {
        if body.len() + chunk.len() > limit {
            return Err(EgressError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `scheme://host:port` of `url`, what an error may name (never the path or query, which may carry tokens).
fn url_origin(url: &reqwest::Url) -> String {
    url.origin().ascii_serialization()
}

/// How names become addresses: the system's resolver.
trait Lookup: Send + Sync {
    fn lookup(
        &self,
        host: String,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>>;
}

struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(
        &self,
        host: String,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>> {
        Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), 0)).await?.collect()) })
    }
}

/// Resolves names and drops the addresses the policy refuses; a name left with none fails before any
/// connection is made.
struct CheckedResolver {
    policy: Arc<EgressPolicy>,
    lookup: Arc<dyn Lookup>,
}

#[derive(Debug, thiserror::Error)]
#[error("{0} resolves only to addresses that may not be reached")]
struct RefusedName(String);

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let (policy, lookup) = (self.policy.clone(), self.lookup.clone());
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let resolved = lookup.lookup(host.clone()).await?;
            let allowed: Vec<SocketAddr> =
                resolved.iter().copied().filter(|address| policy.refusal(&host, address.ip()).is_none()).collect();
            if allowed.is_empty() {
                tracing::warn!(host, "an outbound call was refused: the name resolves only to refused addresses");
                return Err(Box::new(RefusedName(host)) as Box<dyn std::error::Error + Send + Sync>);
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_local_and_metadata_addresses_are_refused_in_every_spelling() {
        for refused in [
            "169.254.169.254",
            "169.254.0.1",
            "100.100.100.200",
            "fe80::1",
            "febf::1",
            "fd00:ec2::254",
            "::ffff:169.254.169.254",
            "0.0.0.0",
            "::",
            "255.255.255.255",
            "224.0.0.1",
            "ff02::1",
        ] {
            assert!(refused_address(refused.parse().unwrap()).is_some(), "{refused}");
        }
        for allowed in ["127.0.0.1", "::1", "10.1.2.3", "172.16.0.9", "192.168.1.1", "fd12::1", "8.8.8.8", "100.64.0.1"]
        {
            assert!(refused_address(allowed.parse().unwrap()).is_none(), "{allowed}");
        }
    }

    #[test]
    fn urls_are_checked_before_any_request() {
        let egress = Egress::new(EgressPolicy::default(), Duration::from_secs(1));
        for refused in [
            "http://169.254.169.254/latest/meta-data/",
            "http://[fe80::1]:8080/x",
            "http://[::ffff:169.254.169.254]/",
            "http://[fd00:ec2::254]/",
        ] {
            assert!(matches!(egress.check(refused), Err(EgressError::Refused(..))), "{refused}");
        }
        for invalid in ["file:///etc/passwd", "gopher://x/", "not a url", "http://"] {
            assert!(matches!(egress.check(invalid), Err(EgressError::InvalidUrl(_))), "{invalid}");
        }
        assert!(egress.check("http://127.0.0.1:8080/data").is_ok());
        assert!(egress.check("https://crm.internal/data").is_ok(), "names are checked when resolved");
    }

    #[test]
    fn an_allowlist_narrows_but_never_widens() {
        let policy = EgressPolicy {
            allowed: Some(vec!["10.0.0.0/8".parse().unwrap(), "crm.internal".parse().unwrap()]),
            ..EgressPolicy::default()
        };
        assert_eq!(policy.refusal("10.1.2.3", "10.1.2.3".parse().unwrap()), None);
        assert_eq!(policy.refusal("crm.internal", "192.168.0.5".parse().unwrap()), None);
        assert!(policy.refusal("192.168.0.5", "192.168.0.5".parse().unwrap()).is_some());
        assert!(policy.refusal("127.0.0.1", "127.0.0.1".parse().unwrap()).is_some());
        let wide = EgressPolicy { allowed: Some(vec!["169.254.0.0/16".parse().unwrap()]), ..EgressPolicy::default() };
        assert!(wide.refusal("169.254.169.254", "169.254.169.254".parse().unwrap()).is_some());
        assert!("not a host!".parse::<Allowed>().is_err());
    }

    /// Names resolved by a table, as a DNS server would answer them; `connected` counts what got through.
    struct Table;

    impl Lookup for Table {
        fn lookup(
            &self,
            host: String,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>> {
            let addresses: Vec<SocketAddr> = match host.as_str() {
                "metadata.attacker.example" => vec!["169.254.169.254:0".parse().unwrap()],
                "rebound.attacker.example" => {
                    vec!["[fe80::1]:0".parse().unwrap(), "[::ffff:169.254.1.1]:0".parse().unwrap()]
                }
                _ => vec![],
            };
            Box::pin(async move { Ok(addresses) })
        }
    }

    /// A name that resolves only to refused addresses fails in the resolver, before any connection is tried:
    /// the names here resolve through a table (a registrant's DNS pointing at the metadata service), and no
    /// request leaves the machine.
    #[tokio::test]
    async fn a_name_resolving_only_to_refused_addresses_is_refused_before_connecting() {
        let egress = Egress::with_lookup(EgressPolicy::default(), Duration::from_secs(5), Arc::new(Table));
        for name in ["metadata.attacker.example", "rebound.attacker.example"] {
            let request = egress.request(reqwest::Method::GET, &format!("http://{name}/latest/meta-data/")).unwrap();
            let error = egress.send(request).await.unwrap_err();
            assert_eq!(
                error,
                EgressError::Refused(format!("http://{name}"), "every address it resolves to is refused")
            );
        }
    }

    /// An allowlist refuses what it does not list, in the resolver too: `localhost` resolves to loopback, which
    /// a list of `10.0.0.0/8` does not hold (nothing is connected to).
    #[tokio::test]
    async fn an_allowlist_refuses_unlisted_names_before_connecting() {
        let policy = EgressPolicy { allowed: Some(vec!["10.0.0.0/8".parse().unwrap()]), ..EgressPolicy::default() };
        let egress = Egress::new(policy, Duration::from_secs(5));
        let request = egress.request(reqwest::Method::GET, "http://localhost:9/x").unwrap();
        let error = egress.send(request).await.unwrap_err();
        assert!(matches!(error, EgressError::Refused(ref origin, _) if origin == "http://localhost:9"), "{error:?}");
    }
}
