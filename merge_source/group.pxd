import cython

# C types for group.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
cdef class BinlogGroup:
    cdef public str file
    cdef public object start
    cdef public bytes gtid
    cdef public list events
    cdef public object end
    cdef public object span
    cdef public bytes packed
    cdef public Py_ssize_t first
    cdef public Py_ssize_t last

from merge_source.scan cimport group_body, group_end, log_pos, packed_count, packed_events, packed_group
from cdc.protocol cimport dump_packets
from cdc.binlog cimport constants, header, query

@cython.locals(group=BinlogGroup)
cdef BinlogGroup _packed_group(str file, object start, bytes gtid, object end, bytes data,
                               Py_ssize_t first, Py_ssize_t last)

@cython.locals(p="const unsigned char*", gtid=int, fde=int, event_at=Py_ssize_t, code=int,
               n=Py_ssize_t, body=Py_ssize_t, standalone=bint, j=Py_ssize_t, done=bint,
               pos=Py_ssize_t, start=Py_ssize_t)
cpdef Py_ssize_t packed_groups(str file, bytes data, Py_ssize_t q, Py_ssize_t stop,
                               Py_ssize_t limit, list out) except -1
