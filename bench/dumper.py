"""`cdc bench dumper`: `mariadb-binlog -R --raw` of one binlog file served by our dumper vs the
same file served by the mariadbd that wrote it, side by side in one run; prints the ratio.

The file is a real MariaDB binlog (bulk and single-row transactions), so both servers send
exactly the same bytes; only the serving differs.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from bench.goals import Figures
from bench.raw_dump import raw_dump
from cdc.config import DumperConfig, DumperUser
from cdc.protocol.auth import native_hash
from cdc_equipment.local_cluster.testing import throwaway_server
from dumper.server import serve

USER, PASSWORD = "bench", "bench"


def generate(server, megabytes: int) -> str:
    """Fill a binlog file with about `megabytes` MB of row events; returns its name (closed)."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS bench")
        cur.execute(
            "CREATE TABLE IF NOT EXISTS bench.t (id BIGINT PRIMARY KEY, n INT, s VARCHAR(200))"
        )
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        name = cur.fetchone()[0]
        next_id = 0
        while True:
            rows = ",".join(
                f"({next_id + i}, {i}, REPEAT('x', {50 + i % 100}))" for i in range(500)
            )
            cur.execute(f"INSERT INTO bench.t VALUES {rows}")
            for i in range(100):  # many small transactions too: per-event costs show
                cur.execute(f"INSERT INTO bench.t VALUES ({next_id + 500 + i}, 1, 'y')")
            next_id += 600
            cur.execute("SHOW MASTER STATUS")
            if cur.fetchone()[1] >= megabytes * 1_000_000:
                break
        cur.execute("FLUSH BINARY LOGS")
    return name


@dataclass(frozen=True, slots=True)
class ServedCopy:
    """A generated MariaDB binlog of the source server, copied into a directory to serve."""

    name: str
    directory: Path
    size: int
    events: int


def served_copy(server, megabytes: int, work: Path) -> ServedCopy:
    """The bench user on `server` (a replication user), a binlog of about `megabytes` there,
    and a copy of it in `work/served` with its index: the same bytes for mariadbd and us."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER IF NOT EXISTS {USER}@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'")
        cur.execute(f"GRANT REPLICATION SLAVE ON *.* TO {USER}@'127.0.0.1'")
    name = generate(server, megabytes)
    served = work / "served"
    served.mkdir()
    shutil.copy(server.home / "binlog" / name, served / name)
    (served / "binlog.index").write_text(f"./{name}\n")
    return ServedCopy(name, served, (served / name).stat().st_size, _count_events(served / name))


def run(megabytes: int = 50, rounds: int = 3) -> dict:
    work = Path(tempfile.mkdtemp(prefix="cdc-bench-dumper-"))
    server = throwaway_server(work, server_id=900, name="source")
    try:
        copy = served_copy(server, megabytes, work)
        name, served, size, events = copy.name, copy.directory, copy.size, copy.events

        config = DumperConfig(
            port=0, binlog_dir=str(served), users=[DumperUser(USER, native_hash(PASSWORD))]
        )
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        holder = {}

        async def main():
            holder["server"] = await serve(config, served)
            ready.set()
            await asyncio.Event().wait()

        thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
        thread.start()
        ready.wait(30)
        ours_port = holder["server"].port
        times = {"mariadbd": [], "dumper": []}
        for r in range(rounds):  # interleaved: the machine's noise hits both alike
            times["mariadbd"].append(
                raw_dump(server.port, name, work / f"m{r}", user=USER, password=PASSWORD)
            )
            times["dumper"].append(
                raw_dump(ours_port, name, work / f"d{r}", user=USER, password=PASSWORD)
            )
        same = (work / "m0" / name).read_bytes()[22:] == (work / "d0" / name).read_bytes()[22:]
        best = {k: min(v) for k, v in times.items()}
        return {
            "file_bytes": size,
            "events": events,
            "mariadbd_s": best["mariadbd"],
            "dumper_s": best["dumper"],
            "mariadbd_events_per_s": events / best["mariadbd"],
            "dumper_events_per_s": events / best["dumper"],
            "ratio": best["mariadbd"] / best["dumper"],
            "identical_output": same,
        }
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def _count_events(path: Path) -> int:
    from cdc.binlog.reader import EventReader

    return sum(1 for _ in EventReader(path.read_bytes(), file=path.name))


def main(argv: list[str] | None = None, figures: Figures | None = None) -> int:
    figures = figures or Figures()
    p = argparse.ArgumentParser(prog="cdc bench dumper", description=__doc__)
    p.add_argument("--mb", type=int, default=50, help="binlog size in MB (default 50)")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    r = run(args.mb, args.rounds)
    print(
        f"dumper bench: one MariaDB binlog file, {r['file_bytes'] / 1e6:.1f} MB, {r['events']:,} events, "
        f"best of {args.rounds}"
    )
    print(
        f"  mariadbd   {r['mariadbd_s']:.3f} s  {r['mariadbd_events_per_s']:>12,.0f} ev/s  "
        f"{r['file_bytes'] / r['mariadbd_s'] / 1e6:.0f} MB/s"
    )
    print(
        f"  dumper     {r['dumper_s']:.3f} s  {r['dumper_events_per_s']:>12,.0f} ev/s  "
        f"{r['file_bytes'] / r['dumper_s'] / 1e6:.0f} MB/s"
    )
    print(
        f"  ratio dumper/mariadbd: {r['ratio']:.2f} {figures.goal('dumper', r['ratio'])};"
        f" output identical: {r['identical_output']}"
    )
    return 0
