# C types for row_packets.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

@cython.locals(total=Py_ssize_t, n=Py_ssize_t, size=Py_ssize_t, k=Py_ssize_t, i=Py_ssize_t,
               at=Py_ssize_t, q="unsigned char*", p="const unsigned char*", row=bytes)
cpdef tuple frame_rows(list rows, Py_ssize_t start, Py_ssize_t stop, int seq)

@cython.locals(q="unsigned char*", end=Py_ssize_t, at=Py_ssize_t)
cpdef int stamp(bytearray data, int seq) except -1
