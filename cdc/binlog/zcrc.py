"""CRC32 of an event: zlib's own function here, as Python calls it.

Compiled modules that `cimport` this one (`cdc.protocol.dump_stream`, `cdc.binlog.fastpath`)
call zlib's C `crc32` instead, declared in `zcrc.pxd` (an inline function Cython reads when it
compiles them; this module itself is never compiled): no Python call per event. They are linked
with zlib (cdc/compiled.py C_LIBRARIES); without zlib.h they run as plain Python.
"""

from __future__ import annotations

from zlib import crc32 as crc

__all__ = ["crc", "crc_at"]


def crc_at(data, at: int, n: int) -> int:
    """The CRC32 of `data[at:at + n]` (compiled: of the buffer in place, no slice)."""
    return crc(memoryview(data)[at : at + n])
