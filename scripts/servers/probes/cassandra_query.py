"""Readiness probe for scripts/servers.sh: one real CQL query through the Python driver.

An open TCP port is not readiness (the native transport accepts before auth and schema are
settled); a query that returns the release version is.

Usage: python cassandra_query.py HOST PORT
Exit status: 0 query ok (prints the release version), 1 failed, 2 cassandra-driver not importable.
"""
from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Query ``system.local`` once.

    :param argv: ``[prog, host, port]``
    :return: process exit status
    """
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 1
    try:
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
        from cassandra.policies import RoundRobinPolicy
    except ImportError:
        return 2
    profile = ExecutionProfile(load_balancing_policy=RoundRobinPolicy(), request_timeout=10)
    cluster = Cluster(
        [argv[1]],
        port=int(argv[2]),
        connect_timeout=5,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
    )
    try:
        row = cluster.connect().execute("SELECT release_version FROM system.local").one()
        print(row.release_version)
    except Exception as exc:  # noqa: BLE001 - any driver error means "not ready yet"
        print(f"cassandra query failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
