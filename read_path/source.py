"""The cluster as snapshot reads see it (the I/O part): the catalogue and TSOs from the GMS
(`cdc.cn_protocol`, the contract every CN follows: no CN needed), and plain read connections
to the DNs, whose results stay raw packets (column definitions and text rows are forwarded;
a page's rows are cut from the stream with their key split off, in C: `page_rows`).

A shard read is one autocommit SELECT: an InnoDB consistent read, which takes no lock and
waits for none, so the DNs' writers never wait for us."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import pymysql

from cdc.cn_protocol import dn_pool
from cdc.cn_protocol.catalogue import LogicalTable
from cdc.cn_protocol.catalogue_store import CatalogueStore
from cdc.cn_protocol.tso import TsoOracle
from cdc.config import Config, NodeConfig
from cdc.protocol.client import MysqlClient
from cdc.protocol.constants import Command
from cdc.protocol.packets import (
    ERR,
    MAX_CHUNK,
    OK,
    ProtocolError,
    ServerError,
    is_eof,
    parse_err,
    read_lenenc_int,
)
from cdc.protocol.sql_error import SqlError
from read_path.key_rows import IntRows, cut_packets, key_and_data
from read_path.page_rows import keyed_packets, keyed_rows
from topology import SchemaHistory, SchemaRecord, gms

ER_UNKNOWN = 1105
ER_NO_SUCH_TABLE = 1146
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
        with self._reading():
            await self.client.send_command(Command.QUERY, sql.encode())
            first, columns, rows, last = await asyncio.wait_for(
                self.client.read_result(), QUERY_TIMEOUT_S
            )
        for packet in (first, last):
            self._check(packet)
        if first[0] == OK:
            return [], []
        return columns, rows

    async def keyed_page(self, sql: str, nkey: int, integer_key: bool) -> list[tuple]:
        """The rows of one statement whose first `nkey` columns are a primary key, each as
        (key, the rest of its text row) (`page_rows`): cut from the DN's stream and split in
        one pass in C, with no packet object per row."""
        with self._reading():
            await self.client.send_command(Command.QUERY, sql.encode())
            return await asyncio.wait_for(self._keyed_rows(nkey, integer_key), QUERY_TIMEOUT_S)

    async def _keyed_rows(self, nkey: int, integer_key: bool) -> list[tuple]:
        data, pos = await self._columns()
        if data is None:
            return []
        rows: list[tuple] = []
        while True:
            pos, last = keyed_packets(data, pos, nkey, integer_key, rows)
            if last is not None:  # nothing follows the result of one statement
                self._check(last)
                return rows
            if data[pos : pos + 3] == b"\xff\xff\xff":  # a row of 16 MB or more: joined here
                row, data, pos = await self._packet(data, pos)
                rows.extend(keyed_rows([row], nkey, integer_key))
            else:
                data, pos = await self._more(data, pos), 0

    async def int_page(self, sql: str) -> IntRows:
        """The rows of one statement whose first column is a one-column integer primary key
        that fits 64 bits, held as buffers (`key_rows`): no Python object per row."""
        with self._reading():
            await self.client.send_command(Command.QUERY, sql.encode())
            return await asyncio.wait_for(self._int_rows(), QUERY_TIMEOUT_S)

    async def _int_rows(self) -> IntRows:
        rows = IntRows()
        data, pos = await self._columns()
        if data is None:
            return rows
        while True:
            pos, last = cut_packets(data, pos, rows)
            if last is not None:  # nothing follows the result of one statement
                self._check(last)
                return rows
            if data[pos : pos + 3] == b"\xff\xff\xff":  # a row of 16 MB or more: joined here
                row, data, pos = await self._packet(data, pos)
                rows.add(*key_and_data(row))
            else:
                data, pos = await self._more(data, pos), 0

    async def _columns(self) -> tuple[bytes | None, int]:
        """Past a result's column definitions: the bytes read and where its rows start (None:
        the statement returned no result set)."""
        first, data, pos = await self._packet(b"", 0)
        if first[0] in (OK, ERR):
            self._check(first)
            return None, 0
        count, _ = read_lenenc_int(first, 0)
        for _ in range(count or 0):
            _, data, pos = await self._packet(data, pos)
        eof, data, pos = await self._packet(data, pos)
        if not is_eof(eof):
            raise ProtocolError("expected EOF after column definitions")
        return data, pos

    async def _packet(self, data: bytes, pos: int) -> tuple[bytes, bytes, int]:
        """The payload of the packet at data[pos:] (read whole, a split one joined), the
        bytes and the position after it."""
        parts = []
        while True:
            if len(data) - pos >= 4:
                length = int.from_bytes(data[pos : pos + 3], "little")
                if len(data) - pos - 4 >= length:
                    parts.append(data[pos + 4 : pos + 4 + length])
                    pos += 4 + length
                    if length < MAX_CHUNK:
                        return b"".join(parts), data, pos
                    continue
            data, pos = await self._more(data, pos), 0

    async def _more(self, data: bytes, pos: int) -> bytes:
        """data[pos:] and more from the stream: one read at least, and until the packet whose
        header is there is whole (one join, not a copy per read of a large row)."""
        rest = data[pos:]
        need = 4 + int.from_bytes(rest[:3], "little") if len(rest) >= 4 else 0
        parts, have = [rest], len(rest)
        while True:
            more = await self.client.read_raw()
            parts.append(more)
            have += len(more)
            if have >= need:
                return b"".join(parts)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """A connection's failure as the statement's error."""
        try:
            yield
        except (OSError, ProtocolError, TimeoutError, asyncio.IncompleteReadError) as exc:
            raise SqlError(
                f"reading {self.where} failed ({exc or type(exc).__name__}); run it again",
                ER_UNKNOWN,
                "HY000",
            ) from None

    def _check(self, packet: bytes) -> None:
        if packet[0] == ERR:
            raise SqlError(f"{self.where}: {parse_err(packet)}", ER_UNKNOWN, "HY000")

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

    async def schema_history(
        self, db: str, table: str, tso: int
    ) -> tuple[dict | None, list[SchemaRecord]]:
        """The logical schema of `db.table` at `tso` (None: no record, the table did not
        exist), and every DDL record of it after `tso`, in order (the GMS's schema history,
        read in a worker thread: pymysql blocks)."""

        def read() -> tuple[dict | None, list[SchemaRecord]]:
            conn = gms.connect(self.config.gms)
            try:
                history = SchemaHistory(conn, self.config.pipeline.meta_database)
                after = history.after(db, table, tso)
                at = history.at(db, table, tso) if after else None
                return (None if at is None else at.schema), after
            except pymysql.err.ProgrammingError as exc:
                if exc.args and exc.args[0] == ER_NO_SUCH_TABLE:
                    return None, []  # no pipeline wrote one: a DDL after P is met by the scan
                raise
            finally:
                conn.close()

        try:
            return await asyncio.to_thread(read)
        except Exception as exc:
            raise SqlError(
                f"cannot read the schema history of {db}.{table} from the GMS "
                f"({self.config.gms.host}:{self.config.gms.port}): {exc}",
                ER_UNKNOWN,
                "HY000",
            ) from None

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
