"""The logical catalogue: logical tables, their kind (partitioned/broadcast), shard key, and the
placement of each partition on a DN; plus the physical naming scheme and the shard hash."""

from __future__ import annotations

import decimal
import zlib
from dataclasses import dataclass, field
from typing import Any

from cdc.cn_protocol.errors import CatalogueError

PARTITIONED = "partitioned"
BROADCAST = "broadcast"


def physical_db(db: str) -> str:
    """Logical `bank` lives in physical database `bank_p` on every DN that holds a piece of it."""
    return f"{db}_p"


def physical_table(table: str, partition: int | None) -> str:
    """Partition 3 of `accounts` is `accounts_p0003`; a broadcast table is `accounts_b`."""
    return f"{table}_b" if partition is None else f"{table}_p{partition:04d}"


def shard_hash_key(value: object) -> bytes:
    """The canonical bytes of a shard-key value: 7, '7' and Decimal('7') hash alike."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, decimal.Decimal):
        value = format(value.normalize(), "f")
    text = str(value)
    if text.lstrip("-").replace(".", "", 1).isdigit() and "." in text:
        text = text.rstrip("0").rstrip(".")  # 7.0 == 7 as MariaDB compares numbers
    return text.encode("utf-8")


def partition_of(value: object, partitions: int) -> int:
    """CRC32 of the canonical key, modulo the number of partitions (stable forever)."""
    return zlib.crc32(shard_hash_key(value)) % partitions


@dataclass(slots=True)
class LogicalTable:
    db: str
    name: str
    kind: str  # PARTITIONED or BROADCAST
    shard_key: str | None = None
    # Partition i lives on DN placement[i]; empty for broadcast tables.
    placement: list[int] = field(default_factory=list)
    schema: dict[str, Any] = field(default_factory=dict)

    @property
    def is_broadcast(self) -> bool:
        return self.kind == BROADCAST

    @property
    def partitions(self) -> int:
        return len(self.placement)

    @property
    def physical_db(self) -> str:
        return physical_db(self.db)

    def physical_name(self, partition: int | None) -> str:
        return f"`{self.physical_db}`.`{physical_table(self.name, partition)}`"

    def partition_for(self, value: object) -> int:
        return partition_of(value, self.partitions)

    def to_json(self, dns: list[int]) -> dict[str, Any]:
        """This table's entry in the topology map of CdcStart / MetaChange markers."""
        entry: dict[str, Any] = {"db": self.db, "table": self.name, "kind": self.kind}
        if self.is_broadcast:
            entry["physical"] = [
                {"dn": dn, "db": self.physical_db, "table": physical_table(self.name, None)}
                for dn in dns
            ]
        else:
            entry["shard_key"] = self.shard_key
            entry["physical"] = [
                {
                    "partition": i,
                    "dn": dn,
                    "db": self.physical_db,
                    "table": physical_table(self.name, i),
                }
                for i, dn in enumerate(self.placement)
            ]
        return entry


@dataclass(slots=True)
class Catalogue:
    """What the CN knows: the storage DNs (in join order) and the logical tables."""

    dns: list[int] = field(default_factory=list)
    tables: dict[tuple[str, str], LogicalTable] = field(default_factory=dict)

    def table(self, db: str, name: str) -> LogicalTable:
        try:
            return self.tables[(db.lower(), name.lower())]
        except KeyError:
            raise CatalogueError(
                f"unknown logical table {db}.{name}; create it with the CN's DDL "
                f"(cn.execute_ddl) first"
            ) from None

    def has(self, db: str, name: str) -> bool:
        return (db.lower(), name.lower()) in self.tables

    def put(self, table: LogicalTable) -> None:
        self.tables[(table.db.lower(), table.name.lower())] = table

    def drop(self, db: str, name: str) -> None:
        self.tables.pop((db.lower(), name.lower()), None)

    def topology(self, dn_addresses: dict[int, dict[str, Any]]) -> dict[str, Any]:
        """The full topology JSON: DN list + logical-to-physical map."""
        return {
            "dns": [{"id": dn, **dn_addresses.get(dn, {})} for dn in self.dns],
            "tables": [
                t.to_json(self.dns) for _, t in sorted(self.tables.items(), key=lambda kv: kv[0])
            ],
        }
