"""A throwaway mariadbd in a temp dir on a free port, for the codec's real-bytes tests and the
fixture recorder. Small on purpose: the shared cluster tooling replaces it later."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    datadir: Path
    port: int
    proc: subprocess.Popen

    def client_args(self) -> list[str]:
        return [
            "mariadb",
            "--no-defaults",
            "-h127.0.0.1",
            f"-P{self.port}",
            "-uroot",
            "--default-character-set=utf8mb4",
            "--comments",
        ]

    def sql(self, statements: str, *, database: str | None = None) -> str:
        args = self.client_args() + ["--batch", "--skip-column-names"]
        if database:
            args.append(database)
        res = subprocess.run(args, input=statements.encode(), capture_output=True, timeout=120)
        if res.returncode != 0:
            raise RuntimeError(f"mariadb failed: {res.stderr.decode(errors='replace')}")
        return res.stdout.decode("utf-8", errors="surrogateescape")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def start(datadir: Path, extra_args: list[str] | None = None, timeout: float = 60.0) -> Server:
    """Initialise `datadir` and start mariadbd on a free port; wait until it answers."""
    if not shutil.which("mariadbd") and not Path("/usr/sbin/mariadbd").exists():
        raise RuntimeError("mariadbd is not installed (run `make setup`)")
    datadir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "mariadb-install-db",
            "--no-defaults",
            f"--datadir={datadir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = free_port()
    mariadbd = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
    tmpdir = datadir.with_name(datadir.name + "-tmp")  # not the shared /tmp: local_cluster's why
    tmpdir.mkdir(exist_ok=True)
    args = [
        mariadbd,
        "--no-defaults",
        f"--datadir={datadir}",
        f"--port={port}",
        "--bind-address=127.0.0.1",
        f"--socket={datadir}/s.sock",
        f"--pid-file={datadir}/p.pid",
        f"--log-error={datadir}/err.log",
        f"--tmpdir={tmpdir}",
        "--character-set-server=utf8mb4",
        "--innodb-buffer-pool-size=32M",
        "--innodb-log-file-size=48M",
        "--user=root",
        "--skip-name-resolve",
        *(extra_args or []),
    ]
    proc = subprocess.Popen(
        args, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    server = Server(datadir, port, proc)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = (datadir / "err.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"mariadbd exited with {proc.returncode}: {log}")
        res = subprocess.run(server.client_args() + ["-e", "select 1"], capture_output=True)
        if res.returncode == 0:
            return server
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"mariadbd on port {port} did not answer within {timeout}s")
