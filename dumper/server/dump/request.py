"""What a client asks of a dump: the request of COM_BINLOG_DUMP (file, position, flags, and
where the GTID and UNTIL forms put it), the options its user variables set, and `DumpError`,
the ERR that refuses or ends it."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from dumper.server.dump.gtid_skip import ExcludedGtids
from dumper.server.dump.mariadb_until import GtidUntil

BINLOG_DUMP_NON_BLOCK = 0x01
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236


class DumpError(Exception):
    """Ends a dump with ERR 1236 (`message` is what the client shows)."""

    def __init__(self, message: str, code: int = ER_MASTER_FATAL_ERROR_READING_BINLOG) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(slots=True, frozen=True)
class DumpRequest:
    file: str  # "" = first file of the index
    pos: int
    flags: int = 0
    server_id: int = 0
    exclude: ExcludedGtids | None = None  # a GTID dump's: what the client holds after a gap
    until: GtidUntil | None = None  # a MariaDB replica's START SLAVE UNTIL master_gtid_pos

    @property
    def blocking(self) -> bool:
        # MySQL: server_id 0 also means "do not wait for new events".
        return not (self.flags & BINLOG_DUMP_NON_BLOCK or self.server_id == 0)

    @classmethod
    def parse(cls, body: bytes) -> DumpRequest:
        """Body of COM_BINLOG_DUMP after the command byte."""
        if len(body) < 10:
            raise DumpError(f"malformed COM_BINLOG_DUMP packet ({len(body)} bytes)", 1105)
        pos, flags, server_id = struct.unpack_from("<IHI", body, 0)
        name = body[10:].split(b"\0", 1)[0].decode("utf-8", "replace")
        return cls(name, pos, flags, server_id)


# The smallest heartbeat period a dump gets (seconds): MySQL's and MariaDB's replicas refuse
# MASTER_HEARTBEAT_PERIOD below 1 ms, and a client that sets @master_heartbeat_period = 1 (ns)
# must not get a heartbeat per loop turn (docs/dumper.md, "Serving cannot stall writing").
MIN_HEARTBEAT_PERIOD_S = 0.001


@dataclass(slots=True, frozen=True)
class DumpOptions:
    checksum: bool | None  # the client's @master_binlog_checksum: CRC32, NONE, or never set
    heartbeat_period: float = 0.0  # seconds; 0 = no heartbeats
