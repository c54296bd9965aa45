"""One local MariaDB server process: data directory, configuration, start, readiness, stop.

Servers are started with `setsid` (their own session) so that killing the shell job that
started them does not take them down, and they are stopped by pid, never by name.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pymysql

from cdc_equipment.processes import process_start_time, wait_exited

# Small buffers: a test session runs 4-6 of these on a 2-core, shared machine.
# (research/env.md §1: 32M pool + 48M redo is the sweet spot; smaller is slower to install.)
SERVER_OPTIONS = {
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_annotate_row_events": "ON",
    "binlog_checksum": "CRC32",
    "binlog_row_metadata": "FULL",
    "character_set_server": "utf8mb4",
    "collation_server": "utf8mb4_general_ci",
    "skip_name_resolve": "ON",
    "innodb_buffer_pool_size": "32M",
    "innodb_log_file_size": "48M",
    "innodb_log_buffer_size": "8M",
    # Tests and demos value speed over power-loss durability of the *source* cluster.
    "innodb_flush_log_at_trx_commit": "2",
    "sync_binlog": "0",
    "performance_schema": "OFF",
    "max_connections": "200",
    "key_buffer_size": "1M",
    "table_open_cache": "400",
    "thread_cache_size": "8",
    "aria_pagecache_buffer_size": "8M",
    "max_allowed_packet": "256M",
    "max_binlog_size": "256M",
    "lock_wait_timeout": "60",
    "innodb_lock_wait_timeout": "20",
}


class ServerError(RuntimeError):
    """A MariaDB server could not be initialised, started or stopped."""


def mariadbd_binary() -> str:
    found = shutil.which("mariadbd") or (
        "/usr/sbin/mariadbd" if os.path.exists("/usr/sbin/mariadbd") else None
    )
    if not found:
        raise ServerError("mariadbd not found: install Debian's mariadb-server (`make setup` does)")
    return found


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def pid_is_mariadbd(pid: int, config_file: Path) -> bool:
    """True if `pid` is alive and is *our* mariadbd (guards against pid reuse).

    Only for *finding* our server. A SIGKILLed or stopping mariadbd loses its cmdline (the
    kernel frees its memory) before it closes its files, the listening socket included: to
    wait for one to be gone, use `wait_exited` with the start time read before signalling."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if process_start_time(pid) is None:  # gone, or a zombie: dead for our purposes
        return False
    joined = b" ".join(cmdline)
    return b"mariadbd" in joined and str(config_file).encode() in joined


@dataclass(slots=True)
class NodeStatus:
    name: str
    role: str
    port: int
    pid: int | None
    up: bool
    log_bin: str = ""
    binlog_format: str = ""
    binlog_file: str = ""
    binlog_position: int | None = None
    error: str = ""


@dataclass(slots=True)
class MariadbServer:
    """A MariaDB server living in `home` (data, config, logs, binlogs, pid). `netns`: the
    network namespace it runs in (cdc_equipment/local_cluster/hosts.py; `host` is then that host's address),
    "" for this one."""

    name: str
    role: str  # "gms" or "dn"
    home: Path
    port: int
    server_id: int
    host: str = "127.0.0.1"
    netns: str = ""

    @property
    def datadir(self) -> Path:
        return self.home / "data"

    @property
    def config_file(self) -> Path:
        return self.home / "my.cnf"

    @property
    def pid_file(self) -> Path:
        return self.home / "mariadbd.pid"

    @property
    def error_log(self) -> Path:
        return self.home / "error.log"

    @property
    def socket_path(self) -> Path:
        return self.home / "mariadbd.sock"

    def write_config(self) -> None:
        lines = [
            "[mariadbd]",
            "user=root",
            f"datadir={self.datadir}",
            f"port={self.port}",
            f"bind-address={self.host}",
            f"socket={self.socket_path}",
            f"pid-file={self.pid_file}",
            f"log-error={self.error_log}",
            f"server_id={self.server_id}",
            f"gtid_domain_id={self.server_id}",
            f"log_bin={self.home / 'binlog' / 'binlog'}",
            f"log_bin_index={self.home / 'binlog' / 'binlog.index'}",
            # Internal temporary tables (information_schema reads, sorts) are Aria files named
            # after the server's pid: in a shared /tmp, one server's could meet another's (a
            # killed server's leftovers, a server of another pid namespace) - CI saw a DN die
            # in ha_maria::drop_table on an information_schema.COLUMNS read.
            f"tmpdir={self.home / 'tmp'}",
            *(f"{k}={v}" for k, v in SERVER_OPTIONS.items()),
            # On a host of its own it is reached from other hosts' addresses: root@'%' too
            # (install-db makes root@localhost and root@127.0.0.1 only), at every start.
            *([f"init_file={self.home / 'init.sql'}"] if self.netns else []),
            "",
            "[client]",
            f"host={self.host}",
            f"port={self.port}",
            "user=root",
            "",
        ]
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "binlog").mkdir(exist_ok=True)
        (self.home / "tmp").mkdir(exist_ok=True)
        self.config_file.write_text("\n".join(lines))
        if self.netns:
            (self.home / "init.sql").write_text(
                "CREATE USER IF NOT EXISTS root@'%';\n"
                "GRANT ALL PRIVILEGES ON *.* TO root@'%' WITH GRANT OPTION;\n"
            )

    def initialise(self, template: Path | None = None) -> None:
        """Create the data directory, copying a ready template when given (much faster)."""
        self.write_config()
        if self.datadir.exists():
            return
        if template is not None and template.exists():
            shutil.copytree(template, self.datadir, symlinks=True)
            return
        install_datadir(self.datadir, self.home / "install-db.log")

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if pid_is_mariadbd(pid, self.config_file) else None

    def is_running(self) -> bool:
        return self.pid() is not None

    def start(self, timeout: float = 60.0) -> int:
        """Start the server (no-op if ours is already running); wait until it answers."""
        pid = self.pid()
        if pid is not None:
            return pid
        self._wait_previous_exited()
        # (a namespace's address cannot be bound here; its ports are its own)
        if not self.netns and not port_is_free(self.port, self.host):
            raise ServerError(f"{self.name}: port {self.port} on {self.host} is already in use")
        self.pid_file.unlink(missing_ok=True)
        # `ip netns exec` execs mariadbd: the pid is still the server's
        netns = ["ip", "netns", "exec", self.netns] if self.netns else []
        with open(self.home / "stdout.log", "ab") as out:
            proc = subprocess.Popen(
                [*netns, mariadbd_binary(), f"--defaults-file={self.config_file}"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.wait_ready(timeout, proc)
        return proc.pid

    def wait_ready(self, timeout: float, proc: subprocess.Popen | None = None) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise ServerError(
                    f"{self.name}: mariadbd exited with code {proc.returncode} during start; "
                    f"last lines of {self.error_log}:\n{self.log_tail()}"
                )
            try:
                self.connect(connect_timeout=1).close()
                return
            except pymysql.err.MySQLError as exc:
                last = str(exc)
            time.sleep(0.05)
        raise ServerError(
            f"{self.name}: not answering on port {self.port} after {timeout:.0f}s ({last})"
        )

    def connect(
        self, database: str | None = None, connect_timeout: float = 5, **kwargs
    ) -> pymysql.Connection:
        return pymysql.connect(
            host=self.host,
            port=self.port,
            user="root",
            password="",
            database=database,
            connect_timeout=connect_timeout,
            autocommit=True,
            charset="utf8mb4",
            **kwargs,
        )

    def stop(self, timeout: float = 60.0) -> bool:
        """Clean shutdown by SIGTERM (SIGKILL after `timeout`). Returns True if it was running;
        when it returns, the process is gone and its port free."""
        pid = self.pid()
        started = process_start_time(pid) if pid is not None else None
        if started is None:
            return False
        os.kill(pid, signal.SIGTERM)
        if not wait_exited(pid, started, timeout):
            os.kill(pid, signal.SIGKILL)
            self._wait_gone(pid, started)
        return True

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send `sig` (default SIGKILL, a crash) to the server; on SIGKILL, returns once the
        process is gone and its port free (a `start()` right after cannot find it in use)."""
        pid = self.pid()
        started = process_start_time(pid) if pid is not None else None
        if started is None:
            return
        os.kill(pid, sig)
        if sig == signal.SIGKILL:
            self._wait_gone(pid, started)

    def _wait_gone(self, pid: int, started: int, timeout: float = 30.0) -> None:
        if not wait_exited(pid, started, timeout):
            raise ServerError(f"{self.name}: pid {pid} still there {timeout:.0f}s after SIGKILL")

    def _wait_previous_exited(self, timeout: float = 30.0) -> None:
        """A server of ours killed by someone else may still be exiting (no cmdline any more,
        so `pid()` no longer finds it, but its socket still open): wait for it to be gone."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return
        started = process_start_time(pid)
        if started is None:
            return
        try:
            exiting = not Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return
        if exiting and not wait_exited(pid, started, timeout):
            raise ServerError(f"{self.name}: its previous mariadbd (pid {pid}) is still exiting")

    def status(self) -> NodeStatus:
        pid = self.pid()
        st = NodeStatus(self.name, self.role, self.port, pid, up=False)
        if pid is None:
            return st
        try:
            conn = self.connect(connect_timeout=2, read_timeout=5)
        except pymysql.err.MySQLError as exc:
            st.error = str(exc)
            return st
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@log_bin, @@binlog_format")
                log_bin, fmt = cur.fetchone()
                st.log_bin = "ON" if str(log_bin) in ("1", "ON") else "OFF"
                st.binlog_format = fmt
                cur.execute("SHOW MASTER STATUS")
                row = cur.fetchone()
                if row:
                    st.binlog_file, st.binlog_position = row[0], int(row[1])
            st.up = True
        except pymysql.err.MySQLError as exc:
            st.error = str(exc)
        finally:
            conn.close()
        return st

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.error_log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no error log)"


def install_datadir(datadir: Path, log: Path) -> None:
    """Run mariadb-install-db into `datadir` (root@localhost/127.0.0.1, empty password)."""
    install = shutil.which("mariadb-install-db")
    if not install:
        raise ServerError(
            "mariadb-install-db not found: install Debian's mariadb-server (`make setup` does)"
        )
    datadir.parent.mkdir(parents=True, exist_ok=True)
    tmp = datadir.with_name(datadir.name + ".tmp")
    # Once more after a failure: it has failed once in a while on a loaded machine, and a
    # throw-away cluster's directory (with this log) is gone by the time anyone looks.
    for attempt in (1, 2):
        shutil.rmtree(tmp, ignore_errors=True)
        with open(log, "wb") as out:
            res = subprocess.run(
                [
                    install,
                    "--no-defaults",
                    f"--datadir={tmp}",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    "--skip-name-resolve",
                    "--user=root",
                    "--innodb-log-file-size=48M",
                    "--innodb-buffer-pool-size=32M",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if res.returncode == 0:
            break
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-12:])
        if attempt == 2:
            raise ServerError(
                f"mariadb-install-db failed (exit {res.returncode}) twice; {log} ends:\n{tail}"
            )
        logging.getLogger(__name__).warning(
            "mariadb-install-db failed (exit %d), once more:\n%s", res.returncode, tail
        )
    tmp.rename(datadir)  # atomic: a half-installed datadir is never mistaken for a good one
