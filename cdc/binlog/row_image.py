"""SLOW path: decode/encode row images (the values inside rows events) for every column type.
Used by tests, tooling and the few places that must read values; hot paths keep raw bytes."""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Sequence
from decimal import Decimal, localcontext
from typing import NamedTuple

from .constants import ColumnType
from .errors import CodecError, NotSupportedError
from .packed import bitmap_bits, bits_to_bitmap
from .table_map import Column, real_type, string_length

T = ColumnType


class Date(NamedTuple):
    """DATE value; a tuple because MariaDB allows 0000-00-00 and other non-calendar dates."""

    year: int
    month: int
    day: int


class DateTime(NamedTuple):
    year: int
    month: int
    day: int
    hour: int = 0
    minute: int = 0
    second: int = 0
    microsecond: int = 0


class Timestamp(NamedTuple):
    """TIMESTAMP value: seconds since the epoch (UTC) + microseconds."""

    seconds: int
    microsecond: int = 0


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing()  # a column not present in this row image (columns_present bit clear)

_INT = {
    T.TINY: (1, struct.Struct("<b"), struct.Struct("<B")),
    T.SHORT: (2, struct.Struct("<h"), struct.Struct("<H")),
    T.LONG: (4, struct.Struct("<i"), struct.Struct("<I")),
    T.LONGLONG: (8, struct.Struct("<q"), struct.Struct("<Q")),
}
INTEGERS = _INT  # (width, signed, unsigned struct) of each fixed-width integer type
_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_TIMEF_INT_OFS = 0x800000
_TIMEF_OFS = 0x800000000000
_DATETIMEF_INT_OFS = 0x8000000000
# The sizes of the other fixed-size values in a row image (value_widths).
_FIXED = {
    T.INT24: 3,
    T.FLOAT: 4,
    T.DOUBLE: 8,
    T.DATE: 3,
    T.NEWDATE: 3,
    T.YEAR: 1,
    T.TIMESTAMP: 4,
    T.DATETIME: 8,
    T.TIME: 3,
}


def _frac_len(fsp: int) -> int:
    return (fsp + 1) // 2


def _need(buf: memoryview, pos: int, n: int, col: int) -> int:
    end = pos + n
    if end > len(buf):
        raise CodecError(f"row image truncated in column {col + 1}: needs {n} bytes at {pos}")
    return end


# ---------------------------------------------------------------- decimal


def decimal_size(precision: int, scale: int) -> int:
    intg = precision - scale
    return (intg // 9) * 4 + _DIG2BYTES[intg % 9] + (scale // 9) * 4 + _DIG2BYTES[scale % 9]


def decode_decimal(raw: bytes | memoryview, precision: int, scale: int) -> Decimal:
    b = bytearray(raw)
    negative = not (b[0] & 0x80)
    b[0] ^= 0x80
    if negative:
        b = bytearray(x ^ 0xFF for x in b)
    intg = precision - scale
    digits = []
    pos = 0
    for width in _groups(intg, leading=True) + _groups(scale, leading=False):
        n = _DIG2BYTES[width] if width < 9 else 4
        v = int.from_bytes(b[pos : pos + n], "big")
        pos += n
        digits.append(str(v).zfill(width))
    int_digits = "".join(digits[: len(_groups(intg, leading=True))]) or "0"
    frac_digits = "".join(digits[len(_groups(intg, leading=True)) :])
    text = int_digits + ("." + frac_digits if scale else "")
    return Decimal(("-" if negative else "") + text)


def encode_decimal(value: Decimal | int | str, precision: int, scale: int) -> bytes:
    with localcontext() as ctx:
        ctx.prec = 100  # DECIMAL(65, 30) needs more than the default 28 digits
        d = Decimal(value)
        negative = d.is_signed() and d != 0
        q = abs(d).quantize(Decimal(1).scaleb(-scale))
    _, dig, _ = q.as_tuple()
    s = "".join(map(str, dig))
    if scale:
        s = s.rjust(scale + 1, "0")
        int_part, frac_part = s[:-scale], s[-scale:]
    else:
        int_part, frac_part = s, ""
    intg = precision - scale
    int_part = int_part.lstrip("0")
    if len(int_part) > intg:
        raise ValueError(f"{value} does not fit DECIMAL({precision},{scale})")
    int_part = int_part.rjust(intg, "0")
    out = bytearray()
    pos = 0
    for width in _groups(intg, leading=True):
        out += int(int_part[pos : pos + width] or "0").to_bytes(
            _DIG2BYTES[width] if width < 9 else 4, "big"
        )
        pos += width
    pos = 0
    for width in _groups(scale, leading=False):
        out += int(frac_part[pos : pos + width] or "0").to_bytes(
            _DIG2BYTES[width] if width < 9 else 4, "big"
        )
        pos += width
    if negative:
        out = bytearray(x ^ 0xFF for x in out)
    out[0] ^= 0x80
    return bytes(out)


def _groups(ndigits: int, *, leading: bool) -> list[int]:
    """Digit-group widths: integer part has its short group first, fraction part last."""
    full, rest = divmod(ndigits, 9)
    groups = [9] * full
    if rest:
        if leading:
            groups.insert(0, rest)
        else:
            groups.append(rest)
    return groups


# ---------------------------------------------------------------- temporal


def _read_frac(buf: memoryview, pos: int, fsp: int) -> int:
    n = _frac_len(fsp)
    if n == 0:
        return 0
    v = int.from_bytes(buf[pos : pos + n], "big")
    return v * (10000 if n == 1 else 100 if n == 2 else 1)


def _write_frac(us: int, fsp: int) -> bytes:
    n = _frac_len(fsp)
    if n == 0:
        return b""
    v = us // (10000 if n == 1 else 100 if n == 2 else 1)
    return v.to_bytes(n, "big")


def _time_packed(value: dt.timedelta) -> int:
    us_total = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = -1 if us_total < 0 else 1
    us_total = abs(us_total)
    secs, us = divmod(us_total, 1_000_000)
    hours, rem = divmod(secs, 3600)
    minutes, seconds = divmod(rem, 60)
    if hours > 1023:
        raise ValueError(f"TIME value {value} out of range")
    return sign * ((((hours << 12) | (minutes << 6) | seconds) << 24) + us)


def _time_from_packed(packed: int) -> dt.timedelta:
    sign = -1 if packed < 0 else 1
    packed = abs(packed)
    intpart, us = packed >> 24, packed % (1 << 24)
    hours, minutes, seconds = intpart >> 12, (intpart >> 6) & 63, intpart & 63
    return sign * dt.timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=us)


def _c_mod(a: int, b: int) -> int:
    """C's % (sign of the dividend); TIME2 packing relies on it."""
    r = abs(a) % b
    return -r if a < 0 else r


def _c_div(a: int, b: int) -> int:
    q = abs(a) // b
    return -q if a < 0 else q


def decode_time2(raw: memoryview, fsp: int) -> dt.timedelta:
    if fsp in (0,):
        packed = (int.from_bytes(raw[:3], "big") - _TIMEF_INT_OFS) << 24
    elif fsp in (1, 2):
        intpart = int.from_bytes(raw[:3], "big") - _TIMEF_INT_OFS
        frac = raw[3]
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x100
        packed = (intpart << 24) + frac * 10000
    elif fsp in (3, 4):
        intpart = int.from_bytes(raw[:3], "big") - _TIMEF_INT_OFS
        frac = int.from_bytes(raw[3:5], "big")
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x10000
        packed = (intpart << 24) + frac * 100
    else:
        packed = int.from_bytes(raw[:6], "big") - _TIMEF_OFS
    return _time_from_packed(packed)


def encode_time2(value: dt.timedelta, fsp: int) -> bytes:
    nr = _time_packed(value)
    if fsp == 0:
        return (_TIMEF_INT_OFS + (nr >> 24)).to_bytes(3, "big")
    if fsp in (1, 2):
        return (_TIMEF_INT_OFS + (nr >> 24)).to_bytes(3, "big") + bytes(
            (_c_div(_c_mod(nr, 1 << 24), 10000) & 0xFF,)
        )
    if fsp in (3, 4):
        return (_TIMEF_INT_OFS + (nr >> 24)).to_bytes(3, "big") + (
            _c_div(_c_mod(nr, 1 << 24), 100) & 0xFFFF
        ).to_bytes(2, "big")
    return (nr + _TIMEF_OFS).to_bytes(6, "big")


def decode_datetime2(raw: memoryview, fsp: int) -> DateTime:
    v = int.from_bytes(raw[:5], "big") - _DATETIMEF_INT_OFS
    ymd, hms = v >> 17, v & 0x1FFFF
    ym = ymd >> 5
    return DateTime(
        ym // 13, ym % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63, _read_frac(raw, 5, fsp)
    )


def encode_datetime2(value: DateTime | dt.datetime, fsp: int) -> bytes:
    v = _as_datetime(value)
    ymd = ((v.year * 13 + v.month) << 5) | v.day
    hms = (v.hour << 12) | (v.minute << 6) | v.second
    return (((ymd << 17) | hms) + _DATETIMEF_INT_OFS).to_bytes(5, "big") + _write_frac(
        v.microsecond, fsp
    )


def _as_datetime(value: DateTime | dt.datetime | dt.date) -> DateTime:
    if isinstance(value, DateTime):
        return value
    if isinstance(value, dt.datetime):
        return DateTime(
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
        )
    if isinstance(value, dt.date):
        return DateTime(value.year, value.month, value.day)
    raise TypeError(f"not a datetime value: {value!r}")


def _as_date(value: Date | dt.date) -> Date:
    if isinstance(value, Date):
        return value
    return Date(value.year, value.month, value.day)


# ---------------------------------------------------------------- one value


def decode_value(col: Column, buf: memoryview, pos: int, idx: int = 0) -> tuple[object, int]:
    """Decode the value of column `col` at `pos`; return (value, new_pos)."""
    t, meta = col.type, col.meta
    if t in _INT:
        n, signed, unsigned = _INT[t]
        end = _need(buf, pos, n, idx)
        return (unsigned if col.unsigned else signed).unpack_from(buf, pos)[0], end
    if t == T.INT24:
        end = _need(buf, pos, 3, idx)
        return int.from_bytes(buf[pos:end], "little", signed=not col.unsigned), end
    if t == T.FLOAT:
        end = _need(buf, pos, 4, idx)
        return _FLOAT.unpack_from(buf, pos)[0], end
    if t == T.DOUBLE:
        end = _need(buf, pos, 8, idx)
        return _DOUBLE.unpack_from(buf, pos)[0], end
    if t == T.NEWDECIMAL:
        precision, scale = meta >> 8, meta & 0xFF
        end = _need(buf, pos, decimal_size(precision, scale), idx)
        return decode_decimal(buf[pos:end], precision, scale), end
    if t in (T.VARCHAR, T.VAR_STRING):
        return _read_prefixed(buf, pos, 1 if meta < 256 else 2, idx)
    if t == T.STRING:
        rt = real_type(t, meta)
        length = string_length(meta)
        if rt in (T.ENUM, T.SET):
            end = _need(buf, pos, length, idx)
            return int.from_bytes(buf[pos:end], "little"), end
        return _read_prefixed(buf, pos, 1 if length < 256 else 2, idx)
    if t in (T.ENUM, T.SET):
        end = _need(buf, pos, meta & 0xFF, idx)
        return int.from_bytes(buf[pos:end], "little"), end
    if t in (T.BLOB, T.GEOMETRY, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB):
        return _read_prefixed(buf, pos, meta, idx)
    if t == T.JSON:
        # MySQL binary JSON is returned undecoded (MariaDB logs JSON as a BLOB).
        return _read_prefixed(buf, pos, meta, idx)
    if t in (T.DATE, T.NEWDATE):
        end = _need(buf, pos, 3, idx)
        v = int.from_bytes(buf[pos:end], "little")
        return Date(v >> 9, (v >> 5) & 15, v & 31), end
    if t == T.TIME2:
        end = _need(buf, pos, 3 + _frac_len(meta), idx)
        return decode_time2(buf[pos:end], meta), end
    if t == T.DATETIME2:
        end = _need(buf, pos, 5 + _frac_len(meta), idx)
        return decode_datetime2(buf[pos:end], meta), end
    if t == T.TIMESTAMP2:
        end = _need(buf, pos, 4 + _frac_len(meta), idx)
        return Timestamp(
            int.from_bytes(buf[pos : pos + 4], "big"), _read_frac(buf, pos + 4, meta)
        ), end
    if t == T.YEAR:
        end = _need(buf, pos, 1, idx)
        v = buf[pos]
        return (1900 + v if v else 0), end
    if t == T.BIT:
        nbytes = (meta >> 8) + (1 if meta & 0xFF else 0)
        end = _need(buf, pos, nbytes, idx)
        return int.from_bytes(buf[pos:end], "big"), end
    if t == T.TIMESTAMP:
        end = _need(buf, pos, 4, idx)
        return Timestamp(int.from_bytes(buf[pos:end], "little")), end
    if t == T.DATETIME:
        end = _need(buf, pos, 8, idx)
        v = int.from_bytes(buf[pos:end], "little")
        d, tm = divmod(v, 1_000_000)
        return DateTime(
            d // 10000, d // 100 % 100, d % 100, tm // 10000, tm // 100 % 100, tm % 100
        ), end
    if t == T.TIME:
        end = _need(buf, pos, 3, idx)
        v = int.from_bytes(buf[pos:end], "little", signed=True)
        sign = -1 if v < 0 else 1
        v = abs(v)
        return sign * dt.timedelta(hours=v // 10000, minutes=v // 100 % 100, seconds=v % 100), end
    raise NotSupportedError(f"column {idx + 1}: column type {t} is not supported by the row codec")


def _read_prefixed(buf: memoryview, pos: int, width: int, idx: int) -> tuple[bytes, int]:
    if not 1 <= width <= 4:
        raise CodecError(f"column {idx + 1}: invalid length-prefix width {width}")
    end = _need(buf, pos, width, idx)
    n = int.from_bytes(buf[pos:end], "little")
    stop = _need(buf, end, n, idx)
    return bytes(buf[end:stop]), stop


def _prefixed(data: bytes, width: int) -> bytes:
    if len(data) >= 1 << (8 * width):
        raise ValueError(f"value of {len(data)} bytes does not fit a {width}-byte length")
    return len(data).to_bytes(width, "little") + data


def encode_value(col: Column, value: object) -> bytes:
    t, meta = col.type, col.meta
    if t in _INT:
        n, signed, unsigned = _INT[t]
        return (unsigned if col.unsigned else signed).pack(value)
    if t == T.INT24:
        return int(value).to_bytes(3, "little", signed=not col.unsigned)  # type: ignore[call-overload]
    if t == T.FLOAT:
        return _FLOAT.pack(value)
    if t == T.DOUBLE:
        return _DOUBLE.pack(value)
    if t == T.NEWDECIMAL:
        return encode_decimal(value, meta >> 8, meta & 0xFF)  # type: ignore[arg-type]
    if t in (T.VARCHAR, T.VAR_STRING):
        return _prefixed(_as_bytes(value), 1 if meta < 256 else 2)
    if t == T.STRING:
        rt = real_type(t, meta)
        length = string_length(meta)
        if rt in (T.ENUM, T.SET):
            return int(value).to_bytes(length, "little")  # type: ignore[call-overload]
        return _prefixed(_as_bytes(value), 1 if length < 256 else 2)
    if t in (T.ENUM, T.SET):
        return int(value).to_bytes(meta & 0xFF, "little")  # type: ignore[call-overload]
    if t in (T.BLOB, T.GEOMETRY, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.JSON):
        return _prefixed(_as_bytes(value), meta)
    if t in (T.DATE, T.NEWDATE):
        d = _as_date(value)  # type: ignore[arg-type]
        return (d.day | d.month << 5 | d.year << 9).to_bytes(3, "little")
    if t == T.TIME2:
        return encode_time2(value, meta)  # type: ignore[arg-type]
    if t == T.DATETIME2:
        return encode_datetime2(value, meta)  # type: ignore[arg-type]
    if t == T.TIMESTAMP2:
        ts = value if isinstance(value, Timestamp) else Timestamp(int(value))  # type: ignore[call-overload]
        return ts.seconds.to_bytes(4, "big") + _write_frac(ts.microsecond, meta)
    if t == T.YEAR:
        y = int(value)  # type: ignore[call-overload]
        return bytes((y - 1900 if y else 0,))
    if t == T.BIT:
        nbytes = (meta >> 8) + (1 if meta & 0xFF else 0)
        return int(value).to_bytes(nbytes, "big")  # type: ignore[call-overload]
    if t == T.TIMESTAMP:
        ts = value if isinstance(value, Timestamp) else Timestamp(int(value))  # type: ignore[call-overload]
        return ts.seconds.to_bytes(4, "little")
    raise NotSupportedError(f"column type {t} is not supported by the row encoder")


def _as_bytes(value: object) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)  # type: ignore[call-overload]


# ---------------------------------------------------------------- whole images


def decode_image(
    columns: Sequence[Column], present: Sequence[bool], buf: memoryview, pos: int
) -> tuple[list[object], int]:
    """One row image: null bitmap over present columns, then their values."""
    n_present = sum(present)
    nb = (n_present + 7) // 8
    end = _need(buf, pos, nb, 0)
    nulls = bitmap_bits(buf[pos:end], n_present)
    pos = end
    row: list[object] = []
    k = 0
    for i, col in enumerate(columns):
        if not present[i]:
            row.append(MISSING)
            continue
        if nulls[k]:
            row.append(None)
        else:
            v, pos = decode_value(col, buf, pos, i)
            row.append(v)
        k += 1
    return row, pos


def value_widths(columns: Sequence[Column]) -> list[tuple[int, int]]:
    """How each column's value lies in a row image: (its fixed size, 0), or (0, the width of
    its length prefix): a reader that wants some columns of an image steps over the others by
    these, without decoding them."""
    out = []
    for idx, col in enumerate(columns):
        t, meta = col.type, col.meta
        if t in _INT:
            out.append((_INT[t][0], 0))
        elif t in _FIXED:
            out.append((_FIXED[t], 0))
        elif t == T.NEWDECIMAL:
            out.append((decimal_size(meta >> 8, meta & 0xFF), 0))
        elif t in (T.VARCHAR, T.VAR_STRING):
            out.append((0, 1 if meta < 256 else 2))
        elif t == T.STRING:
            length = string_length(meta)
            if real_type(t, meta) in (T.ENUM, T.SET):
                out.append((length, 0))
            else:
                out.append((0, 1 if length < 256 else 2))
        elif t in (T.ENUM, T.SET):
            out.append((meta & 0xFF, 0))
        elif t in (T.BLOB, T.GEOMETRY, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.JSON):
            out.append((0, meta))
        elif t == T.TIME2:
            out.append((3 + _frac_len(meta), 0))
        elif t == T.DATETIME2:
            out.append((5 + _frac_len(meta), 0))
        elif t == T.TIMESTAMP2:
            out.append((4 + _frac_len(meta), 0))
        elif t == T.BIT:
            out.append(((meta >> 8) + (1 if meta & 0xFF else 0), 0))
        else:
            raise NotSupportedError(
                f"column {idx + 1}: column type {t} is not supported by the row codec"
            )
    return out


def encode_image(
    columns: Sequence[Column], present: Sequence[bool], row: Sequence[object]
) -> bytes:
    if len(row) != len(columns):
        raise ValueError(f"row has {len(row)} values for {len(columns)} columns")
    nulls = []
    parts = []
    for i, col in enumerate(columns):
        if not present[i]:
            continue
        v = row[i]
        nulls.append(v is None)
        if v is not None:
            parts.append(encode_value(col, v))
    return bits_to_bitmap(nulls) + b"".join(parts)
