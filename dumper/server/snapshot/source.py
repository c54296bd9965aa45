"""The cluster as snapshot reads see it (the I/O part): the catalogue and TSOs from the GMS
(`cdc.cn_protocol`, the contract every CN follows: no CN needed), and plain read connections
to the DNs, whose results stay raw packets (column definitions and text rows are forwarded).

A shard read is one autocommit SELECT: an InnoDB consistent read, which takes no lock and
waits for none, so the DNs' writers never wait for us."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from cdc.cn_protocol import dn_pool
from cdc.cn_protocol.catalogue import LogicalTable
from cdc.cn_protocol.catalogue_store import CatalogueStore
from cdc.cn_protocol.tso import TsoOracle
from cdc.config import Config, NodeConfig
from cdc.protocol.client import MysqlClient
from cdc.protocol.constants import Command
from cdc.protocol.packets import ERR, OK, ProtocolError, ServerError, parse_err
from dumper.server.handlers import SqlError

ER_UNKNOWN = 1105
CONNECT_TIMEOUT_S = 5.0
# A statement's round trip to a DN: a page read is short; a DN that does not answer in this
# long is reported rather than waited for.
QUERY_TIMEOUT_S = 60.0


@dataclass(slots=True)
class Shard:
    dn: int
    name: str  # `db_p`.`t_p0003`


class DnReader:
    """One read connection to a DN (not shared: one statement's reads run in order on it)."""

    def __init__(self, node: NodeConfig, client: MysqlClient) -> None:
        self.node = node
        self.client = client

    @property
    def where(self) -> str:
        return f"{self.node.name or 'dn' + str(self.node.id)} ({self.node.host}:{self.node.port})"

    async def query(self, sql: str) -> tuple[list[bytes], list[bytes]]:
        """(column definition packets, text row packets) of one statement."""
        try:
            await self.client.send_command(Command.QUERY, sql.encode())
            first, columns, rows, last = await asyncio.wait_for(
                self.client.read_result(), QUERY_TIMEOUT_S
            )
        except (OSError, ProtocolError, TimeoutError, asyncio.IncompleteReadError) as exc:
            raise SqlError(
                f"reading {self.where} failed ({exc or type(exc).__name__}); run it again",
                ER_UNKNOWN,
                "HY000",
            ) from None
        for packet in (first, last):
            if packet[0] == ERR:
                err = parse_err(packet)
                raise SqlError(f"{self.where}: {err}", ER_UNKNOWN, "HY000")
        if first[0] == OK:
            return [], []
        return columns, rows

    def close(self) -> None:
        self.client.close()


class SnapshotSource:
    """Built once per server from the whole configuration (`[gms]`, `[[dn]]`, `[cn]`)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._tso = TsoOracle(self._connect_gms, config.cn.catalogue_database)

    async def _connect_gms(self):
        return await dn_pool.connect(self.config.gms)

    def _store(self) -> CatalogueStore:
        return CatalogueStore(self._connect_gms, self.config.cn.catalogue_database)

    async def table(self, db: str, name: str) -> LogicalTable | None:
        try:
            catalogue = await self._store().load()
        except Exception as exc:  # the GMS down or not initialised: say so, keep the session
            raise SqlError(
                f"cannot read the CN catalogue from the GMS ({self.config.gms.host}:"
                f"{self.config.gms.port}): {exc}",
                ER_UNKNOWN,
                "HY000",
            ) from None
        if not catalogue.has(db, name):
            return None
        table = catalogue.table(db, name)
        if table.is_broadcast and not table.placement:
            table.placement = catalogue.dns[:1]  # the first DN's copy, as the binlog carries
        return table

    def shards(self, table: LogicalTable) -> list[Shard]:
        if table.is_broadcast:
            return [Shard(table.placement[0], table.physical_name(None))]
        return [Shard(dn, table.physical_name(i)) for i, dn in enumerate(table.placement)]

    async def tso(self) -> int:
        try:
            return await self._tso.next()
        except Exception as exc:
            raise SqlError(
                f"cannot take a TSO from the GMS for the read's high watermark: {exc}",
                ER_UNKNOWN,
                "HY000",
            ) from None

    async def reader(self, dn_id: int) -> DnReader:
        node = await self._node(dn_id)
        try:
            client = await MysqlClient.connect(
                node.host, node.port, node.user, node.password, timeout=CONNECT_TIMEOUT_S
            )
        except (OSError, ProtocolError, ServerError, TimeoutError) as exc:
            raise SqlError(
                f"dn{dn_id} ({node.host}:{node.port}) is down or refuses connections: {exc}",
                ER_UNKNOWN,
                "HY000",
            ) from None
        reader = DnReader(node, client)
        # TIMESTAMPs in UTC: the before-images from the binlog are spelled in UTC too.
        await reader.query("SET time_zone = '+00:00'")
        return reader

    async def _node(self, dn_id: int) -> NodeConfig:
        for node in self.config.dn:
            if node.id == dn_id:
                return node
        for node in await self._store().dns():  # a DN added by a scale-out since the start
            if node.id == dn_id:
                return node
        raise SqlError(f"dn{dn_id} is in the catalogue but has no address", ER_UNKNOWN, "HY000")

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._tso.close()
