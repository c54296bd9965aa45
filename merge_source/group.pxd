# C types for group.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
cdef class BinlogGroup:
    cdef public str file
    cdef public object start
    cdef public bytes gtid
    cdef public list events
    cdef public object end
    cdef public object span

from merge_source.scan cimport group_body, group_end, log_pos
from cdc.binlog cimport constants, query
