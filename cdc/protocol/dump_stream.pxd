# C types for dump_stream.py when Cython compiles it (an augmenting .pxd: the .py stays plain
# Python).
import cython

from cdc.binlog cimport constants, header, zcrc

@cython.locals(p="const unsigned char*", end=Py_ssize_t, length=Py_ssize_t, stop=Py_ssize_t,
               at=Py_ssize_t, event_at=Py_ssize_t, min_packet=Py_ssize_t, code=int,
               residue="unsigned long", max_chunk=Py_ssize_t, rotate=int, heartbeat=int)
cpdef tuple split_events(bytes data, Py_ssize_t pos, bint verify)
