#!/usr/bin/env bash
# Runs every test of the workspace against real servers, on a fresh machine too:
#   1. installs what is missing (Debian packages for Redis and NATS, a Python venv with the Kafka-protocol and
#      MongoDB-protocol servers; see tests/scripts/servers.sh),
#   2. starts the four servers on loopback on free ports,
#   3. builds the workspace (the binary tests start target/debug/flowhost) and its test binaries, and runs every
#      test binary, FLOWHOST_TEST_JOBS (default 2) at a time (tests/scripts/run_binaries.py: most of the suite
#      waits on servers and processes), then the doc tests: a failing binary never hides the ones after it,
#   4. ends with the totals over every binary and, for every failed test, its name and panic message (a long
#      log is often read from its end),
#   5. stops the servers it started, by their pid files, whatever the outcome.
# Extra arguments select what `cargo test` builds (e.g. `bash tests/run.sh -p flowhost-tests --test engine`); those
# after `--` go to every test binary (e.g. `bash tests/run.sh -p flowhost-runs -- retention`).
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
# One compile cache for every host the tests start (in-process and child processes alike): each host has a fresh
# data directory, and compiling the same components for each was most of the suite's CPU.
export FLOWHOST_PLUGINS_COMPILE_CACHE_DIR="$state/component-cache"

# The arguments before `--` select the build; those after it go to the test binaries.
build_args=() test_args=()
while (($#)); do
  if [[ $1 == -- ]]; then shift; test_args=("$@"); break; fi
  build_args+=("$1"); shift
done

cargo build --workspace --bins
log="$state/cargo-test.log"
started=$SECONDS
status=0
cargo test --workspace --no-run --message-format=json-render-diagnostics "${build_args[@]}" >"$state/artifacts.json"
python3 "$scripts/run_binaries.py" "$state/artifacts.json" "$state/failures.txt" "${test_args[@]}" 2>&1 | tee "$log" || status=$?
if ((${#build_args[@]} == 0)); then
  cargo test --workspace --doc -- "${test_args[@]}" 2>&1 | tee -a "$log" || status=$?
fi
# The totals over every binary's "test result:" line, and each failed test by name.
awk -v seconds=$((SECONDS - started)) -v status="$status" '
  /^test result:/ {
    for (i = 1; i <= NF; i++) {
      if ($(i + 1) ~ /^passed/) passed += $i
      if ($(i + 1) ~ /^failed/) failed += $i
      if ($(i + 1) ~ /^ignored/) ignored += $i
    }
    binaries++
  }
  /^test .* \.\.\. FAILED$/ { names = names "\n  " $2 }
  END {
    printf "\n[tests] %d passed, %d failed, %d ignored in %d test binaries (%d min %d s)\n", passed, failed, ignored, binaries, seconds / 60, seconds % 60
    if (failed) printf "[tests] failed:%s\n", names
    if (status != 0 && !failed) printf "[tests] a build or a test binary failed before reporting its tests: see cargo'"'"'s error above\n"
  }' "$log"
if [[ -s $state/failures.txt ]]; then
  echo "[tests] why each failed (its panic message; the whole output is above):"
  cat "$state/failures.txt"
fi
exit "$status"
