#!/usr/bin/env bash
# A throwaway RabbitMQ cluster on this machine, beside the system broker, for the
# failover test, for the fleet bench's broker of its own, and for trying a multi-URL engine by hand. Everything it makes lives in one
# folder: node data, logs, config, a private Erlang cookie and HOME, so the system broker
# (127.0.0.1:5672/15672, its cookie, its data) is never touched. Node names carry a random tag,
# so two runs at once (several worktrees testing on one machine) do not meet in epmd.
#
#   scripts/rabbitmq-cluster.sh start <dir> [nodes] [--owner-pid PID] [--nofile N] [--management] [--advanced TERM]
#       start <nodes> (default 3) nodes, join them, print one line per node: `<i> <name> <amqp port>`
#       (and `<management port>` with --management); if that fails, every node started is killed
#       and <dir> removed.
#       With --owner-pid, a watchdog stops the cluster and removes <dir> once PID is gone, so a
#       test runner killed mid-run leaves nothing behind. --nofile raises each node's open-file
#       limit (soft and hard; needs root above the shell's hard limit, at most /proc/sys/fs/nr_open).
#       --management enables the management plugin on a free port of each node's own.
#       --advanced writes TERM as each node's advanced.config (default `[].`).
#   scripts/rabbitmq-cluster.sh stop-node <dir> <i> [--kill]
#       stop node i for good (`rabbitmqctl stop`), or SIGKILL its VM with --kill.
#   scripts/rabbitmq-cluster.sh ctl <dir> <i> <rabbitmqctl args…>
#       rabbitmqctl against node i (e.g. add_user, set_permissions, list_queues).
#   scripts/rabbitmq-cluster.sh stop <dir>
#       kill every node (its data is throwaway) and remove <dir>.
#
# Facts that make it work here: the /usr/lib/rabbitmq/bin scripts run directly (the
# /usr/sbin wrapper switches user and reads the system's env file); an empty plugins list (or the
# management plugin on a port of the node's own) keeps the port 15672 free for the system broker; `await_startup` fails at once until the
# node has registered with epmd, so it is retried.
set -euo pipefail

RMQ_BIN=${RABBITMQ_BIN_DIR:-/usr/lib/rabbitmq/bin}
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

usage() {
  sed -n '8,22p' "$0" >&2
  exit 64
}

# A TCP port nothing listens on, from a range the kernel does not hand out as ephemeral ports.
free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + RANDOM % 10000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 10000))") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  echo "no free port found" >&2
  exit 1
}

# Environment of node i, from <dir>/cluster.env (written by start).
node_env() {
  local dir=$1 i=$2
  # shellcheck disable=SC1091
  . "$dir/cluster.env"
  local name_var="NODE_${i}_NAME" port_var="NODE_${i}_PORT" dist_var="NODE_${i}_DIST" mgmt_var="NODE_${i}_MGMT"
  [ -n "${!name_var:-}" ] || {
    echo "no node $i in $dir" >&2
    exit 64
  }
  NODE_DIR="$dir/n$i"
  export HOME="$dir/home"
  export RABBITMQ_NODENAME="${!name_var}"
  export RABBITMQ_NODE_PORT="${!port_var}"
  export RABBITMQ_DIST_PORT="${!dist_var}"
  MGMT_PORT="${!mgmt_var:-}"
  # The CLI's own distribution ports: a range per node, away from the system broker's 35672+.
  export RABBITMQ_CTL_DIST_PORT_MIN=$((RABBITMQ_DIST_PORT + 10000))
  export RABBITMQ_CTL_DIST_PORT_MAX=$((RABBITMQ_DIST_PORT + 10010))
  export RABBITMQ_MNESIA_BASE="$NODE_DIR/mnesia"
  export RABBITMQ_LOG_BASE="$NODE_DIR/log"
  export RABBITMQ_PID_FILE="$NODE_DIR/pid"
  export RABBITMQ_CONFIG_FILE="$NODE_DIR/rabbitmq.conf"
  export RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins"
  export RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf"
  export RABBITMQ_ADVANCED_CONFIG_FILE="$NODE_DIR/advanced.config"
}

ctl() {
  local dir=$1 i=$2
  shift 2
  (
    node_env "$dir" "$i"
    "$RMQ_BIN/rabbitmqctl" -n "$RABBITMQ_NODENAME" "$@"
  )
}

await_node() {
  local dir=$1 i=$2
  for _ in $(seq 1 120); do
    if ctl "$dir" "$i" -q await_startup --timeout 30 >/dev/null 2>&1; then return 0; fi
    # The launcher is gone and the VM never wrote its pid: it will not come up.
    kill -0 "$(cat "$dir/n$i/launcher.pid")" 2>/dev/null || [ -e "$dir/n$i/pid" ] || break
    sleep 0.5
  done
  echo "node $i did not start; the end of its log:" >&2
  tail -n 30 "$dir/n$i/log"/*.log >&2 2>/dev/null || true
  return 1
}

start_node() {
  local dir=$1 i=$2
  (
    node_env "$dir" "$i"
    mkdir -p "$NODE_DIR/log" "$NODE_DIR/mnesia"
    cat >"$RABBITMQ_CONFIG_FILE" <<EOF
listeners.tcp.1 = 127.0.0.1:$RABBITMQ_NODE_PORT
loopback_users = none
log.console = false
log.file.level = warning
EOF
    if [ -n "$MGMT_PORT" ]; then
      echo "management.tcp.ip = 127.0.0.1" >>"$RABBITMQ_CONFIG_FILE"
      echo "management.tcp.port = $MGMT_PORT" >>"$RABBITMQ_CONFIG_FILE"
    fi
    # Nodes after the first join it as they boot (classic peer discovery): no stop_app/start_app
    # cycle per node, which costs seconds each on a busy machine.
    if [ "$i" != 1 ]; then
      echo "cluster_formation.peer_discovery_backend = classic_config" >>"$RABBITMQ_CONFIG_FILE"
      echo "cluster_formation.classic_config.nodes.1 = $NODE_1_NAME" >>"$RABBITMQ_CONFIG_FILE"
    fi
    echo "${ADVANCED:-[].}" >"$RABBITMQ_ADVANCED_CONFIG_FILE"
    # The VM inherits the limit; the broker reads it as its fd_total.
    if [ -n "${NOFILE:-}" ]; then
      if [ "$NOFILE" -gt "$(ulimit -Hn)" ] && ! ulimit -Hn "$NOFILE" 2>/dev/null; then
        echo "cannot raise the open-file limit to $NOFILE: the hard limit is $(ulimit -Hn) and raising it needs CAP_SYS_RESOURCE" >&2
        exit 1
      fi
      ulimit -n "$NOFILE"
    fi
    # setsid: the node outlives the shell that started it and is not hit by its terminal signals.
    setsid "$RMQ_BIN/rabbitmq-server" >"$NODE_DIR/log/stdout.log" 2>&1 </dev/null &
    echo $! >"$NODE_DIR/launcher.pid"
  )
}

cmd_start() {
  local dir=${1:?dir}
  shift
  local nodes=3 owner='' nofile='' management='' advanced=''
  while [ $# -gt 0 ]; do
    case $1 in
    --owner-pid)
      owner=${2:?pid}
      shift 2
      ;;
    --nofile)
      nofile=${2:?limit}
      shift 2
      ;;
    --management)
      management=1
      shift
      ;;
    --advanced)
      advanced=${2:?term}
      shift 2
      ;;
    *)
      nodes=$1
      shift
      ;;
    esac
  done
  mkdir -p "$dir/home"
  dir=$(cd "$dir" && pwd)
  [ ! -e "$dir/cluster.env" ] || {
    echo "$dir already holds a cluster" >&2
    exit 1
  }
  local tag
  tag=$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
  head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr 'a-f' 'A-F' >"$dir/home/.erlang.cookie"
  chmod 400 "$dir/home/.erlang.cookie"
  if [ -n "$management" ]; then echo '[rabbitmq_management].' >"$dir/enabled_plugins"; else echo '[].' >"$dir/enabled_plugins"; fi
  : >"$dir/rabbitmq-env.conf"
  # A start that fails half way leaves no node behind.
  trap "[ \$? -eq 0 ] || cmd_stop '$dir'" EXIT
  {
    echo "NODES=$nodes"
    echo "NOFILE=$nofile"
    printf 'ADVANCED=%q\n' "$advanced"
    for i in $(seq 1 "$nodes"); do
      local port dist
      port=$(free_port)
      dist=$(free_port)
      echo "NODE_${i}_NAME=converge-$tag-$i@localhost"
      echo "NODE_${i}_PORT=$port"
      echo "NODE_${i}_DIST=$dist"
      [ -z "$management" ] || echo "NODE_${i}_MGMT=$(free_port)"
    done
  } >"$dir/cluster.env"
  if [ -n "$owner" ]; then
    # The watchdog: once the owner is gone, stop everything. Detached from our stdout so a caller
    # reading it until EOF is not held open by this loop.
    setsid bash -c "while kill -0 $owner 2>/dev/null && [ -e '$dir/cluster.env' ]; do sleep 1; done; [ -e '$dir/cluster.env' ] && '$SELF' stop '$dir'" \
      >/dev/null 2>&1 </dev/null &
  fi
  start_node "$dir" 1
  await_node "$dir" 1
  for i in $(seq 2 "$nodes"); do start_node "$dir" "$i"; done
  for i in $(seq 2 "$nodes"); do await_node "$dir" "$i"; done
  # A node that did not find node 1 at boot runs alone: check, and join it the explicit way.
  local first
  # shellcheck disable=SC1091
  first=$(. "$dir/cluster.env" && echo "$NODE_1_NAME")
  for i in $(seq 2 "$nodes"); do
    ctl "$dir" 1 -q eval "lists:member('$(. "$dir/cluster.env" && eval "echo \$NODE_${i}_NAME")', rabbit_nodes:all_running())." 2>/dev/null | grep -q true && continue
    echo "node $i booted alone; joining it to $first" >&2
    local out
    out=$(ctl "$dir" "$i" -q stop_app 2>&1 && ctl "$dir" "$i" -q join_cluster "$first" 2>&1 && ctl "$dir" "$i" -q start_app 2>&1) || {
      echo "node $i could not join $first: $out" >&2
      exit 1
    }
  done
  for i in $(seq 1 "$nodes"); do
    # shellcheck disable=SC1091
    (. "$dir/cluster.env" && eval "echo $i \$NODE_${i}_NAME \$NODE_${i}_PORT \${NODE_${i}_MGMT:-}" | sed 's/ $//')
  done
}

cmd_stop_node() {
  local dir=${1:?dir} i=${2:?node} how=${3:-}
  # Read before stopping: a graceful stop removes the pid file.
  local pid
  pid=$(cat "$dir/n$i/pid" 2>/dev/null || cat "$dir/n$i/launcher.pid")
  if [ "$how" = --kill ]; then
    kill -KILL "$pid" 2>/dev/null || true
  else
    ctl "$dir" "$i" -q stop >/dev/null 2>&1 || true
  fi
  kill -KILL "$(cat "$dir/n$i/launcher.pid")" 2>/dev/null || true
  # Gone for good only once the VM has exited.
  for _ in $(seq 1 150); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "node $i still running" >&2
  return 1
}

cmd_stop() {
  local dir=${1:?dir}
  if [ -e "$dir/cluster.env" ]; then
    local nodes
    # shellcheck disable=SC1091
    nodes=$(. "$dir/cluster.env" && echo "$NODES")
    # Throwaway data: no graceful shutdown needed, and SIGKILL cannot hang.
    for i in $(seq 1 "$nodes"); do
      for f in pid launcher.pid; do
        local pid
        pid=$(cat "$dir/n$i/$f" 2>/dev/null || true)
        [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true
      done
    done
  fi
  rm -rf "$dir"
}

case ${1:-} in
start) shift && cmd_start "$@" ;;
stop-node) shift && cmd_stop_node "$@" ;;
stop) shift && cmd_stop "$@" ;;
ctl) shift && ctl "$@" ;;
*) usage ;;
esac
