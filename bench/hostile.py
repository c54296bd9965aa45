"""`cdc bench hostile`: does serving stall writing? The global binlog's growth under a steady
transfer load through the reference CN, without and then with a set of hostile clients of the
dumper running all along, in one run on one pipeline (`cdc start`); it prints the ratio
(with / without, goal >= 0.95) and the writer's longest pause in each phase.

The hostile clients (in their own process, started before the second phase and stopped after
it), all logged in as the replication user:

* heartbeat abuse: blocking dumps from the current end with `@master_heartbeat_period = 1`
  (one nanosecond), reading what comes;
* stalled readers: blocking dumps from the first file that never read;
* huge queries in a loop: `SELECT '<N MB literal>'` and an unquoted query of 3 N MB;
* `SHOW BINLOG EVENTS` without LIMIT over the first file in a loop, read to the end, and one
  that stops reading its result.

`--in-process` runs the same two phases a second time with the protocol server on the
leader's loop (`[dumper] serve_process = false`, as before docs/dumper.md "Serving cannot
stall writing"), to show what the isolation buys.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import struct
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from bench.goals import Figures
from bench.latency import start_pipeline
from cdc_equipment.cn.workloads.steady import prepare, run_fast, steady_load
from cdc_equipment.local_cluster.testing import free_base_port, scratch_cluster, stop_process
from dumper.server.store.binlog_files import BinlogFiles

XID_EVENT = 16
SAMPLE_S = 0.02  # how often the growth sampler looks at the binlog


# -- the hostile clients (own process) ---------------------------------------------------------
@dataclass(slots=True)
class HostileSet:
    heartbeat_dumps: int = 4
    stalled_dumps: int = 8
    query_mb: float = 2.0  # the literal of SELECT '<literal>'; the unquoted query is 3x; 0: none
    query_loops: int = 1  # connections sending each kind of huge query, one after another
    binlog_events_loops: int = 2
    binlog_events_stalled: int = 1
    # Clients reading a whole logical table (SELECT *, a snapshot read) in a loop
    # (`cdc bench snapshot-isolation`); the table the steady load writes.
    table_readers: int = 0
    table: str = "bank.accounts"
    # The table readers read as of an old point (`--as-of`): the global binlog's end before
    # the first phase, filled in by `measure_sets` as `point` ('file':pos).
    as_of: bool = False
    point: str = ""

    def clients(self) -> str:
        """The hostile clients, as a bench's header names them."""
        queries = (
            f"SELECT '<{self.query_mb:g} MB>' and a {3 * self.query_mb:g} MB unquoted query in"
            " loops"
            if self.query_mb
            else "no huge queries"
        )
        return (
            f"{self.heartbeat_dumps} dumps at a 1 ns heartbeat period, {self.stalled_dumps}"
            f" stalled dumps, {queries}, {self.binlog_events_loops} SHOW BINLOG EVENTS loops +"
            f" {self.binlog_events_stalled} stalled"
        )


def hostile(host: str, port: int, user: str, password: str, spec: HostileSet, conn) -> None:
    """Process entry: run the hostile clients; "ready" once they all started, then on "stop"
    send back what each kind achieved (counts of answers and errors)."""
    asyncio.run(_hostile(host, port, user, password, spec, conn))


async def _hostile(host, port, user, password, spec: HostileSet, conn) -> None:
    from cdc.protocol.client import MysqlClient
    from cdc.protocol.constants import Command

    counts: dict[str, int] = {}

    def count(what: str) -> None:
        counts[what] = counts.get(what, 0) + 1

    async def login() -> MysqlClient:
        return await MysqlClient.connect(host, port, user, password)

    async def dump(server_id: int, heartbeat: bool, start_at_end: bool) -> MysqlClient:
        c = await login()
        await c.query("SET @master_binlog_checksum = 'CRC32'")
        if heartbeat:
            await c.query("SET @master_heartbeat_period = 1")  # 1 ns
        file, pos = "", 4
        if start_at_end:
            file, pos = (await c.query("SHOW MASTER STATUS")).rows[0][:2]
        body = struct.pack("<IHI", int(pos), 0, server_id) + str(file).encode()
        await c.send_command(Command.BINLOG_DUMP, body)
        return c

    async def heartbeat_reader(i: int) -> None:
        c = await dump(8100 + i, heartbeat=True, start_at_end=True)
        while True:
            data = await c.read_raw()
            if not data:
                return
            counts["heartbeat bytes"] = counts.get("heartbeat bytes", 0) + len(data)

    async def huge_queries(text: str, what: str) -> None:
        while True:
            c = await login()
            try:
                while True:
                    await c.query(text)
                    count(f"{what}: answered")
            except Exception:  # an ERR (1064, 1153, ...) or a closed connection: again
                count(f"{what}: refused")
            finally:
                c.close()

    async def binlog_events() -> None:
        c = await login()
        while True:
            rows = (await c.query("SHOW BINLOG EVENTS")).rows
            counts["SHOW BINLOG EVENTS rows"] = counts.get("SHOW BINLOG EVENTS rows", 0) + len(rows)

    async def table_reader() -> None:
        c = await login()
        while True:
            as_of = f" AS OF {spec.point}" if spec.point else ""
            rows = (await c.query(f"SELECT * FROM {spec.table}{as_of}")).rows
            count("whole-table reads")
            counts["rows read"] = counts.get("rows read", 0) + len(rows)

    async def stalled_binlog_events() -> MysqlClient:
        c = await login()
        await c.send_command(Command.QUERY, b"SHOW BINLOG EVENTS")
        return c  # and never read

    mb = int(spec.query_mb * (1 << 20))
    literal = "SELECT '" + "x" * mb + "'"
    unquoted = "SELECT " + "a " * (3 * mb // 2)
    stalled = [await dump(8200 + i, False, False) for i in range(spec.stalled_dumps)]
    stalled += [await stalled_binlog_events() for _ in range(spec.binlog_events_stalled)]
    tasks = [asyncio.create_task(heartbeat_reader(i)) for i in range(spec.heartbeat_dumps)]
    for _ in range(spec.query_loops if mb else 0):
        tasks.append(asyncio.create_task(huge_queries(literal, f"{spec.query_mb:g} MB literal")))
        tasks.append(
            asyncio.create_task(huge_queries(unquoted, f"{3 * spec.query_mb:g} MB unquoted"))
        )
    tasks += [asyncio.create_task(binlog_events()) for _ in range(spec.binlog_events_loops)]
    tasks += [asyncio.create_task(table_reader()) for _ in range(spec.table_readers)]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(conn.fileno(), stop.set)  # the only message after "ready" is "stop"
    conn.send("ready")
    await stop.wait()
    loop.remove_reader(conn.fileno())
    for t in tasks:
        if t.done() and not t.cancelled() and t.exception() is not None:
            counts[f"ended: {t.exception()!r}"[:120]] = 1
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for c in stalled:
        c.close()
    conn.recv()
    conn.send(counts)


# -- measuring ---------------------------------------------------------------------------------
def binlog_sizes(directory: Path) -> dict[str, int]:
    sizes = {}
    for p in directory.glob("binlog.[0-9]*"):
        with contextlib.suppress(OSError):
            sizes[p.name] = p.stat().st_size
    return sizes


def binlog_bytes(directory: Path) -> int:
    return sum(binlog_sizes(directory).values())


def transactions_between(directory: Path, start: dict[str, int], end: dict[str, int]) -> int:
    """Transactions (XID events) that ended in the binlog between two `binlog_sizes`."""
    files = BinlogFiles(directory)
    count = 0
    for name, upto in end.items():
        low = start.get(name, 0)
        for e in files.events(name):
            stop = e.pos + len(e.data)
            if stop > upto:
                break
            count += e.type_code == XID_EVENT and stop > low
    return count


class GrowthSampler:
    """Samples the binlog's size every SAMPLE_S in a thread: the longest time it did not grow
    while the load ran (the writer's longest pause, as seen from outside)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.longest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> GrowthSampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        size, since = binlog_bytes(self.dir), time.monotonic()
        while not self._stop.wait(SAMPLE_S):
            now, new = time.monotonic(), binlog_bytes(self.dir)
            if new != size:
                size, since = new, now
            self.longest = max(self.longest, now - since)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.longest


@dataclass(slots=True)
class Phase:
    bytes: int
    transactions: int
    seconds: float
    achieved_tps: float
    longest_pause_s: float
    hostile: dict[str, int] | None = None


def _phase(cfg, binlog: Path, tps: float, seconds: float, workers: int) -> Phase:
    """The load for `seconds`; the binlog's growth over exactly that time (bytes, and whole
    transactions counted in the files)."""
    marks: dict[str, tuple[dict[str, int], float]] = {}

    def ready() -> None:
        marks["start"] = (binlog_sizes(binlog), time.monotonic())

    sampler = GrowthSampler(binlog).start()
    load = run_fast(steady_load(cfg, tps, seconds, workers, 0.5, ready=ready))
    end, finished = binlog_sizes(binlog), time.monotonic()
    pause = sampler.stop()
    start, began = marks["start"]
    return Phase(
        sum(end.values()) - sum(start.values()),
        transactions_between(binlog, start, end),
        finished - began,
        len(load.commits) / load.elapsed_s if load.elapsed_s else 0.0,
        pause,
    )


def measure(
    *,
    seconds: float = 15,
    tps: float = 300,
    workers: int = 8,
    dns: int = 2,
    spec: HostileSet | None = None,
    in_process: bool = False,
) -> tuple[Phase, Phase]:
    """(without, with) hostile clients, on one throw-away cluster and pipeline."""
    without, (with_,) = measure_sets(
        seconds=seconds,
        tps=tps,
        workers=workers,
        dns=dns,
        specs=[spec or HostileSet()],
        in_process=in_process,
    )
    return without, with_


def measure_sets(
    *,
    seconds: float,
    tps: float,
    workers: int = 8,
    dns: int = 2,
    specs: list[HostileSet],
    in_process: bool = False,
) -> tuple[Phase, list[Phase]]:
    """(without clients, with each set of clients in turn), on one throw-away cluster and
    pipeline: `cdc bench all --quick` measures the hostile clients and the table readers
    against one phase without them, instead of starting a second cluster for the same baseline."""
    from cdc.config import load
    from cdc_equipment.local_cluster.local_cluster import DEFAULT_PASSWORD, DEFAULT_USER

    with scratch_cluster("cdc-bench-hostile-", dns) as (work, cluster):
        cfg = cluster.config()
        cfg.dumper.binlog_dir = str(work / "binlog")
        cfg.dumper.port = free_base_port(0)
        cfg.dumper.serve_process = not in_process
        for user in cfg.dumper.users:
            user.select = True  # the table readers' snapshot reads
        config_path = work / "cdc.toml"
        cfg.dump(config_path)
        cfg = load(config_path)
        asyncio.run(prepare(cfg))
        state = work / "pipeline"
        with open(work / "pipeline.log", "ab") as log:
            pipeline = start_pipeline(config_path, state, log)
        try:
            time.sleep(1)  # the setup's transactions pass first
            binlog = Path(cfg.dumper.binlog_dir)
            client = (cfg.dumper.host, cfg.dumper.port, DEFAULT_USER, DEFAULT_PASSWORD)
            if any(s.as_of for s in specs):
                point = _end_point(*client)
                specs = [replace(s, point=point) if s.as_of else s for s in specs]
            without = _phase(cfg, binlog, tps, seconds, workers)
            withs = [_phase_with(cfg, binlog, tps, seconds, workers, client, s) for s in specs]
            return without, withs
        finally:
            stop_process(pipeline)


def _end_point(host: str, port: int, user: str, password: str) -> str:
    """The served binlog's end now, as an `AS OF` point ('file':pos)."""
    import pymysql

    conn = pymysql.connect(host=host, port=port, user=user, password=password)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
    finally:
        conn.close()
    return f"'{file}':{pos}"


def _phase_with(cfg, binlog: Path, tps, seconds, workers, client, spec: HostileSet) -> Phase:
    """A phase with `spec`'s clients at work all along (in a process of their own, stopped
    after it), and what they achieved."""
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(target=hostile, args=(*client, spec), kwargs={"conn": theirs}, daemon=True)
    proc.start()
    try:
        if not ours.poll(120) or ours.recv() != "ready":
            raise RuntimeError("the hostile clients did not start")
        time.sleep(1)  # they are all at work
        with_ = _phase(cfg, binlog, tps, seconds, workers)
        ours.send("stop")
        with_.hostile = ours.recv() if ours.poll(60) else {"no report": 1}
        return with_
    finally:
        if proc.is_alive():
            proc.kill()


def describe(
    name: str,
    without: Phase,
    with_: Phase,
    figures: Figures,
    goal: str = "hostile",
    clients: str = "hostile clients",
) -> list[str]:
    """The two phases and their ratio, the lower of bytes and transactions against `goal` (its
    name in bench/goals.py, kept in `figures` as `name`'s)."""

    def line(label: str, p: Phase) -> str:
        return (
            f"  {label:<8} {p.bytes / p.seconds / 1e3:9,.1f} kB/s"
            f" {p.transactions / p.seconds:8,.1f} txn/s   CN {p.achieved_tps:7,.1f} TPS"
            f"   longest binlog pause {p.longest_pause_s:5.2f} s"
        )

    ratio_b = (with_.bytes / with_.seconds) / (without.bytes / without.seconds or 1)
    ratio_t = (with_.transactions / with_.seconds) / (without.transactions / without.seconds or 1)
    out = [f"{name}:", line("without", without), line("with", with_)]
    out.append(
        f"  ratio with/without {clients}: bytes {ratio_b:.2f}, transactions {ratio_t:.2f}"
        f"   {figures.goal(goal, min(ratio_b, ratio_t), name)}"
    )
    if with_.hostile:
        done = ", ".join(f"{k} {v:,}" for k, v in sorted(with_.hostile.items()))
        out.append(f"  {clients} meanwhile: {done}")
    return out


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    figures = figures or Figures()
    p = argparse.ArgumentParser(prog="cdc bench hostile", description=__doc__)
    p.add_argument("--seconds", type=float, default=15, help="per phase")
    p.add_argument("--tps", type=float, default=300, help="target CN transactions/s")
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--dns", type=int, default=2)
    p.add_argument(
        "--query-mb",
        type=float,
        default=2.0,
        help="literal of the huge SELECT (0: no huge queries)",
    )
    p.add_argument("--heartbeat-dumps", type=int, default=4)
    p.add_argument("--stalled-dumps", type=int, default=8)
    p.add_argument("--binlog-events-loops", type=int, default=2)
    p.add_argument(
        "--in-process",
        action="store_true",
        help="also with the protocol server on the leader's loop (serve_process = false)",
    )
    args = p.parse_args(argv)
    spec = HostileSet(
        heartbeat_dumps=args.heartbeat_dumps,
        stalled_dumps=args.stalled_dumps,
        query_mb=args.query_mb,
        binlog_events_loops=args.binlog_events_loops,
    )
    kw = {"seconds": args.seconds, "tps": args.tps, "workers": args.workers, "dns": args.dns}
    print(
        f"hostile bench: {args.dns} DNs, transfers at {args.tps:g} TPS target for"
        f" {args.seconds:g} s per phase; hostile: {spec.clients()}"
    )
    runs = [("server in its own process", False)]
    if args.in_process:
        runs.append(("server on the leader's loop (serve_process = false)", True))
    for name, in_process in runs:
        without, with_ = measure(**kw, spec=spec, in_process=in_process)
        print("\n".join(describe(name, without, with_, figures)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
