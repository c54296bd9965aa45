"""The mariadb flavour's GTIDs as the served files hold them: `@@gtid_binlog_pos`,
`@@gtid_binlog_state` (where a MariaDB replica's GTID dump starts: dump/mariadb_start.py). Read
from the files at each ask (their GTID_LIST and last GTID event, `binlog_writer.mariadb_gtids`),
so a follower's copy answers as its leader does."""

from __future__ import annotations

from binlog_writer import MariadbGtids
from cdc.binlog.events import DomainGtid
from cdc.binlog.mariadb_gtid import gtid_text, position_text
from dumper.server.store.binlog_files import BinlogFiles


class MariadbGtidState:
    def __init__(self, files: BinlogFiles, domain_id: int, server_id: int) -> None:
        self.files = files
        self.domain_id = domain_id
        self.layout = MariadbGtids(domain_id, server_id)

    def binlog_state(self, upto: tuple[str, int] | None = None) -> tuple[DomainGtid, ...]:
        """Per server_id of our domain the last GTID in the files, the newest last
        (`@@gtid_binlog_state`): the newest file's GTID_LIST with its last GTID. `upto` (file,
        position): as of there (a snapshot transaction's pinned position)."""
        # As of a position: the files up to its own, which may be archived (a read AS OF it).
        names = self.files.names() if upto is None else self.files.readable_names()
        if upto is not None and upto[0] in names:
            names = names[: names.index(upto[0]) + 1]
        for name in reversed(names):
            path = self.files.path(name)
            if not path.exists():
                continue
            head = self.layout.head(path)
            if head is None:
                continue  # a header being written: the file before says the same
            entries = list(head.gtid_list)
            end = self.files.complete_end(name)
            if upto is not None and name == upto[0]:
                end = min(end, upto[1])
            last = self.layout.last_gtid(path, end)
            if last is not None and last.seq_no > (entries[-1].seq_no if entries else 0):
                entries = [e for e in entries if e.server_id != last.server_id] + [last]
            return tuple(entries)
        return ()

    def variables(self, upto: tuple[str, int] | None = None) -> dict[str, str]:
        """`@@gtid_binlog_pos` (the last GTID per domain), `@@gtid_current_pos` (a master's
        is its binlog's) and `@@gtid_binlog_state`; as of `upto` when given (what
        `mariadb-dump --single-transaction --master-data --gtid` prints for its replica)."""
        state = self.binlog_state(upto)
        pos = gtid_text(state[-1]) if state else ""
        return {
            "gtid_binlog_pos": pos,
            "gtid_current_pos": pos,
            "gtid_binlog_state": position_text(state),
        }
