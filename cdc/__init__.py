"""Shared foundation of the global binlog server: CLI, configuration, codec, protocol helpers,
the local MariaDB cluster tooling and the reference compute node. Imports no stage package."""

__version__ = "0.1.0"
