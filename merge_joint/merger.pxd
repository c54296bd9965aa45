# C types for merger.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
# The merge reads the fields of merge_source's values (fragment.pxd) as C struct members, and
# the leader's encoder reads a Transaction's the same way (txn_encoder.pxd cimports it).
import cython

from cdc cimport named_tuple

# (Aliased: the .py imports the same classes by merge_source's public names, which a cimport of
# those names would shadow.)
from merge_source.fragment cimport Fragment as CFragment, Statement as CStatement
from merge_source.fragment cimport Watermark as CWatermark

cdef class Transaction:
    cdef public object key
    cdef public object txn_id
    cdef public object kind
    cdef public list fragments
    cdef public list statements

cdef class _Entry:
    cdef public unsigned long long tso
    cdef public long long kind
    cdef public long long dn
    cdef public long long seq
    cdef public CFragment item

    cpdef object global_key(self)

cpdef bint _less(_Entry a, _Entry b)

cpdef bint _same(_Entry a, _Entry b)

cdef class _Queue:
    cdef public list entries
    cdef public Py_ssize_t head

    cpdef pop(self)

cdef class Merger:
    cdef public dict _wm
    cdef public dict _queues
    cdef public object last_emitted
    cdef public _Entry _last

    cpdef object low_watermark(self)
    cpdef push(self, object item)
    @cython.locals(mark=CWatermark)
    cpdef take(self, list batch, dict marks, dict cps)
    cpdef push_watermark(self, CWatermark item)
    @cython.locals(entry=_Entry, last=_Entry, queue=_Queue, entries=list)
    cpdef push_fragment(self, CFragment item)
    @cython.locals(out=list, fragments=list, txn=Transaction, bound=_Entry, best=_Entry,
                   entry=_Entry, queue=_Queue, queues=list)
    cpdef list pop_ready(self)

@cython.locals(first=CFragment, f=CFragment, s=CStatement, i=Py_ssize_t, dns=list,
               numbered=list, expected=tuple)
cpdef Transaction coalesce(object key, list fragments)

@cython.locals(txn=Transaction)
cpdef Transaction _transaction(object key, object txn_id, object kind, list fragments,
                               list statements)
