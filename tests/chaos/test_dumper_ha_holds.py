"""A named consumer's hold survives an HA takeover (issue 42 item 5, docs/retention.md "Holds
and HA"), with real processes: two dumpers (`cdc start --dumper-id N`) on a throw-away cluster
under transfer traffic, `expire_logs_seconds = 1` and a FlushLogs now and then, so that every
finished file is soon due. The consumer reads from the leader only, then goes away; the
follower learns its position from the leader's SHOW CONSUMERS. The leader is killed: the
follower takes over and, while files rotate and expire, keeps the consumer's file; the consumer
resumes there on the new leader."""

from __future__ import annotations

import asyncio
import contextlib

import pymysql
import pytest

from binlog_writer import layout
from cdc.config import DumperConsumer
from cdc.protocol.dump_client import BinlogPosition, DumpClient, DumpSettings
from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER
from tests.chaos.dumpers import Dumpers, end_run, two_dumpers
from tests.chaos.transfer_setup import background_load, transfer_cn
from tests.dumper.test_consumer_holds import read_to_end

APP_ID = 4242


@pytest.fixture
def holds_setup(tmp_path):
    def tune(cfg):
        cfg.dumper.expire_logs_seconds = 1
        cfg.dumper.consumers = [DumperConsumer("app", server_id=APP_ID)]

    with two_dumpers(tmp_path, dns=2, tune=tune) as setup:
        yield setup


def show_consumers(port: int) -> dict:
    """The `app` row of SHOW CONSUMERS (empty while the server does not answer)."""
    try:
        with (
            pymysql.connect(
                host="127.0.0.1", port=port, user=DEFAULT_USER, password=DEFAULT_PASSWORD
            ) as conn,
            conn.cursor() as cur,
        ):
            cur.execute("SHOW CONSUMERS")
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    except pymysql.err.MySQLError:
        return {}
    return next((r for r in rows if r["Name"] == "app"), {})


async def read_a_while(port: int, start: BinlogPosition, seconds: float) -> None:
    """The consumer: a blocking dump as server_id APP_ID for `seconds`, then gone."""
    settings = DumpSettings(
        "127.0.0.1", port, DEFAULT_USER, DEFAULT_PASSWORD, server_id=APP_ID, reconnect=False
    )
    client = DumpClient(settings, start)

    async def read() -> None:
        async for _ in client.batches():
            pass

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(read(), seconds)
    await client.close()


async def test_a_consumer_hold_survives_a_takeover(holds_setup, tmp_path):
    cfg, config_path = holds_setup
    port = {p.id: p.port for p in cfg.dumper.peers}
    cn, workload = await transfer_cn(cfg)
    dumpers = Dumpers(config_path, tmp_path)
    load_task, stop_load = background_load(workload)

    def files(i: int) -> list[str]:
        return layout.read_index(dumpers.binlog(i), "binlog")

    async def rotate(times: int) -> None:
        for _ in range(times):
            await cn.flush_logs()
            await asyncio.sleep(0.5)

    try:
        dumpers.start(1)
        await dumpers.wait(lambda: dumpers.role(1) == "leader", 60, "dumper 1 did not lead")
        dumpers.start(2)
        await dumpers.wait(lambda: dumpers.role(2) == "follower", 60, "dumper 2 does not follow")
        await rotate(2)
        # (Finished files expire a second after they end: a file count would be a race.)
        await dumpers.wait(
            lambda: (f := files(2)) and f[-1] == files(1)[-1] and layout.file_number(f[-1]) >= 3,
            60,
            "dumper 2 did not copy the rotations",
        )

        # The consumer reads from the leader only, for a few seconds, then goes away. It starts
        # in the newest file: an older one may expire before its dump begins.
        await read_a_while(port[1], BinlogPosition(files(1)[-1], 4), 4.0)
        await dumpers.wait(
            lambda: (r := show_consumers(port[1])) and r["Connected"] == "No",
            30,
            "the leader never saw the consumer leave",
        )
        learned = await dumpers.wait(
            lambda: (r := show_consumers(port[2])) and r["File"] and r,
            30,
            "the follower never learned the consumer's position",
        )
        assert learned["Connected"] == "No" and learned["Dropped"] == "", learned
        held = learned["File"]
        on_leader = show_consumers(port[1])
        # Learned at most a poll before it left: the same place or an earlier one.
        assert (layout.file_number(held), int(learned["Position"])) <= (
            layout.file_number(on_leader["File"]),
            int(on_leader["Position"]),
        ), (learned, on_leader)

        # Files rotate and expire; the leader is killed; the follower takes over.
        await rotate(2)
        dumpers.kill(1)
        await dumpers.wait(lambda: dumpers.role(2) == "leader", 60, "dumper 2 did not take over")
        await rotate(3)
        await dumpers.wait(
            lambda: layout.file_number(files(2)[-1]) >= layout.file_number(held) + 4,
            60,
            "the new leader wrote no new files",
        )
        await asyncio.sleep(3)  # expire_logs_seconds = 1: every unheld finished file is gone
        assert files(2)[0] == held, (files(2), learned)
        row = show_consumers(port[2])
        assert row["File"] == held and row["Holds_from"] == held and row["Dropped"] == "", row

        # The consumer comes back to the new leader and resumes where it was.
        stop_load.set()
        await load_task
        got = await read_to_end(
            port[2], BinlogPosition(held, int(learned["Position"])), DEFAULT_USER, DEFAULT_PASSWORD
        )
        assert got, "nothing read from the held position"
    finally:
        await end_run(dumpers, cn, load_task)
