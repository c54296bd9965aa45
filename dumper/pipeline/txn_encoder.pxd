# C types for txn_encoder.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

from cdc.binlog cimport constants, header, splice
# (Aliased: the .py imports the same classes by their packages' public names, which a cimport
# of those names would shadow.)
from merge_joint.merger cimport Transaction as CTransaction
from merge_source.fragment cimport Fragment as CFragment, Statement as CStatement

cdef class EventPatcher:
    cdef public unsigned int server_id
    cdef public object table_ids
    cdef public dict by_content
    cdef public bytes last_content
    cdef public bytes last_tid

    cpdef bytes table_id(self, bytes table_map)
    @cython.locals(start=Py_ssize_t, size=Py_ssize_t, last=bytes, content=bytes, tid=bytes)
    cpdef bytes table_id_at(self, bytes buf, Py_ssize_t pos, Py_ssize_t n)

    @cython.locals(n=Py_ssize_t, ids=dict, st=CStatement)
    cpdef Py_ssize_t encode_rows(self, bytearray out, list statements,
                                 unsigned int timestamp) except -1

    @cython.locals(ids=dict, last_dn="unsigned long long", dn_tid="unsigned long long",
                   last_tid=bytes, tid=bytes, count=Py_ssize_t, pos=Py_ssize_t, stop=Py_ssize_t,
                   n=Py_ssize_t, at=Py_ssize_t, extra=Py_ssize_t, code=int, v1=bint,
                   p="const unsigned char*", q="unsigned char*")
    cpdef Py_ssize_t put_packed(self, bytearray out, bytes packed,
                                unsigned int timestamp) except -1

    @cython.locals(p="const unsigned char*", code=int, at=Py_ssize_t, extra=Py_ssize_t,
                   q="unsigned char*", tid=bytes)
    cpdef int put_event(self, bytearray out, object e, dict ids,
                        unsigned int timestamp) except -1

@cython.locals(fragments=list, f=CFragment)
cpdef unsigned int _timestamp(CTransaction txn) except? 0

@cython.locals(st=CStatement)
cpdef bint has_events(list statements) except -1

@cython.locals(st=CStatement)
cpdef bint has_spilled(list statements) except -1

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, txn=CTransaction)
cpdef Py_ssize_t first_spilled(list txns, Py_ssize_t start) except -1

cdef class TransactionEncoder:
    cdef public unsigned int server_id
    cdef public bint gtids
    cdef public str flavor
    cdef public object mark
    cdef public object table_ids
    cdef public EventPatcher patcher
    cdef public unsigned long long _xid
    cdef public bytes _begin_tail
    cdef public bytes _gtid_tail
    cdef public bytes _ddl_gtid_tail
    cdef public bytes _xid_head
    cdef public bytes _mark_head
    cdef public dict _mark_prefixes

    cpdef Py_ssize_t encode_into(self, CTransaction txn, bytearray out, list gtid_at=*) except -1
    @cython.locals(events=Py_ssize_t, i=Py_ssize_t, count=Py_ssize_t, txn=CTransaction)
    cpdef Py_ssize_t encode_run(self, list txns, Py_ssize_t start, Py_ssize_t stop,
                                bytearray out, list ends, list tsos, list gtid_at) except -1
    @cython.locals(at=Py_ssize_t, q="unsigned char*")
    cpdef _xid_into(self, bytearray out, bytes ts)

    @cython.locals(tso="unsigned long long", dn="unsigned long long", seq="unsigned long long",
                   local=bint, n=Py_ssize_t, prefix=bytes)
    cpdef _mark_into(self, bytearray out, object key, bytes ts)
