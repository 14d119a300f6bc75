//! `flowhost-runtime`: runs WebAssembly plugin components (`flowhost:plugin@0.1.0`, see `wit/`) with wasmtime.
//! **This is the only crate that knows wasmtime and runs `bindgen!`**; callers load a [`Plugin`] from bytes and
//! [`Plugin::invoke`] it with JSON.
//!
//! - A [`Runtime`] owns one wasmtime engine with the pooling allocator, fuel metering and epoch interruption
//!   (a background thread ticks the epoch), and the [`RuntimeConfig`] with the default [`Limits`].
//! - Loading compiles the component (or deserializes one precompiled by [`Runtime::precompile`]), checks its
//!   imports against the granted [`Capability`]s, links them, prepares an `InstancePre` and reads the manifest by
//!   calling the component's `manifest` export.
//! - **Every invocation gets a fresh store and instance** (no state leaks between calls or tenants; an instance is
//!   unusable after a trap anyway) with its own limits: wall-clock deadline (epoch), fuel, memory cap, output
//!   size. The one exception is opt-in: an action of a plugin whose manifest declares `reuse_instances` runs in
//!   an idle instance of the same tenant when one is kept ([`reuse`](crate::reuse)), with the same limits. Any failure is an [`InvokeError`] with a class; nothing a guest does panics or stops the host.
//!   A busy guest yields to the async executor at every epoch tick, so it never monopolises a worker thread.
//!
//! ## WASI: `wasmtime-wasi`, locked down
//! Every Rust `wasm32-wasip2` guest imports `wasi:cli`, `wasi:io`, `wasi:clocks`, `wasi:random`... and ordinary
//! crates call them (`println!`, `chrono::Utc::now`, `rand`, `uuid::new_v4`, std's default panic hook). The host
//! links WASI 0.2 from `wasmtime-wasi` with a context built per store that grants nothing outside the sandbox
//! (see [`wasi`](crate::wasi) for the list): no preopened directory, no environment, no sockets; stdout and
//! stderr go into the host's log, tagged with the plugin, bounded per line and per invocation; clocks and random
//! numbers are allowed. A component importing a WASI interface the host does not implement (`wasi:http`, ...)
//! is refused at load ([`LoadError::Link`], naming the import).
//!
//! A `flowhost:plugin` capability import must be granted ([`LoadError::NotGranted`]) and any other non-WASI
//! import is refused ([`LoadError::UnsatisfiableImport`]), so a component never loads with a capability the
//! host did not grant.
//!
//! ## Secrets never reach a guest
//! The host passes a guest only the action name and its JSON input, and the capabilities give it only a log sink
//! and a clock. No secret, credential or environment variable is ever written into guest memory; later
//! capabilities that need a secret (signing, web-push delivery) take the request and do the work in the host.

mod bindings;
mod error;
mod host;
mod invoke;
mod limits;
mod manifest;
mod marker;
mod metrics;
mod plugin;
mod projector;
mod providers;
mod reuse;
mod runtime;
mod wasi;

pub use error::{InvokeError, LoadError, Outcome, RuntimeError};
pub use limits::{Limits, PoolConfig, RuntimeConfig};
pub use manifest::{Manifest, ManifestAction, ManifestDataSource, ManifestLimits, NodeKindEntry};
pub use metrics::RuntimeMetrics;
pub use plugin::{BatchContext, BatchResults, InvocationContext, NodeEvent, Plugin};
pub use projector::Projector;
pub use providers::{Capability, PackageVersion};
pub use runtime::{engine_config, Compiled, Runtime};
