# zlib's crc32 for compiled modules that `from merge_source cimport zcrc` (scan): the same
# answer as zcrc.py's `crc` (zlib.crc32), without a Python call. Link the module with zlib
# (setup.py LIBRARIES).
cdef extern from "zlib.h":
    unsigned long zlib_crc32 "crc32" (unsigned long crc, const unsigned char *buf,
                                      unsigned int len) nogil

cdef inline unsigned long crc(bytes data):
    return zlib_crc32(0, <const unsigned char*>data, <unsigned int>len(data))
