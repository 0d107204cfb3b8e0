"""The trace explorer: web pages of the gateway that show why an answer was given (see ``docs/explorer.md``)."""

from .routes import Explorer

__all__ = ["Explorer"]
