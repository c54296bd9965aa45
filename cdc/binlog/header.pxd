# The C view of header.py for compiled modules (cdc/compiled.py): `from cdc.binlog cimport
# header`, then `header.event_size(p, at)` in the .py reads the field from a buffer pointer in C
# once compiled, and calls header.py's reader as Python. The offsets are header.py's, repeated for
# C (tests/cdc/binlog/test_pxd_constants.py fails if they differ).

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
