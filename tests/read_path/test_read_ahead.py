"""The shards' reads run ahead of the chunks (snapshot/read_ahead.py), with fake shards: every
key once, in order, within the chunks' bounds; the rows held never above the budget, however
slowly the statement sends; a read's failure raised where the statement waits."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from dumper.server.handlers import SqlError
from read_path.read_ahead import ReadAhead


def shards_of(keys: int, shards: int) -> list[list[int]]:
    return [list(range(s, keys, shards)) for s in range(shards)]


async def read_all(data, dns, page, budget, send_delay=0.0):
    tso = itertools.count(1)
    peak = [0]
    box = []

    async def read_page(i, after):
        peak[0] = max(peak[0], box[0].held)  # with this read's page reserved
        await asyncio.sleep(0)
        return [((k,), f"row{k}") for k in data[i] if after is None or (k,) > after][:page]

    async def next_tso():
        return next(tso)

    reads = ReadAhead(dns, read_page, page, budget, next_tso)
    box.append(reads)
    reads.start()
    out, lo, highs = [], None, []
    try:
        while True:
            hi, current, high = await reads.next_chunk()
            peak[0] = max(peak[0], reads.held)
            assert all(lo is None or row[0] > lo for rows in current for row in rows)
            assert all(hi is None or row[0] <= hi for rows in current for row in rows)
            out.extend(row for rows in current for row in rows)
            highs.append(high)
            await asyncio.sleep(send_delay)  # the statement sends the chunk
            reads.release(sum(len(rows) for rows in current))
            if hi is None:
                break
            lo = hi
    finally:
        reads.close()
    return out, highs, peak[0]


@pytest.mark.parametrize("send_delay", [0.0, 0.002])
def test_every_key_once_in_chunks_within_the_budget(send_delay):
    data = shards_of(500, 4)
    dns = [[0, 2], [1, 3]]  # two DNs, two shards each
    budget = 4 * 4 * 7
    out, highs, peak = asyncio.run(read_all(data, dns, 7, budget, send_delay))
    assert sorted(k for (k,), _ in out) == list(range(500))
    assert highs == sorted(highs) and len(set(highs)) == len(highs)
    assert peak <= budget
    if send_delay:  # a slow statement: the reads went on as far as the budget let them
        assert peak > budget - 7


def test_a_budget_that_could_stall_is_refused():
    with pytest.raises(ValueError):
        ReadAhead([[0, 1]], None, 10, 39, None)  # type: ignore[arg-type]


def test_a_failed_read_is_the_statements_error():
    async def main():
        async def read_page(i, after):
            if after is not None:
                raise SqlError("dn1 down", 1105)
            return [((i,), b"r")]

        async def tso():
            return 1

        reads = ReadAhead([[0]], read_page, 1, 4, tso)
        reads.start()
        try:
            await reads.next_chunk()  # the first page's chunk
            with pytest.raises(SqlError, match="dn1 down"):
                await reads.next_chunk()
        finally:
            reads.close()

    asyncio.run(main())


def test_closing_stops_the_reads():
    """The statement ends (a LIMIT met, the client gone) while the reads wait for room: they
    stop, and read nothing more."""

    async def main():
        reads_made = []

        async def read_page(i, after):
            reads_made.append(i)
            start = 0 if after is None else after[0] + 1
            return [((k,), b"r") for k in range(start, start + 2)]

        async def tso():
            return 1

        reads = ReadAhead([[0, 1]], read_page, 2, 4 * 2 * 2, tso)
        reads.start()
        await reads.next_chunk()  # nothing given back: the reads fill the budget and wait
        for _ in range(20):
            await asyncio.sleep(0)
        task, made = reads._task, len(reads_made)
        assert reads.held + 2 > reads.budget_rows and not task.done()
        reads.close()
        for _ in range(5):  # the cancellation reaches the round's tasks, then the task
            await asyncio.sleep(0)
        assert task.done() and len(reads_made) == made

    asyncio.run(main())
