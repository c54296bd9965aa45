"""The codec's numbers are declared once in Python (constants.py, header.py); the .pxd files
beside them repeat them for compiled modules (C enums). Cython cannot derive one from the other,
so this test is what keeps them one declaration: every value in a .pxd must be the Python one,
and every event type must be there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cdc.binlog import constants, header, query

BINLOG = Path(constants.__file__).parent
ENUM = re.compile(r"^cdef enum(?: (\w+))?:\n((?:    \w+ = \w+\n)+)", re.M)
MEMBER = re.compile(r"^    (\w+) = (\w+)$", re.M)


def pxd_enums(module) -> list[tuple[str | None, str, int]]:
    text = (BINLOG / (module.__name__.rsplit(".", 1)[1] + ".pxd")).read_text()
    out = []
    for enum, body in ENUM.findall(text):
        out += [(enum or None, name, int(value, 0)) for name, value in MEMBER.findall(body)]
    assert out, f"no cdef enum found in {module.__name__}'s .pxd"
    return out


@pytest.mark.parametrize("module", [constants, header], ids=lambda m: m.__name__)
def test_every_pxd_value_is_the_python_one(module):
    for enum, name, value in pxd_enums(module):
        python = getattr(getattr(module, enum), name) if enum else getattr(module, name)
        assert int(python) == value, f"{module.__name__}: {enum or ''}.{name}"


def test_every_event_type_is_declared_for_c():
    declared = {name for enum, name, _ in pxd_enums(constants) if enum == "EventType"}
    assert declared == {m.name for m in constants.EventType}


def test_the_header_readers_read_the_header():
    event = bytes(range(19))
    assert header.event_size(event) == int.from_bytes(event[9:13], "little")
    assert header.log_pos(b"xx" + event, 2) == int.from_bytes(event[13:17], "little")
    assert header.timestamp(event) == int.from_bytes(event[0:4], "little")


def test_the_header_writers_write_the_header():
    buf = bytearray(b"xx" + bytes(range(30)))
    header.write_head(buf, 2, 0x01020304, 30, 0x0A0B0C0D, 28)
    header.write_log_pos(buf, 2, 1234)
    header.write_table_id(buf, 2, b"\x01\x02\x03\x04\x05\x06")
    h = header.EventHeader.unpack(buf, 2)
    assert (h.timestamp, h.type_code, h.server_id, h.event_size, h.log_pos) == (
        0x01020304,
        30,
        0x0A0B0C0D,
        28,
        1234,
    )
    assert h.flags == int.from_bytes(bytes(range(30))[17:19], "little")  # left as it was
    assert buf[2 + 19 : 2 + 25] == b"\x01\x02\x03\x04\x05\x06"
    assert buf[2 + 25 :] == bytes(range(30))[25:]


@pytest.mark.parametrize("db", [b"", b"bank"])
@pytest.mark.parametrize("status", [b"", b"\x00\x01\x02\x03\x04"])
def test_query_text_start_is_where_the_parsed_statement_starts(db, status):
    body = query.QueryEvent(b"XA COMMIT X'01'", db=db, status_vars=status).build()
    event = bytes(constants.HEADER_LEN) + body + bytes(constants.CHECKSUM_LEN)
    assert event[query.text_start(event) : -constants.CHECKSUM_LEN] == b"XA COMMIT X'01'"
    assert query.text_start(b"..." + event, 3) == 3 + query.text_start(event)
