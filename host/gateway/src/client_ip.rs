//! Who the client is (spec 002 part A, request rule 1): the direct peer must be a trusted proxy (one of
//! `GATEWAY_EDGE_TRUSTED_PROXY_CIDRS`), and the proxy names the client in exactly one well-formed
//! `X-Gateway-Client-IP`. With no trusted prefixes (local mode) the socket's peer is the client and the header
//! is ignored.
//!
//! The client IP this returns is only ever fed into the keyed cache identity and the validation request: never
//! logged, stored raw or published (its `Debug` is redacted for that reason).

use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::IpNet;

/// The header the ingress writes from its connection metadata.
pub const CLIENT_IP_HEADER: &str = "x-gateway-client-ip";

/// The trusted proxies' prefixes.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies {
    prefixes: Vec<IpNet>,
}

/// The client's address, canonical (an IPv4-mapped IPv6 address is its IPv4 address).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ClientIp(IpAddr);

impl ClientIp {
    /// The canonical text (`203.0.113.7`, `2001:db8::1`): what the validation backend receives.
    pub fn canonical(&self) -> String {
        self.0.to_string()
    }
}

impl std::fmt::Debug for ClientIp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientIp(<redacted>)")
    }
}

/// Why rule 1 refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientIpError {
    /// The direct peer is not a trusted proxy: 403.
    UntrustedPeer,
    /// The client-IP header is missing: 503 (the ingress did not do its part).
    MissingHeader,
    /// More than one client-IP header value: 503.
    DuplicateHeader,
    /// The header is not one IP address: 503.
    MalformedHeader,
}

impl TrustedProxies {
    /// Parses the prefixes: each canonical (`10.0.0.0/8`, not `10.0.0.1/8` or `10.00.0.0/8`), host bits never
    /// set. An error names the first bad entry.
    pub fn parse(entries: &[String]) -> Result<TrustedProxies, String> {
        let mut prefixes = Vec::with_capacity(entries.len());
        for entry in entries {
            let prefix: IpNet =
                entry.parse().map_err(|_| format!("{entry:?} is not a network prefix (write 10.0.0.0/8)"))?;
            if prefix.trunc() != prefix {
                return Err(format!("{entry:?} has host bits set (the prefix is {})", prefix.trunc()));
            }
            if prefix.to_string() != *entry {
                return Err(format!("{entry:?} is not canonical (write {prefix})"));
            }
            prefixes.push(prefix);
        }
        Ok(TrustedProxies { prefixes })
    }

    /// Local mode: no trusted proxy, the socket peer is the client.
    pub fn is_local_mode(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// Whether the direct peer may send requests at all (rule 1's 403), without reading the header (a CORS
    /// preflight needs no client IP).
    pub fn peer_allowed(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.is_local_mode() || self.prefixes.iter().any(|prefix| prefix.contains(&peer))
    }

    /// The client of a request from `peer` with `headers` (rule 1).
    pub fn client_ip(&self, peer: IpAddr, headers: &HeaderMap) -> Result<ClientIp, ClientIpError> {
        if self.is_local_mode() {
            return Ok(ClientIp(peer.to_canonical()));
        }
        if !self.peer_allowed(peer) {
            return Err(ClientIpError::UntrustedPeer);
        }
        let mut values = headers.get_all(CLIENT_IP_HEADER).iter();
        let value = values.next().ok_or(ClientIpError::MissingHeader)?;
        if values.next().is_some() {
            return Err(ClientIpError::DuplicateHeader);
        }
        // One address, as the ingress writes it: no list, port, brackets or surrounding space.
        let text = value.to_str().map_err(|_| ClientIpError::MalformedHeader)?;
        let ip: IpAddr = text.parse().map_err(|_| ClientIpError::MalformedHeader)?;
        Ok(ClientIp(ip.to_canonical()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(list: &[&str]) -> TrustedProxies {
        TrustedProxies::parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(CLIENT_IP_HEADER, value.parse().unwrap());
        }
        headers
    }

    #[test]
    fn prefixes_must_be_canonical_without_host_bits() {
        assert!(TrustedProxies::parse(&["10.0.0.0/8".into(), "fd00::/8".into()]).is_ok());
        for (bad, why) in [
            ("10.0.0.1/8", "host bits"),
            ("10.0.0.0", "not a network prefix"),
            ("fd00:0::/8", "not canonical"),
            ("10.0.0.0/33", "not a network prefix"),
            ("proxy.internal", "not a network prefix"),
        ] {
            let error = TrustedProxies::parse(&[bad.into()]).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn the_peer_must_be_trusted_and_name_one_client() {
        let trusted = proxies(&["10.0.0.0/8"]);
        let proxy: IpAddr = "10.1.2.3".parse().unwrap();
        let ip = trusted.client_ip(proxy, &headers(&["203.0.113.7"])).unwrap();
        assert_eq!(ip.canonical(), "203.0.113.7");
        assert_eq!(format!("{ip:?}"), "ClientIp(<redacted>)");
        let mapped = trusted.client_ip(proxy, &headers(&["::ffff:203.0.113.7"])).unwrap();
        assert_eq!(mapped, ip, "an IPv4-mapped address is its IPv4 address");
        assert_eq!(
            trusted.client_ip("2001:db8::1".parse().unwrap(), &headers(&["1.2.3.4"])),
            Err(ClientIpError::UntrustedPeer)
        );
        assert_eq!(
            trusted.client_ip("::ffff:10.9.9.9".parse().unwrap(), &headers(&["1.2.3.4"])).unwrap().canonical(),
            "1.2.3.4"
        );
        assert_eq!(trusted.client_ip(proxy, &headers(&[])), Err(ClientIpError::MissingHeader));
        assert_eq!(trusted.client_ip(proxy, &headers(&["1.2.3.4", "5.6.7.8"])), Err(ClientIpError::DuplicateHeader));
        for bad in ["1.2.3.4, 5.6.7.8", "1.2.3.4:80", "[2001:db8::1]", " 1.2.3.4", "unknown", ""] {
            assert_eq!(trusted.client_ip(proxy, &headers(&[bad])), Err(ClientIpError::MalformedHeader), "{bad:?}");
        }
    }

    #[test]
    fn local_mode_uses_the_socket_peer() {
        let local = proxies(&[]);
        let ip = local.client_ip("127.0.0.1".parse().unwrap(), &headers(&["203.0.113.7"])).unwrap();
        assert_eq!(ip.canonical(), "127.0.0.1", "the header is ignored without a trusted proxy");
    }
}
