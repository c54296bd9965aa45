"""The tables and rows recorded into fixtures/ by record_fixtures.py: SQL literals and the
values the row decoder must return for them. Shared by the recorder and the tests."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from cdc.binlog.row_image import Date, DateTime, Timestamp

# (column name, SQL type)
COLUMNS: list[tuple[str, str]] = [
    ("id", "INT NOT NULL PRIMARY KEY"),
    ("ti", "TINYINT"),
    ("tiu", "TINYINT UNSIGNED"),
    ("si", "SMALLINT"),
    ("siu", "SMALLINT UNSIGNED"),
    ("mi", "MEDIUMINT"),
    ("miu", "MEDIUMINT UNSIGNED"),
    ("i", "INT"),
    ("iu", "INT UNSIGNED"),
    ("bi", "BIGINT"),
    ("biu", "BIGINT UNSIGNED"),
    ("f", "FLOAT"),
    ("d", "DOUBLE"),
    ("dec1", "DECIMAL(10,2)"),
    ("dec2", "DECIMAL(30,10)"),
    ("dec3", "DECIMAL(5,0) UNSIGNED"),
    ("vc", "VARCHAR(20)"),
    ("vcl", "VARCHAR(300)"),
    ("c", "CHAR(10)"),
    ("cl", "CHAR(100)"),
    ("bn", "BINARY(4)"),
    ("vb", "VARBINARY(10)"),
    ("e", "ENUM('a','b','c')"),
    ("s", "SET('x','y','z')"),
    ("tt", "TINYTEXT"),
    ("t", "TEXT"),
    ("mt", "MEDIUMTEXT"),
    ("lt", "LONGTEXT"),
    ("bl", "BLOB"),
    ("dte", "DATE"),
    ("tm", "TIME"),
    ("tm3", "TIME(3)"),
    ("tm6", "TIME(6)"),
    ("dtm", "DATETIME"),
    ("dtm2", "DATETIME(2)"),
    ("dtm6", "DATETIME(6)"),
    ("ts", "TIMESTAMP NULL"),
    ("ts4", "TIMESTAMP(4) NULL"),
    ("y", "YEAR"),
    ("b1", "BIT(1)"),
    ("b12", "BIT(12)"),
    ("b64", "BIT(64)"),
    ("j", "JSON"),
    ("g", "GEOMETRY"),
]

CREATE_ALL_TYPES = (
    "CREATE TABLE fx.all_types ("
    + ", ".join(f"`{n}` {t}" for n, t in COLUMNS)
    + ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
)

POINT_WKB = bytes.fromhex("000000000101000000000000000000f03f0000000000000040")

# One row per entry: {column: (sql literal, expected decoded value)}; missing columns are NULL.
ROWS: list[dict[str, tuple[str, object]]] = [
    {
        "id": ("1", 1),
        "ti": ("-128", -128),
        "tiu": ("255", 255),
        "si": ("-32768", -32768),
        "siu": ("65535", 65535),
        "mi": ("-8388608", -8388608),
        "miu": ("16777215", 16777215),
        "i": ("-2147483648", -2147483648),
        "iu": ("4294967295", 4294967295),
        "bi": ("-9223372036854775808", -9223372036854775808),
        "biu": ("18446744073709551615", 18446744073709551615),
        "f": ("1.5", 1.5),
        "d": ("-2.25", -2.25),
        "dec1": ("-12345678.90", Decimal("-12345678.90")),
        "dec2": ("12345678901234567890.0123456789", Decimal("12345678901234567890.0123456789")),
        "dec3": ("99999", Decimal("99999")),
        "vc": ("'héllo'", "héllo".encode()),
        "vcl": ("REPEAT('x', 300)", b"x" * 300),
        "c": ("'abc'", b"abc"),
        "cl": ("'long char ü'", "long char ü".encode()),
        "bn": ("X'00010203'", b"\x00\x01\x02\x03"),
        "vb": ("X'ff00'", b"\xff\x00"),
        "e": ("'b'", 2),
        "s": ("'x,z'", 5),
        "tt": ("'tiny'", b"tiny"),
        "t": ("'text \U0001f600'", "text \U0001f600".encode()),
        "mt": ("REPEAT('m', 1000)", b"m" * 1000),
        "lt": ("'long'", b"long"),
        "bl": ("X'000102'", b"\x00\x01\x02"),
        "dte": ("'2024-02-29'", Date(2024, 2, 29)),
        "tm": ("'-838:59:59'", -dt.timedelta(hours=838, minutes=59, seconds=59)),
        "tm3": ("'-00:00:01.5'", -dt.timedelta(seconds=1, milliseconds=500)),
        "tm6": (
            "'12:34:56.789012'",
            dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=789012),
        ),
        "dtm": ("'9999-12-31 23:59:59'", DateTime(9999, 12, 31, 23, 59, 59, 0)),
        "dtm2": ("'2001-02-03 04:05:06.78'", DateTime(2001, 2, 3, 4, 5, 6, 780000)),
        "dtm6": ("'1000-01-01 00:00:00.000001'", DateTime(1000, 1, 1, 0, 0, 0, 1)),
        "ts": ("'2023-11-14 22:13:20'", Timestamp(1700000000, 0)),
        "ts4": ("'2023-11-14 22:13:20.1234'", Timestamp(1700000000, 123400)),
        "y": ("2155", 2155),
        "b1": ("b'1'", 1),
        "b12": ("b'101010101010'", 0b101010101010),
        "b64": ("18446744073709551615", 18446744073709551615),
        "j": ("'{\"a\": [1, 2]}'", b'{"a": [1, 2]}'),
        "g": ("ST_GeomFromText('POINT(1 2)')", POINT_WKB),
    },
    {
        "id": ("2", 2),
        "ti": ("0", 0),
        "tm": ("'00:00:00'", dt.timedelta(0)),
        "dte": ("'0000-00-00'", Date(0, 0, 0)),
        "dtm": ("'0000-00-00 00:00:00'", DateTime(0, 0, 0, 0, 0, 0, 0)),
        "y": ("0", 0),
        "e": ("''", 0),
        "s": ("''", 0),
        "vc": ("''", b""),
        "dec1": ("0", Decimal("0.00")),
        "tm3": (
            "'-838:59:59.999'",
            -dt.timedelta(hours=838, minutes=59, seconds=59, milliseconds=999),
        ),
    },
    {"id": ("3", 3)},  # all NULL except the key
]


def expected_row(i: int) -> list[object]:
    row = ROWS[i]
    return [row[name][1] if name in row else None for name, _ in COLUMNS]


def insert_sql(i: int) -> str:
    row = ROWS[i]
    names = ", ".join(f"`{n}`" for n in row)
    values = ", ".join(lit for lit, _ in row.values())
    return f"INSERT INTO fx.all_types ({names}) VALUES ({values})"


SMALL_TABLE = "CREATE TABLE fx.acct (id INT PRIMARY KEY, bal BIGINT NOT NULL, note VARCHAR(32)) DEFAULT CHARSET=utf8mb4"
