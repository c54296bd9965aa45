# C types for wire.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

@cython.locals(p="const unsigned char*", n=Py_ssize_t, events=list)
cpdef list statement_events(bytes body, Py_ssize_t pos, Py_ssize_t stop)
