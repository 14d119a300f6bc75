#!/usr/bin/env bash
# Runs every test of the workspace against real servers, on a fresh machine too:
#   1. installs what is missing (Debian packages for Redis and NATS, a Python venv with the Kafka-protocol and
#      MongoDB-protocol servers; see tests/scripts/servers.sh),
#   2. starts the four servers on loopback on free ports,
#   3. builds the workspace (the binary tests start target/debug/flowhost) and runs `cargo test --workspace`,
#   4. stops the servers it started, by their pid files, whatever the outcome.
# Extra arguments go to `cargo test` (e.g. `bash tests/run.sh -p flowhost-tests --test engine`).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts=tests/scripts
bash "$scripts/servers.sh" install

state=$(mktemp -d "${TMPDIR:-/tmp}/flowhost-servers.XXXXXX")
cleanup() { bash "$scripts/servers.sh" stop "$state"; rm -rf "$state"; }
trap cleanup EXIT
bash "$scripts/servers.sh" start "$state"
# shellcheck disable=SC1091
source "$state/env"

cargo build --workspace --bins
cargo test --workspace "$@"
