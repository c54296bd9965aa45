"""In-doubt recovery: settle every prepared CN branch found by `XA RECOVER` on the DNs.

Rule (docs/cn.md, "Recovery"): a transaction is committed, with the TSO of its commit record,
iff its primary DN holds a commit record; missing records are written on the other participants
before any XA COMMIT. Without a record, recovery first writes a tombstone (aborted=1) on every
DN, so a CN that is still alive can no longer write the primary record (duplicate key), and
only then rolls the branches back. Branches still attached to a session answer XAER_NOTA:
left to their owner, unless the caller knows they outlived a grace period (`kill`), in which
case the owner session named in the xid is ended once the outcome is decided (so a tombstone
or a commit record already binds the owner) and the branch, detached by that, is settled. An
owner cut off from the GMS but not from its DNs (a fenced dumper's heartbeat) otherwise holds
its branch, and with it the DN's MergeSource, for as long as its connection lives.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

import pymysql

from cdc.cn_protocol import schema
from cdc.cn_protocol.branch import ER_XAER_NOTA, errno, settle_detached
from cdc.cn_protocol.context import ProtocolContext
from cdc.cn_protocol.xid import Xid, parse_recover_row

log = logging.getLogger(__name__)


# A branch attached to its session for this long is not an in-flight commit (milliseconds)
# but an owner that is gone or cut off: `recover_until_settled` ends that session.
ATTACHED_GRACE_S = 1.0
ER_NO_SUCH_THREAD = 1094


@dataclass(frozen=True, slots=True)
class CommitRecord:
    commit_tso: int
    participants: list[int]
    aborted: bool


@dataclass(slots=True)
class RecoveryReport:
    committed: list[int] = field(default_factory=list)
    rolled_back: list[int] = field(default_factory=list)
    # txn_id -> why it was left in doubt (attached to a live session, DN unreachable, ...)
    skipped: dict[int, str] = field(default_factory=dict)

    def merge(self, other: RecoveryReport) -> None:
        self.committed += other.committed
        self.rolled_back += other.rolled_back
        self.skipped = dict(other.skipped)

    def summary(self) -> str:
        text = f"committed {len(self.committed)}, rolled back {len(self.rolled_back)}"
        if self.skipped:
            text += f", left in doubt {len(self.skipped)}: " + "; ".join(
                f"txn {t}: {why}" for t, why in sorted(self.skipped.items())[:5]
            )
        return text


async def scan(ctx: ProtocolContext) -> tuple[dict[int, dict[int, Xid]], set[int]]:
    """Prepared CN branches: txn_id -> {DN: its branch's xid}; and the DNs that could not be
    asked."""
    prepared: dict[int, dict[int, Xid]] = {}
    unreachable: set[int] = set()
    dns = sorted(set(ctx.catalogue.dns) | {n.id for n in ctx.config.dn})
    results = await asyncio.gather(
        *(ctx.pools.execute(dn, "XA RECOVER") for dn in dns), return_exceptions=True
    )
    for dn, rows in zip(dns, results, strict=True):
        if isinstance(rows, BaseException):
            log.warning("recovery: DN %s unreachable (%s)", dn, rows)
            unreachable.add(dn)
            continue
        for row in rows:
            xid = parse_recover_row(row)
            if xid is not None:
                prepared.setdefault(xid.txn_id, {})[dn] = xid
    return prepared, unreachable


async def recover(
    ctx: ProtocolContext, only: set[int] | None = None, kill: set[int] = frozenset()
) -> RecoveryReport:
    """One pass over every in-doubt CN transaction (or only those in `only`); the owner
    sessions of the branches of transactions in `kill` that are still attached are ended."""
    prepared, unreachable = await scan(ctx)
    report = RecoveryReport()
    for txn_id, branches in sorted(prepared.items()):
        if only is None or txn_id in only:
            await _settle(ctx, txn_id, branches, unreachable, report, txn_id in kill)
    return report


async def recover_until_settled(ctx: ProtocolContext, wait_s: float = 5.0) -> RecoveryReport:
    """Repeat `recover` while branches are still attached (a just-killed CN's sessions take a
    moment to close on the DN), for at most `wait_s` seconds."""
    total = RecoveryReport()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    first_seen: dict[int, float] = {}
    while True:
        now = loop.time()
        # Attached for over a grace period: its owner is gone or cut off, not committing.
        kill = {t for t, at in first_seen.items() if now - at >= ATTACHED_GRACE_S}
        total.merge(await recover(ctx, kill=kill))
        if not total.skipped or loop.time() > deadline:
            return total
        for txn_id in total.skipped:
            first_seen.setdefault(txn_id, now)
        await asyncio.sleep(0.2)


async def recover_at_start(ctx: ProtocolContext, grace_s: float = 1.0) -> RecoveryReport:
    """Settle only transactions seen prepared in two scans `grace_s` apart: in-flight commits of
    other live CNs finish in milliseconds and are left alone (tombstones keep it safe anyway)."""
    first, _ = await scan(ctx)
    if not first:
        return RecoveryReport()
    await asyncio.sleep(grace_s)
    return await recover(ctx, only=set(first), kill=set(first))


async def _read_records(
    ctx: ProtocolContext, txn_id: int, dns: set[int]
) -> dict[int, CommitRecord]:
    found: dict[int, CommitRecord] = {}
    for dn in sorted(dns):
        try:
            rows = await ctx.pools.execute(dn, schema.SELECT_RECORD, (txn_id,))
        except pymysql.err.MySQLError:
            continue
        if rows:
            tso, participants, aborted = rows[0]
            found[dn] = CommitRecord(
                int(tso), schema.parse_participants(participants), bool(aborted)
            )
    return found


def _decision(records: dict[int, CommitRecord]) -> CommitRecord | None:
    # A real record anywhere means the primary's exists: secondaries are written after it.
    for record in records.values():
        if not record.aborted:
            return record
    return None


async def _settle(
    ctx, txn_id: int, branches: dict[int, Xid], unreachable: set[int], report, kill: bool
) -> None:
    dns = set(branches)
    # Storage DNs only: a DN started but not yet added has no private tables.
    everywhere = (set(ctx.catalogue.dns) | dns) - unreachable
    records = await _read_records(ctx, txn_id, everywhere)
    decision = _decision(records)
    if decision is None:
        if unreachable:
            report.skipped[txn_id] = (
                f"no commit record found and DN(s) {sorted(unreachable)} unreachable "
                "(one may be the primary); retry when they are up"
            )
            return
        # Block a late primary record from a CN that may still be alive, then look again.
        tombstone_tso = await ctx.tso.next()
        for dn in sorted(everywhere):
            await ctx.pools.execute(dn, schema.INSERT_TOMBSTONE, (txn_id, tombstone_tso))
        records = await _read_records(ctx, txn_id, everywhere)
        decision = _decision(records)
    if decision is not None:
        await _commit(ctx, txn_id, branches, decision, records, report, kill)
    else:
        await _rollback(ctx, txn_id, branches, report, kill)


async def _commit(ctx, txn_id, branches, decision: CommitRecord, records, report, kill) -> None:
    if ctx.ground_truth.enabled:
        # Logged as soon as the decision is known to be commit, before any XA COMMIT: a
        # recoverer killed after one, or two recoverers each committing a branch (each sees
        # XAER_NOTA for the other's), must not leave a committed transaction unlogged. Logged
        # again by another recoverer, it is read once (`ground_truth.read`).
        kind = await _kind(ctx, txn_id, decision.participants)
        ctx.ground_truth.record(
            decision.commit_tso, txn_id, decision.participants, kind, recovered=True
        )
    unrecorded = set()
    text = schema.format_participants(decision.participants)
    for dn in decision.participants:
        existing = records.get(dn)
        if existing is not None and not existing.aborted:
            continue
        try:
            await ctx.pools.execute(dn, schema.UPSERT_RECORD, (txn_id, decision.commit_tso, text))
        except pymysql.err.MySQLError as exc:
            unrecorded.add(dn)
            report.skipped[txn_id] = f"cannot write the commit record on DN {dn}: {exc}"
    done = True
    for dn in sorted(set(branches) - unrecorded):
        if not await _settle_branch(branches[dn], "COMMIT", ctx, report, kill):
            done = False
    if done and not unrecorded:
        report.committed.append(txn_id)


async def _kind(ctx: ProtocolContext, txn_id: int, participants: list[int]) -> str:
    """The ground-truth kind of a transaction recovery is about to commit. Logging a recovered
    heartbeat or marker as "txn" would make `cdc verify-binlog` expect it in the global binlog,
    where heartbeats and markers never appear. Read uncommitted: its branches may still be
    prepared, and a heartbeat's row is an UPDATE that a committed read sees from before it."""
    for dn in participants:  # every participant holds the private row; the first that answers
        try:
            # (SET STATEMENT cannot set the isolation level: the session's, then back.)
            async with ctx.pools.connection(dn) as conn, conn.cursor() as cur:
                await cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
                await cur.execute(schema.SELECT_KIND, (txn_id, txn_id, txn_id))
                rows = await cur.fetchall()
                await cur.execute("SET SESSION tx_isolation = @@GLOBAL.tx_isolation")
        except pymysql.err.MySQLError:
            continue
        return rows[0][0] if rows else "txn"
    return "txn"


async def _rollback(ctx, txn_id, branches, report, kill) -> None:
    done = True
    for dn in sorted(branches):
        if not await _settle_branch(branches[dn], "ROLLBACK", ctx, report, kill):
            done = False
    if done:
        report.rolled_back.append(txn_id)


async def _settle_branch(
    xid: Xid, verb: str, ctx: ProtocolContext, report, kill: bool = False
) -> bool:
    try:
        await ctx.pools.execute(xid.dn_id, f"XA {verb} {xid.sql}")
        return True
    except pymysql.err.MySQLError as exc:
        if errno(exc) == ER_XAER_NOTA:
            if kill and xid.conn_id and await _end_owner(ctx, xid):
                if await settle_detached(ctx, xid, verb):
                    return True
            report.skipped[xid.txn_id] = f"branch on DN {xid.dn_id} still attached to a session"
        else:
            report.skipped[xid.txn_id] = f"XA {verb} on DN {xid.dn_id} failed: {exc}"
        return False


async def _end_owner(ctx: ProtocolContext, xid: Xid) -> bool:
    """End the session that holds branch `xid` attached (named in its bqual), so that it
    detaches; False if that failed (then the branch stays in doubt)."""
    try:
        await ctx.pools.execute(xid.dn_id, f"KILL CONNECTION {int(xid.conn_id)}")
    except pymysql.err.MySQLError as exc:
        if errno(exc) != ER_NO_SUCH_THREAD:  # (gone meanwhile: detached already)
            log.warning("DN %s: ending the owner of %s failed: %s", xid.dn_id, xid.gtrid, exc)
            return False
    log.warning(
        "DN %s: ended session %d, which held %s prepared and attached past the grace period",
        xid.dn_id,
        xid.conn_id,
        xid.gtrid,
    )
    return True
