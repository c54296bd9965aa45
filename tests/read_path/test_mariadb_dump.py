"""The standard way to seed a replica, against the dumper while transfers run:
`mariadb-dump --single-transaction --master-data=1 --databases bank shop`, loaded into an empty
MariaDB, which then replicates from the position the dump printed; `cdc check` then finds every
logical table equal. With the mariadb flavour, `--gtid`: the replica starts from the dump's GTID
alone. A snapshot not exactly at that position would lose or repeat transfers
(the replica stops on a duplicate key, or the checksums differ)."""

from __future__ import annotations

import asyncio
import re
import shutil
import struct
import subprocess

import pytest

from cdc.protocol.constants import ColumnType as T
from cdc.protocol.constants import Command
from cdc_equipment.checks import run_check
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from cdc_equipment.local_cluster.testing import throwaway_server
from read_path.values import ColumnDef
from tests.dumper.test_replica import _query, _slave_status
from tests.read_path.binary_client import BinaryClient, fields
from tests.read_path.conftest import ACCOUNTS, BALANCE, MARIADB_DOMAIN, running_snap

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(shutil.which("mariadb-dump") is None, reason="mariadb-dump missing"),
]


@pytest.fixture
def empty_mariadb(tmp_path):
    replica = throwaway_server(tmp_path, server_id=7777)  # none of the binlog's server ids
    try:
        yield replica
    finally:
        replica.stop()


def test_mariadb_dump_seeds_a_replica_at_its_position(snap, alltypes, empty_mariadb):
    """... and once the replica has caught up, every statement's result set from the dumper
    equals the replica's byte for byte (`same_results`)."""
    dump_and_replicate(snap, empty_mariadb, ["--databases", "bank", "shop"], compare=True)


@pytest.fixture
def mariadb_snap(tmp_path):
    with running_snap(tmp_path / "mariadb", mariadb=True) as snap:
        yield snap


def test_mariadb_dump_gtid_seeds_a_replica_by_gtid(mariadb_snap, empty_mariadb):
    """The mariadb flavour: `--gtid` prints `SET GLOBAL gtid_slave_pos` with the GTID of the
    dump's snapshot (`@@gtid_binlog_pos` inside it); the replica then starts from that GTID
    alone (`MASTER_USE_GTID=slave_pos`)."""
    dump_and_replicate(mariadb_snap, empty_mariadb, ["--gtid", "--databases", "bank"], gtid=True)


def load_dump(conn, replica, port: int, dump: bytes) -> None:
    """`dump` (mariadb-dump's output, its CHANGE MASTER with a position) loaded into `replica`
    (`conn`: its connection), which is pointed at the dumper on `port` first."""
    _query(
        conn,
        f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={port}, "
        f"MASTER_USER='{DEFAULT_USER}', MASTER_PASSWORD='{DEFAULT_PASSWORD}'",
    )
    load = subprocess.run(
        ["mariadb", "-h127.0.0.1", f"-P{replica.port}", "-uroot"],
        input=dump,
        capture_output=True,
        timeout=300,
    )
    assert load.returncode == 0, load.stderr.decode(errors="replace")


def dump_and_replicate(
    snap, replica, args: list[str], *, gtid: bool = False, compare: bool = False
) -> None:
    """`mariadb-dump --single-transaction --master-data=1 <args>` under transfers, loaded into
    `replica`, which then replicates from the dump's position (its GTID with `gtid`) until
    `cdc check` finds it equal; `compare`: then `same_results`."""
    port = snap.config.dumper.port
    dump = subprocess.run(
        [
            "mariadb-dump",
            "--single-transaction",
            "--master-data=1",
            *args,
            "-h127.0.0.1",
            f"-P{port}",
            f"-u{DEFAULT_USER}",
            f"-p{DEFAULT_PASSWORD}",
        ],
        capture_output=True,
        timeout=300,
    )
    assert dump.returncode == 0, dump.stderr.decode(errors="replace")
    text = dump.stdout.decode(errors="replace")  # BLOBs are raw bytes
    position = re.search(r"CHANGE MASTER TO MASTER_LOG_FILE='([^']+)', MASTER_LOG_POS=(\d+)", text)
    assert position, text[:2000]
    accounts = text.split("INSERT INTO `accounts` VALUES")[1].split(";\n", 1)[0]
    balances = re.findall(r"\((\d+),(-?\d+),", accounts)
    assert len(balances) == ACCOUNTS
    assert sum(int(b) for _, b in balances) == ACCOUNTS * BALANCE  # one moment, under transfers
    if gtid:
        gtid_pos = re.search(r"SET GLOBAL gtid_slave_pos='([^']*)'", text)
        assert gtid_pos and gtid_pos[1].startswith(f"{MARIADB_DOMAIN}-"), text[:3000]

    conn = replica.connect()
    try:
        _query(conn, "SET GLOBAL server_id = 7777")  # none of the binlog's server ids
        _query(conn, "STOP SLAVE")
        _query(conn, "RESET SLAVE ALL")
        load_dump(conn, replica, port, dump.stdout)
        status = _slave_status(conn)
        if gtid:
            # From the GTID alone: the file/position the dump printed is not used.
            _query(conn, "CHANGE MASTER TO MASTER_USE_GTID=slave_pos")
            with conn.cursor() as cur:
                cur.execute("SELECT @@gtid_slave_pos")
                assert cur.fetchone()[0] == gtid_pos[1]
        else:
            assert (status["Master_Log_File"], status["Read_Master_Log_Pos"]) == (
                position[1],
                int(position[2]),
            )
        _query(conn, "START SLAVE")
        snap.stop_traffic()  # the check compares a still source with the replica
        try:
            report = run_check(snap.config, "127.0.0.1", replica.port, "root", "", timeout=120)
            status = _slave_status(conn)
            assert status.get("Last_SQL_Error", "") == "", status
            assert status.get("Last_IO_Error", "") == "", status
            assert report.equal, report.render()
            tables = {(c.db, c.table) for c in report.tables}
            assert ("bank", "accounts") in tables
            if not gtid:
                assert {("shop", "orders"), ("shop", "customers")} <= tables
            if compare:  # the replica holds the global binlog's end: so does a dumper's read
                same_results(snap, replica)
        finally:
            _query(conn, "STOP SLAVE")
            snap.start_traffic()
    finally:
        conn.close()


# Every column type the workloads write (bank.accounts, the shop tables) and every other
# (shop.alltypes); ORDER BY strings under their collation (utf8mb4_general_ci: case, accents
# and trailing spaces), WHERE, aggregates.
SAME_RESULTS = [
    "SELECT * FROM bank.accounts",
    *(f"SELECT * FROM shop.{t}" for t in ("customers", "orders", "order_events", "currencies")),
    "SELECT * FROM shop.alltypes",
    "SELECT id, vc, c FROM shop.alltypes ORDER BY vc, id",
    "SELECT id, c FROM shop.alltypes ORDER BY c DESC, vc, id LIMIT 2, 15",
    "SELECT id, f, vc FROM shop.alltypes WHERE vc = 'b' OR c IN ('E', 'a') OR f < 0.5",
    "SELECT COUNT(*), MIN(vc), MAX(vc), MIN(c), MAX(f), MIN(dt6) FROM shop.alltypes",
    # ENUMs in their members' order (basic < silver < gold), not their text's.
    "SELECT id, tier FROM shop.customers ORDER BY tier, id",
    "SELECT customer_id, id, status FROM shop.orders o ORDER BY status DESC, customer_id, id",
    "SELECT MIN(tier), MAX(tier) FROM shop.customers",
]


def same_results(snap, replica) -> None:
    """Each statement of SAME_RESULTS, in the text protocol and as a server-side prepared
    statement (the binary protocol), answers the same bytes from the dumper as from `replica`
    (a MariaDB replica of it at the same position): column definitions, rows, their order.
    Both sessions read TIMESTAMPs in UTC (a difference that stays: the dumper's are UTC
    whatever the session's time zone). A binary FLOAT is compared as the text protocol's 6
    digits give it back (`_as_dumped`): the replica's rows were written by mariadb-dump, which
    prints a FLOAT so, losing its last bits; the dumper's are the DNs' own (the shards' test in
    test_binary_protocol.py)."""
    dumper = ("127.0.0.1", snap.config.dumper.port, DEFAULT_USER, DEFAULT_PASSWORD)
    mariadb = ("127.0.0.1", replica.port, "root", "")
    for sql in SAME_RESULTS:
        mine, theirs = (asyncio.run(_results(*server, sql)) for server in (dumper, mariadb))
        assert mine[0] == theirs[0], f"text protocol, {sql}"
        assert mine[1][:2] == theirs[1][:2], f"binary protocol's columns, {sql}"
        assert _as_dumped(*mine[1][1:]) == theirs[1][2], _first_difference(sql, mine[1], theirs[1])
        assert len(mine[0][1]) > 0, sql


def _as_dumped(columns: list[bytes], rows: list[bytes]) -> list[bytes]:
    """Binary rows with each FLOAT as mariadb-dump's text of it (6 digits) reads back."""
    types = [ColumnDef.parse(c).type for c in columns]
    out = []
    for row in rows:
        parts = [row[: 1 + (len(columns) + 9) // 8]]
        for type_, value in zip(types, fields(columns, row).values(), strict=True):
            if value is not None and type_ == T.FLOAT:
                (f,) = struct.unpack("<f", value)
                value = struct.pack("<f", float(f"{f:.6g}"))
            parts.append(value or b"")
        out.append(b"".join(parts))
    return out


def _first_difference(sql: str, mine: tuple, theirs: tuple) -> str:
    for a, b in zip(mine[2], theirs[2], strict=False):
        if a != b:
            fa, fb = fields(mine[1], a), fields(theirs[1], b)
            return f"binary protocol, {sql}: { ({k: (v, fb[k]) for k, v in fa.items() if v != fb[k]}) }"
    return f"binary protocol, {sql}: {len(mine[2])} rows, {len(theirs[2])} from MariaDB"


async def _results(host, port, user, password, sql: str) -> tuple:
    """((column definitions, text rows), (definitions at PREPARE, at EXECUTE, binary rows))."""
    client = await BinaryClient.connect(host, port, user, password)
    try:
        await client.client.query("SET time_zone = '+00:00'")
        await client.client.send_command(Command.QUERY, sql.encode())
        first, columns, rows, _ = await client.client.read_result()
        assert first[0] not in (0x00, 0xFF), first
        stmt = await client.prepare(sql)
        result = await client.execute(stmt, [])
        await client.close_statement(stmt)
        return (columns, rows), (stmt.columns, result.columns, result.rows)
    finally:
        client.close()
