#!/usr/bin/env bash
# scripts/phoenix.sh - Arize Phoenix (PyPI: arize-phoenix), the OpenTelemetry receiver the tracing tests
# export to and read spans back from (tests/service/test_otel_tracing.py, docs/observability.md), in a venv
# of its own cached outside the repository: its many pinned dependencies stay out of the project's venv.
# Wheels only; nothing is compiled.
#
#   bash scripts/phoenix.sh ensure    # create the venv unless a complete one exists; print its bin dir
#   bash scripts/phoenix.sh path      # print the bin dir (exit 1 when the venv is not complete)
#   bash scripts/phoenix.sh remove    # delete the venv
#
# Environment: TG_PHOENIX_HOME (default ~/.cache/tg-phoenix/arize-phoenix-<version>), TG_PHOENIX_PYTHON
# (the interpreter that creates the venv, default python3).
set -euo pipefail

VERSION=20.26.1
DIR=${TG_PHOENIX_HOME:-$HOME/.cache/tg-phoenix/arize-phoenix-$VERSION}
MARK="$DIR/.complete"

complete() { [ -f "$MARK" ] && [ -x "$DIR/bin/phoenix" ]; }

case "${1:-ensure}" in
  ensure)
    if ! complete; then
      rm -rf "$DIR"   # a half-built venv (interrupted install) is rebuilt whole
      mkdir -p "$(dirname "$DIR")"
      "${TG_PHOENIX_PYTHON:-python3}" -m venv "$DIR"
      "$DIR/bin/pip" install -q --disable-pip-version-check --only-binary=:all: "arize-phoenix==$VERSION" >&2
      "$DIR/bin/phoenix" --help >/dev/null && touch "$MARK"
    fi
    echo "$DIR/bin"
    ;;
  path)
    complete || { echo "no complete Phoenix $VERSION venv at $DIR (run: $0 ensure)" >&2; exit 1; }
    echo "$DIR/bin"
    ;;
  remove)
    rm -rf "$DIR"
    ;;
  *)
    echo "usage: $0 ensure|path|remove" >&2
    exit 2
    ;;
esac
