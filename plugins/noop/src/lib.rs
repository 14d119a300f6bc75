//! `noop`: returns its input unchanged. The smallest plugin, and what the runtime benchmark measures.

use flowhost_sdk_guest::{export_plugin, Action, Call, Error, Manifest, Output, Plugin};

struct Noop;

impl Plugin for Noop {
    fn manifest() -> Manifest {
        Manifest::new("noop", "0.1.0")
            .description("Returns its input.")
            // It keeps nothing between calls, so the host may run it in a kept instance.
            .reuse_instances()
            .action(Action::new("noop").description("Returns its input unchanged."))
    }

    fn invoke(call: Call) -> Result<Output, Error> {
        match call.action() {
            "noop" => Ok(Output::raw(call.input_json())),
            _ => Err(call.unknown_action()),
        }
    }
}

export_plugin!(Noop);
