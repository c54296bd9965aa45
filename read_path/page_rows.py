"""The per-row step of a snapshot read's DN pages: the rows cut from the DN's stream and each
split into its primary key (the page reads the key's columns first) and the rest, the row the
client is sent, in one pass. Python spent about 1.5 µs a row here (a packet cut into a bytes
object, a call, two slices, an `int()` of bytes, two tuples).

Plain Python that Cython compiles unchanged when it is there (cdc/compiled.py lists this
module; page_rows.pxd gives its C types; `COMPILED` says which one runs). Compiled, an integer
key of up to 18 digits is read from its digits in C; a longer one (BIGINT UNSIGNED past 10^18)
and every other key go through Python's int() or stay bytes."""

from __future__ import annotations

from cdc.compiled import is_compiled
from cdc.protocol.packets import EOF, ERR, MAX_CHUNK

NULL = 0xFB  # a length-encoded field's NULL marker
MAX_DIGITS = 18  # a C long long holds any number of this many digits


def keyed_rows(page: list, nkey, integer_key) -> list:  # C types: page_rows.pxd
    """(key, data) of each text row of `page`: the key a tuple of the row's first `nkey`
    fields (ints when `integer_key`, else bytes; never NULL: a primary key's), data the bytes
    after them."""
    out = []
    for row in page:
        out.append(_keyed(row, 0, len(row), nkey, integer_key))
    return out


def keyed_packets(data: bytes, pos, nkey, integer_key, out: list) -> tuple:  # C types: .pxd
    """The rows of a text result set, as framed packets in `data` from `pos`, each appended
    to `out` as `keyed_rows` gives it. Returns (where the first packet not taken starts, the
    packet that ended the rows: EOF or ERR, else None). It stops before a packet not whole in
    `data`, and before one of MAX_CHUNK bytes (a row of 16 MB or more: the caller joins it)."""
    end = len(data)
    p = data  # C: the bytes' buffer
    while end - pos >= 4:
        length = p[pos] | p[pos + 1] << 8 | p[pos + 2] << 16
        start = pos + 4
        if length >= MAX_CHUNK or end - start < length:
            break
        first = p[start] if length else 0
        if first == ERR or (first == EOF and length < 9):
            return start + length, data[start : start + length]
        out.append(_keyed(data, start, start + length, nkey, integer_key))
        pos = start + length
    return pos, None


def _keyed(row: bytes, pos, stop, nkey, integer_key) -> tuple:  # C types: page_rows.pxd
    """(key, data) of the text row in row[pos:stop]."""
    p = row  # C: the bytes' buffer
    fields = []
    for _ in range(nkey):
        if pos >= stop:
            raise ValueError("a page's row ends inside its key")
        first = p[pos]
        if first < NULL:
            start = pos + 1
            length = first
        elif first == 0xFC:
            start = pos + 3
            length = p[pos + 1] | p[pos + 2] << 8
        elif first == 0xFD:
            start = pos + 4
            length = p[pos + 1] | p[pos + 2] << 8 | p[pos + 3] << 16
        else:  # 0xFE (a key longer than 16 MB), or NULL, which a key never is
            raise ValueError(f"unexpected key field marker {first:#x} in a page's row")
        end = start + length
        if end > stop:
            raise ValueError("a page's row ends inside its key")
        if not integer_key:
            fields.append(row[start:end])
        elif COMPILED and 0 < length <= MAX_DIGITS:
            fields.append(_digits(p, start, end))
        else:
            fields.append(int(row[start:end]))
        pos = end
    key = (fields[0],) if nkey == 1 else tuple(fields)
    return key, row[pos:stop]


def _digits(p, start, end):  # C types: page_rows.pxd
    """The integer spelled by p[start:end] (an optional minus, then at most 18 digits)."""
    negative = p[start] == 45  # "-"
    k = start + 1 if negative else start
    value = 0
    while k < end:
        value = value * 10 + (p[k] - 48)
        k += 1
    return -value if negative else value


COMPILED = is_compiled(__name__)  # this module, as it was loaded: the .so or the .py
