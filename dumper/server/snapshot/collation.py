"""Pure: a string value's order under its column's collation, as MariaDB compares and sorts it
(ORDER BY, MIN/MAX, and the WHERE over a before-image), for the collations the workloads use.

* `binary` (BLOB, VARBINARY, BINARY): the bytes, nothing ignored.
* A `_bin` collation of latin1, ascii, utf8mb3 or utf8mb4: the code points (UTF-8 bytes order
  the same), PAD SPACE: trailing spaces are ignored.
* Any other (`utf8mb4_general_ci`, MariaDB 10.11's default, and the other `_ci` ones): each
  character's weight is its upper-case base letter, accents dropped (é = E, ß = S, ı = İ = I),
  a character past the BMP weighs U+FFFD, as utf8mb4_general_ci's table gives them; PAD SPACE.
  Ligatures and letters with no decomposition (Æ, Ø) weigh themselves, as there. A UCA
  collation (`_unicode_ci`) orders some letters otherwise: read with this one's weights.

PAD SPACE compares a shorter string as if padded with spaces: the key ends with a space's
weight, so `a\\t` sorts before `a`, as MariaDB sorts it (a space followed by a character below
it inside a string is the one case this ending does not model)."""

from __future__ import annotations

import functools
import unicodedata

BINARY = 63
# Collation ids of the `_bin` collations of the usual charsets (latin1, utf8mb3, utf8mb4, ascii).
_BIN = frozenset({47, 83, 46, 65, 84})
_LATIN1 = frozenset({5, 8, 15, 31, 47, 48, 49, 94})
_SPACE = 0x20


def string_key(collation: int, text: bytes | str) -> bytes | tuple[int, ...]:
    """A value of a string column (its bytes, or a literal's text) whose order (and equality)
    is the collation's."""
    if collation == BINARY:
        return text.encode() if isinstance(text, str) else text
    if isinstance(text, bytes):
        text = text.decode("latin-1" if collation in _LATIN1 else "utf-8", "replace")
    decoded = text.rstrip(" ")
    if collation in _BIN:
        return (*map(ord, decoded), _SPACE)
    return (*map(_weight, decoded), _SPACE)


@functools.lru_cache(maxsize=4096)
def _weight(char: str) -> int:
    code = ord(char)
    if code > 0xFFFF:
        return 0xFFFD
    base = unicodedata.normalize("NFD", char)[0]
    return ord(base.upper()[0])
