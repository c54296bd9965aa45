"""`cdc bench pipeline`: catch-up of the whole pipeline on pre-generated DN binlogs.

Traffic runs through the reference CN with the pipeline stopped; then the pipeline starts from
nothing and the time until the global binlog holds the last committed transaction is measured.
In the same run, `mariadb-binlog --read-from-remote-server --raw` reads the same DN binlogs (one
DN after the other), the baseline. Effective events (table maps and rows, as PolarDB-X counts:
no BEGIN/XID/CTS) per second and the ratio are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.goals import Figures
from bench.raw_dump import raw_dump
from cdc.memory_tune import tune_memory
from cdc.tasks import cancel_and_wait
from cdc_equipment.ground_truth import read as read_ground_truth
from cdc_equipment.local_cluster.local_cluster import LocalCluster
from cdc_equipment.local_cluster.testing import free_base_port, scratch_cluster
from dumper.pipeline.leader import Leader
from merge_source import ForkServer
from topology import gms

STALL_S = 60.0  # a catch-up that writes nothing for this long has stalled: fail, never hang


# Bytes per DN event of this traffic (transfers + bulk lines, 3 DNs: ~90): the first guess of how
# much binlog `--events` needs; the count after the raw dump corrects it.
BYTES_PER_DN_EVENT = 90
GENERATE_CAP_S = 1200.0  # a byte target never reached (a DN stopped writing) ends here


async def generate(
    cfg,
    seconds: float,
    threads: int,
    transactions: int | None = None,
    *,
    binlog_bytes=None,
    target_bytes: int | None = None,
) -> int:
    """CN traffic: transfers (single-row XA updates) on `threads` tasks, for `seconds`, for
    `transactions`, or, with `target_bytes`, until `binlog_bytes()` (the DN binlogs' size)
    reaches it; in that case a bulk task inserts 100-row ledger transactions beside them."""
    from cdc_equipment.cn import ComputeNode, init
    from cdc_equipment.cn.workloads.bulk import BulkInsertWorkload
    from cdc_equipment.cn.workloads.runner import run_workload
    from cdc_equipment.cn.workloads.transfer import TransferWorkload

    await init(cfg)
    cn = ComputeNode(cfg)
    await cn.start()
    stop = asyncio.Event()
    watcher = None
    try:
        workload = TransferWorkload(cn, accounts=2000)
        await workload.setup()
        runs = []
        if target_bytes is not None:
            bulk = BulkInsertWorkload(cn)
            await bulk.setup()
            runs.append((bulk.step, 1))
            watcher = asyncio.create_task(_stop_at(binlog_bytes, target_bytes, stop))
        runs.append((workload.step, threads))
        duration = seconds if transactions is None and target_bytes is None else GENERATE_CAP_S
        # Heartbeats while generating, as in production: they are part of what must be read.
        cn.start_heartbeat()
        stats = await asyncio.gather(
            *(
                run_workload(
                    step, threads=n, duration_s=duration, max_transactions=transactions, stop=stop
                )
                for step, n in runs
            )
        )
        await cn.stop_heartbeat()
        await cn.heartbeat_once()  # one past the last transaction: lets the merge finish
    finally:
        stop.set()
        if watcher is not None:
            await cancel_and_wait([watcher])
        await cn.close()
    return sum(s.committed for s in stats)


async def _stop_at(binlog_bytes, target: int, stop: asyncio.Event) -> None:
    while binlog_bytes() < target:
        await asyncio.sleep(0.25)
    stop.set()


def dn_binlog_bytes(cluster) -> int:
    """The DN binlogs' size on disk (cheap enough to poll while generating)."""
    return sum(
        f.stat().st_size for dn in cluster.dns for f in (dn.home / "binlog").glob("binlog.0*")
    )


def sched_s(pid: int) -> tuple[float, float, int]:
    """(seconds on a CPU, seconds runnable but waiting for one, times it was given a CPU) of a
    process's live threads, from /proc/<pid>/task/*/schedstat (zeros if it is gone). The wait
    is what other load on the machine costs: on a shared 2-core box it can exceed the CPU time
    several times. The count is how often the process woke up (or was preempted)."""
    on = wait = slices = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0, 0.0, 0
    for tid in tids:
        try:
            fields = open(f"/proc/{pid}/task/{tid}/schedstat").read().split()  # noqa: SIM115
        except OSError:
            continue  # the thread ended meanwhile
        on, wait, slices = on + int(fields[0]), wait + int(fields[1]), slices + int(fields[2])
    return on / 1e9, wait / 1e9, slices


@dataclass(slots=True)
class Cpu:
    """Where the catch-up's time went, per process kind (from the scheduler's own counts)."""

    leader_s: float = 0.0
    sources_s: float = 0.0  # MergeSource processes (0 when they run in the leader)
    fork_server_s: float = 0.0  # the process they are forked from (its imports, the forks)
    wait_s: float = 0.0  # runnable but no free core, summed over the leader and the sources
    leader_slices: int = 0  # times the leader / the MergeSource processes got a CPU
    sources_slices: int = 0
    first_write_s: float = 0.0  # catch-up start -> the first transaction written (start-up)


async def catch_up(
    cfg,
    last_tso: int,
    cpu: Cpu | None = None,
    leader: Leader | None = None,
    finish: Callable[[Leader], Awaitable[None]] | None = None,
    forks: ForkServer | None = None,
) -> tuple[float, Leader]:
    """Until `leader` (default: a `Leader` of `cfg`, its MergeSource processes forked by
    `forks`, closed at the end) wrote `last_tso`, then `finish(leader)` (e.g. until its stream
    processes synced) inside the time: (seconds, the leader). Before the loop, the caller does
    what `cdc start` does (`start_as_cdc_start`; the streams bench only tunes the memory)."""
    leader = leader or Leader(cfg, forks=forks)
    task = asyncio.create_task(leader.run())
    start = progress_at = time.perf_counter()
    at_start = sched_s(os.getpid())
    seen = 0
    try:
        while leader.stats.last_tso < last_tso:
            if task.done():
                task.result()
            if leader.stats.last_tso != seen:
                if not seen and cpu is not None:
                    cpu.first_write_s = time.perf_counter() - start
                seen, progress_at = leader.stats.last_tso, time.perf_counter()
            elif time.perf_counter() - progress_at > STALL_S:
                raise RuntimeError(
                    f"catch-up stalled: nothing written for {STALL_S:.0f}s at TSO {seen}"
                    f" (waiting for {last_tso}); a prepared XA branch on a DN holds the merge?"
                )
            await asyncio.sleep(0.02)
        if finish is not None:
            await finish(leader)
        elapsed = time.perf_counter() - start
        if cpu is not None:  # before the sources are stopped: their counters go with them
            on, wait, slices = sched_s(os.getpid())
            cpu.leader_s, cpu.wait_s = on - at_start[0], wait - at_start[1]
            cpu.leader_slices = slices - at_start[2]
            if leader.factory.forks.pid is not None:
                on, wait, _ = sched_s(leader.factory.forks.pid)
                cpu.fork_server_s += on
                cpu.wait_s += wait
            for source in leader.sources.values():
                pid = getattr(source, "pid", None)
                if pid is not None:
                    on, wait, slices = sched_s(pid)
                    cpu.sources_s += on
                    cpu.sources_slices += slices
                    cpu.wait_s += wait
        return elapsed, leader
    finally:
        await cancel_and_wait([task], grace=60)  # see cdc/tasks.py
        if forks is not None:
            await forks.aclose()


def start_as_cdc_start(source_processes: bool = True) -> ForkServer | None:
    """Before the event loop, what `cdc start` does then (dumper/service.run_service): the
    memory settings, and the MergeSource fork server forked from this process."""
    tune_memory()
    return ForkServer.fork_here() if source_processes else None


def raw_dump_all(cluster, out: Path) -> tuple[float, int]:
    """Every DN's binlogs, one DN after the other: (seconds, bytes)."""
    total = sum(
        raw_dump(dn.port, "binlog.000001", out / dn.name, to_last_log=True) for dn in cluster.dns
    )
    size = sum(f.stat().st_size for dn in cluster.dns for f in (out / dn.name).iterdir())
    return total, size


def count_events(directory: Path) -> tuple[int, int]:
    """(all events, effective events: table maps + rows) in the global binlog."""
    from cdc.binlog.reader import EventReader

    everything = effective = 0
    for f in sorted(directory.glob("binlog.0*")):
        for ev in EventReader(f.read_bytes(), file=f.name):
            everything += 1
            effective += ev.type_code in (19, 30, 31, 32)
    return everything, effective


@dataclass(slots=True)
class CatchUp:
    """One measured catch-up: the pipeline and the raw-dump baseline over the same DN binlogs."""

    dns: int
    committed: int  # CN transactions generated
    raw_bytes: int  # size of the DN binlogs
    dn_events: int  # events in the DN binlogs (what the MergeSources read)
    raw_s: float  # mariadb-binlog --raw of every DN, one after the other
    catch_up_s: float  # pipeline start → global binlog holds the last transaction
    cpu_s: float  # CPU time of this process (the pipeline) during the catch-up
    cpu: Cpu  # the same per process kind, and the time spent waiting for a free core
    events: int  # events written to the global binlog
    effective: int  # table maps + rows events among them
    transactions: int  # transactions the leader wrote
    # The same catch-up with every MergeSource in the leader's process (None: not measured)
    in_process_s: float | None = None
    again: list[CatchUp] = field(default_factory=list)  # `repeat`: the later runs

    @property
    def effective_per_s(self) -> float:
        return self.effective / self.catch_up_s

    @property
    def dn_events_per_s(self) -> float:
        return self.dn_events / self.catch_up_s

    @property
    def ratio(self) -> float:
        return self.raw_s / self.catch_up_s


@contextlib.contextmanager
def bench_cluster(dns: int, keep: Path | None) -> Iterator[tuple[Path, LocalCluster, bool]]:
    """(work directory, cluster, whether its DN binlogs are already generated): a throw-away
    cluster, or with `keep` the one in that directory, made on first use and stopped (not
    removed) at the end, so later runs re-measure the same DN binlogs (A/B across code)."""
    if keep is None:
        with scratch_cluster("cdc-bench-pipeline-", dns) as (work, cluster):
            yield work, cluster, False
        return
    keep = keep.absolute()
    cluster = LocalCluster(keep / "cluster")
    if cluster.exists and len(cluster.dns) != dns:
        raise SystemExit(f"{keep} holds a {len(cluster.dns)}-DN cluster; --dns {dns} asked")
    cluster.up(dns=dns, base_port=None if cluster.exists else free_base_port(dns + 1))
    try:
        yield keep, cluster, (keep / GENERATED).exists()
    finally:
        cluster.down()


GENERATED = "generated.json"  # in a kept directory: the traffic is there, how much


def measure(
    dns: int,
    *,
    seconds: float = 20,
    transactions: int | None = None,
    dn_events: int | None = None,
    threads: int = 8,
    profile: Path | None = None,
    compare_in_process: bool = False,
    keep: Path | None = None,
    repeat: int = 1,
) -> CatchUp:
    """Generate traffic on a fresh `dns`-DN cluster (for `seconds`, `transactions` CN
    transactions, or until the DN binlogs hold `dn_events` events), then time the raw dump and
    the pipeline's catch-up over it, `repeat` times (the later ones in `.again`). With `keep`,
    the cluster and its traffic stay in that directory for the next call. With `profile`, the
    catch-up runs under cProfile and the stats are saved there."""
    with bench_cluster(dns, keep) as (work, cluster, generated):
        cfg = cluster.config()
        cfg.dumper.port = free_base_port(0)
        cfg.cn.ground_truth_log = str(work / "truth.jsonl")
        if generated:
            committed = json.loads((work / GENERATED).read_text())["committed"]
        else:
            committed = _generate(cfg, cluster, work, seconds, transactions, dn_events, threads)
            (work / GENERATED).write_text(json.dumps({"committed": committed}))
        last_tso = max(
            e["tso"] for e in read_ground_truth(cfg.cn.ground_truth_log) if e["kind"] == "txn"
        )
        runs = []
        for n in range(repeat):
            shutil.rmtree(work / "raw", ignore_errors=True)
            raw_s, raw_bytes = raw_dump_all(cluster, work / "raw")
            counted = sum(count_events(work / "raw" / dn.name)[0] for dn in cluster.dns)
            r = _catch_up_run(cfg, work, last_tso, profile if n == 0 else None, f"run{n}")
            r.dns, r.committed, r.raw_bytes, r.dn_events, r.raw_s = (
                dns,
                committed,
                raw_bytes,
                counted,
                raw_s,
            )
            if compare_in_process and n == 0:
                # Same DN binlogs, from scratch, every MergeSource in the leader's process.
                cfg.pipeline.source_processes = False
                r.in_process_s = _catch_up_run(cfg, work, last_tso, None, "in_process").catch_up_s
                cfg.pipeline.source_processes = True
            runs.append(r)
        runs[0].again = runs[1:]
        return runs[0]


def _generate(cfg, cluster, work: Path, seconds, transactions, dn_events, threads) -> int:
    """CN traffic until the DN binlogs hold `dn_events` events (or for `seconds` /
    `transactions`): the committed transactions."""
    committed, target = 0, None if dn_events is None else dn_events * BYTES_PER_DN_EVENT
    # With `dn_events`: usually one round; another, scaled by the bytes per event, if short.
    while True:
        committed += asyncio.run(
            generate(
                cfg,
                seconds,
                threads,
                transactions,
                binlog_bytes=lambda: dn_binlog_bytes(cluster),
                target_bytes=target,
            )
        )
        if dn_events is None:
            return committed
        raw_dump_all(cluster, work / "count")
        counted = sum(count_events(work / "count" / dn.name)[0] for dn in cluster.dns)
        shutil.rmtree(work / "count")
        if counted >= dn_events:
            return committed
        target = int(dn_binlog_bytes(cluster) * dn_events / counted * 1.02)


def _catch_up_run(cfg, work: Path, last_tso: int, profile: Path | None, name: str) -> CatchUp:
    """One catch-up from nothing: a meta database and a global binlog directory of its own
    (both removed afterwards)."""
    cfg.pipeline.meta_database = f"cdc_bench_{name}"
    cfg.dumper.binlog_dir = str(work / f"binlog_{name}")
    _drop_meta(cfg)
    shutil.rmtree(cfg.dumper.binlog_dir, ignore_errors=True)
    cpu = time.process_time()
    sched = Cpu()
    try:
        if profile is None:
            forks = start_as_cdc_start(cfg.pipeline.source_processes)
            elapsed, leader = asyncio.run(catch_up(cfg, last_tso, sched, forks=forks))
        else:
            import cProfile

            with cProfile.Profile() as prof:
                forks = start_as_cdc_start(cfg.pipeline.source_processes)
                elapsed, leader = asyncio.run(catch_up(cfg, last_tso, sched, forks=forks))
            prof.dump_stats(profile)
        cpu = time.process_time() - cpu
        everything, effective = count_events(Path(cfg.dumper.binlog_dir))
    finally:
        _drop_meta(cfg)
        shutil.rmtree(cfg.dumper.binlog_dir, ignore_errors=True)
    return CatchUp(
        dns=0,
        committed=0,
        raw_bytes=0,
        dn_events=0,
        raw_s=0.0,
        catch_up_s=elapsed,
        cpu_s=cpu,
        cpu=sched,
        events=everything,
        effective=effective,
        transactions=leader.stats.transactions,
    )


def _drop_meta(cfg) -> None:
    with contextlib.closing(gms.connect(cfg.gms)) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{cfg.pipeline.meta_database}`")


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    figures = figures or Figures()
    p = argparse.ArgumentParser(prog="cdc bench pipeline", description=__doc__)
    p.add_argument("--dns", type=int, default=3)
    amount = p.add_mutually_exclusive_group()
    amount.add_argument(
        "--events",
        type=int,
        default=1_000_000,
        help="DN events to generate: transfers and bulk inserts (default 1,000,000)",
    )
    amount.add_argument("--seconds", type=float, help="or: transfers for this many seconds")
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--repeat", type=int, default=1, help="catch-ups over the same DN binlogs")
    p.add_argument(
        "--keep",
        type=Path,
        help="keep the cluster and its traffic in this directory; a later run with the same"
        " directory re-measures them (to compare code versions on the same DN binlogs)",
    )
    p.add_argument(
        "--in-process",
        action="store_true",
        help="also catch up with every MergeSource in the leader's process (first run)",
    )
    p.add_argument("--profile", type=Path, help="save a cProfile of the catch-up to this file")
    args = p.parse_args(argv)
    r = measure(
        args.dns,
        seconds=args.seconds or 0,
        dn_events=None if args.seconds else args.events,
        threads=args.threads,
        profile=args.profile,
        compare_in_process=args.in_process,
        keep=args.keep,
        repeat=max(1, args.repeat),
    )
    print(
        f"pipeline bench: {r.dns} DNs, {r.committed:,} CN transactions,"
        f" DN binlogs {r.raw_bytes / 1e6:.1f} MB, {r.dn_events:,} DN events"
    )
    for n, run in enumerate([r, *r.again]):
        if r.again:
            print(f"run {n + 1}:")
        report(run, figures, f"run {n + 1}" if r.again else "")
    if args.profile:
        print(f"  cProfile of the catch-up: {args.profile} (python -m pstats)")
    return 0


def report(r: CatchUp, figures: Figures, at: str = "") -> None:
    print(
        f"  mariadb-binlog -R --raw, DN by DN   {r.raw_s:6.2f} s"
        f"   (the pipeline read {r.dn_events_per_s:,.0f} DN events/s)"
    )
    print(
        f"  pipeline catch-up                   {r.catch_up_s:6.2f} s   {r.effective_per_s:>10,.0f} effective ev/s"
        f"   ({r.events:,} events written, {r.transactions:,} transactions;"
        f" leader CPU {r.cpu_s:.2f} s)"
    )
    c = r.cpu
    per_event = (c.leader_s + c.sources_s + c.fork_server_s) / r.dn_events * 1e6
    print(
        f"  CPU: leader {c.leader_s:.2f} s, MergeSource processes {c.sources_s:.2f} s,"
        f" their fork server {c.fork_server_s:.2f} s"
        f" ({per_event:.2f} us per DN event);"
        f" waiting for a free core {c.wait_s:.2f} s (other load on the machine)"
    )
    print(
        f"  times given a CPU: leader {c.leader_slices:,}, MergeSource processes"
        f" {c.sources_slices:,} (wake-ups and preemptions); first transaction written after"
        f" {c.first_write_s:.2f} s (start-up)"
    )
    if r.in_process_s is not None:
        print(
            f"  same, MergeSources in the leader    {r.in_process_s:6.2f} s"
            f"   (own processes are {r.in_process_s / r.catch_up_s:.2f}x as fast)"
        )
    print(
        f"  ratio raw dump time / catch-up time: {r.ratio:.2f}"
        f" {figures.goal('pipeline', r.ratio, at)}"
        f" (at the raw dump's own speed these binlogs would give {r.effective / r.raw_s:,.0f}"
        f" effective ev/s: {r.effective / r.dn_events:.2f} per DN event)"
    )
    print(
        f"  CPU per DN event (leader + MergeSource processes + fork server): {per_event:.2f} us"
        f" {figures.goal('pipeline-cpu', per_event, at)}"
    )
