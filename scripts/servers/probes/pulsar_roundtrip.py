"""Readiness probe for scripts/servers.sh: a real produce/consume round trip through Pulsar.

The admin health check proves the broker answers; this proves a Python client can publish a
message with properties on the project's own tenant and read it back, on a persistent and a
non-persistent topic. Fixed topic names (one per kind) so repeated probes add no topics.

Usage: python pulsar_roundtrip.py SERVICE_URL
Exit status: 0 round trip ok, 1 failed (reason on stderr), 2 pulsar-client not importable.
"""
from __future__ import annotations

import sys
import uuid

TOPICS = (
    "persistent://tg/flow/servers-readiness",
    "non-persistent://tg/request/servers-readiness",
)


def roundtrip(client, topic: str) -> None:
    """Subscribe, send one message with a unique property, receive exactly it.

    :param client: a connected ``pulsar.Client``
    :param topic: full topic name
    :raises RuntimeError: when the message does not come back intact
    """
    import pulsar

    token = uuid.uuid4().hex
    consumer = client.subscribe(
        topic,
        f"readiness-{token[:8]}",
        consumer_type=pulsar.ConsumerType.Exclusive,
        initial_position=pulsar.InitialPosition.Latest,
    )
    try:
        producer = client.create_producer(topic)
        producer.send(token.encode(), properties={"probe": token})
        producer.close()
        msg = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge(msg)
        if msg.data() != token.encode() or msg.properties().get("probe") != token:
            raise RuntimeError(f"{topic}: got {msg.data()!r} {msg.properties()!r}, sent {token}")
    finally:
        consumer.unsubscribe()
        consumer.close()


def main(argv: list[str]) -> int:
    """Run the round trip on every probe topic.

    :param argv: ``[prog, service_url]``
    :return: process exit status
    """
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    try:
        import pulsar
    except ImportError:
        return 2
    client = pulsar.Client(
        argv[1],
        operation_timeout_seconds=10,
        connection_timeout_ms=5_000,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )
    try:
        for topic in TOPICS:
            roundtrip(client, topic)
    except Exception as exc:  # noqa: BLE001 - any client error means "not ready yet"
        print(f"pulsar round trip failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
