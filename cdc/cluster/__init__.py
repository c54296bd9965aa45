"""Local cluster tooling: MariaDB server processes (GMS + DNs) on loopback ports, used by the
CLI, the demo and the test fixtures alike."""

from cdc.cluster.local_cluster import ClusterError, LocalCluster
from cdc.cluster.mariadb_server import MariaDBServer, NodeStatus, ServerError

__all__ = ["ClusterError", "LocalCluster", "MariaDBServer", "NodeStatus", "ServerError"]
