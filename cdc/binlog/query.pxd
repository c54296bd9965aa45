# The C view of query.py's `text_start` for compiled modules (cdc/compiled.py): `from cdc.binlog
# cimport query`, then `query.text_start(p, at)` in the .py reads the offsets from a buffer
# pointer in C once compiled, and calls query.py's as Python. The caller checks the event holds
# the post-header (`constants.HEADER_LEN + constants.QUERY_POST_HEADER_LEN` bytes).
from cdc.binlog cimport constants

cdef inline Py_ssize_t text_start(const unsigned char* p, Py_ssize_t at) noexcept nogil:
    cdef Py_ssize_t status = at + constants.QUERY_STATUS_LEN_OFFSET
    return (at + constants.HEADER_LEN + constants.QUERY_POST_HEADER_LEN
            + (p[status] | p[status + 1] << 8) + p[at + constants.QUERY_DB_LEN_OFFSET] + 1)
