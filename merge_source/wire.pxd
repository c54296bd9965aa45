# C types for wire.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

@cython.locals(p="const unsigned char*", n=Py_ssize_t, events=list)
cpdef list statement_events(bytes body, Py_ssize_t pos, Py_ssize_t stop)

@cython.locals(pos=Py_ssize_t, end=Py_ssize_t, n=Py_ssize_t, kind=Py_ssize_t, has_cp=int)
cpdef _records(bytes body, list out)

@cython.locals(kkind=Py_ssize_t, kind=Py_ssize_t, n_st=Py_ssize_t, n_p=Py_ssize_t, flags=int,
               count=Py_ssize_t, size=Py_ssize_t, n=Py_ssize_t, statements=list)
cpdef tuple _read_fragment(bytes body, object view, Py_ssize_t pos)
