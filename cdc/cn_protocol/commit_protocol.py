"""The CN commit protocol (docs/protocol.md, "The commit protocol"): XA PREPARE everywhere, then
the commit TSO, then the commit records (primary first: the durable decision), then XA COMMIT
everywhere."""

from __future__ import annotations

import asyncio
import logging

import pymysql

from cdc.cn_protocol import schema
from cdc.cn_protocol.branch import ACTIVE, DONE, NEW, Branch, abort, settle_detached
from cdc.cn_protocol.context import ProtocolContext
from cdc.cn_protocol.errors import CommitOutcomeUnknown, TransactionAborted

log = logging.getLogger(__name__)

ER_DUP_ENTRY = 1062
SECONDARY_RECORD_TRIES = 6  # about 3 s of retries


async def commit(
    ctx: ProtocolContext, txn_id: int, branches: list[Branch], kind: str = "txn"
) -> int | None:
    """Commit; return the commit TSO (None for a read-only transaction, which is rolled back).

    `branches` are in first-touch order; the primary is the first branch that wrote rows.
    """
    if not any(b.wrote or b.pending for b in branches):
        # Read-only: nothing reaches any binlog, so no TSO and no commit record are needed.
        await abort_all(ctx, branches)
        return None
    await _prepare_all(ctx, txn_id, branches)  # sends deferred writes first
    writers = [b for b in branches if b.wrote]
    if not writers:  # deferred writes that changed no row: read-only after all
        await abort_all(ctx, branches)
        return None
    ctx.crash.reached("after_prepare")
    try:
        tso = await ctx.tso.next()
    except Exception as exc:
        await abort_all(ctx, branches)
        raise TransactionAborted(f"txn {txn_id}: no commit TSO ({exc}); rolled back") from exc
    ctx.crash.reached("after_tso")
    participants = [b.dn_id for b in writers]
    await _write_primary_record(ctx, txn_id, tso, participants, branches)
    ctx.crash.reached("after_primary_record")
    ctx.ground_truth.record(tso, txn_id, participants, kind)
    unrecorded = await _write_secondary_records(ctx, txn_id, tso, participants)
    ctx.crash.reached("after_records")
    await _commit_all(ctx, branches, unrecorded)
    return tso


async def abort_all(ctx: ProtocolContext, branches: list[Branch]) -> None:
    await asyncio.gather(*(abort(ctx, b) for b in branches))


async def _prepare_all(ctx: ProtocolContext, txn_id: int, branches: list[Branch]) -> None:
    async def prepare(b: Branch) -> None:
        await b.end_and_prepare()
        ctx.crash.reached("after_first_prepare")

    deferred = {b.dn_id for b in branches if b.pending}
    if len(branches) == 1:  # most transactions: no task for a single branch
        try:
            results: list = [await prepare(branches[0])]
        except Exception as exc:  # noqa: BLE001 - handled below like gather's results
            results = [exc]
    else:
        results = await asyncio.gather(*(prepare(b) for b in branches), return_exceptions=True)
    failed = [
        (b, r) for b, r in zip(branches, results, strict=True) if isinstance(r, BaseException)
    ]
    if not failed:
        return
    b, exc = failed[0]
    step = "a deferred write" if b.dn_id in deferred and b.state in (NEW, ACTIVE) else "XA PREPARE"
    for b, _ in failed:
        b.release(ctx, discard=True)  # its state is unknown: let the DN detach or drop it
    await abort_all(ctx, branches)
    b = failed[0][0]
    raise TransactionAborted(
        f"txn {txn_id}: {step} failed on DN {b.dn_id} ({exc}); rolled back on every DN"
    ) from exc


async def _write_record(ctx: ProtocolContext, dn: int, row: tuple[int, int, str], upsert: bool):
    if ctx.config.cn.batch_round_trips:
        await ctx.records.write(dn, row, upsert)  # with concurrent transactions' records
    else:
        stmt = schema.UPSERT_RECORD if upsert else schema.INSERT_PRIMARY_RECORD
        await ctx.pools.execute(dn, stmt, row)


async def _write_primary_record(ctx, txn_id, tso, participants, branches) -> None:
    primary = participants[0]
    try:
        row = (txn_id, tso, schema.format_participants(participants))
        await _write_record(ctx, primary, row, upsert=False)
    except pymysql.err.IntegrityError as exc:
        if exc.args and exc.args[0] == ER_DUP_ENTRY:
            # Recovery wrote a tombstone first: it decided "rolled back" for us.
            await abort_all(ctx, branches)
            raise TransactionAborted(
                f"txn {txn_id}: rolled back by in-doubt recovery before its commit record"
            ) from exc
        raise
    except Exception as exc:
        for b in branches:
            b.release(ctx, discard=True)  # detach: recovery decides from the primary's table
        raise CommitOutcomeUnknown(
            f"txn {txn_id}: writing the commit record on primary DN {primary} failed ({exc}); "
            f"the outcome is decided by whether that row exists: run `cdc cn recover`"
        ) from exc


async def _write_secondary_records(ctx, txn_id, tso, participants) -> set[int]:
    """Write the other participants' records; return the DNs where that failed."""
    text = schema.format_participants(participants)

    async def write(dn: int) -> None:
        await _write_record(ctx, dn, (txn_id, tso, text), upsert=True)

    pending = participants[1:]
    # The decision (the primary's record) is taken: a secondary record that fails (a lock wait
    # against a concurrent recovery, a DN restarting) is retried, because a branch left
    # detached blocks its DN's MergeSource until someone runs recovery.
    for attempt in range(SECONDARY_RECORD_TRIES):
        results = await asyncio.gather(*(write(dn) for dn in pending), return_exceptions=True)
        failed = [
            (dn, r) for dn, r in zip(pending, results, strict=True) if isinstance(r, BaseException)
        ]
        if not failed:
            return set()
        pending = [dn for dn, _ in failed]
        if attempt + 1 < SECONDARY_RECORD_TRIES:
            await asyncio.sleep(0.1 * 2**attempt)
    for dn, r in failed:
        log.warning("txn %s: commit record on DN %s failed (%s); left for recovery", txn_id, dn, r)
    return set(pending)


async def _commit_all(ctx: ProtocolContext, branches: list[Branch], unrecorded: set[int]) -> None:
    async def commit_one(b: Branch) -> None:
        if b.dn_id in unrecorded:
            # Never XA COMMIT a branch before its DN holds the commit record (MergeSource needs
            # the record first); detach it and let recovery write the record, then commit.
            b.release(ctx, discard=True)
            return
        try:
            await b.run(f"XA COMMIT {b.xid.sql}")
            b.state = DONE
            b.release(ctx)
        except pymysql.err.MySQLError as exc:
            log.warning("DN %s: XA COMMIT of %s failed (%s)", b.dn_id, b.xid.gtrid, exc)
            b.release(ctx, discard=True)
            await settle_detached(ctx, b.xid, "COMMIT")

    first, rest = branches[0], branches[1:]
    await commit_one(first)
    ctx.crash.reached("after_first_commit")
    await asyncio.gather(*(commit_one(b) for b in rest))
