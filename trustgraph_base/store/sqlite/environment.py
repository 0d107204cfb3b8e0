"""When a SQLite store's directory or file cannot be used, and saying so in one line that names the path.

A data directory that is a file, a read-only or full file system, a missing permission: the
operating system reports these as ``OSError`` (``ENOTDIR``, ``EROFS``, ``EACCES``, ``ENOSPC``,
``EDQUOT``) and SQLite as "unable to open database file", "attempt to write a readonly
database", "database or disk is full" or "disk I/O error".  None of them says anything about the
message being handled, so :func:`environment_failure` turns them into
:class:`~trustgraph_base.store.errors.StoreEnvironmentError` (never dead-lettered, see
``docs/guarantees.md``).  SQLite's own codes do not say *why* a file could not be opened or
written, so the path is examined (:func:`_diagnose`) to name the cause.

Reads must tell "no data yet" from "no data can be here": :func:`store_file_exists` is false
only for a file that does not exist in a place that could hold it.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreEnvironmentError, StoreError, StoreUnavailable

__all__ = ["check_data_dir", "environment_errors", "environment_failure", "make_parent", "store_file_exists",
           "unavailable"]

#: ``OSError`` numbers that say the place cannot be used, whatever is being stored.
ENVIRONMENT_ERRNOS = frozenset({errno.ENOTDIR, errno.EISDIR, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC,
                                errno.EDQUOT, errno.EEXIST})

#: SQLite primary result codes that say the file or its file system cannot be used.
_DIAGNOSED_CODES = frozenset({sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR,
                              sqlite3.SQLITE_PERM})
_FILE_CODES = {sqlite3.SQLITE_NOTADB: "file is not a database", sqlite3.SQLITE_CORRUPT: "the database file is damaged"}

#: Below this many free bytes, a file system on which SQLite failed to open or write is taken to be full.
NEARLY_FULL_BYTES = 1 << 20


def check_data_dir(home: Path) -> None:
    """Raise :class:`StoreEnvironmentError` unless ``home`` is, or can be created as, a writable directory.

    Nothing is created: a command that only reads an empty location finds it empty.
    """
    problem = _diagnose(Path(home), as_directory=True, space=False)
    if problem is not None:
        code, culprit = problem
        raise StoreEnvironmentError(_data_dir_message(Path(home), code, culprit), str(home))


def store_file_exists(path: Path) -> bool:
    """Whether the store file ``path`` exists.

    ``False`` only when it does not exist yet in a place that could hold it (a read then finds
    nothing); a path through a file, or a directory that may not be searched, raises
    :class:`StoreEnvironmentError`: such a store is not empty, it cannot be read.
    """
    try:
        os.stat(path)
        return True
    except FileNotFoundError:
        pass
    except OSError as e:
        raise _failure_of(e, path) from e
    problem = _diagnose(path.parent, as_directory=True, writable=False)
    if problem is not None:
        code, culprit = problem
        raise StoreEnvironmentError(_message(path, code, culprit), str(path))
    return False


def make_parent(path: Path) -> None:
    """Create the directory of store file ``path`` (and its parents) if missing."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _failure_of(e, path) from e


@contextmanager
def environment_errors(path: Path) -> Iterator[None]:
    """Re-raise what :func:`environment_failure` recognises as :class:`StoreEnvironmentError`; the rest unchanged."""
    try:
        yield
    except (OSError, sqlite3.Error) as e:
        failure = environment_failure(e, path)
        if failure is None:
            raise
        raise failure from e


def environment_failure(error: BaseException, path: Path) -> StoreEnvironmentError | None:
    """The :class:`StoreEnvironmentError` that ``error`` (raised while using store file ``path``) amounts
    to, or ``None`` when it is something else (a lock time-out, bad SQL, a constraint)."""
    if isinstance(error, StoreEnvironmentError):
        return error
    if isinstance(error, OSError):
        return _failure_of(error, path) if error.errno in ENVIRONMENT_ERRNOS else None
    if not isinstance(error, sqlite3.Error):
        return None
    code = getattr(error, "sqlite_errorcode", None)
    code = code & 0xFF if code is not None else _code_from_text(str(error))
    if code == sqlite3.SQLITE_FULL:
        return StoreEnvironmentError(f"no space left on {path}", str(path))
    if code in _FILE_CODES:
        return StoreEnvironmentError(f"cannot use {path}: {_FILE_CODES[code]}", str(path))
    if code not in _DIAGNOSED_CODES:
        return None
    problem = _diagnose(path)
    if problem is not None:
        return StoreEnvironmentError(_message(path, *problem), str(path))
    what = "cannot open" if code == sqlite3.SQLITE_CANTOPEN else "cannot use"
    return StoreEnvironmentError(f"{what} {path}: {error}", str(path))


def unavailable(e: sqlite3.Error, path: Path, message: str) -> StoreError:
    """What a failed SQLite call of the librarian or vector store becomes: :class:`StoreEnvironmentError` when
    the file or its file system cannot be used, else :class:`StoreUnavailable` with ``message`` (busy, locked:
    retrying may succeed)."""
    return environment_failure(e, path) or StoreUnavailable(message)


# ---------------------------------------------------------------- diagnosis

def _code_from_text(text: str) -> int | None:
    """SQLite's result code from its message (for ``sqlite3.Error`` objects that do not carry the code)."""
    for fragment, code in (("disk is full", sqlite3.SQLITE_FULL), ("unable to open", sqlite3.SQLITE_CANTOPEN),
                           ("readonly database", sqlite3.SQLITE_READONLY), ("disk I/O error", sqlite3.SQLITE_IOERR),
                           ("not a database", sqlite3.SQLITE_NOTADB), ("malformed", sqlite3.SQLITE_CORRUPT)):
        if fragment in text:
            return code
    return None


def _failure_of(e: OSError, path: Path) -> StoreEnvironmentError:
    """An ``OSError`` met on the way to ``path``; the culprit is looked for where the error may not name it."""
    code = e.errno
    if code in (errno.ENOTDIR, errno.EEXIST, errno.EACCES, errno.EPERM):
        problem = _diagnose(path, writable=code not in (errno.ENOTDIR, errno.EEXIST))
        if problem is not None:
            return StoreEnvironmentError(_message(path, *problem), str(path))
    culprit = Path(e.filename) if e.filename else path
    if code == errno.EEXIST:  # mkdir found a file where a directory belongs
        code = errno.ENOTDIR
    return StoreEnvironmentError(_message(path, code, culprit), str(path))


def _diagnose(path: Path, *, as_directory: bool = False, writable: bool = True,
              space: bool = True) -> tuple[int, Path] | None:
    """Why ``path`` (a store file, or a directory with ``as_directory``) cannot be used: ``(errno, culprit)``.

    Looks, from the root down, for a component that is not a directory or may not be searched;
    then whether the deepest existing directory (and the file, if it exists) may be written
    (``writable``), and whether its file system is nearly full (``space``).  ``None``: nothing found.
    """
    path = Path(os.path.abspath(path))
    parts = [*reversed(path.parents), path]
    deepest = parts[0]
    for i, part in enumerate(parts):
        try:
            os.stat(part)
        except FileNotFoundError:
            break
        except PermissionError:
            return errno.EACCES, deepest
        except NotADirectoryError:
            return errno.ENOTDIR, deepest
        except OSError as e:
            return (e.errno, part) if e.errno in ENVIRONMENT_ERRNOS else None
        is_dir = os.path.isdir(part)
        if i < len(parts) - 1 or as_directory:
            if not is_dir:
                return errno.ENOTDIR, part
            deepest = part
        elif is_dir:
            return errno.EISDIR, part
    if not writable:
        return None
    if not os.access(deepest, os.W_OK | os.X_OK):
        return _refusal(deepest), deepest
    if not as_directory:
        for own in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if os.path.exists(own) and not os.access(own, os.R_OK | os.W_OK):
                return _refusal(own), own
    if not space:
        return None
    try:
        fs = os.statvfs(deepest)
    except OSError:
        return None
    if fs.f_bavail * fs.f_frsize < NEARLY_FULL_BYTES:
        return errno.ENOSPC, path
    return None


def _refusal(path: Path) -> int:
    """``EROFS`` when ``path`` is on a read-only file system, else ``EACCES``."""
    try:
        return errno.EROFS if os.statvfs(path).f_flag & os.ST_RDONLY else errno.EACCES
    except OSError:
        return errno.EACCES


def _message(path: Path, code: int | None, culprit: Path) -> str:
    """One line saying what is wrong with ``culprit`` on the way to store file ``path``."""
    if code == errno.ENOSPC:
        return f"no space left on {path}"
    if code == errno.EDQUOT:
        return f"disk quota exceeded on {path}"
    if code == errno.EROFS:
        return f"cannot write to {culprit}: read-only file system"
    if code in (errno.EACCES, errno.EPERM):
        return f"cannot use {culprit}: permission denied"
    if code == errno.ENOTDIR:
        return f"cannot use {path}: {culprit} is not a directory" if culprit != path else \
            f"cannot use {path}: not a directory"
    if code == errno.EISDIR:
        return f"cannot use {culprit}: it is a directory"
    return f"cannot use {path}: {os.strerror(code) if code else 'unknown error'}"


def _data_dir_message(home: Path, code: int, culprit: Path) -> str:
    """One line saying why ``home`` cannot be the data directory."""
    if code == errno.ENOTDIR:
        reason = "not a directory" if culprit == home else f"{culprit} is not a directory"
    elif code == errno.EROFS:
        reason = "read-only file system" if culprit == home else f"{culprit} is on a read-only file system"
    elif code in (errno.EACCES, errno.EPERM):
        reason = "permission denied" if culprit == home else f"no permission to write to {culprit}"
    elif code == errno.ENOSPC:
        return f"no space left on {home}"
    else:
        reason = os.strerror(code)
    return f"cannot use {home} as data directory: {reason}"
