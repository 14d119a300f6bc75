//! The wasmtime bindings of `flowhost:plugin@0.1.0`, generated here and nowhere else in the host: the
//! `action-plugin` world (every plugin), and the `service-plugin` world (which adds `data-source`) sharing the
//! interfaces of the first, so each capability has one host implementation.

pub(crate) mod action {
    wasmtime::component::bindgen!({
        path: "../../wit/flowhost-plugin",
        world: "action-plugin",
        imports: {
            "flowhost:plugin/documents": async | trappable,
            default: trappable,
        },
        exports: { default: async },
    });
}

pub(crate) mod service {
    wasmtime::component::bindgen!({
        path: "../../wit/flowhost-plugin",
        world: "service-plugin",
        with: {
            "flowhost:plugin/types": super::action::flowhost::plugin::types,
            "flowhost:plugin/log": super::action::flowhost::plugin::log,
            "flowhost:plugin/clock": super::action::flowhost::plugin::clock,
            "flowhost:plugin/documents": super::action::flowhost::plugin::documents,
        },
        exports: { default: async },
    });
}

pub(crate) mod projector {
    wasmtime::component::bindgen!({
        path: "../../wit/flowhost-plugin",
        world: "projector",
        with: {
            "flowhost:plugin/types": super::action::flowhost::plugin::types,
            "flowhost:plugin/log": super::action::flowhost::plugin::log,
        },
        exports: { default: async },
    });
}
