# C types for scan.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

from cdc.binlog cimport constants, header, query
from cdc.protocol cimport dump_packets
from merge_source.fragment cimport Statement

@cython.locals(start=Py_ssize_t)
cpdef bint group_end(bytes data, bint standalone)

@cython.locals(p="const unsigned char*", start=Py_ssize_t, stop=Py_ssize_t)
cpdef bint group_end_at(bytes data, Py_ssize_t at, Py_ssize_t n, bint standalone) except -1

@cython.locals(k=Py_ssize_t, c=int)
cdef bint _upper_at(const unsigned char* p, Py_ssize_t start, Py_ssize_t stop, bytes word)

@cython.locals(n=Py_ssize_t, size=Py_ssize_t, data=bytes, p="const unsigned char*", code=int,
               gtid=int, fde=int, xid=int, xa_prepare=int, query=int)
cpdef tuple group_body(list events, Py_ssize_t i, bint standalone)

@cython.locals(data=bytes, p="const unsigned char*", code=int, db_len=Py_ssize_t,
               current=list, parts=list, annotate_rows=int, table_map=int, v1_first=int,
               v1_last=int, v2_first=int, v2_last=int, db_at=Py_ssize_t)
cpdef list row_parts(list events, bytes private_db)

@cython.locals(p="const unsigned char*", end=Py_ssize_t, pos=Py_ssize_t, start=Py_ssize_t,
               seq="long long", sub="long long", digits=int, text=Py_ssize_t)
cpdef tuple annotate_trace(bytes data)

cpdef unsigned int log_pos(bytes data) except? 0

@cython.locals(k=Py_ssize_t)
cdef bint _at(const unsigned char* p, Py_ssize_t pos, bytes literal)

cpdef unsigned int timestamp(bytes data) except? 0

@cython.locals(p="const unsigned char*", n=Py_ssize_t)
cpdef list packed_events(bytes data, Py_ssize_t q, Py_ssize_t stop)

@cython.locals(p="const unsigned char*", n=Py_ssize_t, at=Py_ssize_t, code=int, gtid=int,
               fde=int, xid=int, xa_prepare=int, query_code=int)
cpdef tuple packed_group(bytes data, Py_ssize_t q, Py_ssize_t stop, bint standalone)

@cython.locals(p="const unsigned char*", count=Py_ssize_t)
cpdef Py_ssize_t packed_count(bytes data, Py_ssize_t q, Py_ssize_t stop, int code)

@cython.locals(p="const unsigned char*")
cpdef Py_ssize_t packed_find(bytes data, Py_ssize_t q, Py_ssize_t stop, int code)

@cython.locals(p="const unsigned char*", n=Py_ssize_t, at=Py_ssize_t, code=int,
               first=Py_ssize_t, size=Py_ssize_t, db_len=Py_ssize_t, annotate_rows=int,
               table_map=int, db_at=Py_ssize_t, annotate=bytes, out=list)
cpdef list packed_statements(bytes data, Py_ssize_t q, Py_ssize_t stop, bytes private_db)

cdef Statement _joined(bytes data, bytes annotate, Py_ssize_t first, Py_ssize_t stop,
                       Py_ssize_t size)
