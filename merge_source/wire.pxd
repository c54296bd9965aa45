# C types for wire.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

from cdc.binlog cimport constants, header
from merge_source.fragment cimport Fragment, Statement, Watermark

@cython.locals(p="const unsigned char*", n=Py_ssize_t, pos=Py_ssize_t, stop=Py_ssize_t)
cpdef check_events(bytes body)

@cython.locals(i=Py_ssize_t, head=list, parts=list, events=list, stmts=list, marks=list,
               statements=list, st=Statement, packed=bytes)
cpdef _batch(object b, list items, object spill_dir)

@cython.locals(n=Py_ssize_t, m=Py_ssize_t, i=Py_ssize_t, j=Py_ssize_t, p=Py_ssize_t,
               c=Py_ssize_t, end=Py_ssize_t, first=Py_ssize_t, head=list, parts=list,
               events=list, stmts=list, marks=list, statements=list, data=bytes)
cpdef _read_batch(object b, list out)
