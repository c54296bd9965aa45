# C types for sorter.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
cdef class Release:
    cdef public object key
    cdef public object xid
    cdef public object payload

cdef class _Branch:
    cdef public object xid
    cdef public object prepare_seq
    cdef public object payload
    cdef public object max_tso_before
    cdef public object tso
    cdef public object record_seq
    cdef public bint committed
    cdef public bint rolled_back
