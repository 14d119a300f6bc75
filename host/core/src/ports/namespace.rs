//! A deployment's namespace on a shared server: an optional prefix the distributed adapters put in front of
//! every name they send to their server (NATS subjects, Kafka topics and consumer groups, Redis keys) and take
//! off every name they receive, so the rest of Flowhost only ever sees the specification's names.
//!
//! Off by default: the specification fixes the names (`triggers.v2.<service>.inbound`, ...), and a deployment
//! isolates itself with its server's own mechanism first (a NATS account, a Kafka cluster or prefixed ACLs, a
//! Redis logical database). The prefix is for operators who cannot; docs/configuration.md, "Sharing servers
//! between deployments", says which to use where.

use std::borrow::Cow;
use std::sync::Arc;

/// The prefix of one deployment's names on one backend, with its separator (`staging` + `.` gives
/// `staging.triggers.v2.notifications.inbound`). [`Namespace::NONE`] leaves names as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Namespace {
    /// The prefix with its separator (`staging.`), or `None`.
    prefix: Option<Arc<str>>,
}

impl Namespace {
    /// Names as the specification gives them.
    pub const NONE: Namespace = Namespace { prefix: None };

    /// `name` followed by `separator` in front of every name; an empty `name` is [`Namespace::NONE`]. The
    /// configuration checks `name` against what its backend allows in a name.
    pub fn new(name: &str, separator: char) -> Namespace {
        if name.is_empty() {
            return Namespace::NONE;
        }
        Namespace { prefix: Some(format!("{name}{separator}").into()) }
    }

    /// From an optional setting.
    pub fn from_setting(name: Option<&str>, separator: char) -> Namespace {
        Namespace::new(name.unwrap_or_default(), separator)
    }

    pub fn is_set(&self) -> bool {
        self.prefix.is_some()
    }

    /// The prefix with its separator (empty when unset).
    pub fn prefix(&self) -> &str {
        self.prefix.as_deref().unwrap_or_default()
    }

    /// The name on the server of the local `name`.
    pub fn wire<'a>(&self, name: &'a str) -> Cow<'a, str> {
        match &self.prefix {
            None => Cow::Borrowed(name),
            Some(prefix) => Cow::Owned(format!("{prefix}{name}")),
        }
    }

    /// The local name of the server's `wire` name, or `None` when it lies outside this namespace.
    pub fn local<'a>(&self, wire: &'a str) -> Option<&'a str> {
        match &self.prefix {
            None => Some(wire),
            Some(prefix) => wire.strip_prefix(&**prefix),
        }
    }

    /// [`Namespace::local`] for an owned name, reusing it when there is no prefix; a name outside the
    /// namespace stays as it is (it cannot be mistaken for a local one: the adapters only subscribe inside).
    pub fn into_local(&self, wire: String) -> String {
        match &self.prefix {
            None => wire,
            Some(prefix) => wire.strip_prefix(&**prefix).map(str::to_owned).unwrap_or(wire),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Namespace;

    #[test]
    fn names_cross_the_wire_with_the_prefix_and_come_back_without() {
        let none = Namespace::NONE;
        assert_eq!(none.wire("triggers.v2.replies"), "triggers.v2.replies");
        assert_eq!(none.local("triggers.v2.replies"), Some("triggers.v2.replies"));
        assert_eq!(Namespace::new("", '.'), Namespace::NONE);

        let staging = Namespace::new("staging", '.');
        assert!(staging.is_set());
        assert_eq!(staging.wire("triggers.v2.replies"), "staging.triggers.v2.replies");
        assert_eq!(staging.local("staging.triggers.v2.replies"), Some("triggers.v2.replies"));
        assert_eq!(staging.local("triggers.v2.replies"), None);
        assert_eq!(staging.local("stagingx.a"), None);
        assert_eq!(staging.into_local("staging.a.b".to_owned()), "a.b");
        assert_eq!(Namespace::new("blue", ':').wire("gw:ready"), "blue:gw:ready");
    }
}
