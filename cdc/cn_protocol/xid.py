"""XA ids of CN branches: gtrid `cdc-<txn_id>`, bqual `<dn_id>.<owner connection id>` (or
`<dn_id>` alone, as branches were named before the owner was), formatID 1.

The owner's connection id lets recovery end a session that holds a prepared branch for ever (a
CN or dumper cut off from the GMS, its DN connections still open: MariaDB keeps a branch
attached to its session, and XA COMMIT/ROLLBACK from elsewhere answer XAER_NOTA, until that
session ends). A DN restart detaches every prepared branch, so an id read from an attached
branch always names a session of the DN's current run."""

from __future__ import annotations

from dataclasses import dataclass

GTRID_PREFIX = "cdc-"
FORMAT_ID = 1


@dataclass(frozen=True, slots=True)
class Xid:
    txn_id: int
    dn_id: int
    conn_id: int = 0  # the owner session on the DN (0: not named)

    @property
    def gtrid(self) -> str:
        return f"{GTRID_PREFIX}{self.txn_id}"

    @property
    def sql(self) -> str:
        """The xid as it appears after `XA START` / `XA COMMIT` (hex: no quoting worries)."""
        return f"X'{self.gtrid.encode().hex()}',X'{self.bqual.encode().hex()}',{FORMAT_ID}"

    @property
    def bqual(self) -> str:
        return f"{self.dn_id}.{self.conn_id}" if self.conn_id else str(self.dn_id)


def parse_recover_row(row: tuple) -> Xid | None:
    """One `XA RECOVER` row (formatID, gtrid_length, bqual_length, data) -> our Xid, or None."""
    format_id, gtrid_len, _bqual_len, data = row
    if isinstance(data, str):
        data = data.encode("latin-1")
    gtrid, bqual = bytes(data[:gtrid_len]), bytes(data[gtrid_len:])
    if int(format_id) != FORMAT_ID or not gtrid.startswith(GTRID_PREFIX.encode()):
        return None
    dn, _, conn = bqual.partition(b".")
    try:
        return Xid(int(gtrid[len(GTRID_PREFIX) :]), int(dn), int(conn or 0))
    except ValueError:
        return None  # someone else's xid that happens to share the prefix
