"""MariaDB GTIDs `domain-server_id-seq_no`: where the fields sit in a raw GTID event (162) as
the mariadb flavour of the global binlog writes it, and the text form of a GTID position
(`@@gtid_binlog_pos`, `@slave_connect_state`: `0-100-5,1-200-7`).

A GTID event's server_id is its header's; its body is seq_no (u64), domain_id (u32), flags2
(u8), padded with zeros to 19 bytes when it carries no commit id and no XA xid (the layout a
10.11 master writes for an ordinary transaction or DDL)."""

from __future__ import annotations

from .constants import HEADER_LEN, MariadbGtidFlag
from .errors import CodecError
from .events import DomainGtid

MARIADB_GTID_BODY_LEN = 19
MARIADB_GTID_SEQ_OFFSET = HEADER_LEN
MARIADB_GTID_DOMAIN_OFFSET = HEADER_LEN + 8
MARIADB_GTID_FLAGS2_OFFSET = HEADER_LEN + 12
# flags2 as MariaDB 10.11 writes them: a transaction (ends with XID; may be applied in
# parallel), and a DDL (standalone: its one QUERY ends the group; no XID).
FLAGS2_TRANSACTION = int(MariadbGtidFlag.TRANSACTIONAL | MariadbGtidFlag.ALLOW_PARALLEL)
FLAGS2_DDL = int(MariadbGtidFlag.STANDALONE | MariadbGtidFlag.ALLOW_PARALLEL | MariadbGtidFlag.DDL)
MAX_U32 = (1 << 32) - 1
MAX_SEQ = (1 << 64) - 1


def gtid_text(g: DomainGtid) -> str:
    return f"{g.domain_id}-{g.server_id}-{g.seq_no}"


def position_text(gtids) -> str:
    """`0-100-5,1-200-7` (MariaDB's order: as given)."""
    return ",".join(gtid_text(g) for g in gtids)


def parse_position(text: str) -> tuple[DomainGtid, ...]:
    """A GTID position `d-s-n,d-s-n` (one per domain; "" is empty): CodecError if malformed
    or if it names a domain twice (MariaDB refuses both)."""
    out: list[DomainGtid] = []
    seen: set[int] = set()
    for part in text.replace(" ", "").replace("\n", "").split(","):
        if not part:
            continue
        fields = part.split("-")
        if len(fields) != 3 or not all(f.isdigit() for f in fields):
            raise CodecError(f"malformed GTID position {part!r} (expected domain-server_id-seq_no)")
        domain, server_id, seq = (int(f) for f in fields)
        if domain > MAX_U32 or server_id > MAX_U32 or seq > MAX_SEQ:
            raise CodecError(f"GTID {part!r} out of range")
        if domain in seen:
            raise CodecError(f"GTID position {text!r} names domain {domain} twice")
        seen.add(domain)
        out.append(DomainGtid(domain, server_id, seq))
    return tuple(out)
