# C types for framing.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

from cdc.binlog cimport constants, header

@cython.locals(end=Py_ssize_t, largest=Py_ssize_t, min_size=Py_ssize_t,
               p="const unsigned char*", q="unsigned char*", off=Py_ssize_t, n=Py_ssize_t,
               size=Py_ssize_t, pos=Py_ssize_t, at=Py_ssize_t, length=Py_ssize_t, k=Py_ssize_t)
cpdef tuple frame_whole_events(bytes data, int seq)
