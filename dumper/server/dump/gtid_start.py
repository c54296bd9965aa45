"""Where a COM_BINLOG_DUMP_GTID starts, from what the served files say about GTIDs
(`store/gtid_state.py`), and the packet's parsing.

A dump starts at the first transaction of this server's sid that the client's set lacks:
the client holds `sid:1-k`, it gets `sid:k+1` and everything after it, less the transactions
its set holds after a gap (`gtid_skip`, as MySQL's dump thread does). GTIDs of other sids in
the client's set are not ours and do not matter."""

from __future__ import annotations

import struct

from binlog_writer import gtids
from cdc.binlog.errors import CodecError
from cdc.binlog.gtid import GtidSet
from dumper.server.dump.gtid_skip import ExcludedGtids
from dumper.server.dump.request import DumpError, DumpRequest
from dumper.server.store.binlog_files import START
from dumper.server.store.gtid_state import GtidState

# MySQL 8.0's texts for ER_SOURCE_HAS_PURGED_REQUIRED_GTIDS / ER_REPLICA_HAS_MORE_GTIDS_THAN_SOURCE,
# sent as error 1236 (clients and operators match on them).
MSG_PURGED = (
    "Cannot replicate because the source purged required binary logs. Replicate the missing "
    "transactions from elsewhere, or provision a new replica from backup. Consider increasing "
    "the source's binary log expiration period. The GTID set sent by the replica is '{sent}', "
    "and the missing transactions are '{missing}'"
)
MSG_MORE = (
    "Replica has more GTIDs than the source has, using the source's SERVER_UUID. This may "
    "indicate that the end of the binary log was truncated or that the last binary log file "
    "was lost, e.g., after a power or disk failure when sync_binlog != 1. The source may or "
    "may not have rolled back transactions that were already replicated to the replica. "
    "Suggest to replicate any transactions that source has rolled back from replica to "
    "source, and/or commit empty transactions on source to account for transactions that "
    "have been committed on source but are not included in GTID_EXECUTED."
)


def dump_start(state: GtidState, client: GtidSet) -> tuple[str, int, ExcludedGtids | None]:
    """(file, position) of the first transaction `client` lacks in `state`'s files, and the
    GTIDs it holds after that (not to be sent); DumpError (1236) if it lacks purged ones or holds some
    this server never wrote."""
    sid = state.sid
    executed = state.executed()
    if client.last(sid) > executed.last(sid):
        raise DumpError(MSG_MORE)
    missing = client.missing(sid, state.unreadable().last(sid))
    if missing:
        raise DumpError(MSG_PURGED.format(sent=brief(str(client)), missing=brief(str(missing))))
    have = client.prefix_end(sid)
    exclude = ExcludedGtids.after_prefix(client, sid)
    names = state.files.readable_names()  # archived files included
    first = 0  # the newest file that starts at or before the client's end
    for i in range(len(names) - 1, -1, -1):
        if gtids.file_previous_gtids(state.files.path(names[i])).last(sid) <= have:
            first = i
            break
    for name in names[first:]:
        at = gtids.locate(state.files.path(name), sid, have + 1)
        if at is not None:
            return name, at, exclude
    if not names:
        raise DumpError("Could not find first log file name in binary log index file")
    last = names[-1]
    # Nothing after the client's set yet: follow from the end of what is written.
    return last, max(state.files.complete_end(last), START), None


def brief(text: str, limit: int = 200) -> str:
    """A GTID set's text for an error or a log line, cut: a client's set may hold a million
    intervals (MySQL's error messages hold 512 bytes)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def parse_dump_gtid(body: bytes) -> tuple[DumpRequest, GtidSet]:
    """COM_BINLOG_DUMP_GTID after the command byte: flags (2), server_id (4), file name size
    (4) and name, position (8), then the size (4) and encoding of the client's GTID set
    (present with flag BINLOG_THROUGH_GTID; some clients send it without the flag)."""
    try:
        flags, server_id, name_len = struct.unpack_from("<HII", body, 0)
        at = 10 + name_len
        name = body[10:at].rstrip(b"\0").decode("utf-8", "replace")
        (pos,) = struct.unpack_from("<Q", body, at)
        at += 8
        gtid_set = GtidSet()
        if len(body) >= at + 4:
            (size,) = struct.unpack_from("<I", body, at)
            if len(body) < at + 4 + size:
                raise CodecError(f"GTID set of {size} bytes in a packet of {len(body)}")
            gtid_set = GtidSet.decode(body[at + 4 : at + 4 + size])
    except (struct.error, CodecError) as exc:
        raise DumpError(f"malformed COM_BINLOG_DUMP_GTID packet: {exc}", 1105) from None
    return DumpRequest(name, pos, flags, server_id), gtid_set
