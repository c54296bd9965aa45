"""HA of one stream of a multi-stream binlog, in the stream's process (docs/streams.md, "HA
followers"): where the leader's term began in this stream, and the gate that serves this
stream's consumers only what the followers' copies of it acknowledged (rule 9, per stream)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from binlog_writer import BinlogWriter
from cdc.config import Config
from dumper.ha.ha_node import ack_status, follower_ack_gate, save_state_term
from dumper.server import AckGate
from topology import DumperLeaseStore, TermStart, gms


def _record(config: Config, start: TermStart) -> None:
    conn = gms.connect(config.gms)
    try:
        DumperLeaseStore(conn, config.pipeline.meta_database).record_term(start)
    finally:
        conn.close()


async def lead_stream(
    config: Config, stream: int, writer: BinlogWriter, term: int
) -> AckGate | None:
    """Before stream `stream` writes in HA term `term` (its writer opened, its copy recovered):
    record where the term begins in it, as the single stream's leader does (once per term: a
    stream process restarted within the term began where its first start did), and mark the
    copy a prefix of the term. `config`: the stream's own. Returns the gate of its port."""
    start = TermStart(
        term,
        config.dumper.id,
        writer.file,
        4 if writer.recovery.started_new_file else writer.position,
        stream,
    )
    await asyncio.to_thread(_record, config, start)
    save_state_term(writer.dir, term)
    return follower_ack_gate(config.dumper, active=lambda: True)


def stream_status(status: Callable[[], dict], term: int, acks: AckGate | None) -> dict:
    """A leading stream's status with its HA part: the term, the followers' acknowledgements."""
    out = status()
    out["ha"] = {"role": "leader", "term": term, **(ack_status(acks) if acks is not None else {})}
    return out
