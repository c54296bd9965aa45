# C types for renamer.py when Cython compiles it (an augmenting .pxd: the .py stays plain
# Python; NameMap stays a Python dataclass). PackedRenamer's loop reads the statement's buffer
# in C: event sizes, table ids and the body compare (splice.same: a memcmp).
import cython

from cdc.binlog cimport constants, header, splice
from cdc.protocol cimport dump_packets

cdef class PackedRenamer:
    cdef public object names
    cdef dict _by_id

    @cython.locals(p="const unsigned char*", pos=Py_ssize_t, end=Py_ssize_t,
                   size=Py_ssize_t, table_map=int, known=tuple, body=bytes)
    cpdef bytes rename(self, bytes data, set dropped)

    @cython.locals(renamed=bytes, body=bytes)
    cpdef bytes _learn(self, bytes event)
