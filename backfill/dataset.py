"""The output: one directory per table of Parquet or CSV parts, and `_backfill.json` (the TSO,
the global binlog position right after it, the tables). Spark tasks write the parts (a part
appears whole when its task is done); this module turns a Parquet part into CSV and reads parts
back for `--load` and the tests.

CSV is text that `read_part` parses back to the same values: binary as hex, TIMESTAMP with its
zone (Z), NULL as nothing and '' as "" (every string is quoted)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from cdc.files import write_atomically

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
    seconds: dict[str, float] = field(default_factory=dict)  # phases of the run, for the bench

    def save(self, out: Path) -> None:
        write_atomically(out / MANIFEST, json.dumps(asdict(self), indent=2, default=str))

    @classmethod
    def load(cls, out: Path) -> Manifest:
        raw = json.loads((Path(out) / MANIFEST).read_text())
        raw["tables"] = [TableOutput(**t) for t in raw["tables"]]
        return cls(**raw)


def table_dir(out: Path, db: str, table: str) -> Path:
    return Path(out) / f"{db}.{table}"


def read_part(path: Path, schema: pa.Schema, fmt: str, columns: list[str] | None = None):
    """A part as `schema` (the columns' `arrow_type`s). Parts store a few types differently
    (`columns.stored_type`; CSV: binary as hex), cast back here."""
    stored = pa.schema([_stored(f) for f in schema])
    if fmt == "parquet":
        table = pq.read_table(path, columns=columns)
    else:
        text = {f.name: (pa.string() if pa.types.is_binary(f.type) else f.type) for f in stored}
        options = pacsv.ConvertOptions(
            column_types=text,
            include_columns=columns,
            null_values=[""],  # NULL is nothing, '' is "": the text 'null' is text
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        )
        parse = pacsv.ParseOptions(newlines_in_values=True)
        table = pacsv.read_csv(path, parse_options=parse, convert_options=options)
        for i, f in enumerate(table.schema):
            if pa.types.is_binary(stored.field(f.name).type):
                raw = [None if v is None else bytes.fromhex(v) for v in table.column(i).to_pylist()]
                table = table.set_column(i, f.name, pa.array(raw, pa.binary()))
    wanted = pa.schema([schema.field(name) for name in table.column_names])
    return table.cast(wanted)


def parquet_to_csv(paths: tuple[str, str]) -> int:
    """(Parquet part, CSV path): the part rewritten as CSV, the Parquet part removed; → rows.
    (One argument: it runs as a Spark task.)"""
    src, dst = paths
    table = pq.read_table(src)
    columns = []
    for f, column in zip(table.schema, table.columns, strict=True):
        if pa.types.is_binary(f.type):
            column = pa.array([None if v is None else v.hex() for v in column.to_pylist()])
        columns.append(column)
    pacsv.write_csv(pa.table(columns, names=table.column_names), dst + ".tmp")
    os.replace(dst + ".tmp", dst)
    os.unlink(src)
    return table.num_rows


def _stored(f: pa.Field) -> pa.Field:
    if f.type == pa.uint64():
        return pa.field(f.name, pa.decimal128(20, 0))
    if pa.types.is_duration(f.type):
        return pa.field(f.name, pa.int64())
    return f


def list_parts(directory: Path) -> list[str]:
    """The data files in a table directory, and nothing else (a leftover hidden or `_` file is
    removed: consumers should not have to skip them)."""
    parts = []
    for f in sorted(Path(directory).iterdir()):
        if f.name.startswith((".", "_")):
            f.unlink()
        elif f.name.startswith("part-"):
            parts.append(f.name)
    return parts
