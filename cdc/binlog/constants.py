"""Binlog constants: event type codes (MySQL and MariaDB), header flags, column types and the
small codes that event bodies carry. Values follow MySQL/MariaDB `log_event.h` / `binlog_event.h`.

The one declaration of each value. Compiled modules (cdc/compiled.py) read the numbers their hot
loops need as C constants from `constants.pxd` (`from cdc.binlog cimport constants`, then
`constants.EventType.QUERY` in the .py: an IntEnum member as Python, a C enum compiled); that
file repeats them for C, and tests/cdc/binlog/test_pxd_constants.py fails if the two differ."""

from __future__ import annotations

from enum import IntEnum, IntFlag

BINLOG_MAGIC = b"\xfebin"
HEADER_LEN = 19
CHECKSUM_LEN = 4
# An event's log_pos/size fields are u32: nothing larger can exist in a v4 binlog file.
MAX_EVENT_SIZE_LIMIT = 0xFFFFFFFF
# Default upper bound a reader accepts (MySQL's max_allowed_packet ceiling is 1 GiB).
DEFAULT_MAX_EVENT_SIZE = 1 << 30

# zlib.crc32(event) of any event that ends with its own CRC32 (LE): a whole-event check.
CRC32_RESIDUE = 0x2144DF1C
# QUERY_EVENT's post-header (thread_id 4, exec_time 4, db_len 1, error_code 2, status_vars_len 2),
# the same on MariaDB and MySQL; the fields' offsets in a raw event, header included:
QUERY_POST_HEADER_LEN = 13
QUERY_DB_LEN_OFFSET = HEADER_LEN + 8
QUERY_STATUS_LEN_OFFSET = HEADER_LEN + 11
# TABLE_MAP after the 19-byte header: table_id (6), flags (2), then the schema name's length.
TABLE_MAP_DB_LEN_OFFSET = HEADER_LEN + 8
# The table id (6 bytes, LE) starts the post-header of TABLE_MAP and rows events (as MySQL >= 5.1.4
# and MariaDB write it); in a rows event the flags (2) follow, then, in rows v2 only, the
# extra-data length (2 bytes, counting itself: ROWS_V2_NO_EXTRA is "no extra data").
TABLE_ID_OFFSET = HEADER_LEN
TABLE_ID_LEN = 6
ROWS_EXTRA_OFFSET = HEADER_LEN + 8
ROWS_V2_NO_EXTRA = b"\x02\x00"
# A rows v1 code + this is its v2 code (WRITE 23 -> 30, ...).
ROWS_V1_TO_V2_STEP = 7

CHECKSUM_OFF = 0
CHECKSUM_CRC32 = 1


class EventType(IntEnum):
    UNKNOWN = 0
    START_V3 = 1
    QUERY = 2
    STOP = 3
    ROTATE = 4
    INTVAR = 5
    LOAD = 6
    SLAVE = 7
    CREATE_FILE = 8
    APPEND_BLOCK = 9
    EXEC_LOAD = 10
    DELETE_FILE = 11
    NEW_LOAD = 12
    RAND = 13
    USER_VAR = 14
    FORMAT_DESCRIPTION = 15
    XID = 16
    BEGIN_LOAD_QUERY = 17
    EXECUTE_LOAD_QUERY = 18
    TABLE_MAP = 19
    PRE_GA_WRITE_ROWS = 20
    PRE_GA_UPDATE_ROWS = 21
    PRE_GA_DELETE_ROWS = 22
    WRITE_ROWS_V1 = 23
    UPDATE_ROWS_V1 = 24
    DELETE_ROWS_V1 = 25
    INCIDENT = 26
    HEARTBEAT = 27
    IGNORABLE = 28
    ROWS_QUERY = 29
    WRITE_ROWS = 30
    UPDATE_ROWS = 31
    DELETE_ROWS = 32
    GTID = 33
    ANONYMOUS_GTID = 34
    PREVIOUS_GTIDS = 35
    TRANSACTION_CONTEXT = 36
    VIEW_CHANGE = 37
    XA_PREPARE = 38
    PARTIAL_UPDATE_ROWS = 39
    TRANSACTION_PAYLOAD = 40
    HEARTBEAT_V2 = 41
    GTID_TAGGED = 42
    # MariaDB-only codes start at 160.
    ANNOTATE_ROWS = 160
    BINLOG_CHECKPOINT = 161
    MARIADB_GTID = 162
    GTID_LIST = 163
    START_ENCRYPTION = 164
    QUERY_COMPRESSED = 165
    WRITE_ROWS_COMPRESSED_V1 = 166
    UPDATE_ROWS_COMPRESSED_V1 = 167
    DELETE_ROWS_COMPRESSED_V1 = 168
    WRITE_ROWS_COMPRESSED = 169
    UPDATE_ROWS_COMPRESSED = 170
    DELETE_ROWS_COMPRESSED = 171


ROWS_V1_TYPES = frozenset({23, 24, 25})
ROWS_V2_TYPES = frozenset({30, 31, 32})
ROWS_TYPES = ROWS_V1_TYPES | ROWS_V2_TYPES
COMPRESSED_TYPES = frozenset(range(165, 172))
# v1 -> v2 code (WRITE 23 -> 30, ...): the fast path converts MariaDB rows to MySQL v2.
ROWS_V1_TO_V2 = {code: code + ROWS_V1_TO_V2_STEP for code in ROWS_V1_TYPES}
UPDATE_TYPES = frozenset({24, 31})


# The event codes that interpreted per-event code compares with (the dump client, the readers,
# the server's dump loop, the writer's GTID numbering), as plain ints: an IntEnum member costs a
# metaclass lookup (~6x a module int on 3.11). Taken from EventType, still the one declaration
# of each value; spelled out so that readers and tools see every name.
ANNOTATE_ROWS_EVENT = int(EventType.ANNOTATE_ROWS)
BINLOG_CHECKPOINT_EVENT = int(EventType.BINLOG_CHECKPOINT)
FORMAT_DESCRIPTION_EVENT = int(EventType.FORMAT_DESCRIPTION)
GTID_EVENT = int(EventType.GTID)
GTID_LIST_EVENT = int(EventType.GTID_LIST)
HEARTBEAT_EVENT = int(EventType.HEARTBEAT)
MARIADB_GTID_EVENT = int(EventType.MARIADB_GTID)
PREVIOUS_GTIDS_EVENT = int(EventType.PREVIOUS_GTIDS)
QUERY_EVENT = int(EventType.QUERY)
ROTATE_EVENT = int(EventType.ROTATE)
ROWS_QUERY_EVENT = int(EventType.ROWS_QUERY)
STOP_EVENT = int(EventType.STOP)
TABLE_MAP_EVENT = int(EventType.TABLE_MAP)


class EventFlag(IntFlag):
    """Flags of the 19-byte header (2 bytes)."""

    BINLOG_IN_USE = 0x0001  # FDE only: the file was not closed cleanly (yet)
    THREAD_SPECIFIC = 0x0004
    SUPPRESS_USE = 0x0008
    ARTIFICIAL = 0x0020
    RELAY_LOG = 0x0040
    IGNORABLE = 0x0080  # readers that do not know the type skip it instead of failing
    NO_FILTER = 0x0100
    MTS_ISOLATE = 0x0200


class RowsFlag(IntFlag):
    STMT_END = 0x0001
    NO_FOREIGN_KEY_CHECKS = 0x0002
    RELAXED_UNIQUE_CHECKS = 0x0004
    COMPLETE_ROWS = 0x0008


class ColumnType(IntEnum):
    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    TYPED_ARRAY = 20
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255


# Numeric types covered by the SIGNEDNESS optional metadata bitmap. YEAR is one of them:
# MariaDB 10.11 writes a bit for it (recorded fixture) and python-mysql-replication expects it.
NUMERIC_TYPES = frozenset(
    {
        ColumnType.YEAR,
        ColumnType.TINY,
        ColumnType.SHORT,
        ColumnType.INT24,
        ColumnType.LONG,
        ColumnType.LONGLONG,
        ColumnType.NEWDECIMAL,
        ColumnType.FLOAT,
        ColumnType.DOUBLE,
        ColumnType.DECIMAL,
    }
)


class OptMeta(IntEnum):
    """TABLE_MAP optional metadata TLV types (binlog_row_metadata=MINIMAL/FULL)."""

    SIGNEDNESS = 1
    DEFAULT_CHARSET = 2
    COLUMN_CHARSET = 3
    COLUMN_NAME = 4
    SET_STR_VALUE = 5
    ENUM_STR_VALUE = 6
    GEOMETRY_TYPE = 7
    SIMPLE_PRIMARY_KEY = 8
    PRIMARY_KEY_WITH_PREFIX = 9
    ENUM_AND_SET_DEFAULT_CHARSET = 10
    ENUM_AND_SET_COLUMN_CHARSET = 11
    COLUMN_VISIBILITY = 12


class QueryStatus(IntEnum):
    """QUERY event status-variable keys. Only keys <= 0x14 are known to every consumer."""

    FLAGS2 = 0x00
    SQL_MODE = 0x01
    CATALOG = 0x02
    AUTO_INCREMENT = 0x03
    CHARSET = 0x04
    TIME_ZONE = 0x05
    CATALOG_NZ = 0x06
    LC_TIME_NAMES = 0x07
    CHARSET_DATABASE = 0x08
    TABLE_MAP_FOR_UPDATE = 0x09
    MASTER_DATA_WRITTEN = 0x0A
    INVOKER = 0x0B
    UPDATED_DB_NAMES = 0x0C
    MICROSECONDS = 0x0D
    COMMIT_TS = 0x0E
    COMMIT_TS2 = 0x0F
    EXPLICIT_DEFAULTS_FOR_TIMESTAMP = 0x10
    DDL_LOGGED_WITH_XID = 0x11
    DEFAULT_COLLATION_FOR_UTF8MB4 = 0x12
    SQL_REQUIRE_PRIMARY_KEY = 0x13
    DEFAULT_TABLE_ENCRYPTION = 0x14
    # MariaDB extensions
    HRNOW = 0x80
    XID = 0x81
    GTID_FLAGS3 = 0x82
    CHARACTER_SET_COLLATIONS = 0x83


class MariadbGtidFlag(IntFlag):
    """flags2 of a MariaDB GTID event (type 162)."""

    STANDALONE = 1
    GROUP_COMMIT_ID = 2
    TRANSACTIONAL = 4
    ALLOW_PARALLEL = 8
    WAITED = 16
    DDL = 32
    PREPARED_XA = 64
    COMPLETED_XA = 128


class GtidListFlag(IntFlag):
    """The top 4 bits of a GTID_LIST event's count word (MariaDB's `gl_flags` >> 28)."""

    UNTIL_REACHED = 1  # a master's fake GTID_LIST: START SLAVE UNTIL master_gtid_pos is reached
    IGN_GTIDS = 2


class MariadbGtidExtraFlag(IntFlag):
    """flags_extra of a MariaDB GTID event (10.5+)."""

    MULTI_ENGINE = 1
    START_ALTER = 2
    COMMIT_ALTER = 4
    ROLLBACK_ALTER = 8


# Collation ids MariaDB 10.11 knows; MySQL 8's 255 (utf8mb4_0900_ai_ci) makes mariadb-binlog
# print "# Ignored (Unknown charset)".
COLLATION_UTF8MB4_GENERAL_CI = 45
COLLATION_UTF8MB4_BIN = 46
COLLATION_UTF8_GENERAL_CI = 33
COLLATION_LATIN1_SWEDISH_CI = 8
COLLATION_BINARY = 63
