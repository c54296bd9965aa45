"""Point spellings (pure) and their resolution against a small binlog written by the real writer
(`tests/binlog_writer/gen.py`'s transactions): each form, and every error with its message."""

from __future__ import annotations

import datetime as dt

import pytest

from history import (
    AmbiguousPoint,
    MalformedPoint,
    PointInFuture,
    PointSpec,
    parse_point,
)

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("TSO 123", "tso", 123),
        ("  tso   7 ", "tso", 7),
        (f"GTID '{UUID}:5'", "gtid", f"{UUID}:5"),
        (f"gtid {UUID}:5", "gtid", f"{UUID}:5"),
        (f"{UUID}:5", "gtid", f"{UUID}:5"),
        ("0-1-42", "gtid", "0-1-42"),
        ("GTID '3-7-42'", "gtid", "3-7-42"),
        ("'binlog.000003':1234", "position", ("binlog.000003", 1234)),
        ("binlog.000003:4", "position", ("binlog.000003", 4)),
    ],
)
def test_forms(text, kind, value):
    spec = parse_point(text)
    assert (spec.kind, spec.value) == (kind, value)


def test_time_is_local_and_keeps_microseconds():
    spec = parse_point("TIMESTAMP '2026-11-29 06:00:01.250000'")
    assert spec.kind == "time"
    assert spec.value.tzinfo is not None
    assert spec.value.replace(tzinfo=None) == dt.datetime(2026, 11, 29, 6, 0, 1, 250000)
    assert parse_point("timestamp '2026-11-29 06:00:01'").value.microsecond == 0


@pytest.mark.parametrize(
    ("text", "error", "says"),
    [
        ("12345", AmbiguousPoint, "TSO 12345"),
        ("TSO", MalformedPoint, "TSO n"),
        ("TSO -1", MalformedPoint, "malformed"),
        ("TIMESTAMP '2026-13-01 00:00:00'", MalformedPoint, "YYYY-mm-dd"),
        ("TIMESTAMP 2026-01-01", MalformedPoint, "malformed"),
        ("GTID 'nope:1'", MalformedPoint, "uuid:n or domain-server-n"),
        ("GTID '0-1'", MalformedPoint, "uuid:n"),
        ("'mysql-bin':5", MalformedPoint, "not a binlog file name"),
        ("", MalformedPoint, "malformed"),
    ],
)
def test_bad_spellings(text, error, says):
    with pytest.raises(error) as exc:
        parse_point(text)
    assert says in str(exc.value)


def test_time_bound_covers_its_millisecond():
    from history.points import time_bound

    when = dt.datetime(2026, 11, 29, 6, 0, 1, 250999, tzinfo=dt.UTC)
    ms = int(when.timestamp() * 1000)
    assert time_bound(when) >> 22 == ms
    assert time_bound(when) == (ms << 22) | ((1 << 22) - 1)


def test_future_is_refused_before_any_read(tmp_path):
    from history import resolve
    from history.points import RetainedFiles

    (tmp_path / "binlog.index").write_text("./binlog.000001\n")
    files = RetainedFiles(tmp_path)
    later = dt.datetime.now().astimezone() + dt.timedelta(days=1)
    with pytest.raises(PointInFuture, match="in the future"):
        resolve(PointSpec("time", later, "TIMESTAMP 'x'"), files)
    with pytest.raises(PointInFuture, match="in the future"):
        resolve(f"TSO {int(later.timestamp() * 1000) << 22}", files)
