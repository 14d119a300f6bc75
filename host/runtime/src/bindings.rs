//! The wasmtime bindings of `flowhost:plugin@0.1.0`, generated here and nowhere else in the host.

wasmtime::component::bindgen!({
    path: "../../wit/flowhost-plugin",
    world: "action-plugin",
    imports: { default: trappable },
    exports: { default: async },
});
