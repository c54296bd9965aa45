"""Generated output transactions for the writer tests: DDL, all column types (taken from the
TABLE_MAP MariaDB itself wrote for the fixture table), big rows, many tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.events import TableMapEvent, XidEvent, cts_mark
from cdc.binlog.query import QueryEvent
from cdc.binlog.reader import read_file
from cdc.binlog.rows import RowsEvent
from cdc.binlog.table_map import Column
from tests.cdc.binlog import fixture_data as fd

FIXTURE = Path(__file__).parents[1] / "cdc" / "binlog" / "fixtures" / "mariadb-10.11-binlog.000001"
DB = "gw"


def all_types_columns() -> list[Column]:
    """Columns of fx.all_types as MariaDB described them, with names."""
    data, reader = read_file(FIXTURE)
    for ev in reader.decoded():
        if isinstance(ev.body, TableMapEvent) and ev.body.table == b"all_types":
            return ev.body.columns(mariadb=True)
    raise AssertionError("fixture has no TABLE_MAP for all_types")


@dataclass
class Script:
    """Transactions (lists of codec bodies, each ending in a CTS mark) + SQL that builds the
    same expected state through plain statements."""

    txns: list[list[object]] = field(default_factory=list)
    expected_sql: list[str] = field(default_factory=list)
    tso: int = 1000

    def ddl(self, sql: str, db: str = "") -> None:
        self.tso += 1
        self.txns.append([QueryEvent(sql.encode(), db=db.encode()), cts_mark(self.tso)])

    def dml(self, stmts: list[tuple[TableMapEvent, RowsEvent]]) -> None:
        self.tso += 1
        txn: list[object] = [QueryEvent(b"BEGIN", db=DB.encode())]
        for tm, rows in stmts:
            txn += [tm, rows]
        txn += [XidEvent(self.tso), cts_mark(self.tso)]
        self.txns.append(txn)


SIMPLE = [
    Column(T.LONG, nullable=False, name=b"id"),
    Column(T.VARCHAR, 256, name=b"v", collation=45),
    Column(T.LONGLONG, name=b"n"),
]
BIG = [Column(T.LONG, nullable=False, name=b"id"), Column(T.BLOB, 4, name=b"b", collation=63)]


def build_script(n_tables: int = 12, big_sizes: tuple[int, ...] = (300_000, 700_000)) -> Script:
    s = Script()
    s.ddl(f"CREATE DATABASE {DB} DEFAULT CHARSET utf8mb4")
    s.ddl(fd.CREATE_ALL_TYPES.replace("fx.", f"{DB}."), DB)
    cols = [
        Column(
            c.type,
            c.meta,
            c.nullable,
            c.unsigned,
            name.encode(),
            c.collation,
            c.enum_values,
            c.set_values,
        )
        for c, (name, _) in zip(all_types_columns(), fd.COLUMNS, strict=True)
    ]
    tm = TableMapEvent.from_columns(1, DB, "all_types", cols, primary_key=[0])
    rows = [fd.expected_row(i) for i in range(len(fd.ROWS))]
    s.dml([(tm, RowsEvent.from_rows(30, 1, cols, rows))])
    s.expected_sql += ["SET time_zone = '+00:00'; SET sql_mode = ''"] + [
        fd.insert_sql(i).replace("fx.", "exp.") for i in range(len(fd.ROWS))
    ]
    # UPDATE row 1 and DELETE row 3 in one transaction.
    after = list(rows[0])
    after[7] = 42  # i
    after[16] = b"changed"  # vc
    s.dml(
        [
            (tm, RowsEvent.from_rows(31, 1, cols, [(rows[0], after)])),
            (tm, RowsEvent.from_rows(32, 1, cols, [rows[2]])),
        ]
    )
    s.expected_sql += [
        "UPDATE exp.all_types SET i = 42, vc = 'changed' WHERE id = 1",
        "DELETE FROM exp.all_types WHERE id = 3",
    ]
    # Many tables, one multi-table transaction, then one per table.
    maps = []
    for k in range(n_tables):
        s.ddl(
            f"CREATE TABLE t{k} (id INT NOT NULL PRIMARY KEY, v VARCHAR(64), n BIGINT) DEFAULT CHARSET=utf8mb4",
            DB,
        )
        s.expected_sql.append(f"CREATE TABLE exp.t{k} LIKE {DB}.t{k}")
        maps.append(TableMapEvent.from_columns(100 + k, DB, f"t{k}", SIMPLE, primary_key=[0]))
    s.dml(
        [
            (maps[k], RowsEvent.from_rows(30, 100 + k, SIMPLE, [[0, b"multi", k]]))
            for k in range(n_tables)
        ]
    )
    s.expected_sql += [f"INSERT INTO exp.t{k} VALUES (0, 'multi', {k})" for k in range(n_tables)]
    for k in range(n_tables):
        vals = [[i, f"r{i}-ü".encode(), None if i % 3 == 0 else i * k] for i in range(1, 6)]
        s.dml([(maps[k], RowsEvent.from_rows(30, 100 + k, SIMPLE, vals))])
        s.expected_sql.append(
            f"INSERT INTO exp.t{k} VALUES "
            + ", ".join(f"({i}, 'r{i}-ü', {'NULL' if i % 3 == 0 else i * k})" for i in range(1, 6))
        )
    # Big rows (several 100 KB each).
    s.ddl("CREATE TABLE big (id INT NOT NULL PRIMARY KEY, b LONGBLOB)", DB)
    s.expected_sql.append(f"CREATE TABLE exp.big LIKE {DB}.big")
    tm_big = TableMapEvent.from_columns(500, DB, "big", BIG, primary_key=[0])
    for i, size in enumerate(big_sizes):
        payload = bytes((j * 7 + i) % 251 for j in range(size))
        s.dml([(tm_big, RowsEvent.from_rows(30, 500, BIG, [[i, payload]]))])
        s.expected_sql.append(f"INSERT INTO exp.big VALUES ({i}, X'{payload.hex()}')")
    return s
