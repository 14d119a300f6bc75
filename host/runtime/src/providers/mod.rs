//! The host capabilities a plugin can be granted, as providers in one registry ([`PROVIDERS`]): each provider
//! is one module implementing the generated host traits of its WIT interface, for every released version of the
//! package, and knows how to link itself. A component is linked with exactly the providers it imports, each of
//! them granted by the operator and declared in its manifest (`crate::Runtime::link`).
//!
//! Adding a capability: a WIT interface in a new package version (or a package of its own, as
//! `flowhost:notify`), a module here implementing its host trait on [`HostState`], a [`Capability`] variant and a
//! row in [`PROVIDERS`] with every version it serves.

mod clock;
mod documents;
mod log;
mod notifications;

use wasmtime::component::{HasSelf, Linker};

use crate::bindings::{notify_v1, notify_v2, v1, v2};
use crate::host::HostState;

/// A host capability a plugin may be granted. Each is a WIT interface of `flowhost:plugin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `flowhost:plugin/log`: write into the host's log.
    Log,
    /// `flowhost:plugin/clock`: read the host's clock.
    Clock,
    /// `flowhost:plugin/documents`: read and write JSON documents scoped to the plugin's id.
    Documents,
    /// `flowhost:notify/sender`: deliver web-push and in-app notifications through the host, which keeps the
    /// keys and secrets.
    Notifications,
}

/// A released version of the `flowhost:plugin` package.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PackageVersion {
    /// `flowhost:plugin@0.1.0`
    V0_1,
    /// `flowhost:plugin@0.2.0`
    V0_2,
}

impl PackageVersion {
    /// Every version this host serves, oldest first.
    pub const ALL: [PackageVersion; 2] = [PackageVersion::V0_1, PackageVersion::V0_2];

    /// The version as written after `@` in an import name.
    pub fn as_str(self) -> &'static str {
        match self {
            PackageVersion::V0_1 => "0.1.0",
            PackageVersion::V0_2 => "0.2.0",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<PackageVersion> {
        PackageVersion::ALL.into_iter().find(|version| version.as_str() == text)
    }
}

type LinkFn = fn(&mut Linker<HostState>) -> wasmtime::Result<()>;

/// One capability's provider: its interface name and how to link each version of it that the host serves.
pub(crate) struct Provider {
    pub capability: Capability,
    /// The WIT interface without version, e.g. `flowhost:plugin/log`.
    pub interface: &'static str,
    /// Each served version of the interface (as written after `@`) and how to link it.
    versions: &'static [(&'static str, LinkFn)],
}

impl Provider {
    /// How to link the interface's `version`, if the host serves it.
    fn version(&self, version: &str) -> Option<LinkFn> {
        self.versions.iter().find(|(served, _)| *served == version).map(|(_, link)| *link)
    }
}

/// Every capability this host offers.
pub(crate) const PROVIDERS: [Provider; 4] = [
    Provider {
        capability: Capability::Log,
        interface: "flowhost:plugin/log",
        versions: &[
            ("0.1.0", |linker| {
                v1::action::flowhost::plugin::log::add_to_linker::<_, HasSelf<HostState>>(linker, |s| s)
            }),
            ("0.2.0", |linker| {
                v2::action::flowhost::plugin::log::add_to_linker::<_, HasSelf<HostState>>(linker, |s| s)
            }),
        ],
    },
    Provider {
        capability: Capability::Clock,
        interface: "flowhost:plugin/clock",
        versions: &[
            ("0.1.0", |linker| {
                v1::action::flowhost::plugin::clock::add_to_linker::<_, HasSelf<HostState>>(linker, |s| s)
            }),
            ("0.2.0", |linker| {
                v2::action::flowhost::plugin::clock::add_to_linker::<_, HasSelf<HostState>>(linker, |s| s)
            }),
        ],
    },
    Provider {
        capability: Capability::Documents,
        interface: "flowhost:plugin/documents",
        versions: &[
            ("0.1.0", |linker| {
                v1::action::flowhost::plugin::documents::add_to_linker::<_, HasSelf<HostState>>(linker, |s| s)
            }),
            ("0.2.0", |linker| {
                v2::action::flowhost::plugin::documents::add_to_linker::<_, HasSelf<HostState>>(linker, |s| s)
            }),
        ],
    },
    Provider {
        capability: Capability::Notifications,
        interface: "flowhost:notify/sender",
        versions: &[
            ("0.1.0", |linker| {
                notify_v1::flowhost::notify::sender::add_to_linker::<_, HasSelf<HostState>>(linker, |s| s)
            }),
            ("0.2.0", |linker| {
                notify_v2::flowhost::notify::sender::add_to_linker::<_, HasSelf<HostState>>(linker, |s| s)
            }),
        ],
    },
];

/// Interfaces of `flowhost:plugin` that carry only types (no functions): always satisfiable.
const TYPE_ONLY_INTERFACES: [&str; 1] = ["flowhost:plugin/types"];

/// What a component's import `name` is, as far as the host is concerned.
pub(crate) enum Import {
    /// A capability in a version the host serves, and how to link it.
    Capability(&'static Provider, LinkFn),
    /// A types-only interface of a released package version.
    TypesOnly,
    /// A WASI interface (served by `wasmtime-wasi`, or a trap stub).
    Wasi,
    /// Anything else: the component cannot be linked.
    Unknown,
}

impl Import {
    pub(crate) fn of(name: &str) -> Import {
        if name.starts_with("wasi:") {
            return Import::Wasi;
        }
        let Some((interface, version)) = name.split_once('@') else { return Import::Unknown };
        if TYPE_ONLY_INTERFACES.contains(&interface) && PackageVersion::parse(version).is_some() {
            return Import::TypesOnly;
        }
        let provider = PROVIDERS.iter().find(|provider| provider.interface == interface);
        match provider.and_then(|provider| Some((provider, provider.version(version)?))) {
            Some((provider, link)) => Import::Capability(provider, link),
            None => Import::Unknown,
        }
    }
}

impl Capability {
    /// Every capability this version of the host offers.
    pub const ALL: [Capability; 4] =
        [Capability::Log, Capability::Clock, Capability::Documents, Capability::Notifications];

    /// The name used in manifests (`log`, `clock`, `documents`, `notifications`).
    pub fn name(self) -> &'static str {
        match self {
            Capability::Log => "log",
            Capability::Clock => "clock",
            Capability::Documents => "documents",
            Capability::Notifications => "notifications",
        }
    }

    /// The capability called `name` in manifests and configuration.
    pub fn from_name(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|capability| capability.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_capability_has_one_provider_and_imports_resolve_per_version() {
        for capability in Capability::ALL {
            assert_eq!(PROVIDERS.iter().filter(|p| p.capability == capability).count(), 1, "{capability:?}");
        }
        assert!(matches!(
            Import::of("flowhost:plugin/log@0.2.0"),
            Import::Capability(Provider { capability: Capability::Log, .. }, _)
        ));
        assert!(matches!(
            Import::of("flowhost:plugin/documents@0.1.0"),
            Import::Capability(Provider { capability: Capability::Documents, .. }, _)
        ));
        assert!(matches!(
            Import::of("flowhost:notify/sender@0.1.0"),
            Import::Capability(Provider { capability: Capability::Notifications, .. }, _)
        ));
        assert!(matches!(
            Import::of("flowhost:notify/sender@0.2.0"),
            Import::Capability(Provider { capability: Capability::Notifications, .. }, _)
        ));
        assert!(matches!(Import::of("flowhost:notify/sender@0.3.0"), Import::Unknown));
        assert!(matches!(Import::of("flowhost:notify/types@0.1.0"), Import::Unknown));
        assert!(matches!(Import::of("flowhost:plugin/types@0.2.0"), Import::TypesOnly));
        assert!(matches!(Import::of("flowhost:plugin/log@0.3.0"), Import::Unknown));
        assert!(matches!(Import::of("acme:evil/exfiltrate@1.0.0"), Import::Unknown));
        assert!(matches!(Import::of("wasi:cli/environment@0.2.6"), Import::Wasi));
    }
}
