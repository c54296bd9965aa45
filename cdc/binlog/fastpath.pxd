# C types for fastpath.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

from cdc.binlog cimport header, zcrc
from cdc.binlog cimport constants

@cython.locals(p="unsigned char*", n=Py_ssize_t, off=Py_ssize_t, last=Py_ssize_t,
               size=Py_ssize_t, stop=Py_ssize_t, crc="unsigned long")
cpdef Py_ssize_t stamp_positions(bytearray buf, Py_ssize_t base, Py_ssize_t start=*,
                                 Py_ssize_t end=*) except -1
