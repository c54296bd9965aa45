# C types for processor.py when Cython compiles it (an augmenting .pxd: the .py stays plain
# Python).
from merge_source.classifier cimport Classified

cdef class _Held:
    cdef public Classified classified
    cdef public object timestamp
    cdef public tuple participants
from merge_source.group cimport BinlogGroup
from merge_source.sorter cimport Release
