"""What a refused request gets: an error with a ``type`` TrustGraph's client maps to an exception class.

TrustGraph's client raises ``RequestError`` for ``request-error`` and ``GatewayError`` for
``gateway-error``; any other type becomes ``UnexpectedError`` carrying the message, so the
services' own types (``graph-rag-error``, ``librarian-error``, ...) pass through unchanged.
"""

from __future__ import annotations

#: A request the gateway cannot accept as sent (bad key, bad value, unsupported option).
REQUEST_ERROR = "request-error"
#: The gateway itself could not serve it (limits, time-outs, access, unknown service).
GATEWAY_ERROR = "gateway-error"
#: This project's own channel (``/api/v1/native``) tells two more apart, so its client can say what failed:
#: a service that did not answer within the gateway's time, and a bus that failed.
TIMEOUT, UNAVAILABLE = "timeout", "unavailable"


class GatewayRequestError(ValueError):
    """A request refused before anything reached a service; ``error_type`` goes on the wire."""

    def __init__(self, message: str, error_type: str = REQUEST_ERROR):
        super().__init__(message)
        self.error_type = error_type
        self.message = message

    def wire(self) -> dict:
        return {"type": self.error_type, "message": self.message}


def error_body(error_type: str, message: str) -> dict:
    """``{"type": ..., "message": ...}``, the error object of a frame or a REST reply."""
    return {"type": error_type or GATEWAY_ERROR, "message": message}
