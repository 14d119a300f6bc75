//! Checks of the URLs a notification carries. A rendered `target_url` (and each action's) must be an absolute
//! `https` URL whose host is on `FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS` (`example.com` exactly, `*.example.com`
//! its subdomains); with an empty list only the scheme is checked. `http` is accepted for `localhost` and
//! loopback addresses only, for local development. Image URLs (icon, badge, image) get the scheme check.

use url::{Host, Url};

/// The allowlist of target hosts, lowercased.
#[derive(Debug, Clone, Default)]
pub struct TargetPolicy {
    hosts: Vec<String>,
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Parses an absolute https URL (http on loopback), with a message saying what is wrong.
pub fn check_scheme(value: &str) -> Result<Url, String> {
    let url = Url::parse(value).map_err(|e| format!("must be an absolute URL ({e})"))?;
    match url.scheme() {
        "https" if url.host().is_some() => Ok(url),
        "http" if is_loopback(&url) => Ok(url),
        _ => Err("must be an https URL".to_owned()),
    }
}

impl TargetPolicy {
    pub fn new(hosts: &[String]) -> Self {
        Self { hosts: hosts.iter().map(|h| h.trim().to_ascii_lowercase()).filter(|h| !h.is_empty()).collect() }
    }

    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }

    fn allows_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts.iter().any(|allowed| match allowed.strip_prefix("*.") {
            Some(parent) => {
                host.len() > parent.len() + 1 && host.ends_with(parent) && {
                    host.as_bytes()[host.len() - parent.len() - 1] == b'.'
                }
            }
            None => host == *allowed,
        })
    }

    /// Checks a rendered navigation target.
    pub fn check_target(&self, value: &str) -> Result<(), String> {
        let url = check_scheme(value)?;
        if self.hosts.is_empty() {
            return Ok(());
        }
        let host = url.host_str().unwrap_or_default();
        if self.allows_host(host) {
            Ok(())
        } else {
            Err(format!("host {host:?} is not on FLOWHOST_WEBPUSH_ALLOWED_TARGET_HOSTS"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_checks() {
        let policy = TargetPolicy::new(&["Casino.example".into(), "*.cdn.example".into()]);
        let cases = [
            ("https://casino.example/promo?x=1", true),
            ("https://CASINO.example./promo", true),
            ("https://casino.example:8443/", true),
            ("https://www.casino.example/", false),
            ("https://a.cdn.example/x", true),
            ("https://a.b.cdn.example/x", true),
            ("https://cdn.example/x", false),
            ("https://evilcdn.example/x", false),
            ("https://casino.example.evil.test/", false),
            ("https://user@evil.test/?casino.example", false),
            ("http://casino.example/", false),
            ("javascript:alert(1)", false),
            ("/relative", false),
            ("", false),
        ];
        for (url, ok) in cases {
            assert_eq!(policy.check_target(url).is_ok(), ok, "{url}: {:?}", policy.check_target(url));
        }
        let open = TargetPolicy::new(&[]);
        assert!(open.check_target("https://anything.test/").is_ok());
        assert!(open.check_target("http://localhost:3000/").is_ok());
        assert!(open.check_target("http://127.0.0.1/").is_ok());
        assert!(open.check_target("http://anything.test/").is_err());
        assert!(open.check_target("data:text/html,hi").is_err());
    }
}
