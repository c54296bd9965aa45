"""Table definitions the CN owns: the GMS catalogue and the private `__cdc__` tables on every DN.

These definitions are a contract with MergeSource (which parses the private rows from DN
binlogs): keep them simple and change them only together with docs/cn.md.
"""

from __future__ import annotations

PRIVATE_DB = "__cdc__"
TX_LOG = "__cdc_tx_log__"
HEARTBEAT = "__cdc_heartbeat__"
INSTRUCTION = "__cdc_instruction__"
DDL_RECORD = "__cdc_ddl_record__"

# Instruction types written to __cdc_instruction__.type.
CDC_START = "CdcStart"
STORAGE_CHANGE = "StorageChange"
META_CHANGE = "MetaChange"
FLUSH_LOGS = "FlushLogs"
INSTRUCTION_TYPES = (CDC_START, STORAGE_CHANGE, META_CHANGE, FLUSH_LOGS)

PRIVATE_TABLES = (
    f"CREATE DATABASE IF NOT EXISTS `{PRIVATE_DB}` CHARACTER SET utf8mb4",
    # One row per CN transaction and participant DN. The primary's row is the commit decision.
    # aborted=1 marks a tombstone written by recovery (commit_tso is then the recovery's TSO and
    # participants is empty): it blocks a late commit record and means "rolled back".
    f"""CREATE TABLE IF NOT EXISTS `{PRIVATE_DB}`.`{TX_LOG}` (
  txn_id BIGINT UNSIGNED NOT NULL,
  commit_tso BIGINT UNSIGNED NOT NULL,
  participants VARCHAR(255) NOT NULL,
  aborted TINYINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (txn_id),
  KEY commit_tso (commit_tso)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    # One row per CN process (cn_id = CN instance id), updated by every heartbeat.
    f"""CREATE TABLE IF NOT EXISTS `{PRIVATE_DB}`.`{HEARTBEAT}` (
  cn_id BIGINT UNSIGNED NOT NULL,
  txn_id BIGINT UNSIGNED NOT NULL,
  sent_at DATETIME(6) NOT NULL,
  PRIMARY KEY (cn_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    f"""CREATE TABLE IF NOT EXISTS `{PRIVATE_DB}`.`{INSTRUCTION}` (
  id BIGINT UNSIGNED NOT NULL,
  type VARCHAR(32) NOT NULL,
  content LONGTEXT NOT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
    f"""CREATE TABLE IF NOT EXISTS `{PRIVATE_DB}`.`{DDL_RECORD}` (
  id BIGINT UNSIGNED NOT NULL,
  db VARCHAR(64) NOT NULL,
  tbl VARCHAR(64) NOT NULL,
  ddl LONGTEXT NOT NULL,
  schema_json LONGTEXT NOT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
)


def gms_tables(catalogue_db: str) -> tuple[str, ...]:
    """The CN catalogue in GMS (`cn_catalog` by default)."""
    c = f"`{catalogue_db}`"
    return (
        f"CREATE DATABASE IF NOT EXISTS {c} CHARACTER SET utf8mb4",
        # The last TSO handed out by any CN (see docs/cn.md, "TSO").
        f"CREATE TABLE IF NOT EXISTS {c}.cn_tso (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, "
        "tso BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB",
        f"INSERT IGNORE INTO {c}.cn_tso (id, tso) VALUES (1, 0)",
        # One row per CN process start; txn_id = instance_id << 32 | local sequence.
        f"CREATE TABLE IF NOT EXISTS {c}.cn_instance (instance_id BIGINT UNSIGNED NOT NULL "
        "AUTO_INCREMENT PRIMARY KEY, server_id INT UNSIGNED NOT NULL, host VARCHAR(255) NOT NULL, "
        "pid INT UNSIGNED NOT NULL, started_at DATETIME(6) NOT NULL) ENGINE=InnoDB",
        # Storage DNs in join order.
        f"CREATE TABLE IF NOT EXISTS {c}.cn_storage (dn_id INT UNSIGNED NOT NULL PRIMARY KEY, "
        "seq INT UNSIGNED NOT NULL) ENGINE=InnoDB",
        f"CREATE TABLE IF NOT EXISTS {c}.cn_table (db VARCHAR(64) NOT NULL, tbl VARCHAR(64) "
        "NOT NULL, kind VARCHAR(16) NOT NULL, shard_key VARCHAR(64) NULL, schema_json LONGTEXT "
        "NOT NULL, PRIMARY KEY (db, tbl)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        f"CREATE TABLE IF NOT EXISTS {c}.cn_partition (db VARCHAR(64) NOT NULL, tbl VARCHAR(64) "
        "NOT NULL, part INT UNSIGNED NOT NULL, dn_id INT UNSIGNED NOT NULL, "
        "PRIMARY KEY (db, tbl, part)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        # Key/value state: e.g. the TSO of the CdcStart marker.
        f"CREATE TABLE IF NOT EXISTS {c}.cn_state (k VARCHAR(64) NOT NULL PRIMARY KEY, "
        "v LONGTEXT NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        # Where each storage DN is: a CN started before a DN was added learns it here.
        f"CREATE TABLE IF NOT EXISTS {c}.cn_dn (dn_id INT UNSIGNED NOT NULL PRIMARY KEY, "
        "host VARCHAR(255) NOT NULL, port INT UNSIGNED NOT NULL, user VARCHAR(128) NOT NULL, "
        "password VARCHAR(255) NOT NULL, server_id INT UNSIGNED NOT NULL, name VARCHAR(64) "
        "NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        # Several CN processes (cdc_equipment/cn/membership.py): each one's lease and applied catalogue
        # version; the catalogue version, the frozen partitions and the change lock.
        f"CREATE TABLE IF NOT EXISTS {c}.cn_member (instance_id BIGINT UNSIGNED NOT NULL "
        "PRIMARY KEY, server_id INT UNSIGNED NOT NULL, host VARCHAR(255) NOT NULL, "
        "pid INT UNSIGNED NOT NULL, lease_until DATETIME(6) NOT NULL, "
        "acked_version BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB",
        f"CREATE TABLE IF NOT EXISTS {c}.cn_change (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, "
        "version BIGINT UNSIGNED NOT NULL, frozen LONGTEXT NOT NULL, owner BIGINT UNSIGNED NULL, "
        "what VARCHAR(255) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        f"INSERT IGNORE INTO {c}.cn_change (id, version, frozen, owner, what) "
        "VALUES (1, 0, '[]', NULL, '')",
        # The job log (cdc_equipment/cn/job_log.py): every cluster change, recorded before its first step,
        # with the step reached, so that a live CN finishes (or rolls back) a dead owner's.
        f"CREATE TABLE IF NOT EXISTS {c}.cn_job (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT "
        "PRIMARY KEY, kind VARCHAR(16) NOT NULL, what VARCHAR(255) NOT NULL, spec LONGTEXT "
        "NOT NULL, steps LONGTEXT NOT NULL, step VARCHAR(64) NOT NULL, detail LONGTEXT NOT NULL, "
        "state VARCHAR(16) NOT NULL, owner BIGINT UNSIGNED NOT NULL, reason TEXT NOT NULL, "
        "result LONGTEXT NOT NULL, reported TINYINT UNSIGNED NOT NULL DEFAULT 0, "
        "created_at DATETIME(6) NOT NULL, updated_at DATETIME(6) NOT NULL, KEY state (state)) "
        "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
    )


# Commit-record statements (the same on every DN; values are bound by the driver).
INSERT_PRIMARY_RECORD = (
    f"INSERT INTO `{PRIVATE_DB}`.`{TX_LOG}` (txn_id, commit_tso, participants, aborted) "
    "VALUES (%s, %s, %s, 0)"
)
# A secondary record overwrites a recovery tombstone: the primary's row already decided "commit".
UPSERT_RECORD = (
    f"INSERT INTO `{PRIVATE_DB}`.`{TX_LOG}` (txn_id, commit_tso, participants, aborted) "
    "VALUES (%s, %s, %s, 0) ON DUPLICATE KEY UPDATE commit_tso = VALUES(commit_tso), "
    "participants = VALUES(participants), aborted = 0"
)


def record_statement(rows: int, upsert: bool) -> str:
    """INSERT_PRIMARY_RECORD / UPSERT_RECORD for `rows` records (record_batch.py)."""
    head, _, tail = (UPSERT_RECORD if upsert else INSERT_PRIMARY_RECORD).partition(
        "VALUES (%s, %s, %s, 0)"
    )
    return head + "VALUES " + ", ".join(["(%s, %s, %s, 0)"] * rows) + tail


INSERT_TOMBSTONE = (
    f"INSERT IGNORE INTO `{PRIVATE_DB}`.`{TX_LOG}` (txn_id, commit_tso, participants, aborted) "
    "VALUES (%s, %s, '', 1)"
)
SELECT_RECORD = (
    f"SELECT commit_tso, participants, aborted FROM `{PRIVATE_DB}`.`{TX_LOG}` WHERE txn_id = %s"
)


# What a committed CN transaction was, from the private rows it wrote (recovery logs it in the
# ground truth): a marker's type, "ddl", "heartbeat" (this txn is still the CN's last beat: its
# dead CN writes no later one), or no row for an ordinary transaction.
SELECT_KIND = (
    f"SELECT type FROM `{PRIVATE_DB}`.`{INSTRUCTION}` WHERE id = %s "
    f"UNION ALL SELECT 'ddl' FROM `{PRIVATE_DB}`.`{DDL_RECORD}` WHERE id = %s "
    f"UNION ALL SELECT 'heartbeat' FROM `{PRIVATE_DB}`.`{HEARTBEAT}` WHERE txn_id = %s"
)


def format_participants(dns: list[int]) -> str:
    return ",".join(str(d) for d in dns)


def parse_participants(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]
