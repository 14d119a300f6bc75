#!/usr/bin/env bash
# The ten-minute walk, timed: what a plugin author types from `flowhost plugin new` to the new action's first run
# in a released flow, in one language, each step timed on this machine (builds and toolchain installs included):
#
#   bash examples/plugin-walk/walk.sh rust|python|js [FLOWHOST]
#
# FLOWHOST is the flowhost binary (default: target/release/flowhost). The walk works in a temporary directory:
# the project, a Flowhost started on embedded defaults (its own data directory, a free loopback port, the admin
# and engine roles) and the CLI's compile cache, so every run starts cold, as an author's first one does. It
# prints one line per step and the total, stops what it started and removes the directory. It exits 1 when a step
# fails or the run does not complete within 2 minutes of the event.
set -euo pipefail
lang="${1:?usage: walk.sh rust|python|js [FLOWHOST]}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
flowhost="$(realpath "${2:-$root/target/release/flowhost}")"
[ -x "$flowhost" ] || { echo "no flowhost binary at $flowhost: cargo build --release -p flowhost" >&2; exit 1; }
case "$lang" in
  rust) unit_tests=(cargo test --quiet) component=target/wasm32-wasip2/release/greeter.wasm ;;
  python) unit_tests=(python3 -m unittest --quiet) component=build/greeter.wasm ;;
  js) unit_tests=(npm test --silent) component=build/greeter.wasm ;;
  *) echo "unknown language $lang (rust, python, js)" >&2; exit 1 ;;
esac

work="$(mktemp -d "${TMPDIR:-/tmp}/flowhost-walk.XXXXXX")"
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
# The walk's own server and cache, whatever the caller's environment says.
export FLOWHOST_DATA_DIR="$work/data" XDG_CACHE_HOME="$work/cache" FLOWHOST_LOG=warn
unset FLOWHOST_PLUGINS_COMPILE_CACHE_DIR FLOWHOST_CONFIG
API_PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export API_PORT
api="http://127.0.0.1:$API_PORT"

started=$SECONDS
declare -A took
step() { # step NAME COMMAND...: runs it (its output to the log), times it
  local name=$1 begin=$SECONDS; shift
  if ! "$@" >>"$work/log" 2>&1; then
    echo "FAILED: $name" >&2; tail -30 "$work/log" >&2; exit 1
  fi
  took[$name]=$((SECONDS - begin))
  printf '%-34s %4d s\n' "$name" "${took[$name]}"
}
json() { curl -sf -H 'content-type: application/json' "$@"; }

echo "the ten-minute walk in $lang ($(nproc) cores), $(date -u +%FT%TZ)"
"$flowhost" serve --roles admin,engine >"$work/server.log" 2>&1 &
server=$!

cd "$work"
step "plugin new" "$flowhost" plugin new greeter --lang "$lang"
cd greeter
step "unit tests" "${unit_tests[@]}"
step "plugin build" "$flowhost" plugin build
step "plugin test" "$flowhost" plugin test "$component" --action greet --input example-input.json

wait_ready() { until curl -sf "$api/ready" >/dev/null; do kill -0 "$server" || return 1; sleep 0.2; done; }
step "the server ready" wait_ready
step "plugin upload" "$flowhost" plugin upload "$component" --server "$api"

release_flow() {
  json -X PUT "$api/api/v1/schemas/deposit" -d '{"fields": [{"name": "player_id", "type": "string"}]}'
  json -X POST "$api/api/v2/flows" -o "$work/flow.json" -d '{
    "name": "Greet every depositor",
    "nodes": [
      {"id": "src", "kind": "source", "config": {"event_type": "deposit", "topic": "deposits"}},
      {"id": "seg", "kind": "service-in", "config": {"service": "greeter"}},
      {"id": "greet", "kind": "action", "config": {"action_ref": "greet", "player_id": "{{player_id}}"}},
      {"id": "out", "kind": "output-topic", "config": {"topic": "greetings"}}
    ],
    "edges": [{"from": "src", "to": "seg"}, {"from": "seg", "to": "greet"}, {"from": "greet", "to": "out"}]}'
  flow_id="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["id"])' "$work/flow.json")"
  echo "$flow_id" >"$work/flow-id"
  json -X POST "$api/api/v2/flows/$flow_id/release" -d '{}'
}
step "flow created and released" release_flow

first_run() {
  "$flowhost" events publish deposits \
    '{"event_type": "deposit", "tenant_id": "casino-1", "player_id": "p-1", "amount": 25.0}'
  local until=$((SECONDS + 120))
  until json "$api/api/v2/flows/$(cat "$work/flow-id")/runs?status=completed" | grep -q '"run_id"'; do
    [ $SECONDS -lt $until ] || { echo "no completed run"; return 1; }
    sleep 0.2
  done
  "$flowhost" events tail greetings --limit 1
}
step "event published, first run done" first_run
grep -o '"message":"[^"]*"' "$work/log" | tail -1
printf '%-34s %4d s\n' "total" $((SECONDS - started))
