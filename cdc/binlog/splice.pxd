# The C view of splice.py for compiled modules: `splice.append(out, p, pos, n)` with `p` a
# buffer pointer grows the bytearray once (CPython over-allocates it: amortised like `+=`) and
# copies the span in, where `out += src[a:b]` would make a bytes object per event first; the
# decimal writers spare a `b"%d" %` formatting (an object per call).
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from libc.string cimport memcmp, memcpy

cdef inline Py_ssize_t append(bytearray out, const unsigned char* src, Py_ssize_t start,
                              Py_ssize_t n) except -1:
    cdef Py_ssize_t at = PyByteArray_GET_SIZE(out)
    PyByteArray_Resize(out, at + n)
    memcpy(PyByteArray_AS_STRING(out) + at, src + start, n)
    return at

cdef inline Py_ssize_t extend(bytearray out, bytes b) except -1:
    cdef Py_ssize_t at = PyByteArray_GET_SIZE(out)
    cdef Py_ssize_t n = len(b)
    PyByteArray_Resize(out, at + n)
    memcpy(PyByteArray_AS_STRING(out) + at, <const char*>b, n)
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

cdef inline bint same(const unsigned char* src, Py_ssize_t start, Py_ssize_t n, bytes b):
    return len(b) == n and memcmp(src + start, <const char*>b, n) == 0

cdef inline Py_ssize_t decimal_len(unsigned long long v) noexcept nogil:
    cdef Py_ssize_t n = 1
    while v >= 10:
        v //= 10
        n += 1
    return n

cdef inline Py_ssize_t append_decimal(bytearray out, unsigned long long v) except -1:
    cdef char digits[20]  # 2**64 has 20 digits
    cdef Py_ssize_t n = 0
    while True:
        n += 1
        digits[20 - n] = <char>(48 + v % 10)  # '0' + the last digit
        v //= 10
        if v == 0:
            break
    cdef Py_ssize_t at = PyByteArray_GET_SIZE(out)
    PyByteArray_Resize(out, at + n)
    memcpy(PyByteArray_AS_STRING(out) + at, digits + 20 - n, n)
    return at

cdef inline void write_u64(unsigned char* p, Py_ssize_t at, unsigned long long v) noexcept nogil:
    cdef int i
    for i in range(8):
        p[at + i] = (v >> (8 * i)) & 0xFF
