"""FORMAT_DESCRIPTION_EVENT: parse any v4 FDE (MariaDB's included) and build the MySQL 5.7
flavour we write (38 post-header lengths, CRC32), which MySQL 8 replicas and mariadb-binlog read."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import ClassVar

from .constants import CHECKSUM_CRC32, CHECKSUM_LEN, CHECKSUM_OFF, HEADER_LEN, EventType
from .errors import CodecError

# Post-header lengths of MySQL 5.7 for event types 1..38 (protocol.md §3.3; START_V3 56,
# QUERY 13, ROTATE 8, LOAD 18, FDE 95, TABLE_MAP 8, ROWS v1 8, ROWS v2 10, GTID 42, ...).
MYSQL57_POST_HEADER_LENS = bytes.fromhex(
    "380d0008001200040404041200005f00041a08000000080808020000000a0a0a2a2a00123400"
)
assert len(MYSQL57_POST_HEADER_LENS) == 38
DEFAULT_SERVER_VERSION = "5.7.44-cdc-log"
# Post-header lengths of MariaDB 10.11 for event types 1..171, as its own files declare them
# (read from a 10.11.19 binlog): MySQL's up to 38 (GTID, ROWS v2 and the rest included, so a
# MariaDB replica reads our rows v2), zeros up to 159, then ANNOTATE_ROWS 0, BINLOG_CHECKPOINT 4,
# GTID 19, GTID_LIST 4, START_ENCRYPTION 0, QUERY_COMPRESSED 13, the compressed rows events.
MARIADB1011_POST_HEADER_LENS = (
    bytes.fromhex("380d000800120004040404120000e400041a08000000080808020000000a0a0a")
    + bytes(6)
    + bytes.fromhex("0a0a0a")
    + bytes(118)
    + bytes.fromhex("00041304000d0808080a0a0a")
)
assert len(MARIADB1011_POST_HEADER_LENS) == 171
DEFAULT_MARIADB_SERVER_VERSION = "10.11.19-MariaDB-cdc-log"

_HEAD = struct.Struct("<H50sIB")  # binlog_version, server_version, create_timestamp, header_len
_VERSION_RE = re.compile(rb"^(\d+)\.(\d+)\.(\d+)")
# Servers from 5.6.1 on append the checksum-algorithm byte (+ 4 CRC bytes) to the FDE.
_CHECKSUM_AWARE = (5, 6, 1)


def split_version(server_version: str | bytes) -> tuple[int, int, int]:
    raw = server_version.encode() if isinstance(server_version, str) else server_version
    m = _VERSION_RE.match(raw)
    if not m:
        return (0, 0, 0)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)))


@dataclass(slots=True, frozen=True)
class FormatDescription:
    """Body of an FDE. `post_header_lens[i]` is the post-header length of event type i+1."""

    TYPE_CODE: ClassVar[int] = EventType.FORMAT_DESCRIPTION

    binlog_version: int = 4
    server_version: str = DEFAULT_SERVER_VERSION
    create_timestamp: int = 0
    header_len: int = HEADER_LEN
    post_header_lens: bytes = MYSQL57_POST_HEADER_LENS
    checksum_alg: int = CHECKSUM_CRC32

    @property
    def has_checksum(self) -> bool:
        return self.checksum_alg == CHECKSUM_CRC32

    @property
    def checksum_len(self) -> int:
        """Bytes of CRC after the body of every *other* event of the file."""
        return CHECKSUM_LEN if self.has_checksum else 0

    @property
    def is_mariadb(self) -> bool:
        return "mariadb" in self.server_version.lower()

    def post_header_len(self, type_code: int) -> int:
        """Post-header length the file declares; 0 for types beyond the table."""
        i = type_code - 1
        if 0 <= i < len(self.post_header_lens):
            return self.post_header_lens[i]
        return 0

    @classmethod
    def parse(
        cls, body: bytes | bytearray | memoryview, fde: FormatDescription | None = None
    ) -> FormatDescription:
        """Parse the body of an FDE *including* its trailing alg byte + CRC (an FDE always
        carries them on checksum-aware servers, even with checksums off)."""
        del fde  # an FDE describes itself
        if len(body) < _HEAD.size:
            raise CodecError(f"FORMAT_DESCRIPTION body of {len(body)} bytes is too short")
        version, raw_server, created, header_len = _HEAD.unpack_from(body, 0)
        if version != 4:
            raise CodecError(f"binlog version {version} is not supported (only v4)")
        if header_len != HEADER_LEN:
            raise CodecError(f"common header length {header_len} is not {HEADER_LEN}")
        server = raw_server.split(b"\0", 1)[0]
        rest = memoryview(body)[_HEAD.size :]
        if split_version(server) >= _CHECKSUM_AWARE:
            if len(rest) < 1 + CHECKSUM_LEN:
                raise CodecError("FORMAT_DESCRIPTION lacks its checksum-algorithm byte")
            alg = rest[len(rest) - 1 - CHECKSUM_LEN]
            lens = bytes(rest[: len(rest) - 1 - CHECKSUM_LEN])
            if alg not in (CHECKSUM_OFF, CHECKSUM_CRC32):
                raise CodecError(f"unknown binlog checksum algorithm {alg}")
        else:
            alg, lens = CHECKSUM_OFF, bytes(rest)
        return cls(version, server.decode("ascii", "replace"), created, header_len, lens, alg)

    def build(self) -> bytes:
        """Body including the alg byte; the 4 CRC bytes are appended by the event encoder."""
        server = self.server_version.encode("ascii")
        if len(server) > 50:
            raise ValueError("server_version longer than 50 bytes")
        return (
            _HEAD.pack(self.binlog_version, server, self.create_timestamp, self.header_len)
            + self.post_header_lens
            + bytes((self.checksum_alg,))
        )


def mysql57_fde(
    server_version: str = DEFAULT_SERVER_VERSION, create_timestamp: int = 0
) -> FormatDescription:
    """The FDE body we write at the head of every output file."""
    if not server_version.startswith("5."):
        # mariadb-binlog refuses 8.x; MySQL 8 replicas accept 5.7 files.
        raise ValueError(f"output server_version must be 5.x, got {server_version!r}")
    return FormatDescription(server_version=server_version, create_timestamp=create_timestamp)


def mariadb_fde(
    server_version: str = DEFAULT_MARIADB_SERVER_VERSION, create_timestamp: int = 0
) -> FormatDescription:
    """The FDE body of the mariadb flavour: what a MariaDB 10.11 master writes, so that a
    MariaDB replica takes the files for a MariaDB master's (GTID events 162, GTID_LIST)."""
    if not is_mariadb_version(server_version):
        raise ValueError(
            f"output server_version of the mariadb flavour must be a MariaDB 10.x/11.x one "
            f"(like {DEFAULT_MARIADB_SERVER_VERSION!r}), got {server_version!r}"
        )
    return FormatDescription(
        server_version=server_version,
        create_timestamp=create_timestamp,
        post_header_lens=MARIADB1011_POST_HEADER_LENS,
    )


def is_mariadb_version(server_version: str) -> bool:
    """`10.11.19-MariaDB-…`: what a MariaDB replica and mariadb-binlog take for a MariaDB server."""
    return split_version(server_version)[0] in (10, 11) and "-MariaDB" in server_version
