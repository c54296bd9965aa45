# The C view of splice.py for compiled modules: `splice.append(out, p, pos, n)` with `p` a
# buffer pointer grows the bytearray once (CPython over-allocates it: amortised like `+=`) and
# copies the span in, where `out += src[a:b]` would make a bytes object per event first.
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from libc.string cimport memcpy

cdef inline Py_ssize_t append(bytearray out, const unsigned char* src, Py_ssize_t start,
                              Py_ssize_t n) except -1:
    cdef Py_ssize_t at = PyByteArray_GET_SIZE(out)
    PyByteArray_Resize(out, at + n)
    memcpy(PyByteArray_AS_STRING(out) + at, src + start, n)
    return at

cdef inline Py_ssize_t append_gap(bytearray out, const unsigned char* src, Py_ssize_t start,
                                  Py_ssize_t n, Py_ssize_t split, bytes gap) except -1:
    cdef Py_ssize_t at = PyByteArray_GET_SIZE(out)
    cdef Py_ssize_t g = len(gap)
    PyByteArray_Resize(out, at + n + g)
    cdef char* q = PyByteArray_AS_STRING(out) + at
    memcpy(q, src + start, split)
    memcpy(q + split, <const char*>gap, g)
    memcpy(q + split + g, src + start + split, n - split)
    return at
