#!/usr/bin/env bash
# Runs the specification's production topology on one machine: every role a `flowhost serve --roles ...` process
# of its own, all on the same Kafka, NATS, MongoDB and Redis servers.
#
#   examples/topology/topology.sh start DIR      start the processes (settings from DIR/topology.env)
#   examples/topology/topology.sh stop DIR       stop every process started into DIR (SIGTERM, then SIGKILL)
#   examples/topology/topology.sh kill DIR NAME  SIGKILL one process (a crash), e.g. `sender-1`
#   examples/topology/topology.sh restart DIR NAME   start one process again with its ports and settings
#   examples/topology/topology.sh status DIR     each process, its pid and whether it is alive
#
# DIR/topology.env holds the settings every process shares, as shell assignments (`NAME='value'`): at least the
# servers (FLOWHOST_MONGODB_URI, FLOWHOST_KAFKA_BROKERS, FLOWHOST_NATS_URL, FLOWHOST_REDIS_URL, DOCDB_URI,
# PRESENCE_BROKER_BOOTSTRAP_SERVERS, GATEWAY_EDGE_CACHE_URL), the push service's keys and caller policy, and the
# gateway's origin map and HMAC key; see examples/topology/README.md. `start` gives each process its own ports on
# 127.0.0.1 (free ones) and writes them to DIR/addresses.env; each process logs to DIR/NAME.log and keeps its
# data directory in DIR/data/NAME. FLOWHOST_BIN names the binary (default: `flowhost` on PATH).
#
# The processes:
#   admin-engine     admin,engine   the administration API (v1, v2, catalog) and the flow runtime
#   push-api         push-api       the push-platform, editor and in-app routes
#   sender-1, -2     sender         web-push and in-app delivery (two replicas sharing the work over NATS)
#   gateway-edge     gateway-edge   the public edge
#   gateway-ingest   gateway-ingest internal ingest into the durable queue
#   gateway-worker   gateway-worker the queue to Kafka
#   presence-1, -2   presence       the presence projector (two replicas sharing the partitions)
#   campaigns        campaigns      the read-only campaign events API
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
names=(admin-engine push-api sender-1 sender-2 gateway-edge gateway-ingest gateway-worker presence-1 presence-2 campaigns)

log() { printf '[topology] %s\n' "$*" >&2; }

roles_of() {
  case $1 in
    admin-engine) echo admin,engine ;;
    push-api) echo push-api ;;
    sender-*) echo sender ;;
    gateway-edge | gateway-ingest | gateway-worker) echo "$1" ;;
    presence-*) echo presence ;;
    campaigns) echo campaigns ;;
    *) log "unknown process $1"; return 2 ;;
  esac
}

# The addresses of the deployment: one main port per process (its /health, /ready, /metrics), and the ports the
# roles serve on. Written once by `start`, read by `restart` so a process comes back where it was.
allocate() {
  local dir=$1 name upper keys=() ports
  for name in "${names[@]}"; do
    upper=$(echo "$name" | tr 'a-z-' 'A-Z_')
    keys+=("${upper}_PORT" "${upper}_METRICS_PORT")
  done
  keys+=(EDGE_PORT INGEST_PORT INGEST_PRIVATE_PORT QUEUE_ADMIN_PORT PRESENCE_1_HTTP_PORT PRESENCE_2_HTTP_PORT
    CAMPAIGNS_HTTP_PORT)
  # Below the ephemeral range, all distinct: see free_ports.py.
  ports=$(python3 "$here/free_ports.py" "${#keys[@]}")
  mapfile -t ports <<<"$ports"
  for i in "${!keys[@]}"; do echo "${keys[$i]}=${ports[$i]}"; done >"$dir/addresses.env"
}

# Starts process `name` in the background with the shared settings and its own ports.
spawn() {
  local dir=$1 name=$2 upper roles
  upper=$(echo "$name" | tr 'a-z-' 'A-Z_')
  roles=$(roles_of "$name")
  mkdir -p "$dir/data/$name"
  (
    set -a
    # shellcheck disable=SC1091
    source "$dir/topology.env"
    # shellcheck disable=SC1091
    source "$dir/addresses.env"
    set +a
    main_port_var="${upper}_PORT"
    metrics_port_var="${upper}_METRICS_PORT"
    export API_PORT=${!main_port_var}
    export FLOWHOST_DATA_DIR=$dir/data/$name
    export GATEWAY_BIND_HOST=127.0.0.1
    export GATEWAY_METRICS_PORT=${!metrics_port_var}
    export GATEWAY_EDGE_HTTP_PORT=$EDGE_PORT
    export GATEWAY_INGEST_HTTP_PORT=$INGEST_PORT
    export GATEWAY_INGEST_PRIVATE_HOST=127.0.0.1
    export GATEWAY_INGEST_PRIVATE_PORT=$INGEST_PRIVATE_PORT
    export GATEWAY_ADMIN_HTTP_PORT=$QUEUE_ADMIN_PORT
    export GATEWAY_EDGE_INGEST_URL=http://127.0.0.1:$INGEST_PRIVATE_PORT/internal/v1/events
    export FLOWHOST_CAMPAIGNS_LISTEN=127.0.0.1:$CAMPAIGNS_HTTP_PORT
    case $name in
      presence-1) export PRESENCE_HTTP_ADDR=127.0.0.1:$PRESENCE_1_HTTP_PORT ;;
      presence-2) export PRESENCE_HTTP_ADDR=127.0.0.1:$PRESENCE_2_HTTP_PORT ;;
    esac
    exec "${FLOWHOST_BIN:-flowhost}" serve --roles "$roles" >>"$dir/$name.log" 2>&1
  ) &
  echo $! >"$dir/$name.pid"
  log "$name ($roles) started, pid $(cat "$dir/$name.pid")"
}

alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Whether GET /health on 127.0.0.1:PORT answers 200 (Python's standard library: no curl needed).
healthy() {
  python3 -c 'import sys, urllib.request
try: sys.exit(0 if urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2).status == 200 else 1)
except Exception: sys.exit(1)' "$1"
}

# Waits until process `name` answers GET /health on its main port (at most 60 s).
wait_health() {
  local dir=$1 name=$2 upper port
  upper=$(echo "$name" | tr 'a-z-' 'A-Z_')
  port=$(grep "^${upper}_PORT=" "$dir/addresses.env" | cut -d= -f2)
  for _ in $(seq 1 300); do
    if healthy "$port"; then return 0; fi
    if ! alive "$dir/$name.pid"; then log "$name exited; see $dir/$name.log"; tail -20 "$dir/$name.log" >&2; return 1; fi
    sleep 0.2
  done
  log "$name did not answer /health on $port"; return 1
}

start() {
  local dir=$1 name
  [[ -f $dir/topology.env ]] || { log "$dir/topology.env is missing (the shared settings)"; return 2; }
  dir=$(cd "$dir" && pwd)
  allocate "$dir"
  for name in "${names[@]}"; do spawn "$dir" "$name"; done
  for name in "${names[@]}"; do wait_health "$dir" "$name"; done
  log "every process answers /health; addresses in $dir/addresses.env"
}

stop_one() {
  local file=$1 pid
  alive "$file" || { rm -f "$file"; return 0; }
  pid=$(cat "$file")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$file"
}

stop() {
  local dir=$1 name
  for name in "${names[@]}"; do stop_one "$dir/$name.pid"; done
  log "stopped"
}

case ${1:-} in
  start) start "${2:?directory}" ;;
  stop) stop "${2:?directory}" ;;
  kill)
    file="${2:?directory}/${3:?process name}.pid"
    alive "$file" || { log "$3 is not running"; exit 1; }
    kill -9 "$(cat "$file")"
    log "$3 killed (SIGKILL)"
    ;;
  restart)
    dir=$(cd "${2:?directory}" && pwd)
    stop_one "$dir/${3:?process name}.pid"
    spawn "$dir" "$3"
    wait_health "$dir" "$3"
    ;;
  status)
    for name in "${names[@]}"; do
      if alive "${2:?directory}/$name.pid"; then echo "$name $(cat "$2/$name.pid") running"; else echo "$name - stopped"; fi
    done
    ;;
  *) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
