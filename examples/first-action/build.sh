#!/usr/bin/env bash
# Builds the example into a wasm32-wasip2 component:
#   bash examples/first-action/build.sh   -> target/examples/wasm32-wasip2/release/first_action.wasm
# The same as running, from the repository root,
#   rustup target add wasm32-wasip2   # once
#   cargo build --release --target wasm32-wasip2 --manifest-path examples/first-action/Cargo.toml --target-dir target/examples
# FLOWHOST_EXAMPLES_TARGET_DIR overrides the target directory. Like plugins/build.sh it adds the target when the
# toolchain lacks it and clears the environment an outer cargo sets, so a test or build script can call it: the
# outer cargo's RUSTFLAGS / jobserver / target dir are for the native build, not this one.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target_dir="${FLOWHOST_EXAMPLES_TARGET_DIR:-$(cd "$here/../.." && pwd)/target/examples}"

unset CARGO_ENCODED_RUSTFLAGS RUSTFLAGS CARGO_MAKEFLAGS CARGO_BUILD_RUSTFLAGS CARGO_TARGET_DIR CARGO_BUILD_TARGET
unset RUSTC_WRAPPER RUSTC_WORKSPACE_WRAPPER

sysroot="$(rustc --print sysroot)"
if [ ! -d "$sysroot/lib/rustlib/wasm32-wasip2" ]; then
    rustup target add wasm32-wasip2
fi

cargo build --release --target wasm32-wasip2 --manifest-path "$here/Cargo.toml" --target-dir "$target_dir" "$@"
echo "component: $target_dir/wasm32-wasip2/release/first_action.wasm" >&2
