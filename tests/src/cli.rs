//! Running the real `flowhost` binary (`target/<profile>/flowhost`, built by `tests/run.sh`) as a user does,
//! for the suites that test the command line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root (the directory the README's commands run in).
pub fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("repository root").to_path_buf()
}

/// The `flowhost` binary next to the running test's profile directory.
pub fn flowhost_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let bin = exe.parent().and_then(Path::parent).expect("profile directory").join("flowhost");
    assert!(bin.exists(), "{} is missing: build it with `cargo build -p flowhost` (tests/run.sh does)", bin.display());
    bin
}

/// `flowhost plugin ARGS...` run from the repository root with the log at info level (plugin log lines
/// show), `stdin` as standard input; waits for it to exit.
pub fn plugin(args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut child = Command::new(flowhost_bin())
        .arg("plugin")
        .args(args)
        .current_dir(repository_root())
        .env("FLOWHOST_LOG", "info")
        .env("FLOWHOST_LOG_FORMAT", "text")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start flowhost");
    if let Some(input) = stdin {
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write stdin");
    }
    drop(child.stdin.take());
    child.wait_with_output().expect("flowhost exit")
}
