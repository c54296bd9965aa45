"""Where a MariaDB replica's GTID dump starts and ends, from the mariadb flavour's GTIDs in the
served files (`store/mariadb_gtid_state.py`).

A MariaDB replica with `MASTER_USE_GTID=slave_pos` sets `@slave_connect_state` (its GTID
position, one `domain-server_id-seq_no` per domain), `@slave_gtid_strict_mode` and
`@slave_gtid_ignore_duplicates`, then sends a plain COM_BINLOG_DUMP. MariaDB's master
(sql/sql_repl.cc) checks the position against its binlog state (`check_slave_start_position`),
takes the newest file whose GTID_LIST the position contains (`gtid_find_binlog_file`,
`contains_all_slave_gtid`) and skips the groups up to the replica's GTID. Our numbering is
gapless in one domain, so that skip is a look-up: the dump starts at the GTID event after the
replica's (`seq_no + 1`), or at the file's start when the replica's GTID is the last before it,
as a file/pos dump from there. Domains other than ours in the position are not ours to check
(MariaDB too lets them be: "this domain is served by a different master")."""

from __future__ import annotations

from cdc.binlog.errors import CodecError
from cdc.binlog.events import DomainGtid
from cdc.binlog.header import server_id
from cdc.binlog.mariadb_gtid import gtid_text, parse_position
from dumper.server.dump.mariadb_until import GtidUntil
from dumper.server.dump.request import DumpError
from dumper.server.store.binlog_files import START
from dumper.server.store.mariadb_gtid_state import MariadbGtidState

# MariaDB 10.11's texts (sql/sql_repl.cc), sent as error 1236 except the malformed one (1105).
MSG_MALFORMED = (
    "Out of memory or malformed slave request when obtaining start position from GTID state"
)
MSG_UNTIL_MALFORMED = (
    "Out of memory or malformed slave request when obtaining UNTIL position sent from slave"
)
MSG_NOT_IN_BINLOG = (
    "Error: connecting slave requested to start from GTID {gtid}, which is not in the "
    "master's binlog"
)
MSG_NOT_IN_BINLOG_DIVERGED = (
    "Error: connecting slave requested to start from GTID {gtid}, which is not in the "
    "master's binlog. Since the master's binlog contains GTIDs with higher sequence numbers, "
    "it probably means that the slave has diverged due to executing extra erroneous "
    "transactions"
)
MSG_PURGED = (
    "Could not find GTID state requested by slave in any binlog files. Probably the slave "
    "state is too old and required binlog files have been purged."
)
MSG_HOLE = (
    "The binlog on the master is missing the GTID {gtid} requested by the slave (even though "
    "both a prior and a subsequent sequence number does exist), and GTID strict mode is "
    "enabled"
)


def dump_start(
    state: MariadbGtidState,
    connect_state: str,
    *,
    strict: bool = False,
    ignore_duplicates: bool = False,
) -> tuple[str, int]:
    """(file, position) a dump for a replica at `connect_state` starts at; DumpError with
    MariaDB's text when we cannot serve it."""
    try:
        wanted = parse_position(connect_state)
    except CodecError:
        raise DumpError(MSG_MALFORMED, 1105) from None
    names = state.files.readable_names()  # archived files included
    if not names:
        raise DumpError("Could not find first log file name in binary log index file")
    ours = next((g for g in wanted if g.domain_id == state.domain_id), None)
    served = state.binlog_state()
    if ours is not None and not any(
        e.server_id == ours.server_id and e.seq_no >= ours.seq_no for e in served
    ):
        newest = served[-1].seq_no if served else 0
        if ignore_duplicates and newest < ours.seq_no and served:
            # A multi-path replica: it may have had these through another master and
            # drops what it holds; so serve from the end.
            return _end(state, names)
        text = MSG_NOT_IN_BINLOG_DIVERGED if served and newest >= ours.seq_no else MSG_NOT_IN_BINLOG
        raise DumpError(text.format(gtid=gtid_text(ours)))
    for i in range(len(names) - 1, -1, -1):
        head = state.layout.head(state.files.path(names[i]))
        if head is not None and _contains(ours, head.gtid_list):
            break
    else:
        raise DumpError(MSG_PURGED)
    if ours is None or (head.gtid_list and head.gtid_list[-1] == ours):
        return names[i], START  # the replica's GTID is the last before this file
    if strict and not _is_ours(state, names[i:], ours):
        # MariaDB skips to this server_id's next GTID after seq_no: a hole in strict mode.
        raise DumpError(MSG_HOLE.format(gtid=gtid_text(ours)))
    for name in names[i:]:
        at = state.layout.locate(state.files.path(name), ours.seq_no + 1)
        if at is not None:
            return name, at
    return _end(state, names)


def until(state: MariadbGtidState, connect_state: str, until_text: str) -> GtidUntil:
    """Where a dump from `connect_state` with `@slave_until_gtid = until_text` ends
    (`mariadb_until`); only our domain's GTID in it counts (its seq_no)."""
    try:
        until = parse_position(until_text)
        start = parse_position(connect_state)
    except CodecError:
        raise DumpError(MSG_UNTIL_MALFORMED, 1105) from None
    ours = next((g for g in until if g.domain_id == state.domain_id), None)
    at = next((g for g in start if g.domain_id == state.domain_id), None)
    reached = ours is not None and at is not None and at.seq_no >= ours.seq_no
    return GtidUntil(state.layout, ours, reached)


def _is_ours(state: MariadbGtidState, names: list[str], gtid: DomainGtid) -> bool:
    """Whether the GTID with gtid's seq_no in these files is that GTID (its server_id)."""
    for name in names:
        path = state.files.path(name)
        at = state.layout.locate(path, gtid.seq_no)
        if at is not None:
            return _server_id(path, at) == gtid.server_id
    return False


def _end(state: MariadbGtidState, names: list[str]) -> tuple[str, int]:
    last = names[-1]
    return last, max(state.files.complete_end(last), START)


def _server_id(path, at: int) -> int:
    with open(path, "rb") as f:
        f.seek(at)
        return server_id(f.read(9), 0)


def _contains(ours: DomainGtid | None, gtid_list: tuple[DomainGtid, ...]) -> bool:
    """MariaDB's `contains_all_slave_gtid` for our one domain: whether a file whose GTID_LIST
    is `gtid_list` holds the first transaction after `ours` (None: the domain's very first)."""
    for i, e in enumerate(gtid_list):
        if ours is None:
            return False  # the replica needs the domain's beginning: an earlier file
        if e.server_id == ours.server_id and ours.seq_no <= e.seq_no:
            if ours.seq_no < e.seq_no or i + 1 < len(gtid_list):
                return False
    return True
