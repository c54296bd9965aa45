"""Who holds a served file from purge now (store/retention.py's rule): a connected dump that
reads it, a snapshot transaction's pinned position or a running SELECT's, a connection's
`@cdc_retain_from` mark, a live HA follower's acknowledged copy. The server knows them: its
sessions and its followers' acknowledgements. And where the named consumers' dumps are
(`dumps_seen`), for their holds while away (store/consumer_holds.py)."""

from __future__ import annotations

from collections.abc import Mapping

from dumper.server.dump.ack_gate import AckGate
from dumper.server.sessions import SessionHandle
from dumper.server.store.consumer_holds import UUID_VARS, Seen
from dumper.server.store.retention import RETAIN_VAR, Holder


def holders(sessions: Mapping[int, SessionHandle], acks: AckGate | None) -> list[Holder]:
    """Everyone who holds a file now: dumps, live followers' acknowledgements, retain marks."""
    out = []
    for cid, handle in list(sessions.items()):
        state = handle.state
        user = state.user.name if state.user is not None else "?"
        dump = state.dump
        if dump is not None and dump.file:
            out.append(
                Holder(
                    dump.file,
                    f"connection {cid} ({user}@{state.host}, server_id {dump.client_server_id})",
                    f"reading {dump.file}:{dump.pos}",
                )
            )
        for what, at in (("a snapshot transaction", state.pinned), ("a SELECT", state.reading)):
            if at is not None:
                out.append(
                    Holder(
                        at[0],
                        f"connection {cid} ({user}@{state.host}) in {what} at {at[0]}:{at[1]}",
                    )
                )
        mark = state.user_vars.get(RETAIN_VAR)
        if isinstance(mark, bytes):
            mark = mark.decode("utf-8", "replace")
        if isinstance(mark, str) and mark:
            out.append(Holder(mark, f"connection {cid} ({user}@{state.host}) @{RETAIN_VAR}"))
    if acks is not None:
        for sid, (file, pos, age) in acks.followers().items():
            if age <= acks.live_s:
                out.append(Holder(file, f"HA follower server_id {sid}", f"copied to {file}:{pos}"))
    return out


def dumps_seen(sessions: Mapping[int, SessionHandle], acks: AckGate | None) -> list[Seen]:
    """The running dumps of consumers (HA followers' excepted) for their holds
    (store/consumer_holds.py): who (server_id, the uuid a MySQL replica SETs), where."""
    out = []
    for handle in list(sessions.values()):
        state, dump = handle.state, handle.state.dump
        if dump is None or not dump.file:
            continue
        sid = dump.client_server_id
        if acks is not None and acks.is_follower(sid):
            continue
        uuid = next((state.user_vars[v] for v in UUID_VARS if v in state.user_vars), "")
        if isinstance(uuid, bytes):
            uuid = uuid.decode("utf-8", "replace")
        behind = 0.0 if dump.caught_up else dump.caught_up_at
        out.append(Seen(sid, str(uuid or "").strip("'\""), dump.file, dump.pos, behind))
    return out
