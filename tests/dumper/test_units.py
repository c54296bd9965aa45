"""Pure parts of the Dumper: statement splitting and parsing, LIKE matching, the boundary walk,
purge, and SHOW BINLOG EVENTS Info texts."""

from __future__ import annotations

import pytest

from cdc.config import ConfigError, DumperConfig
from dumper.server import sql
from dumper.server.sql.event_info import event_info, event_type_name
from dumper.server.sql.schema import ColumnSchema, IndexSchema, TableSchema
from dumper.server.sql.variables import filter_names, like_to_regex
from dumper.server.store.binlog_files import BinlogFiles
from tests.dumper.binlog_gen import write_fixture


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SELECT 1;", ["SELECT 1"]),
        ("select 'a;b'; select \"c;d\" ; ", ["select 'a;b'", 'select "c;d"']),
        ("/* c; */ SHOW DATABASES -- x;\n; # y;\nSELECT 2", ["SHOW DATABASES", "SELECT 2"]),
        ("/*!40101 SET NAMES utf8 */", ["SET NAMES utf8"]),
        ("SELECT 'it''s;' ; SELECT `a;b`", ["SELECT 'it''s;'", "SELECT `a;b`"]),
        ("SELECT 'a\\';b'", ["SELECT 'a\\';b'"]),
        (";;", []),
    ],
)
def test_split_statements(text, expected):
    assert sql.split_statements(text) == expected


def test_parse_shapes():
    p = sql.parse
    s = p("SET @master_heartbeat_period = 1000, @source_heartbeat_period = 1000")
    assert [a.name for a in s.assignments] == ["master_heartbeat_period", "source_heartbeat_period"]
    s = p("SET @master_binlog_checksum= @@global.binlog_checksum")
    assert s.assignments[0].expr == sql.SysVar("global", "binlog_checksum")
    s = p("select @@GLOBAL.binlog_checksum as checksum, @x, VERSION() v")
    assert [i.name for i in s.items] == ["checksum", "@x", "v"]
    assert p("SELECT @@SESSION.auto_increment_increment").items[0].name == (
        "@@SESSION.auto_increment_increment"
    )
    assert p("SHOW BINLOG EVENTS IN 'binlog.000001' FROM 4 LIMIT 2, 3") == sql.ShowBinlogEvents(
        "binlog.000001", 4, 2, 3
    )
    assert isinstance(p("show master logs"), sql.ShowBinaryLogs)
    assert isinstance(p("SHOW BINLOG STATUS"), sql.ShowMasterStatus)
    assert p("kill connection 12") == sql.Kill(12)
    assert p("PURGE MASTER LOGS TO 'binlog.000002'") == sql.Purge(to="binlog.000002")
    assert p("SHOW FULL COLUMNS FROM t1 FROM gbl") == sql.ShowColumns(True, "gbl", "t1")
    assert p("show index from `bank`.`accounts`") == sql.ShowIndex("bank", "accounts")
    assert p("SHOW KEYS IN t FROM d") == sql.ShowIndex("d", "t")
    assert p("SHOW TABLE STATUS FROM d LIKE 'a%'") == sql.ShowTableStatus("d", "a%")
    assert isinstance(p("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"), sql.Noop)
    assert isinstance(p("SET character_set_results = NULL"), sql.SetVars)
    for bad in ("DROP TABLE x", "SELECT * FROM t JOIN u", "SHOW FOO", "SELECT 1 +"):
        with pytest.raises(sql.SqlError):
            p(bad)


def test_like():
    assert like_to_regex("rds\\_%").fullmatch("rds_x")
    assert not like_to_regex("rds\\_%").fullmatch("rdsx")
    assert like_to_regex("BINLOG_CHECKSUM").fullmatch("binlog_checksum")
    assert filter_names(["a_b", "axb", "c"], [("LIKE", ["a\\_b"])]) == ["a_b"]
    assert filter_names(["a", "b"], [("IN", ["B", "x"])]) == ["b"]


def test_boundaries_growth_and_events(tmp_path):
    fx = write_fixture(tmp_path / "b")
    files = BinlogFiles(fx.dir)
    assert files.names() == fx.files
    assert files.boundary_neighbours("binlog.000002", 154)[0]
    assert files.boundary_neighbours("binlog.000002", 160) == (False, 154, 225)
    end = files.complete_end("binlog.000002")
    # A half-written event at the tail is not counted, the rest of it completes it.
    from tests.dumper.binlog_gen import T1

    fx.active.txn(T1, 11, insert=[(9, "z")])
    tail = fx.active.buf[end:]
    with open(fx.dir / "binlog.000002", "ab") as f:
        f.write(tail[:30])
    assert files.complete_end("binlog.000002") == end  # 30 bytes: less than the BEGIN event
    assert files.boundary_neighbours("binlog.000002", end)[0]
    with open(fx.dir / "binlog.000002", "ab") as f:
        f.write(tail[30:])
    assert files.complete_end("binlog.000002") == end + len(tail)
    infos = [
        (event_type_name(e.type_code), event_info(e, 4))
        for e in files.events("binlog.000001")
        if e.type_code != 15
    ]
    assert infos[:3] == [
        ("Previous_gtids", ""),
        ("Query", "CREATE DATABASE IF NOT EXISTS gbl"),
        ("Query", "use `gbl`; CREATE TABLE t1 (id INT NOT NULL PRIMARY KEY, name VARCHAR(20)) "
         "DEFAULT CHARSET=utf8mb4"),
    ]  # fmt: skip


def test_purge(tmp_path):
    fx = write_fixture(tmp_path / "b")
    files = BinlogFiles(fx.dir)
    assert files.purge(files.victims_before(0)) == []
    assert files.purge(files.victims_to("binlog.000002")) == ["binlog.000001"]
    assert files.names() == ["binlog.000002"]
    assert files.purge(files.victims_before(4102444800)) == []  # never the active file
    assert (fx.dir / "binlog.000002").exists()


async def test_current_event_notifier_wakes_on_swap():
    import asyncio
    import time

    from dumper.server import CurrentEventNotifier

    holder = {"ev": asyncio.Event()}
    notifier = CurrentEventNotifier(lambda: holder["ev"])

    async def writer():
        await asyncio.sleep(0.05)
        holder["ev"].set()
        holder["ev"] = asyncio.Event()

    t0 = time.monotonic()
    task = asyncio.create_task(writer())
    await notifier.wait(5)
    await task
    assert time.monotonic() - t0 < 1
    await notifier.wait(0.01)  # times out quietly


def test_dumper_bounds_are_validated():
    assert DumperConfig().max_allowed_packet == 16 << 20
    for bad in (
        {"max_allowed_packet": 0},
        {"max_allowed_packet": 2 << 30},
        {"wait_timeout": 0},
        {"connect_timeout": 0},
        {"max_unauthenticated_connections": 0},
    ):
        with pytest.raises(ConfigError):
            DumperConfig(**bad)


def test_indexes_from_the_create_table_text():
    create = (
        "CREATE TABLE `t` (\n  `id` int(11) NOT NULL,\n  `key` varchar(20) DEFAULT NULL,\n"
        "  `b` int(11) DEFAULT NULL,\n  PRIMARY KEY (`id`),\n  UNIQUE KEY `uk` (`key`(10),`b`),\n"
        "  KEY `by_b` (`b` DESC),\n  FULLTEXT KEY `ft` (`key`)\n) ENGINE=InnoDB"
    )
    table = TableSchema("d", "t", (ColumnSchema("id", "int(11)", False, "PRI"),), create)
    assert table.indexes() == [
        IndexSchema("PRIMARY", True, (("id", None),)),
        IndexSchema("uk", True, (("key", 10), ("b", None))),
        IndexSchema("by_b", False, (("b", None),)),
        IndexSchema("ft", False, (("key", None),), "FULLTEXT"),
    ]
    # Without a CREATE TABLE text: the primary key of the columns.
    bare = TableSchema("d", "t", (ColumnSchema("id", "int(11)", False, "PRI"),))
    assert bare.indexes() == [IndexSchema("PRIMARY", True, (("id", None),))]


def test_show_binlog_events_shows_the_cts_mark_in_both_flavours(tmp_path):
    """The mark's text is the Info of its event: a Rows_query's (mysql flavour) or a
    Binlog_checkpoint's (mariadb flavour, where the text is the "file name")."""
    from binlog_writer import BinlogWriter
    from tests.binlog_writer.test_mariadb_gtids import txn, writer
    from tests.binlog_writer.test_stream import raw

    w = writer(tmp_path / "mariadb")
    w.append_encoded(bytearray(txn(5)))
    w.close()
    m = BinlogWriter(tmp_path / "mysql")
    m.append_transaction(raw(5))
    m.close()
    for flavour, name in (("mariadb", "Binlog_checkpoint"), ("mysql", "Rows_query")):
        files = BinlogFiles(tmp_path / flavour)
        infos = [(event_type_name(e.type_code), event_info(e, 4)) for e in files.events(w.file)]
        assert infos[-2] == (name, "CTS::1005" if flavour == "mariadb" else "# CTS::1005")
        assert infos[-1][0] == "Stop"
