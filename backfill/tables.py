"""Which logical tables to back up and where their physical shards live (from the CN catalogue).

Everything here is plain data: a `TableSpec` travels to the Spark tasks by pickling."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pymysql

from backfill.columns import ColumnSpec
from backfill.errors import BackfillError
from cdc.sql_literal import sql_identifier

if TYPE_CHECKING:  # Spark tasks import this module (Shard, TableSpec): not the CN's modules
    from cdc.cn_protocol.catalogue import Catalogue, LogicalTable
    from cdc.config import Config

PRIMARY_KEY = re.compile(r"PRIMARY KEY\s*\(([^)]*)\)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Shard:
    """One physical table on one DN, with what a task needs to read it."""

    dn: int
    host: str
    port: int
    user: str
    password: str
    db: str
    table: str
    label: str  # e.g. "dn2-orders_p0003": names parts, progress lines and errors

    @property
    def qualified(self) -> str:
        return f"{sql_identifier(self.db)}.{sql_identifier(self.table)}"

    @property
    def where(self) -> str:
        return f"dn{self.dn} ({self.host}:{self.port}) {self.db}.{self.table}"

    def connect(self) -> pymysql.Connection:
        from cdc import admin_sql  # (here: a Spark task imports this module, not the cdc package)

        return admin_sql.connect(
            self.host,
            self.port,
            self.user,
            self.password,
            connect_timeout=10,
            read_timeout=None,  # a chunk's read may take long
            # TIMESTAMP values in UTC, as the binlog has them; loads use the same zone.
            init_command="SET time_zone = '+00:00'",
        )


@dataclass(frozen=True, slots=True)
class TableSpec:
    db: str
    name: str
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...]
    create: str  # the logical CREATE TABLE (named `name`, no database)
    shards: tuple[Shard, ...] = field(default=())

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def key_index(self) -> tuple[int, ...]:
        names = [c.name for c in self.columns]
        return tuple(names.index(k) for k in self.primary_key)

    @property
    def placement(self) -> tuple[tuple[int, str], ...]:
        return tuple((s.dn, s.table) for s in self.shards)


def load_catalogue(config: Config) -> Catalogue:
    from cdc.cn_protocol.catalogue_store import CatalogueStore
    from cdc.cn_protocol.dn_pool import connect

    store = CatalogueStore(lambda: connect(config.gms), config.cn.catalogue_database)
    return asyncio.run(store.load())


def primary_key(table: LogicalTable) -> tuple[str, ...]:
    m = PRIMARY_KEY.search(table.schema.get("create", ""))
    if m is None:
        raise BackfillError(
            f"{table.db}.{table.name} has no primary key: the backfill needs one to reconcile "
            "rows read from the DNs with the global binlog"
        )
    return tuple(k.strip().strip("`").split("(")[0].strip("`") for k in m.group(1).split(","))


def table_spec(config: Config, catalogue: Catalogue, table: LogicalTable) -> TableSpec:
    from cdc.cn_protocol.catalogue import physical_table

    where = f"{table.db}.{table.name}"
    if table.is_broadcast:  # every DN has a copy; the global binlog speaks through the first
        pieces = [(catalogue.dns[0], None)]
    else:
        pieces = [(dn, p) for p, dn in enumerate(table.placement)]
    shards = []
    for dn, partition in pieces:
        node = config.dn_by_id(dn)
        name = physical_table(table.name, partition)
        shards.append(
            Shard(
                dn,
                node.host,
                node.port,
                node.user,
                node.password,
                table.physical_db,
                name,
                f"dn{dn}-{name}",
            )
        )
    columns = tuple(
        ColumnSpec(c["name"], c["type"], c.get("charset")) for c in table.schema.get("columns", [])
    )
    if not columns:
        raise BackfillError(f"{where}: the catalogue has no column list for it")
    return TableSpec(
        table.db,
        table.name,
        columns,
        primary_key(table),
        table.schema.get("create", ""),
        tuple(shards),
    )


def resolve(config: Config, catalogue: Catalogue, names: list[str] | None) -> list[TableSpec]:
    """`db.table` names (or every logical table) → specs; an unknown name is an error."""
    if not names:
        chosen = sorted(catalogue.tables.values(), key=lambda t: (t.db, t.name))
    else:
        chosen = []
        for name in names:
            db, _, table = name.strip().partition(".")
            if not db or not table:
                raise BackfillError(f"--tables wants db.table names, got {name!r}")
            if not catalogue.has(db, table):
                known = ", ".join(f"{d}.{t}" for d, t in sorted(catalogue.tables)) or "none"
                raise BackfillError(f"unknown logical table {name} (known: {known})")
            chosen.append(catalogue.table(db, table))
    return [table_spec(config, catalogue, t) for t in chosen]


def check_dns_up(specs: list[TableSpec]) -> None:
    """Fail before any work if a DN holding a shard does not answer, naming it."""
    seen: set[int] = set()
    for spec in specs:
        for shard in spec.shards:
            if shard.dn in seen:
                continue
            seen.add(shard.dn)
            try:
                shard.connect().close()
            except pymysql.err.MySQLError as exc:
                raise BackfillError(
                    f"dn{shard.dn} ({shard.host}:{shard.port}) is down or refuses connections: "
                    f"{exc.args[-1] if exc.args else exc} (it holds {spec.qualified})"
                ) from None
