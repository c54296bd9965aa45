"""python-mysql-replication parses our output: events of a written file are fed through its
packet parser (no server needed) and its decoded rows, with column names, match ours."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from pymysql.protocol import MysqlPacket

from binlog_writer import BinlogWriter, FsyncPolicy
from cdc.binlog.reader import read_file
from tests.binlog_writer.gen import build_script

pmr_packet = pytest.importorskip("pymysqlreplication.packet")
pmr_event = pytest.importorskip("pymysqlreplication.event")
pmr_rows = pytest.importorskip("pymysqlreplication.row_event")


class _Ctl:
    charset = "utf8mb4"

    def _get_dbms(self) -> str:
        return "mysql"


def pmr_events(path: Path):
    data, reader = read_file(path)
    table_map: dict = {}
    allowed = frozenset(
        [
            pmr_event.QueryEvent,
            pmr_event.XidEvent,
            pmr_event.RotateEvent,
            pmr_event.FormatDescriptionEvent,
            pmr_event.RowsQueryLogEvent,
            pmr_event.StopEvent,
            pmr_event.PreviousGtidsEvent,
            pmr_rows.TableMapEvent,
            pmr_rows.WriteRowsEvent,
            pmr_rows.UpdateRowsEvent,
            pmr_rows.DeleteRowsEvent,
            pmr_event.NotImplementedEvent,
        ]
    )
    out = []
    for raw in reader:
        wrapper = pmr_packet.BinLogPacketWrapper(
            MysqlPacket(b"\x00" + bytes(raw.data), "utf8"),
            table_map,
            _Ctl(),
            (5, 7, 44),
            True,
            allowed,
            None,
            None,
            None,
            None,
            False,
            False,
            True,
            True,
            False,
        )
        if wrapper.event is not None:
            out.append(wrapper.event)
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("pmr")
    with BinlogWriter(out, fsync=FsyncPolicy.never()) as w:
        for txn in build_script(n_tables=3, big_sizes=(1000,)).txns:
            w.append_transaction(txn)
    return out / "binlog.000001"


def test_pmr_reads_all_events(written):
    events = pmr_events(written)
    kinds = {type(e).__name__ for e in events}
    assert {
        "FormatDescriptionEvent",
        "QueryEvent",
        "TableMapEvent",
        "WriteRowsEvent",
        "UpdateRowsEvent",
        "DeleteRowsEvent",
        "XidEvent",
        "RowsQueryLogEvent",
        "StopEvent",
    } <= kinds
    marks = [e.query for e in events if type(e).__name__ == "RowsQueryLogEvent"]
    assert all(m.startswith("CTS::") for m in marks)


def test_pmr_rows_with_column_names(written):
    events = pmr_events(written)
    writes = [e for e in events if type(e).__name__ == "WriteRowsEvent" and e.table == "all_types"]
    row = writes[0].rows[0]["values"]
    assert row["id"] == 1 and row["tiu"] == 255 and row["biu"] == 18446744073709551615
    assert row["dec1"] == Decimal("-12345678.90") and row["vc"] == "héllo"
    assert row["e"] == "b" and row["s"] == {"x", "z"} and row["y"] == 2155
    update = next(e for e in events if type(e).__name__ == "UpdateRowsEvent")
    assert (
        update.rows[0]["after_values"]["vc"] == "changed"
        and update.rows[0]["after_values"]["i"] == 42
    )
    t1 = [e for e in events if type(e).__name__ == "WriteRowsEvent" and e.table == "t1"]
    assert t1[1].rows[0]["values"] == {"id": 1, "v": "r1-ü", "n": 1}
