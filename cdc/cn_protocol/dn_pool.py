"""Connection pools to the DNs (autocommit, utf8mb4; `dn_conn.py`); a broken connection is
discarded. `connect` opens one connection of the same client (the GMS: TSO, catalogue)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from cdc.cn_protocol.dn_conn import DnConnection, DnPool
from cdc.cn_protocol.errors import CnError
from cdc.config import NodeConfig


async def connect(node: NodeConfig, timeout: float = 5.0) -> DnConnection:
    return await DnConnection.connect(
        node.host, node.port, node.user, node.password, multi_statements=False, timeout=timeout
    )


class DnPools:
    """Two pools per DN (`dn_conn.DnPool`, connections opened on first use): one for
    transaction branches (`acquire`), one for short control statements (`connection`, `execute`: commit records, XA COMMIT,
    recovery). Apart because a transaction holds its branches while it writes its commit
    records: with one pool, as many concurrent transactions as connections would each wait
    for a connection none of them gives back."""

    def __init__(self, nodes: list[NodeConfig], maxsize: int = 64):
        self._nodes = {n.id: n for n in nodes}
        self._pools: dict[tuple[int, bool], DnPool] = {}
        self._maxsize = maxsize
        self._control_maxsize = max(8, maxsize // 2)
        # A transaction holds at most one branch connection per DN; admitting at most `maxsize`
        # transactions with branches at once means a branch pool never runs dry under them
        # (otherwise two transactions can each hold what the other waits for, on two DNs).
        self.admission = asyncio.Semaphore(maxsize)

    def node(self, dn_id: int) -> NodeConfig:
        try:
            return self._nodes[dn_id]
        except KeyError:
            raise CnError(
                f"DN {dn_id} is in the catalogue but not in the configuration "
                f"(have {sorted(self._nodes)}); fix [[dn]] in cdc.toml"
            ) from None

    def knows(self, dn_id: int) -> bool:
        return dn_id in self._nodes

    @property
    def nodes(self) -> list[NodeConfig]:
        return list(self._nodes.values())

    def add_node(self, node: NodeConfig) -> None:
        self._nodes[node.id] = node

    async def _pool(self, dn_id: int, control: bool = False) -> DnPool:
        key = (dn_id, control)
        pool = self._pools.get(key)
        if pool is not None:
            return pool
        node = self.node(dn_id)
        maxsize = self._control_maxsize if control else self._maxsize
        # Branch connections send XA START / XA END + XA PREPARE along with another statement
        # (branch.py); the router lets no `;` through (router.route).
        multi = not control

        async def connect() -> DnConnection:
            return await DnConnection.connect(
                node.host, node.port, node.user, node.password, multi, timeout=5
            )

        pool = DnPool(connect, maxsize)
        self._pools[key] = pool
        return pool

    async def warm(self, dn_ids: list[int], connections: int) -> None:
        """Open up to `connections` branch and control connections per DN now rather than on
        first use: logins are CPU for both sides, and a load that starts with all of them at
        once delays its first transactions by up to a second on a small machine (benches)."""

        async def fill(dn_id: int, control: bool) -> None:
            pool = await self._pool(dn_id, control)
            n = min(connections, pool.maxsize) - pool.size
            conns = await asyncio.gather(*(pool.acquire() for _ in range(max(n, 0))))
            for conn in conns:
                pool.release(conn)

        await asyncio.gather(*(fill(dn, c) for dn in dn_ids for c in (False, True)))

    async def acquire(self, dn_id: int, control: bool = False) -> DnConnection:
        return await (await self._pool(dn_id, control)).acquire()

    def release(
        self, dn_id: int, conn: DnConnection, discard: bool = False, control: bool = False
    ) -> None:
        if discard:
            conn.close()
        pool = self._pools.get((dn_id, control))
        if pool is not None:
            pool.release(conn)

    @contextlib.asynccontextmanager
    async def connection(self, dn_id: int) -> AsyncIterator[DnConnection]:
        """An autocommit connection; discarded if the block raises (its state is unknown)."""
        conn = await self.acquire(dn_id, control=True)
        try:
            yield conn
        except BaseException:
            self.release(dn_id, conn, discard=True, control=True)
            raise
        self.release(dn_id, conn, control=True)

    async def execute(self, dn_id: int, sql: str, params: tuple | None = None) -> list[tuple]:
        async with self.connection(dn_id) as conn, conn.cursor() as cur:
            await cur.execute(sql, params)
            return list(await cur.fetchall()) if cur.description else []

    async def close(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
        for pool in pools:
            await pool.wait_closed()
