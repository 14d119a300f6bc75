//! Which push services Flowhost may POST to (`FLOWHOST_WEBPUSH_PUSH_SERVICE_HOSTS`): a subscription's endpoint
//! comes from a browser through a bridge, so without this list a forged subscription could make Flowhost send
//! requests to any address, internal ones included. Entries are `host` (every port) or `host:port`, with
//! `*.example.com` for subdomains; loopback addresses are allowed only when listed. The default lists the push
//! services of Chrome, Firefox, Edge and Safari.

/// The push services browsers use today.
pub const DEFAULT_PUSH_SERVICE_HOSTS: &str =
    "fcm.googleapis.com,android.googleapis.com,updates.push.services.mozilla.com,*.notify.windows.com,web.push.apple.com,*.push.apple.com";

/// A parsed allowlist of push-service hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushServiceHosts(Vec<(String, Option<u16>)>);

impl Default for PushServiceHosts {
    fn default() -> Self {
        PushServiceHosts::parse(DEFAULT_PUSH_SERVICE_HOSTS).expect("the default list parses")
    }
}

impl PushServiceHosts {
    /// Parses a comma-separated list; an entry that is neither `host` nor `host:port` is an error naming it.
    pub fn parse(list: &str) -> Result<PushServiceHosts, String> {
        let mut entries = Vec::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (host, port) = match entry.rsplit_once(':') {
                Some((host, port)) if !host.contains(':') || host.ends_with(']') => {
                    let port: u16 = port.parse().map_err(|_| format!("{entry:?}: the port is not a number"))?;
                    (host, Some(port))
                }
                _ => (entry, None),
            };
            let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
            let name = host.strip_prefix("*.").unwrap_or(&host);
            if name.is_empty() || name.contains(['/', ' ', '@', '?', '#']) {
                return Err(format!("{entry:?} is not a host or host:port"));
            }
            entries.push((host, port));
        }
        Ok(PushServiceHosts(entries))
    }

    /// Whether `host` (lowercase, without brackets) on `port` may be called.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        self.0.iter().any(|(allowed, allowed_port)| {
            let host_matches = match allowed.strip_prefix("*.") {
                Some(suffix) => host.ends_with(&format!(".{suffix}")),
                None => *allowed == host,
            };
            host_matches && allowed_port.is_none_or(|p| p == port)
        })
    }

    /// Whether the `https` endpoint URL may be called.
    pub fn allows_url(&self, url: &url::Url) -> bool {
        url.scheme() == "https"
            && match (url.host_str(), url.port_or_known_default()) {
                (Some(host), Some(port)) => self.allows(host, port),
                _ => false,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_ports_and_wildcards() {
        let hosts = PushServiceHosts::parse("fcm.googleapis.com, 127.0.0.1:8443,*.notify.windows.com,[::1]").unwrap();
        let allows = |u: &str| hosts.allows_url(&url::Url::parse(u).unwrap());
        assert!(allows("https://fcm.googleapis.com/fcm/send/abc"));
        assert!(allows("https://FCM.googleapis.com:8443/x"), "no port listed: every port");
        assert!(allows("https://127.0.0.1:8443/push/1"));
        assert!(!allows("https://127.0.0.1:9443/push/1"), "another port of a host listed with one");
        assert!(!allows("https://10.0.0.5/push"), "not listed");
        assert!(allows("https://wns2-by3p.notify.windows.com/w/?token=x"));
        assert!(!allows("https://notify.windows.com.evil.example/x"));
        assert!(allows("https://[::1]:9000/p"));
        assert!(!allows("http://fcm.googleapis.com/x"), "https only");
        let default = PushServiceHosts::default();
        assert!(default.allows("updates.push.services.mozilla.com", 443));
        assert!(!default.allows("127.0.0.1", 443), "loopback only when listed");
        assert!(PushServiceHosts::parse("a:b").unwrap_err().contains("port"));
        assert!(PushServiceHosts::parse("http://x").is_err());
    }
}
