"""A NamedTuple instance built from its fields, for the hot paths (sort keys, commit records).

`SortKey(tso, kind, seq)` runs the NamedTuple's generated `__new__`, interpreted; the hot paths
used `tuple.__new__(SortKey, (tso, kind, seq))`, which is C but a generic call: an argument
tuple, the method descriptor, the type's `tp_new` copying from an iterable: ~900 instructions a
key (callgrind). Compiled modules that `from cdc cimport named_tuple` call the C functions of
`named_tuple.pxd` instead: the instance allocated by its type and its fields set in place (what
`tuple.__new__` ends up doing), ~60 instructions. As Python (this module, never compiled) they
are `tuple.__new__` as before: the same value either way.
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T", bound=tuple)

__all__ = ["new3", "new4"]


def new3(cls: type[T], a: Any, b: Any, c: Any) -> T:
    """`cls(a, b, c)` for a NamedTuple class of three fields, without its `__new__`."""
    return tuple.__new__(cls, (a, b, c))


def new4(cls: type[T], a: Any, b: Any, c: Any, d: Any) -> T:
    """`cls(a, b, c, d)` for a NamedTuple class of four fields, without its `__new__`."""
    return tuple.__new__(cls, (a, b, c, d))
