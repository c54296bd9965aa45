"""Malformed input: bad CRC, truncated header, absurd lengths, unknown type codes, random bytes.
The reader and decoders raise CodecError naming file and position; they never hang, never raise
anything else and never allocate from a length field. CDC_FUZZ_EXAMPLES (default 300) sets the
examples per test; `make fuzz` runs 100,000."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cdc.binlog.checksum import seal
from cdc.binlog.errors import CodecError
from cdc.binlog.events import REGISTRY, UnknownEvent, decode_event
from cdc.binlog.fde import mysql57_fde
from cdc.binlog.reader import EventReader
from cdc.binlog.rows import RowsEvent
from tests.fuzz_support import examples, memory_bound

FIXTURE = (Path(__file__).parent / "fixtures" / "mariadb-10.11-binlog.000002").read_bytes()
FDE = mysql57_fde()
EXAMPLES = examples(300)
# The deadline is the hang detector: one decode of a few KB takes well under a millisecond.
FAST = settings(max_examples=EXAMPLES, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
bounded_memory = memory_bound(EXAMPLES)
# Real MariaDB events (table maps, v1 rows of many column types, XA, GTIDs, annotations).
EVENTS_READER = EventReader(
    (Path(__file__).parent / "fixtures" / "mariadb-10.11-binlog.000001").read_bytes()
)
EVENTS = list(EVENTS_READER)
ROWS_TYPES = (23, 24, 25, 30, 31, 32)


def read_all(buf: bytes, **kw) -> int:
    n = 0
    for _ in EventReader(buf, file="fuzz.bin", **kw):
        n += 1
    return n


def test_fixture_reads():
    assert read_all(FIXTURE) == 10


@FAST
@given(st.integers(0, len(FIXTURE) - 1), st.integers(1, 255))
def test_any_flipped_byte_is_detected(pos, xor):
    # The one undetectable flip (found by the 100k run): the FDE's LOG_EVENT_BINLOG_IN_USE_F
    # bit (flags at offset 17 of the FDE at 4), which the server leaves out of the FDE's CRC
    # because it clears it on close; it only says whether the file was closed cleanly.
    assume((pos, xor) != (4 + 17, 0x01))
    buf = bytearray(FIXTURE)
    buf[pos] ^= xor
    with pytest.raises(CodecError) as info:
        read_all(bytes(buf))
    assert "fuzz.bin" in str(info.value) and "position" in str(info.value)


@FAST
@given(st.integers(0, len(FIXTURE) - 1))
def test_truncation(cut):
    buf = FIXTURE[:cut]
    try:
        read_all(buf)
    except CodecError as e:
        assert "fuzz.bin" in str(e)
    reader = EventReader(buf, allow_partial_tail=True) if cut >= 4 else None
    if reader is not None:
        list(reader)
        assert reader.end + reader.tail == cut


@FAST
@given(st.binary(max_size=2000))
def test_random_bytes(data):
    for buf in (data, b"\xfebin" + data, FIXTURE[:256] + data):
        try:
            read_all(buf)
        except CodecError as e:
            assert "fuzz.bin" in str(e)


@pytest.mark.parametrize("size", [0, 5, 18, 0x7FFFFFFF, 0xFFFFFFFF])
def test_absurd_event_size(size):
    buf = bytearray(FIXTURE[:299])
    struct.pack_into("<I", buf, 256 + 9, size)  # GTID_LIST's event_size
    buf += b"\x00" * 100
    with pytest.raises(CodecError, match="position 256"):
        read_all(bytes(buf), max_event_size=1 << 20)
    # With a partial tail allowed an oversize length is still bounded by max_event_size.
    if size > 1 << 20:
        with pytest.raises(CodecError, match="max_event_size"):
            read_all(bytes(buf), max_event_size=1 << 20, allow_partial_tail=True)


def _event(code: int, body: bytes) -> bytes:
    buf = bytearray(19 + len(body) + 4)
    struct.pack_into("<IBIIIH", buf, 0, 0, code, 1, len(buf), 0, 0)
    buf[19 : 19 + len(body)] = body
    seal(buf)
    return bytes(buf)


@FAST
@given(st.integers(0, 255), st.binary(max_size=300))
def test_decoders_on_random_bodies(code, body):
    if code == 15:
        return  # an FDE describes the file; covered by the reader tests
    try:
        ev = decode_event(_event(code, body), FDE, pos=123, file="fuzz.bin")
    except CodecError as e:
        assert "fuzz.bin" in str(e) and "123" in str(e)
        return
    if code not in REGISTRY:
        assert isinstance(ev.body, UnknownEvent) and ev.body.raw == body


def test_unknown_type_is_kept_raw():
    ev = decode_event(_event(200, b"abc"), FDE)
    assert ev.body == UnknownEvent(200, b"abc")
    with pytest.raises(CodecError, match="compressed"):
        decode_event(_event(166, b"abc"), FDE, strict=True)


def _mutate(data, raw: bytes) -> bytes:
    """Overwrite, insert or delete a few body bytes, fix event_size and re-seal the CRC: the
    mutation reaches the decoders instead of stopping at the checksum."""
    buf = bytearray(raw[:-4])
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(19, max(19, len(buf) - 1)))
        op = data.draw(st.sampled_from(["set", "insert", "delete"]))
        if op == "set" and at < len(buf):
            buf[at] = data.draw(st.integers(0, 255))
        elif op == "insert":
            buf[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        elif len(buf) > 19:
            del buf[at : at + data.draw(st.integers(1, 8))]
    buf += b"\0\0\0\0"
    struct.pack_into("<I", buf, 9, len(buf))
    seal(buf)
    return bytes(buf)


@FAST
@given(st.data())
def test_mutated_real_events_with_a_valid_crc(data):
    """A mutated table map or rows event (CRC re-sealed) decodes, or raises CodecError naming
    the file and position; rows are decoded with the (possibly mutated) table map before them."""
    fde = EVENTS_READER.fde
    i = data.draw(st.integers(1, len(EVENTS) - 1))  # not the FDE (describes the file)
    event = EVENTS[i]
    table_map = next((e for e in reversed(EVENTS[:i]) if e.type_code == 19), None)
    mutate_map = table_map is not None and data.draw(st.booleans())
    try:
        raw = _mutate(data, event.data) if not mutate_map else event.data
        decoded = decode_event(raw, fde, pos=event.pos, file="fuzz.bin")
        if event.type_code in ROWS_TYPES and table_map is not None:
            map_raw = _mutate(data, table_map.data) if mutate_map else table_map.data
            tm = decode_event(map_raw, fde, pos=table_map.pos, file="fuzz.bin").body
            columns = tm.columns(mariadb=True)
            assert isinstance(decoded.body, RowsEvent)
            try:
                decoded.body.decode_rows(columns)
            except CodecError as e:
                raise e.located(file="fuzz.bin", pos=event.pos) from None
        elif event.type_code == 19:
            decoded.body.columns(mariadb=True)
    except CodecError as e:
        assert "fuzz.bin" in str(e) and "position" in str(e), e
