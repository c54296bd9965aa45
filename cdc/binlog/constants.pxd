# The C view of constants.py for compiled modules (cdc/compiled.py): `from cdc.binlog cimport
# constants`, then `constants.EventType.QUERY` in the .py, a C constant once compiled and the
# IntEnum member as Python. Only numbers; constants.py is the declaration, and
# tests/cdc/binlog/test_pxd_constants.py fails if a value here differs from it.

cdef enum EventType:
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

cdef enum:
    HEADER_LEN = 19
    CHECKSUM_LEN = 4
    CRC32_RESIDUE = 0x2144df1c
    QUERY_POST_HEADER_LEN = 13
    QUERY_DB_LEN_OFFSET = 27
    QUERY_STATUS_LEN_OFFSET = 30
    TABLE_MAP_DB_LEN_OFFSET = 27
    TABLE_ID_OFFSET = 19
    TABLE_ID_LEN = 6
    ROWS_EXTRA_OFFSET = 27
    ROWS_V1_TO_V2_STEP = 7
