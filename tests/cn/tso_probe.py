"""Subprocess for the TSO test: fetch N TSOs from `tasks` concurrent tasks, print one JSON line
[start_ns, end_ns, tso] per TSO (CLOCK_MONOTONIC is system-wide, so processes compare)."""

from __future__ import annotations

import asyncio
import json
import sys
import time

from cdc.cn_protocol.dn_pool import connect
from cdc.cn_protocol.tso import TsoOracle
from cdc.config import load


async def main(config_path: str, n: int, tasks: int) -> None:
    cfg = load(config_path)
    oracle = TsoOracle(lambda: connect(cfg.gms), cfg.cn.catalogue_database)
    out: list[tuple[int, int, int]] = []

    async def worker() -> None:
        for _ in range(n // tasks):
            t0 = time.monotonic_ns()
            tso = await oracle.next()
            out.append((t0, time.monotonic_ns(), tso))

    await asyncio.gather(*(worker() for _ in range(tasks)))
    await oracle.close()
    sys.stdout.write("".join(json.dumps(r) + "\n" for r in out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
