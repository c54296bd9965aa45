# C types for page_rows.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

@cython.locals(p="const unsigned char*", pos=Py_ssize_t, first=int, start=Py_ssize_t,
               length=Py_ssize_t, end=Py_ssize_t, fields=list, out=list, row=bytes)
cpdef list keyed_rows(list page, Py_ssize_t nkey, bint integer_key)

@cython.locals(negative=bint, k=Py_ssize_t, value="long long")
cdef long long _digits(const unsigned char* p, Py_ssize_t start, Py_ssize_t end) noexcept
