# The C view of dump_packets.py for compiled modules (`from cdc.protocol cimport dump_packets`):
# a dump batch's packets walked in place from the bytes' buffer. The layout is dump_packets.py's.
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcpy

cdef enum:
    EVENT_AT = 5
    TABLE_MAP = 19
    V1_FIRST = 23
    V1_LAST = 25
    V2_FIRST = 30
    V2_LAST = 32

cdef inline Py_ssize_t packet_len(const unsigned char* p, Py_ssize_t q) noexcept nogil:
    return p[q] | p[q + 1] << 8 | p[q + 2] << 16

cdef inline int event_code(const unsigned char* p, Py_ssize_t q) noexcept nogil:
    return p[q + EVENT_AT + 4]

cdef inline bint is_row_event(int code) noexcept nogil:
    return code == TABLE_MAP or V1_FIRST <= code <= V1_LAST or V2_FIRST <= code <= V2_LAST

# One bytes object of `size`, the events copied straight from the batch's buffer.
cdef inline bytes join_rows(bytes data, Py_ssize_t q, Py_ssize_t stop, Py_ssize_t size):
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, size)
    cdef char* dst = PyBytes_AS_STRING(out)
    cdef Py_ssize_t n, o = 0
    while q < stop:
        n = packet_len(p, q)
        if is_row_event(event_code(p, q)):
            if o + n - 1 > size:
                raise ValueError("a statement's events outgrow their size")
            memcpy(dst + o, p + q + EVENT_AT, n - 1)
            o += n - 1
        q += 4 + n
    if o != size:
        raise ValueError("a statement's events fall short of their size")
    return out

cdef inline bytes splice(bytes data, Py_ssize_t at, Py_ssize_t size, bytes insert):
    cdef Py_ssize_t n = len(data), k = len(insert)
    if at < 0 or size < 0 or at + size > n:
        raise ValueError("a splice outside its bytes")
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n - size + k)
    cdef char* dst = PyBytes_AS_STRING(out)
    cdef const char* src = PyBytes_AS_STRING(data)
    memcpy(dst, src, at)
    memcpy(dst + at, PyBytes_AS_STRING(insert), k)
    memcpy(dst + at + k, src + at + size, n - at - size)
    return out

# `splice` of the event at `at` by its own header (size field rewritten) around `body`.
cdef inline bytes splice_body(bytes data, Py_ssize_t at, Py_ssize_t size, bytes body):
    cdef Py_ssize_t n = len(data), k = len(body)
    if at < 0 or size < 19 or at + size > n:
        raise ValueError("a splice outside its bytes")
    cdef bytes out = PyBytes_FromStringAndSize(NULL, n - size + 19 + k)
    cdef unsigned char* dst = <unsigned char*>PyBytes_AS_STRING(out)
    cdef const char* src = PyBytes_AS_STRING(data)
    cdef unsigned int event_size = <unsigned int>(19 + k)
    memcpy(dst, src, at + 9)
    dst[at + 9] = event_size & 0xFF
    dst[at + 10] = (event_size >> 8) & 0xFF
    dst[at + 11] = (event_size >> 16) & 0xFF
    dst[at + 12] = (event_size >> 24) & 0xFF
    memcpy(dst + at + 13, src + at + 13, 6)
    memcpy(dst + at + 19, PyBytes_AS_STRING(body), k)
    memcpy(dst + at + 19 + k, src + at + size, n - at - size)
    return out
