"""`cdc status` and the metrics of a multi-stream dumper: a line and a labelled sample per
stream, from the merge process's status (each stream's as its process last wrote it)."""

from __future__ import annotations

import time

from cdc_cli.commands.pipeline import status_lines
from dumper.metrics import _from_status

NOW = time.time()
TSO = int(NOW * 1000) << 22
STATUS = {
    "written_at": NOW,
    "last_tso": TSO,
    "lag_ms": 5,
    "transactions": 30,
    "events_per_s": 100.0,
    "file": "",
    "position": 0,
    "dns": [],
    "problems": [],
    "streams": [
        {
            "stream": 0,
            "port": 3308,
            "file": "binlog.000001",
            "position": 1234,
            "gno": 10,
            "last_tso": TSO,
            "merged_tso": TSO,
            "transactions": 10,
            "bytes": 999,
        },
        {
            "stream": 1,
            "port": 3309,
            "file": "binlog.000002",
            "position": 4,
            "gno": 20,
            "last_tso": TSO - 5,
            "merged_tso": TSO,
            "transactions": 20,
            "bytes": 1999,
        },
    ],
}


def test_status_prints_a_line_per_stream():
    lines = status_lines(STATUS, NOW)
    rows = [line.split() for line in lines if line.split()[:1] in (["0"], ["1"])]
    assert [r[:4] for r in rows] == [
        ["0", "3308", "binlog.000001:1234", "10"],
        ["1", "3309", "binlog.000002:4", "20"],
    ]


def test_metrics_have_a_sample_per_stream():
    families = {f.name: f for f in _from_status(STATUS, NOW)}
    gtid = families["cdc_stream_gtid"]
    assert {(s.labels["stream"], s.labels["port"], s.value) for s in gtid.samples} == {
        ("0", "3308", 10),
        ("1", "3309", 20),
    }
    assert len(families["cdc_stream_lag_seconds"].samples) == 2
