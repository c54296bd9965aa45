"""XA ids of CN branches: gtrid `cdc-<txn_id>`, bqual `<dn_id>`, formatID 1."""

from __future__ import annotations

from dataclasses import dataclass

GTRID_PREFIX = "cdc-"
FORMAT_ID = 1


@dataclass(frozen=True, slots=True)
class Xid:
    txn_id: int
    dn_id: int

    @property
    def gtrid(self) -> str:
        return f"{GTRID_PREFIX}{self.txn_id}"

    @property
    def sql(self) -> str:
        """The xid as it appears after `XA START` / `XA COMMIT` (hex: no quoting worries)."""
        return f"X'{self.gtrid.encode().hex()}',X'{str(self.dn_id).encode().hex()}',{FORMAT_ID}"


def parse_recover_row(row: tuple) -> Xid | None:
    """One `XA RECOVER` row (formatID, gtrid_length, bqual_length, data) -> our Xid, or None."""
    format_id, gtrid_len, _bqual_len, data = row
    if isinstance(data, str):
        data = data.encode("latin-1")
    gtrid, bqual = bytes(data[:gtrid_len]), bytes(data[gtrid_len:])
    if int(format_id) != FORMAT_ID or not gtrid.startswith(GTRID_PREFIX.encode()):
        return None
    try:
        return Xid(int(gtrid[len(GTRID_PREFIX) :]), int(bqual))
    except ValueError:
        return None  # someone else's xid that happens to share the prefix
