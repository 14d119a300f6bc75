//! The `clock` capability: the host's clock (injectable, so tests move time), in milliseconds since the epoch.

use crate::bindings::{v1, v2};
use crate::host::HostState;

impl HostState {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.clock.now_ms()).unwrap_or(0)
    }
}

impl v1::action::flowhost::plugin::clock::Host for HostState {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(HostState::now_ms(self))
    }
}

impl v2::action::flowhost::plugin::clock::Host for HostState {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(HostState::now_ms(self))
    }
}
