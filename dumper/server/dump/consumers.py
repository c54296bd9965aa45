"""The dump clients of a server, as plain JSON-able records: for `cdc status` and the metrics
(docs/dumper.md "Consumers"). The server process sends them to the leader with its reports
(`serve_process.py`); an in-process server is asked directly."""

from __future__ import annotations

import time
from collections.abc import Mapping

from dumper.server.dump.ack_gate import AckGate
from dumper.server.sessions import SessionHandle
from dumper.server.store.binlog_files import BinlogFiles


def consumers(
    sessions: Mapping[int, SessionHandle], files: BinlogFiles, acks: AckGate | None
) -> list[dict]:
    """One record per running COM_BINLOG_DUMP: who, where, how much it got and how far it is
    behind the end of the files (`lag_bytes`, `lag_files`) and since when (`lag_s`: 0 while it
    has everything it may be sent; else the time since it last had)."""
    dumps = [(cid, h.state) for cid, h in list(sessions.items()) if h.state.dump is not None]
    if not dumps:
        return []
    sized = files.readable_files()  # a dump may read an archived file
    order = {f.name: i for i, f in enumerate(sized)}
    now = time.time()
    out = []
    for cid, state in dumps:
        dump = state.dump
        assert dump is not None
        at = order.get(dump.file)
        if at is None:
            lag_bytes, lag_files = 0, 0  # not started yet (or its file is gone)
        else:
            lag_bytes = max(sized[at].size - dump.pos, 0) + sum(f.size for f in sized[at + 1 :])
            lag_files = len(sized) - 1 - at
        sid = dump.client_server_id
        out.append(
            {
                "id": cid,
                "user": state.user.name if state.user is not None else "",
                "host": state.host,
                "server_id": sid,
                "follower": acks.is_follower(sid) if acks is not None else False,
                "file": dump.file,
                "position": dump.pos,
                "events": dump.events_sent,
                "bytes": dump.bytes_sent,
                "lag_bytes": lag_bytes,
                "lag_files": lag_files,
                "lag_s": round(0.0 if dump.caught_up else now - dump.caught_up_at, 3),
                "connected_s": round(now - dump.since, 3),
            }
        )
    return out
