"""Versioned migrations of the CDC's own schema in the GMS (database `cdc_meta` by default).

Each migration is a list of statements applied once, in order, under a GMS named lock so that
several CDC processes starting together migrate exactly once. Never edit a released migration:
add a new one.
"""

from __future__ import annotations

from dataclasses import dataclass

import pymysql

LOCK_TIMEOUT_S = 30


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "topology and logical schema history, file index, checkpoints, dumper lease",
        (
            # One row per topology change, keyed by the marker that caused it (idempotent replay).
            """CREATE TABLE binlog_topology_history (
                id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY,
                tso BIGINT UNSIGNED NOT NULL,
                kind VARCHAR(32) NOT NULL,
                instruction_id VARCHAR(128) NOT NULL,
                content LONGTEXT NOT NULL,
                created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
                UNIQUE KEY uk_instruction (instruction_id),
                KEY k_tso (tso)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
            """CREATE TABLE binlog_logic_meta_history (
                id BIGINT UNSIGNED AUTO_INCREMENT PRIMARY KEY,
                tso BIGINT UNSIGNED NOT NULL,
                db_name VARCHAR(64) NOT NULL,
                table_name VARCHAR(64) NOT NULL,
                ddl LONGTEXT NOT NULL,
                table_schema LONGTEXT NOT NULL,
                instruction_id VARCHAR(128) NOT NULL,
                created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
                UNIQUE KEY uk_instruction (instruction_id),
                KEY k_table_tso (db_name, table_name, tso)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
            """CREATE TABLE binlog_file_index (
                file_name VARCHAR(64) NOT NULL PRIMARY KEY,
                first_tso BIGINT UNSIGNED NULL,
                last_tso BIGINT UNSIGNED NULL,
                size BIGINT UNSIGNED NOT NULL DEFAULT 0,
                updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
            """CREATE TABLE binlog_checkpoint (
                stream VARCHAR(64) NOT NULL PRIMARY KEY,
                file_name VARCHAR(64) NOT NULL,
                position BIGINT UNSIGNED NOT NULL,
                tso BIGINT UNSIGNED NOT NULL DEFAULT 0,
                updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
            """CREATE TABLE binlog_dumper_lease (
                name VARCHAR(64) NOT NULL PRIMARY KEY,
                holder VARCHAR(128) NOT NULL,
                address VARCHAR(128) NOT NULL DEFAULT '',
                epoch BIGINT UNSIGNED NOT NULL DEFAULT 0,
                expires_at TIMESTAMP(6) NOT NULL
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        ),
    ),
    Migration(
        2,
        "dumper HA: members, terms, checkpoint history",
        (
            # Each dumper process reports its role and how far its copy reaches (cdc status,
            # and a follower takes over only if no live peer holds more).
            """CREATE TABLE binlog_dumper_member (
                dumper_id INT NOT NULL PRIMARY KEY,
                address VARCHAR(128) NOT NULL,
                role VARCHAR(16) NOT NULL,
                term BIGINT UNSIGNED NOT NULL DEFAULT 0,
                file_name VARCHAR(64) NOT NULL DEFAULT '',
                position BIGINT UNSIGNED NOT NULL DEFAULT 0,
                updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
            # Where each leader term began writing: a copy that holds bytes of an older term
            # past this point is truncated to it before it follows the new leader.
            """CREATE TABLE binlog_dumper_term (
                term BIGINT UNSIGNED NOT NULL PRIMARY KEY,
                dumper_id INT NOT NULL,
                file_name VARCHAR(64) NOT NULL,
                position BIGINT UNSIGNED NOT NULL,
                started_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
            # Checkpoints keyed by the global key of the watermark they were taken at: a leader
            # whose copy ends at key K resumes from the newest checkpoint at or below K.
            """CREATE TABLE binlog_checkpoint_history (
                stream VARCHAR(64) NOT NULL,
                wm_tso BIGINT UNSIGNED NOT NULL,
                wm_kind TINYINT UNSIGNED NOT NULL,
                wm_dn INT NOT NULL,
                wm_seq BIGINT UNSIGNED NOT NULL,
                file_name VARCHAR(64) NOT NULL,
                position BIGINT UNSIGNED NOT NULL,
                tso BIGINT UNSIGNED NOT NULL DEFAULT 0,
                created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
                PRIMARY KEY (stream, wm_tso, wm_kind, wm_dn, wm_seq),
                KEY k_created (created_at)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        ),
    ),
    Migration(
        3,
        "the global binlog's server_uuid (the sid of its GTIDs)",
        (
            # One row: made once by the first dumper (INSERT IGNORE), read by every other one,
            # so that all HA dumpers number transactions under the same sid.
            """CREATE TABLE binlog_server_identity (
                id TINYINT UNSIGNED NOT NULL PRIMARY KEY,
                server_uuid CHAR(36) NOT NULL,
                created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        ),
    ),
    Migration(
        4,
        "dumper HA per stream: where each term began in each stream",
        (
            # With `[dumper] streams` > 1 a term begins in every stream at a place of its own
            # (each stream's writer recovers its copy): a follower cuts each stream's copy back
            # to its own start (docs/streams.md, "HA followers").
            """CREATE TABLE binlog_dumper_stream_term (
                term BIGINT UNSIGNED NOT NULL,
                stream INT NOT NULL,
                dumper_id INT NOT NULL,
                file_name VARCHAR(64) NOT NULL,
                position BIGINT UNSIGNED NOT NULL,
                started_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
                PRIMARY KEY (term, stream)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        ),
    ),
    Migration(
        5,
        "dumper HA per stream: each member's copy end in each stream",
        (
            # With several followers of a multi-stream dumper the election compares the copies
            # stream by stream (dumper/ha/election.py); binlog_dumper_member keeps their sum.
            """CREATE TABLE binlog_dumper_member_stream (
                dumper_id INT NOT NULL,
                stream INT NOT NULL,
                file_name VARCHAR(64) NOT NULL DEFAULT '',
                position BIGINT UNSIGNED NOT NULL DEFAULT 0,
                PRIMARY KEY (dumper_id, stream)
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4""",
        ),
    ),
    Migration(
        6,
        "dumper HA: how far a term's degraded ack gate may serve",
        (
            # A leader whose ack gate gave up (no follower acknowledged) records how far it
            # may serve before it serves past its followers' copies; a candidate whose copy
            # ends before the newest term's bound does not take over (docs/dumper.md, "A
            # degraded gate's bound"). NULL: the term's gate never served past the copies.
            """ALTER TABLE binlog_dumper_term
                ADD COLUMN IF NOT EXISTS served_file VARCHAR(64) NULL,
                ADD COLUMN IF NOT EXISTS served_position BIGINT UNSIGNED NULL""",
        ),
    ),
    Migration(
        7,
        "dumper HA per stream: how far a term's degraded stream gate may serve",
        (
            # With `[dumper] streams` > 1 each leading stream process holds the gate of its own
            # port and records its bound in its stream's row of the term (docs/streams.md, "HA
            # followers"); a candidate behind the bound of any stream does not take over.
            """ALTER TABLE binlog_dumper_stream_term
                ADD COLUMN IF NOT EXISTS served_file VARCHAR(64) NULL,
                ADD COLUMN IF NOT EXISTS served_position BIGINT UNSIGNED NULL""",
        ),
    ),
)


class MigrationError(RuntimeError):
    """The CDC schema in the GMS could not be brought to the current version."""


def current_version(conn: pymysql.Connection, database: str) -> int:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema=%s AND table_name='binlog_schema_version'",
            (database,),
        )
        if not cur.fetchone()[0]:
            return 0
        cur.execute(f"SELECT COALESCE(MAX(version), 0) FROM `{database}`.binlog_schema_version")
        return int(cur.fetchone()[0])


def migrate(conn: pymysql.Connection, database: str = "cdc_meta") -> list[int]:
    """Bring `database` to the newest version; returns the versions applied now (maybe none)."""
    latest = MIGRATIONS[-1].version
    with conn.cursor() as cur:
        cur.execute("SELECT GET_LOCK(%s, %s)", (f"{database}.migrate", LOCK_TIMEOUT_S))
        if cur.fetchone()[0] != 1:
            raise MigrationError(
                f"could not take the migration lock on {database} within {LOCK_TIMEOUT_S}s"
            )
        try:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}` DEFAULT CHARACTER SET utf8mb4")
            cur.execute(
                f"""CREATE TABLE IF NOT EXISTS `{database}`.binlog_schema_version (
                    version INT NOT NULL PRIMARY KEY,
                    description VARCHAR(255) NOT NULL,
                    applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
                ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"""
            )
            have = current_version(conn, database)
            if have > latest:
                raise MigrationError(
                    f"{database} is at schema version {have}, newer than this program knows ({latest}): upgrade cdc"
                )
            applied = []
            cur.execute(f"USE `{database}`")
            for m in MIGRATIONS:
                if m.version <= have:
                    continue
                # MariaDB DDL is not transactional: each statement must be safe to re-run after a
                # crash between two of them, hence the existence check per table.
                for sql in m.statements:
                    try:
                        cur.execute(sql)
                    except pymysql.err.OperationalError as exc:
                        if exc.args[0] != 1050:  # table already exists
                            raise
                cur.execute(
                    "INSERT INTO binlog_schema_version (version, description) VALUES (%s, %s)",
                    (m.version, m.description),
                )
                applied.append(m.version)
            return applied
        finally:
            cur.execute("SELECT RELEASE_LOCK(%s)", (f"{database}.migrate",))
