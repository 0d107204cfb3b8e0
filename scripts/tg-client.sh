#!/usr/bin/env bash
# scripts/tg-client.sh - TrustGraph 2.11.1's published client (trustgraph-base + trustgraph-cli from
# PyPI) in a venv of its own, cached outside the repository: its tg-* commands share names with
# this project's (tg-invoke-graph-rag, tg-show-explain-trace, ...), so the two cannot share a venv.
# The packages are sdists (pure Python): pip builds them; their dependencies install as wheels.
# The tests in tests/e2e/test_tg_client.py run these commands against the gateway.
#
#   bash scripts/tg-client.sh ensure    # create the venv unless a complete one exists; print its bin dir
#   bash scripts/tg-client.sh path      # print the bin dir (exit 1 when the venv is not complete)
#   bash scripts/tg-client.sh remove    # delete the venv
#
# Environment: TG_CLIENT_HOME (default ~/.cache/tg-clients/trustgraph-2.11.1), TG_CLIENT_PYTHON
# (the interpreter that creates the venv, default python3).
set -euo pipefail

VERSION=2.11.1
DIR=${TG_CLIENT_HOME:-$HOME/.cache/tg-clients/trustgraph-$VERSION}
MARK="$DIR/.complete"

complete() { [ -f "$MARK" ] && "$DIR/bin/python" -c 'import trustgraph.api' 2>/dev/null; }

case "${1:-ensure}" in
  ensure)
    if ! complete; then
      rm -rf "$DIR"   # a half-built venv (interrupted install) is rebuilt whole
      mkdir -p "$(dirname "$DIR")"
      "${TG_CLIENT_PYTHON:-python3}" -m venv "$DIR"
      "$DIR/bin/pip" install -q --disable-pip-version-check "trustgraph-base==$VERSION" "trustgraph-cli==$VERSION"
      "$DIR/bin/python" -c 'import trustgraph.api' && touch "$MARK"
    fi
    echo "$DIR/bin"
    ;;
  path)
    complete || { echo "no complete TrustGraph $VERSION client venv at $DIR (run: $0 ensure)" >&2; exit 1; }
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
