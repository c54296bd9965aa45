# C types for processor.py when Cython compiles it (an augmenting .pxd: the .py stays plain
# Python): the per-group objects it reads are cdef classes, their fields C struct members.
from merge_source.classifier cimport Classified, Classifier
from merge_source.group cimport BinlogGroup
from merge_source.sorter cimport Release, Sorter

cdef class _Held:
    cdef public Classified classified
    cdef public object timestamp
    cdef public tuple participants
