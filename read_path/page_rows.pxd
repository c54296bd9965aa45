# C types for page_rows.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

@cython.locals(row=bytes)
cpdef list keyed_rows(list page, Py_ssize_t nkey, bint integer_key)

@cython.locals(end=Py_ssize_t, p="const unsigned char*", length=Py_ssize_t, start=Py_ssize_t,
               first=int)
cpdef tuple keyed_packets(bytes data, Py_ssize_t pos, Py_ssize_t nkey, bint integer_key, list out)

@cython.locals(p="const unsigned char*", fields=list, first=int, start=Py_ssize_t,
               length=Py_ssize_t, end=Py_ssize_t)
cdef tuple _keyed(bytes row, Py_ssize_t pos, Py_ssize_t stop, Py_ssize_t nkey, bint integer_key)

@cython.locals(negative=bint, k=Py_ssize_t, value="long long")
cdef long long _digits(const unsigned char* p, Py_ssize_t start, Py_ssize_t end) noexcept
