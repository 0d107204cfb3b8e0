"""Headless Chromium from the system's packages, driven by Playwright (never a browser Playwright downloads).

The flags keep a closed network quiet (no background connections, updates or sync) and every
launch gets a fresh profile.  A machine without Chromium skips the browser tests, except in CI
(``CI=true``), where that fails them: ``.ci/run`` installs it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: Where Debian's ``chromium`` package puts the browser (``CHROMIUM`` overrides it).
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or None (the ``chromium`` fixture skips or fails on it)."""
    import importlib.util

    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright for Python is not installed (pip install -e '.[test]')"
    return None


#: What Chromium logs for a page served with an error status (404, 403, ...): the status itself, not a fault.
HTTP_STATUS_LOG = "Failed to load resource: the server responded with a status of "


class ConsoleErrors(list):
    """Console errors and uncaught page errors seen by a page (a page must have none)."""

    def watch(self, page) -> None:
        page.on("console", lambda m: self.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: self.append(f"page error: {e}"))

    def besides_statuses(self) -> list[str]:
        """The errors other than Chromium's note of an error status (for pages that are meant to have one)."""
        return [e for e in self if HTTP_STATUS_LOG not in e]
