//! `manifest` and `component`: what an operator uploads (`PUT /api/v1/plugins/{id}/versions/{version}`) and what a
//! service registers (`POST /api/v1/components/register`).
//!
//! - `manifest`: the bytes as the text a component's `manifest` export returns, read as loading reads it, turned
//!   into its component-catalog row and checked as the catalog checks it; and the bytes as a service manifest,
//!   checked as registration checks it.
//! - `component`: the bytes as an uploaded `.wasm`, through the component store's whole upload check (names,
//!   size, compile, link against the granted capabilities, the manifest, the catalog), which stores nothing.

use flowhost_catalog::{problems_of, ServiceManifest};
use flowhost_components::catalog_manifest_of;
use flowhost_runtime::{Capability, Limits, Manifest};

use crate::context::context;

/// The content hash an upload's catalog row carries (any SHA-256 will do: the check reads its shape).
const CONTENT_HASH: &str = "4f5c1b2a9d0e8f7c6b5a49382716051f4e3d2c1b0a9f8e7d6c5b4a3928170605";

/// The identity every upload names: not an installed plugin's, so no upload is a repeat of a stored version.
const UPLOAD_ID: &str = "fuzzed";
const UPLOAD_VERSION: &str = "0.1.0";

pub fn manifest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let defaults = Limits::default();
    for imported in [&[][..], &[Capability::Log, Capability::Clock][..]] {
        let Ok((manifest, limits)) = Manifest::read(text, imported, &defaults) else { continue };
        // A manifest can only tighten the runtime's limits.
        assert!(limits.timeout <= defaults.timeout, "{text:?}: timeout {:?}", limits.timeout);
        assert!(limits.memory_bytes <= defaults.memory_bytes, "{text:?}: memory {}", limits.memory_bytes);
        assert!(limits.max_output_bytes <= defaults.max_output_bytes, "{text:?}: output {}", limits.max_output_bytes);
        assert!(
            defaults.fuel.is_none() || limits.fuel.is_some_and(|fuel| Some(fuel) <= defaults.fuel),
            "{text:?}: fuel {:?}",
            limits.fuel
        );
        if let Ok(service) = catalog_manifest_of(&manifest, CONTENT_HASH) {
            let _ = problems_of(&service);
        }
    }
    if let Ok(service) = serde_json::from_str::<ServiceManifest>(text) {
        let _ = problems_of(&service);
    }
}

pub fn component(data: &[u8]) {
    let context = context();
    let prepared = context.tokio.block_on(context.store.prepare(UPLOAD_ID, UPLOAD_VERSION, data.to_vec()));
    if let Ok(prepared) = prepared {
        // Accepted only under the identity the upload names.
        let manifest = prepared.plugin.manifest();
        assert_eq!((manifest.id.as_str(), manifest.version.as_str()), (UPLOAD_ID, UPLOAD_VERSION));
    }
}
