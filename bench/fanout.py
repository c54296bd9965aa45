"""`cdc bench fanout`: the same binlog file served to many concurrent dump clients at once, by our
dumper and by the mariadbd that wrote it, side by side in one run.

For each width (default 1, 16 and 64 clients) both servers get that many concurrent
`mariadb-binlog --read-from-remote-server --raw` copies of the file (interleaved: mariadbd, then
the dumper, `--rounds` times per width; the fastest round of each counts). Printed per width and server: aggregate events/s and MB/s (every
client's bytes over the wall time of the whole batch), p99 time to first event (client start →
the first bytes of its copy: the FDE), and the server's CPU seconds per served MB (user + system
of the serving process, from /proc) beside the clients' (getrusage of the ended children): at
one client, the copy's wall time against the CPU each side spent says which one bounds it. The dumper runs as under `cdc start`: its protocol server
in its own process (`ServeProcess`). The last line is `ratio`: the dumper's MB/s over
mariadbd's at the widest width.

The copies are not written to disk: each client's result file is a named pipe that this process
drains (and timestamps the first bytes of), so 64 copies of a file cost no disk I/O and both
servers' clients pay the same.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import selectors
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.dumper import PASSWORD, USER, served_copy
from bench.goals import Figures
from bench.raw_dump import raw_dump_command
from cdc.config import Config, DumperConfig, DumperUser
from cdc.protocol.auth import native_hash
from cdc_equipment.local_cluster.testing import throwaway_server
from dumper.server import ServeProcess

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class Drain:
    """Reads every client's result pipe (and throws the bytes away), noting when each pipe gave
    its first bytes. One thread, one selector."""

    def __init__(self, pipes: list[Path]) -> None:
        self.first: list[float | None] = [None] * len(pipes)
        self.bytes = [0] * len(pipes)
        self._sel = selectors.DefaultSelector()
        self._keep: list[int] = []  # our own write ends: no EOF before the client opens its end
        for i, p in enumerate(pipes):
            os.mkfifo(p)
            r = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
            self._keep.append(os.open(p, os.O_WRONLY | os.O_NONBLOCK))
            self._sel.register(r, selectors.EVENT_READ, i)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def release(self, i: int) -> None:
        """Client `i` has exited: drop our write end so that its pipe ends."""
        fd, self._keep[i] = self._keep[i], -1
        if fd >= 0:
            os.close(fd)

    def _run(self) -> None:
        while self._sel.get_map():
            for key, _ in self._sel.select(1.0):
                i = key.data
                try:
                    data = os.read(key.fd, 1 << 20)
                except BlockingIOError:
                    continue
                if not data:
                    self._sel.unregister(key.fd)
                    os.close(key.fd)
                    continue
                if self.first[i] is None:
                    self.first[i] = time.perf_counter()
                self.bytes[i] += len(data)

    def join(self) -> None:
        for i in range(len(self._keep)):
            self.release(i)
        self._thread.join(60)


@dataclass(slots=True)
class Batch:
    wall_s: float
    first_event_p99_s: float
    cpu_s: float
    copied_bytes: int
    client_cpu_s: float  # the mariadb-binlog clients', all of them


def run_batch(port: int, server_pid: int, name: str, clients: int, work: Path) -> Batch:
    """`clients` concurrent raw copies of `name` from the server on `port`."""
    work.mkdir(parents=True)
    pipes = []
    for i in range(clients):
        (work / str(i)).mkdir()
        pipes.append(work / str(i) / name)
    drain = Drain(pipes)
    cpu0 = cpu_seconds(server_pid)
    clients0 = _children_cpu_s()
    began = time.perf_counter()
    procs = []
    starts = []
    for i in range(clients):
        command = raw_dump_command(port, name, work / str(i), user=USER, password=PASSWORD)
        starts.append(time.perf_counter())
        procs.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    for i, p in enumerate(procs):
        _, err = p.communicate()
        drain.release(i)
        if p.returncode != 0:
            raise RuntimeError(f"mariadb-binlog exited {p.returncode}: {err.decode()[-500:]}")
    wall = time.perf_counter() - began
    cpu = cpu_seconds(server_pid) - cpu0
    client_cpu = _children_cpu_s() - clients0  # every client was waited for
    drain.join()
    firsts = sorted(
        (f - s) if f is not None else wall for f, s in zip(drain.first, starts, strict=True)
    )
    p99 = firsts[min(len(firsts) - 1, int(len(firsts) * 0.99))]
    shutil.rmtree(work, ignore_errors=True)
    return Batch(wall, p99, cpu, sum(drain.bytes), client_cpu)


def _children_cpu_s() -> float:
    """User + system CPU of this process's children that ended (the clients, once waited)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


async def _serve(served: Path) -> ServeProcess:
    config = Config(
        dumper=DumperConfig(
            port=0,
            binlog_dir=str(served),
            users=[DumperUser(USER, native_hash(PASSWORD))],
            max_connections=1024,
        )
    )
    idle = asyncio.Event()
    return await ServeProcess(
        config, served, current_notify=lambda: idle, writer_end=lambda: None, schema="memory"
    ).start()


def run(megabytes: int, widths: list[int], rounds: int = 2) -> dict:
    work = Path(tempfile.mkdtemp(prefix="cdc-bench-fanout-"))
    server = throwaway_server(work, server_id=901, name="source")
    # The ServeProcess's own tasks (its reports, its supervision) run on a loop of their own.
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    ours: ServeProcess | None = None
    try:
        copy = served_copy(server, megabytes, work)
        name, served, size, events = copy.name, copy.directory, copy.size, copy.events
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL max_connections = 1000")
        ours = asyncio.run_coroutine_threadsafe(_serve(served), loop).result(120)
        mariadbd_pid = server.pid()
        assert mariadbd_pid is not None
        results: dict[int, dict[str, Batch]] = {}
        for width in widths:
            runs: dict[str, list[Batch]] = {"mariadbd": [], "dumper": []}
            for _ in range(rounds):  # interleaved: the machine's noise hits both alike
                runs["mariadbd"].append(
                    run_batch(server.port, mariadbd_pid, name, width, work / "m")
                )
                runs["dumper"].append(run_batch(ours.port, ours.pid, name, width, work / "d"))
            for who, batches in runs.items():
                for b in batches:
                    if b.copied_bytes < width * (size - 4):
                        raise RuntimeError(f"{who}: {b.copied_bytes} bytes of {width} x {size}")
            results[width] = {who: min(bs, key=lambda b: b.wall_s) for who, bs in runs.items()}
        return {"file_bytes": size, "events": events, "results": results}
    finally:
        if ours is not None:
            asyncio.run_coroutine_threadsafe(ours.close(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    figures = figures or Figures()
    p = argparse.ArgumentParser(prog="cdc bench fanout", description=__doc__)
    p.add_argument("--mb", type=int, default=26, help="binlog size in MB (default 26)")
    p.add_argument("--clients", default="1,16,64", help="widths, comma-separated")
    p.add_argument("--rounds", type=int, default=2, help="per width and server; the best counts")
    p.add_argument("--quick", action="store_true", help="2 MB, 1 and 4 clients, one round")
    args = p.parse_args(argv)
    mb, widths = (2, [1, 4]) if args.quick else (args.mb, [int(w) for w in args.clients.split(",")])
    r = run(mb, widths, 1 if args.quick else args.rounds)
    size, events = r["file_bytes"], r["events"]
    print(
        f"fanout bench: one MariaDB binlog file, {size / 1e6:.1f} MB, {events:,} events, "
        f"copied by N concurrent mariadb-binlog --raw (best of {1 if args.quick else args.rounds})"
    )
    print(
        f"  {'clients':>7}  {'server':<9}{'events/s':>14}{'MB/s':>9}{'p99 first event':>17}"
        f"{'CPU s/served MB':>17}{'clients CPU s/MB':>18}{'ratio':>7}"
    )
    ratios = {}
    for width, both in r["results"].items():
        rates = {}
        for who in ("mariadbd", "dumper"):
            b = both[who]
            mbs = width * size / b.wall_s / 1e6
            rates[who] = mbs
            cell = f"{mbs / rates['mariadbd']:.2f}" if who == "dumper" else ""
            print(
                f"  {width:>7}  {who:<9}{width * events / b.wall_s:>14,.0f}{mbs:>9.0f}"
                f"{b.first_event_p99_s * 1000:>14.1f} ms{b.cpu_s / (width * size / 1e6):>17.4f}"
                f"{b.client_cpu_s / (width * size / 1e6):>18.4f}{cell:>7}"
            )
        ratios[width] = rates["dumper"] / rates["mariadbd"]
    for width, ratio in ratios.items():  # the goal holds at every width
        clients = f"{width} client{'s' if width > 1 else ''}"
        print(
            f"ratio dumper/mariadbd at {clients}: {ratio:.2f}"
            f" {figures.goal('fanout', ratio, clients)}"
        )
    return 0
