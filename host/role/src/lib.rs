//! `flowhost-role`: what a role is, and how the roles of one process share its listeners.
//!
//! A role (admin, engine, push-api, sender, presence, campaigns, and the gateway whole or as its edge, ingest, worker
//! and admin parts; Studio is served by the admin role) is one type implementing [`Role`], as Spin's triggers implement
//! its `Trigger` trait: from the process's [`RoleContext`] (the typed configuration, the ports, the metrics registry,
//! the shared component store) it builds its [`RoleParts`]: the HTTP [`Listener`]s it serves (a name, the address it
//! defaults to and the settings that move it, its routes), its background tasks, and the liveness and readiness
//! [`Check`]s it contributes. `flowhost serve` composes the roles the configuration selects; no role knows another.
//!
//! [`serve_listeners`] binds the listeners. Listeners whose addresses are equal share one socket (their routes are
//! merged), so the push routes sit beside the admin API by default. Every socket answers `GET /health`
//! (liveness: the process's liveness checks) and `GET /ready` (the readiness checks of the roles on that socket):
//! 200, or 503 naming the failing checks. Handlers can read the TCP peer address with axum's
//! `ConnectInfo<SocketAddr>` extractor (the gateway checks it against its trusted proxies).

mod check;
mod listeners;
pub mod openapi;
mod refused_body;

pub use check::{Check, CheckFn, CheckResult};
pub use listeners::{
    bind, metrics_response, metrics_router, serve_listeners, BoundListener, HealthStyle, Listener, ListenerSet,
    LocalAddr, LISTEN_BACKLOG,
};
pub use openapi::{routes, ApiRouter};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::http::Extensions;
use flowhost_core::config::{Config, ConfigError, SectionEntry};
use flowhost_core::ports::Ports;
use tokio_util::sync::CancellationToken;

/// A background task of a role: runs until the process's shutdown token fires. An error (or an early return)
/// stops the whole process, as a failed listener does.
pub type Task = Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send + 'static>>;

/// What every role is built from: one value, handed to each role the configuration selects.
#[derive(Clone)]
pub struct RoleContext {
    pub config: Arc<Config>,
    pub ports: Ports,
    /// The process's Prometheus registry; `/metrics` of the main listener serves it.
    pub registry: prometheus::Registry,
    /// Services `serve` shares between roles, found by type: the plugin runtime's component store
    /// (`Arc<ComponentStore>`) is there when a selected role asked for it ([`Role::USES_COMPONENTS`]). Keeping
    /// them by type keeps this crate (and roles that need none) free of their dependencies.
    pub services: Extensions,
    /// Cancelled when the process stops; tasks end then.
    pub shutdown: CancellationToken,
}

impl RoleContext {
    /// The shared service of type `T`, if `serve` provided one.
    pub fn service<T: Clone + Send + Sync + 'static>(&self) -> Option<T> {
        self.services.get::<T>().cloned()
    }
}

impl std::fmt::Debug for RoleContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoleContext")
            .field("roles", &self.config.roles)
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

/// The pieces a role contributes to the process.
#[derive(Default)]
pub struct RoleParts {
    pub listeners: Vec<Listener>,
    pub tasks: Vec<Task>,
    /// Checks every `/health` of the process runs: a failure means the process cannot do its job until an
    /// operator acts (e.g. a broken caller policy).
    pub liveness: Vec<Check>,
    /// Checks `/ready` runs on the listeners that serve this role's routes (all listeners for a role without
    /// routes of its own, such as the engine).
    pub readiness: Vec<Check>,
    /// Names of settings the role works with but an operator should look at (e.g. an allowlist left empty):
    /// every `/ready` lists them under `warnings`, and the start logs them.
    pub warnings: Vec<&'static str>,
}

impl std::fmt::Debug for RoleParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoleParts")
            .field("listeners", &self.listeners.iter().map(|l| l.name).collect::<Vec<_>>())
            .field("tasks", &self.tasks.len())
            .field("liveness", &self.liveness.iter().map(Check::name).collect::<Vec<_>>())
            .field("readiness", &self.readiness.iter().map(Check::name).collect::<Vec<_>>())
            .field("warnings", &self.warnings)
            .finish()
    }
}

impl RoleParts {
    pub fn listener(mut self, listener: Listener) -> Self {
        self.listeners.push(listener);
        self
    }

    pub fn task(mut self, task: impl Future<Output = anyhow::Result<()>> + Send + 'static) -> Self {
        self.tasks.push(Box::pin(task));
        self
    }

    pub fn liveness(mut self, check: Check) -> Self {
        self.liveness.push(check);
        self
    }

    /// A setting worth an operator's look (see [`RoleParts::warnings`]).
    pub fn warning(mut self, name: &'static str) -> Self {
        self.warnings.push(name);
        self
    }

    pub fn readiness(mut self, check: Check) -> Self {
        self.readiness.push(check);
        self
    }
}

/// One role of the process (see the crate documentation).
#[async_trait::async_trait]
pub trait Role: Send + 'static {
    /// The role's name in `--roles` / `FLOWHOST_ROLES`.
    const NAME: &'static str;
    /// The role's own section of the configuration (`[engine]`), defined in its crate's `config.rs`; roles may
    /// share one (the gateway's parts, the push API and the sender). The process-wide settings are the core's.
    const SECTION: Option<SectionEntry> = None;
    /// Whether the role needs the plugin runtime's component store (started once per process, shared).
    const USES_COMPONENTS: bool = false;

    /// Checks, before anything starts, what the role needs of the configuration beyond each setting's bounds
    /// (a required secret, a listener other hosts reach only with a token). `roles` are the names of every role
    /// the process runs. The error names the setting.
    fn check(config: &Config, roles: &[&str]) -> Result<(), ConfigError> {
        let _ = (config, roles);
        Ok(())
    }

    /// Builds the role's parts. Bad settings fail here, naming the setting; nothing is served yet.
    async fn build(context: &RoleContext) -> anyhow::Result<RoleParts>;
}

/// What building a role returns, boxed so role constructors fit in one table.
pub type BuildFuture<'a> = Pin<Box<dyn Future<Output = anyhow::Result<RoleParts>> + Send + 'a>>;

/// A role's constructor, as a value: what `serve` keeps in its table of roles.
#[derive(Clone, Copy)]
pub struct RoleEntry {
    pub name: &'static str,
    pub section: Option<SectionEntry>,
    pub uses_components: bool,
    pub check: fn(&Config, &[&str]) -> Result<(), ConfigError>,
    pub build: for<'a> fn(&'a RoleContext) -> BuildFuture<'a>,
}

impl std::fmt::Debug for RoleEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoleEntry").field("name", &self.name).finish_non_exhaustive()
    }
}

impl RoleEntry {
    /// The entry of role `R`.
    pub fn of<R: Role>() -> RoleEntry {
        RoleEntry {
            name: R::NAME,
            section: R::SECTION,
            uses_components: R::USES_COMPONENTS,
            check: R::check,
            build: |context| R::build(context),
        }
    }
}
