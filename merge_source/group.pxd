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
from merge_source cimport packets
from cdc.binlog cimport constants, query
