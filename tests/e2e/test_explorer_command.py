"""The one command that opens the trace explorer: ``tg-gateway --open`` (a subprocess, on the embedded stack
that ``tg-quickstart`` loaded) opens the explorer's address in the default browser, and that page lists the
quickstart's trace.  The browser is a stand-in named by ``BROWSER`` (what Python's ``webbrowser`` runs) that
writes down the address it was given."""

from __future__ import annotations

import re
import stat
import time
import urllib.request
from types import SimpleNamespace

from e2e_support import start_gateway


def test_tg_gateway_open_opens_the_explorer_listing_the_quickstart_trace(embedded_deployment, tmp_path):
    d = embedded_deployment
    opened = tmp_path / "opened"
    browser = tmp_path / "browser"
    browser.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$1\" > {opened}\n")
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    with_browser = SimpleNamespace(kind=d.kind, user=d.user, distributed=False, env={**d.env, "BROWSER": str(browser)})
    gateway = start_gateway(with_browser, tmp_path, "--open")
    try:
        deadline = time.monotonic() + 30  # the browser is opened once the gateway listens, in a moment
        while not (opened.exists() and opened.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        url = opened.read_text().strip()
        assert url == gateway.url + "explorer"
        assert f"trace explorer: {url}" in gateway.log_text()
        with urllib.request.urlopen(url, timeout=30) as resp:
            page = resp.read().decode()
        question = re.search(r"\[question\] (\S+)", d.quickstart.stdout)[1]
        assert resp.status == 200 and f'data-uri="{question}"' in page
    finally:
        code = gateway.stop()
    assert code == 0, gateway.log_text()[-3000:]
