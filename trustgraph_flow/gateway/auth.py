"""Who a client is: bearer tokens mapped to users, TrustGraph workspaces mapped to users, the bind rule.

Without tokens the gateway is **open**: it accepts any token (TrustGraph's client always sends
an auth frame, with ``""`` when it has none) and must listen on a loopback address only;
workspace ``default`` is the configured default user and any other workspace names the user
of that name, as ``-U`` does for this project's CLI.  With tokens every request must carry
one: it maps to exactly one user, workspace ``default`` and that user's own name are that
user, and any other workspace is refused, so one user's token never reaches another user's
traces or documents.

A tokens file has one ``USER TOKEN`` pair a line (``#`` starts a comment); the same user may
have several tokens.  Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from trustgraph_base.store.names import InvalidName, check_user

from .wire import GATEWAY_ERROR, GatewayRequestError

#: TrustGraph's client's workspace when none is given; it is the client's own default user.
DEFAULT_WORKSPACE = "default"
#: Shortest token accepted in configuration.
MIN_TOKEN_LENGTH = 16


class AuthConfigError(ValueError):
    """The token configuration or the bind address is not acceptable (the gateway does not start)."""


class AccessDenied(GatewayRequestError):
    """No token, a wrong token, or a workspace the token does not grant."""

    def __init__(self, message: str):
        super().__init__(message, GATEWAY_ERROR)


@dataclass(frozen=True)
class Auth:
    """Token -> user mapping and the default user.

    :param tokens: ``(token, user)`` pairs; empty = open (loopback only).
    :param default_user: the user of workspace ``default`` in open mode.
    """

    tokens: tuple[tuple[str, str], ...] = ()
    default_user: str = "trustgraph"
    _by_token: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        try:
            check_user(self.default_user)
        except InvalidName as e:
            raise AuthConfigError(str(e)) from None
        for token, user in self.tokens:
            if len(token) < MIN_TOKEN_LENGTH or any(c.isspace() for c in token):
                raise AuthConfigError(f"the token of user {user!r} is shorter than {MIN_TOKEN_LENGTH} characters "
                                      f"or contains white space")
            try:
                check_user(user)
            except InvalidName as e:
                raise AuthConfigError(str(e)) from None
            if self._by_token.setdefault(token, user) != user:
                raise AuthConfigError(f"one token is given to two users ({self._by_token[token]!r}, {user!r})")

    @property
    def required(self) -> bool:
        return bool(self.tokens)

    def principal(self, token: str | None) -> str | None:
        """The user a token stands for; ``None`` in open mode.  :class:`AccessDenied` for a bad token."""
        if not self.required:
            return None
        if not token or type(token) is not str:
            raise AccessDenied("a token is required")
        user = None
        for known, owner in self.tokens:  # every token compared: the time taken says nothing
            if hmac.compare_digest(known.encode(), token.encode()):
                user = owner
        if user is None:
            raise AccessDenied("auth failure")
        return user

    def user_for(self, principal: str | None, workspace) -> str:
        """The user a request of ``principal`` in ``workspace`` acts as (see the module docstring)."""
        if workspace is None or workspace == "":
            workspace = DEFAULT_WORKSPACE
        if type(workspace) is not str:
            raise GatewayRequestError("'workspace' must be a string")
        if principal is not None:
            if workspace in (DEFAULT_WORKSPACE, principal):
                return principal
            raise AccessDenied(f"workspace {workspace[:64]!r} is not allowed for this token")
        if workspace == DEFAULT_WORKSPACE:
            return self.default_user
        try:
            return check_user(workspace)
        except InvalidName as e:
            raise GatewayRequestError(f"invalid workspace: {e}") from None


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (``None`` without one)."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def load_tokens(path: str | Path) -> list[tuple[str, str]]:
    """``(token, user)`` pairs of a tokens file (see the module docstring)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise AuthConfigError(f"cannot read tokens file {path}: {e}") from None
    pairs = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2:
            raise AuthConfigError(f"{path}:{n}: expected 'USER TOKEN'")
        pairs.append((parts[1], parts[0]))
    return pairs


def make_auth(default_user: str = "trustgraph", token: str | None = None,
              tokens_file: str | Path | None = None) -> Auth:
    """An :class:`Auth` from the options: ``token`` belongs to ``default_user``, a tokens file adds more."""
    pairs = [(token, default_user)] if token else []
    if tokens_file:
        pairs += load_tokens(tokens_file)
    return Auth(tuple(pairs), default_user)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, auth: Auth) -> None:
    """Refuse to listen beyond this machine without tokens."""
    if not is_loopback(host) and not auth.required:
        raise AuthConfigError(f"refusing to listen on {host}, which is not a loopback address, without tokens: "
                              f"give --token or --tokens-file (see docs/gateway.md)")
