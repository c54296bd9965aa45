"""The fsync policy decides as documented (it was tested beside the writer bench, now bench/)."""

from __future__ import annotations

import pytest

from binlog_writer import FsyncMode, FsyncPolicy


def test_fsync_policy():
    assert FsyncPolicy.per_txn().due(1, 0)
    assert not FsyncPolicy.per_txn().due(0, 1e9)
    g = FsyncPolicy.every(3)
    assert [g.due(n, 0) for n in (1, 2, 3)] == [False, False, True]
    i = FsyncPolicy.interval(50)
    assert not i.due(10, 49.9) and i.due(1, 50)
    assert not FsyncPolicy.never().due(10**6, 1e9)
    assert FsyncPolicy.parse("group:8") == FsyncPolicy(FsyncMode.GROUP, group_size=8)
    assert FsyncPolicy.parse("interval:20").interval_ms == 20
    with pytest.raises(ValueError):
        FsyncPolicy.parse("sometimes")
    with pytest.raises(ValueError):
        FsyncPolicy.every(0)
