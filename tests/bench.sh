#!/usr/bin/env bash
# The one benchmark command. Runs every benchmark of the workspace several times in release builds, each beside
# its anchor where one runs here, and prints one table (median, spread over the runs, anchor, ratio, target); the
# table is also written as JSON to target/bench/<UTC time>.json. Like tests/run.sh, it first installs what is
# missing and starts the test servers on loopback (so the Kafka, NATS, Redis and MongoDB-protocol variants run
# too), and stops them after, whatever the outcome.
#
#   bash tests/bench.sh [--runs N] [--only NAME,NAME] [--out FILE]   run (default: all, 3 runs)
#   bash tests/bench.sh compare BASELINE.json NEW.json             exit 1 when a figure got worse beyond noise
#   bash tests/bench.sh list                                       the benchmarks
#
# Benchmarks never run inside the tests: a figure on a shared 2-core machine is not a pass/fail signal.
set -euo pipefail
cd "$(dirname "$0")/.."

bench=(cargo run -q --release -p flowhost-bench --bin bench --)
case ${1:-} in
  compare | list | -h | --help) exec "${bench[@]}" "$@" ;;
esac

scripts=tests/scripts
bash "$scripts/servers.sh" install
state=$(mktemp -d "${TMPDIR:-/tmp}/flowhost-bench.XXXXXX")
cleanup() { bash "$scripts/servers.sh" stop "$state"; rm -rf "$state"; }
trap cleanup EXIT
bash "$scripts/servers.sh" start "$state"
# shellcheck disable=SC1091
source "$state/env"
export FLOWHOST_PLUGINS_COMPILE_CACHE_DIR="$state/component-cache"
"${bench[@]}" "$@"
