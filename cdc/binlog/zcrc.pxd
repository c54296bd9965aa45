# zlib's crc32 for compiled modules that `from cdc.binlog cimport zcrc` (the dump stream's split,
# the writer's stamping): the same answer as zcrc.py's `crc` (zlib.crc32), without a Python
# call. Link such a module with zlib (cdc/compiled.py C_LIBRARIES).
cdef extern from "zlib.h":
    unsigned long zlib_crc32 "crc32" (unsigned long crc, const unsigned char *buf,
                                      unsigned int len) nogil

cdef inline unsigned long crc(bytes data):
    return zlib_crc32(0, <const unsigned char*>data, <unsigned int>len(data))
