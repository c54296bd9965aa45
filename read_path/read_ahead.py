"""A statement's shard reads, run ahead of the chunks that emit them (docs/snapshot-reads.md,
steps 2, 5 and 6): a task reads every shard page by page (the DNs in parallel, one DN's shards
in order on its one connection), closes a chunk after each round of reads (its bound, its rows
taken out of the buffers, then its high watermark TSO) and queues it; the statement takes the
chunks in order and waits for each one's watermark. So the watermark waits of several chunks,
the sending of one and the reads of the next all overlap: a wait (about one heartbeat) is paid
once per read rather than once per chunk, as long as the budget holds enough rows to cover it.

Why still exact: a chunk's rows were read before its TSO was taken (the round of reads ended
first), and every later read returns keys above its bound only (a page starts after its shard's
last key read, and the bound is at most that), so each chunk is the step-5 chunk of the argument
whatever else runs meanwhile; the queue keeps them in order, and their TSOs increase.

Memory: the rows read and not yet sent stay within `budget_rows`: a page is read only while the
rows held (buffered, queued, being sent, and a page for each read under way) leave room for a
whole page; the statement gives a chunk's rows back once it has sent them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from read_path.chunks import Key, chunk_bound, take_until
from read_path.key_rows import IntRows

# (the rows of shard i after key `after`: at most one page, in key order, each (key, payload))
ReadPage = Callable[[int, "Key | None"], Awaitable[list]]
Chunk = tuple  # (hi: Key | None, the rows of each shard up to hi: list[Rows], high: TSO)
# A shard's rows in key order: a list of (key, payload), or buffers (`key_rows.IntRows`).
Rows = list | IntRows


class ReadAhead:
    def __init__(
        self,
        dns: list[list[int]],
        read_page: ReadPage,
        page_rows: int,
        budget_rows: int,
        tso: Callable[[], Awaitable[int]],
        empty: Callable[[], Rows] = list,
    ) -> None:
        shards = sum(len(indexes) for indexes in dns)
        # A round must always be able to read the slowest shard once the statement has sent
        # everything queued: the buffers then hold under two pages a shard, and each DN may
        # have one page's read under way.
        if budget_rows < (2 * shards + len(dns)) * page_rows:
            raise ValueError("a read-ahead budget below two pages a shard can stall the read")
        self.dns = dns  # shard indexes by DN
        self.read_page = read_page
        self.page_rows = page_rows
        self.budget_rows = budget_rows
        self.tso = tso
        self.buffers: list[Rows] = [empty() for _ in range(shards)]
        self.lasts: list[Key | None] = [None] * shards
        self.exhausted = [False] * shards
        self.held = 0  # rows read and not given back, plus a page per read under way
        self._freed = asyncio.Event()
        self._chunks: asyncio.Queue = asyncio.Queue()  # bounded by the budget
        self._task: asyncio.Task | None = None
        self._closed = False

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def close(self) -> None:
        """Stop reading (the statement ended or failed): the task is cancelled, and stops at its
        next step should a read's end swallow the cancellation; the caller closes the DN
        connections it read on."""
        self._closed = True
        self._freed.set()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def next_chunk(self) -> Chunk:
        """The next chunk: (its bound, None for the last; each shard's rows up to the bound;
        its high watermark TSO). A failure of the reads is raised here."""
        item = await self._chunks.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def release(self, rows: int) -> None:
        """`rows` of a chunk were sent: room for more reads."""
        self.held -= rows
        self._freed.set()

    async def _run(self) -> None:
        try:
            await self._round()
            while True:
                hi = chunk_bound(self.lasts, self.exhausted)
                current = [_take_until(buf, hi) for buf in self.buffers]
                high = await self.tso()  # after the round: every row of `current` was read
                self._chunks.put_nowait((hi, current, high))
                if hi is None or self._closed:
                    return
                await self._round()  # keys above hi only: later chunks'
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the statement's error, raised where it waits
            self._chunks.put_nowait(exc)

    async def _round(self) -> None:
        """Every shard holding less than a page read once more."""
        await _together(*(self._dn(indexes) for indexes in self.dns))

    async def _dn(self, indexes: list[int]) -> None:
        for i in indexes:
            if self.exhausted[i] or len(self.buffers[i]) >= self.page_rows:
                continue
            while self.held + self.page_rows > self.budget_rows and not self._closed:
                self._freed.clear()
                await self._freed.wait()
            if self._closed:
                return
            self.held += self.page_rows  # reserved for the read under way
            try:
                rows = await self.read_page(i, self.lasts[i])
            finally:
                self.held -= self.page_rows
            self.held += len(rows)
            self.buffers[i].extend(rows)
            if len(rows) < self.page_rows:
                self.exhausted[i] = True
            if len(rows):
                self.lasts[i] = _last(rows)


def _take_until(rows: Rows, hi: Key | None) -> Rows:
    return take_until(rows, hi) if isinstance(rows, list) else rows.take_until(hi)


def _last(rows: Rows) -> Key | None:
    return rows[-1][0] if isinstance(rows, list) else rows.last()


async def _together(*coros) -> None:
    """`coros` at once; the first failure cancels the others and is raised as it is (an
    SqlError stays the statement's error)."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
