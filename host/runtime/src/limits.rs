//! Per-invocation limits and the runtime's configuration, with defaults that suit a node kind or an action.

use std::time::Duration;

/// What one invocation may use. Every invocation runs with a fresh instance under these limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock deadline of one call (epoch interruption; precision: one [`RuntimeConfig::epoch_tick`]).
    /// Default 1 s.
    pub timeout: Duration,
    /// Fuel (roughly, wasm instructions) per call; `None` for no fuel limit. Default 1,000,000,000: about 50 ms
    /// of busy guest code on the project's machines (50 M fuel ran out in 2.3 ms). Unlike the deadline it does
    /// not depend on machine load, so a compute-bound guest fails the same way on every attempt.
    pub fuel: Option<u64>,
    /// Linear memory cap per instance, in bytes. Default 64 MiB. Must not exceed
    /// [`PoolConfig::max_memory_bytes`].
    pub memory_bytes: usize,
    /// Largest output accepted, in bytes. Default 1 MiB.
    pub max_output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(1),
            fuel: Some(1_000_000_000),
            memory_bytes: 64 << 20,
            max_output_bytes: 1 << 20,
        }
    }
}

impl Limits {
    /// These limits, each lowered to what `asked` declares where that is lower (a manifest can only tighten).
    pub fn tightened_by(&self, asked: &crate::ManifestLimits) -> Limits {
        Limits {
            timeout: asked.timeout_ms.map(Duration::from_millis).map_or(self.timeout, |t| t.min(self.timeout)),
            fuel: match (self.fuel, asked.fuel) {
                (Some(ours), Some(theirs)) => Some(ours.min(theirs)),
                (ours, theirs) => ours.or(theirs),
            },
            memory_bytes: asked.memory_bytes.map_or(self.memory_bytes, |m| m.min(self.memory_bytes)),
            max_output_bytes: asked.max_output_bytes.map_or(self.max_output_bytes, |m| m.min(self.max_output_bytes)),
        }
    }
}

/// Sizes of the pooling allocator: how many instances can run at once and how big each may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    /// Instances alive at once (concurrent invocations). Default 100. Each reserves address space (not memory)
    /// for its linear memory.
    pub max_instances: u32,
    /// Largest linear memory an instance may ever have, in bytes; the ceiling for [`Limits::memory_bytes`].
    /// Default 256 MiB.
    pub max_memory_bytes: usize,
    /// Core module instances per component. Default 16: a Rust component has its module plus adapter shims (3 to
    /// 4); a Python one from componentize-py has 14 (libc, libpython, libdl, the WASI adapter, shims and its
    /// own), a JavaScript one from componentize-js 3.
    pub max_core_instances_per_component: u32,
    /// Freed instance slots are reset (`madvise`) in batches of this size per CPU shard; batching saves system
    /// calls and the cross-core TLB shootdowns they cause. 1 disables batching. Default 16.
    pub decommit_batch_size: usize,
    /// Bytes of each linear memory and table reset with `memset` instead of `madvise` when a slot is freed, so
    /// a small guest reuses a warm slot without page faults. Default 2 MiB, which covers a Rust guest's initial
    /// memory (1 MiB stack plus data). The memory is zeroed either way: nothing leaks from one call to the next.
    pub memory_keep_resident_bytes: usize,
    /// The same for the host stacks guests run on (async fibers). Default 0: zeroing a 2 MiB stack with
    /// `memset` on every call cost more than it saved.
    pub stack_keep_resident_bytes: usize,
    /// Reset only the pages a call actually touched, found with Linux's `PAGEMAP_SCAN` (kernel 6.7+; ignored
    /// where unavailable), instead of `memset`-ing all of [`PoolConfig::memory_keep_resident_bytes`]. Default
    /// true: a Rust guest's 1 MiB stack region made that `memset` two thirds of a no-op call.
    pub pagemap_scan: bool,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            max_instances: 100,
            max_memory_bytes: 256 << 20,
            max_core_instances_per_component: 16,
            decommit_batch_size: 16,
            memory_keep_resident_bytes: 2 << 20,
            stack_keep_resident_bytes: 0,
            pagemap_scan: true,
        }
    }
}

/// How the runtime is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Limits used by [`crate::Plugin::invoke`].
    pub limits: Limits,
    /// Pooling allocator sizes.
    pub pool: PoolConfig,
    /// How often the epoch advances: the precision of [`Limits::timeout`]. Default 10 ms.
    pub epoch_tick: Duration,
    /// Longest log message kept from a guest, in bytes (longer ones are truncated). Default 4 KiB.
    pub max_log_message_bytes: usize,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            pool: PoolConfig::default(),
            epoch_tick: Duration::from_millis(10),
            max_log_message_bytes: 4096,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManifestLimits;

    #[test]
    fn a_manifest_can_only_tighten_the_limits() {
        let ours = Limits::default();
        let asked = ManifestLimits {
            timeout_ms: Some(50),
            fuel: Some(u64::MAX),
            memory_bytes: Some(1 << 40),
            max_output_bytes: Some(10),
        };
        let limits = ours.tightened_by(&asked);
        assert_eq!(limits.timeout, Duration::from_millis(50));
        assert_eq!(limits.fuel, ours.fuel);
        assert_eq!(limits.memory_bytes, ours.memory_bytes);
        assert_eq!(limits.max_output_bytes, 10);
        assert_eq!(ours.tightened_by(&ManifestLimits::default()), ours);
        let unmetered = Limits { fuel: None, ..Limits::default() };
        assert_eq!(unmetered.tightened_by(&ManifestLimits { fuel: Some(7), ..Default::default() }).fuel, Some(7));
    }
}
