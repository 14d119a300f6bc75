//! The wasmtime bindings of the plugin interface, generated here and nowhere else in the host, for both released
//! versions: `flowhost:plugin@0.1.0` ([`v1`]) and `flowhost:plugin@0.2.0` ([`v2`]). Within a version, every
//! world shares the interfaces of the `action-plugin` world (`with`), so each capability has one host
//! implementation per version (`crate::providers`).

/// The worlds both versions have (`action-plugin`, `service-plugin`, `projector`), generated from the package
/// at `$path`.
macro_rules! package_bindings {
    ($path:tt) => {
        pub(crate) mod action {
            wasmtime::component::bindgen!({
                path: $path,
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
                path: $path,
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
                path: $path,
                world: "projector",
                with: {
                    "flowhost:plugin/types": super::action::flowhost::plugin::types,
                    "flowhost:plugin/log": super::action::flowhost::plugin::log,
                },
                exports: { default: async },
            });
        }
    };
}

/// `flowhost:plugin@0.1.0`: `invoke(action, input)`; node kinds as actions, one event per call.
pub(crate) mod v1 {
    package_bindings!("../../wit/flowhost-plugin");
}

/// `flowhost:plugin@0.2.0`: `invoke(context, action, input)` and the batch contract of node kinds.
pub(crate) mod v2 {
    package_bindings!("../../wit/flowhost-plugin-0.2.0");

    pub(crate) mod node_kind {
        wasmtime::component::bindgen!({
            path: "../../wit/flowhost-plugin-0.2.0",
            world: "node-kind",
            with: {
                "flowhost:plugin/types": super::action::flowhost::plugin::types,
                "flowhost:plugin/log": super::action::flowhost::plugin::log,
                "flowhost:plugin/clock": super::action::flowhost::plugin::clock,
            },
            exports: { default: async },
        });
    }
}

/// `flowhost:notify@0.1.0`: the `notifications` capability (interface `sender`), a package of its own so it
/// versions apart from `flowhost:plugin`; a component imports it beside either plugin version.
pub(crate) mod notify_v1 {
    wasmtime::component::bindgen!({
        path: "../../wit/flowhost-notify",
        world: "imports",
        imports: { default: async | trappable },
    });
}

/// `flowhost:notify@0.2.0`: 0.1.0 with payload `data` passthrough, the in-app `stored` outcome and the
/// `channel-disabled` failure.
pub(crate) mod notify_v2 {
    wasmtime::component::bindgen!({
        path: "../../wit/flowhost-notify-0.2.0",
        world: "imports",
        imports: { default: async | trappable },
    });
}
