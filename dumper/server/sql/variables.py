"""Server variables the Dumper answers (`SELECT @@x`, `SHOW VARIABLES`): fixed MySQL 5.7-like
values describing the served binlog (ROW, FULL, CRC32), plus the Connector/J init-query list."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

from cdc.config import DumperConfig
from dumper.server.sessions import VarValue

# @@server_uuid of a server on files without GTIDs (the global binlog's comes from the GMS).
NO_SERVER_UUID = "00000000-0000-0000-0000-000000000000"


def server_variables(config: DumperConfig, server_uuid: str = "") -> dict[str, VarValue]:
    """Global variables, keyed by lower-case name. With a `server_uuid` the files carry
    GTIDs (gtid_executed and gtid_purged are read from them at each ask:
    `ServedBinlog.live_variables`). The mariadb flavour has MariaDB GTIDs instead (its
    gtid_binlog_pos, gtid_current_pos and gtid_binlog_state are read from the files)."""
    mariadb = config.flavor == "mariadb"
    gtids = "ON" if server_uuid and not mariadb else "OFF"
    tz = time.strftime("%Z") or "UTC"
    return {
        # identity
        "server_id": config.server_id,
        "server_uuid": server_uuid or NO_SERVER_UUID,
        "version": config.version,
        "version_comment": "global binlog server (cdc dumper)",
        "version_compile_os": "Linux",
        "version_compile_machine": "x86_64",
        "hostname": "cdc-dumper",
        "port": config.port,
        # what the served files are (clients decide checksum handling from binlog_checksum)
        "log_bin": "ON",
        "log_bin_basename": config.binlog_base,
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_checksum": "CRC32",
        "binlog_row_metadata": "FULL",
        "binlog_rows_query_log_events": "ON",
        "binlog_transaction_compression": "OFF",
        "binlog_row_value_options": "",
        "master_verify_checksum": "OFF",
        "gtid_mode": gtids,
        "enforce_gtid_consistency": gtids,
        "gtid_executed": "",
        "gtid_purged": "",
        "gtid_domain_id": config.gtid_domain_id,
        "gtid_binlog_pos": "",
        "gtid_binlog_state": "",
        "gtid_current_pos": "",
        "gtid_slave_pos": "",
        # reads as of a past point for tools that cannot write AS OF (sql/points.py); "": the end
        "cdc_read_as_of": "",
        "gtid_strict_mode": "OFF",
        "log_slave_updates": "ON",
        "rpl_semi_sync_master_enabled": "OFF",
        "rpl_semi_sync_source_enabled": "OFF",
        "rpl_semi_sync_slave_enabled": "OFF",
        "read_only": "ON",
        "super_read_only": "ON",
        "max_binlog_size": 536870912,
        # character sets
        "character_set_client": "utf8mb4",
        "character_set_connection": "utf8mb4",
        "character_set_results": "utf8mb4",
        "character_set_server": "utf8mb4",
        "character_set_database": "utf8mb4",
        "character_set_system": "utf8",
        "character_set_filesystem": "binary",
        "collation_server": "utf8mb4_general_ci",
        "collation_connection": "utf8mb4_general_ci",
        "collation_database": "utf8mb4_general_ci",
        # session defaults
        "autocommit": 1,
        "auto_increment_increment": 1,
        "auto_increment_offset": 1,
        "max_allowed_packet": config.max_allowed_packet,
        "net_buffer_length": 16384,
        "net_read_timeout": 30,
        "net_write_timeout": 60,
        "wait_timeout": config.wait_timeout,
        "idle_readonly_transaction_timeout": config.idle_readonly_transaction_timeout,
        "interactive_timeout": config.wait_timeout,
        "connect_timeout": config.connect_timeout,
        "sql_mode": "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
        "ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION",
        "time_zone": "SYSTEM",
        "system_time_zone": tz,
        "lower_case_table_names": 0,
        "transaction_isolation": "REPEATABLE-READ",
        "tx_isolation": "REPEATABLE-READ",
        "transaction_read_only": 0,
        "tx_read_only": 0,
        "init_connect": "",
        "license": "Apache-2.0",
        "performance_schema": 0,
        "query_cache_size": 0,
        "query_cache_type": "OFF",
        "have_ssl": "DISABLED",
        "sql_select_limit": 18446744073709551615,
        "explicit_defaults_for_timestamp": "OFF",
        "default_authentication_plugin": "mysql_native_password",
        "innodb_version": config.version.split("-", 1)[0],
        "protocol_version": 10,
        "skip_networking": "OFF",
        "sql_auto_is_null": 0,
        "default_storage_engine": "InnoDB",
        "default_tmp_storage_engine": "InnoDB",
        "max_connections": config.max_connections,
    }


def like_to_regex(pattern: str) -> re.Pattern[str]:
    """SQL LIKE (`%`, `_`, backslash escapes) as a case-insensitive full-match regex."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    return re.compile("".join(out), re.I | re.S)


def filter_names(names: Iterable[str], conditions: list[tuple[str, list[str]]]) -> list[str]:
    """Names matching any (op, values) condition (op: '=', 'IN', 'LIKE'); all when none."""
    if not conditions:
        return sorted(names)
    regexes = []
    for op, values in conditions:
        for v in values:
            regexes.append(like_to_regex(v) if op == "LIKE" else re.compile(re.escape(v), re.I))
    return sorted(n for n in names if any(r.fullmatch(n) for r in regexes))
