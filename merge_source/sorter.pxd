import cython

from cdc cimport named_tuple

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

@cython.locals(r=Release)
cdef Release _release(object key, object xid, object payload)
@cython.locals(b=_Branch)
cdef _Branch _new_branch(object xid, object prepare_seq, object payload, object max_tso_before)

cdef class Sorter:
    cdef public dict _branches
    cdef public dict _unknown
    cdef list _unknown_seqs
    cdef list _unknown_xids
    cdef Py_ssize_t _unknown_head
    cdef public list _heap
    cdef public dict _locals
    cdef public object max_tso_seen
    cdef public object watermark
    cdef public object orphans

    cpdef object held(self, object xid)
    cpdef list prepare(self, object xid, object payload, object seq)
    cpdef list commit_record(self, object xid, object tso, object seq)
    cpdef list commit(self, object xid)
    cpdef list rollback(self, object xid)
    cpdef list local(self, object payload, object seq)
    @cython.locals(seqs=list, xids=list, h=Py_ssize_t, unknown=dict)
    cdef long long _bound(self) except? -2
    @cython.locals(bound="long long")
    cpdef list _drain(self)
    cpdef tuple oldest_pending(self)
