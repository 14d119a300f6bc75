//! Measuring helpers shared by the runtime's bench binaries (`mod support;` in each): the latency of single
//! invocations on one thread, and invocations per second on several threads.

use std::time::{Duration, Instant};

use flowhost_runtime::Plugin;

/// Sorted per-call latencies, in microseconds.
pub struct Latency(Vec<f64>);

impl Latency {
    /// The latency below which a fraction `p` (0.0 to 1.0) of the calls finished; `1.0` is the maximum.
    pub fn percentile(&self, p: f64) -> f64 {
        self.0[((self.0.len() - 1) as f64 * p) as usize]
    }

    /// How many calls were measured.
    pub fn samples(&self) -> usize {
        self.0.len()
    }
}

/// Times `samples` invocations of `action` with `input`, one after the other, after `warm_up` untimed ones.
/// Each must succeed.
pub fn latency(
    rt: &tokio::runtime::Runtime,
    plugin: &Plugin,
    action: &str,
    input: &str,
    warm_up: usize,
    samples: usize,
) -> Latency {
    time_each(warm_up, samples, || {
        std::hint::black_box(rt.block_on(plugin.invoke(action, input)).expect("invoke"));
    })
}

/// Times `samples` calls of `work`, one after the other, after `warm_up` untimed ones.
pub fn time_each(warm_up: usize, samples: usize, mut work: impl FnMut()) -> Latency {
    for _ in 0..warm_up {
        work();
    }
    let mut micros = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        work();
        micros.push(started.elapsed().as_secs_f64() * 1e6);
    }
    micros.sort_by(f64::total_cmp);
    Latency(micros)
}

/// Invocations per second of `threads` threads, each invoking `action` with `input` in a loop for `duration`.
pub fn throughput(plugin: &Plugin, action: &str, input: &str, threads: usize, duration: Duration) -> f64 {
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (plugin, action, input) = (plugin.clone(), action.to_owned(), input.to_owned());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio");
                let mut count = 0u64;
                while started.elapsed() < duration {
                    for _ in 0..100 {
                        rt.block_on(plugin.invoke(&action, &input)).expect("invoke");
                    }
                    count += 100;
                }
                count
            })
        })
        .collect();
    let total: u64 = handles.into_iter().map(|handle| handle.join().expect("thread")).sum();
    total as f64 / started.elapsed().as_secs_f64()
}
