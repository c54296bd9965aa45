"""TABLE_MAP_EVENT (19): table id, names, column types + per-type metadata, null bits and the
optional metadata (signedness, charsets, column names, enum/set values, primary key)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from .constants import COLLATION_UTF8MB4_GENERAL_CI, NUMERIC_TYPES, ColumnType, EventType, OptMeta
from .errors import CodecError
from .packed import (
    bitmap_bits,
    bits_to_bitmap,
    bits_to_msb_bitmap,
    msb_bits,
    read_lenenc,
    read_lenenc_bytes,
    take,
    write_lenenc,
    write_lenenc_bytes,
)

if TYPE_CHECKING:
    from .fde import FormatDescription

T = ColumnType
_ONE_BYTE_META = frozenset(
    {
        T.FLOAT,
        T.DOUBLE,
        T.BLOB,
        T.TINY_BLOB,
        T.MEDIUM_BLOB,
        T.LONG_BLOB,
        T.GEOMETRY,
        T.JSON,
        T.TIME2,
        T.DATETIME2,
        T.TIMESTAMP2,
    }
)
_LE_TWO_BYTE_META = frozenset({T.VARCHAR, T.VAR_STRING, T.BIT})
_BE_TWO_BYTE_META = frozenset({T.NEWDECIMAL, T.STRING, T.ENUM, T.SET})
_CHARACTER_TYPES = frozenset({T.STRING, T.VAR_STRING, T.VARCHAR, T.BLOB})
TABLE_ID_MASK = (1 << 48) - 1
_U16 = struct.Struct("<H")


def real_type(type_code: int, meta: int) -> int:
    """The column's real type: STRING columns carry ENUM/SET/STRING in their metadata."""
    if type_code == T.STRING and meta:
        rt = meta >> 8
        if rt & 0x30 != 0x30:  # CHAR longer than 255 bytes borrows 2 bits of the type byte
            rt |= 0x30
        return rt
    return type_code


def string_length(meta: int) -> int:
    """Max byte length of a STRING (CHAR/BINARY) column, or pack length of ENUM/SET."""
    rt = meta >> 8
    length = meta & 0xFF
    if rt & 0x30 != 0x30:
        length |= ((rt & 0x30) ^ 0x30) << 4
    return length


def string_meta(rt: int, length: int) -> int:
    """Inverse of real_type/string_length: metadata for a CHAR of `length` bytes (<= 1023)."""
    if length > 255:
        rt = rt & ~0x30 | (((length >> 8) << 4) ^ 0x30)
    return (rt << 8) | (length & 0xFF)


def _read_meta(types: bytes, raw: memoryview) -> tuple[int, ...]:
    out = []
    pos = 0
    for t in types:
        if t in _ONE_BYTE_META:
            chunk, pos = take(raw, pos, 1, "TABLE_MAP column metadata")
            out.append(chunk[0])
        elif t in _LE_TWO_BYTE_META:
            chunk, pos = take(raw, pos, 2, "TABLE_MAP column metadata")
            out.append(chunk[0] | chunk[1] << 8)
        elif t in _BE_TWO_BYTE_META:
            chunk, pos = take(raw, pos, 2, "TABLE_MAP column metadata")
            out.append(chunk[0] << 8 | chunk[1])
        else:
            out.append(0)
    if pos != len(raw):
        raise CodecError(f"TABLE_MAP metadata block has {len(raw)} bytes, columns use {pos}")
    return tuple(out)


def _write_meta(types: bytes, metas: Sequence[int]) -> bytes:
    out = bytearray()
    for t, m in zip(types, metas, strict=True):
        if t in _ONE_BYTE_META:
            out.append(m & 0xFF)
        elif t in _LE_TWO_BYTE_META:
            out += _U16.pack(m)
        elif t in _BE_TWO_BYTE_META:
            out += bytes((m >> 8 & 0xFF, m & 0xFF))
    return bytes(out)


CharsetSpec = tuple[
    int, tuple[tuple[int, int], ...]
]  # (default collation, ((index, collation), ...))


@dataclass(slots=True, frozen=True)
class OptionalMetadata:
    """Parsed optional metadata; every field is None when the TLV was absent."""

    signedness: tuple[bool, ...] | None = None  # one per numeric column, True = UNSIGNED
    default_charset: CharsetSpec | None = None
    column_charsets: tuple[int, ...] | None = None  # one per character column
    column_names: tuple[bytes, ...] | None = None
    set_str_values: tuple[tuple[bytes, ...], ...] | None = None
    enum_str_values: tuple[tuple[bytes, ...], ...] | None = None
    geometry_types: tuple[int, ...] | None = None
    simple_primary_key: tuple[int, ...] | None = None
    primary_key_with_prefix: tuple[tuple[int, int], ...] | None = None
    enum_and_set_default_charset: CharsetSpec | None = None
    enum_and_set_column_charsets: tuple[int, ...] | None = None
    column_visibility: bytes | None = None  # MSB-first bitmap, kept raw
    unknown: tuple[tuple[int, bytes], ...] = ()
    # TLV order as found on the wire (MariaDB writes GEOMETRY_TYPE before COLUMN_NAME), so a
    # parsed TABLE_MAP rebuilds byte for byte; empty = canonical MySQL order.
    order: tuple[int, ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, raw: memoryview, n_numeric: int) -> OptionalMetadata:
        vals: dict[str, object] = {}
        unknown = []
        order = []
        pos = 0
        while pos < len(raw):
            kind = raw[pos]
            order.append(kind)
            n, pos = read_lenenc(raw, pos + 1)
            value, pos = take(raw, pos, n, f"TABLE_MAP optional metadata field {kind}")
            if kind == OptMeta.SIGNEDNESS:
                if n * 8 < n_numeric:
                    raise CodecError("SIGNEDNESS bitmap shorter than the numeric columns")
                vals["signedness"] = tuple(msb_bits(value, n_numeric))
            elif kind == OptMeta.DEFAULT_CHARSET:
                vals["default_charset"] = _parse_default_charset(value)
            elif kind == OptMeta.COLUMN_CHARSET:
                vals["column_charsets"] = _parse_ints(value)
            elif kind == OptMeta.COLUMN_NAME:
                vals["column_names"] = _parse_strings(value)
            elif kind == OptMeta.SET_STR_VALUE:
                vals["set_str_values"] = _parse_str_lists(value)
            elif kind == OptMeta.ENUM_STR_VALUE:
                vals["enum_str_values"] = _parse_str_lists(value)
            elif kind == OptMeta.GEOMETRY_TYPE:
                vals["geometry_types"] = _parse_ints(value)
            elif kind == OptMeta.SIMPLE_PRIMARY_KEY:
                vals["simple_primary_key"] = _parse_ints(value)
            elif kind == OptMeta.PRIMARY_KEY_WITH_PREFIX:
                ints = _parse_ints(value)
                if len(ints) % 2:
                    raise CodecError("PRIMARY_KEY_WITH_PREFIX has an odd number of integers")
                vals["primary_key_with_prefix"] = tuple(zip(ints[::2], ints[1::2], strict=True))
            elif kind == OptMeta.ENUM_AND_SET_DEFAULT_CHARSET:
                vals["enum_and_set_default_charset"] = _parse_default_charset(value)
            elif kind == OptMeta.ENUM_AND_SET_COLUMN_CHARSET:
                vals["enum_and_set_column_charsets"] = _parse_ints(value)
            elif kind == OptMeta.COLUMN_VISIBILITY:
                vals["column_visibility"] = bytes(value)
            else:
                unknown.append((kind, bytes(value)))
        return cls(**vals, unknown=tuple(unknown), order=tuple(order))  # type: ignore[arg-type]

    def build(self) -> bytes:
        chunks: list[tuple[int, bytes]] = []

        def tlv(kind: int, value: bytes) -> None:
            chunks.append((kind, bytes((kind,)) + write_lenenc(len(value)) + value))

        if self.signedness is not None:
            tlv(OptMeta.SIGNEDNESS, bits_to_msb_bitmap(self.signedness))
        if self.default_charset is not None:
            tlv(OptMeta.DEFAULT_CHARSET, _build_default_charset(self.default_charset))
        if self.column_charsets is not None:
            tlv(OptMeta.COLUMN_CHARSET, _build_ints(self.column_charsets))
        if self.column_names is not None:
            tlv(OptMeta.COLUMN_NAME, b"".join(write_lenenc_bytes(n) for n in self.column_names))
        if self.set_str_values is not None:
            tlv(OptMeta.SET_STR_VALUE, _build_str_lists(self.set_str_values))
        if self.enum_str_values is not None:
            tlv(OptMeta.ENUM_STR_VALUE, _build_str_lists(self.enum_str_values))
        if self.geometry_types is not None:
            tlv(OptMeta.GEOMETRY_TYPE, _build_ints(self.geometry_types))
        if self.simple_primary_key is not None:
            tlv(OptMeta.SIMPLE_PRIMARY_KEY, _build_ints(self.simple_primary_key))
        if self.primary_key_with_prefix is not None:
            flat = [x for pair in self.primary_key_with_prefix for x in pair]
            tlv(OptMeta.PRIMARY_KEY_WITH_PREFIX, _build_ints(flat))
        if self.enum_and_set_default_charset is not None:
            tlv(
                OptMeta.ENUM_AND_SET_DEFAULT_CHARSET,
                _build_default_charset(self.enum_and_set_default_charset),
            )
        if self.enum_and_set_column_charsets is not None:
            tlv(OptMeta.ENUM_AND_SET_COLUMN_CHARSET, _build_ints(self.enum_and_set_column_charsets))
        if self.column_visibility is not None:
            tlv(OptMeta.COLUMN_VISIBILITY, self.column_visibility)
        for kind, value in self.unknown:
            tlv(kind, value)
        if self.order and sorted(self.order) == sorted(k for k, _ in chunks):
            rank = {k: i for i, k in enumerate(self.order)}
            chunks.sort(key=lambda kc: rank[kc[0]])
        return b"".join(c for _, c in chunks)


def _parse_ints(value: memoryview) -> tuple[int, ...]:
    out = []
    pos = 0
    while pos < len(value):
        v, pos = read_lenenc(value, pos)
        out.append(v)
    return tuple(out)


def _build_ints(values: Sequence[int]) -> bytes:
    return b"".join(write_lenenc(v) for v in values)


def _parse_default_charset(value: memoryview) -> CharsetSpec:
    ints = _parse_ints(value)
    if not ints or len(ints) % 2 != 1:
        raise CodecError("DEFAULT_CHARSET metadata must hold a default and (index, id) pairs")
    rest = ints[1:]
    return ints[0], tuple(zip(rest[::2], rest[1::2], strict=True))


def _build_default_charset(spec: CharsetSpec) -> bytes:
    default, pairs = spec
    return _build_ints([default, *(x for p in pairs for x in p)])


def _parse_strings(value: memoryview) -> tuple[bytes, ...]:
    out = []
    pos = 0
    while pos < len(value):
        s, pos = read_lenenc_bytes(value, pos)
        out.append(s)
    return tuple(out)


def _parse_str_lists(value: memoryview) -> tuple[tuple[bytes, ...], ...]:
    out = []
    pos = 0
    while pos < len(value):
        count, pos = read_lenenc(value, pos)
        if count > len(value) - pos:
            raise CodecError(f"enum/set value list claims {count} strings in {len(value)} bytes")
        items = []
        for _ in range(count):
            s, pos = read_lenenc_bytes(value, pos)
            items.append(s)
        out.append(tuple(items))
    return tuple(out)


def _build_str_lists(lists: Sequence[Sequence[bytes]]) -> bytes:
    return b"".join(
        write_lenenc(len(items)) + b"".join(write_lenenc_bytes(s) for s in items) for items in lists
    )


@dataclass(slots=True, frozen=True)
class Column:
    """One column as a row-image codec and a TABLE_MAP builder need it."""

    type: int
    meta: int = 0
    nullable: bool = True
    unsigned: bool = False
    name: bytes | None = None
    collation: int | None = None  # character and enum/set columns
    enum_values: tuple[bytes, ...] | None = None
    set_values: tuple[bytes, ...] | None = None
    geometry_type: int | None = None

    @property
    def real_type(self) -> int:
        return real_type(self.type, self.meta)


@dataclass(slots=True)
class TableMapEvent:
    TYPE_CODE: ClassVar[int] = EventType.TABLE_MAP

    table_id: int
    schema: bytes
    table: bytes
    column_types: bytes
    column_meta: tuple[int, ...]
    nullable: tuple[bool, ...]
    optional: OptionalMetadata = field(default_factory=OptionalMetadata)
    flags: int = 1  # TM_BIT_LEN_EXACT_F, as MySQL writes

    @classmethod
    def parse(cls, body: bytes | memoryview, fde: FormatDescription) -> TableMapEvent:
        mv = memoryview(body)
        id_len = 4 if fde.post_header_len(EventType.TABLE_MAP) == 6 else 6
        head, pos = take(mv, 0, id_len + 2, "TABLE_MAP post-header")
        table_id = int.from_bytes(head[:id_len], "little")
        flags = head[id_len] | head[id_len + 1] << 8
        schema, pos = _read_name(mv, pos, "schema")
        table, pos = _read_name(mv, pos, "table")
        ncols, pos = read_lenenc(mv, pos)
        types, pos = take(mv, pos, ncols, "TABLE_MAP column types")
        types_b = bytes(types)
        meta_len, pos = read_lenenc(mv, pos)
        meta_raw, pos = take(mv, pos, meta_len, "TABLE_MAP column metadata")
        metas = _read_meta(types_b, meta_raw)
        nulls, pos = take(mv, pos, (ncols + 7) // 8, "TABLE_MAP null bitmap")
        n_numeric = sum(1 for t in types_b if t in NUMERIC_TYPES)
        optional = OptionalMetadata.parse(mv[pos:], n_numeric)
        return cls(
            table_id=table_id,
            schema=schema,
            table=table,
            column_types=types_b,
            column_meta=metas,
            nullable=tuple(bitmap_bits(nulls, ncols)),
            optional=optional,
            flags=flags,
        )

    def build(self) -> bytes:
        if not 0 <= self.table_id <= TABLE_ID_MASK:
            raise ValueError(f"table_id {self.table_id} does not fit 6 bytes")
        meta = _write_meta(self.column_types, self.column_meta)
        return b"".join(
            (
                self.table_id.to_bytes(6, "little"),
                _U16.pack(self.flags),
                bytes((len(self.schema),)),
                self.schema,
                b"\0",
                bytes((len(self.table),)),
                self.table,
                b"\0",
                write_lenenc(len(self.column_types)),
                self.column_types,
                write_lenenc(len(meta)),
                meta,
                bits_to_bitmap(self.nullable),
                self.optional.build(),
            )
        )

    def columns(self, *, mariadb: bool = False) -> list[Column]:
        """Columns with the optional metadata folded in (missing parts stay None/False).

        MariaDB counts GEOMETRY columns among the character columns of the charset TLVs
        (MySQL does not): pass `mariadb=True` for TABLE_MAPs written by a MariaDB server.
        """
        opt = self.optional
        char_types = _CHARACTER_TYPES | {T.GEOMETRY} if mariadb else _CHARACTER_TYPES
        numeric_i = char_i = enum_i = set_i = es_i = geo_i = 0
        char_colls = _expand_charsets(opt.default_charset, opt.column_charsets)
        es_colls = _expand_charsets(
            opt.enum_and_set_default_charset, opt.enum_and_set_column_charsets
        )
        out = []
        for i, (t, m) in enumerate(zip(self.column_types, self.column_meta, strict=True)):
            unsigned = False
            collation = None
            enum_values = set_values = None
            geometry = None
            if t in NUMERIC_TYPES:
                if opt.signedness is not None and numeric_i < len(opt.signedness):
                    unsigned = opt.signedness[numeric_i]
                numeric_i += 1
            rt = real_type(t, m)
            if rt in char_types:
                collation = char_colls(char_i)
                char_i += 1
            if rt in (T.ENUM, T.SET):
                collation = es_colls(es_i)
                es_i += 1
                if rt == T.ENUM:
                    if opt.enum_str_values is not None and enum_i < len(opt.enum_str_values):
                        enum_values = opt.enum_str_values[enum_i]
                    enum_i += 1
                else:
                    if opt.set_str_values is not None and set_i < len(opt.set_str_values):
                        set_values = opt.set_str_values[set_i]
                    set_i += 1
            if t == T.GEOMETRY:
                if opt.geometry_types is not None and geo_i < len(opt.geometry_types):
                    geometry = opt.geometry_types[geo_i]
                geo_i += 1
            name = None
            if opt.column_names is not None and i < len(opt.column_names):
                name = opt.column_names[i]
            out.append(
                Column(
                    t,
                    m,
                    self.nullable[i],
                    unsigned,
                    name,
                    collation,
                    enum_values,
                    set_values,
                    geometry,
                )
            )
        return out

    @classmethod
    def from_columns(
        cls,
        table_id: int,
        schema: bytes | str,
        table: bytes | str,
        columns: Sequence[Column],
        *,
        primary_key: Sequence[int] = (),
        default_collation: int = COLLATION_UTF8MB4_GENERAL_CI,
        with_names: bool = True,
    ) -> TableMapEvent:
        """A TABLE_MAP with full optional metadata, as binlog_row_metadata=FULL writes it."""
        types = bytes(c.type for c in columns)
        numeric = [c.unsigned for c in columns if c.type in NUMERIC_TYPES]
        chars = [c for c in columns if c.real_type in _CHARACTER_TYPES]
        enums = [c for c in columns if c.real_type == T.ENUM]
        sets = [c for c in columns if c.real_type == T.SET]
        es = [c for c in columns if c.real_type in (T.ENUM, T.SET)]
        geos = [c for c in columns if c.type == T.GEOMETRY]
        opt = OptionalMetadata(
            signedness=tuple(numeric) if numeric else None,
            default_charset=_charset_spec(chars, default_collation) if chars else None,
            column_names=tuple((c.name or b"") for c in columns) if with_names else None,
            set_str_values=tuple(c.set_values or () for c in sets) if sets else None,
            enum_str_values=tuple(c.enum_values or () for c in enums) if enums else None,
            geometry_types=tuple(c.geometry_type or 0 for c in geos) if geos else None,
            simple_primary_key=tuple(primary_key) if primary_key else None,
            enum_and_set_default_charset=_charset_spec(es, default_collation) if es else None,
        )
        return cls(
            table_id=table_id,
            schema=schema.encode() if isinstance(schema, str) else schema,
            table=table.encode() if isinstance(table, str) else table,
            column_types=types,
            column_meta=tuple(c.meta for c in columns),
            nullable=tuple(c.nullable for c in columns),
            optional=opt,
        )


def _charset_spec(cols: Sequence[Column], default: int) -> CharsetSpec:
    pairs = tuple(
        (i, c.collation)
        for i, c in enumerate(cols)
        if c.collation is not None and c.collation != default
    )
    return default, pairs


def _expand_charsets(spec: CharsetSpec | None, per_column: tuple[int, ...] | None):
    if per_column is not None:
        return lambda i: per_column[i] if i < len(per_column) else None
    if spec is not None:
        default, pairs = spec
        exceptions = dict(pairs)
        return lambda i: exceptions.get(i, default)
    return lambda i: None


def _read_name(mv: memoryview, pos: int, what: str) -> tuple[bytes, int]:
    n_b, pos = take(mv, pos, 1, f"TABLE_MAP {what} length")
    name, pos = take(mv, pos, n_b[0] + 1, f"TABLE_MAP {what} name")
    if name[-1] != 0:
        raise CodecError(f"TABLE_MAP {what} name is not NUL-terminated")
    return bytes(name[:-1]), pos
