"""Topology: the metadata history in the meta database (topology snapshots, logical schema,
file index, checkpoints, dumper lease). Exports nothing yet."""
