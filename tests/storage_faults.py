"""Deliberately injected storage faults: a real small file system that fills up, a read-only one,
and SQLite files that may not grow.

* :func:`tmpfs` mounts a tmpfs of a few MiB (needs root); where this machine refuses the mount
  the test is skipped, except under ``CI=true``, where it fails.
* :func:`fill` fills a file system to the last byte with a filler file (deleting it frees the space).
* :func:`sqlite_full` (in this process) and :data:`SQLITE_FULL_SITECUSTOMIZE` (in a subprocess, as
  its ``sitecustomize`` module on ``PYTHONPATH``) set ``PRAGMA max_page_count`` on every SQLite
  connection to a file under a directory: SQLite then reports "database or disk is full" for real
  as soon as such a file needs one more page.  Works on every machine.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

#: Environment variable naming the directory whose SQLite files may not grow (subprocess fault).
FULL_ENV = "TG_TEST_SQLITE_FULL_UNDER"

SQLITE_FULL_SITECUSTOMIZE = f'''"""Injected fault: SQLite files under ${FULL_ENV} may not grow (max_page_count)."""
import os
import sqlite3

_connect = sqlite3.connect


def _limited(database, *args, **kwargs):
    conn = _connect(database, *args, **kwargs)
    root = os.environ.get("{FULL_ENV}")
    if root and os.path.abspath(str(database)).startswith(os.path.abspath(root) + os.sep):
        conn.execute("PRAGMA max_page_count = 1")  # clamped to the current size: not one page more
    return conn


sqlite3.connect = _limited
'''


def _required() -> bool:
    return (os.environ.get("CI") or "").lower() in ("1", "true", "yes") or os.environ.get("REQUIRE_INTEGRATION") == "1"


@contextmanager
def tmpfs(path: Path, size: str = "8m", read_only: bool = False) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` on ``path`` (created) for the block; unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        reason = f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}"
        if _required():
            pytest.fail(f"{reason} (CI=true requires the small-file-system variant)", pytrace=False)
        pytest.skip(reason)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(root: Path) -> Path:
    """Fill the file system of ``root`` with ``root/filler`` until no byte is left; returns the filler."""
    filler = root / "filler"
    block = b"\0" * (64 << 10)
    with open(filler, "ab", buffering=0) as f:
        try:
            while True:
                f.write(block)
        except OSError:
            pass
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass
    return filler


@contextmanager
def sqlite_full(root: Path) -> Iterator[None]:
    """In this process: SQLite files under ``root`` opened from now on may not grow by one page."""
    connect = sqlite3.connect
    prefix = os.path.abspath(root) + os.sep

    def limited(database, *args, **kwargs):
        conn = connect(database, *args, **kwargs)
        if os.path.abspath(str(database)).startswith(prefix):
            conn.execute("PRAGMA max_page_count = 1")
        return conn

    sqlite3.connect = limited
    try:
        yield
    finally:
        sqlite3.connect = connect


def sitecustomize_dir(tmp: Path) -> Path:
    """A directory holding :data:`SQLITE_FULL_SITECUSTOMIZE` as ``sitecustomize.py`` (for ``PYTHONPATH``)."""
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "sitecustomize.py").write_text(SQLITE_FULL_SITECUSTOMIZE)
    return tmp
