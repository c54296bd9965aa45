# The C view of header.py for compiled modules (cdc/compiled.py): `from cdc.binlog cimport
# header`, then `header.event_size(p, at)` in the .py reads the field from a buffer pointer in C
# once compiled, and calls header.py's reader as Python (its writers likewise: the header's byte
# layout is written here, never at a call site). The offsets are header.py's, repeated for C
# (tests/cdc/binlog/test_pxd_constants.py fails if they differ).
from libc.string cimport memcpy

from cdc.binlog cimport constants

cdef enum:
    OFF_TIMESTAMP = 0
    OFF_TYPE = 4
    OFF_SERVER_ID = 5
    OFF_EVENT_SIZE = 9
    OFF_LOG_POS = 13
    OFF_FLAGS = 17

cdef inline unsigned int _u32(const unsigned char* p, Py_ssize_t at) noexcept nogil:
    return p[at] | p[at + 1] << 8 | p[at + 2] << 16 | (<unsigned int>p[at + 3]) << 24

cdef inline unsigned int event_size(const unsigned char* p, Py_ssize_t at) noexcept nogil:
    return _u32(p, at + OFF_EVENT_SIZE)

cdef inline unsigned int log_pos(const unsigned char* p, Py_ssize_t at) noexcept nogil:
    return _u32(p, at + OFF_LOG_POS)

cdef inline unsigned int timestamp(const unsigned char* p, Py_ssize_t at) noexcept nogil:
    return _u32(p, at + OFF_TIMESTAMP)

cdef inline unsigned long long table_id(const unsigned char* p, Py_ssize_t at) noexcept nogil:
    cdef const unsigned char* q = p + at + constants.TABLE_ID_OFFSET
    return (<unsigned long long>_u32(q, 0)) | (<unsigned long long>q[4]) << 32 | (
        <unsigned long long>q[5]) << 40

cdef inline void _put_u32(unsigned char* p, Py_ssize_t at, unsigned int v) noexcept nogil:
    p[at] = v & 0xFF
    p[at + 1] = (v >> 8) & 0xFF
    p[at + 2] = (v >> 16) & 0xFF
    p[at + 3] = (v >> 24) & 0xFF

cdef inline void write_head(unsigned char* p, Py_ssize_t at, unsigned int timestamp,
                            unsigned char type_code, unsigned int server_id,
                            unsigned int size) noexcept nogil:
    _put_u32(p, at + OFF_TIMESTAMP, timestamp)
    p[at + OFF_TYPE] = type_code
    _put_u32(p, at + OFF_SERVER_ID, server_id)
    _put_u32(p, at + OFF_EVENT_SIZE, size)

cdef inline void write_log_pos(unsigned char* p, Py_ssize_t at, unsigned int log_pos) noexcept nogil:
    _put_u32(p, at + OFF_LOG_POS, log_pos)

cdef inline void write_table_id(unsigned char* p, Py_ssize_t at,
                                const unsigned char* table_id) noexcept nogil:
    memcpy(p + at + constants.TABLE_ID_OFFSET, table_id, constants.TABLE_ID_LEN)
