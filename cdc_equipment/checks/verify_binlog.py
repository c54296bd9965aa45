"""`cdc verify-binlog`: check the global binlog against the CN's ground-truth log.

The binlog is read with an independent decoder, python-mysql-replication, over the MySQL
replication protocol (a non-blocking dump: it ends at the current end of the binlog), so a bug in
our own codec cannot hide a bug in what we wrote. Checked (docs/ARCHITECTURE.md, "Invariants"):

1. structure: every transaction is `BEGIN … XID` or a DDL `Query`, and ends with its `CTS::<tso>`
   mark;
2. strict order by the global key `(tso, kind, dn, seq)` carried by the marks, and GTIDs: each
   transaction has its own (a CREATE TABLE two), of one server_uuid, numbered without a gap;
3. every committed CN transaction of the ground truth that is written to the global binlog
   (row transactions and DDL; heartbeats and instruction markers never are) appears exactly once;
4. no transaction that is not in the ground truth, except DDL and local (non-CN) transactions;
5. if `bank.accounts` is in the binlog: no transaction changes the transfer total, and every
   before-image agrees with the history replayed so far;
6. every rows event (and the TABLE_MAP it refers to) has the column set of the logical schema in
   force at its position: the schema replayed from the binlog's own DDL `Query` events
   (`ddl_replay.py`), the history consumers rebuild, not the GMS history of the code under test.

A multi-stream binlog (`[dumper] streams = N`, docs/streams.md) is checked stream by stream
(`check_streams`): each stream for 1, 2, 5 and 6 on its own, with its own GTIDs; each stream
holds only rows of its tables (the router of the config) and no transaction twice; and 3 and 4
hold for the union of the streams (a transaction split over streams counts once).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pymysql

from cdc.binlog.constants import ColumnType
from cdc_equipment.checks.ddl_replay import LogicalSchema

# Ground-truth kinds that are never written to the global binlog (dropped at the source).
NOT_WRITTEN = frozenset({"heartbeat", "CdcStart", "StorageChange", "MetaChange", "FlushLogs"})
TRANSFER_TABLE = ("bank", "accounts")
SHOWN_PER_CHECK = 10  # violations printed per check; the count is always complete

# `CTS::<tso>` for a CN transaction, `CTS::<tso>::L<dn>.<seq>` for a local one.
_MARK = re.compile(r"CTS::(\d+)(?:::L(\d+)\.(\d+))?$")


class VerifyError(RuntimeError):
    """The binlog could not be read at all (connection refused, access denied, …)."""


@dataclass(slots=True)
class RowChange:
    db: str
    table: str
    kind: str  # write | update | delete
    rows: list[dict]  # {"values": …} or {"before_values": …, "after_values": …}, as pmr gives
    at: str = ""  # "file:pos" of the rows event
    width: int | None = None  # columns of the rows event; None: not read (tests)
    columns: tuple[FoundColumn, ...] = ()  # of its TABLE_MAP


@dataclass(frozen=True, slots=True)
class FoundColumn:
    """A column as the TABLE_MAP of a rows event describes it."""

    type: int  # binlog type code (pmr gives ENUM/SET for their STRING)
    max_length: int | None = None  # VARCHAR: the length in bytes
    name: str | None = None  # when the decoder knows it

    def __str__(self) -> str:
        try:
            text = ColumnType(self.type).name
        except ValueError:
            text = f"type {self.type}"
        if self.max_length is not None:
            text += f" ({self.max_length} bytes)"
        return f"{self.name} {text}" if self.name else text


@dataclass(slots=True)
class BinlogTxn:
    key: tuple[int, int, int, int]  # global key from the CTS mark: (tso, 0 CN | 1 local, dn, seq)
    at: str  # "file:pos" of the CTS mark, for messages
    ddl: list[str] = field(default_factory=list)
    ddl_dbs: list[str] = field(default_factory=list)  # the default database of each DDL
    changes: list[RowChange] = field(default_factory=list)
    gtids: list[str] = field(default_factory=list)  # `uuid:n` of its GTID event(s)

    @property
    def tso(self) -> int:
        return self.key[0]

    @property
    def local(self) -> bool:
        return self.key[1] == 1

    @property
    def is_ddl(self) -> bool:
        return bool(self.ddl) and not self.changes


@dataclass(slots=True)
class BinlogRead:
    txns: list[BinlogTxn] = field(default_factory=list)
    events: int = 0
    first_file: str = ""
    structure: list[str] = field(default_factory=list)  # structural violations
    tail: str = ""  # a transaction still open at the end of the stream (being written)


@dataclass(slots=True)
class Check:
    name: str
    detail: str = ""
    violations: list[str] = field(default_factory=list)
    skipped: bool = False

    @property
    def result(self) -> str:
        if self.skipped:
            return "skipped"
        return "ok" if not self.violations else f"FAIL ({len(self.violations)})"


@dataclass(slots=True)
class Report:
    checks: list[Check]
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(not c.violations for c in self.checks)

    @property
    def violations(self) -> list[str]:
        return [v for c in self.checks for v in c.violations]

    def render(self) -> str:
        w = max([34, *(len(c.name) + 2 for c in self.checks)])
        lines = [f"{'CHECK':<{w}}{'RESULT':<12}DETAIL"]
        lines += [f"{c.name:<{w}}{c.result:<12}{c.detail}" for c in self.checks]
        for c in self.checks:
            if c.violations:
                lines.append(f"{c.name}:")
                lines += [f"  - {v}" for v in c.violations[:SHOWN_PER_CHECK]]
                if len(c.violations) > SHOWN_PER_CHECK:
                    lines.append(f"  … and {len(c.violations) - SHOWN_PER_CHECK} more")
        lines += [f"note: {n}" for n in self.notes]
        n = len(self.violations)
        lines.append("global binlog OK" if self.ok else f"GLOBAL BINLOG INVALID: {n} violation(s)")
        return "\n".join(lines)


def parse_mark(text: str) -> tuple[int, int, int, int] | None:
    """The global key of a `CTS::…` mark, or None if `text` is not one."""
    m = _MARK.match(text.strip())
    if m is None:
        return None
    tso, dn, seq = m.groups()
    return (int(tso), 0, 0, 0) if dn is None else (int(tso), 1, int(dn), int(seq))


# -- reading (python-mysql-replication) -----------------------------------------------------------
def first_binlog(host: str, port: int, user: str, password: str) -> str:
    """The oldest file the server still has (pmr without a file name would start at the end)."""
    try:
        conn = pymysql.connect(
            host=host, port=port, user=user, password=password, connect_timeout=10
        )
    except pymysql.err.MySQLError as exc:
        raise VerifyError(f"cannot connect to {host}:{port} as {user!r}: {exc}") from None
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            rows = cur.fetchall()
    finally:
        conn.close()
    if not rows:
        raise VerifyError(f"{host}:{port} has no binary logs (SHOW BINARY LOGS is empty)")
    return rows[0][0]


def read_server(
    host: str, port: int, user: str, password: str, server_id: int = 4077
) -> BinlogRead:
    """Every transaction from the first file to the current end, decoded by pmr."""
    try:  # a test extra of this project: imported only when a check runs
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import GtidEvent, QueryEvent, RowsQueryLogEvent, XidEvent
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
    except ImportError:
        raise VerifyError(
            "python-mysql-replication is not installed: pip install mysql-replication"
        ) from None

    kinds = {WriteRowsEvent: "write", UpdateRowsEvent: "update", DeleteRowsEvent: "delete"}
    out = BinlogRead(first_file=first_binlog(host, port, user, password))
    stream = BinLogStreamReader(
        connection_settings={"host": host, "port": port, "user": user, "password": password},
        server_id=server_id,
        blocking=False,
        resume_stream=True,
        log_file=out.first_file,
        log_pos=4,
        only_events=[GtidEvent, QueryEvent, XidEvent, RowsQueryLogEvent, *kinds],
        enable_logging=False,
    )
    builder = _TxnBuilder(out)
    at = f"{out.first_file}:4"
    try:
        with warnings.catch_warnings():
            # pmr hands PyMySQL the deprecated `db=` for its control connection: not our news.
            warnings.simplefilter("ignore", DeprecationWarning)
            for ev in stream:
                out.events += 1
                at = f"{stream.log_file}:{ev.packet.log_pos}"
                if isinstance(ev, GtidEvent):
                    builder.gtid(ev.gtid, at)
                elif isinstance(ev, QueryEvent):
                    db = ev.schema.decode() if isinstance(ev.schema, bytes) else ev.schema
                    builder.query(ev.query, at, db or "")
                elif isinstance(ev, XidEvent):
                    builder.xid(at)
                elif isinstance(ev, RowsQueryLogEvent):
                    builder.mark(ev.query, at)
                else:
                    change = RowChange(ev.schema, ev.table, kinds[type(ev)], ev.rows, at)
                    change.width = ev.number_of_columns
                    change.columns = tuple(_found(c) for c in ev.columns)
                    builder.rows(change, at)
    except pymysql.err.MySQLError as exc:
        raise VerifyError(
            f"reading the binlog from {host}:{port} failed after {at}: {exc}"
        ) from exc
    finally:
        stream.close()
    builder.finish()
    return out


def _found(col) -> FoundColumn:
    """A pmr `Column` as the schema check needs it."""
    length = getattr(col, "max_length", None) if col.type == ColumnType.VARCHAR else None
    return FoundColumn(col.type, length, col.name)


class _TxnBuilder:
    """Groups the event stream into transactions, noting every structural problem."""

    def __init__(self, out: BinlogRead):
        self.out = out
        self.current: BinlogTxn | None = None
        self.begun = False  # inside BEGIN … (a row transaction)
        self.has_xid = False
        self.started_at = ""
        self.gtids: list[str] = []  # of the transaction being read

    def _open(self, at: str) -> BinlogTxn:
        if self.current is None:
            self.current = BinlogTxn((0, 0, 0, 0), at)
            self.started_at = at
        return self.current

    def query(self, text: str, at: str, db: str = "") -> None:
        if text.strip().upper() == "BEGIN":
            if self.current is not None:
                self.out.structure.append(
                    f"BEGIN at {at} inside the transaction started at {self.started_at} "
                    "(its CTS mark is missing)"
                )
                self.current = None
            self._open(at)
            self.begun, self.has_xid = True, False
        elif self.begun:
            self.out.structure.append(f"statement {text[:60]!r} at {at} inside BEGIN … XID")
        else:
            txn = self._open(at)
            txn.ddl.append(text)
            txn.ddl_dbs.append(db)

    def gtid(self, text: str, at: str) -> None:
        if self.begun and not self.has_xid:
            self.out.structure.append(f"GTID {text} at {at} inside BEGIN … XID")
        self.gtids.append(text)

    def rows(self, change: RowChange, at: str) -> None:
        if not self.begun or self.has_xid:
            self.out.structure.append(
                f"rows of {change.db}.{change.table} at {at} outside BEGIN … XID"
            )
        self._open(at).changes.append(change)

    def xid(self, at: str) -> None:
        if not self.begun or self.has_xid:
            self.out.structure.append(f"XID at {at} without a BEGIN")
        self.has_xid = True

    def mark(self, text: str, at: str) -> None:
        key = parse_mark(text)
        if key is None:
            return  # a Rows_query event that is not ours (annotations): not a boundary
        txn = self.current
        if txn is None:
            self.out.structure.append(f"CTS mark {text!r} at {at} ends no transaction")
            return
        if self.begun and not self.has_xid:
            self.out.structure.append(f"transaction ending at {at} has no XID before its CTS mark")
        txn.key, txn.at, txn.gtids = key, at, self.gtids
        self.gtids = []
        self.out.txns.append(txn)
        self.current, self.begun, self.has_xid = None, False, False

    def finish(self) -> None:
        if self.current is not None:
            self.out.tail = f"a transaction started at {self.started_at} has no CTS mark yet"


# -- checks -----------------------------------------------------------------------------------------
def check(read: BinlogRead, truth: list[dict], allow_pending: bool = False) -> Report:
    """All invariants of the module docstring; `truth` as `cdc_equipment.ground_truth.read` returns it."""
    report = Report([])
    txns = read.txns
    kinds = Counter("local" if t.local else "ddl" if t.is_ddl else "data" for t in txns)
    report.checks.append(
        Check(
            "binlog structure",
            f"{len(txns)} transactions ({kinds['data']} CN, {kinds['ddl']} DDL, "
            f"{kinds['local']} local), {read.events} events from {read.first_file or '-'}",
            list(read.structure),
        )
    )
    if read.tail:
        report.notes.append(f"{read.tail} (still being written?)")
    report.checks.append(_order(txns))
    report.checks.append(_gtids(txns))
    report.checks += _exactly_once(txns, truth, allow_pending, report.notes)
    report.checks.append(_transfer_total(txns))
    report.checks.append(_schema(txns))
    return report


def check_streams(
    reads: list[BinlogRead],
    truth: list[dict],
    stream_of,
    allow_pending: bool = False,
) -> Report:
    """A multi-stream binlog: `reads[i]` is stream i's, `stream_of(db, table)` the stream a
    table belongs to (`cdc.streams.StreamRouter`, from str names)."""
    report = Report([])
    union: dict[tuple, BinlogTxn] = {}
    for i, read in enumerate(reads):
        stream = check(read, [], allow_pending=True)  # its own structure, order, GTIDs, rows
        for c in stream.checks:
            if c.name in ("every committed txn exactly once", "nothing not in the ground truth"):
                continue
            c.name = f"stream {i}: {c.name}"
            report.checks.append(c)
        report.notes += [f"stream {i}: {n}" for n in stream.notes]
        report.checks.append(_routed(read.txns, i, stream_of))
        for t in read.txns:
            union.setdefault(t.key, t)
    txns = [union[k] for k in sorted(union)]
    for c in _exactly_once(txns, truth, allow_pending, report.notes):
        c.name = f"union of {len(reads)} streams: {c.name}"
        report.checks.append(c)
    return report


def _routed(txns: list[BinlogTxn], stream: int, stream_of) -> Check:
    c = Check(f"stream {stream}: only its own tables")
    rows = 0
    for t in txns:
        for ch in t.changes:
            rows += 1
            if stream_of(ch.db, ch.table) != stream:
                c.violations.append(
                    f"{ch.db}.{ch.table} at {ch.at} belongs to stream {stream_of(ch.db, ch.table)}"
                )
    c.detail = f"{rows} rows events"
    return c


def _order(txns: list[BinlogTxn]) -> Check:
    c = Check("strict TSO order")
    for prev, txn in zip(txns, txns[1:], strict=False):
        if txn.key <= prev.key:
            what = "repeats" if txn.key == prev.key else "goes back from"
            c.violations.append(f"{txn.key} at {txn.at} {what} {prev.key} at {prev.at}")
    if txns:
        c.detail = f"TSO {txns[0].tso} … {txns[-1].tso}"
    return c


def _gtids(txns: list[BinlogTxn]) -> Check:
    """Every transaction has its GTID(s), one server_uuid, numbers gapless and increasing.
    Transactions before the first GTID (files written before GTIDs existed) are allowed."""
    c = Check("GTIDs gapless")
    sid, last, seen = None, 0, 0
    for txn in txns:
        if not txn.gtids:
            if sid is not None:
                c.violations.append(f"{_describe(txn)} has no GTID")
            continue
        for text in txn.gtids:
            uuid, _, n = text.rpartition(":")
            gno = int(n) if n.isdigit() else -1
            if sid is None:
                sid, last = uuid, gno - 1
            if uuid != sid or gno != last + 1:
                c.violations.append(f"GTID {text} of {_describe(txn)} follows {sid}:{last}")
            sid, last, seen = uuid, gno, seen + 1
    c.detail = f"{seen} GTIDs, {sid}:…{last}" if sid else "no GTIDs"
    return c


def _exactly_once(
    txns: list[BinlogTxn], truth: list[dict], allow_pending: bool, notes: list[str]
) -> list[Check]:
    once = Check("every committed txn exactly once")
    extra = Check("nothing not in the ground truth")
    by_tso: dict[int, list[BinlogTxn]] = defaultdict(list)
    for t in txns:
        if not t.local:
            by_tso[t.tso].append(t)
    # Nothing before the first CdcStart marker is ever emitted (the pipeline's starting point).
    starts = [e["tso"] for e in truth if e["kind"] == "CdcStart"]
    start = min(starts) if starts else 0
    last = txns[-1].tso if txns else 0
    expected = {e["tso"]: e for e in truth if e["kind"] not in NOT_WRITTEN and e["tso"] > start}
    pending = 0
    for tso, entry in sorted(expected.items()):
        found = by_tso.get(tso, [])
        what = (
            f"TSO {tso} (txn {entry['txn_id']}, kind {entry['kind']}, DNs {entry['participants']})"
        )
        if not found:
            if allow_pending and tso > last:
                pending += 1
            else:
                once.violations.append(f"{what} is not in the global binlog")
        elif len(found) > 1:
            once.violations.append(
                f"{what} appears {len(found)} times (at {', '.join(t.at for t in found)})"
            )
        elif (entry["kind"] == "ddl") != found[0].is_ddl:
            shape = "a DDL" if found[0].is_ddl else "a row transaction"
            once.violations.append(f"{what} is {shape} in the binlog (at {found[0].at})")
    ignored = sum(1 for e in truth if e["kind"] in NOT_WRITTEN)
    once.detail = (
        f"{len(expected)} ground-truth entries after CdcStart ({ignored} heartbeats/markers "
        "are never written)"
    )
    if pending:
        once.detail += f"; {pending} newer than the binlog's end (pending)"
        notes.append(f"{pending} committed transactions are not in the binlog yet (pending)")
    for tso, found in sorted(by_tso.items()):
        if tso not in expected and not all(t.is_ddl for t in found):
            for t in found:
                extra.violations.append(
                    f"TSO {tso} at {t.at} ({_describe(t)}) is not a committed CN transaction "
                    "of the ground truth"
                )
    extra.detail = "DDL and local transactions may be absent from the ground truth"
    return [once, extra]


def _describe(t: BinlogTxn) -> str:
    if t.is_ddl:
        return "DDL"
    tables = sorted({f"{c.db}.{c.table}" for c in t.changes})
    return f"{sum(len(c.rows) for c in t.changes)} rows of {', '.join(tables)}"


def _transfer_total(txns: list[BinlogTxn]) -> Check:
    c = Check(f"transfer total ({'.'.join(TRANSFER_TABLE)})")
    balances: dict[int, int] = {}
    checked = 0
    for t in txns:
        changes = [ch for ch in t.changes if (ch.db, ch.table) == TRANSFER_TABLE]
        if not changes:
            continue
        delta, only_updates = 0, True
        for ch in changes:
            for row in ch.rows:
                if ch.kind == "update":
                    before, after = row["before_values"], row["after_values"]
                    known = balances.get(before["id"])
                    if known is not None and known != before["balance"]:
                        c.violations.append(
                            f"account {before['id']} at {t.at}: before-image balance "
                            f"{before['balance']} but the history says {known} (a lost or "
                            "reordered transaction)"
                        )
                    delta += after["balance"] - before["balance"]
                    balances.pop(before["id"], None)
                    balances[after["id"]] = after["balance"]
                elif ch.kind == "write":
                    only_updates = False
                    balances[row["values"]["id"]] = row["values"]["balance"]
                else:
                    only_updates = False
                    balances.pop(row["values"]["id"], None)
        # Inserts (the initial accounts) and deletes legitimately change the total; a
        # transaction of updates only is a transfer and must move money, never make it.
        if only_updates:
            checked += 1
            if delta:
                c.violations.append(f"TSO {t.tso} at {t.at} changes the total by {delta:+d}")
    if not balances and not checked:
        c.skipped, c.detail = True, "table not in the binlog"
    else:
        c.detail = (
            f"{checked} transfers; {len(balances)} accounts, total {sum(balances.values())} "
            "at the end"
        )
    return c


def check_checksums(directory: Path, base: str = "binlog") -> Check:
    """`mariadb-binlog --verify-binlog-checksum` on every file of the index (files mode)."""
    c = Check("checksums (mariadb-binlog)")
    tool = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")
    if tool is None:
        c.skipped, c.detail = True, "mariadb-binlog is not installed"
        return c
    index = directory / f"{base}.index"
    names = [Path(n.strip()).name for n in index.read_text().splitlines() if n.strip()]
    for name in names:
        res = subprocess.run(
            [tool, "--verify-binlog-checksum", str(directory / name)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if res.returncode != 0:
            c.violations.append(f"{name}: {res.stderr.strip()[:300]}")
    c.detail = f"{len(names)} files"
    return c


def _schema(txns: list[BinlogTxn]) -> Check:
    """Every rows event against the logical schema replayed from the binlog's DDL so far."""
    c = Check("rows match the DDL history")
    schema = LogicalSchema()
    checked, unknown = 0, Counter()
    for t in txns:
        for sql, db in zip(t.ddl, t.ddl_dbs or [""] * len(t.ddl), strict=True):
            schema.apply(sql, db, f"DDL at TSO {t.tso} ({t.at})")
        for ch in t.changes:
            table = schema.columns(ch.db, ch.table)
            if table is None or ch.width is None:
                unknown[f"{ch.db}.{ch.table}"] += 1
                continue
            checked += 1
            problem = _mismatch(table.columns, ch)
            if problem:
                gtid = f"GTID {', '.join(t.gtids)}, " if t.gtids else ""
                c.violations.append(
                    f"TSO {t.tso} ({gtid}CTS mark at {t.at}): {ch.kind} rows of "
                    f"{ch.db}.{ch.table} at {ch.at}: {problem}; the schema is the one of the "
                    f"{table.since}"
                )
    c.detail = f"{checked} rows events checked"
    if unknown:
        names = ", ".join(sorted(unknown)[:5]) + (" …" if len(unknown) > 5 else "")
        c.detail += (
            f"; {sum(unknown.values())} of {len(unknown)} tables not checked, their definition "
            f"not known from the binlog's DDL ({names})"
        )
    return c


def _mismatch(expected, ch: RowChange) -> str:
    """What differs between the expected columns and a rows event's TABLE_MAP ("" if nothing)."""
    found = ch.columns
    shape = ", ".join(f"{e.name} {e.sql_type}" for e in expected)
    if ch.width != len(found) or len(found) != len(expected):
        return (
            f"the DDL history has {len(expected)} columns ({shape}) but the rows event has "
            f"{ch.width} and its TABLE_MAP {len(found)} ({', '.join(map(str, found))})"
        )
    wrong = []
    for i, (e, f) in enumerate(zip(expected, found, strict=True), 1):
        lengths = e.varchar_bytes()
        if e.codes is not None and f.type not in e.codes:
            wrong.append(f"column {i} {e.name}: expected {e.sql_type}, found {f}")
        elif lengths is not None and f.max_length is not None and f.max_length not in lengths:
            wrong.append(f"column {i} {e.name}: expected {e.sql_type}, found {f}")
    return "; ".join(wrong)
