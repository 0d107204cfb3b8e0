"""End the process at once, output flushed, skipping the interpreter's shutdown.

After a Pulsar client (or other native code, such as the ONNX embedder) has run, native
threads can be left behind and the interpreter's shutdown can then abort ("terminate called
without an active exception", exit -6 instead of the intended code; apache/pulsar-client-python#256).
Service scripts and the CLI both leave through here in that case.
"""

from __future__ import annotations

import logging
import os
import sys


def hard_exit(code: int) -> None:
    """Flush logging, stdout and stderr, then ``os._exit(code)``."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed pipe: nothing more to say
            pass
    os._exit(code)
