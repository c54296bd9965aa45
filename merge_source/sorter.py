"""The release rule: one DN's binlog order into commit-TSO order (docs/protocol.md, "Ordering").

Pure logic, no I/O. The caller feeds what it sees in the DN binlog, in binlog order, and gets back
the branches (and local transactions) that are safe to emit, in strictly increasing sort key.

Why it is safe: a branch X with commit TSO t, whose commit record sits at binlog position p, may be
released once its XA COMMIT was seen and every branch Y prepared before p is settled (rolled back,
known to have a TSO > t, or already released). A branch prepared after p fetched its TSO after p
was written, hence after t was fetched, so its TSO is > t. Releases therefore never go back.

Local (non-CN) transactions have no TSO: they sort right after the largest TSO seen in a commit
record before them, `(tso, LOCAL, seq)`, which is below every TSO fetched after them.
"""

from __future__ import annotations

from collections.abc import Hashable
from heapq import heappop, heappush  # names, not `heapq.x`: a module attribute per call
from typing import Any, TypeVar

from cdc import named_tuple  # NamedTuples built in C (compiled: named_tuple.pxd)
from cdc.keys import Kind, SortKey

P = TypeVar("P")


# A branch's key in the sorter: the CN's transaction id (an int; never a str made of it, which
# cost a conversion per group). Any hashable works; compiled, a `str` annotation would refuse it.
Xid = Hashable
BRANCH, LOCAL = Kind.BRANCH, Kind.LOCAL


class Release:  # typed fields in sorter.pxd (compiled: a cdef class)
    __slots__ = ("key", "xid", "payload")

    def __init__(self, key: SortKey, xid: Xid | None, payload: P):
        self.key = key
        self.xid = xid  # None for a local transaction
        self.payload = payload

    def __repr__(self) -> str:
        return f"Release(key={self.key!r}, xid={self.xid!r}, payload={self.payload!r})"


def _release(key, xid, payload) -> Release:  # C types: sorter.pxd
    """`Release(key, xid, payload)` set field by field (compiled: no constructor call)."""
    r = Release.__new__(Release)
    r.key = key
    r.xid = xid
    r.payload = payload
    return r


def binlog_seq(file_number: int, pos: int) -> int:
    """A DN binlog coordinate as one integer that sorts like (file, position)."""
    return file_number << 32 | pos


class SorterError(RuntimeError):
    """The binlog does not follow the commit protocol (e.g. two prepares of one xid)."""


class _Branch:  # typed fields in sorter.pxd (compiled: a cdef class)
    __slots__ = (
        "xid",
        "prepare_seq",
        "payload",
        "max_tso_before",
        "tso",
        "record_seq",
        "committed",
        "rolled_back",
    )

    def __init__(self, xid: Xid, prepare_seq: int, payload: P, max_tso_before: int):
        self.xid = xid
        self.prepare_seq = prepare_seq
        self.payload = payload
        self.max_tso_before = max_tso_before
        self.tso: int | None = None
        self.record_seq = -1
        self.committed = False
        self.rolled_back = False


def _new_branch(xid, prepare_seq, payload, max_tso_before) -> _Branch:  # C types: sorter.pxd
    """`_Branch(...)` set field by field (compiled: no constructor call, one per prepare)."""
    b = _Branch.__new__(_Branch)
    b.xid = xid
    b.prepare_seq = prepare_seq
    b.payload = payload
    b.max_tso_before = max_tso_before
    b.tso = None
    b.record_seq = -1
    b.committed = False
    b.rolled_back = False
    return b


class Sorter:
    """Per-DN sorter. Every method takes one binlog observation, at binlog coordinate `seq`
    (strictly increasing), and returns the releases it made possible. (`seq` and `tso` are
    ints; not annotated because sorter.pxd declares these methods' C signatures.)

    A plain class (compiled: a cdef class with typed fields, sorter.pxd: its state is read in
    C, not looked up per use)."""

    __slots__ = (
        "_branches",
        "_unknown",
        "_unknown_seqs",
        "_unknown_xids",
        "_unknown_head",
        "_heap",
        "_locals",
        "max_tso_seen",
        "watermark",
        "orphans",
    )

    def __init__(self, max_tso_seen: int = 0):
        # Held branches by xid, in prepare (= seq) order: dicts keep insertion order.
        self._branches: dict[Xid, _Branch] = {}
        # Branches whose commit record has not been seen (xid -> prepare seq): the first one
        # prepared bounds which records are releasable (its TSO could still be anything).
        self._unknown: dict[Xid, int] = {}
        # Their prepare order, a queue of every prepare (seq and xid side by side) whose head
        # is moved past the ones since settled when the bound is asked (`_bound`): an
        # OrderedDict kept it in order at a cost per prepare, record and release several times
        # this; a plain dict's first entry is found past its deleted ones.
        self._unknown_seqs: list[int] = []
        self._unknown_xids: list[Xid] = []
        self._unknown_head = 0
        # Known sort keys not yet released: branches with a commit record, and local
        # transactions.
        self._heap: list[tuple[SortKey, Xid | None, Any]] = []
        # Local transactions held back, in seq order: seq -> largest TSO seen before them (for
        # checkpoints).
        self._locals: dict[int, int] = {}
        self.max_tso_seen = max_tso_seen
        self.watermark: SortKey | None = None
        # Observations about xids never prepared here (before our start position): counted,
        # ignored.
        self.orphans = 0

    @property
    def pending(self) -> int:
        """Branches and local transactions held back (not released, not rolled back)."""
        return len(self._branches) + len(self._locals)

    def oldest_pending(self) -> tuple[int, int] | None:
        """(seq, largest TSO seen before it) of the oldest held item, or None.

        A restart re-reads the binlog from that seq with `max_tso_seen` set to that TSO and
        reproduces exactly the same sort keys. Both dicts are in seq order (seqs only grow), so
        the oldest of each is its first: no walk over everything held, once per release.
        """
        best: tuple[int, int] | None = None
        b: _Branch
        if self._branches:
            b = next(iter(self._branches.values()))
            best = (b.prepare_seq, b.max_tso_before)
        if self._locals:
            seq = next(iter(self._locals))
            if best is None or seq < best[0]:
                best = (seq, self._locals[seq])
        return best

    def unresolved(self) -> list[Xid]:
        """Held branches whose XA COMMIT has not been seen (prepared, maybe with a record)."""
        return [xid for xid, b in self._branches.items() if not b.committed]

    def held(self, xid: Xid) -> P | None:
        """The payload of a branch still held (not released, not rolled back)."""
        branch: _Branch | None = self._branches.get(xid)
        return None if branch is None else branch.payload

    def prepare(self, xid: Xid, payload: P, seq) -> list[Release]:
        if xid in self._branches:
            raise SorterError(f"xid {xid!r} prepared twice without commit or rollback")
        self._branches[xid] = _new_branch(xid, seq, payload, self.max_tso_seen)
        self._unknown[xid] = seq
        self._unknown_seqs.append(seq)
        self._unknown_xids.append(xid)
        return []

    def commit_record(self, xid: Xid, tso, seq) -> list[Release]:
        if tso > self.max_tso_seen:
            self.max_tso_seen = tso
        branch: _Branch | None = self._branches.get(xid)
        if branch is None:
            self.orphans += 1
            return []
        if branch.tso is not None:
            if branch.tso != tso:
                raise SorterError(f"xid {xid!r} has two commit records: TSO {branch.tso} and {tso}")
            return []
        branch.tso, branch.record_seq = tso, seq
        del self._unknown[xid]
        heappush(self._heap, (named_tuple.new3(SortKey, tso, BRANCH, seq), xid, None))
        return self._drain()

    def commit(self, xid: Xid) -> list[Release]:
        branch: _Branch | None = self._branches.get(xid)
        if branch is None:
            self.orphans += 1
            return []
        branch.committed = True
        return self._drain()

    def rollback(self, xid: Xid) -> list[Release]:
        branch: _Branch | None = self._branches.pop(xid, None)
        if branch is None:
            self.orphans += 1
            return []
        branch.rolled_back = True  # its heap entry, if any, is skipped lazily
        self._unknown.pop(xid, None)
        return self._drain()

    def local(self, payload: P, seq) -> list[Release]:
        self._locals[seq] = self.max_tso_seen
        heappush(
            self._heap, (named_tuple.new3(SortKey, self.max_tso_seen, LOCAL, seq), None, payload)
        )
        return self._drain()

    def _bound(self) -> int:
        """The prepare seq of the first branch prepared whose commit record has not been seen;
        -1 if none. (The queue's settled head is dropped a block at a time.)"""
        unknown = self._unknown
        seqs, xids = self._unknown_seqs, self._unknown_xids
        if not unknown:
            if seqs:
                seqs.clear()
                xids.clear()
                self._unknown_head = 0
            return -1
        h = self._unknown_head
        while unknown.get(xids[h], -1) != seqs[h]:  # settled (or an older prepare of its xid)
            h += 1
        if h >= 1024 and 2 * h > len(seqs):
            del seqs[:h]
            del xids[:h]
            h = 0
        self._unknown_head = h
        return seqs[h]

    def _drain(self) -> list[Release]:
        out: list[Release] = []
        heap = self._heap
        branches = self._branches  # a local: one lookup per call
        branch: _Branch | None
        bound = self._bound() if heap else -1  # nothing below changes it
        while heap:
            key, xid, payload = heap[0]
            if xid is not None:
                branch = branches.get(xid)
                if branch is None or branch.rolled_back:
                    heappop(heap)
                    continue
                # The smallest known TSO is not committed yet: anything after it must wait.
                if not branch.committed:
                    break
                if bound >= 0 and bound < branch.record_seq:
                    break
                del branches[xid]
                payload = branch.payload
            else:
                if bound >= 0 and bound < key.seq:
                    break
                del self._locals[key.seq]
            heappop(heap)
            if self.watermark is not None and key <= self.watermark:
                raise SorterError(f"release {key} would go back behind {self.watermark}")
            self.watermark = key
            out.append(_release(key, xid, payload))
        return out
