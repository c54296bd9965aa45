"""Pure: a string value's order under its column's collation, exactly as MariaDB compares and
sorts it (ORDER BY, MIN/MAX, a non-integer primary key's order, the WHERE over a before-image),
or a refusal naming the collation: a string is never ordered by a guess.

Supported (`collation(name)`), each PAD SPACE and its `_nopad_` twin:
* `binary` (BLOB, VARBINARY, BINARY): the bytes, nothing ignored, no padding.
* utf8mb4 / utf8mb3 `_general_ci`, `_unicode_ci` (UCA 4.0.0), `_unicode_520_ci` (UCA 5.2.0):
  each character's weights as MariaDB's own tables give them, read from the server by
  bench/snapshot_weights.py into weights.txt.gz (its docstring says what it found: ignorable
  characters, expansions such as ß = ss, no contractions, what past the BMP weighs).
* utf8mb4 / utf8mb3 `_bin`: the code points. latin1 `_swedish_ci` and ascii `_general_ci`: each
  byte's weight from the server's table; their `_bin`: the bytes.
Any other collation (a language's tailoring, another charset) is refused with 1235 naming it.

Text arrives as the DN sends it on the readers' utf8mb4 connection: a latin1 or ascii value is
decoded from UTF-8 and weighed as the byte its charset stores it as (MariaDB's latin1 is cp1252).

PAD SPACE compares a shorter string as if padded with spaces without end, so `a` = `a  ` and
`a\\t` < `a` < `a!`, and also `a \\t` < `a`. The key models that exactly: the weights are cut into
segments (a run of n space weights, then a weight t) and each segment is one int that orders as
the padded comparison does: a segment with t below a space's weight orders low, more spaces
first higher; one with t above orders high, more spaces first lower; the end of the string (all
spaces) sits between the two. NO PAD keys are the plain weights (a prefix orders first)."""

from __future__ import annotations

import functools
import gzip
from dataclasses import dataclass, field
from pathlib import Path

from cdc.protocol.sql_error import SqlError

ER_NOT_SUPPORTED_YET = 1235
WEIGHTS = Path(__file__).with_name("weights.txt.gz")
# A PAD SPACE key's segment: class (bits 56+), space count (24-55), weight (0-23: a code point
# fits). Low: t below a space's weight; high: above; the end between them.
_LOW, _END, _HIGH = 0, 1 << 56, 2 << 56
_RUN = (1 << 32) - 1
_MEMO = 1 << 16  # characters whose weights a collation keeps at hand
_FAMILIES = {"general_ci", "unicode_ci", "unicode_520_ci"}
# MariaDB's latin1 is cp1252 but for the five bytes cp1252 leaves undefined (their code points).
_LATIN1 = {ch: b for b in range(256) for ch in [bytes([b]).decode("cp1252", "ignore") or chr(b)]}
_FROM_LATIN1 = {b: ch for ch, b in _LATIN1.items()}  # str.translate: byte's code point → char


@dataclass(frozen=True, slots=True)
class Collation:
    """How one collation orders a column's text; `supported` False: refused when used."""

    name: str
    supported: bool = True
    pad: bool = True
    # Code point or byte → weights (a tuple: none for an ignorable, several for an expansion);
    # None: the code point (or, with `bytes_of`, the byte) itself.
    weigh: object = None
    space: int = 0x20
    # For latin1 and ascii: a character → the byte its charset stores it as.
    bytes_of: dict[str, int] | None = None
    _memo: dict[str, tuple[int, ...]] = field(default_factory=dict, compare=False, repr=False)

    def check(self) -> None:
        if not self.supported:
            raise SqlError(
                "This version of the dumper doesn't yet support 'ordering or comparing "
                f"strings in collation {self.name}' (see docs/snapshot-reads.md, ORDER BY)",
                ER_NOT_SUPPORTED_YET,
                "42000",
            )

    def key(self, text: bytes | str) -> bytes | tuple[int, ...]:
        """A value's text (the DN's bytes, or a literal) as a key whose order and equality are
        the collation's."""
        self.check()
        if self.name == "binary":
            return text.encode() if isinstance(text, str) else text
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        weights: list[int] = []
        memo = self._memo
        for ch in text:
            w = memo.get(ch)
            if w is None:
                w = self._weights(ch)
                if len(memo) < _MEMO:
                    memo[ch] = w
            weights.extend(w)
        return _padded(weights, self.space) if self.pad else tuple(weights)

    def _weights(self, ch: str) -> tuple[int, ...]:
        code = ord(ch)
        if self.bytes_of is not None:
            code = self.bytes_of.get(ch, 0x3F)  # not in the charset: stored as '?'
        if self.weigh is None:
            return (code,)
        return self.weigh(code)  # type: ignore[operator]


def single_byte(declared: str) -> bool:
    """Whether a column of this collation stores latin1 or ascii bytes (`latin1_as_utf8`)."""
    return declared.startswith(("latin1_", "ascii_"))


def latin1_as_utf8(raw: bytes) -> bytes:
    """A latin1 (or ascii) value as the DN sends it on a utf8mb4 connection: a before-image
    holds the column's own bytes."""
    return raw.decode("latin-1").translate(_FROM_LATIN1).encode()


def _padded(weights: list[int], space: int) -> tuple[int, ...]:
    out = []
    n = 0
    for w in weights:
        if w == space:
            n += 1
        elif w < space:
            out.append(_LOW | n << 24 | w)
            n = 0
        else:
            out.append(_HIGH | (_RUN - n) << 24 | w)
            n = 0
    out.append(_END)
    return tuple(out)


# Collation ids as a result set's column definition names them: a column read without its
# declared collation (`ColumnDef.collation`) is ordered by its packet's.
_BY_ID = {
    8: "latin1_swedish_ci", 11: "ascii_general_ci", 33: "utf8mb3_general_ci",
    45: "utf8mb4_general_ci", 46: "utf8mb4_bin", 47: "latin1_bin", 63: "binary",
    65: "ascii_bin", 83: "utf8mb3_bin", 192: "utf8mb3_unicode_ci", 214: "utf8mb3_unicode_520_ci",
    224: "utf8mb4_unicode_ci", 246: "utf8mb4_unicode_520_ci",
}  # fmt: skip


def of_id(collation_id: int) -> Collation:
    return collation(_BY_ID.get(collation_id, f"collation #{collation_id}"))


@functools.cache
def collation(name: str) -> Collation:
    """The collation of this name (as SHOW FULL COLUMNS spells it); an unsupported one refuses
    when used (`check`)."""
    if name == "binary":
        return Collation(name, pad=False)
    pad = "_nopad_" not in name
    plain = name.replace("_nopad_", "_")  # utf8mb4_nopad_bin → utf8mb4_bin
    charset, _, rest = plain.partition("_")
    if charset == "utf8":
        charset = "utf8mb3"
    if charset in ("utf8mb4", "utf8mb3"):
        if rest == "bin":
            return Collation(name, pad=pad)
        if rest in _FAMILIES:
            table, space = _family(rest)
            return Collation(name, pad=pad, weigh=table, space=space)
    if charset in ("latin1", "ascii"):
        bytes_of = _LATIN1 if charset == "latin1" else {chr(b): b for b in range(128)}
        if rest == "bin":
            return Collation(name, pad=pad, bytes_of=bytes_of)
        if rest == ("swedish_ci" if charset == "latin1" else "general_ci"):
            table, space = _family(f"{charset}_{rest}_bytes")
            return Collation(name, pad=pad, weigh=table, space=space, bytes_of=bytes_of)
    return Collation(name, supported=False)


@functools.cache
def _family(family: str) -> tuple[object, int]:
    """(code point → weights, a space's weight) of one family of weights.txt.gz."""
    space, listed = _load()[family]
    if family.endswith("_bytes"):
        return (lambda b: listed[b]), space

    def weigh(code: int) -> tuple[int, ...]:
        w = listed.get(code)
        return rule(family, code) if w is None else w

    return weigh, space


@functools.cache
def _load() -> dict[str, tuple[int, dict[int, tuple[int, ...]]]]:
    sections: dict[str, tuple[int, dict[int, tuple[int, ...]]]] = {}
    listed: dict[int, tuple[int, ...]] = {}
    for line in gzip.decompress(WEIGHTS.read_bytes()).decode().splitlines():
        if line.startswith("#") or not line:
            continue
        if line.startswith("["):
            name, _, space = line[1:].partition("] space=")
            listed = {}
            sections[name] = (int(space, 16), listed)
            continue
        code, *weights = (int(h, 16) for h in line.split())
        listed[code] = tuple(weights)
    return sections


def rule(family: str, code: int) -> tuple[int, ...]:
    """The weights a family of weights.txt.gz gives a code point it does not list (the
    generator, bench/snapshot_weights.py, lists exactly those that differ): general_ci the code
    point (past the BMP 0xFFFD); UCA its implicit weights, `_unicode_ci` 0xFFFD past the BMP."""
    if family == "general_ci":
        return (code if code <= 0xFFFF else 0xFFFD,)
    if family == "unicode_ci" and code > 0xFFFF:
        return (0xFFFD,)
    if 0x4E00 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF:
        base = 0xFB40
    elif 0x3400 <= code <= 0x4DBF:
        base = 0xFB80
    else:
        base = 0xFBC0
    return (base + (code >> 15), (code & 0x7FFF) | 0x8000)
