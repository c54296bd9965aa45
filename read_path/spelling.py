"""How a before-image's column is spelled as text (`image_text.py`): the kinds of values it
spells in C, chosen once per plan; any other column is spelled by `values.text_value`.
spelling.pxd repeats these numbers for the compiled module (tests/read_path/test_units.py
checks that they agree)."""

from __future__ import annotations

from enum import IntEnum


class Spelling(IntEnum):
    OTHER = 0  # decoded (`cdc.binlog.row_image`) and spelled by `text_value`
    INTEGER = 1  # a little-endian integer of `sizes[i]` bytes, signed
    UNSIGNED = 2  # the same, unsigned
    TEXT = 3  # a length of `sizes[i]` bytes, then the bytes the DN sends as they are
    DATETIME = 4  # DATETIME2: 5 bytes, `sizes[i]` bytes of fraction; `decimals[i]` shown
    DATE = 5  # 3 bytes: day, month, year
