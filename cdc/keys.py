"""The shared vocabulary of stream positions: sort keys, global keys, checkpoints.

Every stage speaks it (a MergeSource emits sort keys and checkpoints, MergeJoint merges by global
key, the dumper resumes after one, topology stores both), so it lives in the foundation: a stage
imports it without importing another stage.

Keys are NamedTuples, not dataclasses: they are compared by the million (heap, merge, resume
filter) and a tuple compares in C. Hot paths build them with `tuple.__new__(SortKey, (...))`,
which skips the NamedTuple's interpreted `__new__`, and compiled ones with `cdc.named_tuple`
(no Python call at all).
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple


class Kind(IntEnum):
    """Second part of a key: a branch with TSO t sorts before local transactions after t."""

    BRANCH = 0
    LOCAL = 1


# Larger than every Kind: a key with it sorts after everything committed at its TSO.
_AFTER_KINDS = 9
# Larger than every binlog coordinate (`binlog_seq`: file number << 32 | position, with file
# numbers below 2**30): a key with it sorts after every local transaction at its TSO.
_AFTER_SEQS = 1 << 62


class SortKey(NamedTuple):
    """A DN's order: (tso, kind, seq). `seq` is the binlog coordinate on that DN (stable across
    restarts); a branch has the TSO of its commit record, a local transaction the largest TSO
    seen before it."""

    tso: int
    kind: Kind
    seq: int

    @classmethod
    def joining_after(cls, tso: int) -> SortKey:
        """The start watermark of a DN that joins the merge at a marker with TSO `tso`
        (StorageChange): it delivers nothing at or below anything at `tso`."""
        return cls(tso, Kind.LOCAL, _AFTER_SEQS)


class GlobalKey(NamedTuple):
    """The order of the global binlog: (tso, kind, dn, seq). All fragments of one CN transaction
    share (tso, BRANCH, 0, 0); local transactions are told apart by their DN and coordinate."""

    tso: int
    kind: int
    dn: int
    seq: int

    @classmethod
    def branch(cls, tso: int) -> GlobalKey:
        """The key of the CN transaction committed at `tso` (every branch of it)."""
        return cls(tso, Kind.BRANCH, 0, 0)

    @classmethod
    def after_tso(cls, tso: int) -> GlobalKey:
        """After every branch and local transaction at `tso`: a DN joining at a marker with
        that TSO resumes after it (its history up to the marker was never in the binlog)."""
        return cls(tso, _AFTER_KINDS, 0, 0)


ZERO_KEY = GlobalKey(0, 0, 0, 0)  # before everything: nothing written yet
_new_tuple = tuple.__new__


def global_key(dn: int, key: SortKey) -> GlobalKey:
    """Where a fragment of `dn` with sort key `key` sorts globally."""
    if key.kind == Kind.BRANCH:
        return _new_tuple(GlobalKey, (key.tso, Kind.BRANCH, 0, 0))
    return _new_tuple(GlobalKey, (key.tso, key.kind, dn, key.seq))


def lift(dn: int, key: SortKey) -> GlobalKey:
    """A source's watermark in the global key space: nothing from `dn` will sort at or below it."""
    return _new_tuple(GlobalKey, (key.tso, key.kind, dn, key.seq))


def stream_name(dn: int) -> str:
    """The checkpoint stream of a DN's MergeSource (the GMS key: never change it)."""
    return f"dn{dn}"


class Checkpoint(NamedTuple):
    """Where a restarted MergeSource re-reads its DN binlog from, and the largest TSO seen
    before that position (what its sorter must know there to rebuild the same keys).

    One type from the source that takes it to the GMS row that keeps it (topology stores
    `max_tso_seen` in its `tso` column). A NamedTuple, not a frozen dataclass: one is taken per
    release, and a frozen dataclass's __init__ cost more than finding the checkpoint."""

    stream: str
    file: str
    position: int
    max_tso_seen: int
