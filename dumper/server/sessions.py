"""A connection's state, which every part of the server reads (wire sets it up, sql and dump
read and write their fields), and the live connections of the server: their ids and when the
server started. Imports no part of the server (the dump's type only for annotations)."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from cdc.config import DumperConfig, DumperUser

if TYPE_CHECKING:
    from dumper.server.dump.binlog_sender import BinlogSender

VarValue = str | int | None  # a variable's value (user, session or global)


@dataclass(slots=True)
class Registration:
    """What a COM_REGISTER_SLAVE said (SHOW SLAVE HOSTS)."""

    server_id: int
    host: str
    user: str
    port: int
    master_id: int


@dataclass(slots=True)
class SessionState:
    """Per-connection state the query executor reads and writes."""

    conn_id: int
    host: str
    port: int
    user: DumperUser | None = None
    db: str | None = None
    user_vars: dict[str, VarValue] = field(default_factory=dict)
    session_vars: dict[str, VarValue] = field(default_factory=dict)
    command: str = "Connect"
    since: float = field(default_factory=time.time)
    info: str | None = None
    dump: BinlogSender | None = None  # while a COM_BINLOG_DUMP runs (consumers, retention)
    # Snapshot reads (docs/snapshot-reads.md): inside BEGIN / START TRANSACTION, the global
    # binlog position the transaction reads at, once pinned (WITH CONSISTENT SNAPSHOT or the
    # first read); None outside a transaction (each statement reads at the binlog's end).
    in_transaction: bool = False
    pinned: tuple[str, int] | None = None
    # The position a SELECT over a table reads from while it runs (it scans the binlog from
    # there): retention keeps that file, as it keeps a pinned one (store/retention.py).
    reading: tuple[str, int] | None = None


class SessionHandle(Protocol):
    state: SessionState

    def kill(self) -> None: ...


@dataclass(slots=True)
class Sessions:
    """The server's live connections by id (wire adds and removes them; PROCESSLIST, KILL,
    retention and the consumers list read them) and when the server started (Uptime)."""

    live: dict[int, SessionHandle] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def next_id(self) -> int:
        return next(self._ids)


def account(config: DumperConfig, name: str) -> DumperUser | None:
    """The configured account `name`, if there is one."""
    for u in config.users:
        if u.name == name:
            return u
    return None
