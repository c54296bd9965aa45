"""`AS OF` as the server's parser reads it (docs/snapshot-reads.md, "As of a past point"): the
four forms of a point and MariaDB's spelling, after a table and in START TRANSACTION, and each
malformed point a 1525 at parse time (nothing resolved)."""

from __future__ import annotations

import pytest

from dumper.server.handlers import SqlError
from dumper.server.sql import statements as st
from dumper.server.sql.parser import parse
from dumper.server.sql.points import point_error
from history import PointBeforeOldest, PointInFuture, PointInsideTransaction


@pytest.mark.parametrize(
    ("sql", "kind", "text"),
    [
        ("SELECT * FROM t AS OF TSO 5", "tso", "TSO 5"),
        ("SELECT * FROM d.t AS OF TIMESTAMP '2026-11-29 06:00:00' WHERE a = 1", "time", None),
        ("SELECT a FROM t x AS OF 'binlog.000002':400", "position", "'binlog.000002':400"),
        ("SELECT a FROM t AS x AS OF GTID '0-1-5'", "gtid", "GTID '0-1-5'"),
        ("SELECT * FROM t FOR SYSTEM_TIME AS OF GTID '0-1-5'", "gtid", "GTID '0-1-5'"),
        ("SELECT * FROM t AS OF 'TSO 5' LIMIT 3", "tso", "TSO 5"),
        ("SELECT COUNT(*) FROM t AS OF 'binlog.000002:400'", "position", None),
    ],
)
def test_forms_of_a_point(sql, kind, text):
    stmt = parse(sql)
    assert isinstance(stmt, st.TableSelect) and stmt.as_of is not None
    assert stmt.as_of.kind == kind
    if text is not None:
        assert stmt.as_of.text == text


def test_alias_and_transaction():
    assert parse("SELECT * FROM t AS x").as_of is None  # an alias, not AS OF
    stmt = parse("START TRANSACTION READ ONLY AS OF TSO 77")
    assert isinstance(stmt, st.Transaction) and stmt.as_of.value == 77
    assert parse("START TRANSACTION WITH CONSISTENT SNAPSHOT").as_of is None


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("SELECT * FROM t AS OF 123", "ambiguous"),
        ("SELECT * FROM t AS OF TSO x", "malformed"),
        ("SELECT * FROM t AS OF TSO", "malformed"),
        ("SELECT * FROM t AS OF TIMESTAMP 'yesterday'", "YYYY-mm-dd"),
        ("SELECT * FROM t AS OF 'nofile':4", "not a binlog file name"),
        ("START TRANSACTION READ ONLY AS OF GTID 'x'", "uuid:n"),
    ],
)
def test_malformed_points_are_1525(sql, says):
    with pytest.raises(SqlError) as err:
        parse(sql)
    assert err.value.code == 1525 and says in err.value.message


def test_point_errors_as_mysql_errors():
    assert point_error(PointBeforeOldest("x")).code == 9006
    assert point_error(PointInFuture("x")).code == 8135
    assert point_error(PointInsideTransaction("x")).code == 1525
    with pytest.raises(SqlError) as err:
        parse("SELECT * FROM t FOR SYSTEM_TIME ALL")
    assert err.value.code == 1235
