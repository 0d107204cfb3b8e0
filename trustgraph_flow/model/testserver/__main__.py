"""Run the OpenAI-compatible test server: ``python -m trustgraph_flow.model.testserver --port 0``.

Prints the base URL (``http://127.0.0.1:<port>/v1``) on the first line of stdout, then
serves until interrupted (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading

from .server import MODES, start_server


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, start the server, print its base URL and wait.

    :param argv: command-line arguments (default: ``sys.argv[1:]``).
    :returns: process exit status.
    """
    parser = argparse.ArgumentParser(
        prog="python -m trustgraph_flow.model.testserver",
        description="Local OpenAI-compatible server (binds 127.0.0.1) backed by the extractive backend "
                    "or by scripted replies.",
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay added to every answer")
    parser.add_argument("--mode", choices=MODES, default="extractive")
    parser.add_argument("--script", help="JSON file with the scripted replies (a list, or an object keyed by "
                                         "template id); required with --mode scripted")
    parser.add_argument("--model", help="model name to report")
    parser.add_argument("--api-key", help="require this bearer token")
    parser.add_argument("--no-stream-usage", action="store_true",
                        help="send streamed answers without usage even when asked (as llama.cpp's server does)")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be within 0..65535, got {args.port}")
    if args.latency_ms < 0:
        parser.error("--latency-ms must be >= 0")
    script = None
    if args.script:
        try:
            with open(args.script, encoding="utf-8") as handle:
                script = json.load(handle)
        except (OSError, ValueError) as exc:
            parser.error(f"cannot read --script {args.script}: {exc}")
        if not isinstance(script, (list, dict)):
            parser.error("--script must hold a JSON list or object")
    try:
        server = start_server(args.mode, script, args.latency_ms, args.port, model=args.model,
                              api_key=args.api_key)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    server.omit_stream_usage(args.no_stream_usage)
    print(server.base_url, flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
