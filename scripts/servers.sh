#!/usr/bin/env bash
# servers.sh - fetch, start, wait for and stop a REAL Apache Pulsar standalone broker and a REAL
# Apache Cassandra node on 127.0.0.1, from Maven Central artifacts only (no Docker).
#
#   scripts/servers.sh fetch  [pulsar|cassandra|all]  download once into $IT_HOME (cached)
#   scripts/servers.sh start  [pulsar|cassandra|all]  background JVMs, fresh data (no-op if running)
#   scripts/servers.sh wait   [pulsar|cassandra|all]  block until really usable, else fail + log tail
#   scripts/servers.sh stop   [pulsar|cassandra|all]  TERM by PID, KILL after $STOP_TIMEOUT s, no orphans
#   scripts/servers.sh status [pulsar|cassandra|all]  state, PID, RSS, ports (exit 3 unless all running)
#   scripts/servers.sh env                            export line for PULSAR_URL ... CASSANDRA_PORT
#   scripts/servers.sh start|wait|stop|status|env cassandra-cluster   a test cluster of CASSANDRA_CLUSTER_NODES
#                                                     (3) nodes on 127.0.0.1..N (scripts/servers/cassandra-cluster.sh)
#   scripts/servers.sh nodetool N ARGS...             Cassandra's nodetool against cluster node N
#
# Environment (default): IT_HOME (~/.cache/tg-servers), IT_RUN ($IT_HOME/run), PULSAR_VERSION (4.0.8),
#   CASSANDRA_VERSION (5.0.8), JAVA_HOME_17 (/usr/lib/jvm/java-17-openjdk-amd64), MAVEN_REPO
#   (~/.m2/repository), PYTHON (the checkout's .venv/bin/python if there, else python3; needs
#   pulsar-client/cassandra-driver for the real probes),
#   PULSAR_HEAP (1g), PULSAR_DIRECT_MEMORY (1g), CASSANDRA_HEAP (2g), PULSAR_START_TIMEOUT and
#   CASSANDRA_START_TIMEOUT (240 s), STOP_TIMEOUT (30 s), IT_KEEP_DATA (0: stop deletes the data dir).
# Ports (127.0.0.1 only): PULSAR_PORT (6650), PULSAR_HTTP_PORT (8080), PULSAR_BOOKIE_PORT (3181),
#   CASSANDRA_PORT (9042), CASSANDRA_STORAGE_PORT (7000), CASSANDRA_SSL_STORAGE_PORT (7001).
#   A second pair runs beside the first with another IT_HOME and other ports. Once a server runs,
#   wait/status/env use the ports it was started with (recorded in its run dir).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/servers" && pwd)
IT_HOME=${IT_HOME:-$HOME/.cache/tg-servers}
RUN=${IT_RUN:-$IT_HOME/run}
PULSAR_VERSION=${PULSAR_VERSION:-4.0.8}
CASSANDRA_VERSION=${CASSANDRA_VERSION:-5.0.8}
# Cassandra 5.0 runs on JDK 11/17 only; never let a newer default JDK (e.g. Temurin 25) in.
JAVA_HOME_17=${JAVA_HOME_17:-/usr/lib/jvm/java-17-openjdk-amd64}
JAVA="$JAVA_HOME_17/bin/java"
M2=${MAVEN_REPO:-$HOME/.m2/repository}
MVN=(mvn -B -Dstyle.color=never -Dmaven.repo.local="$M2")
# fully qualified: a bare "dependency:" prefix would pick Maven 3.8's default plugin 2.8
DEP=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
# The readiness probes need pulsar-client and cassandra-driver: the checkout's own venv has them.
ROOT_VENV_PYTHON="$HERE/../../.venv/bin/python"
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$ROOT_VENV_PYTHON" ]; then PYTHON=$ROOT_VENV_PYTHON; else PYTHON=python3; fi
fi
# Heaps for a 2-core / 24 GiB machine shared with other test runs (docs/servers.md, "Memory"; the
# measured RSS of a long-running pair is about 3.9 GB); stock defaults would take 2 GiB heap + 4 GiB
# direct for Pulsar and 6 GiB heap for Cassandra, i.e. a quarter of the machine per pair.
PULSAR_HEAP=${PULSAR_HEAP:-1g}
PULSAR_DIRECT_MEMORY=${PULSAR_DIRECT_MEMORY:-1g}
CASSANDRA_HEAP=${CASSANDRA_HEAP:-2g}
PULSAR_START_TIMEOUT=${PULSAR_START_TIMEOUT:-240}
CASSANDRA_START_TIMEOUT=${CASSANDRA_START_TIMEOUT:-240}
STOP_TIMEOUT=${STOP_TIMEOUT:-30}
LOG_TAIL_LINES=${LOG_TAIL_LINES:-80}
PULSAR_PORT=${PULSAR_PORT:-6650}
PULSAR_HTTP_PORT=${PULSAR_HTTP_PORT:-8080}
PULSAR_BOOKIE_PORT=${PULSAR_BOOKIE_PORT:-3181}
CASSANDRA_PORT=${CASSANDRA_PORT:-9042}
CASSANDRA_STORAGE_PORT=${CASSANDRA_STORAGE_PORT:-7000}
CASSANDRA_SSL_STORAGE_PORT=${CASSANDRA_SSL_STORAGE_PORT:-7001}
PORT_VARS_pulsar=(PULSAR_PORT PULSAR_HTTP_PORT PULSAR_BOOKIE_PORT)
PORT_VARS_cassandra=(CASSANDRA_PORT CASSANDRA_STORAGE_PORT CASSANDRA_SSL_STORAGE_PORT)
TG_NAMESPACES=(flow request response notify)

log() { printf '[servers] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
die_with_log() { # logfile message: the message, then the tail of the server's own log
  log "ERROR: $2"
  if [ -s "$1" ]; then
    log "last $LOG_TAIL_LINES lines of $1:"
    tail -n "$LOG_TAIL_LINES" "$1" | sed 's/^/    /' >&2
  else
    log "(log $1 is empty or missing)"
  fi
  exit 1
}

# ---------------------------------------------------------------- checks
require_java17() {
  [ -x "$JAVA" ] || die "no java at $JAVA: install OpenJDK 17 (Debian: openjdk-17-jre-headless) or set JAVA_HOME_17"
  local v; v=$("$JAVA" -version 2>&1 | head -n 1)
  [[ $v == *'"17.'* || $v == *'"17"'* ]] || die "$JAVA is not JDK 17 ($v); Cassandra 5.0 needs JDK 11/17, set JAVA_HOME_17"
}

check_port_values() { # every port numeric, unprivileged and distinct
  local v seen=" "
  for v in "${PORT_VARS_pulsar[@]}" "${PORT_VARS_cassandra[@]}"; do
    if ! [[ ${!v} =~ ^[0-9]+$ ]] || (( ${!v} < 1024 || ${!v} > 65535 )); then
      die "$v=${!v} is not a port number in 1024-65535"
    fi
    [[ $seen == *" ${!v} "* ]] && die "$v=${!v} is used twice; every port must differ"
    seen+="${!v} "
  done
}

port_listener() { # port -> the ss line of whatever listens on it (empty if free)
  if command -v ss >/dev/null 2>&1; then
    ss -Hltnp "sport = :$1" 2>/dev/null || true
  elif (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
    echo "something accepts connections on 127.0.0.1:$1"
  fi
}

check_ports_free() { # name: fail before launching a JVM that would die on a busy port
  local name=$1 v line vars="PORT_VARS_$1[@]"
  for v in "${!vars}"; do
    line=$(port_listener "${!v}")
    [ -z "$line" ] || die "$name: port ${!v} ($v) is already in use: $line
    choose free ports, e.g. $v=$(( ${!v} + 10000 )), and another IT_HOME to run a second instance"
  done
}

# ---------------------------------------------------------------- process identity
is_ours() { # pid run: alive and really the JVM started for this run dir (not a recycled PID)
  # both JVMs get -D<logging>.configurationFile=<run>/conf/...; the "=" anchors the path
  [ -n "$1" ] && [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "=$2/conf/"
}

running_pid() { # name -> pid on stdout when running
  local pid; pid=$(cat "$RUN/$1/$1.pid" 2>/dev/null || true)
  is_ours "$pid" "$RUN/$1" && echo "$pid"
}

proc_gone() { # pid: no such process, or only a zombie (holds no memory, files or ports)
  [ ! -e "/proc/$1" ] || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

group_members() { # pgid -> live (non-zombie) pids still in that process group
  ps -eo pid=,pgid=,stat= | awk -v g="$1" '$2 == g && $3 !~ /^Z/ { print $1 }'
}

load_recorded_ports() { # name: a running server keeps the ports it was started with
  local f="$RUN/$1/ports.env" k v
  [ -f "$f" ] && running_pid "$1" >/dev/null || return 0
  while IFS='=' read -r k v; do
    [[ $k =~ ^(PULSAR|CASSANDRA)_[A-Z_]*PORT$ && $v =~ ^[0-9]+$ ]] || continue
    if [ "${!k}" != "$v" ]; then log "$1 runs with $k=$v (recorded at start), not ${!k}"; fi
    printf -v "$k" '%s' "$v"
  done <"$f"
}

# ---------------------------------------------------------------- fetch
# 1st choice: the official binary tarball, if Maven Central carries it as an attached artifact
# (Pulsar 4.0.x: yes; Cassandra 5.0.x: no). 2nd choice: the runtime jar closure from a
# resolve-only pom.xml. Either way the result is $dir/lib/*.jar.
fetch_tarball() { # groupId artifactId version dir
  local g=$1 a=$2 v=$3 dir=$4 tgz
  "${MVN[@]}" "$DEP:get" -Dartifact="$g:$a:$v:tar.gz:bin" -Dtransitive=false \
    >>"$dir/fetch.log" 2>&1 || return 1
  tgz="$M2/${g//.//}/$a/$v/$a-$v-bin.tar.gz"
  [ -s "$tgz" ] || return 1
  tar -xzf "$tgz" -C "$dir" --strip-components=1
}

fetch_jars() { # pomdir version-property version dir [extra mvn args...]
  local pomdir=$1 prop=$2 v=$3 dir=$4; shift 4
  rm -rf "${dir:?}/lib"; mkdir -p "$dir/lib"
  "${MVN[@]}" -f "$pomdir/pom.xml" "$@" -D"$prop"="$v" "$DEP:copy-dependencies" \
    -DincludeScope=runtime -Dmdep.prependGroupId=true -DoutputDirectory="$dir/lib" \
    >>"$dir/fetch.log" 2>&1
}

fetch_done() { # name dir t0
  touch "$2/.ready"
  log "$1 fetched in $((SECONDS - $3)) s ($(cat "$2/.kind"), $(du -sh "$2/lib" | cut -f1) in lib/, $(find "$2/lib" -name '*.jar' | wc -l) jars) -> $2"
}

fetch_pulsar() {
  local dir="$IT_HOME/pulsar-$PULSAR_VERSION" t0=$SECONDS
  if [ -f "$dir/.ready" ]; then log "pulsar $PULSAR_VERSION already fetched ($dir)"; return 0; fi
  command -v mvn >/dev/null 2>&1 || die "mvn not found: install Maven (Debian: maven)"
  rm -rf "$dir"; mkdir -p "$dir"
  log "fetching pulsar $PULSAR_VERSION (log $dir/fetch.log)"
  if fetch_tarball org.apache.pulsar pulsar-server-distribution "$PULSAR_VERSION" "$dir"; then
    echo tarball >"$dir/.kind"
  elif fetch_jars "$HERE/pulsar" pulsar.version "$PULSAR_VERSION" "$dir"; then
    echo jars-dist >"$dir/.kind"
  elif fetch_jars "$HERE/pulsar" pulsar.version "$PULSAR_VERSION" "$dir" -P minimal; then
    echo jars-minimal >"$dir/.kind"
  else
    die_with_log "$dir/fetch.log" "pulsar $PULSAR_VERSION could not be fetched (tarball, dist and minimal all failed)"
  fi
  fetch_done pulsar "$dir" "$t0"
}

fetch_cassandra() {
  local dir="$IT_HOME/cassandra-$CASSANDRA_VERSION" t0=$SECONDS
  if [ -f "$dir/.ready" ]; then log "cassandra $CASSANDRA_VERSION already fetched ($dir)"; return 0; fi
  command -v mvn >/dev/null 2>&1 || die "mvn not found: install Maven (Debian: maven)"
  rm -rf "$dir"; mkdir -p "$dir"
  log "fetching cassandra $CASSANDRA_VERSION (log $dir/fetch.log)"
  if fetch_tarball org.apache.cassandra apache-cassandra "$CASSANDRA_VERSION" "$dir"; then
    echo tarball >"$dir/.kind"
  elif fetch_jars "$HERE/cassandra" cassandra.version "$CASSANDRA_VERSION" "$dir"; then
    echo jars >"$dir/.kind"
  else
    die_with_log "$dir/fetch.log" "cassandra $CASSANDRA_VERSION could not be fetched (tarball and jars failed)"
  fi
  fetch_done cassandra "$dir" "$t0"
}

# ---------------------------------------------------------------- start
render() { # template output VAR...: replace @VAR@ by the variable's value, refuse leftovers
  local src=$1 out=$2 v expr=(); shift 2
  for v in "$@"; do expr+=(-e "s#@$v@#${!v}#g"); done
  sed "${expr[@]}" "$src" >"$out"
  if grep -q '@[A-Z_]*@' "$out"; then die "unfilled placeholder in $out: $(grep -o '@[A-Z_]*@' "$out" | head -n 1)"; fi
}

prepare_start() { # name dir -> 0 when a fresh start is needed (run dir recreated)
  local name=$1 dir=$2 run="$RUN/$1" pid
  [ -f "$dir/.ready" ] || die "$name: not fetched ($dir); run: $0 fetch $name"
  if pid=$(running_pid "$name"); then
    load_recorded_ports "$name"
    log "$name: already running (pid $pid); leaving it as it is"
    return 1
  fi
  if [ -f "$run/$name.pid" ]; then
    log "$name: removing stale pid file $run/$name.pid"
    stop_group "$(cat "$run/$name.pid")"
  fi
  require_java17
  check_ports_free "$name"
  rm -rf "$run"; mkdir -p "$run/conf" "$run/data" "$run/logs" "$run/tmp"
  local v vars="PORT_VARS_${name}[@]"
  for v in "${!vars}"; do echo "$v=${!v}"; done >"$run/ports.env"
}

launch() { # name command...: own session + process group (pgid == pid), output to the run dir log
  local name=$1 run="$RUN/$1"; shift
  local pidf="$run/$name.pid" logf="$run/$name.log"
  command -v setsid >/dev/null 2>&1 || die "setsid not found (util-linux)"
  # bash writes its own PID, then execs the JVM in place: the PID file is the JVM's PID.
  # shellcheck disable=SC2016  # $$ and $@ are for the inner bash
  (cd "$run" && exec setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidf" "$@" \
     >"$logf" 2>&1 </dev/null) &
  for _ in $(seq 1 100); do [ -s "$pidf" ] && break; sleep 0.05; done
  [ -s "$pidf" ] || die_with_log "$logf" "$name: the JVM did not start"
  log "$name: starting, pid $(cat "$pidf"), log $logf"
}

start_pulsar() {
  local dir="$IT_HOME/pulsar-$PULSAR_VERSION" run="$RUN/pulsar"
  prepare_start pulsar "$dir" || return 0
  render "$HERE/pulsar/standalone.conf" "$run/conf/standalone.conf" PULSAR_PORT PULSAR_HTTP_PORT
  cp "$HERE/pulsar/log4j2.xml" "$run/conf/"
  local opts=(
    "-Xms512m" "-Xmx$PULSAR_HEAP" "-XX:MaxDirectMemorySize=$PULSAR_DIRECT_MEMORY" "-XX:+UseG1GC"
    "-XX:+ExitOnOutOfMemoryError" "-XX:+PerfDisableSharedMem" "-Djava.io.tmpdir=$run/tmp"
    "-Dlog4j2.configurationFile=$run/conf/log4j2.xml" "-Dlog4j.shutdownHookEnabled=false"
    "-Djute.maxbuffer=10485760" "-Djava.net.preferIPv4Stack=true"
    "-Dio.netty.tryReflectionSetAccessible=true"
    "-Dorg.apache.pulsar.shade.io.netty.tryReflectionSetAccessible=true"
    "-Dpulsar.allocator.exit_on_oom=true" "-Dio.netty.recycler.maxCapacityPerThread=4096"
    # the module flags of Pulsar 4.0.8's own bin/pulsar for Java 17
    --add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.util.zip=ALL-UNNAMED
    --add-opens java.management/sun.management=ALL-UNNAMED
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
    --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED
    --add-opens java.base/jdk.internal.platform=ALL-UNNAMED --add-opens java.base/sun.net=ALL-UNNAMED
    --enable-native-access=ALL-UNNAMED
    # BookKeeper must find Pulsar's metadata-store drivers (rocksdb metadata, no ZooKeeper)
    "-Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver"
    "-Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver"
  )
  # Relative defaults (data/...) would land in the CWD, so it runs inside $run with absolutes.
  launch pulsar "$JAVA" "${opts[@]}" -cp "$dir/lib/*" org.apache.pulsar.PulsarStandaloneStarter \
    --config "$run/conf/standalone.conf" --no-functions-worker --no-stream-storage \
    --metadata-dir "$run/data/metadata" --bookkeeper-dir "$run/data/bookkeeper" \
    --bookkeeper-port "$PULSAR_BOOKIE_PORT" --advertised-address 127.0.0.1
}

# JPMS flags: conf/jvm17-server.options of Cassandra 5.0 plus the two extra flags that
# cassandra-unit (embedded cassandra-all 5.0.8 on JDK 17) found necessary.
CASSANDRA_JPMS=(
  --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
  --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
  --add-exports java.management/com.sun.jmx.remote.security=ALL-UNNAMED
  --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
  --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
  --add-exports java.sql/java.sql=ALL-UNNAMED
  --add-exports java.base/java.lang.ref=ALL-UNNAMED
  --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
  --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
  --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
  --add-opens java.base/java.lang.module=ALL-UNNAMED
  --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
  --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
  --add-opens java.base/jdk.internal.math=ALL-UNNAMED
  --add-opens java.base/jdk.internal.module=ALL-UNNAMED
  --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
  --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
  --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens java.base/java.io=ALL-UNNAMED
  --add-opens java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
  --add-opens java.base/java.lang=ALL-UNNAMED
  --add-opens java.base/java.util=ALL-UNNAMED
  --add-opens java.base/java.nio=ALL-UNNAMED
)

cassandra_jvm_options() { # heap run jamm: set opts to the JVM options of every Cassandra this script runs
  local heap=$1 run=$2 jamm=$3
  opts=(
    "-Xms$heap" "-Xmx$heap" "-XX:+UseG1GC" "-XX:+ParallelRefProcEnabled"
    "-XX:MaxTenuringThreshold=1" "-XX:G1HeapRegionSize=16m" "-XX:MaxGCPauseMillis=300"
    "-XX:+ExitOnOutOfMemoryError" "-XX:+PerfDisableSharedMem"
    "-javaagent:$jamm" "-Djdk.attach.allowAttachSelf=true"
    "${CASSANDRA_JPMS[@]}"
    "-Dio.netty.tryReflectionSetAccessible=true"
    "-Dio.netty.allocator.useCacheForAllThreads=true" "-Dio.netty.allocator.maxOrder=11"
    "-Djava.net.preferIPv4Stack=true" "-Djava.io.tmpdir=$run/tmp"
    "-Dcassandra-foreground=yes"
    "-Dcassandra.config=file://$run/conf/cassandra.yaml"
    "-Dcassandra.storagedir=$run/data" "-Dcassandra.logdir=$run/logs"
    "-Dlogback.configurationFile=$run/conf/logback.xml"
  )
}

start_cassandra() {
  local dir="$IT_HOME/cassandra-$CASSANDRA_VERSION" run="$RUN/cassandra" jamm
  prepare_start cassandra "$dir" || return 0
  jamm=$(find "$dir/lib" -maxdepth 1 -name '*jamm*.jar' | head -n 1)
  [ -n "$jamm" ] || die "cassandra: no jamm jar in $dir/lib (a cassandra-all dependency); delete $dir and fetch again"
  # shellcheck disable=SC2034  # DATA is read by render through ${!v}
  local DATA="$run/data"
  render "$HERE/cassandra/cassandra.yaml" "$run/conf/cassandra.yaml" \
    DATA CASSANDRA_PORT CASSANDRA_STORAGE_PORT CASSANDRA_SSL_STORAGE_PORT
  cp "$HERE/cassandra/logback.xml" "$run/conf/"
  local opts
  cassandra_jvm_options "$CASSANDRA_HEAP" "$run" "$jamm"
  opts+=(
    # single throwaway node: skip the gossip-settle wait, no fsync, no superuser delay
    "-Dcassandra.skip_wait_for_gossip_to_settle=0" "-Dcassandra.unsafesystem=true"
    "-Dcassandra.superuser_setup_delay_ms=0"
  )
  if [ -d "$dir/lib/sigar-bin" ]; then opts+=("-Djava.library.path=$dir/lib/sigar-bin"); fi
  launch cassandra "$JAVA" "${opts[@]}" -cp "$run/conf:$dir/lib/*" \
    org.apache.cassandra.service.CassandraDaemon
}

# ---------------------------------------------------------------- wait
require_alive() { # name: fail with the log tail when the JVM is gone
  local run="$RUN/$1"
  [ -f "$run/$1.pid" ] || die "$1: not started (no $run/$1.pid); run: $0 start $1"
  running_pid "$1" >/dev/null ||
    die_with_log "$run/$1.log" "$1: the JVM (pid $(cat "$run/$1.pid")) has exited"
}

http_get() { # url [timeout s] -> body on stdout
  local t=${2:-5}
  if command -v curl >/dev/null 2>&1; then curl -sf -m "$t" "$1"
  else python3 -c 'import sys,urllib.request as u;sys.stdout.write(u.urlopen(sys.argv[1],timeout=float(sys.argv[2])).read().decode())' "$1" "$t"
  fi
}

http_put_status() { # url json -> HTTP status code on stdout (000 when unreachable)
  if command -v curl >/dev/null 2>&1; then
    curl -s -o /dev/null -w '%{http_code}' -m 10 -X PUT -H 'Content-Type: application/json' --data "$2" "$1" || true
  else
    python3 - "$1" "$2" <<'PY'
import sys, urllib.error, urllib.request as u
req = u.Request(sys.argv[1], data=sys.argv[2].encode(), method="PUT", headers={"Content-Type": "application/json"})
try:
    print(u.urlopen(req, timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print("000")
PY
  fi
}

ensure_tg_namespaces() { # admin base url: tenant tg + its namespaces; 204 created, 409 exists
  local base=$1 code ns
  code=$(http_put_status "$base/admin/v2/tenants/tg" '{"allowedClusters":["standalone"],"adminRoles":[]}')
  case $code in 200|204|409) ;; *) WAIT_DETAIL="PUT tenants/tg -> HTTP $code"; return 1 ;; esac
  for ns in "${TG_NAMESPACES[@]}"; do
    code=$(http_put_status "$base/admin/v2/namespaces/tg/$ns" '{}')
    case $code in 200|204|409) ;; *) WAIT_DETAIL="PUT namespaces/tg/$ns -> HTTP $code"; return 1 ;; esac
  done
}

wait_pulsar() {
  load_recorded_ports pulsar
  local run="$RUN/pulsar" t0=$SECONDS rc stage=health out
  local base="http://127.0.0.1:$PULSAR_HTTP_PORT" url="pulsar://127.0.0.1:$PULSAR_PORT"
  WAIT_DETAIL=""
  while :; do
    require_alive pulsar
    (( SECONDS - t0 < PULSAR_START_TIMEOUT )) || die_with_log "$run/pulsar.log" \
      "pulsar: not ready after ${PULSAR_START_TIMEOUT}s (stuck at: $stage${WAIT_DETAIL:+; $WAIT_DETAIL})"
    case $stage in
      health) # broker up and a broker+bookie round trip on its heartbeat topic; public/default made.
        # The first health check creates topic, producer and reader: on a busy 2-core machine it can
        # take well over 5 s, and abandoned checks only pile up in the broker, so allow 30 s.
        if [ "$(http_get "$base/admin/v2/brokers/health" 30 2>/dev/null)" = ok ] &&
           http_get "$base/admin/v2/namespaces/public" 2>/dev/null | grep -q 'public/default'; then
          stage=namespaces; continue
        fi ;;
      namespaces)
        if ensure_tg_namespaces "$base"; then stage=roundtrip; continue; fi ;;
      roundtrip) # a real produce/consume from Python on tg/flow (persistent) and tg/request (non-persistent)
        rc=0; out=$("$PYTHON" "$HERE/probes/pulsar_roundtrip.py" "$url" 2>&1) || rc=$?
        case $rc in
          0) break ;;
          2) log "pulsar: pulsar-client is not importable by $PYTHON; Python round trip skipped (set PYTHON to a venv python)"
             break ;;
          *) WAIT_DETAIL=$(printf '%s' "$out" | tail -n 1) ;;
        esac ;;
    esac
    sleep 2
  done
  log "pulsar ready in $((SECONDS - t0)) s ($url, $base; tenant tg: ${TG_NAMESPACES[*]})"
}

wait_cassandra() {
  load_recorded_ports cassandra
  local run="$RUN/cassandra" t0=$SECONDS rc out
  WAIT_DETAIL="CQL port $CASSANDRA_PORT closed"
  while :; do
    require_alive cassandra
    (( SECONDS - t0 < CASSANDRA_START_TIMEOUT )) || die_with_log "$run/cassandra.log" \
      "cassandra: not ready after ${CASSANDRA_START_TIMEOUT}s ($WAIT_DETAIL)"
    if (exec 3<>"/dev/tcp/127.0.0.1/$CASSANDRA_PORT") 2>/dev/null; then
      rc=0; out=$("$PYTHON" "$HERE/probes/cassandra_query.py" 127.0.0.1 "$CASSANDRA_PORT" 2>&1) || rc=$?
      if [ "$rc" = 0 ]; then
        log "cassandra ready in $((SECONDS - t0)) s (127.0.0.1:$CASSANDRA_PORT, release $out)"; return 0
      elif [ "$rc" = 2 ]; then
        if grep -Eq 'Startup complete|listening for CQL clients' "$run/cassandra.log"; then
          log "cassandra ready in $((SECONDS - t0)) s (127.0.0.1:$CASSANDRA_PORT; cassandra-driver not importable by $PYTHON, judged by the log)"
          return 0
        fi
        WAIT_DETAIL="no driver; waiting for 'Startup complete' in the log"
      else
        WAIT_DETAIL=$(printf '%s' "$out" | tail -n 1)
      fi
    fi
    sleep 2
  done
}

# ---------------------------------------------------------------- stop / status
stop_group() { # pgid: TERM then KILL what is left in the process group of a JVM that has exited
  local g=$1
  [[ $g =~ ^[0-9]+$ ]] || return 0
  # Linux never hands out a PID that is still some group's id, so while the leader is gone every
  # member of group $g descends from our JVM. A live leader here would be a recycled PID: not ours.
  proc_gone "$g" || return 0
  [ -n "$(group_members "$g")" ] || return 0
  log "killing leftover processes of group $g: $(group_members "$g" | tr '\n' ' ')"
  kill -TERM -- "-$g" 2>/dev/null || true
  for _ in $(seq 1 10); do [ -n "$(group_members "$g")" ] || return 0; sleep 0.5; done
  kill -KILL -- "-$g" 2>/dev/null || true
  for _ in $(seq 1 10); do [ -n "$(group_members "$g")" ] || return 0; sleep 0.5; done
  die "processes of group $g survive KILL: $(group_members "$g" | tr '\n' ' ')"
}

stop_server() { # name: TERM (shutdown hooks close broker/bookie, drain Cassandra), KILL on timeout
  local name=$1 run="$RUN/$1" pid t0=$SECONDS
  local pidf="$run/$name.pid"
  if [ ! -f "$pidf" ]; then log "$name: not running"; return 0; fi
  pid=$(cat "$pidf")
  if is_ours "$pid" "$run"; then
    kill -TERM "$pid" 2>/dev/null || true
    while is_ours "$pid" "$run" && (( SECONDS - t0 < STOP_TIMEOUT )); do sleep 0.5; done
    if is_ours "$pid" "$run"; then
      log "$name: pid $pid still alive after ${STOP_TIMEOUT}s; sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 1 20); do is_ours "$pid" "$run" || break; sleep 0.5; done
      ! is_ours "$pid" "$run" || die "$name: pid $pid survives KILL"
    fi
    # the cmdline empties early in exit; wait until the process is really gone (ports released)
    for _ in $(seq 1 40); do proc_gone "$pid" && break; sleep 0.25; done
  else
    log "$name: pid $pid is not running (stale pid file)"
  fi
  stop_group "$pid"   # setsid made the JVM a group leader: pgid == pid
  rm -f "$pidf"
  if [ "${IT_KEEP_DATA:-0}" != 1 ]; then rm -rf "${run:?}/data" "${run:?}/tmp"; fi
  log "$name: stopped (pid $pid) in $((SECONDS - t0)) s; log kept at $run/$name.log"
}

status_one() { # name -> one line; return 0 when running
  local name=$1 run="$RUN/$1" pid rss up ports v vars="PORT_VARS_$1[@]"
  load_recorded_ports "$name"
  if pid=$(running_pid "$name"); then
    rss=$(awk '/^VmRSS:/ { printf "%d MB", $2 / 1024 }' "/proc/$pid/status")
    up=$(ps -o etime= -p "$pid" | tr -d ' ')
    ports=$(ss -Hltnp 2>/dev/null | grep -F "pid=$pid," | awk '{ print $4 }' | sort -u | tr '\n' ' ' || true)
    printf '%-10s running  pid %s  rss %s  up %s  listening %s\n' "$name" "$pid" "$rss" "$up" "${ports:-?}"
    return 0
  elif [ -f "$run/$name.pid" ]; then
    printf '%-10s dead     (stale pid file %s; log %s)\n' "$name" "$run/$name.pid" "$run/$name.log"
  else
    printf '%-10s stopped' "$name"
    for v in "${!vars}"; do
      [ -z "$(port_listener "${!v}")" ] || printf '  (port %s busy: another process)' "${!v}"
    done
    printf '\n'
  fi
  return 3
}

print_env() {
  load_recorded_ports pulsar; load_recorded_ports cassandra
  printf 'export PULSAR_URL=pulsar://127.0.0.1:%s PULSAR_ADMIN_URL=http://127.0.0.1:%s CASSANDRA_HOST=127.0.0.1 CASSANDRA_PORT=%s\n' \
    "$PULSAR_PORT" "$PULSAR_HTTP_PORT" "$CASSANDRA_PORT"
}

# ---------------------------------------------------------------- the test cluster
# shellcheck source=servers/cassandra-cluster.sh
. "$HERE/cassandra-cluster.sh"

# ---------------------------------------------------------------- main
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 64; }
cmd=${1:-}; what=${2:-all}
if [ "$cmd" = nodetool ]; then shift 2 || usage; nodetool "$what" "$@"; exit; fi
if [ "$what" = cassandra-cluster ]; then
  check_cluster_values
  case "$cmd" in
    fetch) fetch_cassandra ;;
    start) start_cluster ;;
    wait) wait_cluster ;;
    stop) stop_cluster ;;
    status) status_cluster; exit ;;
    env) print_cluster_env ;;
    *) usage ;;
  esac
  exit 0
fi
case "$what" in pulsar|cassandra) targets=("$what") ;; all) targets=(pulsar cassandra) ;;
  *) log "unknown target: $what (pulsar, cassandra, all or cassandra-cluster)"; usage ;; esac
check_port_values
case "$cmd" in
  fetch) for t in "${targets[@]}"; do "fetch_$t"; done ;;
  start) for t in "${targets[@]}"; do "start_$t"; done ;;
  wait)  for t in "${targets[@]}"; do "wait_$t"; done ;;
  stop)  for t in "${targets[@]}"; do stop_server "$t"; done ;;
  status) rc=0; for t in "${targets[@]}"; do status_one "$t" || rc=3; done; exit "$rc" ;;
  env) print_env ;;
  *) usage ;;
esac
