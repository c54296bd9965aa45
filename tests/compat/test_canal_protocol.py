"""Alibaba Canal cannot run here (no JVM deployment, no Maven), so this replays, over raw
sockets, the exact statements and commands Canal 1.1.x sends (docs/compatibility.md, its row):
its meta connection (format checks, tsdb snapshot with the multi-statement SHOW CREATE TABLE
batch, position search), its dump connection (settings, checksum, REGISTER_SLAVE, BINLOG_DUMP
with flags 0x0002) and its KILL on disconnect, with Canal's capability flags (MULTI_STATEMENTS,
no DEPRECATE_EOF: classic EOF packets). The stream is decoded with our codec and must hold,
event for event, the transactions of the global binlog files, CRCs included."""

from __future__ import annotations

import asyncio
import struct

import pytest

from cdc.binlog import checksum
from cdc.binlog.constants import EventType
from cdc.binlog.events import cts_mark_text, decode_event, parse_cts
from cdc.binlog.fde import FormatDescription
from cdc.protocol import client as client_module
from cdc.protocol.client import MysqlClient, ResultSet
from cdc.protocol.constants import Capability as Cap
from cdc.protocol.constants import Command, Status
from cdc.protocol.packets import is_eof, parse_err, read_lenenc_int, read_lenenc_str
from tests.e2e.global_binlog import read_global_binlog

# MysqlConnector's capabilities: no DEPRECATE_EOF, no CONNECT_ATTRS.
CANAL_CAPABILITIES = (
    Cap.LONG_PASSWORD
    | Cap.LONG_FLAG
    | Cap.PROTOCOL_41
    | Cap.INTERACTIVE
    | Cap.TRANSACTIONS
    | Cap.SECURE_CONNECTION
    | Cap.MULTI_STATEMENTS
    | Cap.PLUGIN_AUTH
)
SLAVE_ID = 1234  # canal.instance.mysql.slaveId
DUMP_FLAGS = 0x0002  # BINLOG_SEND_ANNOTATE_ROWS_EVENT, always set by Canal
ARTIFICIAL = 0x0020


@pytest.fixture
def canal_caps(monkeypatch):
    """MysqlClient announces Canal's capability set instead of its own."""
    monkeypatch.setattr(client_module, "CLIENT_CAPABILITIES", CANAL_CAPABILITIES)


async def connect(pipeline) -> MysqlClient:
    client = await MysqlClient.connect(
        pipeline.host, pipeline.port, pipeline.user, pipeline.password
    )
    assert client.handshake is not None
    assert client.handshake.capabilities & Cap.MULTI_STATEMENTS
    return client


async def read_result_set(client: MysqlClient) -> tuple[ResultSet, int]:
    """One result set of a multi-statement answer, with the server status of its final EOF."""
    first = await client.read_packet()
    if first[0] == 0xFF:
        raise parse_err(first)
    count, _ = read_lenenc_int(first, 0)
    result = ResultSet()
    for _ in range(count or 0):
        col, pos = await client.read_packet(), 0
        fields = []
        for _ in range(6):
            value, pos = read_lenenc_str(col, pos)
            fields.append(value)
        result.columns.append((fields[4] or b"").decode())
    assert is_eof(await client.read_packet()), "classic EOF after the column definitions"
    while True:
        row = await client.read_packet()
        if is_eof(row):
            return result, struct.unpack_from("<H", row, 3)[0]
        pos, values = 0, []
        for _ in range(count or 0):
            value, pos = read_lenenc_str(row, pos)
            values.append(None if value is None else value.decode())
        result.rows.append(tuple(values))


async def query_multi(client: MysqlClient, sql: str) -> list[ResultSet]:
    await client.send_command(Command.QUERY, sql.encode())
    out = []
    while True:
        result, status = await read_result_set(client)
        out.append(result)
        if not status & Status.MORE_RESULTS_EXISTS:
            return out


async def meta_connection(pipeline) -> dict[str, object]:
    """MysqlEventParser.preDump + TableMetaTSDB snapshot + findStartPosition, in Canal's order."""
    meta = await connect(pipeline)
    seen: dict[str, object] = {}
    try:
        for name, expected in (("binlog_format", "ROW"), ("binlog_row_image", "FULL")):
            res = await meta.query(f"show variables like '{name}'")
            assert len(res.columns) == 2, res.columns  # Canal: exactly 2 columns, else fatal
            assert res.rows == [(name, expected)]
        for prefix in ("rds", "polarx"):  # two spaces, one backslash, as on the wire
            await meta.query(f"show global variables  like '{prefix}\\_%'")
        databases = [r[0] for r in (await meta.query("show databases")).rows]
        assert {"bank", "shop"} <= set(databases)
        tables = []
        for db in ("bank", "shop"):
            res = await meta.query(f"show full tables from `{db}` where Table_type = 'BASE TABLE'")
            tables += [(db, r[0]) for r in res.rows]
            assert all(r[1] == "BASE TABLE" for r in res.rows)
        batch = ";".join(f"show create table `{db}`.`{t}`" for db, t in tables)
        creates = await query_multi(meta, batch)
        assert [r.rows[0][0] for r in creates] == [t for _, t in tables]
        seen["creates"] = {t: r.rows[0][1] for (_, t), r in zip(tables, creates, strict=True)}
        status = await meta.query("show master status")
        assert len(status.columns) >= 2 and status.rows
        seen["master"] = status.rows[0]
        first = await meta.query("show binlog events limit 1")
        assert first.columns[:2] == ["Log_name", "Pos"] and first.rows[0][:2] == (
            "binlog.000001",
            "4",
        )
        server_id = await meta.query("show variables like 'server_id'")
        assert len(server_id.columns) == 2
        seen["server_id"] = int(server_id.rows[0][1])
    finally:
        await meta.quit()
    return seen


def register_slave_body(host: str, user: str, password: str, port: int) -> bytes:
    out = struct.pack("<I", SLAVE_ID)
    for text in (host, user, password):
        out += bytes((len(text),)) + text.encode()
    return out + struct.pack("<HII", port, 0, 0)


async def start_dump(pipeline) -> MysqlClient:
    """MysqlConnection.dump(): updateSettings, loadBinlogChecksum, loadVersionComment,
    sendRegisterSlave, sendBinlogDump."""
    dump = await connect(pipeline)
    for sql in (
        "set wait_timeout=9999999",
        "set net_write_timeout=7200",
        "set net_read_timeout=7200",
        "set names 'binary'",
        "set @master_binlog_checksum= @@global.binlog_checksum",
        "set @slave_uuid=uuid()",
        "SET @mariadb_slave_capability='4'",
        "SET @master_heartbeat_period=15000000000",
    ):
        await dump.query(sql)  # Canal only logs failures here; we insist on OK
    assert (await dump.query("select @@global.binlog_checksum")).rows == [("CRC32",)]
    comment = await dump.query("select @@version_comment")
    assert len(comment.rows) == 1
    await dump.send_command(
        Command.REGISTER_SLAVE,
        register_slave_body("127.0.0.1", pipeline.user, pipeline.password, 11111),
    )
    reply = await dump.read_packet()
    assert reply[0] == 0x00, parse_err(reply) if reply[0] == 0xFF else reply
    body = struct.pack("<IHI", 4, DUMP_FLAGS, SLAVE_ID) + b"binlog.000001"
    await dump.send_command(Command.BINLOG_DUMP, body)
    return dump


async def read_stream(dump: MysqlClient, last_tso: int) -> tuple[list[bytes], list]:
    """Raw events until the CTS mark of `last_tso`; and the transactions decoded on the way."""
    events: list[bytes] = []
    txns: list = []
    fde: FormatDescription | None = None
    tables: dict = {}
    changes: list = []
    while True:
        payload = await asyncio.wait_for(dump.read_packet(), 20)
        if payload[0] == 0xFF:
            raise parse_err(payload)
        assert payload[0] == 0x00, f"unexpected packet {payload[:9]!r}"
        event = payload[1:]
        # Canal starts with FormatDescriptionLogEvent(4, CRC32): every event carries a CRC,
        # the fake ROTATE before the FDE included.
        checksum.verify(event)
        events.append(event)
        code = event[4]
        if code == EventType.FORMAT_DESCRIPTION:
            fde = FormatDescription.parse(event[19:])
            continue
        if fde is None:
            continue  # the fake ROTATE, checked by the caller
        ev = decode_event(event, fde)
        if code == EventType.TABLE_MAP:
            tables[ev.body.table_id] = ev.body
        elif code in (30, 31, 32):
            tm = tables[ev.body.table_id]
            rows = ev.body.decode_rows(tm.columns())
            changes.append((tm.schema.decode(), tm.table.decode(), ev.body.kind, rows))
        elif (mark := cts_mark_text(event)) is not None and (tso := parse_cts(mark)) is not None:
            txns.append((tso, changes))
            changes = []
            if tso == last_tso:
                return events, txns


async def test_canal_sequence_streams_the_global_binlog(pipeline, canal_caps):
    files = read_global_binlog(pipeline.binlog_dir)
    meta = await meta_connection(pipeline)
    assert meta["master"][:2] == (
        "binlog.000001",
        str((pipeline.binlog_dir / "binlog.000001").stat().st_size),
    )
    assert "`balance` bigint(20) NOT NULL" in meta["creates"]["accounts"]
    assert meta["server_id"] == pipeline.config.dumper.server_id

    dump = await start_dump(pipeline)
    try:
        # While the dump runs, the registration is visible, as on MySQL.
        other = await connect(pipeline)
        hosts = await other.query("show slave hosts")
        assert any(r[0] == str(SLAVE_ID) for r in hosts.rows), hosts.rows
        events, txns = await read_stream(dump, files[-1].tso)
        # Canal's disconnect: KILL CONNECTION from a fresh connection, then the dump ends.
        await other.query(f"KILL CONNECTION {dump.handshake.connection_id}")
        await other.quit()
        with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
            while True:
                packet = await asyncio.wait_for(dump.read_packet(), 10)
                assert packet[0] != 0x00 or packet[5] == EventType.HEARTBEAT, packet[:9]
    finally:
        dump.close()

    rotate = events[0]
    ts, code, server_id = struct.unpack_from("<IBI", rotate, 0)
    log_pos, flags = struct.unpack_from("<IH", rotate, 13)
    assert (ts, code, log_pos, flags & ARTIFICIAL) == (0, EventType.ROTATE, 0, ARTIFICIAL)
    assert rotate[19:-4] == struct.pack("<Q", 4) + b"binlog.000001"
    assert events[1][4] == EventType.FORMAT_DESCRIPTION
    # The same transactions as in the files, by logical name, with the same row images.
    assert txns == [(t.tso, t.changes) for t in files]
    names = {(db, table) for _, changes in txns for db, table, _, _ in changes}
    assert ("bank", "accounts") in names and ("shop", "orders") in names
    assert not any(db.endswith("_p") or db.startswith("__cdc") for db, _ in names), names
