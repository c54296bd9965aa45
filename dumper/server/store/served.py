"""The served global binlog as one value: its files, the writer's progress, and the GTIDs the
files hold by the configured flavour (MySQL's sid, or MariaDB's domain), with the variables
read from them at each ask."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from cdc.config import DumperConfig
from dumper.server.store.binlog_files import BinlogFiles
from dumper.server.store.gtid_state import GtidState
from dumper.server.store.mariadb_gtid_state import MariadbGtidState
from dumper.server.store.notifiers import Notifier

# The variables read from the files (what GTIDs they hold), not fixed at start.
LIVE_VARIABLES = frozenset(
    {"gtid_executed", "gtid_purged", "gtid_binlog_pos", "gtid_current_pos", "gtid_binlog_state"}
)


@dataclass(slots=True)
class ServedBinlog:
    files: BinlogFiles
    notifier: Notifier
    # The global binlog's server_uuid (the cluster's, from the GMS): the sid of its GTIDs.
    # "" = files without GTIDs (tests of the protocol on generated files): GTID_MODE OFF.
    server_uuid: str = ""
    gtid_state: GtidState | None = None
    # The mariadb flavour's GTIDs (`[dumper] flavor = "mariadb"`; then gtid_state is None).
    mariadb_gtids: MariadbGtidState | None = None

    @classmethod
    def of(
        cls, config: DumperConfig, files: BinlogFiles, notifier: Notifier, server_uuid: str = ""
    ) -> ServedBinlog:
        """The files as `config`'s flavour serves them."""
        served = cls(files, notifier, server_uuid)
        if config.flavor == "mariadb":
            served.mariadb_gtids = MariadbGtidState(files, config.gtid_domain_id, config.server_id)
        elif server_uuid:
            served.gtid_state = GtidState(files, server_uuid)
        return served

    def live_variables(
        self, names: Collection[str] = LIVE_VARIABLES, upto: tuple[str, int] | None = None
    ) -> dict[str, str]:
        """The variables read from the files at each ask (what GTIDs they hold); of `names`
        only what they need is read (SHOW MASTER STATUS wants gtid_executed alone). `upto`: a
        session's pinned position (a snapshot transaction): the GTIDs as of there."""
        if self.mariadb_gtids is not None:
            return dict(self.mariadb_gtids.variables(upto))  # one read gives all three
        out: dict[str, str] = {}
        if self.gtid_state is not None:
            if "gtid_executed" in names:
                out["gtid_executed"] = str(self.gtid_state.executed(upto))
            if "gtid_purged" in names:
                out["gtid_purged"] = str(self.gtid_state.purged())
        return out
