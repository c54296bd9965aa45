"""The benchmarks' common baseline: `mariadb-binlog --read-from-remote-server --raw`, timed."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def raw_dump_command(
    port: int,
    file: str,
    out: Path,
    *,
    user: str = "root",
    password: str = "",
    to_last_log: bool = False,
) -> list[str]:
    """`mariadb-binlog --raw` copying `file` (and, with `to_last_log`, every later file) from
    the server on `port` into the directory `out`."""
    command = [
        "mariadb-binlog",
        "--read-from-remote-server",
        "--raw",
        "--host=127.0.0.1",
        f"--port={port}",
        f"--user={user}",
        f"--result-file={out}/",
        file,
    ]
    if password:
        command.insert(-1, f"--password={password}")
    if to_last_log:
        command.insert(3, "--to-last-log")
    return command


def raw_dump(
    port: int,
    file: str,
    out: Path,
    *,
    user: str = "root",
    password: str = "",
    to_last_log: bool = False,
) -> float:
    """Copy `file` (and, with `to_last_log`, every later file) from the server on `port` into
    `out`; return the seconds it took."""
    out.mkdir(parents=True, exist_ok=True)
    command = raw_dump_command(
        port, file, out, user=user, password=password, to_last_log=to_last_log
    )
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start
