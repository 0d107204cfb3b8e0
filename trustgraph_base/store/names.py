"""Validation of identifiers that come from requests (users, collections) before they reach CQL or paths.

User and collection names are *validated*, never silently rewritten: two different names
must never map to the same keyspace, table row or file.  Derived storage names (Cassandra
keyspaces, SQLite file names) are a readable slug plus a hash of the exact name, so they are
always safe and always distinct.
"""

from __future__ import annotations

import enum
import hashlib
import os
import re
from pathlib import Path

from .errors import InvalidQuery

__all__ = ["InvalidName", "check_user", "check_collection", "check_names", "storage_name", "tg_home", "user_file"]

_USER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@\-]{0,63}\Z")
_COLLECTION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}\Z")


class InvalidName(ValueError):
    """A user or collection name that is not allowed."""


def check_user(user: str) -> str:
    """Return ``user`` if valid: 1-64 of letters, digits, ``_ . @ -``, starting with a letter or digit."""
    if not isinstance(user, str) or not _USER.match(user):
        raise InvalidName(f"invalid user name {str(user)[:80]!r}: use 1-64 letters, digits, '_', '.', '@' "
                          f"or '-', starting with a letter or digit")
    return user


def check_collection(collection: str) -> str:
    """Return ``collection`` if valid: 1-64 of letters, digits, ``_ . -``, starting with a letter or digit."""
    if not isinstance(collection, str) or not _COLLECTION.match(collection):
        raise InvalidName(f"invalid collection name {str(collection)[:80]!r}: use 1-64 letters, digits, '_', "
                          f"'.' or '-', starting with a letter or digit")
    return collection


class _Missing(enum.Enum):
    COLLECTION = enum.auto()


#: ``check_names`` without a collection: only the user is checked (``None`` is an invalid collection).
_NO_COLLECTION = _Missing.COLLECTION


def check_names(user: str, collection: str | _Missing = _NO_COLLECTION) -> None:
    """Validate a user (and, when given, a collection) name for a store or a service request.

    The one check every store method and query service runs first: a bad name is a bad request,
    so it raises :class:`~trustgraph_base.store.errors.InvalidQuery` with the validator's message.
    """
    try:
        check_user(user)
        if collection is not _NO_COLLECTION:
            check_collection(collection)
    except InvalidName as e:
        raise InvalidQuery(str(e)) from None


def storage_name(prefix: str, user: str) -> str:
    """A safe, injective storage name for a user, e.g. ``tg_alice_5d41402abc``.

    Lower-case letters, digits and ``_`` only; at most 48 characters (Cassandra's keyspace limit).
    """
    check_user(user)
    slug = re.sub(r"[^a-z0-9]+", "_", user.lower()).strip("_")[:24] or "u"
    digest = hashlib.sha256(user.encode("utf-8")).hexdigest()[:10]
    return f"{prefix}_{slug}_{digest}"


def tg_home() -> Path:
    """The embedded deployment's data directory: ``$TG_HOME`` or ``~/.trustgraph``."""
    return Path(os.environ.get("TG_HOME") or Path.home() / ".trustgraph")


def user_file(kind: str, user: str, suffix: str = ".sqlite", home: Path | None = None) -> Path:
    """Path of one user's SQLite file of a kind (``triples``, ``librarian``, ``vectors``) under ``$TG_HOME``."""
    if not re.fullmatch(r"[a-z]+", kind):
        raise InvalidName(f"invalid store kind {kind!r}")
    base = (home or tg_home()) / kind
    return base / f"{storage_name('tg', user)}{suffix}"
