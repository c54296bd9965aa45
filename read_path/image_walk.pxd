# C types for image_walk.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

@cython.locals(n=Py_ssize_t, end=Py_ssize_t, p="const unsigned char*", nulls=Py_ssize_t,
               i=Py_ssize_t, width=Py_ssize_t, length=Py_ssize_t, k=Py_ssize_t,
               byte=Py_ssize_t)
cpdef Py_ssize_t value_starts(bytes data, Py_ssize_t pos, list fixed, list prefix, list starts) except -1
