//! Builds Studio's web app (web/) into `$OUT_DIR/studio` for `rust-embed`: `npm ci` when the installed
//! packages do not match the lock file, then `node build.mjs --outdir <dir>` (esbuild). Needs Node.js and npm;
//! without them the build stops with a message saying so.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let web = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("web");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("studio");
    for input in ["src", "package.json", "package-lock.json", "build.mjs", "tsconfig.json"] {
        println!("cargo:rerun-if-changed={}", web.join(input).display());
    }
    if needs_install(&web) {
        run(
            Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--loglevel=error"]).current_dir(&web),
            "npm ci",
        );
    }
    run(Command::new("node").arg("build.mjs").arg("--outdir").arg(&out).current_dir(&web), "node build.mjs");
}

/// Whether `node_modules` is missing or older than the lock file (npm writes `node_modules/.package-lock.json`
/// on every install).
fn needs_install(web: &Path) -> bool {
    let modified = |path: PathBuf| std::fs::metadata(path).and_then(|meta| meta.modified()).ok();
    match (modified(web.join("node_modules/.package-lock.json")), modified(web.join("package-lock.json"))) {
        (Some(installed), Some(lock)) => installed < lock,
        _ => true,
    }
}

fn run(command: &mut Command, what: &str) {
    match command.status() {
        Ok(status) if status.success() => {}
        Ok(status) => panic!("building Studio: `{what}` in host/studio/web failed ({status})"),
        Err(error) => panic!(
            "building Studio: `{what}` could not start ({error}); Studio needs Node.js 20 or newer and npm on the PATH"
        ),
    }
}
