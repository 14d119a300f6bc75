#!/usr/bin/env bash
# Builds every plugin and test fixture of this guest workspace into wasm32-wasip2 components:
#   bash plugins/build.sh            -> target/plugins/wasm32-wasip2/release/<name>.wasm
# FLOWHOST_PLUGINS_TARGET_DIR overrides the target directory. It adds the wasm32-wasip2 target first when the
# toolchain lacks it, and runs cargo with a clean environment, so it also works when called from a build script
# (host/runtime/fixtures/build.rs): a separate target dir avoids the outer cargo's lock, and the outer cargo's
# RUSTFLAGS / jobserver are for the native target, not this one.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target_dir="${FLOWHOST_PLUGINS_TARGET_DIR:-$here/../target/plugins}"

unset CARGO_ENCODED_RUSTFLAGS RUSTFLAGS CARGO_MAKEFLAGS CARGO_BUILD_RUSTFLAGS CARGO_TARGET_DIR CARGO_BUILD_TARGET
unset RUSTC_WRAPPER RUSTC_WORKSPACE_WRAPPER

sysroot="$(rustc --print sysroot)"
if [ ! -d "$sysroot/lib/rustlib/wasm32-wasip2" ]; then
    rustup target add wasm32-wasip2
fi

cargo build --release --target wasm32-wasip2 --manifest-path "$here/Cargo.toml" --target-dir "$target_dir" "$@"
echo "components in $target_dir/wasm32-wasip2/release/" >&2
