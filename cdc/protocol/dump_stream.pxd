# C types for dump_stream.py when Cython compiles it (an augmenting .pxd: the .py stays plain
# Python).
import cython

from cdc.binlog cimport constants, header, zcrc
from cdc.protocol cimport dump_packets

@cython.locals(end=Py_ssize_t, stop=Py_ssize_t, p="const unsigned char*")
cpdef tuple split_events(bytes data, Py_ssize_t pos, bint verify)

@cython.locals(end=Py_ssize_t, stop=Py_ssize_t, last="unsigned int", p="const unsigned char*")
cpdef tuple scan_events(bytes data, Py_ssize_t pos, bint verify)

# The test of one packet, in both loops: its fields read from the buffer in C.
@cython.locals(p="const unsigned char*", length=Py_ssize_t, stop=Py_ssize_t, at=Py_ssize_t,
               code=int)
cdef Py_ssize_t _plain_event(bytes data, Py_ssize_t pos, Py_ssize_t end, bint verify)
