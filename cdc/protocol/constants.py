"""Protocol constants: capability flags, commands, server status bits, column types."""

from enum import IntEnum, IntFlag

from cdc.binlog.constants import ColumnType as BinlogColumnType


class Capability(IntFlag):
    LONG_PASSWORD = 1
    FOUND_ROWS = 1 << 1
    LONG_FLAG = 1 << 2
    CONNECT_WITH_DB = 1 << 3
    NO_SCHEMA = 1 << 4
    COMPRESS = 1 << 5
    ODBC = 1 << 6
    LOCAL_FILES = 1 << 7
    IGNORE_SPACE = 1 << 8
    PROTOCOL_41 = 1 << 9
    INTERACTIVE = 1 << 10
    SSL = 1 << 11
    IGNORE_SIGPIPE = 1 << 12
    TRANSACTIONS = 1 << 13
    RESERVED = 1 << 14
    SECURE_CONNECTION = 1 << 15
    MULTI_STATEMENTS = 1 << 16
    MULTI_RESULTS = 1 << 17
    PS_MULTI_RESULTS = 1 << 18
    PLUGIN_AUTH = 1 << 19
    CONNECT_ATTRS = 1 << 20
    PLUGIN_AUTH_LENENC_CLIENT_DATA = 1 << 21
    CAN_HANDLE_EXPIRED_PASSWORDS = 1 << 22
    SESSION_TRACK = 1 << 23
    DEPRECATE_EOF = 1 << 24


class Command(IntEnum):
    SLEEP = 0x00
    QUIT = 0x01
    INIT_DB = 0x02
    QUERY = 0x03
    FIELD_LIST = 0x04
    PING = 0x0E
    BINLOG_DUMP = 0x12
    REGISTER_SLAVE = 0x15
    STMT_PREPARE = 0x16
    STMT_EXECUTE = 0x17
    STMT_SEND_LONG_DATA = 0x18
    STMT_CLOSE = 0x19
    STMT_RESET = 0x1A
    STMT_FETCH = 0x1C
    BINLOG_DUMP_GTID = 0x1E


class Status(IntFlag):
    IN_TRANS = 0x0001
    AUTOCOMMIT = 0x0002
    MORE_RESULTS_EXISTS = 0x0008
    CURSOR_EXISTS = 0x0040  # COM_STMT_EXECUTE opened a cursor; COM_STMT_FETCH has more
    LAST_ROW_SENT = 0x0080  # COM_STMT_FETCH: the cursor is read to its end (and closed)


# Result-set column types are the binlog's column type codes.
ColumnType = BinlogColumnType


# Dump flags of COM_BINLOG_DUMP.
BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02  # MariaDB; MySQL 8.0.26+ reads it as USE_HEARTBEAT_EVENT_V2
