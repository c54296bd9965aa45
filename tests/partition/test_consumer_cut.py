"""A consumer's link dropped silently (issue 39): one dumper (host `d1`, 1 MB files) under
transfers, with two consumers (`mariadb-binlog --raw --stop-never`): X on host `c1`, following
the end of the binlog, and H on host `c2`, whose link is rate-limited (SLOW_KBIT) so that it
reads files behind the end and holds them (retention keeps every file from the oldest one a
connected dump reads: dumper/server/store/retention.py). Then every packet between d1 and c1 and
between d1 and c2 dropped, both ways (no FIN, no RST: the consumers' sessions hang half-open,
the dumper's sends stay unacknowledged), for as long as it takes; then the links healed.

The contract, with `[dumper] client_timeout_s` = CDC_PARTITION_CLIENT_TIMEOUT_S (default 5):
- each consumer's session is gone from the dumper's consumers (the status file's `consumers`,
  what `cdc status` shows) within BOUND_S = client_timeout_s + 2 s + 2 s. Both receive data
  when cut: X's connection is ended by TCP_USER_TIMEOUT (client_timeout_s of unacknowledged
  data; its first retransmission comes soon on a fast link); H's path is deep-queued (rtt of
  seconds, an RTO over 10 s), where TCP gives up only at a retransmission long after that, so
  it is the dump's own write timeout that ends it (no byte acknowledged for client_timeout_s,
  looked at every quarter of it: dumper/server/wire/conn.py). A quiet consumer would be found
  by the keepalives (idle 2 s, then client_timeout_s probes 1 s apart);
- the retention hold it had is released: `PURGE BINARY LOGS TO <X's file>` right after the cut
  keeps H's file (held by H's dead session); the same statement after H's session is gone purges
  it;
- after the heal, X reconnecting by position (the file and size of its copy) resumes with
  nothing lost: its copy, joined with what the resumed session served, is a prefix of the
  dumper's binlog, all of it once it caught up;
- the end-of-run proof passes (verify-binlog over the files purged, kept aside, and the rest;
  the replica equal).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time

import pymysql
import pytest

from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from tests.partition.cluster import SOLO_LEASE_MS, PartitionCluster, not_a_prefix, wait
from tests.partition.conftest import needs_hosts

pytestmark = needs_hosts

CLIENT_TIMEOUT_S = float(os.environ.get("CDC_PARTITION_CLIENT_TIMEOUT_S", "5"))
# client_timeout_s of no progress; + 2 s: the keepalive idle (a quiet consumer) or a quarter of
# the timeout (a blocked write looks at the client's progress 4 times per timeout); + 2 s: the
# status written every second, a loaded machine.
BOUND_S = CLIENT_TIMEOUT_S + 2.0 + 2.0
SLOW_KBIT = int(os.environ.get("CDC_PARTITION_SLOW_KBIT", "200"))


def number(name: str) -> int:
    return int(name.rsplit(".", 1)[1])


def record(status: dict, address: str) -> dict | None:
    """The consumers-list entry of the dump from `address` (None: no such session)."""
    return next((r for r in status.get("consumers", []) if r.get("host") == address), None)


def sql(c: PartitionCluster, statement: str) -> list:
    host, port = c.dumper_address(1)
    conn = pymysql.connect(
        host=host, port=port, user=DEFAULT_USER, password=DEFAULT_PASSWORD, connect_timeout=10
    )
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
            return list(cur.fetchall())
    finally:
        conn.close()


def oldest(c: PartitionCluster) -> str:
    return sql(c, "SHOW BINARY LOGS")[0][0]


def last_file(directory) -> tuple[str, int]:
    """The name and size of the last file of a consumer's copy."""
    path = max(directory.glob("binlog.[0-9]*"), key=lambda p: p.name)
    return path.name, path.stat().st_size


def join_resumed(copy, resumed, into, first: str, position: int) -> None:
    """`copy` (files up to `first`, which ends at `position`) and `resumed` (from `first`:
    `position`: magic + the resent FDE + the events after `position`, then whole files) joined
    into `into`, as one consumer that never stopped would hold them."""
    shutil.copytree(copy, into)
    head = (copy / first).read_bytes()[:position]
    data = (resumed / first).read_bytes()
    fde_len = int.from_bytes(data[4 + 9 : 4 + 13], "little")
    (into / first).write_bytes(head + data[4 + fde_len :])
    for p in resumed.glob("binlog.[0-9]*"):
        if p.name != first:
            shutil.copy(p, into / p.name)


def whole_binlog(binlog, kept):
    """The dumper's binlog with the files purged from it (copies kept in `kept`) back: a
    directory of files and an index for `cdc verify-binlog --from-files`."""
    whole = kept.parent / "whole-binlog"
    shutil.rmtree(whole, ignore_errors=True)
    shutil.copytree(kept, whole)
    for p in binlog.glob("binlog.[0-9]*"):
        shutil.copy(p, whole / p.name)
    names = sorted(p.name for p in whole.glob("binlog.[0-9]*"))
    (whole / "binlog.index").write_text("".join(f"./{n}\n" for n in names))
    return whole


@pytest.mark.timeout(300)
async def test_a_consumers_link_dropped_silently(tmp_path, hosts):
    def tune(cfg) -> None:
        cfg.dumper.client_timeout_s = CLIENT_TIMEOUT_S
        cfg.pipeline.max_file_size_mb = 1  # files rotate every few seconds under transfers

    c = PartitionCluster(tmp_path, hosts, lease_ms=SOLO_LEASE_MS, ids=(1,), tune=tune)
    problems: list[str] = []
    timeline: list[tuple[float, str]] = []
    c1, c2 = hosts["c1"].address, hosts["c2"].address
    try:
        c.start_pipeline()
        c.attach_replica()
        since = c.truth_size()
        c.start_workload("transfer")
        await c.wait_load_writes(since, workloads=1)
        x = c.consume("c1", 1)
        hosts.slow("d1", "c2", SLOW_KBIT)
        c.consume("c2", 1)

        def apart():
            status = c.dumpers.status(1)
            rx, rh = record(status, c1), record(status, c2)
            if rx and rh and number(rh["file"]) < number(rx["file"]):
                return rx, rh
            return None

        rx, rh = await wait(apart, 90, "H never fell a file behind X")
        cut_at = time.monotonic()
        hosts.cut("d1", "c1")
        hosts.cut("d1", "c2")
        x_file, h_file = rx["file"], rh["file"]
        timeline.append((0.0, f"cut d1 / c1, d1 / c2: X reads {x_file}, H reads {h_file}"))

        # The files a purge may take, kept aside: the proof reads the whole binlog.
        binlog = c.dumpers.binlog(1)
        kept = tmp_path / "purged"
        kept.mkdir()
        for p in binlog.glob("binlog.[0-9]*"):
            if number(p.name) < number(x_file):
                shutil.copy(p, kept / p.name)
        c.verify_args = lambda: ["--from-files", str(whole_binlog(binlog, kept))]
        await asyncio.to_thread(sql, c, f"PURGE BINARY LOGS TO '{x_file}'")
        first = await asyncio.to_thread(oldest, c)
        timeline.append((time.monotonic() - cut_at, f"PURGE TO {x_file}: oldest is {first}"))
        if number(first) > number(h_file):
            problems.append(
                f"PURGE TO {x_file} right after the cut removed {h_file}, which H read: "
                f"not a test of the hold (oldest {first})"
            )

        gone: dict[str, float] = {}
        while len(gone) < 2 and time.monotonic() < cut_at + BOUND_S + 10:
            status = c.dumpers.status(1)
            for name, address in (("X", c1), ("H", c2)):
                if name not in gone and status and record(status, address) is None:
                    gone[name] = time.monotonic() - cut_at
                    timeline.append((gone[name], f"{name}'s session gone from the consumers"))
            await asyncio.sleep(0.1)
        for name, consumer_host in (("X", "c1"), ("H", "c2")):
            if name not in gone:
                # Why TCP did not end it: the dumper's socket to it (retransmission timer, rto)
                ss = hosts.run_on(
                    "d1",
                    ["ss", "-tino", "dst", hosts[consumer_host].address],
                    check=False,
                    capture_output=True,
                    text=True,
                )
                print(f"{name} still listed; on d1: {ss.stdout}")
                problems.append(f"{name}'s session still listed {BOUND_S + 10:.0f} s after the cut")
            elif gone[name] > BOUND_S:
                problems.append(
                    f"{name}'s session ended {gone[name]:.1f} s after the cut (bound {BOUND_S} s)"
                )

        await asyncio.to_thread(sql, c, f"PURGE BINARY LOGS TO '{x_file}'")
        first = await asyncio.to_thread(oldest, c)
        timeline.append((time.monotonic() - cut_at, f"PURGE TO {x_file}: oldest is {first}"))
        if first != x_file:
            problems.append(f"after the sessions ended, PURGE TO {x_file} left {first} first")

        hosts.heal("d1", "c1")
        hosts.heal("d1", "c2")
        timeline.append((time.monotonic() - cut_at, "healed"))
        for consumer in c.consumers.values():
            consumer.stop()
        resume_file, resume_pos = last_file(x.dir)
        timeline.append((time.monotonic() - cut_at, f"X resumes at {resume_file}:{resume_pos}"))
        resumed = c.consume("c1", 1, resume_file, resume_pos, name="c1-resumed")

        summary = await c.prove("consumers cut from the dumper")
        print(summary)
        if c.replica is not None and (error := c.replica_error()):
            problems.append(f"the replica: {error}")
        joined = tmp_path / "consumer-c1-joined"

        def from_first(directory) -> int:
            files = directory.glob("binlog.[0-9]*")
            return sum(p.stat().st_size for p in files if number(p.name) >= number(first))

        def caught_up() -> bool:
            shutil.rmtree(joined, ignore_errors=True)
            join_resumed(x.dir, resumed.dir, joined, resume_file, resume_pos)
            return from_first(joined) >= from_first(binlog)

        try:
            await wait(caught_up, 30, "")
        except AssertionError:
            problems.append(f"the resumed consumer did not catch up in 30 s: {resumed.log()}")
        resumed.stop()
        # (the files purged meanwhile are no longer the dumper's to compare with)
        for p in joined.glob("binlog.[0-9]*"):
            if number(p.name) < number(first):
                p.unlink()
        if why := not_a_prefix(joined, binlog):
            problems.append(f"X, resumed by position: {why}")
    finally:
        detail = "\n".join(f"{t:+7.1f}s {what}" for t, what in timeline)
        print(f"timeline (client_timeout_s {CLIENT_TIMEOUT_S}, bound {BOUND_S} s):\n{detail}")
        print(f"dumper's log ends:\n{c.dumpers.tail()}")
        c.close()
    assert not problems, "\n".join(problems)
