# shellcheck shell=bash
# cassandra-cluster.sh - a Cassandra test cluster of CASSANDRA_CLUSTER_NODES nodes (default 3) on
# loopback addresses 127.0.0.1 .. 127.0.0.N, for scripts/servers.sh (sourced by it; uses its
# helpers: log, die, launch, running_pid, stop_server, render, ...).
#
# Every node listens on its own address with the same port numbers (CQL CASSANDRA_CLUSTER_PORT,
# gossip CASSANDRA_CLUSTER_STORAGE_PORT), so the driver reaches each one at host:port like on a real
# cluster; node i's local JMX (for nodetool) is on 127.0.0.1:CASSANDRA_CLUSTER_JMX_PORT+i-1. Node 1
# is the seed. Each node has its own run dir $RUN/cassandra-node<i> (conf, data, log, pid) and
# heap CASSANDRA_CLUSTER_HEAP. See docs/servers.md, "A three-node cluster".

CASSANDRA_CLUSTER_NODES=${CASSANDRA_CLUSTER_NODES:-3}
CASSANDRA_CLUSTER_HEAP=${CASSANDRA_CLUSTER_HEAP:-1g}
CASSANDRA_CLUSTER_PORT=${CASSANDRA_CLUSTER_PORT:-19142}
CASSANDRA_CLUSTER_STORAGE_PORT=${CASSANDRA_CLUSTER_STORAGE_PORT:-17100}
CASSANDRA_CLUSTER_SSL_STORAGE_PORT=${CASSANDRA_CLUSTER_SSL_STORAGE_PORT:-17101}
CASSANDRA_CLUSTER_JMX_PORT=${CASSANDRA_CLUSTER_JMX_PORT:-17199}
CASSANDRA_CLUSTER_START_TIMEOUT=${CASSANDRA_CLUSTER_START_TIMEOUT:-420}
CLUSTER_PORT_VARS=(CASSANDRA_CLUSTER_PORT CASSANDRA_CLUSTER_STORAGE_PORT CASSANDRA_CLUSTER_SSL_STORAGE_PORT
                   CASSANDRA_CLUSTER_JMX_PORT)

node_name() { echo "cassandra-node$1"; }
node_address() { echo "127.0.0.$1"; }
cluster_nodes() { seq 1 "$CASSANDRA_CLUSTER_NODES"; }

check_cluster_values() {
  [[ $CASSANDRA_CLUSTER_NODES =~ ^[1-9]$ ]] || die "CASSANDRA_CLUSTER_NODES=$CASSANDRA_CLUSTER_NODES: 1 to 9 nodes"
  local v
  for v in "${CLUSTER_PORT_VARS[@]}"; do
    if ! [[ ${!v} =~ ^[0-9]+$ ]] || (( ${!v} < 1024 || ${!v} + 8 > 65535 )); then
      die "$v=${!v} is not a port number in 1024-65527"
    fi
  done
}

node_token() { # i -> the node's initial token: N evenly spaced Murmur3 tokens from -2^63
  local step=$(( (9223372036854775807 / CASSANDRA_CLUSTER_NODES) * 2 ))
  echo $(( -9223372036854775807 - 1 + ($1 - 1) * step ))
}

cluster_ports() { # every port any node will listen on (gossip, CQL on every address; JMX on 127.0.0.1)
  local i
  echo "$CASSANDRA_CLUSTER_PORT" "$CASSANDRA_CLUSTER_STORAGE_PORT"
  for i in $(cluster_nodes); do echo $(( CASSANDRA_CLUSTER_JMX_PORT + i - 1 )); done
}

load_cluster_ports() { # a running cluster keeps the ports and size it was started with
  local f="$RUN/cassandra-node1/ports.env" k v
  [ -f "$f" ] && running_pid cassandra-node1 >/dev/null || return 0
  while IFS='=' read -r k v; do
    [[ $k =~ ^CASSANDRA_CLUSTER_[A-Z_]*$ && $v =~ ^[0-9a-z]+$ ]] || continue
    printf -v "$k" '%s' "$v"
  done <"$f"
}

start_node() { # i: render the node's config into its fresh run dir and launch its JVM
  local i=$1 name run dir="$IT_HOME/cassandra-$CASSANDRA_VERSION" jamm
  name=$(node_name "$i"); run="$RUN/$name"
  jamm=$(find "$dir/lib" -maxdepth 1 -name '*jamm*.jar' | head -n 1)
  [ -n "$jamm" ] || die "cassandra: no jamm jar in $dir/lib; delete $dir and fetch again"
  rm -rf "$run"; mkdir -p "$run/conf" "$run/data" "$run/logs" "$run/tmp"
  # shellcheck disable=SC2034  # read by render through ${!v}
  local DATA="$run/data" ADDRESS SEED TOKEN RACK="rack$i"
  ADDRESS=$(node_address "$i"); SEED="$(node_address 1):$CASSANDRA_CLUSTER_STORAGE_PORT"; TOKEN=$(node_token "$i")
  render "$HERE/cassandra/cluster.yaml" "$run/conf/cassandra.yaml" DATA ADDRESS SEED TOKEN \
    CASSANDRA_CLUSTER_PORT CASSANDRA_CLUSTER_STORAGE_PORT CASSANDRA_CLUSTER_SSL_STORAGE_PORT
  printf 'dc=dc1\nrack=%s\n' "$RACK" >"$run/conf/cassandra-rackdc.properties"
  cp "$HERE/cassandra/logback.xml" "$run/conf/"
  local v
  for v in CASSANDRA_CLUSTER_NODES CASSANDRA_CLUSTER_HEAP "${CLUSTER_PORT_VARS[@]}"; do echo "$v=${!v}"; done \
    >"$run/ports.env"
  local opts
  cassandra_jvm_options "$CASSANDRA_CLUSTER_HEAP" "$run" "$jamm"
  opts+=(
    # nodetool through local JMX (127.0.0.1 only, no remote JMX)
    "-Dcassandra.jmx.local.port=$(( CASSANDRA_CLUSTER_JMX_PORT + i - 1 ))"
    # a test cluster: no wait for gossip to settle, no superuser set-up delay. The system keyspace
    # is written durably (no cassandra.unsafesystem): a node killed with -9 must come back as itself.
    "-Dcassandra.skip_wait_for_gossip_to_settle=0" "-Dcassandra.superuser_setup_delay_ms=0"
  )
  if [ -d "$dir/lib/sigar-bin" ]; then opts+=("-Djava.library.path=$dir/lib/sigar-bin"); fi
  launch "$name" "$JAVA" "${opts[@]}" -cp "$run/conf:$dir/lib/*" org.apache.cassandra.service.CassandraDaemon
}

port_open() { # address port: something accepts TCP connections there
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

wait_gossip() { # i: until node i's gossip port accepts (the next node can then find it), or fail
  local i=$1 name t0=$SECONDS
  name=$(node_name "$i")
  until port_open "$(node_address "$i")" "$CASSANDRA_CLUSTER_STORAGE_PORT"; do
    require_alive "$name"
    (( SECONDS - t0 < CASSANDRA_CLUSTER_START_TIMEOUT )) ||
      die_with_log "$RUN/$name/$name.log" "$name: gossip port not open after ${CASSANDRA_CLUSTER_START_TIMEOUT}s"
    sleep 1
  done
}

start_cluster() {
  local dir="$IT_HOME/cassandra-$CASSANDRA_VERSION" i p line running=0
  check_cluster_values
  [ -f "$dir/.ready" ] || die "cassandra: not fetched ($dir); run: $0 fetch cassandra"
  for i in $(cluster_nodes); do running_pid "$(node_name "$i")" >/dev/null && running=$((running + 1)); done
  if (( running == CASSANDRA_CLUSTER_NODES )); then
    load_cluster_ports; log "cassandra-cluster: already running ($CASSANDRA_CLUSTER_NODES nodes); leaving it as it is"
    return 0
  fi
  (( running == 0 )) || die "cassandra-cluster: $running of $CASSANDRA_CLUSTER_NODES nodes run; stop the cluster first"
  require_java17
  for p in $(cluster_ports); do
    line=$(port_listener "$p")
    [ -z "$line" ] || die "cassandra-cluster: port $p is already in use: $line
    choose other CASSANDRA_CLUSTER_*PORT values (and another IT_HOME to run a second cluster)"
  done
  # The seed first; the others once its gossip port is open (a node that finds no seed gives up).
  # They skip bootstrap (auto_bootstrap: false), so they may join at the same time.
  start_node 1
  wait_gossip 1
  for i in $(cluster_nodes); do (( i == 1 )) || start_node "$i"; done
}

wait_cluster() {
  load_cluster_ports
  local t0=$SECONDS rc out i hosts="" detail="CQL ports closed"
  for i in $(cluster_nodes); do hosts+="${hosts:+,}$(node_address "$i")"; done
  while :; do
    for i in $(cluster_nodes); do require_alive "$(node_name "$i")"; done
    (( SECONDS - t0 < CASSANDRA_CLUSTER_START_TIMEOUT )) || die_with_log "$RUN/cassandra-node1/cassandra-node1.log" \
      "cassandra-cluster: not ready after ${CASSANDRA_CLUSTER_START_TIMEOUT}s ($detail)"
    if port_open 127.0.0.1 "$CASSANDRA_CLUSTER_PORT"; then
      rc=0; out=$("$PYTHON" "$HERE/probes/cassandra_cluster.py" "$hosts" "$CASSANDRA_CLUSTER_PORT" \
                  "$CASSANDRA_CLUSTER_NODES" 2>&1) || rc=$?
      case $rc in
        0) log "cassandra-cluster ready in $((SECONDS - t0)) s ($hosts, CQL port $CASSANDRA_CLUSTER_PORT):"
           printf '%s\n' "$out" | sed 's/^/    /' >&2
           return 0 ;;
        2) die "cassandra-cluster: cassandra-driver is not importable by $PYTHON (set PYTHON to a venv python)" ;;
        *) detail=$(printf '%s' "$out" | tail -n 1) ;;
      esac
    fi
    sleep 2
  done
}

stop_cluster() { # every node, the seed last
  load_cluster_ports
  local i
  for i in $(seq "$CASSANDRA_CLUSTER_NODES" -1 1); do stop_server "$(node_name "$i")"; done
}

status_cluster() { # one line per node; 0 when every node runs
  load_cluster_ports
  local i name pid rss up rc=0
  for i in $(cluster_nodes); do
    name=$(node_name "$i")
    if pid=$(running_pid "$name"); then
      rss=$(awk '/^VmRSS:/ { printf "%d MB", $2 / 1024 }' "/proc/$pid/status")
      up=$(ps -o etime= -p "$pid" | tr -d ' ')
      printf '%-16s running  pid %s  rss %s  up %s  %s:%s\n' "$name" "$pid" "$rss" "$up" "$(node_address "$i")" \
        "$CASSANDRA_CLUSTER_PORT"
    elif [ -f "$RUN/$name/$name.pid" ]; then
      printf '%-16s dead     (stale pid file; log %s)\n' "$name" "$RUN/$name/$name.log"; rc=3
    else
      printf '%-16s stopped\n' "$name"; rc=3
    fi
  done
  return "$rc"
}

print_cluster_env() {
  load_cluster_ports
  local i hosts=""
  for i in $(cluster_nodes); do hosts+="${hosts:+,}$(node_address "$i")"; done
  printf 'export CASSANDRA_HOST=%s CASSANDRA_PORT=%s CASSANDRA_CONSISTENCY=LOCAL_QUORUM\n' "$hosts" \
    "$CASSANDRA_CLUSTER_PORT"
}

nodetool() { # i args...: Cassandra's own nodetool (in cassandra-all) against node i's local JMX
  load_cluster_ports
  local i=$1 dir="$IT_HOME/cassandra-$CASSANDRA_VERSION"; shift
  [[ $i =~ ^[1-9]$ ]] && (( i <= CASSANDRA_CLUSTER_NODES )) || die "nodetool: no node $i (1..$CASSANDRA_CLUSTER_NODES)"
  "$JAVA" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "${CASSANDRA_JPMS[@]}" \
    "-Dlogback.configurationFile=$HERE/cassandra/logback.xml" "-Dcassandra.logdir=$RUN/cassandra-node$i/logs" \
    -cp "$dir/lib/*" org.apache.cassandra.tools.NodeTool -h 127.0.0.1 -p $(( CASSANDRA_CLUSTER_JMX_PORT + i - 1 )) "$@"
}
