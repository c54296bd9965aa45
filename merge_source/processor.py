"""One DN's stream, pure: raw events in binlog order → fragments in sort-key order + watermarks.

Wires the group assembler, the classifier and the sorter, and knows where a restart must begin
(`checkpoint`). No I/O: the async shell (`source.py`) feeds it from the dump client.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from cdc import named_tuple  # NamedTuples built in C (compiled: named_tuple.pxd)
from cdc.binlog import constants
from cdc.binlog.fde import FormatDescription
from cdc.cn_protocol.schema import CDC_START, META_CHANGE
from cdc.keys import Checkpoint, GlobalKey, stream_name
from cdc.protocol import DnEvent
from merge_source.classifier import Classified, Classifier, GroupKind, xa_key
from merge_source.fragment import (
    Fragment,
    FragmentKind,
    Statement,
    Watermark,
    global_key,
    new_fragment,
)
from merge_source.group import BinlogGroup, GroupAssembler
from merge_source.renamer import NameMap, PackedRenamer
from merge_source.scan import timestamp as event_timestamp
from merge_source.sorter import Release, Sorter
from merge_source.spill import DEFAULT_SPILL_BYTES, SpanWriter, SpillFile

log = logging.getLogger(__name__)


def _position(at: tuple[str, int]) -> tuple[int, int]:
    return file_number(at[0]), at[1]


def file_number(name: str) -> int:
    """`binlog.000042` → 42."""
    try:
        return int(name.rsplit(".", 1)[1])
    except (IndexError, ValueError):
        raise ValueError(f"not a numbered binlog file name: {name!r}") from None


# Enum members as module constants: compiled, `GroupKind.X` is a global and an attribute lookup
# each time; these are one global lookup (the order of the tests below follows their frequency).
XA_PREPARE, XA_COMMIT, XA_ROLLBACK = (
    GroupKind.XA_PREPARE,
    GroupKind.XA_COMMIT,
    GroupKind.XA_ROLLBACK,
)
COMMIT_RECORD, LOCAL, DDL = GroupKind.COMMIT_RECORD, GroupKind.LOCAL, GroupKind.DDL
FOREIGN_PREPARE = GroupKind.FOREIGN_PREPARE
F_LOCAL, F_INSTRUCTION, F_DDL = FragmentKind.LOCAL, FragmentKind.INSTRUCTION, FragmentKind.DDL
F_HEARTBEAT = FragmentKind.HEARTBEAT


class _Held:
    """What the sorter holds for a branch or local transaction until its release (a plain slots
    class: a dataclass's generated __init__ stays interpreted in a compiled module)."""

    __slots__ = ("classified", "timestamp", "participants")

    def __init__(self, classified: Classified, timestamp: int):
        self.classified = classified
        self.timestamp = timestamp
        self.participants: tuple[int, ...] = ()


def _held(classified, timestamp) -> _Held:  # C types: processor.pxd
    """`_Held(classified, timestamp)` set field by field (compiled: no constructor call)."""
    h = _Held.__new__(_Held)
    h.classified = classified
    h.timestamp = timestamp
    h.participants = ()
    return h


class SourceProcessor:
    """Compiled: a cdef class (processor.pxd), its state typed and its per-group methods C
    calls (their arguments typed there, so not annotated here)."""

    def __init__(
        self,
        dn_id: int,
        dn_name: str = "",
        resume_after: GlobalKey | None = None,
        max_tso_seen: int = 0,
        names: NameMap | None = None,
        wait_for_start: bool = False,
        spill_bytes: int = DEFAULT_SPILL_BYTES,
        spill_dir: str | None = None,
    ):
        """`spill_bytes`: a binlog group (so a held branch) larger than this is kept in a temp
        file in `spill_dir` (default: the system temp dir) instead of memory; 0 never spills."""
        self.dn_id = dn_id
        self.dn_name = dn_name or f"dn{dn_id}"
        self.spill_dir = spill_dir
        self.assembler = GroupAssembler(self.dn_name, spill_bytes, spill_dir)
        self.classifier = Classifier(spill_dir=spill_dir)
        self.sorter = Sorter(max_tso_seen=max_tso_seen)  # payloads: _Held
        # Global keys at or below this were written before a restart: drop them when they come
        # again.
        self.resume_after = resume_after
        self.fragments_out = 0  # fragments released so far (`cdc status`)
        # Physical -> logical names; None: pass names through (no topology known yet).
        self.names = names
        # `names`' answers for packed statements, by table id (made again when `names` changes)
        self._packed_renamer: PackedRenamer | None = None
        self._reported: set[tuple[bytes, bytes]] = set()  # unmapped tables already logged
        # On a first start, nothing before the CdcStart marker belongs to the global binlog.
        self.started = not wait_for_start
        self._foreign = {}  # xid -> _Held
        self._base = "binlog"
        self._last_end = None  # (file, pos) after the last group
        self.groups = 0
        self._file_name, self._file_no = "", 0
        self._cp_file_no, self._cp_file = -1, ""
        self._stream = stream_name(dn_id)  # of every checkpoint, made once
        self._fde_file = ""  # the file of the last FORMAT_DESCRIPTION
        # feed_packed's one watermark per batch: on while it runs; the last release's key and
        # its checkpoint's inputs (`_note_mark`)
        self._one_mark = False
        self._mark_key = self._mark_oldest = self._mark_open = self._mark_end = None
        self._mark_tso, self._mark_base = 0, ""
        # CN transactions held unresolved when the DN restarted, to check (see _dn_restarted)
        self.restart_suspects: set[int] | None = None

    # -- feeding ----------------------------------------------------------------------------------
    def feed(self, event: DnEvent) -> list[Fragment | Watermark]:
        return self.feed_batch((event,))

    def feed_batch(self, events: Iterable[DnEvent]) -> list[Fragment | Watermark]:
        """Feed events in binlog order; the fragments and watermarks they release, in order.
        One call per dump batch: most events only extend the open group, in a tight loop."""
        return self._feed_items(self.assembler.assemble(events))

    def feed_raw(self, file: str, events: list[bytes]) -> list[Fragment | Watermark]:
        """`feed_batch` for a dump client's raw batch: the events of one file, as bytes."""
        return self._feed_items(self.assembler.assemble_raw(file, events))

    def feed_packed(self, file: str, batch: list) -> list[Fragment | Watermark]:
        """`feed_raw` for a batch of `DumpClient.raw_batches(packed=True)` (a MergeSource
        process's read): runs of plain events as `(data, start, stop)`, their packets in the
        dump batch (a group whole in one becomes a range of it, its statements copied out once:
        no bytes object per event), and any other event as its bytes.

        One watermark for the whole batch, the one the last release made (the frame to the
        leader keeps only the last watermark and checkpoint of what it carries:
        `wire.collapse_watermarks`): a release notes its checkpoint's inputs (`_note_mark`),
        and only the last one's checkpoint is made, at the end."""
        out: list[Fragment | Watermark] = []
        assembler = self.assembler
        self._one_mark, self._mark_key = True, None
        try:
            for piece in batch:
                if type(piece) is tuple:
                    data, start, stop = piece
                    out += self._feed_items(assembler.assemble_packed(file, data, start, stop))
                else:
                    out += self._feed_items(assembler.assemble_raw(file, [piece]))
        finally:
            self._one_mark = False
        if self._mark_key is not None:
            checkpoint = self._checkpoint_of(
                self._mark_oldest, self._mark_open, self._mark_end, self._mark_tso, self._mark_base
            )
            out.append(Watermark(self.dn_id, self._mark_key, checkpoint))
            self._mark_key = self._mark_oldest = self._mark_open = self._mark_end = None
        return out

    def _feed_items(self, items: Iterable[BinlogGroup | DnEvent]) -> list[Fragment | Watermark]:
        out: list[Fragment | Watermark] = []
        for item in items:
            if type(item) is BinlogGroup:
                out += self._group(item)
            else:
                self._fde(item)  # type: ignore[arg-type]
        return out

    def _fde(self, event: DnEvent) -> None:
        fde = FormatDescription.parse(memoryview(event.data)[19:])
        if fde.create_timestamp and self._fde_file and event.file != self._fde_file:
            self._dn_restarted(event.file)
        self._fde_file = event.file
        self.classifier.fde = fde
        self._base = event.file.rsplit(".", 1)[0]
        self._cp_file_no = -1

    # -- a DN restart -----------------------------------------------------------------------------
    # A DN killed between writing a branch's XA PREPARE to its binlog and preparing it in the
    # engine comes back without that branch: XA RECOVER does not list it and no XA COMMIT or
    # XA ROLLBACK will ever follow, so the sorter would hold every later release forever. A new
    # binlog file whose FORMAT_DESCRIPTION has a create timestamp was opened by a server start:
    # the branches held unresolved then are checked against the DN's XA RECOVER (source.py asks
    # the DN, then `settle_lost_branches` once the binlog is read up to where the DN was).
    def _dn_restarted(self, file: str) -> None:
        held = self.sorter.unresolved()
        if held:
            log.info(
                "%s: the DN restarted (%s); %d prepared branch(es) to check against XA RECOVER",
                self.dn_name,
                file,
                len(held),
            )
            # a new set, never updated in place: the MergeSource tells a new restart by it
            self.restart_suspects = set(held) | (self.restart_suspects or set())

    def settle_lost_branches(
        self, recovered: set[int], upto: tuple[str, int], at: tuple[str, int]
    ) -> list[Fragment | Watermark]:
        """Once the binlog is read up to `upto` (where the DN's binlog ended right after its
        XA RECOVER listed the CN transactions `recovered`), a suspect branch neither resolved in
        the binlog nor listed is lost: it is dropped like a rolled-back one. `at`: how far the
        binlog is read. Returns what that releases."""
        if self.restart_suspects is None or _position(at) < _position(upto):
            return []
        suspects, self.restart_suspects = self.restart_suspects, None
        releases: list[Release[_Held]] = []
        for xid in suspects:
            if xid in recovered or xid not in self.sorter.unresolved():
                continue
            log.warning(
                "%s: the XA branch of CN transaction %s, prepared before the DN restarted, is not"
                " in the DN's XA RECOVER and its XA COMMIT never came: dropped as rolled back",
                self.dn_name,
                xid,
            )
            releases += self.sorter.rollback(xid)
        return self._outputs(releases)

    def _group(self, group: BinlogGroup) -> list[Fragment | Watermark]:
        self._last_end = (group.file, group.end)
        self.groups += 1
        return self._outputs(self._apply(group))

    def _apply(self, group: BinlogGroup) -> list[Release]:
        # Compiled, annotated locals of the cdef classes (processor.pxd) read fields in C.
        classifier: Classifier = self.classifier
        c: Classified = classifier.classify(group)
        held: _Held | None
        seq = self._seq(group.file, group.start)
        timestamp = event_timestamp(group.gtid)  # compiled: read in C (scan.pxd)
        sorter: Sorter = self.sorter  # compiled: its methods are C calls (sorter.pxd)
        kind = c.kind
        if kind is XA_PREPARE:
            return sorter.prepare(c.txn_id, _held(c, timestamp), seq)
        if kind is XA_COMMIT:
            # (a CN branch's xid key is made only while another program's branches are held)
            foreign = (
                self._foreign.pop(c.xid or xa_key(group.gtid), None) if self._foreign else None
            )
            if foreign is not None:  # another program's XA: a local transaction now
                return sorter.local(foreign, seq)
            return sorter.commit(c.txn_id)
        if kind is COMMIT_RECORD:
            out: list[Release] = []
            for record in c.records:
                txn_id, tso, participants, aborted = record  # no attribute lookups
                if aborted:  # a recovery tombstone: the branch will be rolled back
                    continue
                held = sorter.held(txn_id)
                if held is not None:
                    held.participants = participants
                out += sorter.commit_record(txn_id, tso, seq)
            return out
        if kind is LOCAL:
            if not c.statements:
                return []
            return sorter.local(_held(c, timestamp), seq)
        if kind is XA_ROLLBACK:
            if self._foreign and self._foreign.pop(c.xid or xa_key(group.gtid), None) is not None:
                return []
            return sorter.rollback(c.txn_id)
        if kind is FOREIGN_PREPARE:
            self._foreign[c.xid] = _held(c, timestamp)
            return []
        if kind is DDL:
            log.info(
                "%s: physical DDL at %s:%d: %s",
                self.dn_name,
                group.file,
                group.start,
                c.query[:200].decode(errors="replace"),
            )
        return []

    def _outputs(self, releases) -> list[Fragment | Watermark]:  # list[Release]
        if not releases:
            return []
        out: list[Fragment | Watermark] = []
        resume = self.resume_after
        dn = self.dn_id
        r: Release
        held: _Held
        c: Classified
        for r in releases:
            held = r.payload
            c = held.classified
            kind = c.fragment_kind if r.xid is not None else F_LOCAL
            if kind is F_INSTRUCTION:
                self._apply_markers(c.markers)
            elif kind is F_DDL:
                self._apply_ddl(c.markers)
            if not self.started:
                continue
            if resume is not None:
                if global_key(dn, r.key) <= resume:
                    continue
                # Releases come in sort order: every later one sorts after this one too (no
                # global key per release for the rest of the process's life).
                resume = self.resume_after = None
            if kind is F_HEARTBEAT:
                continue  # a heartbeat only moves the watermark
            statements = self._rename(c.statements)
            if kind is F_LOCAL and not statements:
                continue
            fragment = new_fragment(
                r.key,
                dn,
                c.txn_id,
                held.participants,
                kind,
                statements,
                c.markers or [],  # never the shared empty default
                held.timestamp,
            )
            out.append(fragment)
            self.fragments_out += 1
        if self._one_mark:
            self._note_mark(releases[-1].key)
        else:
            out.append(Watermark(dn, releases[-1].key, self.checkpoint()))
        return out

    def _apply_markers(self, markers: list[dict]) -> None:
        """CdcStart and MetaChange change the names from their own TSO on."""
        for m in markers:
            content = json.loads(m.get("content") or "{}")
            if m.get("type") == CDC_START:
                self.names = NameMap.from_topology(self.dn_id, content)
                self.started = True
            elif m.get("type") == META_CHANGE:
                self.names = NameMap.from_topology(self.dn_id, content["after"])

    def _apply_ddl(self, markers: list[dict]) -> None:
        """A logical DDL changes one table's physical names from its own TSO on."""
        if self.names is None:
            return
        for m in markers:
            schema = json.loads(m.get("schema_json") or "null")
            entry = schema.get("topology") if isinstance(schema, dict) else None
            self.names = self.names.with_table(m["db"], m["tbl"], entry)

    def _rename(self, statements) -> list[Statement]:  # list[Statement]
        names = self.names
        if names is None:
            return statements
        out = []
        dropped: set[bytes] = set()
        spill: SpillFile | None = None  # renamed spilled statements go to a new spill file
        packed_renamer: PackedRenamer = self._packed_renamer
        for st in statements:
            if st.packed is not None:  # a MergeSource process's statement: one buffer
                if packed_renamer is None or packed_renamer.names is not names:
                    packed_renamer = self._packed_renamer = PackedRenamer(names)
                packed = packed_renamer.rename(st.packed, dropped)
                if packed:
                    st.packed = packed
                    out.append(st)
                continue
            if st.span is not None:
                if spill is None:
                    spill = SpillFile(self.spill_dir)
                writer = SpanWriter(spill)
                for e in st.iter_events():
                    if e[4] == constants.EventType.TABLE_MAP:
                        renamed = names.rename(e)
                        if renamed is None:
                            dropped.add(e[19:25])
                            continue
                        if dropped:
                            dropped.discard(e[19:25])
                        writer.append(renamed)
                    elif not dropped or e[19:25] not in dropped:  # the id sliced only if needed
                        writer.append(e)
                if writer.count:
                    out.append(Statement(st.trace_id, span=writer.span()))
                continue
            # The statement itself, renamed in place (it is released once, and nothing else
            # holds it): its list keeps its events, a TABLE_MAP replaced by its renamed one,
            # until one is dropped; from there on `kept` holds what stays (a new list).
            events = st.in_memory
            kept = None
            for k in range(len(events)):
                e = events[k]
                if e[4] == constants.EventType.TABLE_MAP:
                    renamed = names.rename(e)
                    if renamed is None:
                        dropped.add(e[19:25])
                        if kept is None:
                            kept = events[:k]
                        continue
                    if dropped:
                        dropped.discard(e[19:25])
                    if kept is None:
                        events[k] = renamed
                        continue
                    e = renamed
                elif dropped and e[19:25] in dropped:  # the id sliced only if needed
                    if kept is None:
                        kept = events[:k]
                    continue
                if kept is not None:
                    kept.append(e)
            if kept is not None:
                st.in_memory = events = kept
            if events:
                out.append(st)
        if names.unreported:
            self._report_unmapped(names)
        return out

    def _report_unmapped(self, names: NameMap) -> None:
        for db, table in names.unreported:
            if (db, table) not in self._reported:
                self._reported.add((db, table))
                log.info(
                    "dn%d: rows of %s.%s are left out of the global binlog: no logical table"
                    " maps to it here (a partition copy in progress, a broadcast replica, or a"
                    " table made outside the CN)",
                    self.dn_id,
                    db.decode(errors="replace"),
                    table.decode(errors="replace"),
                )
        names.unreported.clear()

    def _seq(self, file, pos) -> int:  # str, int
        if file != self._file_name:
            self._file_name, self._file_no = file, file_number(file)
        # binlog_seq, inline (a call per group otherwise); compiled, in C and boxed once
        return self._file_no << 32 | pos

    # -- restart ----------------------------------------------------------------------------------
    def checkpoint(self) -> Checkpoint | None:
        """The earliest position a restart must re-read from (None before the first group)."""
        sorter: Sorter = self.sorter
        return self._checkpoint_of(
            sorter.oldest_pending(),
            self.assembler.open_group_start,
            self._last_end,
            sorter.max_tso_seen,
            self._base,
        )

    def _note_mark(self, key) -> None:
        """What `checkpoint()` reads, as it is at a release (`feed_packed`'s one watermark):
        references to values already made, none built."""
        sorter: Sorter = self.sorter
        self._mark_key = key
        self._mark_oldest = sorter.oldest_pending()
        self._mark_open = self.assembler.open_group_start
        self._mark_end = self._last_end
        self._mark_tso = sorter.max_tso_seen
        self._mark_base = self._base

    def _checkpoint_of(self, oldest, open_start, last_end, max_tso_seen, base):  # C types: .pxd
        """`checkpoint()` of the sorter's oldest pending item, the open group's start, the
        end of the last group, the sorter's largest TSO and the files' base name, as they were
        (now, or at a release)."""
        if open_start is not None:
            # Nothing was fed to the sorter since this group began: its max TSO is current.
            seq, max_tso = self._seq(*open_start), max_tso_seen
            if oldest is not None and oldest < (seq, max_tso):  # the smaller of the two
                seq, max_tso = oldest
        elif oldest is not None:
            seq, max_tso = oldest
        else:
            if last_end is None:
                return None
            file, pos = last_end
            return named_tuple.new4(Checkpoint, self._stream, file, pos, max_tso_seen)
        number = seq >> 32
        if base != self._base:  # (noted before a FORMAT_DESCRIPTION changed it)
            name = f"{base}.{number:06d}"
        else:
            if number != self._cp_file_no:  # the name, made once per file
                self._cp_file_no, self._cp_file = number, f"{base}.{number:06d}"
            name = self._cp_file
        return named_tuple.new4(Checkpoint, self._stream, name, seq & 0xFFFFFFFF, max_tso)
