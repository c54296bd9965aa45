# C types for image_text.py when Cython compiles it (an augmenting .pxd: the .py stays plain Python).
import cython

from read_path cimport spelling

@cython.locals(p="const unsigned char*", q="unsigned char*", n=Py_ssize_t, j=Py_ssize_t,
               i=Py_ssize_t, start=Py_ssize_t, length=Py_ssize_t, total=Py_ssize_t,
               at=Py_ssize_t, kind=int, size=Py_ssize_t, texts=list, text=bytes, out=bytearray)
cpdef bytes spell_row(bytes data, list wanted, list starts, list kinds, list sizes, list decimals,
                      list fallback)

@cython.locals(signed=bint, negative=bint, v="unsigned long long")
cdef Py_ssize_t _length(const unsigned char* p, Py_ssize_t start, int kind, Py_ssize_t size,
                        int decimals) noexcept

@cython.locals(u="unsigned long long", byte="unsigned long long", k=Py_ssize_t)
cdef unsigned long long _unsigned(const unsigned char* p, Py_ssize_t start, Py_ssize_t size,
                                  bint big_endian) noexcept

@cython.locals(u="unsigned long long", half="unsigned long long")
cdef unsigned long long _magnitude(const unsigned char* p, Py_ssize_t start, Py_ssize_t size,
                                   bint signed) noexcept

@cython.locals(v="unsigned long long")
cdef unsigned long long _fraction(const unsigned char* p, Py_ssize_t start,
                                  Py_ssize_t size) noexcept

@cython.locals(n=Py_ssize_t)
cdef Py_ssize_t _digits(unsigned long long v) noexcept

cdef Py_ssize_t _lenenc_size(Py_ssize_t length) noexcept

@cython.locals(size=Py_ssize_t, k=Py_ssize_t)
cdef Py_ssize_t _put_length(unsigned char* q, Py_ssize_t at, Py_ssize_t length) noexcept

@cython.locals(p="const unsigned char*")
cdef Py_ssize_t _put_text(unsigned char* q, Py_ssize_t at, bytes text)

@cython.locals(k=Py_ssize_t)
cdef Py_ssize_t _put_bytes(unsigned char* q, Py_ssize_t at, const unsigned char* p,
                           Py_ssize_t start, Py_ssize_t length) noexcept

@cython.locals(k=Py_ssize_t)
cdef Py_ssize_t _put_number(unsigned char* q, Py_ssize_t at, unsigned long long v,
                            Py_ssize_t width) noexcept

cdef Py_ssize_t _put_integer(unsigned char* q, Py_ssize_t at, const unsigned char* p,
                             Py_ssize_t start, Py_ssize_t size, bint signed,
                             Py_ssize_t length) noexcept

cdef Py_ssize_t _put_date(unsigned char* q, Py_ssize_t at, unsigned long long v) noexcept

@cython.locals(v="unsigned long long", ymd="unsigned long long", hms="unsigned long long",
               ym="unsigned long long", micro="unsigned long long")
cdef Py_ssize_t _put_datetime(unsigned char* q, Py_ssize_t at, const unsigned char* p,
                              Py_ssize_t start, Py_ssize_t size, int decimals) noexcept

cdef unsigned long long _datetime2(unsigned long long v) noexcept
