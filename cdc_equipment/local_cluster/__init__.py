"""Local cluster tooling: MariaDB server processes (GMS + DNs) on loopback ports, used by the
CLI (`cdc cluster`), the demo, benches and the test fixtures alike; no runtime stage imports it.

Exports `LocalCluster`, `MariadbServer`, `NodeStatus` and their errors; `testing` holds the
throw-away clusters of tests and benches, `leftovers` the check that a checkout left no process,
`hosts` hosts as network namespaces with faults between them (tests/partition).
"""

from cdc_equipment.local_cluster.local_cluster import ClusterError, LocalCluster
from cdc_equipment.local_cluster.mariadb_server import MariadbServer, NodeStatus, ServerError

__all__ = ["ClusterError", "LocalCluster", "MariadbServer", "NodeStatus", "ServerError"]
