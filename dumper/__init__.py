"""Dumper: writes the global binlog files and serves them over the MySQL replication protocol.
Exports nothing yet."""
