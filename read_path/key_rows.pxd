# C types for key_rows.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython
from libc.string cimport memcpy

@cython.locals(p="const unsigned char*", lo=Py_ssize_t, top=Py_ssize_t, mid=Py_ssize_t)
cpdef Py_ssize_t upper_bound(bytearray keys, Py_ssize_t n, long long hi) except -1

@cython.locals(p="const unsigned char*", total=Py_ssize_t, i=Py_ssize_t)
cpdef Py_ssize_t blob_size(bytearray sizes, Py_ssize_t n) except -1

@cython.locals(end=Py_ssize_t, p="const unsigned char*", rows=Py_ssize_t, total=Py_ssize_t,
               at=Py_ssize_t, length=Py_ssize_t, start=Py_ssize_t, first=int, stop=Py_ssize_t,
               k0=Py_ssize_t, s0=Py_ssize_t, b0=Py_ssize_t, kq="unsigned char*",
               sq="unsigned char*", bq="unsigned char*", r=Py_ssize_t, body=Py_ssize_t,
               size=Py_ssize_t, i=Py_ssize_t)
cpdef tuple cut_packets(bytes data, Py_ssize_t pos, IntRows into)

@cython.locals(first=int, at=Py_ssize_t, length=Py_ssize_t)
cdef Py_ssize_t _data_start(const unsigned char* p, Py_ssize_t start, Py_ssize_t stop) except -1

@cython.locals(first=int, at=Py_ssize_t, negative=bint, k=Py_ssize_t, value="long long")
cdef long long _key_of(const unsigned char* p, Py_ssize_t start, Py_ssize_t body) except? -1

@cython.locals(value="unsigned long long")
cdef long long _key_at(const unsigned char* p, Py_ssize_t at) noexcept

cdef void _copy(unsigned char* q, Py_ssize_t w, const unsigned char* p, Py_ssize_t at,
                Py_ssize_t n) noexcept

@cython.locals(value="unsigned long long", i=int)
cdef void _put_key(unsigned char* q, Py_ssize_t at, long long key) noexcept

cdef Py_ssize_t _size_at(const unsigned char* p, Py_ssize_t at) noexcept

cdef void _put_size(unsigned char* q, Py_ssize_t at, Py_ssize_t size) noexcept

@cython.locals(n=Py_ssize_t, order=bytearray, nskip=Py_ssize_t, last=Py_ssize_t,
               op="unsigned char*", kp="const unsigned char*", total=Py_ssize_t,
               count=Py_ssize_t, j=Py_ssize_t, r=Py_ssize_t, key="long long",
               size=Py_ssize_t, out=bytearray, q="unsigned char*", bp="const unsigned char*",
               w=Py_ssize_t, rows=IntRows, blobs=bytes)
cpdef tuple merge_framed(list parts, bytearray skip, IntRows images)

@cython.locals(part=Py_ssize_t, i=Py_ssize_t)
cdef Py_ssize_t _frame(unsigned char* q, Py_ssize_t w, const unsigned char* b, Py_ssize_t start,
                       Py_ssize_t size) noexcept

@cython.locals(a=bytearray, ap="unsigned char*", bounds=list, w=Py_ssize_t, source=Py_ssize_t,
               rows=IntRows, kp="const unsigned char*", sp="const unsigned char*",
               i=Py_ssize_t, k=int, b=bytearray, merged=list, at=Py_ssize_t)
cpdef bytearray _merged_order(list inputs, Py_ssize_t n)

@cython.locals(ap="const unsigned char*", bp="unsigned char*", i=Py_ssize_t, j=Py_ssize_t,
               w=Py_ssize_t, k=int)
cdef void _merge_two(bytearray a, bytearray b, Py_ssize_t lo, Py_ssize_t mid,
                     Py_ssize_t hi) noexcept

cdef class IntRows:
    cdef public bytearray keys
    cdef public bytearray sizes
    cdef public bytearray blob
