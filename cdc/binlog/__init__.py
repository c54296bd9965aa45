"""Binlog event codec: header, event registry, CRC32, event bodies and row images.
Pure functions of bytes; no I/O."""
