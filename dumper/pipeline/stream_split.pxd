# C types for stream_split.py when Cython compiles it (an augmenting .pxd: the .py stays plain
# Python). The split's per-transaction shortcut (`_whole`) reads the statements' fields as C
# struct members and each TABLE_MAP's bytes in place: the merge pays it for every transaction
# at every stream count above one.
import cython

from cdc.binlog cimport constants, header
from merge_source.fragment cimport Statement as CStatement

@cython.locals(stream=int, s=int, st=CStatement)
cpdef int _whole(list statements, dict names, object stream_of) except -2

@cython.locals(stream=int, s=int, at=Py_ssize_t, n=Py_ssize_t, p="const unsigned char*")
cdef int _packed_stream(bytes data, dict names, object stream_of) except -2

@cython.locals(stream=int, s=int, e=bytes)
cdef int _listed_stream(list events, dict names, object stream_of) except -2

@cython.locals(name_at=Py_ssize_t, end=Py_ssize_t, key=bytes, got=object, p="const unsigned char*")
cdef int _map_stream(bytes data, Py_ssize_t at, dict names, object stream_of) except -2
