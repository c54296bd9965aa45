"""k-way merge of the per-DN streams into one global order, coalescing a transaction's fragments.

Pure logic. Each source (one per DN) delivers fragments in its own key order and watermarks
("nothing ≤ this key will come from me any more"). The global key of a fragment is
`(tso, kind, dn, seq)`, except that all fragments of one CN transaction share the key
`(tso, BRANCH, 0, 0)` so they come out together. An item is emitted once every source's
watermark, lifted to the global key space as `(tso, kind, source, seq)`, has reached it: from
then on no source can produce anything that sorts before it.

Each source's fragments wait in their own FIFO queue (they arrive in key order): the next
transaction is the smallest head, and every head with that key is one of its fragments. A
handful of comparisons per transaction, where a heap over every waiting fragment cost two
tuple comparisons per level of a heap thousands deep during a catch-up. A waiting fragment
carries its global key's four fields as C integers (`_Entry`), so those comparisons are C
compares rather than tuple ones, and the key's tuple is made once per transaction it emits.

Compiled (cdc/compiled.py), with C types in merger.pxd: the fields of the fragments and
watermarks it reads, once or more per fragment, are C struct reads of merge_source's cdef
classes (fragment.pxd), where interpreted code pays a descriptor call for each.
"""

from __future__ import annotations

from cdc import named_tuple  # NamedTuples built in C (compiled: named_tuple.pxd)
from cdc.keys import GlobalKey, Kind, SortKey, lift
from merge_source import Fragment, FragmentKind, Statement, Watermark

_NO_TRACE = (1 << 62, 0)  # a statement without a TraceId sorts after those with one
_BRANCH = Kind.BRANCH
_INSTRUCTION = FragmentKind.INSTRUCTION  # a module constant: the Enum class lookup costs more


class MergeError(RuntimeError):
    """The streams contradict the commit protocol (e.g. a participant's fragment is missing)."""


class Transaction:
    """One logical transaction of the global binlog. Typed fields in merger.pxd (compiled: a
    cdef class, which the leader's compiled encoder reads in C)."""

    __slots__ = ("key", "txn_id", "kind", "fragments", "statements")

    def __init__(
        self,
        key: GlobalKey,
        txn_id: int,
        kind: FragmentKind,
        fragments: list[Fragment],
        statements: list[Statement] | None = None,
    ):
        self.key = key
        self.txn_id = txn_id
        self.kind = kind
        self.fragments = fragments
        self.statements: list[Statement] = [] if statements is None else statements

    def _fields(self) -> tuple:
        return (self.key, self.txn_id, self.kind, self.fragments, self.statements)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Transaction:
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        return (
            f"Transaction(key={self.key!r}, txn_id={self.txn_id!r}, kind={self.kind!r},"
            f" fragments={self.fragments!r}, statements={self.statements!r})"
        )

    @property
    def tso(self) -> int:
        tso, _kind, _dn, _seq = self.key  # unpacked, not indexed: see Merger.push_fragment
        return tso

    @property
    def size(self) -> int:
        """Bytes of its row events as the DNs wrote them (spilled ones are not read back)."""
        return sum(f.size for f in self.fragments)


class _Entry:
    """A fragment waiting in its source's queue, with its global key's fields (tso, kind, dn,
    seq: typed in merger.pxd)."""

    __slots__ = ("tso", "kind", "dn", "seq", "item")

    def __init__(self, tso, kind, dn, seq, item):
        self.tso = tso
        self.kind = kind
        self.dn = dn
        self.seq = seq
        self.item = item

    def global_key(self) -> GlobalKey:
        """The key as a `GlobalKey` (`global_key()`, inlined: C builds the tuple)."""
        if self.kind == 0:  # a branch (Kind.BRANCH), its key shared by every fragment
            return named_tuple.new4(GlobalKey, self.item.key.tso, _BRANCH, 0, 0)
        tso, kind, seq = self.item.key  # (unpacked: see push_fragment)
        return named_tuple.new4(GlobalKey, tso, kind, self.item.dn, seq)


def _less(a: _Entry, b: _Entry) -> bool:  # C types: merger.pxd
    """Whether `a`'s global key sorts before `b`'s (the tuples' order, field by field)."""
    if a.tso != b.tso:
        return a.tso < b.tso
    if a.kind != b.kind:
        return a.kind < b.kind
    if a.dn != b.dn:
        return a.dn < b.dn
    return a.seq < b.seq


def _same(a: _Entry, b: _Entry) -> bool:  # C types: merger.pxd
    return a.tso == b.tso and a.kind == b.kind and a.dn == b.dn and a.seq == b.seq


class _Queue:
    """One source's waiting fragments in key order: a list read from `head` on (a pop moves
    `head`; the list is cut when it empties or its popped part grows large)."""

    __slots__ = ("entries", "head")

    def __init__(self) -> None:
        self.entries: list[_Entry] = []
        self.head = 0

    def pop(self) -> None:
        self.head += 1
        if self.head == len(self.entries):
            self.entries = []
            self.head = 0
        elif self.head >= 4096 and 2 * self.head >= len(self.entries):
            del self.entries[: self.head]
            self.head = 0


class Merger:
    def __init__(self, sources: dict[int, SortKey | None]):
        """`sources`: DN id -> its watermark at start (None: nothing released yet)."""
        self._wm: dict[int, GlobalKey | None] = {
            dn: None if key is None else lift(dn, key) for dn, key in sources.items()
        }
        # Per source: its fragments not emitted yet, with their global keys, in key order. A
        # removed source keeps its queue until that is emitted.
        self._queues: dict[int, _Queue] = {}
        self.last_emitted: GlobalKey | None = None
        self._last: _Entry | None = None  # the key of `last_emitted`, for C compares

    @property
    def sources(self) -> list[int]:
        return sorted(self._wm)

    def watermark(self, dn: int) -> GlobalKey | None:
        return self._wm[dn]

    def low_watermark(self) -> GlobalKey | None:
        """The key up to which the merge is complete (the slowest source)."""
        low = None
        for mark in self._wm.values():
            if mark is None:
                return None
            if low is None or mark < low:
                low = mark
        return low

    def add_source(self, dn: int, start: SortKey) -> None:
        """A new DN joins: it will deliver nothing at or below `start`."""
        if dn in self._wm:
            raise MergeError(f"source dn{dn} is already merged")
        self._wm[dn] = lift(dn, start)

    def remove_source(self, dn: int) -> None:
        self._wm.pop(dn, None)

    def push(self, item: Fragment | Watermark) -> None:
        if type(item) is Watermark:
            self.push_watermark(item)  # type: ignore[arg-type]
        else:
            self.push_fragment(item)  # type: ignore[arg-type]

    def take(self, batch: list, marks: dict, cps: dict) -> None:
        """A batch from the sources: its fragments pushed, and of its watermarks the last one
        per DN put in `marks`, and in `cps` the last one per DN with a checkpoint, for the
        caller to push (and keep) once per drain instead of once per watermark."""
        for item in batch:
            if type(item) is Watermark:
                mark: Watermark = item
                marks[mark.dn] = mark
                if mark.checkpoint is not None:
                    cps[mark.dn] = mark
            else:
                self.push_fragment(item)

    def push_watermark(self, item: Watermark) -> None:
        dn = item.dn
        if dn not in self._wm:
            raise MergeError(f"watermark from unknown source dn{dn}")
        tso, kind, seq = item.key  # (unpacked: see push_fragment)
        mark = named_tuple.new4(GlobalKey, tso, kind, dn, seq)  # lift(), inlined
        old = self._wm[dn]
        if old is not None and mark < old:
            raise MergeError(f"dn{dn} watermark went back from {old} to {mark}")
        self._wm[dn] = mark

    def push_fragment(self, item: Fragment) -> None:
        dn = item.dn
        if dn not in self._wm:
            raise MergeError(f"fragment from unknown source dn{dn}")
        # Unpacked, not indexed: a NamedTuple's item lookup is tuple's generic slot (a method
        # call per index, ~10x a C read), its unpacking tuple's C iterator.
        tso, kind, seq = item.key
        # global_key()'s fields: every fragment of a CN transaction shares (tso, BRANCH, 0, 0)
        entry = _Entry.__new__(_Entry)  # the fields set in C, no argument parsing
        entry.tso = tso
        entry.item = item
        if kind == _BRANCH:
            entry.kind = entry.dn = entry.seq = 0
        else:
            entry.kind = kind
            entry.dn = dn
            entry.seq = seq
        last = self._last
        if last is not None and not _less(last, entry):
            key = entry.global_key()
            raise MergeError(f"dn{dn} delivered {key} after {self.last_emitted} was emitted")
        queue = self._queues.get(dn)
        if queue is None:
            queue = self._queues[dn] = _Queue()
        else:
            entries = queue.entries
            if len(entries) > queue.head and _less(entry, entries[len(entries) - 1]):
                key = entry.global_key()
                before = entries[len(entries) - 1].global_key()
                raise MergeError(f"dn{dn} delivered {key} after {before}, out of its order")
        queue.entries.append(entry)

    def pop_ready(self) -> list[Transaction]:
        """Transactions every source has passed, in order. Stops right after a marker (an
        INSTRUCTION transaction): it may change the set of sources before anything after it
        is decided."""
        low = self.low_watermark()
        out: list[Transaction] = []
        if low is None:
            return out
        bound = _Entry(low[0], low[1], low[2], low[3], None)
        queues = list(self._queues.values())
        while True:
            best = None
            for queue in queues:
                if queue.head < len(queue.entries):
                    entry = queue.entries[queue.head]
                    if best is None or _less(entry, best):
                        best = entry
            if best is None or _less(bound, best):
                return out
            # Its fragments: the head of each source with that key (more than one from one
            # source is a protocol error that coalesce reports).
            fragments = []
            for queue in queues:
                while queue.head < len(queue.entries):
                    entry = queue.entries[queue.head]
                    if not _same(entry, best):
                        break
                    fragments.append(entry.item)
                    queue.pop()
            key = best.global_key()
            txn = coalesce(key, fragments)
            out.append(txn)
            self.last_emitted = key
            self._last = best
            if txn.kind is _INSTRUCTION:
                return out


def coalesce(key: GlobalKey, fragments: list[Fragment]) -> Transaction:
    """One transaction from its fragments: statements in TraceId order, participants checked."""
    first = fragments[0]
    if len(fragments) == 1:  # the common case, checked without building lists
        if key.kind == _BRANCH:  # (a NamedTuple field: see push_fragment)
            expected = first.participants
            if expected and (len(expected) != 1 or expected[0] != first.dn):
                raise MergeError(
                    f"txn {first.txn_id} at TSO {key[0]}: fragments from DNs {[first.dn]} but the "
                    f"commit record names participants {sorted(expected)}; a fragment is missing"
                )
        return _transaction(key, first.txn_id, first.kind, fragments, list(first.statements))
    if key.kind == _BRANCH:
        dns = []
        expected: tuple = ()
        for f in fragments:
            dns.append(f.dn)
            if not expected:
                expected = f.participants
        dns.sort()
        for i in range(1, len(dns)):  # a duplicate is a neighbour once sorted (no set built)
            if dns[i] != dns[i - 1]:
                continue
            raise MergeError(
                f"txn {first.txn_id} at TSO {key[0]}: two fragments from one DN ({dns})"
            )
        if expected and sorted(expected) != dns:
            raise MergeError(
                f"txn {first.txn_id} at TSO {key[0]}: fragments from DNs {dns} but the commit record "
                f"names participants {sorted(expected)}; a fragment is missing"
            )
        txn_id = first.txn_id
        for f in fragments:
            if f.txn_id != txn_id:
                raise MergeError(
                    f"two transactions share TSO {key[0]}: {sorted({g.txn_id for g in fragments})}"
                )
    # (TraceId, DN, index) is unique per statement (one fragment per DN), so the tuples sort
    # without ever comparing the statements and without a key function call per item.
    numbered = []
    for f in fragments:
        i = 0
        for s in f.statements:
            numbered.append((s.trace_id or _NO_TRACE, f.dn, i, s))
            i += 1
    numbered.sort()
    return _transaction(key, first.txn_id, first.kind, fragments, [t[3] for t in numbered])


def _transaction(key, txn_id, kind, fragments: list, statements: list) -> Transaction:  # C types
    """`Transaction(...)` with every field given, set without the constructor's argument
    parsing (compiled: C struct writes; once per transaction)."""
    txn = Transaction.__new__(Transaction)
    txn.key = key
    txn.txn_id = txn_id
    txn.kind = kind
    txn.fragments = fragments
    txn.statements = statements
    return txn
