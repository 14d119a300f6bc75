//! The [`Runtime`] (engine, pooling allocator, epoch ticker) and loaded [`Plugin`]s, with a fresh store and
//! instance per invocation.

use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::Arc;

use flowhost_core::digest::sha256_bytes_hex;
use flowhost_core::notify::Notifications;
use flowhost_core::ports::DocumentStore;
use flowhost_core::{Clock, SystemClock};
use sha2::Digest;
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

use crate::host::HostState;
use crate::invoke::{classify, new_store, EpochTicker, Identity, Inner};
use crate::plugin::Plugin;
use crate::providers::Import;
use crate::{Capability, Limits, LoadError, Manifest, RuntimeConfig, RuntimeError, RuntimeMetrics};

/// Runs plugin components. Cheap to clone; plugins keep it alive.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("config", &self.inner.config).finish_non_exhaustive()
    }
}

/// The wasmtime configuration of a runtime with `config`: the component model, epoch interruption, fuel, and the
/// pooling allocator sized by `config.pool`. Public for the `invoke` benchmark, whose anchor instantiates a
/// component in a bare engine of the same configuration.
pub fn engine_config(config: &RuntimeConfig) -> wasmtime::Config {
    let pool_config = &config.pool;
    let instances = pool_config.max_instances.max(1);
    let per_component = pool_config.max_core_instances_per_component.max(1);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(instances)
        .total_core_instances(instances.saturating_mul(per_component))
        .max_core_instances_per_component(per_component)
        .total_memories(instances)
        .max_memories_per_component(1)
        .total_tables(instances.saturating_mul(per_component))
        .total_stacks(instances)
        .max_memory_size(pool_config.max_memory_bytes)
        .decommit_batch_size(pool_config.decommit_batch_size.max(1))
        .linear_memory_keep_resident(pool_config.memory_keep_resident_bytes)
        .table_keep_resident(pool_config.memory_keep_resident_bytes)
        .async_stack_keep_resident(pool_config.stack_keep_resident_bytes)
        .pagemap_scan(if pool_config.pagemap_scan { Enabled::Auto } else { Enabled::No });

    let mut wasm = wasmtime::Config::new();
    wasm.wasm_component_model(true)
        .epoch_interruption(true)
        .consume_fuel(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    wasm
}

impl Runtime {
    /// A runtime with `config` and the system clock.
    pub fn new(config: RuntimeConfig) -> Result<Runtime, RuntimeError> {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// A runtime whose `clock` capability reads `clock` (tests inject a manual one), without a document store
    /// (the `documents` capability then answers every call with an error).
    pub fn with_clock(config: RuntimeConfig, clock: Arc<dyn Clock>) -> Result<Runtime, RuntimeError> {
        Self::with_host(config, clock, None, None)
    }

    /// A runtime whose capabilities are served by `clock` and `documents` (plugin documents live in its
    /// `plugin_documents` collection, scoped by plugin id), counting invocations in `metrics`.
    pub fn with_host(
        config: RuntimeConfig,
        clock: Arc<dyn Clock>,
        documents: Option<Arc<dyn DocumentStore>>,
        metrics: Option<RuntimeMetrics>,
    ) -> Result<Runtime, RuntimeError> {
        if config.limits.memory_bytes > config.pool.max_memory_bytes {
            return Err(RuntimeError(format!(
                "limits.memory_bytes ({}) exceeds pool.max_memory_bytes ({})",
                config.limits.memory_bytes, config.pool.max_memory_bytes
            )));
        }
        if config.epoch_tick.is_zero() {
            return Err(RuntimeError("epoch_tick must be positive".into()));
        }
        let wasm = engine_config(&config);
        let pool_instances = config.pool.max_instances.max(1);
        let engine = Engine::new(&wasm).map_err(|error| RuntimeError(format!("{error:#}")))?;
        let ticker = EpochTicker::start(&engine, config.epoch_tick);
        let notifications = std::sync::RwLock::new(None);
        Ok(Runtime {
            inner: Arc::new(Inner {
                engine,
                config,
                clock,
                documents,
                metrics,
                notifications,
                idle_budget: crate::reuse::IdleBudget::of_pool(pool_instances),
                _ticker: ticker,
            }),
        })
    }

    /// Serves the `notifications` capability with `sender` from now on (the sender role installs it once its
    /// keys and stores are ready). Until then, and after [`Runtime::withdraw_notifications`], every call of the
    /// capability answers `not-ready`.
    pub fn provide_notifications(&self, sender: Arc<dyn Notifications>) {
        *self.inner.notifications.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(sender);
    }

    /// Stops serving the `notifications` capability (the sender role shutting down).
    pub fn withdraw_notifications(&self) {
        *self.inner.notifications.write().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Whether the `notifications` capability is served.
    pub fn notifications_provided(&self) -> bool {
        self.inner.notifications.read().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }

    /// The configuration this runtime runs with.
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// Compiles a component to this engine's native code, for [`Runtime::load_precompiled`] (the component
    /// catalog stores both the `.wasm` and this).
    pub fn precompile(&self, wasm: &[u8]) -> Result<Vec<u8>, LoadError> {
        crate::marker::check(wasm)?;
        self.inner.engine.precompile_component(wasm).map_err(|error| LoadError::InvalidComponent(format!("{error:#}")))
    }

    /// Loads a component (`.wasm` bytes) granting it `grants`: compiles it, checks and links its imports,
    /// prepares the instance and reads its manifest. Compiling takes tens of milliseconds of CPU on the calling
    /// thread; a server compiles with [`Runtime::compile`] on a blocking thread and then calls
    /// [`Runtime::load_compiled`].
    pub async fn load(&self, wasm: &[u8], grants: &[Capability]) -> Result<Plugin, LoadError> {
        let compiled = self.compile(wasm)?;
        self.load_compiled(compiled, grants).await
    }

    /// Checks the SDK's version marker ([`LoadError::UnsupportedSdk`]) and compiles a component to native code
    /// (CPU-bound, synchronous: about 50-150 ms for a small component).
    pub fn compile(&self, wasm: &[u8]) -> Result<Compiled, LoadError> {
        crate::marker::check(wasm)?;
        Component::new(&self.inner.engine, wasm)
            .map(Compiled)
            .map_err(|error| LoadError::InvalidComponent(format!("{error:#}")))
    }

    /// [`Runtime::compile`] with a cache of native code in `cache_dir`: the first compile of some bytes writes
    /// `<sha256 of the wasm>-<engine fingerprint>.cwasm` there (checksummed), later ones, also in later processes,
    /// load it in about a millisecond instead of compiling again (a 2 MB component takes seconds). A missing,
    /// unreadable, damaged or incompatible cache entry is compiled again and rewritten; a cache that cannot be
    /// written is only logged.
    #[allow(unsafe_code)]
    pub fn compile_cached(&self, wasm: &[u8], cache_dir: &Path) -> Result<Compiled, LoadError> {
        let engine = &self.inner.engine;
        let fingerprint = {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            engine.precompile_compatibility_hash().hash(&mut hasher);
            hasher.finish()
        };
        let path = cache_dir.join(format!("{}-{fingerprint:016x}.cwasm", sha256_bytes_hex(wasm)));
        if let Some(native) = std::fs::read(&path).ok().and_then(checked_payload) {
            // SAFETY: the file holds `Component::serialize` output of an engine with the same compatibility
            // fingerprint, written by this host into its own data directory, and its checksum matches.
            match unsafe { Component::deserialize(engine, &native) } {
                Ok(component) => return Ok(Compiled(component)),
                Err(error) => tracing::warn!(path = %path.display(), %error, "cached component unusable; compiling"),
            }
        }
        let compiled = self.compile(wasm)?;
        if let Err(error) =
            compiled.0.serialize().map_err(|e| std::io::Error::other(format!("{e:#}"))).and_then(|native| {
                std::fs::create_dir_all(cache_dir)?;
                // Unique per writer: nodes sharing the directory may compile the same component at once.
                static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let temporary = path.with_extension(format!("{}-{write}.tmp", std::process::id()));
                let mut file = sha2::Sha256::digest(&native).to_vec();
                file.extend_from_slice(&native);
                std::fs::write(&temporary, file)?;
                std::fs::rename(&temporary, &path)
            })
        {
            tracing::warn!(path = %path.display(), %error, "cannot cache a compiled component");
        }
        Ok(compiled)
    }

    /// Loads a component compiled by [`Runtime::compile`]: checks and links its imports, prepares the instance
    /// and reads its manifest.
    pub async fn load_compiled(&self, compiled: Compiled, grants: &[Capability]) -> Result<Plugin, LoadError> {
        self.prepare(compiled.0, grants).await
    }

    /// Loads a component precompiled by [`Runtime::precompile`] (about 100 times faster than compiling).
    ///
    /// # Safety
    /// `bytes` are native code that will run in this process. wasmtime checks that they were produced by the same
    /// wasmtime version with a compatible configuration, but not that they are intact: pass only the output of
    /// [`Runtime::precompile`], read back from storage that only the host writes.
    #[allow(unsafe_code)]
    pub async unsafe fn load_precompiled(&self, bytes: &[u8], grants: &[Capability]) -> Result<Plugin, LoadError> {
        // SAFETY: the caller guarantees that `bytes` come from `precompile` of a compatible engine (see above).
        let component = unsafe { Component::deserialize(&self.inner.engine, bytes) }
            .map_err(|error| LoadError::InvalidComponent(format!("{error:#}")))?;
        self.prepare(component, grants).await
    }

    /// Checks the component's imports against `grants` and links them: the granted capabilities it imports and
    /// WASI (locked down; traps for interfaces the host does not implement).
    pub(crate) fn link(
        &self,
        component: &Component,
        grants: &[Capability],
    ) -> Result<(InstancePre<HostState>, Vec<Capability>), LoadError> {
        let engine = &self.inner.engine;
        let mut imported = Vec::new();
        let mut linker = Linker::new(engine);
        for (name, _) in component.component_type().imports(engine) {
            match Import::of(name) {
                Import::Capability(provider, link) => {
                    if !grants.contains(&provider.capability) {
                        return Err(LoadError::NotGranted { capability: provider.capability.name().to_string() });
                    }
                    link(&mut linker).map_err(|error| LoadError::Link(format!("{error:#}")))?;
                    if !imported.contains(&provider.capability) {
                        imported.push(provider.capability);
                    }
                }
                Import::TypesOnly | Import::Wasi => {}
                Import::Unknown => return Err(LoadError::UnsatisfiableImport(name.to_string())),
            }
        }
        // WASI 0.2 with a locked-down context per store (see `crate::wasi`). A guest built against an older 0.2.x
        // links to it by semver. (Not `define_unknown_imports_as_traps`: it would define the guest's exact 0.2.x
        // names as traps, shadowing the real WASI.) A WASI interface this host does not implement (`wasi:http`)
        // fails the link below, naming the import.
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|error| LoadError::Link(format!("{error:#}")))?;
        let pre = linker.instantiate_pre(component).map_err(|error| LoadError::Link(format!("{error:#}")))?;
        Ok((pre, imported))
    }

    /// A fresh store for reading a manifest, with the default limits.
    pub(crate) fn loading_store(&self) -> Result<Store<HostState>, LoadError> {
        let loading = Identity { plugin: "(loading)".into(), scope: "(loading)".into() };
        new_store(&self.inner, loading, &self.inner.config.limits, crate::host::TenantScope::None)
            .map_err(LoadError::Manifest)
    }

    /// Parses the text a `manifest` export returned and checks that it declares every imported capability;
    /// returns it with the plugin's identity and limits (the defaults tightened by the manifest).
    pub(crate) fn read_manifest(
        &self,
        text: wasmtime::Result<String>,
        store: Store<HostState>,
        imported: &[Capability],
    ) -> Result<(Manifest, Identity, Limits), LoadError> {
        let limits = &self.inner.config.limits;
        let text = text.map_err(|error| LoadError::Manifest(classify(error, &store, limits)))?;
        drop(store);
        let (manifest, limits) = Manifest::read(&text, imported, limits)?;
        let identity = Identity {
            plugin: format!("{}@{}", manifest.id, manifest.version).into(),
            scope: manifest.id.as_str().into(),
        };
        Ok((manifest, identity, limits))
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }
}

/// The payload of a cache file (a SHA-256 of the payload, then the payload), when the checksum matches.
fn checked_payload(mut file: Vec<u8>) -> Option<Vec<u8>> {
    if file.len() < 32 {
        return None;
    }
    let payload = file.split_off(32);
    (sha2::Sha256::digest(&payload).as_slice() == file.as_slice()).then_some(payload)
}

/// A compiled component, not yet linked: the output of [`Runtime::compile`]. Cheap to clone.
#[derive(Clone)]
pub struct Compiled(pub(crate) Component);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_cap_above_the_pool_ceiling_is_refused() {
        let mut config = RuntimeConfig::default();
        config.limits.memory_bytes = config.pool.max_memory_bytes + 1;
        assert!(Runtime::new(config).is_err());
    }
}
