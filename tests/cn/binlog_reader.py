"""Reads a DN binlog with python-mysql-replication, including MariaDB ANNOTATE_ROWS events."""

from __future__ import annotations

import struct

import pymysql
import pymysqlreplication.binlogstream as binlogstream
from pymysqlreplication import BinLogStreamReader

from cdc.config import NodeConfig


class _AnnotateFlag:
    """pmr sends BINLOG_SEND_ANNOTATE_ROWS_EVENT (0x02) only on its MariaDB dump path, which
    ignores log_file/log_pos (env.md §2); add the flag to the MySQL path's dump flags instead."""

    def __getattr__(self, name):
        return getattr(struct, name)

    @staticmethod
    def pack(fmt, *values):
        if fmt == "<H":  # the only 2-byte field of COM_BINLOG_DUMP: the flags
            values = (values[0] | 0x02,)
        return struct.pack(fmt, *values)


def master_position(node: NodeConfig) -> tuple[str, int]:
    conn = pymysql.connect(host=node.host, port=node.port, user=node.user, password="")
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
            return file, int(pos)
    finally:
        conn.close()


def read_events(node: NodeConfig, log_file: str, log_pos: int, server_id: int = 4242):
    binlogstream.struct = _AnnotateFlag()
    stream = BinLogStreamReader(
        connection_settings={
            "host": node.host,
            "port": node.port,
            "user": node.user,
            "password": "",
        },
        server_id=server_id,
        blocking=False,
        is_mariadb=False,
        annotate_rows_event=True,
        log_file=log_file,
        log_pos=log_pos,
        resume_stream=True,
    )
    try:
        yield from stream
    finally:
        stream.close()
