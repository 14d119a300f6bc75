//! `origin_map`: the gateway's origin map (`GATEWAY_EDGE_ORIGINS_FILE` / `_JSON`) and the generator's input
//! (`flowhost gateway origin-map generate`). A map that parses prints and parses back to itself; a generated map
//! is one the runtime accepts.

use flowhost_gateway::origins::{generate, OriginMap, MAX_FILE_BYTES, MAX_GENERATED_BYTES};

pub fn origin_map(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(map) = OriginMap::parse(text, MAX_FILE_BYTES) {
        let printed = serde_json::to_string(&map).expect("an origin map prints");
        assert_eq!(OriginMap::parse(&printed, MAX_FILE_BYTES).as_ref(), Ok(&map), "{text:?} does not round-trip");
        for entry in &map.origins {
            assert_eq!(map.entry(&entry.origin), Some(entry), "{text:?}: {:?} is not found", entry.origin);
        }
    }
    if let Ok(generated) = generate(text) {
        assert!(generated.len() <= MAX_GENERATED_BYTES, "{text:?} generates {} bytes", generated.len());
        if let Err(problems) = OriginMap::parse(&generated, MAX_FILE_BYTES) {
            panic!("{text:?} generates a map the gateway refuses: {problems}\n{generated}");
        }
    }
}
