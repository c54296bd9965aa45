"""What the served files say about GTIDs: `@@gtid_executed` and `@@gtid_purged` (where a
COM_BINLOG_DUMP_GTID starts: dump/gtid_start.py). Everything is read from the binlog files
(their PREVIOUS_GTIDS and GTID events, `binlog_writer.gtids`), so a follower's copy answers as
its leader does."""

from __future__ import annotations

from binlog_writer import gtids
from cdc.binlog.gtid import GtidSet, sid_of
from dumper.server.store.binlog_files import BinlogFiles


class GtidState:
    def __init__(self, files: BinlogFiles, server_uuid: str) -> None:
        self.files = files
        self.sid = sid_of(server_uuid)

    def executed(self, upto: tuple[str, int] | None = None) -> GtidSet:
        """Every GTID in the files, the purged ones included (MySQL's gtid_executed); with
        `upto` (file, position), those before it (a snapshot transaction's position)."""
        # As of a position: the files up to its own, which may be archived (a read AS OF it).
        names = self.files.names() if upto is None else self.files.readable_names()
        if upto is not None and upto[0] in names:
            names = names[: names.index(upto[0]) + 1]
        for name in reversed(names):
            path = self.files.path(name)
            if path.exists():
                size = path.stat().st_size
                if upto is not None and name == upto[0]:
                    size = min(size, upto[1])
                gno = gtids.last_gno(path, size, self.sid)
                if gno is not None:
                    return GtidSet.upto(self.sid, gno)
        return GtidSet()

    def purged(self) -> GtidSet:
        """The GTIDs of files no longer here: the first file's PREVIOUS_GTIDS."""
        names = self.files.names()
        return gtids.file_previous_gtids(self.files.path(names[0])) if names else GtidSet()

    def unreadable(self) -> GtidSet:
        """The GTIDs no dump can read any more: `purged` less what the archive still holds."""
        names = self.files.readable_names()
        return gtids.file_previous_gtids(self.files.path(names[0])) if names else GtidSet()
