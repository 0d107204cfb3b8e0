"""Prometheus metrics shared by every processor in a process (labelled by processor and spec)."""

from __future__ import annotations

import logging

from prometheus_client import Counter, Gauge, Histogram, start_http_server

log = logging.getLogger(__name__)

MESSAGES = Counter("tg_messages_total", "Messages handled, by outcome (ok, error, dead_letter, undecodable)",
                   ["processor", "spec", "outcome"])
HANDLER_SECONDS = Histogram("tg_handler_seconds", "Handler latency in seconds", ["processor", "spec"],
                            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
                                     30, 60))
REQUESTS = Counter("tg_client_requests_total", "Requests sent by clients, by outcome (ok, timeout, error)",
                   ["processor", "service", "outcome"])

IN_FLIGHT = Gauge("tg_in_flight_messages", "Messages the processor is handling now", ["processor"])
STARTED = Gauge("tg_processors_started", "Processors of this id in the process whose consumers are subscribed",
                ["processor"])
STORE_LOOKUPS = Counter("tg_store_pattern_lookups_total", "Triple patterns looked up in the store", ["processor"])

_started: set[int] = set()


def serve_metrics(port: int, addr: str = "127.0.0.1") -> bool:
    """Expose /metrics on ``addr:port`` once per process; ``port`` 0 or less turns metrics off."""
    if port <= 0 or port in _started:
        return False
    start_http_server(port, addr=addr)
    _started.add(port)
    log.info("metrics on http://%s:%d/metrics", addr, port)
    return True
