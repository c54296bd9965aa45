# C types for wire.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

from cdc cimport named_tuple
from cdc.binlog cimport constants, header
from merge_source.fragment cimport Fragment, Statement, Watermark, new_fragment

@cython.locals(p="const unsigned char*", n=Py_ssize_t, pos=Py_ssize_t, stop=Py_ssize_t)
cpdef check_events(bytes body)

# The batch frame's writer (encode_batch): each column a bytearray its varints are appended to.
cdef int _varint(bytearray out, unsigned long long v) except -1
cdef Py_ssize_t _put(bytearray out, Py_ssize_t at, unsigned long long v) except -1
cdef int _room(bytearray out, Py_ssize_t at, Py_ssize_t n) except -1
cdef int _varint32(bytearray out, unsigned long long v) except -1
cdef int _field(bytearray out, int field, object data) except -1

@cython.locals(i=Py_ssize_t, s=Py_ssize_t, w=Py_ssize_t, hp=Py_ssize_t, pp=Py_ssize_t,
               sp=Py_ssize_t, mp=Py_ssize_t, p="unsigned long long", head=bytearray, parts=bytearray,
               stmts=bytearray, marks=bytearray, events=bytearray, spilled=bytearray,
               markers=bytearray, checkpoints=bytearray, msg=bytearray, first=bytearray,
               rest=bytearray, frame=bytearray, statements=list, st=Statement, packed=bytes)
cpdef bytes _batch_frame(list items, object spill_dir)

@cython.locals(n=Py_ssize_t, m=Py_ssize_t, i=Py_ssize_t, j=Py_ssize_t, p=Py_ssize_t,
               c=Py_ssize_t, end=Py_ssize_t, first=Py_ssize_t, head=list, parts=list,
               events=list, stmts=list, marks=list, statements=list, data=bytes)
cpdef _read_batch(object b, list out)

# The batch frame's reader (read_batch_frame): varints read from the frame's bytes in C.
cdef class _Cursor:
    cdef public bytes data
    cdef public Py_ssize_t pos
    cdef public Py_ssize_t end

    @cython.locals(p="const unsigned char*", pos=Py_ssize_t, end=Py_ssize_t,
                   value="unsigned long long", b="unsigned long long", shift=int)
    cpdef unsigned long long varint(self) except? 0xFFFFFFFFFFFFFFFF
    @cython.locals(n="unsigned long long", start=Py_ssize_t, stop=Py_ssize_t,
                   p="const unsigned char*")
    cpdef bytes field(self, unsigned long long tag)

@cython.locals(p="const unsigned char*", n=Py_ssize_t, i=Py_ssize_t)
cpdef Py_ssize_t _varint_count(bytes data, Py_ssize_t start, Py_ssize_t end) except -1

@cython.locals(r=_Cursor, n="unsigned long long")
cpdef list read_batch_frame(bytes body)

@cython.locals(r=_Cursor, head=_Cursor, parts=_Cursor, stmts=_Cursor, events=_Cursor,
               marks=_Cursor, at=Py_ssize_t, s=Py_ssize_t, e=Py_ssize_t, n="unsigned long long",
               tag="unsigned long long", field="unsigned long long", prev="unsigned long long",
               frag_s=Py_ssize_t, frag_e=Py_ssize_t, part_s=Py_ssize_t, part_e=Py_ssize_t,
               stmt_s=Py_ssize_t, stmt_e=Py_ssize_t, mark_s=Py_ssize_t, mark_e=Py_ssize_t,
               ev_s=Py_ssize_t, ev_e=Py_ssize_t, m=Py_ssize_t, nh=Py_ssize_t, np=Py_ssize_t,
               ns=Py_ssize_t, nm=Py_ssize_t, nf=Py_ssize_t, p=Py_ssize_t, j=Py_ssize_t,
               _k=Py_ssize_t, i=Py_ssize_t, c="unsigned long long", tso="unsigned long long",
               sort_kind="unsigned long long", seq="unsigned long long",
               txn_id="unsigned long long", kind="unsigned long long",
               timestamp="unsigned long long", has_trace="unsigned long long",
               trace_seq="unsigned long long", trace_sub="unsigned long long",
               statements=list, out=list, data=bytes, st=Statement, f=Fragment)
cpdef list _batch_items(bytes body, Py_ssize_t start, Py_ssize_t stop)
