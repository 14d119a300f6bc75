//! WASI 0.2 for guests, through `wasmtime-wasi`, with a locked-down context: what an ordinary Rust crate needs
//! (clocks, secure and insecure random, stdout and stderr, the default panic hook) works, and nothing reaches
//! outside the sandbox.
//!
//! - **No preopened directory**: every filesystem call fails; there is no path to the host's files.
//! - **No environment and no arguments**: the host's variables (where secrets live) never reach a guest.
//! - **No network**: TCP, UDP and name lookup are disabled, not merely unaddressable.
//! - **stdin is closed; stdout and stderr go to the plugin's log** ([`LogSink`]): one `tracing` line per line
//!   written, tagged with the plugin and the stream, each line cut at the runtime's `max_log_message_bytes`
//!   and at most [`MAX_OUTPUT_BYTES_PER_CALL`] per invocation, so a chatty guest cannot flood the log.
//! - Wall and monotonic clocks and random numbers come from the host (WASI's defaults).
//!
//! Every store gets its own [`WasiCtx`] and resource table: one invocation's streams never leak into another.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder};

/// Bytes one invocation may write into the log, its `log` calls, stdout and stderr together; the rest is dropped
/// (and the drop is logged once).
pub(crate) const MAX_OUTPUT_BYTES_PER_CALL: usize = 64 * 1024;

/// What is left of an invocation's [`MAX_OUTPUT_BYTES_PER_CALL`], shared by its `log` calls and its WASI output.
pub(crate) type LogBudget = Arc<Mutex<usize>>;

/// Takes up to `wanted` bytes from `budget`; answers how many it got.
pub(crate) fn spend(budget: &LogBudget, wanted: usize) -> usize {
    let mut left = budget.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let allowed = wanted.min(*left);
    *left -= allowed;
    allowed
}

/// What the guest of one store writes into the log: the budget its `log` calls and its WASI output share, and its
/// stdout and stderr.
pub(crate) struct GuestOutput {
    pub budget: LogBudget,
    sinks: [LogSink; 2],
}

impl GuestOutput {
    /// Readies the output for another invocation in the same store (a reused instance): what is left of the last
    /// invocation's lines is written out, and the budget and the drop warnings start again.
    pub(crate) fn begin_call(&self) {
        for sink in &self.sinks {
            sink.end_call();
        }
        *self.budget.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = MAX_OUTPUT_BYTES_PER_CALL;
    }
}

/// The WASI context of one store (no files, no environment, no network, output into the log) and its output,
/// whose budget it shares with the `log` capability.
pub(crate) fn locked_down_context(plugin: &Arc<str>, max_line_bytes: usize) -> (WasiCtx, GuestOutput) {
    let budget: LogBudget = Arc::new(Mutex::new(MAX_OUTPUT_BYTES_PER_CALL));
    let stdout = LogSink::new(plugin.clone(), Stream::Stdout, max_line_bytes, budget.clone());
    let stderr = LogSink::new(plugin.clone(), Stream::Stderr, max_line_bytes, budget.clone());
    let mut builder = WasiCtxBuilder::new();
    builder.stdout(stdout.clone()).stderr(stderr.clone()).allow_tcp(false).allow_udp(false).allow_ip_name_lookup(false);
    (builder.build(), GuestOutput { budget, sinks: [stdout, stderr] })
}

/// `text` with its control characters escaped (`\n`, `\u{1b}`, ...): a guest's message is one log line and
/// cannot forge another, nor reach the terminal's escape sequences.
pub(crate) fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    std::borrow::Cow::Owned(escaped)
}

/// Cuts `text` to at most `max_bytes` (at a character boundary) and marks the cut with `...`: how every line a
/// guest writes into the log (its `log` calls and its stdout/stderr) is bounded.
pub(crate) fn cut_for_log(text: &mut String, max_bytes: usize) {
    if text.len() > max_bytes {
        let mut end = max_bytes;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// A guest's stdout or stderr, written into the host's log line by line. Clones share the partial line (WASI
/// hands out a new stream object at every `get-stdout`); the last one dropped writes what is left of it.
#[derive(Clone)]
pub(crate) struct LogSink {
    state: Arc<Mutex<SinkState>>,
}

struct SinkState {
    plugin: Arc<str>,
    stream: Stream,
    line: Vec<u8>,
    max_line_bytes: usize,
    /// Bytes the invocation may still write, shared by its stdout and stderr.
    budget: Arc<Mutex<usize>>,
    dropped: bool,
}

impl LogSink {
    fn new(plugin: Arc<str>, stream: Stream, max_line_bytes: usize, budget: Arc<Mutex<usize>>) -> LogSink {
        let state = SinkState { plugin, stream, line: Vec::new(), max_line_bytes, budget, dropped: false };
        LogSink { state: Arc::new(Mutex::new(state)) }
    }

    fn write_bytes(&self, bytes: &[u8]) {
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        state.write(bytes);
    }

    /// Writes what is left of the current line and forgets an earlier drop: the end of one invocation.
    fn end_call(&self) {
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        state.emit();
        state.dropped = false;
    }
}

impl SinkState {
    fn write(&mut self, bytes: &[u8]) {
        let allowed = spend(&self.budget, bytes.len());
        for &byte in &bytes[..allowed] {
            if byte == b'\n' {
                self.emit();
            } else if self.line.len() < self.max_line_bytes.saturating_add(4) {
                self.line.push(byte);
            }
        }
        if allowed < bytes.len() && !self.dropped {
            self.dropped = true;
            self.emit();
            let plugin = &*self.plugin;
            tracing::warn!(
                plugin,
                stream = self.stream.name(),
                limit = MAX_OUTPUT_BYTES_PER_CALL,
                "the plugin wrote more than the limit of output per invocation; the rest is dropped"
            );
        }
    }

    /// Writes the buffered line into the log (cut at the limit) and clears it.
    fn emit(&mut self) {
        if self.line.is_empty() {
            return;
        }
        let mut text = escape_controls(&String::from_utf8_lossy(&self.line)).into_owned();
        self.line.clear();
        cut_for_log(&mut text, self.max_line_bytes);
        let plugin = &*self.plugin;
        match self.stream {
            Stream::Stdout => tracing::info!(plugin, stream = "stdout", "{text}"),
            Stream::Stderr => tracing::warn!(plugin, stream = "stderr", "{text}"),
        }
    }
}

impl Drop for SinkState {
    fn drop(&mut self) {
        self.emit();
    }
}

impl IsTerminal for LogSink {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogSink {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for LogSink {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.write_bytes(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LogSink {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for LogSink {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.write_bytes(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(max_line: usize, budget: usize) -> LogSink {
        LogSink::new("p@1".into(), Stream::Stdout, max_line, Arc::new(Mutex::new(budget)))
    }

    #[test]
    fn lines_are_split_cut_and_the_budget_is_shared() {
        let out = sink(4, 10);
        out.write_bytes(b"ab\ncdefgh\n");
        assert!(out.state.lock().unwrap().line.is_empty());
        out.write_bytes(b"xyz");
        let state = out.state.lock().unwrap();
        assert!(state.dropped, "the 10-byte budget was spent by the first write");
        assert_eq!(*state.budget.lock().unwrap(), 0);
    }

    #[test]
    fn a_cut_keeps_whole_characters_and_is_marked() {
        let mut text = "abcé".to_owned();
        cut_for_log(&mut text, 4);
        assert_eq!(text, "abc...");
        let mut short = "ab".to_owned();
        cut_for_log(&mut short, 4);
        assert_eq!(short, "ab");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_controls("plain"), "plain");
        assert_eq!(escape_controls("a\r\nINFO forged\u{1b}[31m"), "a\\r\\nINFO forged\\u{1b}[31m");
    }

    #[test]
    fn a_long_line_is_buffered_only_up_to_the_cut() {
        let out = sink(4, 1000);
        out.write_bytes(&[b'a'; 100]);
        assert_eq!(out.state.lock().unwrap().line.len(), 8);
    }
}
