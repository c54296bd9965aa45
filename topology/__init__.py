"""Topology: the CDC's metadata history in the GMS (database `cdc_meta`): versioned schema
migrations, topology snapshots and logical schemas by TSO, the global binlog file index,
per-stream checkpoints and the dumper's HA lease. Other packages import only from here."""

from . import gms
from .checkpoints import Checkpoint, CheckpointHistory, CheckpointStore
from .dumper_lease import LEASE_NAME, DumperLeaseStore, Lease, Member, ServedBound, TermStart
from .file_index import FileEntry, FileIndex
from .migrations import MigrationError, current_version, migrate
from .schema_history import SchemaHistory, SchemaRecord
from .server_identity import server_uuid
from .topology_history import HistoryConflict, TopologyHistory, TopologyRecord

__all__ = [
    "LEASE_NAME",
    "Checkpoint",
    "CheckpointHistory",
    "CheckpointStore",
    "DumperLeaseStore",
    "FileEntry",
    "FileIndex",
    "HistoryConflict",
    "Lease",
    "Member",
    "MigrationError",
    "SchemaHistory",
    "SchemaRecord",
    "ServedBound",
    "TermStart",
    "TopologyHistory",
    "TopologyRecord",
    "current_version",
    "gms",
    "migrate",
    "server_uuid",
]
