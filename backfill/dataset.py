"""The output: one directory per table of Parquet or CSV parts, and `_backfill.json` (the TSO,
the global binlog position right after it, the tables). Parts are written to a temp name and
renamed, so a part that exists is complete."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

MANIFEST = "_backfill.json"
FORMATS = ("parquet", "csv")


@dataclass(slots=True)
class TableOutput:
    db: str
    table: str
    columns: list[dict]  # name, type, charset
    primary_key: list[str]
    create: str
    rows: int = 0
    parts: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Manifest:
    tso: int
    binlog_file: str
    binlog_position: int
    dumper_host: str
    dumper_port: int
    format: str
    low_watermark_tso: int
    high_watermark_tso: int
    tables: list[TableOutput] = field(default_factory=list)

    def save(self, out: Path) -> None:
        tmp = out / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, default=str))
        os.replace(tmp, out / MANIFEST)

    @classmethod
    def load(cls, out: Path) -> Manifest:
        raw = json.loads((Path(out) / MANIFEST).read_text())
        raw["tables"] = [TableOutput(**t) for t in raw["tables"]]
        return cls(**raw)


def table_dir(out: Path, db: str, table: str) -> Path:
    return Path(out) / f"{db}.{table}"


def _csv_ready(table: pa.Table) -> pa.Table:
    """CSV has no bytes: binary columns are written as hex."""
    for i, f in enumerate(table.schema):
        if pa.types.is_binary(f.type):
            hexed = [None if v is None else v.hex() for v in table.column(i).to_pylist()]
            table = table.set_column(i, f.name, pa.array(hexed, pa.string()))
    return table


def write_part(path: Path, table: pa.Table, fmt: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    if fmt == "parquet":
        pq.write_table(table, tmp)
    else:
        pacsv.write_csv(_csv_ready(table), tmp)
    os.replace(tmp, path)


def read_part(path: Path, schema: pa.Schema, fmt: str, columns: list[str] | None = None):
    if fmt == "parquet":
        return pq.read_table(path, columns=columns, schema=schema)
    binary = [f.name for f in schema if pa.types.is_binary(f.type)]
    types = {f.name: (pa.string() if f.name in binary else f.type) for f in schema}
    options = pacsv.ConvertOptions(
        column_types=types,
        include_columns=columns,
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )
    table = pacsv.read_csv(path, convert_options=options)
    for i, f in enumerate(table.schema):
        if f.name in binary:
            raw = [None if v is None else bytes.fromhex(v) for v in table.column(i).to_pylist()]
            table = table.set_column(i, f.name, pa.array(raw, pa.binary()))
    return table


def part_name(label: str, seq: int, fmt: str) -> str:
    return f"part-{label}-{seq:05d}.{fmt}"
