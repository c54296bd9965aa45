"""CRC32 of an event for `scan.split_events`: zlib's own function here, as Python calls it.

Compiled, `scan` calls zlib's C `crc32` instead, declared in `zcrc.pxd` (an inline function
Cython reads when it compiles `scan`; this module itself is never compiled): no Python call per
event. `setup.py` links zlib into `scan`; without zlib.h, `scan` runs as plain Python.
"""

from __future__ import annotations

from zlib import crc32 as crc

__all__ = ["crc"]
