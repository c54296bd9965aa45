"""The per-change step of a snapshot read's scan of the global binlog (read_path/changes.py):
where each column's value starts in a full row image, found by stepping over the values by
their sizes (`cdc.binlog.row_image.value_widths`), none of them decoded. The scan decodes a
changed row's key only, and its before-image only if a chunk emits it; Python spent about 7 µs
an image on the walk alone.

Plain Python that Cython compiles unchanged when it is there (cdc/compiled.py lists this
module; image_walk.pxd gives its C types; `COMPILED` says which one runs)."""

from __future__ import annotations

from cdc.compiled import is_compiled


def value_starts(data: bytes, pos, fixed: list, prefix: list, starts: list):  # C types: .pxd
    """The full row image (every column present) at data[pos:]: where each column's value
    starts, into `starts` (-1 for a NULL), and where the image ends (returned). Column i's value
    has `fixed[i]` bytes, or a little-endian length of `prefix[i]` bytes before it. ValueError
    when the image runs past the data."""
    n = len(fixed)
    end = len(data)
    p = data  # C: the bytes' buffer
    nulls = pos
    pos += (n + 7) // 8
    if pos > end:
        raise ValueError(f"a row image's null bitmap runs past its event at {nulls}")
    for i in range(n):
        if p[nulls + (i >> 3)] >> (i & 7) & 1:
            starts[i] = -1
            continue
        starts[i] = pos
        width = prefix[i]
        if width:
            if pos + width > end:
                raise ValueError(f"a row image runs past its event in column {i + 1}")
            length = 0
            for k in range(width):
                byte = p[pos + k]  # C: 64 bits wide, so a 4-byte length does not overflow
                length |= byte << (8 * k)
            pos += width + length
        else:
            pos += fixed[i]
        if pos > end:
            raise ValueError(f"a row image runs past its event in column {i + 1}")
    return pos


COMPILED = is_compiled(__name__)  # this module, as it was loaded: the .so or the .py
