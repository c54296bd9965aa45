"""The rows of a read keyed by one integer column, held as buffers (`key_rows`): the same
chunk bytes as the general path (`page_rows.keyed_packets`, `chunks.take_chunk`, each row
framed), on random pages of shards, changed keys and before-images; compiled and plain Python
(tests/test_compiled.py runs this module both ways)."""

from __future__ import annotations

import random

import pytest

from cdc.protocol.framed_rows import FramedRows
from cdc.protocol.packets import MAX_CHUNK, frame
from dumper.server.wire.row_packets import frame_rows, stamp
from read_path.chunks import take_chunk
from read_path.key_rows import IntRows, cut_packets, key_and_data, merge_framed
from read_path.page_rows import keyed_packets
from read_path.values import text_row

EOF_PACKET = b"\xfe\x00\x00\x02\x00"


def _packets(rows: list[bytes]) -> bytes:
    return b"".join(frame(r, i)[0] for i, r in enumerate(rows))


def _row(rng: random.Random, key: int) -> bytes:
    fields = [str(key).encode()]
    for _ in range(rng.randint(0, 3)):
        fields.append(
            None
            if rng.random() < 0.2
            else bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
        )
    return text_row(fields)


def _keys(rng: random.Random, n: int) -> list[int]:
    pool = [rng.randint(-(2**63), 2**63 - 1) for _ in range(n // 4)]
    pool += [rng.randint(-1000, 10**6) for _ in range(n)]
    pool += [-(2**63), 2**63 - 1, 0, 10**18, -(10**18), 10**17 + 7]
    return sorted(set(pool))


@pytest.mark.parametrize("seed", range(12))
def test_chunks_as_the_general_path(seed: int) -> None:
    rng = random.Random(seed)
    keys = _keys(rng, rng.randint(0, 400))
    shards = rng.randint(1, 6)
    placed: list[list[int]] = [[] for _ in range(shards)]
    for k in keys:
        placed[rng.randrange(shards)].append(k)
    changed = sorted(rng.sample(keys, min(len(keys), rng.randint(0, 40))))
    # A changed key may be held by two shards (it moved), or by none (created after P).
    for k in changed[: len(changed) // 3]:
        placed[rng.randrange(shards)].append(k)
    for shard in placed:
        shard.sort()
    rows = {k: _row(rng, k) for k in keys}
    images = {k: (None if rng.random() < 0.3 else _row(rng, k)[len(str(k)) + 1 :]) for k in changed}

    general, fast = [], []
    for shard in placed:
        data = _packets([rows[k] for k in shard]) + frame(EOF_PACKET, 0)[0]
        cut = rng.randint(0, len(data))  # arrives in two reads
        into = IntRows()
        pos, last = cut_packets(data[:cut], 0, into)
        pos, last = cut_packets(data[pos:], 0, into)
        assert last is not None and last[0] == 0xFE
        out: list = []
        keyed_packets(data, 0, 1, True, out)
        general.append(out)
        fast.append(into)
        assert into.rows() == out
    hi = None if not keys or rng.random() < 0.3 else (rng.choice(keys),)
    parts = [f.take_until(hi) for f in fast]
    general = [[r for r in g if hi is None or r[0] <= hi] for g in general]
    mine = [(k,) for k in changed if hi is None or (k,) <= hi]
    expect = take_chunk(general, None, hi, {(k,): images[k] for k in changed}, lambda x: x, mine)
    skip = bytearray(b"".join(k[0].to_bytes(8, "little", signed=True) for k in mine))
    shown = IntRows()
    for (k,) in mine:
        if images[k] is not None:
            shown.add(k, images[k])
    data, count = merge_framed(parts, skip, shown)
    assert count == len(expect)
    assert bytes(data) == b"".join(frame(payload, 0)[0] for _k, payload in expect)
    # As sent: the payloads as the general path frames them, from the session's sequence id.
    rows = FramedRows(data, count)
    payloads = [payload for _k, payload in expect]
    assert list(rows) == payloads and rows[1:3] == payloads[1:3]
    seq = rng.randrange(256)
    framed, n, after = frame_rows(payloads, 0, len(payloads), seq)
    assert stamp(data, seq) == after and bytes(data) == bytes(framed) and n == count


def test_a_row_of_16_mb_is_split_into_packets() -> None:
    row = text_row([b"7", b"x" * 5, b"y" * MAX_CHUNK])
    big = row[2:]  # after the key field
    rows = IntRows()
    rows.add(*key_and_data(row))
    rows.add(9, b"\x01z")
    data, count = merge_framed([rows], bytearray(), IntRows())
    first, seq = frame(big, 0)
    assert count == 2 and list(FramedRows(data, count)) == [big, b"\x01z"]
    assert stamp(data, 0) == seq + 1 and bytes(data) == first + frame(b"\x01z", seq)[0]
