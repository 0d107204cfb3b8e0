"""The gateway's limits: sizes, outstanding requests per socket, idle time."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """What one client may ask of the gateway.

    :param max_frame_bytes: largest WebSocket text frame answered; a larger one gets an error
        frame (beyond 4 times this, the connection is closed with code 1009, since such a frame
        is not even read whole).
    :param max_body_bytes: largest REST body (HTTP 413 beyond); TrustGraph's client sends a
        document of up to 2 MiB in one body, base64-encoded.
    :param max_outstanding: requests one socket may have open at once (TrustGraph's mux: 15).
    :param idle_seconds: a socket with no request open and no frame received for this long is closed.
    :param max_auth_attempts: failed auth frames a socket may send before it is closed.
    """

    max_frame_bytes: int = 1 << 20
    max_body_bytes: int = 4 << 20
    max_outstanding: int = 15
    idle_seconds: float = 300.0
    max_auth_attempts: int = 3

    def __post_init__(self):
        if self.max_frame_bytes < 1024 or self.max_body_bytes < 1024:
            raise ValueError("frame and body limits must be at least 1024 bytes")
        if self.max_outstanding < 1 or self.idle_seconds <= 0 or self.max_auth_attempts < 1:
            raise ValueError("max_outstanding, idle_seconds and max_auth_attempts must be positive")

    @property
    def hard_frame_bytes(self) -> int:
        """Frames above this are not read at all (the connection closes)."""
        return 4 * self.max_frame_bytes
