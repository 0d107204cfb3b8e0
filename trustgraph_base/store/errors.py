"""Store exceptions: services map them to Error responses (bad input) or to nack-and-retry (unavailable)."""

from __future__ import annotations


class StoreError(Exception):
    """Base of every storage error; ``error_type`` is what an ``Error`` reply carries."""

    error_type = "store-error"


class StoreUnavailable(StoreError):
    """The database could not be reached or timed out; the operation may be retried as is."""

    error_type = "store-unavailable"


class InvalidQuery(StoreError, ValueError):
    """The request itself is wrong (bad name, bad term, absurd limit); retrying will not help."""

    error_type = "invalid-request"


class NotFound(StoreError, KeyError):
    """The named document, trace or collection does not exist."""

    error_type = "not-found"

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "not found"


class StoreEnvironmentError(StoreError):
    """The place the data lives cannot be used: not a directory, read-only, no permission, no space left.

    Neither the message's fault (dead-lettering it would lose data) nor a passing outage of a
    remote server: it lasts until someone fixes the machine.  ``path`` names the file or
    directory; the message is one line that says what is wrong with it.
    """

    error_type = "store-environment"

    def __init__(self, message: str, path: str | None = None):
        super().__init__(message)
        self.path = path
