# C types for classifier.py when Cython compiles it (an augmenting .pxd: the .py stays plain
# Python). A `cdef class` with typed fields: the processor reads them as C struct members.
cdef class Classified:
    cdef public object kind
    cdef public object txn_id
    cdef public bytes xid
    cdef public object fragment_kind
    cdef public list statements
    cdef public list records
    cdef public list markers
    cdef public bytes query

from merge_source.group cimport BinlogGroup
