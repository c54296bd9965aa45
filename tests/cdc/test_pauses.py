"""Pauses (one log line when a pause starts, one when it ends, whatever the retries between),
the backoff, `admin_sql.retry` around a call that fails while a server is away, and how a pause
reaches `cdc status` and the metrics."""

from __future__ import annotations

import logging
import threading
import time

import pymysql
import pytest

from cdc.admin_sql import retry
from cdc.pauses import GMS, REASONS, Backoff, Pauses
from cdc_cli.commands.pipeline import status_lines
from dumper.metrics import _from_status


def test_a_pause_is_logged_once_each_way(caplog):
    pauses = Pauses()
    with caplog.at_level(logging.WARNING, logger="cdc.pauses"):
        for i in range(5):
            pauses.begin(GMS, f"try {i}")
        since = pauses.snapshot()[0]["since"]
        assert pauses.snapshot() == [{"reason": GMS, "detail": "try 4", "since": since}]
        pauses.end(GMS)
        pauses.end(GMS)
    assert [r.getMessage()[:15] for r in caplog.records] == ["paused (gms): t", "resumed (gms) a"]
    assert pauses.snapshot() == [] and pauses.count[GMS] == 1


def test_backoff_doubles_to_its_cap_and_resets():
    b = Backoff(0.2, 1.0)
    assert [b.next() for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    b.reset()
    assert b.next() == 0.2


def test_retry_waits_while_the_server_is_away():
    pauses, calls, dropped = Pauses(), [], []

    def call():
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise pymysql.err.OperationalError(2013, "Lost connection to MySQL server")
        assert pauses.snapshot()[0]["reason"] == GMS  # visible while it waits
        return "ok"

    assert retry(call, "reading", pauses, on_error=lambda: dropped.append(1)) == "ok"
    assert len(calls) == 3 and len(dropped) == 2 and pauses.snapshot() == []


def test_retry_gives_up_when_stopped_and_passes_other_errors():
    stop = threading.Event()
    stop.set()
    with pytest.raises(pymysql.err.OperationalError):
        retry(
            lambda: (_ for _ in ()).throw(pymysql.err.OperationalError(2003)),
            "x",
            Pauses(),
            stop=stop,
        )
    with pytest.raises(pymysql.err.ProgrammingError):  # not a server away: a bug, at once
        retry(lambda: (_ for _ in ()).throw(pymysql.err.ProgrammingError(1146)), "x", Pauses())


def test_status_and_metrics_name_the_pause():
    now = time.time()
    status = {
        "written_at": now,
        "pauses": [{"reason": "binlog_disk_full", "detail": "/b: 0 bytes free", "since": now - 12}],
    }
    assert status_lines(status, now)[0].startswith("PAUSED (binlog_disk_full) since ")
    assert "(12s): /b: 0 bytes free" in status_lines(status, now)[0]
    (family,) = [m for m in _from_status(status, now) if m.name == "cdc_paused_seconds"]
    values = {s.labels["reason"]: s.value for s in family.samples}
    assert set(values) == set(REASONS) and values["binlog_disk_full"] == pytest.approx(12)
    assert values["gms"] == 0
