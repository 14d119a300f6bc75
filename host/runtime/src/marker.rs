//! The SDK's version marker: the custom section `flowhost:sdk` that `sdk-guest`'s `export_plugin!` writes into
//! a component, `{"sdk": "0.3.0", "wit": "flowhost:plugin@0.2.0"}`. It is read before compiling, so that a
//! component built for a WIT package this host does not serve (an SDK too new or too old for it) is refused with
//! an error that says which SDK and which packages, instead of a link error about a missing export.
//!
//! A component without the marker (built by another language's toolchain, or by an SDK before 0.3) is not
//! checked here; linking still refuses what the host cannot serve.

use serde::Deserialize;
use wasmparser::{Parser, Payload};

use crate::{LoadError, PackageVersion};

/// The marker's custom section (in the component or any module it embeds).
pub(crate) const SECTION: &str = "flowhost:sdk";

/// What the marker says.
#[derive(Debug, Deserialize)]
struct Marker {
    /// The SDK's version (its crate version).
    sdk: String,
    /// The WIT package the SDK builds against, `flowhost:plugin@X.Y.Z`.
    wit: String,
}

/// Checks the markers of `wasm` (one per module the SDK built), when it has any: each must name a WIT package
/// this host serves. Bytes that do not parse are left to the compiler, which says what is wrong with them.
pub(crate) fn check(wasm: &[u8]) -> Result<(), LoadError> {
    for payload in Parser::new(0).parse_all(wasm) {
        let Ok(payload) = payload else { return Ok(()) };
        if let Payload::CustomSection(section) = payload {
            if section.name() == SECTION {
                check_marker(section.data())?;
            }
        }
    }
    Ok(())
}

fn check_marker(marker: &[u8]) -> Result<(), LoadError> {
    let marker: Marker = serde_json::from_slice(marker).map_err(|error| {
        LoadError::InvalidComponent(format!("its {SECTION} section is not the SDK's marker: {error}"))
    })?;
    match marker.wit.strip_prefix("flowhost:plugin@").and_then(PackageVersion::parse) {
        Some(_) => Ok(()),
        None => Err(LoadError::UnsupportedSdk { sdk: marker.sdk, wit: marker.wit, served: served_packages() }),
    }
}

/// The packages this host serves, as an error message lists them.
fn served_packages() -> String {
    PackageVersion::ALL
        .iter()
        .map(|version| format!("flowhost:plugin@{}", version.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `wasm` with a custom section `name` holding `data` appended at its top level.
    fn with_section(wasm: &[u8], name: &str, data: &[u8]) -> Vec<u8> {
        let mut payload = Vec::new();
        leb128(&mut payload, name.len());
        payload.extend_from_slice(name.as_bytes());
        payload.extend_from_slice(data);
        let mut out = wasm.to_vec();
        out.push(0);
        leb128(&mut out, payload.len());
        out.extend_from_slice(&payload);
        out
    }

    fn leb128(out: &mut Vec<u8>, mut value: usize) {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    /// The smallest component: its preamble.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";

    #[test]
    fn a_served_package_passes_and_no_marker_is_not_checked() {
        assert!(check(EMPTY_COMPONENT).is_ok());
        let current = with_section(EMPTY_COMPONENT, SECTION, br#"{"sdk":"0.3.0","wit":"flowhost:plugin@0.2.0"}"#);
        assert!(check(&current).is_ok());
        let other = with_section(EMPTY_COMPONENT, "producers", b"anything");
        assert!(check(&other).is_ok());
    }

    #[test]
    fn a_package_the_host_does_not_serve_is_refused_by_name() {
        for wit in ["flowhost:plugin@0.9.0", "flowhost:plugin@0.0.1", "other:plugin@0.2.0"] {
            let marker = format!(r#"{{"sdk":"9.0.0","wit":"{wit}"}}"#);
            let error = check(&with_section(EMPTY_COMPONENT, SECTION, marker.as_bytes())).unwrap_err();
            let text = error.to_string();
            assert!(matches!(error, LoadError::UnsupportedSdk { .. }), "{error:?}");
            assert!(text.contains("9.0.0") && text.contains(wit) && text.contains("flowhost:plugin@0.2.0"), "{text}");
        }
    }

    #[tokio::test]
    async fn the_sdk_marks_its_components_and_the_runtime_refuses_an_unserved_package() {
        let noop = flowhost_runtime_fixtures::bytes("noop");
        let marker = br#"{"sdk":"0.3.0","wit":"flowhost:plugin@0.2.0"}"#;
        assert!(noop.windows(marker.len()).any(|window| window == marker), "noop carries the SDK's marker");
        let runtime = crate::Runtime::new(crate::RuntimeConfig::default()).unwrap();
        let future = with_section(&noop, SECTION, br#"{"sdk":"0.9.0","wit":"flowhost:plugin@0.9.0"}"#);
        let error = runtime.load(&future, &crate::Capability::ALL).await.unwrap_err();
        assert!(matches!(error, LoadError::UnsupportedSdk { .. }), "{error:?}");
        assert!(runtime.precompile(&future).is_err());
        assert!(runtime.load(&noop, &[]).await.is_ok());
    }

    #[test]
    fn a_marker_that_is_not_json_is_an_invalid_component() {
        let error = check(&with_section(EMPTY_COMPONENT, SECTION, b"0.3")).unwrap_err();
        assert!(matches!(error, LoadError::InvalidComponent(_)), "{error:?}");
    }
}
