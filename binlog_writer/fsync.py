"""When the writer calls fsync: per transaction, per group of N transactions, per interval, or
never. A small policy object plus a pure decision function, so the rule is testable without I/O."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FsyncMode(StrEnum):
    TXN = "txn"  # after every transaction (durable, slowest)
    GROUP = "group"  # after every `group_size` transactions
    INTERVAL = "interval"  # when `interval_ms` has passed since the last fsync
    NEVER = "never"  # leave it to the OS (data still reaches the OS after each transaction)


@dataclass(slots=True, frozen=True)
class FsyncPolicy:
    mode: FsyncMode = FsyncMode.TXN
    group_size: int = 1
    interval_ms: int = 0

    def __post_init__(self) -> None:
        if self.mode == FsyncMode.GROUP and self.group_size < 1:
            raise ValueError("FsyncPolicy(GROUP) needs group_size >= 1")
        if self.mode == FsyncMode.INTERVAL and self.interval_ms <= 0:
            raise ValueError("FsyncPolicy(INTERVAL) needs interval_ms > 0")

    @classmethod
    def per_txn(cls) -> FsyncPolicy:
        return cls(FsyncMode.TXN)

    @classmethod
    def every(cls, n: int) -> FsyncPolicy:
        return cls(FsyncMode.GROUP, group_size=n)

    @classmethod
    def interval(cls, ms: int) -> FsyncPolicy:
        return cls(FsyncMode.INTERVAL, interval_ms=ms)

    @classmethod
    def never(cls) -> FsyncPolicy:
        return cls(FsyncMode.NEVER)

    @classmethod
    def parse(cls, text: str) -> FsyncPolicy:
        """'txn' | 'never' | 'group:N' | 'interval:MS' (for config files and the CLI)."""
        kind, _, arg = text.partition(":")
        if kind == "txn":
            return cls.per_txn()
        if kind == "never":
            return cls.never()
        if kind == "group":
            return cls.every(int(arg))
        if kind == "interval":
            return cls.interval(int(arg))
        raise ValueError(f"unknown fsync policy {text!r} (txn, never, group:N, interval:MS)")

    def due(self, txns_since_sync: int, ms_since_sync: float) -> bool:
        """Whether to fsync now, after a transaction was written."""
        if txns_since_sync <= 0:
            return False
        if self.mode == FsyncMode.TXN:
            return True
        if self.mode == FsyncMode.GROUP:
            return txns_since_sync >= self.group_size
        if self.mode == FsyncMode.INTERVAL:
            return ms_since_sync >= self.interval_ms
        return False
