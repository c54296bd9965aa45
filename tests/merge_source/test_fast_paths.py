"""The processor's and classifier's fast paths: the in-place readers (compiled in C when
built) answer as the general code does, on the shapes the CN writes and on the odd ones it does
not; the value types they build are declared once."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest

from cdc.keys import Kind, SortKey
from merge_source import fragment
from merge_source.classifier import (
    cn_txn_id,
    fast_commit_records,
    gtid_xid,
    is_xa_commit,
    xa_ident,
)
from merge_source.fragment import Fragment, FragmentKind, Statement, Watermark
from merge_source.group import query_text
from merge_source.scan import group_end, group_end_at


def gtid(gtrid: bytes, bqual: bytes = b"1", fmt: int = 1, flags2: int = 0x40) -> bytes:
    body = struct.pack("<QIB", 7, 0, flags2)
    if flags2 & 0x02:
        body += struct.pack("<Q", 99)  # commit id
    body += struct.pack("<iBB", fmt, len(gtrid), len(bqual)) + gtrid + bqual
    return bytes(19) + body + b"\0\0\0\0"


@pytest.mark.parametrize(
    "gtrid",
    [b"cdc-1", b"cdc-123456789", b"cdc-", b"cdc-+5", b"cdc- 7", b"cdc-1_0", b"cdc-12x", b"cdc",
     b"xyz-1", b"cdc-" + b"9" * 25, b"cdc-007"],
)  # fmt: skip
@pytest.mark.parametrize("fmt", [1, 2, -1])
@pytest.mark.parametrize("flags2", [0x40, 0x42])
def test_xa_ident_is_gtid_xid_and_cn_txn_id(gtrid, fmt, flags2):
    data = gtid(gtrid, b"3", fmt, flags2)
    f, g, b = gtid_xid(data)
    assert xa_ident(data) == (cn_txn_id(f, g), g + b"/" + b)


def query(text: bytes, db: bytes = b"", status: bytes = b"\0\0") -> bytes:
    post = struct.pack("<IIBHH", 1, 0, len(db), 0, len(status))
    return bytes(19) + post + status + db + b"\0" + text + b"\0\0\0\0"


@pytest.mark.parametrize(
    "text",
    [b"XA COMMIT X'01'", b"xa commit 'a'", b"XA ROLLBACK X'01'", b"XA COMMI", b"", b"COMMIT"],
)
def test_is_xa_commit(text):
    for q in (query(text), query(text, b"bank_p", b"\x01\x02\x03")):
        assert is_xa_commit(q) == query_text(q).upper().startswith(b"XA COMMIT")


@pytest.mark.parametrize(
    "text",
    [b"XA COMMIT X'01'", b"xa rollback 'a'", b"commit", b"COMMI", b"", b"SAVEPOINT a", b"Commit"],
)
@pytest.mark.parametrize("standalone", [False, True])
def test_group_end_at_is_group_end(text, standalone):
    for q in (query(text), query(text, b"bank_p", b"\x01\x02\x03")):
        batch = b"pad" + q + b"tail"  # read in place, amid other bytes
        assert group_end_at(batch, 3, len(q), standalone) == group_end(q, standalone)


def rows_event(images: list[tuple[int, int, bytes, int]], update: bool = False) -> bytes:
    head = bytes(19) + bytes(8) + b"\x04\x0f" + (b"\x0f" if update else b"")
    body = b""
    for txn, tso, participants, aborted in images:
        image = struct.pack("<BQQH", 0, txn, tso, len(participants)) + participants
        image += bytes((aborted,))
        body += image * (2 if update else 1)
    data = bytearray(head + body + b"\0\0\0\0")
    data[4] = 24 if update else 23
    return bytes(data)


@pytest.mark.parametrize(
    "participants", [b"1", b"1,2,3", b"", b"1,,2", b" 1, 2", b"+4", b"x", b"1" * 30]
)
@pytest.mark.parametrize("update", [False, True])
def test_fast_commit_records_reads_participants_as_int_does(participants, update):
    rows = rows_event([(5, 1 << 63, participants, 0), (6, 7, b"2", 1)], update)
    try:
        expected = tuple(int(x) for x in participants.split(b",") if x)
    except ValueError:
        assert fast_commit_records(rows, 4) is None
        return
    assert fast_commit_records(rows, 4) == [(5, 1 << 63, expected, False), (6, 7, (2,), True)]
    assert fast_commit_records(rows[:-6] + rows[-4:], 4) is None  # cut short


def test_the_value_types_are_declared_once():
    """Statement, Fragment and Watermark: the fields fragment.pxd declares for C are the
    class's own, and the constructor sets every one (compiled, a cdef class built by it)."""
    pxd = (Path(fragment.__file__).parent / "fragment.pxd").read_text()
    declared = {
        name: re.findall(r"^    cdef public \w+ (\w+)$", body, re.M)
        for name, body in re.findall(r"^cdef class (\w+):\n((?:    .*\n)+)", pxd, re.M)
    }
    for cls in (Statement, Fragment, Watermark):
        assert tuple(declared[cls.__name__]) == cls.__slots__, cls.__name__
    key = SortKey(5, Kind.BRANCH, 1)
    built = [
        Statement((1, 2), [b"e"]),
        Fragment(key, 1, 2, (1, 2), FragmentKind.DATA, [], [], 3),
        Watermark(1, key, None),
    ]
    for value in built:
        assert all(hasattr(value, f) for f in type(value).__slots__), type(value).__name__
    assert Fragment(key, 1, 2, (), FragmentKind.DATA).statements == []
    assert Fragment(key, 1, 2, (), FragmentKind.DATA).markers == []
