"""Python's cyclic garbage collector paused across a bulk write.

A bulk insert builds tens of thousands of short-lived tuples (canonical keys, id rows), and
every 700 of them start a collection that walks all young objects, among them the batch of
``Triple`` objects the caller has just built, which slows a bulk load measurably
(``bench/README.md``, "The collector paused during inserts").  An
insert's objects form no reference cycles (reference counting frees them as before); what
the pause delays is only the collection of cycles other code makes meanwhile, and of a
failed insert's traceback, until the last concurrent bulk write ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]

_lock = threading.Lock()
_active = 0          # bulk writes inside gc_paused() right now, in any thread
_resume = False      # whether the collector was enabled when the first of them began


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the body (a ``with`` block, or a function decorated ``@gc_paused()``) with the cyclic
    collector disabled.

    Nested and concurrent uses share one pause: the collector is re-enabled when the last one
    ends, and only if it was enabled before the first began.
    """
    global _active, _resume
    with _lock:
        if _active == 0:
            _resume = gc.isenabled()
            gc.disable()
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _resume:
                gc.enable()
