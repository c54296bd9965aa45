# C types for classifier.py when Cython compiles it (an augmenting .pxd: the .py stays plain
# Python). A `cdef class` with typed fields: the processor reads them as C struct members.
import cython

from cdc cimport named_tuple
from cdc.binlog cimport constants, header, query, splice
from cdc.protocol cimport dump_packets
from merge_source.fragment cimport Statement

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

cpdef tuple xa_ident(bytes gtid)

@cython.locals(n=Py_ssize_t, pos=Py_ssize_t)
cdef Py_ssize_t _xid_at(bytes gtid) except -1

@cython.locals(p="const unsigned char*", n=Py_ssize_t, pos=Py_ssize_t, glen=Py_ssize_t,
               blen=Py_ssize_t, start=Py_ssize_t)
cpdef bytes xa_key(bytes gtid)

# The CN's id of an XA group as a C integer (None: not a CN transaction).
@cython.locals(p="const unsigned char*", n=Py_ssize_t, pos=Py_ssize_t, glen=Py_ssize_t,
               start=Py_ssize_t, prefix=bytes, plen=Py_ssize_t, fmt="unsigned int",
               k=Py_ssize_t, txn="long long", digit=int)
cpdef object xa_txn(bytes gtid)

@cython.locals(c=Classified)
cdef Classified _classified(object kind, object txn_id, bytes xid, object fragment_kind)

cdef Classified _prepared(Classified out, object txn_id, bytes gtid)

cdef Classified _resolved(bint commit, object txn_id, bytes gtid)

@cython.locals(p="const unsigned char*", start=Py_ssize_t, word=bytes, k=Py_ssize_t, c=int)
cpdef bint is_xa_commit(bytes event)

cpdef list fast_commit_records(bytes rows, Py_ssize_t checksum_len)

@cython.locals(p="const unsigned char*", update=bint, pos=Py_ssize_t,
               txn="unsigned long long", tso="unsigned long long", k=Py_ssize_t,
               length=Py_ssize_t, stop=Py_ssize_t, value="long long", digits=int, c=int)
cpdef list commit_records_at(bytes rows, Py_ssize_t at, Py_ssize_t end)

from merge_source.scan cimport (annotate_trace, packed_count, packed_events, packed_find,
                                packed_statements, row_parts)

# Every XA prepare and local group passes here: its loop over the events reads each type in C.
@cython.locals(queries=Py_ssize_t, code=int, e=bytes, text=bytes)
cpdef refuse_statement_dml(BinlogGroup group, Py_ssize_t expected_queries)

cdef class Classifier:
    cdef public object fde
    cdef public object spill_dir
    cdef public dict _columns
    cdef dict _tx_log_maps
    cdef public object _v1_fde
    cdef public dict _v1
    cdef public Py_ssize_t _checksum_len
    cdef public bint fast_records

    @cython.locals(flags2=int)
    cpdef Classified classify(self, BinlogGroup group)

    @cython.locals(flags2=int, first=Py_ssize_t, last=Py_ssize_t, data=bytes, query_code=int,
                   statements=list, at=Py_ssize_t, commit=bint)
    cpdef Classified _packed(self, BinlogGroup group)

    @cython.locals(p="const unsigned char*", q=Py_ssize_t, stop=Py_ssize_t, n=Py_ssize_t,
                   code=int, event_at=Py_ssize_t, table_map=int, records=list, found=list,
                   table_id="unsigned long long", mapped=bint, data=bytes, at=Py_ssize_t, size=Py_ssize_t,
                   db_len=Py_ssize_t)
    cpdef Classified _packed_records(self, BinlogGroup group)

    @cython.locals(known=bytes, body=bytes, cached=tuple)
    cdef bint _tx_log_map(self, bytes data, Py_ssize_t at, Py_ssize_t size,
                          unsigned long long table_id) except -1

    @cython.locals(code=int, user_rows=bint, parts=list, table_maps=dict, private=set)
    cpdef Classified _rows(self, BinlogGroup group, Classified out)

    cpdef bint _v1_rows(self, object fde, int code) except -1

    @cython.locals(code=int)
    cpdef _private_rows(self, bytes table_map, bytes rows, Classified out)

