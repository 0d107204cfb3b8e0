"""Readiness probe of the test cluster for scripts/servers.sh: every node up, as the driver and each node see it.

The cluster is ready when the driver, given every contact point, knows N hosts and holds a
connection to each (its cluster metadata: the ``nodetool status`` of a client), every node
answers a query itself and lists the other N-1 as peers with a finished bootstrap, and all
nodes agree on the schema.  Prints one line per node, like ``nodetool status``.

Usage: python cassandra_cluster.py HOST[,HOST...] PORT NODES
Exit status: 0 ready, 1 not yet (the last line says why), 2 cassandra-driver not importable.
"""
from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Check the cluster once.

    :param argv: ``[prog, hosts, port, nodes]``
    :return: process exit status
    """
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 1
    try:
        from cassandra import DriverException
        from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
        from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
    except ImportError:
        return 2
    hosts, port, nodes = argv[1].split(","), int(argv[2]), int(argv[3])
    profile = ExecutionProfile(load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()), request_timeout=10)
    cluster = Cluster(hosts, port=port, connect_timeout=5, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                      protocol_version=5)
    try:
        session = cluster.connect()
        known = cluster.metadata.all_hosts()
        up = [h for h in known if h.is_up]
        if len(known) != nodes or len(up) != nodes:
            print(f"the driver sees {len(up)} of {len(known)} known hosts up; {nodes} expected", file=sys.stderr)
            return 1
        lines = []
        for host in sorted(known, key=lambda h: str(h.endpoint)):
            local = session.execute("SELECT bootstrapped, host_id, tokens FROM system.local", host=host).one()
            peers = list(session.execute("SELECT peer FROM system.peers_v2", host=host))
            if local.bootstrapped != "COMPLETED" or len(peers) != nodes - 1:
                print(f"{host.endpoint}: bootstrapped {local.bootstrapped}, {len(peers)} peers of {nodes - 1}",
                      file=sys.stderr)
                return 1
            lines.append(f"UN  {host.address:<12} {host.datacenter:<5} {host.rack:<6} "
                         f"token {min(local.tokens)}  host {local.host_id}")
        if not cluster.control_connection.wait_for_schema_agreement(wait_time=20):
            print("the nodes do not agree on the schema yet", file=sys.stderr)
            return 1
        print("\n".join(lines))
    except (DriverException, NoHostAvailable, OSError) as exc:  # not ready yet
        print(f"cluster query failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
