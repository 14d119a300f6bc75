//! `flowhost-components`: the component store. Operators upload WebAssembly components (plugins) to a running
//! Flowhost; the store checks each one, keeps every version durably, activates one version per plugin and
//! hot-swaps it on every node without a restart.
//!
//! - **Upload** ([`ComponentStore::prepare`] then [`ComponentStore::commit`]): the size is checked, the
//!   component compiled (on a blocking thread) and loaded by the runtime, which checks that its imports are
//!   satisfiable, granted and declared and reads its manifest; the manifest's `id` and `version` must be the ones
//!   the upload names, and the component catalog must accept its manifest. Versions are immutable: the same
//!   `(id, version)` with the same bytes (SHA-256) is accepted again as a no-op, with other bytes refused
//!   ([`ComponentError::Conflict`]).
//! - **One identity with the catalog**: a stored version is the catalog row `{service}/{id}/{version}`
//!   ([`catalog_manifest`]), registered after the bytes and the version row, so a failed upload leaves no catalog
//!   row without its component and a retried one completes the registration.
//! - **Storage** is the documents port (SQLite by default, MongoDB when configured): version metadata in
//!   `component_versions`, the bytes content-addressed in `component_blobs` (base64; a component over 8 MiB in
//!   chunks in `component_blob_chunks`, see `blobs`; a version's bytes are written before its row, so a row always
//!   has its bytes), the active version per plugin in
//!   `component_active`. Everything survives a restart and, on MongoDB, reaches every node.
//! - **Activation** ([`ComponentStore::activate`], also rollback) writes the active row, swaps the local
//!   pointer and announces the change on the subjects port; every node's [`ComponentStore::run_sync`] then
//!   loads the version and swaps too (with a periodic reconcile as the fallback for a lost signal).
//! - **Hot swap is atomic and never interrupts work**: [`ComponentStore::active`] hands out a clone of the
//!   active [`Plugin`]; an invocation holds its clone until it ends, so it finishes on the version it started
//!   with while new invocations get the new one.

mod blobs;
mod store;

pub use store::{
    catalog_manifest, catalog_manifest_of, Activation, ComponentError, ComponentStore, ComponentSummary, Prepared,
    StoreConfig, Uploaded, VersionSummary, DEFAULT_GRANTS,
};
