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
//!   size. Any failure is an [`InvokeError`] with a class; nothing a guest does panics or stops the host.
//!   A busy guest yields to the async executor at every epoch tick, so it never monopolises a worker thread.
//!
//! ## WASI: imports stubbed as traps, no `wasmtime-wasi`
//! Every Rust `wasm32-wasip2` guest imports `wasi:cli`, `wasi:io`, `wasi:clocks`, `wasi:filesystem`... even if
//! it never calls them. We satisfy those with `Linker::define_unknown_imports_as_traps` instead of linking
//! `wasmtime-wasi` with a locked-down `WasiCtx`:
//! - **Nothing of WASI is reachable** but one function: no file, environment, socket, secure random or stdio
//!   code of the host runs for a guest, so there is no sandbox configuration to get wrong, and the guest cannot
//!   read host environment variables (where secrets live) by construction rather than by configuration. The
//!   exception is `wasi:random/insecure-seed`, which std's `HashMap` calls for its hash seed: it answers a
//!   fixed per-plugin value that WASI itself defines as not secret.
//! - **Cheaper per invocation**: no `WasiCtx` and resource table to build per store (the benchmark target is
//!   microseconds), and no `wasmtime-wasi` (tokio, cap-std, ...) in the build.
//! - The cost: a guest that calls WASI (prints, reads the clock through std, panics with the default hook) traps
//!   at that call. The SDK installs a silent panic hook and offers `log` and `clock` as Flowhost capabilities,
//!   which are the supported way to do those things.
//!
//! Only `wasi:*` imports are stubbed (or, for the insecure seed, served). A `flowhost:plugin` capability import must be granted
//! ([`LoadError::NotGranted`]) and any other import is refused ([`LoadError::UnsatisfiableImport`]), so a
//! component never loads with a capability the host did not grant.
//!
//! ## Secrets never reach a guest
//! The host passes a guest only the action name and its JSON input, and the capabilities give it only a log sink
//! and a clock. No secret, credential or environment variable is ever written into guest memory; later
//! capabilities that need a secret (signing, web-push delivery) take the request and do the work in the host.

mod bindings;
mod error;
mod host;
mod limits;
mod manifest;
mod metrics;
mod projector;
mod runtime;

pub use error::{InvokeError, LoadError, Outcome, RuntimeError};
pub use host::Capability;
pub use limits::{Limits, PoolConfig, RuntimeConfig};
pub use manifest::{Manifest, ManifestAction, ManifestDataSource, ManifestLimits};
pub use metrics::RuntimeMetrics;
pub use projector::Projector;
pub use runtime::{Compiled, Plugin, Runtime};
