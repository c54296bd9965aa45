# C types for scan.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

from merge_source cimport zcrc

@cython.locals(p="const unsigned char*", end=Py_ssize_t, length=Py_ssize_t, stop=Py_ssize_t,
               code=int, size=Py_ssize_t, residue="unsigned long",
               max_chunk=Py_ssize_t, rotate=int, heartbeat=int)
cpdef tuple split_events(bytes data, Py_ssize_t pos, bint verify)

@cython.locals(db_len=Py_ssize_t, status_len=Py_ssize_t, start=Py_ssize_t)
cpdef bint group_end(bytes data, bint standalone)

@cython.locals(n=Py_ssize_t, size=Py_ssize_t, data=bytes, p="const unsigned char*", code=int,
               gtid=int, fde=int, xid=int, xa_prepare=int, query=int)
cpdef tuple group_body(list events, Py_ssize_t i, bint standalone)

@cython.locals(data=bytes, p="const unsigned char*", code=int, db_len=Py_ssize_t,
               current=list, parts=list)
cpdef list row_parts(list events, bytes private_db)

@cython.locals(p="const unsigned char*", end=Py_ssize_t, pos=Py_ssize_t, start=Py_ssize_t,
               seq="long long", sub="long long", digits=int)
cpdef tuple annotate_trace(bytes data)

cpdef unsigned int log_pos(bytes data) except? 0

@cython.locals(k=Py_ssize_t)
cdef bint _at(const unsigned char* p, Py_ssize_t pos, bytes literal)

cpdef unsigned int timestamp(bytes data) except? 0

@cython.locals(p="const unsigned char*", v="unsigned int")
cdef unsigned int _header_u32(bytes data, Py_ssize_t at) except? 0
