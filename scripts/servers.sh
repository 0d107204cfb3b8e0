#!/usr/bin/env bash
# it-servers.sh - fetch, start, wait for and stop a REAL Apache Pulsar standalone broker and a
# REAL Apache Cassandra node on loopback, from Maven Central artifacts only (no Docker).
#
#   bash it-servers.sh fetch  {pulsar|cassandra|all}   # download once into $IT_HOME (cached)
#   bash it-servers.sh start  {pulsar|cassandra|all}   # background JVMs, fresh data dirs
#   bash it-servers.sh wait   {pulsar|cassandra|all}   # block until usable (or fail + log tail)
#   bash it-servers.sh stop   {pulsar|cassandra|all}   # SIGTERM by PID, SIGKILL after 30 s
#   bash it-servers.sh status
#
# Files expected beside this script: pulsar/{pom.xml,standalone.conf,log4j2.xml}
#                                    cassandra/{pom.xml,cassandra.yaml,logback.xml}
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/servers" && pwd)
IT_HOME=${IT_HOME:-$HOME/.cache/it-servers}
PULSAR_VERSION=${PULSAR_VERSION:-4.0.8}
CASSANDRA_VERSION=${CASSANDRA_VERSION:-5.0.8}
# Cassandra 5.0 runs on JDK 11/17 only; never let a newer default JDK (e.g. Temurin 25) in.
JAVA_HOME_17=${JAVA_HOME_17:-/usr/lib/jvm/java-17-openjdk-amd64}
JAVA="$JAVA_HOME_17/bin/java"
M2=${MAVEN_REPO:-$HOME/.m2/repository}
MVN=(mvn -B -Dstyle.color=never -Dmaven.repo.local="$M2")
# fully qualified: a bare "dependency:" prefix would pick Maven 3.8's default plugin 2.8
DEP=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
PYTHON=${PYTHON:-python3}
PULSAR_HEAP=${PULSAR_HEAP:-1g}
CASSANDRA_HEAP=${CASSANDRA_HEAP:-1g}
PULSAR_START_TIMEOUT=${PULSAR_START_TIMEOUT:-240}
CASSANDRA_START_TIMEOUT=${CASSANDRA_START_TIMEOUT:-240}
RUN="$IT_HOME/run"

log() { printf '[it-servers] %s\n' "$*" >&2; }

# ---------------------------------------------------------------- fetch
# 1st choice: the official binary tarball, if Maven Central carries it as an attached artifact
# (Cassandra has published apache-cassandra-X-bin.tar.gz there for years; Pulsar's
# pulsar-server-distribution-X-bin.tar.gz is less certain). 2nd choice: the runtime jar
# closure from a resolve-only pom.xml. Either way the result is $dir/lib/*.jar.
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

fetch_pulsar() {
  local dir="$IT_HOME/pulsar-$PULSAR_VERSION"
  if [ -f "$dir/.ready" ]; then log "pulsar $PULSAR_VERSION already fetched"; return 0; fi
  rm -rf "$dir"; mkdir -p "$dir"
  if fetch_tarball org.apache.pulsar pulsar-server-distribution "$PULSAR_VERSION" "$dir"; then
    echo tarball >"$dir/.kind"
  elif fetch_jars "$HERE/pulsar" pulsar.version "$PULSAR_VERSION" "$dir"; then
    echo jars-dist >"$dir/.kind"
  elif fetch_jars "$HERE/pulsar" pulsar.version "$PULSAR_VERSION" "$dir" -P minimal; then
    echo jars-minimal >"$dir/.kind"
  else
    log "pulsar fetch failed; last lines of $dir/fetch.log:"; tail -n 40 "$dir/fetch.log" >&2
    return 1
  fi
  touch "$dir/.ready"
  log "pulsar $PULSAR_VERSION fetched ($(cat "$dir/.kind"), $(du -sh "$dir/lib" | cut -f1), $(find "$dir/lib" -name '*.jar' | wc -l) jars)"
}

fetch_cassandra() {
  local dir="$IT_HOME/cassandra-$CASSANDRA_VERSION"
  if [ -f "$dir/.ready" ]; then log "cassandra $CASSANDRA_VERSION already fetched"; return 0; fi
  rm -rf "$dir"; mkdir -p "$dir"
  if fetch_tarball org.apache.cassandra apache-cassandra "$CASSANDRA_VERSION" "$dir"; then
    echo tarball >"$dir/.kind"
  elif fetch_jars "$HERE/cassandra" cassandra.version "$CASSANDRA_VERSION" "$dir"; then
    echo jars >"$dir/.kind"
  else
    log "cassandra fetch failed; last lines of $dir/fetch.log:"; tail -n 40 "$dir/fetch.log" >&2
    return 1
  fi
  touch "$dir/.ready"
  log "cassandra $CASSANDRA_VERSION fetched ($(cat "$dir/.kind"), $(du -sh "$dir/lib" | cut -f1), $(find "$dir/lib" -name '*.jar' | wc -l) jars)"
}

# ---------------------------------------------------------------- start
start_pulsar() {
  local dir="$IT_HOME/pulsar-$PULSAR_VERSION" run="$RUN/pulsar"
  [ -f "$dir/.ready" ] || { log "run 'fetch pulsar' first"; return 1; }
  stop_pid "$run/pulsar.pid"
  rm -rf "$run"; mkdir -p "$run/conf" "$run/data" "$run/tmp"
  cp "$HERE/pulsar/standalone.conf" "$HERE/pulsar/log4j2.xml" "$run/conf/"
  local opts=(
    "-Xms512m" "-Xmx$PULSAR_HEAP" "-XX:MaxDirectMemorySize=1g" "-XX:+UseG1GC"
    "-XX:+ExitOnOutOfMemoryError" "-Djava.io.tmpdir=$run/tmp"
    "-Dlog4j2.configurationFile=$run/conf/log4j2.xml" "-Dlog4j.shutdownHookEnabled=false"
    "-Djute.maxbuffer=10485760" "-Djava.net.preferIPv4Stack=true"
    "-Dio.netty.tryReflectionSetAccessible=true"
    # the --add-opens set of Pulsar's own bin/pulsar (Java 17)
    --add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.util.zip=ALL-UNNAMED
    --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/jdk.internal.misc=ALL-UNNAMED
    --add-opens java.base/sun.net=ALL-UNNAMED --add-opens java.management/sun.management=ALL-UNNAMED
    # BookKeeper must find Pulsar's metadata-store drivers (rocksdb metadata, no ZooKeeper)
    "-Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver"
    "-Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver"
  )
  # Relative defaults (data/...) would land in the CWD, so run inside $run and pass absolutes.
  (cd "$run" && exec nohup "$JAVA" "${opts[@]}" -cp "$dir/lib/*" \
      org.apache.pulsar.PulsarStandaloneStarter \
      --config "$run/conf/standalone.conf" --no-functions-worker --no-stream-storage \
      --metadata-dir "$run/data/metadata" --bookkeeper-dir "$run/data/bookkeeper" \
      --advertised-address 127.0.0.1 \
      >"$run/pulsar.log" 2>&1 </dev/null) &
  echo $! >"$run/pulsar.pid"
  log "pulsar starting, pid $(cat "$run/pulsar.pid"), log $run/pulsar.log"
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

start_cassandra() {
  local dir="$IT_HOME/cassandra-$CASSANDRA_VERSION" run="$RUN/cassandra" jamm
  [ -f "$dir/.ready" ] || { log "run 'fetch cassandra' first"; return 1; }
  stop_pid "$run/cassandra.pid"
  rm -rf "$run"; mkdir -p "$run/conf" "$run/data" "$run/logs" "$run/tmp"
  sed "s#@DATA@#$run/data#g" "$HERE/cassandra/cassandra.yaml" >"$run/conf/cassandra.yaml"
  cp "$HERE/cassandra/logback.xml" "$run/conf/"
  jamm=$(find "$dir/lib" -maxdepth 1 -name '*jamm*.jar' | head -n 1)
  [ -n "$jamm" ] || { log "no jamm jar in $dir/lib (it is a cassandra-all dependency)"; return 1; }
  local opts=(
    "-Xms$CASSANDRA_HEAP" "-Xmx$CASSANDRA_HEAP" "-XX:+UseG1GC" "-XX:+ParallelRefProcEnabled"
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
    # single throwaway node: skip the gossip-settle wait, no fsync, no superuser delay
    "-Dcassandra.skip_wait_for_gossip_to_settle=0" "-Dcassandra.unsafesystem=true"
    "-Dcassandra.superuser_setup_delay_ms=0"
  )
  if [ -d "$dir/lib/sigar-bin" ]; then opts+=("-Djava.library.path=$dir/lib/sigar-bin"); fi
  (cd "$run" && exec nohup "$JAVA" "${opts[@]}" -cp "$run/conf:$dir/lib/*" \
      org.apache.cassandra.service.CassandraDaemon \
      >"$run/cassandra.log" 2>&1 </dev/null) &
  echo $! >"$run/cassandra.pid"
  log "cassandra starting, pid $(cat "$run/cassandra.pid"), log $run/cassandra.log"
}

# ---------------------------------------------------------------- wait
alive_or_die() { # pidfile logfile name
  local pid; pid=$(cat "$1" 2>/dev/null || true)
  if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
    log "$3 is not running; last lines of $2:"; tail -n 80 "$2" >&2 || true
    return 1
  fi
}

http_get() { # url -> body on stdout; curl if present, else python
  if command -v curl >/dev/null 2>&1; then curl -sf -m 5 "$1"
  else "$PYTHON" -c 'import sys,urllib.request as u;print(u.urlopen(sys.argv[1],timeout=5).read().decode())' "$1"
  fi
}

wait_pulsar() {
  local run="$RUN/pulsar" t0=$SECONDS
  while (( SECONDS - t0 < PULSAR_START_TIMEOUT )); do
    alive_or_die "$run/pulsar.pid" "$run/pulsar.log" pulsar || return 1
    # health = broker + bookie round trip; namespaces = PulsarStandalone created public/default
    if http_get http://127.0.0.1:8080/admin/v2/brokers/health 2>/dev/null | grep -q ok &&
       http_get http://127.0.0.1:8080/admin/v2/namespaces/public 2>/dev/null |
         grep -q 'public/default'; then
      log "pulsar ready in $((SECONDS - t0)) s (pulsar://127.0.0.1:6650, http://127.0.0.1:8080)"
      return 0
    fi
    sleep 2
  done
  log "pulsar not ready after ${PULSAR_START_TIMEOUT}s; last lines of $run/pulsar.log:"
  tail -n 80 "$run/pulsar.log" >&2
  return 1
}

cql_probe() { # exit 0 when a real CQL query succeeds; 2 when the driver is not importable
  "$PYTHON" - <<'PY'
import sys
try:
    from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
    from cassandra.policies import RoundRobinPolicy
except Exception:
    sys.exit(2)
prof = ExecutionProfile(load_balancing_policy=RoundRobinPolicy(), request_timeout=10)
c = Cluster(["127.0.0.1"], port=9042, connect_timeout=5,
            execution_profiles={EXEC_PROFILE_DEFAULT: prof})
try:
    row = c.connect().execute("SELECT release_version FROM system.local").one()
    print(row.release_version)
except Exception:
    sys.exit(1)
finally:
    c.shutdown()
PY
}

wait_cassandra() {
  local run="$RUN/cassandra" t0=$SECONDS rc
  while (( SECONDS - t0 < CASSANDRA_START_TIMEOUT )); do
    alive_or_die "$run/cassandra.pid" "$run/cassandra.log" cassandra || return 1
    if (exec 3<>/dev/tcp/127.0.0.1/9042) 2>/dev/null; then
      rc=0; cql_probe >/dev/null 2>&1 || rc=$?
      if [ "$rc" = 0 ] || { [ "$rc" = 2 ] && grep -Eq 'Startup complete|listening for CQL clients' "$run/cassandra.log"; }; then
        log "cassandra ready in $((SECONDS - t0)) s (127.0.0.1:9042)"
        return 0
      fi
    fi
    sleep 2
  done
  log "cassandra not ready after ${CASSANDRA_START_TIMEOUT}s; last lines of $run/cassandra.log:"
  tail -n 80 "$run/cassandra.log" >&2
  return 1
}

# ---------------------------------------------------------------- stop / status
stop_pid() { # pidfile: TERM (shutdown hooks drain/close), KILL after 30 s
  local pidf=$1 pid
  [ -f "$pidf" ] || return 0
  pid=$(cat "$pidf")
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    log "stopped pid $pid"
  fi
  rm -f "$pidf"
}

status() {
  local f
  for f in "$RUN"/*/*.pid; do
    [ -f "$f" ] || continue
    if kill -0 "$(cat "$f")" 2>/dev/null; then echo "$(basename "$f" .pid): running pid $(cat "$f")"
    else echo "$(basename "$f" .pid): dead (stale $f)"; fi
  done
  ss -ltn 2>/dev/null | grep -E ':(6650|8080|3181|9042|7000) ' || true
}

# ---------------------------------------------------------------- main
cmd=${1:-}; what=${2:-all}
case "$what" in pulsar|cassandra) targets=("$what") ;; all) targets=(pulsar cassandra) ;;
  *) echo "unknown target: $what" >&2; exit 64 ;; esac
case "$cmd" in
  fetch) for t in "${targets[@]}"; do "fetch_$t"; done ;;
  start) for t in "${targets[@]}"; do "start_$t"; done ;;
  wait)  for t in "${targets[@]}"; do "wait_$t"; done ;;
  stop)  for t in "${targets[@]}"; do stop_pid "$RUN/$t/$t.pid"; done ;;
  status) status ;;
  *) sed -n '2,12p' "$0"; exit 64 ;;
esac
