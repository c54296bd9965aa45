"""Record real MariaDB binlog bytes for `test_recorded.py` (which then needs no server).

    .venv/bin/python -m tests.merge_source.record_fixtures     # ~15 s, MariaDB binaries needed

Starts a throw-away MariaDB with the cluster's binlog settings, runs every case of the CN commit
protocol by hand, statement by statement (the branch on its own connection, commit records on a
second one, exactly as `cdc_equipment/cn/` does), dumps the binlog with our dump client and writes:

- `fixtures/dn1.events`: the dumped events, one record each: `<u32 data length, u8 file-name
  length, u32 position>`, the file name, the raw event (header + body + CRC32);
- `fixtures/expected.json`: per case, where it ends in the binlog and what a `SourceProcessor`
  (dn 1, `wait_for_start=True`) must emit by then. The expectations are written here by hand from
  the commit protocol, not computed by the code under test.

TSOs are chosen by the script, so the expectations do not depend on timing. Re-recording changes
timestamps and positions only; the tests read positions from the recording.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import struct
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdc.cn_protocol.heartbeat import HEARTBEAT_SQL
from cdc.cn_protocol.schema import (
    INSERT_PRIMARY_RECORD,
    INSERT_TOMBSTONE,
    PRIVATE_TABLES,
    UPSERT_RECORD,
)
from cdc.cn_protocol.xid import Xid
from cdc.protocol import BinlogPosition, DumpClient, DumpSettings
from cdc_equipment.local_cluster.testing import throwaway_server

FIXTURES = Path(__file__).parent / "fixtures"
EVENTS_FILE = FIXTURES / "dn1.events"
EXPECTED_FILE = FIXTURES / "expected.json"
_RECORD = struct.Struct("<IBI")  # data length, file-name length, position

DN_ID = 1
CN_ID = 1


# -- the fixture format (read by the tests, written by `main`) ------------------------------------
def save_events(path: Path, events: list[tuple[str, int, bytes]]) -> None:
    out = bytearray()
    for file, pos, data in events:
        name = file.encode()
        out += _RECORD.pack(len(data), len(name), pos) + name + data
    path.write_bytes(bytes(out))


def load_events(path: Path = EVENTS_FILE) -> Iterator[tuple[str, int, bytes]]:
    """(file, pos, raw event) records, in binlog order."""
    data = path.read_bytes()
    i = 0
    while i < len(data):
        length, name_len, pos = _RECORD.unpack_from(data, i)
        i += _RECORD.size
        name = data[i : i + name_len].decode()
        i += name_len
        yield name, pos, data[i : i + length]
        i += length


# -- expectations ---------------------------------------------------------------------------------
def stmt(trace: tuple[int, int] | None, table: tuple[str, str], types: list[int]) -> dict:
    """One statement: its TraceId, the (logical) table of its first TABLE_MAP, its event types."""
    return {"trace": list(trace) if trace else None, "table": list(table), "types": types}


def data(txn: int, tso: int, *statements: dict, participants: tuple[int, ...] = (DN_ID,)) -> dict:
    return {
        "txn": txn,
        "tso": tso,
        "kind": "data",
        "participants": list(participants),
        "statements": list(statements),
    }


def local(tso: int, *statements: dict) -> dict:
    """A local transaction sorts at (largest TSO seen before it, LOCAL, its binlog position)."""
    return {
        "txn": 0,
        "tso": tso,
        "kind": "local",
        "participants": [],
        "statements": list(statements),
    }


@dataclass(slots=True)
class Case:
    name: str
    doc: str
    end: tuple[str, int]  # SHOW MASTER STATUS right after the case
    emits: list[dict] = field(default_factory=list)
    # The last watermark emitted during the case: (tso, "branch"|"local"), None if none.
    watermark: tuple[int, str] | None = None
    # Checkpoint after the case: the prepare of the oldest held txn (None: the end of the last
    # group) and the largest commit TSO seen before that point.
    pending: int | None = None
    max_tso: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "doc": self.doc,
            "end": list(self.end),
            "emits": self.emits,
            "watermark": list(self.watermark) if self.watermark else None,
            "checkpoint": {"pending": self.pending, "max_tso": self.max_tso},
        }


# -- driving the DN -------------------------------------------------------------------------------
class Branch:
    """One XA branch of a CN transaction on its own connection (cf. cdc/cn_protocol/branch.py)."""

    def __init__(self, server, txn_id: int, dn_id: int = DN_ID):
        self.server = server
        self.txn_id = txn_id
        self.dn_id = dn_id
        self.xid = Xid(txn_id, dn_id).sql
        self.conn = server.connect()

    def prepare(self, *statements: str) -> Branch:
        with self.conn.cursor() as cur:
            cur.execute(f"XA START {self.xid}")
            for seq, sql in enumerate(statements, 1):
                cur.execute(f"/*CDC trace={seq}.0 cn={CN_ID} */ {sql}")
            cur.execute(f"XA END {self.xid}")
            cur.execute(f"XA PREPARE {self.xid}")
        return self

    def record(self, tso: int, participants: str | None = None, sql: str | None = None) -> Branch:
        """The commit record, on a second connection (the branch's session is XA-locked)."""
        participants = participants or str(self.dn_id)
        with self.server.connect() as other, other.cursor() as cur:
            cur.execute(sql or INSERT_PRIMARY_RECORD, (self.txn_id, tso, participants))
        return self

    def tombstone(self, tso: int) -> Branch:
        """What CN recovery writes before rolling an undecided branch back."""
        with self.server.connect() as other, other.cursor() as cur:
            cur.execute(INSERT_TOMBSTONE, (self.txn_id, tso))
        return self

    def commit(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute(f"XA COMMIT {self.xid}")
        self.conn.close()

    def rollback(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute(f"XA ROLLBACK {self.xid}")
        self.conn.close()


def run_sql(server, *statements: str) -> None:
    with server.connect() as conn, conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


def master_status(server) -> tuple[str, int]:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
    return file, int(pos)


TOPOLOGY = {
    "dns": [{"id": 1, "name": "dn1"}, {"id": 2, "name": "dn2"}],
    "tables": [
        {
            "db": "rec",
            "table": "t",
            "kind": "partitioned",
            "shard_key": "id",
            "physical": [
                {"partition": 0, "dn": 1, "db": "rec_p", "table": "t_p0000"},
                # Lives on dn2: the copy on this DN (a partition move in progress) is invisible.
                {"partition": 1, "dn": 2, "db": "rec_p", "table": "t_p0001"},
            ],
        },
        {
            "db": "rec",
            "table": "b",
            "kind": "broadcast",
            # dn2 speaks for the broadcast table: its replica on dn1 is dropped.
            "physical": [
                {"dn": 2, "db": "rec_p", "table": "b"},
                {"dn": 1, "db": "rec_p", "table": "b"},
            ],
        },
    ],
}
T2_TOPOLOGY = {
    "db": "rec",
    "table": "t2",
    "kind": "partitioned",
    "shard_key": "id",
    "physical": [{"partition": 0, "dn": 1, "db": "rec_p", "table": "t2_p0000"}],
}
T2_DDL = "CREATE TABLE t2 (id INT PRIMARY KEY, w VARCHAR(32))"

TM, WRITE, UPDATE = 19, 23, 24  # TABLE_MAP, WRITE_ROWS v1, UPDATE_ROWS v1
T = ("rec", "t")
T2 = ("rec", "t2")


def run_cases(server) -> list[Case]:
    """Every case, in binlog order; returns the cases with their end positions filled in."""

    cases: list[Case] = []

    def case(name: str, doc: str, **expect) -> None:
        cases.append(Case(name, doc, master_status(server), **expect))

    def heartbeat(txn: int, tso: int) -> None:
        b = Branch(server, txn)
        b.prepare(HEARTBEAT_SQL % (CN_ID, txn))
        b.record(tso)
        b.commit()

    run_sql(
        server,
        *PRIVATE_TABLES,
        "CREATE DATABASE rec_p",
        "CREATE TABLE rec_p.t_p0000 (id INT PRIMARY KEY, v VARCHAR(32))",
        "CREATE TABLE rec_p.t_p0001 (id INT PRIMARY KEY, v VARCHAR(32))",
        "CREATE TABLE rec_p.b (id INT PRIMARY KEY)",
    )
    case("setup", "private tables and user tables: physical DDL, dropped")

    run_sql(server, "INSERT INTO rec_p.t_p0000 VALUES (1, 'before start')")
    case(
        "before_start",
        "a local transaction before CdcStart: released, not emitted (wait_for_start)",
        watermark=(0, "local"),
    )

    content = json.dumps(TOPOLOGY, sort_keys=True).replace("'", "''")
    b = Branch(server, 1).prepare(
        f"INSERT INTO __cdc__.__cdc_instruction__ (id, type, content) VALUES (1, 'CdcStart', '{content}')"
    )
    b.record(1000)
    b.commit()
    case(
        "cdc_start",
        "CdcStart marker with the topology JSON: names from its TSO on",
        emits=[{**data(1, 1000), "kind": "instruction", "marker": "CdcStart"}],
        watermark=(1000, "branch"),
        max_tso=1000,
    )

    b = Branch(server, 2).prepare(
        "INSERT INTO rec_p.t_p0000 VALUES (2, 'a'), (3, 'b')",
        "UPDATE rec_p.t_p0000 SET v = 'c' WHERE id = 2",
        "DELETE FROM rec_p.t_p0000 WHERE id = 999",  # matches nothing: no events at all
    )
    b.record(1010)
    b.commit()
    case(
        "normal",
        "one branch: prepare, commit record, XA COMMIT",
        emits=[data(2, 1010, stmt((1, 0), T, [TM, WRITE]), stmt((2, 0), T, [TM, UPDATE]))],
        watermark=(1010, "branch"),
        max_tso=1010,
    )

    b3 = Branch(server, 3).prepare("INSERT INTO rec_p.t_p0000 VALUES (4, 'three')")
    b4 = Branch(server, 4).prepare("INSERT INTO rec_p.t_p0000 VALUES (5, 'four')")
    b4.record(1030)
    b4.commit()
    case(
        "reversed_first",
        "txn 4 (TSO 1030) commits first; txn 3, prepared before its record, holds it",
        pending=3,
        max_tso=1010,
    )
    b3.record(1020)
    b3.commit()
    case(
        "reversed_second",
        "txn 3's record (TSO 1020) lands after txn 4's: both go, in TSO order",
        emits=[
            data(3, 1020, stmt((1, 0), T, [TM, WRITE])),
            data(4, 1030, stmt((1, 0), T, [TM, WRITE])),
        ],
        watermark=(1030, "branch"),
        max_tso=1030,
    )

    slow = Branch(server, 5).prepare("INSERT INTO rec_p.t_p0000 VALUES (6, 'slow')")
    fast = Branch(server, 6).prepare("INSERT INTO rec_p.t_p0000 VALUES (7, 'fast')")
    fast.record(1050)
    fast.commit()
    case(
        "blocked",
        "txn 6 committed, but txn 5 prepared before it is unresolved: nothing goes",
        pending=5,
        max_tso=1030,
    )
    slow.record(1060)
    case(
        "blocker_record",
        "txn 5's record shows TSO 1060 > 1050: txn 6 goes, txn 5 waits for its XA COMMIT",
        emits=[data(6, 1050, stmt((1, 0), T, [TM, WRITE]))],
        watermark=(1050, "branch"),
        pending=5,
        max_tso=1030,
    )
    slow.commit()
    case(
        "blocker_commit",
        "txn 5 committed",
        emits=[data(5, 1060, stmt((1, 0), T, [TM, WRITE]))],
        watermark=(1060, "branch"),
        max_tso=1060,
    )

    doomed = Branch(server, 7).prepare("INSERT INTO rec_p.t_p0000 VALUES (8, 'doomed')")
    ok = Branch(server, 8).prepare("INSERT INTO rec_p.t_p0000 VALUES (9, 'ok')")
    ok.record(1070)
    ok.commit()
    case("rollback_blocked", "txn 7 prepared and undecided blocks txn 8", pending=7, max_tso=1060)
    doomed.rollback()
    case(
        "rollback",
        "XA ROLLBACK of txn 7 after prepare: its rows (in the binlog) are dropped, txn 8 goes",
        emits=[data(8, 1070, stmt((1, 0), T, [TM, WRITE]))],
        watermark=(1070, "branch"),
        max_tso=1070,
    )

    lost = Branch(server, 9).prepare("INSERT INTO rec_p.t_p0000 VALUES (10, 'lost')")
    after = Branch(server, 10).prepare("INSERT INTO rec_p.t_p0000 VALUES (11, 'after')")
    after.record(1090)
    after.commit()
    lost.tombstone(1095)
    case(
        "tombstone",
        "recovery writes a tombstone (aborted=1) for txn 9: not a commit, txn 9 still holds",
        pending=9,
        max_tso=1070,
    )
    lost.rollback()
    case(
        "tombstone_rollback",
        "recovery rolls txn 9 back: txn 10 goes",
        emits=[data(10, 1090, stmt((1, 0), T, [TM, WRITE]))],
        watermark=(1090, "branch"),
        max_tso=1090,
    )

    late = Branch(server, 11).prepare("INSERT INTO rec_p.t_p0000 VALUES (12, 'late')")
    late.tombstone(1110)
    late.record(1100, "1,2", UPSERT_RECORD)  # the primary had decided: aborted 1 -> 0 (UPDATE)
    case(
        "overwritten_record",
        "a tombstone overwritten by the secondary's commit record (an UPDATE, aborted 1->0)",
        pending=11,
        max_tso=1090,
    )
    late.commit()
    case(
        "overwritten_commit",
        "txn 11 committed with the TSO and participants of the overwriting record",
        emits=[data(11, 1100, stmt((1, 0), T, [TM, WRITE]), participants=(1, 2))],
        watermark=(1100, "branch"),
        max_tso=1100,
    )

    heartbeat(12, 1120)
    case(
        "heartbeat",
        "a heartbeat: no fragment, the watermark moves",
        watermark=(1120, "branch"),
        max_tso=1120,
    )

    run_sql(server, "CREATE TABLE rec_p.t2_p0000 (id INT PRIMARY KEY, w VARCHAR(32))")
    case("physical_ddl", "the CN's DDL on the shard: dropped, no watermark", max_tso=1120)

    schema_json = json.dumps({"columns": ["id", "w"], "topology": T2_TOPOLOGY}, sort_keys=True)
    b = Branch(server, 13).prepare(
        "INSERT INTO __cdc__.__cdc_ddl_record__ (id, db, tbl, ddl, schema_json) "
        f"VALUES (13, 'rec', 't2', '{T2_DDL}', '{schema_json}')"
    )
    b.record(1130)
    b.commit()
    case(
        "ddl_record",
        "the logical DDL marker: a DDL fragment; rec_p.t2_p0000 is rec.t2 from its TSO on",
        emits=[{**data(13, 1130), "kind": "ddl", "ddl": T2_DDL}],
        watermark=(1130, "branch"),
        max_tso=1130,
    )

    b = Branch(server, 14).prepare(
        "INSERT INTO rec_p.t2_p0000 VALUES (1, 'new table')",
        "INSERT INTO rec_p.t_p0000 VALUES (13, 'old table')",
        "INSERT INTO rec_p.b VALUES (1)",  # broadcast replica that does not speak
        "INSERT INTO rec_p.t_p0001 VALUES (1, 'moving')",  # not this DN's partition
    )
    b.record(1140)
    b.commit()
    case(
        "after_ddl",
        "renamed by the DDL marker's topology; unmapped tables' statements are dropped",
        emits=[data(14, 1140, stmt((1, 0), T2, [TM, WRITE]), stmt((2, 0), T, [TM, WRITE]))],
        watermark=(1140, "branch"),
        max_tso=1140,
    )

    run_sql(
        server,
        "INSERT INTO rec_p.t_p0000 VALUES (14, 'local')",
        "INSERT INTO rec_p.t_p0001 VALUES (2, 'local, unmapped')",
    )
    case(
        "local",
        "plain transactions: LOCAL right after TSO 1140; one on an unmapped table is dropped",
        emits=[local(1140, stmt(None, T, [TM, WRITE]))],
        watermark=(1140, "local"),
        max_tso=1140,
    )

    run_sql(
        server,
        "XA START 'other-1'",
        "INSERT INTO rec_p.t_p0000 VALUES (15, 'foreign')",
        "XA END 'other-1'",
        "XA PREPARE 'other-1'",
        "XA COMMIT 'other-1'",
        "XA START 'other-2'",
        "INSERT INTO rec_p.t_p0000 VALUES (16, 'foreign, rolled back')",
        "XA END 'other-2'",
        "XA PREPARE 'other-2'",
        "XA ROLLBACK 'other-2'",
    )
    case(
        "non_cdc_xa",
        "another program's XA: local once committed, nothing if rolled back",
        emits=[local(1140, stmt(None, T, [TM, WRITE]))],
        watermark=(1140, "local"),
        max_tso=1140,
    )

    one = Xid(15, DN_ID).sql
    run_sql(
        server,
        f"XA START {one}",
        f"/*CDC trace=1.0 cn={CN_ID} */ INSERT INTO rec_p.t_p0000 VALUES (17, 'one phase')",
        f"XA END {one}",
        f"XA COMMIT {one} ONE PHASE",
    )
    case(
        "one_phase",
        "XA COMMIT ONE PHASE is logged as a plain transaction: local, no txn id",
        emits=[local(1140, stmt((1, 0), T, [TM, WRITE]))],
        watermark=(1140, "local"),
        max_tso=1140,
    )

    restarted = Branch(server, 16).prepare("INSERT INTO rec_p.t_p0000 VALUES (18, 'restart')")
    restarted.record(1160)
    case(
        "restart_prepared",
        "txn 16 prepared with its record, then the DN stops (clean shutdown)",
        pending=16,
        max_tso=1140,
    )
    server.stop()
    server.start()
    try:
        restarted.conn.close()
    except Exception:  # noqa: BLE001 - the server closed it already
        pass
    run_sql(server, f"XA COMMIT {restarted.xid}")  # the owner session is gone: anyone may commit
    case(
        "restart_commit",
        "XA COMMIT after the restart lands in binlog.000002; the prepare is in binlog.000001",
        emits=[data(16, 1160, stmt((1, 0), T, [TM, WRITE]))],
        watermark=(1160, "branch"),
        max_tso=1160,
    )

    run_sql(server, "INSERT INTO rec_p.t_p0000 VALUES (19, 'after restart')")
    heartbeat(17, 1170)  # the heartbeat row exists: an UPDATE this time
    case(
        "after_restart",
        "a local transaction in the new file, then a heartbeat",
        emits=[local(1160, stmt(None, T, [TM, WRITE]))],
        watermark=(1170, "branch"),
        max_tso=1170,
    )
    return cases


async def dump(server, end: tuple[str, int]) -> list[tuple[str, int, bytes]]:
    settings = DumpSettings(server.host, server.port, "root", "", server_id=7777, name="dn1")
    client = DumpClient(settings, BinlogPosition("binlog.000001", 4))
    out: list[tuple[str, int, bytes]] = []
    stop = BinlogPosition(*end)
    async for batch in client.batches():
        out += [(e.file, e.pos, bytes(e.data)) for e in batch]
        if client.position >= stop:
            break
    await client.close()
    return out


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="cdc-record-"))
    server = throwaway_server(work, server_id=DN_ID, name="dn1")
    try:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            version = cur.fetchone()[0]
        cases = run_cases(server)
        events = asyncio.run(dump(server, cases[-1].end))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    FIXTURES.mkdir(exist_ok=True)
    save_events(EVENTS_FILE, events)
    expected = {
        "about": "recorded by tests/merge_source/record_fixtures.py; see its docstring",
        "server": version,
        "dn_id": DN_ID,
        "topology": TOPOLOGY,
        "cases": [c.to_json() for c in cases],
    }
    EXPECTED_FILE.write_text(json.dumps(expected, indent=1) + "\n")
    size = EVENTS_FILE.stat().st_size
    print(f"{len(events)} events ({size:,} bytes) -> {EVENTS_FILE}")
    print(f"{len(cases)} cases -> {EXPECTED_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
