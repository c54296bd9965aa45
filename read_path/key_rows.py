"""A snapshot read's rows when the primary key is one integer column that fits 64 bits (the usual
table): held as buffers, never as a Python object per row. A DN page is cut into `IntRows` (each
row's key, its size, its data back to back), a chunk's share of a shard is a prefix taken off
them, and the chunk is merged in key order straight into framed text-row packets
(`cdc.protocol.framed_rows`), a changed key's before-image in place of what the shards held.
The rows of a read with any other key take the general path (`page_rows`, `chunks`), which
gives the same bytes: tests/read_path/test_key_rows.py compares them.

Plain Python that Cython compiles unchanged when it is there (cdc/compiled.py lists this
module; key_rows.pxd gives its C types; `COMPILED` says which one runs). Keys are stored as 8
little-endian bytes (two's complement), sizes as 4, so the compiled loops read them in C; the
loops spell constants as literals (a module global is a Python object there: an object
operation per row), and the plain-Python paths read the buffers through memoryviews (a
little-endian host)."""

from __future__ import annotations

from bisect import bisect_right
from operator import itemgetter

from cdc.compiled import is_compiled
from cdc.protocol.packets import frame

KEY = 8  # bytes per key
SIZE = 4  # bytes per row size
_FIRST = itemgetter(0)


class IntRows:
    """Rows in key order: `keys` (8 bytes each), `sizes` (4 bytes each) and the rows' data (the
    text row's fields after the key) back to back in `blob`."""

    __slots__ = ("blob", "keys", "sizes")

    def __init__(self) -> None:
        self.keys = bytearray()
        self.sizes = bytearray()
        self.blob = bytearray()

    def __len__(self) -> int:
        return len(self.keys) // KEY

    def key(self, i: int) -> int:
        return int.from_bytes(self.keys[i * KEY : i * KEY + KEY], "little", signed=True)

    def last(self) -> tuple | None:
        """The last row's key as the read's bounds spell keys (a 1-tuple); None when empty."""
        n = len(self)
        return None if n == 0 else (self.key(n - 1),)

    def extend(self, other: IntRows) -> None:
        self.keys += other.keys
        self.sizes += other.sizes
        self.blob += other.blob

    def add(self, key: int, data: bytes) -> None:
        """One row (a row of 16 MB or more, joined by the caller)."""
        self.keys += key.to_bytes(KEY, "little", signed=True)
        self.sizes += len(data).to_bytes(SIZE, "little")
        self.blob += data

    def take_until(self, hi: tuple | None) -> IntRows:
        """The rows with a key ≤ `hi` (all when None), taken out of these."""
        n = len(self) if hi is None else upper_bound(self.keys, len(self), hi[0])
        out = IntRows()
        if n == 0:
            return out
        size = blob_size(self.sizes, n)
        out.keys, out.sizes, out.blob = (
            self.keys[: n * KEY],
            self.sizes[: n * SIZE],
            self.blob[:size],
        )
        del self.keys[: n * KEY]
        del self.sizes[: n * SIZE]
        del self.blob[:size]
        return out

    def rows(self) -> list[tuple[tuple, bytes]]:
        """(key, data) of each row, as the general path holds them (tests, and the fallback)."""
        out, at = [], 0
        for i in range(len(self)):
            size = int.from_bytes(self.sizes[i * SIZE : i * SIZE + SIZE], "little")
            out.append(((self.key(i),), bytes(self.blob[at : at + size])))
            at += size
        return out


def upper_bound(keys: bytearray, n, hi) -> int:  # C types: key_rows.pxd
    """How many of the first `n` keys are ≤ `hi` (they are sorted)."""
    if not COMPILED:
        return bisect_right(memoryview(keys).cast("q")[:n], hi)  # little-endian hosts
    p = keys  # C: the buffer
    lo, top = 0, n
    while lo < top:
        mid = (lo + top) // 2
        if _key_at(p, mid * 8) <= hi:
            lo = mid + 1
        else:
            top = mid
    return lo


def blob_size(sizes: bytearray, n) -> int:  # C types: key_rows.pxd
    """The data bytes of the first `n` rows."""
    if not COMPILED:
        return sum(memoryview(sizes).cast("I")[:n])
    p = sizes  # C: the buffer
    total = 0
    for i in range(n):
        total += _size_at(p, i * 4)
    return total


def cut_packets(data: bytes, pos, into: IntRows) -> tuple:  # C types: key_rows.pxd
    """The text rows framed as packets in `data` from `pos`, appended to `into` (each row's
    first field is the key, an integer that fits 64 bits). Returns (where the first packet
    not taken starts, the packet that ended the rows: EOF or ERR, else None). Stops before a
    packet not whole in `data` and before one of MAX_CHUNK bytes (a row of 16 MB or more: the
    caller joins it and `add`s it)."""
    # Pass 1: how many rows, and their data's bytes, so the buffers grow once.
    end = len(data)
    p = data  # C: the bytes' buffer
    rows = 0
    total = 0
    at = pos
    last = None
    while end - at >= 4:
        length = p[at] | p[at + 1] << 8 | p[at + 2] << 16
        start = at + 4
        if length >= 0xFFFFFF or end - start < length:
            break
        first = p[start] if length else 0
        if first == 0xFF or (first == 0xFE and length < 9):
            last = data[start : start + length]
            break
        total += start + length - _data_start(p, start, start + length)
        rows += 1
        at = start + length
    stop = at + 4 + len(last) if last is not None else at
    if rows == 0:
        return stop, last
    if not COMPILED:
        at = pos
        for _ in range(rows):
            length = int.from_bytes(data[at : at + 3], "little")
            start = at + 4
            at = start + length
            body = _data_start(p, start, at)
            into.add(_key_text(data, start, body), data[body:at])
        return stop, last
    # Pass 2: fill them.
    k0, s0, b0 = len(into.keys), len(into.sizes), len(into.blob)
    into.keys += bytes(rows * 8)
    into.sizes += bytes(rows * 4)
    into.blob += bytes(total)
    kq = into.keys  # C: the buffers
    sq = into.sizes
    bq = into.blob
    at = pos
    for r in range(rows):
        length = p[at] | p[at + 1] << 8 | p[at + 2] << 16
        start = at + 4
        at = start + length
        body = _data_start(p, start, at)
        _put_key(kq, k0 + r * 8, _key_of(p, start, body))
        size = at - body
        _put_size(sq, s0 + r * 4, size)
        _copy(bq, b0, p, body, size)
        b0 += size
    return stop, last


def key_and_data(row: bytes) -> tuple:
    """(key, data) of one text row's payload (a row of 16 MB or more)."""
    body = _data_start(row, 0, len(row))
    return _key_text(row, 0, body), row[body:]


def _key_text(row: bytes, start: int, body: int) -> int:
    """The integer of the key field at row[start:body], by int()."""
    return int(row[start + 3 if row[start] == 0xFC else start + 1 : body])


def _data_start(p, start, stop):  # C types: key_rows.pxd
    """Where the data after the key field starts in the row p[start:stop]."""
    if start >= stop:
        raise ValueError("a page's row ends inside its key")
    first = p[start]
    if first < 0xFB:  # NULL
        at = start + 1
        length = first
    elif first == 0xFC:
        at = start + 3
        length = p[start + 1] | p[start + 2] << 8
    else:  # a key longer than 64 kB is no integer; NULL is never a key
        raise ValueError(f"unexpected key field marker {first:#x} in a page's row")
    if at + length > stop or length == 0:
        raise ValueError("a page's row ends inside its key")
    return at + length


def _key_of(p, start, body):  # C types: key_rows.pxd
    """The integer of the key field at `start` (its text ends at `body`): up to 18 digits read
    in C, a longer one by int() (which says when it does not fit 64 bits)."""
    first = p[start]
    at = start + 3 if first == 0xFC else start + 1
    negative = p[at] == 45  # "-"
    k = at + 1 if negative else at
    if body - k > 18:
        return int(bytes(p[at:body]))  # C: checked to fit 64 bits
    value = 0
    while k < body:
        value = value * 10 + (p[k] - 48)
        k += 1
    return -value if negative else value


# The helpers below run compiled only (the plain-Python paths read and write the buffers
# through memoryviews and int.from_bytes instead).
def _key_at(p, at):  # C types: key_rows.pxd
    """The key stored at p[at:at + 8] (C: two's complement from the unsigned bytes; spelled
    out, the C compiler makes it one load)."""
    value = p[at + 7]
    value = value << 8 | p[at + 6]
    value = value << 8 | p[at + 5]
    value = value << 8 | p[at + 4]
    value = value << 8 | p[at + 3]
    value = value << 8 | p[at + 2]
    value = value << 8 | p[at + 1]
    return value << 8 | p[at]


def _copy(q, w, p, at, n) -> None:  # C types: key_rows.pxd
    """p[at:at + n] to q[w:] (C: memcpy, cimported by key_rows.pxd)."""
    memcpy(q + w, p + at, n)  # noqa: F821


def _put_key(q, at, key) -> None:  # C types: key_rows.pxd
    value = key  # C: its two's complement bits, unsigned
    for i in range(8):
        q[at + i] = value & 0xFF
        value >>= 8


def _size_at(p, at):  # C types: key_rows.pxd
    return p[at] | p[at + 1] << 8 | p[at + 2] << 16 | p[at + 3] << 24


def _put_size(q, at, size) -> None:  # C types: key_rows.pxd
    q[at] = size & 0xFF
    q[at + 1] = (size >> 8) & 0xFF
    q[at + 2] = (size >> 16) & 0xFF
    q[at + 3] = (size >> 24) & 0xFF


def merge_framed(parts: list, skip: bytearray, images: IntRows) -> tuple:  # C types: .pxd
    """One chunk's rows in key order, framed as text-row packets (sequence ids 0: the sender
    stamps them): the rows of `parts` (each shard's, in key order) whose key is not in `skip`
    (8 bytes a key, sorted: every changed key of the chunk), and `images` (the before-images
    that are rows at P, in key order). Returns (the packets, how many rows)."""
    inputs = [*parts, images]
    n = 0
    for rows in inputs:
        n += len(rows)
    if n == 0:
        return bytearray(), 0
    if not COMPILED:
        return _merge_framed_py(inputs, skip)
    order = _merged_order(inputs, n)
    nskip = len(skip) // 8
    last = len(inputs) - 1
    op = order  # C: the buffers
    kp = skip
    total = 0
    count = 0
    j = 0
    for r in range(0, n * 24, 24):
        if op[r + 8] | op[r + 9] << 8 != last:
            key = _key_at(op, r)
            while j < nskip and _key_at(kp, j * 8) < key:
                j += 1
            if j < nskip and _key_at(kp, j * 8) == key:
                op[r + 10] = 1  # skipped
                continue
        size = _size_at(op, r + 12)
        total += 4 * (size // 0xFFFFFF + 1) + size
        count += 1
    blobs = b"".join([rows.blob for rows in inputs])
    out = bytearray(total)
    q = out  # C: the buffers
    bp = blobs
    w = 0
    for r in range(0, n * 24, 24):
        if op[r + 10] == 0:
            w = _frame(q, w, bp, _key_at(op, r + 16), _size_at(op, r + 12))
    return out, count


def _merge_framed_py(inputs: list, skip: bytearray) -> tuple:
    skipped = set(memoryview(skip).cast("q"))
    rows = []
    for source, part in enumerate(inputs):
        start = 0
        keys = memoryview(part.keys).cast("q")
        sizes = memoryview(part.sizes).cast("I")
        for i in range(len(part)):
            if source == len(inputs) - 1 or keys[i] not in skipped:
                rows.append((keys[i], part.blob, start, sizes[i]))
            start += sizes[i]
    rows.sort(key=_FIRST)  # stable: equal keys keep the inputs' order
    out = bytearray()
    for _key, blob, start, size in rows:
        out += frame(blob[start : start + size], 0)[0]
    return out, len(rows)


def _frame(q, w, b, start, size):  # C types: key_rows.pxd
    """The payload b[start:start + size] framed at q[w:] (split into MAX_CHUNK packets as
    the protocol does; sequence ids 0); where the next packet goes."""
    while True:
        part = size if size < 0xFFFFFF else 0xFFFFFF
        q[w] = part & 0xFF
        q[w + 1] = (part >> 8) & 0xFF
        q[w + 2] = (part >> 16) & 0xFF
        q[w + 3] = 0
        w += 4
        _copy(q, w, b, start, part)
        w += part
        start += part
        size -= part
        if part < 0xFFFFFF:
            return w


def _merged_order(inputs: list, n) -> bytearray:  # C types: key_rows.pxd
    """24 bytes per row of every input (its key, 8; its input, 2; a flag, 2; its size, 4;
    where its data starts in the inputs' blobs joined, 8), ordered by key, equal keys in input
    order: the inputs' sorted runs merged pairwise."""
    a = bytearray(n * 24)
    ap = a  # C: the buffer
    bounds = [0]
    w = 0
    at = 0
    for source in range(len(inputs)):
        rows = inputs[source]
        kp = rows.keys  # C: the buffers
        sp = rows.sizes
        for i in range(len(rows)):
            _copy(ap, w, kp, i * 8, 8)
            ap[w + 8] = source & 0xFF
            ap[w + 9] = (source >> 8) & 0xFF
            ap[w + 10] = 0
            ap[w + 11] = 0
            _copy(ap, w + 12, sp, i * 4, 4)
            _put_key(ap, w + 16, at)
            at += _size_at(sp, i * 4)
            w += 24
        bounds.append(w)
    b = bytearray(n * 24)
    while len(bounds) > 2:
        merged = [0]
        for i in range(0, len(bounds) - 1, 2):
            if i + 2 < len(bounds):
                _merge_two(a, b, bounds[i], bounds[i + 1], bounds[i + 2])
                merged.append(bounds[i + 2])
            else:
                b[bounds[i] : bounds[i + 1]] = a[bounds[i] : bounds[i + 1]]
                merged.append(bounds[i + 1])
        a, b = b, a
        bounds = merged
    return a


def _merge_two(a: bytearray, b: bytearray, lo, mid, hi) -> None:  # C types: key_rows.pxd
    """a[lo:mid] and a[mid:hi] (24-byte records, sorted by key) merged into b[lo:hi]; the
    left one first on equal keys."""
    ap = a  # C: the buffers
    bp = b
    i = lo
    j = mid
    w = lo
    while i < mid and j < hi:
        if _key_at(ap, j) < _key_at(ap, i):
            _copy(bp, w, ap, j, 24)
            j += 24
        else:
            _copy(bp, w, ap, i, 24)
            i += 24
        w += 24
    _copy(bp, w, ap, i, mid - i)
    w += mid - i
    _copy(bp, w, ap, j, hi - j)


COMPILED = is_compiled(__name__)  # this module, as it was loaded: the .so or the .py
