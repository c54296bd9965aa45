"""The HA part of `cdc status`: a leader's term and its followers' acknowledgements, a
follower's copy and how far behind the leader it is."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dumper.ha.copies import end_of
from dumper.ha.election import order
from dumper.server import AckGate

if TYPE_CHECKING:
    from dumper.ha.ha_node import HaNode


def ha_status(node: HaNode) -> dict:
    """The HA part of `cdc status`."""
    out = {"dumper_id": node.id, "role": node.role, "term": node.term, "address": node.address}
    if node.role == "leader":
        out["took_over_at"] = node.took_over_at
        if node.acks is not None:
            out.update(ack_status(node.acks))
        if node.bounds is not None and node.bounds.recorded is not None:
            file, position = node.bounds.recorded
            out["served_bound"] = {
                "file": file,
                "position": position,
                "records": node.bounds.records,  # GMS writes of the bound by this process
            }
        return out
    if node.hold is not None and node.hold.waiting is not None:
        # It would take over, but holds less than the last leader served (its role may still
        # say follower: of a leader that is gone).
        out["takeover_waits_for"] = node.hold.waiting
    if len(node.copies) > 1:
        base = node.config.dumper.binlog_base
        out["copies"] = [
            dict(zip(("stream", "file", "position"), (c.stream, *end_of(c, base)), strict=True))
            for c in node.copies
        ]
    p = node.progress
    out.update(
        leader=p.leader,
        file=p.file,
        position=p.position,
        leader_file=p.leader_file,
        leader_position=p.leader_position,
        # The leader reports every renew interval: a follower may be ahead of that report.
        behind_bytes=(
            max(0, p.leader_position - p.position)
            if p.leader_file == p.file and p.leader_file
            else None
        ),
        behind_files=(
            order(p.leader_file, 0)[0] - order(p.file, 0)[0] if p.leader_file and p.file else None
        ),
        last_copy_at=p.last_copy_at,
    )
    return out


def ack_status(gate: AckGate) -> dict:
    """What a leader's ack gate says in `cdc status`: each follower's acknowledged end."""
    return {
        "acknowledged": {
            str(sid): {"file": f, "position": p, "age_s": round(age, 3)}
            for sid, (f, p, age) in gate.followers().items()
        },
        "ack_gate_degraded": gate.degraded,
        "ack_gate_gave_up": gate.degraded_count,
    }
