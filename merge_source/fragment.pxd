# C types for fragment.py when Cython compiles it (an augmenting .pxd: the .py stays plain
# Python). The values a MergeSource emits, declared once: the modules that build or read them by
# the thousand (processor, classifier, wire) cimport these and reach the fields as C struct
# members; everything else sees ordinary attributes. (A key is a cdc.keys.SortKey, a NamedTuple:
# a `tuple` field would refuse it.)
import cython

cdef class Statement:
    cdef public object trace_id
    cdef public list in_memory
    cdef public object span
    # The events concatenated, as they cross the pipe (fragment.py).
    cdef public bytes packed

cdef class Fragment:
    cdef public object key
    cdef public object dn
    cdef public object txn_id
    cdef public tuple participants
    cdef public object kind
    cdef public list statements
    cdef public list markers
    cdef public object timestamp

# Fragment(...) without its constructor's argument parsing (the hot paths: decode, release).
@cython.locals(f=Fragment)
cpdef Fragment new_fragment(object key, object dn, object txn_id, tuple participants, object kind,
                             list statements, list markers, object timestamp)

cdef class Watermark:
    cdef public object dn
    cdef public object key
    cdef public object checkpoint
