"""Topology: the CDC's metadata history in the GMS (database `cdc_meta`): versioned schema
migrations, topology snapshots and logical schemas by TSO, the global binlog file index and
per-stream checkpoints."""
