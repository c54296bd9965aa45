"""Does a CN write by the CN protocol? A scan of one DN's binlog with the MergeSource's own
grouping and classifier (`cdc preflight --cn-conformance`, docs/deploy.md, "Conformance").

What the MergeSource cannot place exactly, each a `Finding` with the event's position:
- `plain write`: a transaction that changed user tables outside an XA branch (a plain commit,
  an `XA COMMIT … ONE PHASE`): it has no commit TSO, so it comes out as a local transaction,
  ordered only after the largest TSO its DN saw, not with the CN transaction it belongs to;
- `foreign XA`: an XA branch whose xid is not the CN's (`cdc-<txn_id>`, formatID 1): treated
  as a plain write once committed;
- `no commit record`: a CN branch prepared and committed in the scanned range without its
  commit record in `__cdc__.__cdc_tx_log__` on this DN before its XA COMMIT: the MergeSource
  never releases it and holds every later branch of the DN behind it;
- `no TraceId`: a statement of a CN branch without the `/*CDC trace=… */` hint (its order
  within a transaction over several DNs is then unknown);
- `statement-logged write`: the DN logs statements (binlog_format is not ROW).

Read-only and bounded: a non-blocking dump (it ends where the DN's binlog ends now) of the DN's
newest `files` binlog files. Only groups wholly in that range are judged (a branch prepared
before it is not faulted for a record written before it)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from cdc import admin_sql
from cdc.binlog.fde import FormatDescription
from cdc.config import NodeConfig
from cdc.protocol import BinlogPosition, DnEvent, DumpClient, DumpSettings
from merge_source.classifier import Classified, Classifier, GroupKind, StatementLogged, table_name
from merge_source.group import BinlogGroup, GroupAssembler

MAX_EXAMPLES = 3  # findings listed per rule and DN (the rest are counted)


@dataclass(slots=True)
class Finding:
    rule: str
    at: str  # "binlog.000003:1234"
    detail: str


@dataclass(slots=True)
class DnConformance:
    dn: str  # "dn1 (127.0.0.1:23401)"
    start: str = ""
    groups: Counter = field(default_factory=Counter)  # by kind
    counts: Counter = field(default_factory=Counter)  # findings by rule
    findings: list[Finding] = field(default_factory=list)  # the first MAX_EXAMPLES of each
    error: str = ""

    def add(self, rule: str, at: str, detail: str) -> None:
        self.counts[rule] += 1
        if self.counts[rule] <= MAX_EXAMPLES:
            self.findings.append(Finding(rule, at, detail))

    @property
    def ok(self) -> bool:
        return not self.counts and not self.error


class _Judge:
    """The findings of one DN's groups, in binlog order."""

    def __init__(self, report: DnConformance):
        self.report = report
        self.classifier = Classifier(spill_dir=None)
        self.prepared: dict[int, str] = {}  # CN txn_id -> where its branch was prepared
        self.recorded: set[int] = set()  # txn_ids with a commit record seen on this DN

    def fde(self, event: DnEvent) -> None:
        self.classifier.fde = FormatDescription.parse(memoryview(event.data)[19:])

    def group(self, group: BinlogGroup) -> None:
        at = f"{group.file}:{group.start}"
        r = self.report
        try:
            c: Classified = self.classifier.classify(group)
        except StatementLogged as exc:
            r.add("statement-logged write", at, str(exc).split(": ", 2)[-1][:300])
            return
        r.groups[c.kind.value] += 1
        kind = c.kind
        if kind is GroupKind.LOCAL and c.statements:
            r.add("plain write", at, f"changed {_tables(c)} outside an XA branch of the CN")
        elif kind is GroupKind.FOREIGN_PREPARE and c.statements:
            r.add("foreign XA", at, f"an XA branch of another xid format changed {_tables(c)}")
        elif kind is GroupKind.XA_PREPARE:
            self.prepared[c.txn_id] = at
            for s in c.statements:
                if s.trace_id is None:
                    r.add("no TraceId", at, f"txn {c.txn_id}: a statement on {_tables_of(s)}")
        elif kind is GroupKind.COMMIT_RECORD:
            self.recorded.update(rec.txn_id for rec in c.records if not rec.aborted)
        elif kind is GroupKind.XA_COMMIT:
            prepared_at = self.prepared.pop(c.txn_id, None)
            if prepared_at is not None and c.txn_id not in self.recorded:
                r.add(
                    "no commit record",
                    at,
                    f"txn {c.txn_id} (prepared at {prepared_at}) committed with no row in "
                    "__cdc__.__cdc_tx_log__ before it",
                )
        elif kind is GroupKind.XA_ROLLBACK:
            self.prepared.pop(c.txn_id, None)


def _tables_of(statement) -> str:
    names = {
        f"{db.decode()}.{tbl.decode()}"
        for db, tbl in (table_name(e) for e in statement.events if e[4] == 19)  # TABLE_MAP
    }
    return ", ".join(sorted(names)) or "?"


def _tables(c: Classified) -> str:
    return ", ".join(sorted({_tables_of(s) for s in c.statements}))


def newest_files(node: NodeConfig, files: int) -> str:
    """The first of the DN's newest `files` binlog files."""
    conn = admin_sql.connect(node.host, node.port, node.user, node.password)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            names = [row[0] for row in cur.fetchall()]
    finally:
        conn.close()
    if not names:
        raise RuntimeError("SHOW BINARY LOGS lists no file: is log_bin on?")
    return names[-files:][0]


async def scan(node: NodeConfig, server_id: int, files: int = 2) -> DnConformance:
    """Judge `node`'s newest `files` binlog files (a non-blocking dump as `server_id`)."""
    report = DnConformance(f"{node.name or f'dn{node.id}'} ({node.address})")
    try:
        first = newest_files(node, files)
    except Exception as exc:  # noqa: BLE001 - reported per DN
        report.error = str(exc)
        return report
    report.start = f"{first}:4"
    judge = _Judge(report)
    assembler = GroupAssembler(report.dn, spill_bytes=0)
    settings = DumpSettings(
        node.host,
        node.port,
        node.user,
        node.password,
        server_id=server_id,
        name=node.name or f"dn{node.id}",
        reconnect=False,
        non_blocking=True,
    )
    client = DumpClient(settings, BinlogPosition(first, 4))
    try:
        async for batch in client.batches():
            for item in assembler.assemble(batch):
                if isinstance(item, BinlogGroup):
                    judge.group(item)
                else:
                    judge.fde(item)
    except Exception as exc:  # noqa: BLE001 - reported per DN
        report.error = f"reading the binlog: {exc}"
    finally:
        await client.close()
    return report
