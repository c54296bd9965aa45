"""A workload's set-up waits out a DN or the GMS restarting (`cdc_equipment.cn.workloads.set_up`): a load
started while the cluster is disturbed (the chaos tests start theirs right before the first
kill) must not end before it began; a failure that outlasts the timeout is raised."""

from __future__ import annotations

import pymysql
import pytest

from cdc.cn_protocol.errors import TransactionAborted
from cdc_equipment.cn.workloads import set_up


async def test_set_up_is_retried_until_it_succeeds():
    failures = [pymysql.err.OperationalError(2013, "Lost connection"), TransactionAborted("dn2")]
    calls = 0

    async def setup() -> None:
        nonlocal calls
        calls += 1
        if failures:
            raise failures.pop(0)

    await set_up(setup, timeout_s=30)
    assert calls == 3


async def test_a_failure_that_outlasts_the_timeout_is_raised():
    async def setup() -> None:
        raise pymysql.err.OperationalError(2003, "Can't connect")

    with pytest.raises(pymysql.err.OperationalError):
        await set_up(setup, timeout_s=0)


async def test_a_bug_is_not_retried():
    async def setup() -> None:
        raise KeyError("table")

    with pytest.raises(KeyError):
        await set_up(setup, timeout_s=30)
