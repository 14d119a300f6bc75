//! The bytes of uploaded components, content-addressed by their SHA-256 in `component_blobs`.
//!
//! A component up to [`CHUNK_BYTES`] is one document, `{size_bytes, wasm_base64}`. A bigger one (a Python or
//! JavaScript component embeds its interpreter: 11 to 19 MB) would not fit a MongoDB document (16 MiB, and base64
//! adds a third), so it is split: its chunks go to `component_blob_chunks` (`<sha256>/<n>`, each
//! `{wasm_base64}`), then the header `{size_bytes, chunks}` to `component_blobs`. Chunks are written before the
//! header, so a header is never read without its chunks; the bytes read back are checked against the SHA-256
//! they are stored under, so a torn or damaged blob is an error, never a wrong component.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use flowhost_core::collections::{COMPONENT_BLOBS, COMPONENT_BLOB_CHUNKS};
use flowhost_core::digest::sha256_bytes_hex;
use flowhost_core::ports::{DocumentStore, PortError};
use flowhost_core::stored;
use serde::{Deserialize, Serialize};

/// The largest part of a component one document holds: its base64 (about 10.7 MiB) stays well under MongoDB's
/// 16 MiB document limit.
pub(crate) const CHUNK_BYTES: usize = 8 << 20;

/// A `component_blobs` document: the whole component, or how many chunks hold it.
#[derive(Debug, Serialize, Deserialize)]
struct Blob {
    size_bytes: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wasm_base64: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chunks: Option<usize>,
}

/// A `component_blob_chunks` document.
#[derive(Debug, Serialize, Deserialize)]
struct Chunk {
    wasm_base64: String,
}

fn chunk_key(content_hash: &str, index: usize) -> String {
    format!("{content_hash}/{index}")
}

/// Stores `wasm` under `content_hash` (its SHA-256): in one document, or chunks first and then the header.
/// Writing the same bytes again overwrites them with themselves.
pub(crate) async fn write(documents: &dyn DocumentStore, content_hash: &str, wasm: &[u8]) -> Result<(), PortError> {
    let blob = if wasm.len() <= CHUNK_BYTES {
        Blob { size_bytes: wasm.len(), wasm_base64: Some(BASE64.encode(wasm)), chunks: None }
    } else {
        let chunks = wasm.chunks(CHUNK_BYTES);
        let count = chunks.len();
        for (index, chunk) in chunks.enumerate() {
            let chunk = stored::encode(COMPONENT_BLOB_CHUNKS, &Chunk { wasm_base64: BASE64.encode(chunk) })?;
            documents.upsert(COMPONENT_BLOB_CHUNKS, &chunk_key(content_hash, index), chunk).await?;
        }
        Blob { size_bytes: wasm.len(), wasm_base64: None, chunks: Some(count) }
    };
    documents.upsert(COMPONENT_BLOBS, content_hash, stored::encode(COMPONENT_BLOBS, &blob)?).await
}

/// The bytes stored under `content_hash`, `None` when nothing is; an error when they are incomplete or do not
/// hash to `content_hash`.
pub(crate) async fn read(documents: &dyn DocumentStore, content_hash: &str) -> Result<Option<Vec<u8>>, PortError> {
    let Some(blob) = documents.get(COMPONENT_BLOBS, content_hash).await? else { return Ok(None) };
    let blob: Blob = stored::decode(COMPONENT_BLOBS, blob)?;
    let damaged = |what: &str| PortError::Backend(format!("the stored component {content_hash} is damaged: {what}"));
    let decode = |text: &str| BASE64.decode(text).map_err(|_| damaged("not base64"));
    let wasm = match (blob.wasm_base64, blob.chunks) {
        (Some(text), _) => decode(&text)?,
        (None, Some(count)) => {
            let mut wasm = Vec::with_capacity(blob.size_bytes);
            for index in 0..count {
                let chunk = documents
                    .get(COMPONENT_BLOB_CHUNKS, &chunk_key(content_hash, index))
                    .await?
                    .ok_or_else(|| damaged(&format!("chunk {index} of {count} is missing")))?;
                let chunk: Chunk = stored::decode(COMPONENT_BLOB_CHUNKS, chunk)?;
                wasm.extend_from_slice(&decode(&chunk.wasm_base64)?);
            }
            wasm
        }
        (None, None) => return Err(damaged("neither bytes nor chunks")),
    };
    if wasm.len() != blob.size_bytes || sha256_bytes_hex(&wasm) != content_hash {
        return Err(damaged("its bytes do not match their hash"));
    }
    Ok(Some(wasm))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn store() -> (tempfile::TempDir, Arc<dyn DocumentStore>) {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(flowhost_core::SystemClock);
        let store = flowhost_embedded::EmbeddedStore::open(dir.path(), 1, clock).unwrap();
        (dir, store.documents())
    }

    #[tokio::test]
    async fn small_and_chunked_components_read_back_whole() {
        let (_dir, documents) = store();
        for size in [0, 1000, CHUNK_BYTES, CHUNK_BYTES + 1, 2 * CHUNK_BYTES + 12_345] {
            let wasm: Vec<u8> = (0..size).map(|n| (n * 31 % 251) as u8).collect();
            let hash = sha256_bytes_hex(&wasm);
            write(documents.as_ref(), &hash, &wasm).await.unwrap();
            assert_eq!(read(documents.as_ref(), &hash).await.unwrap().as_deref(), Some(&wasm[..]), "{size}");
        }
        assert_eq!(read(documents.as_ref(), "absent").await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_missing_or_altered_chunk_is_an_error_not_a_component() {
        let (_dir, documents) = store();
        let wasm = vec![7u8; CHUNK_BYTES * 2 + 1];
        let hash = sha256_bytes_hex(&wasm);
        write(documents.as_ref(), &hash, &wasm).await.unwrap();
        let altered = stored::encode(COMPONENT_BLOB_CHUNKS, &Chunk { wasm_base64: BASE64.encode([8u8; 1]) }).unwrap();
        documents.upsert(COMPONENT_BLOB_CHUNKS, &chunk_key(&hash, 2), altered).await.unwrap();
        let error = read(documents.as_ref(), &hash).await.unwrap_err().to_string();
        assert!(error.contains("do not match"), "{error}");
        documents.delete(COMPONENT_BLOB_CHUNKS, &chunk_key(&hash, 1)).await.unwrap();
        let error = read(documents.as_ref(), &hash).await.unwrap_err().to_string();
        assert!(error.contains("chunk 1 of 3 is missing"), "{error}");
    }
}
