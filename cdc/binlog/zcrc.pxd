# The CRC32 of events for compiled modules that `from cdc.binlog cimport zcrc` (the dump stream's
# split, the writer's stamping): the same answer as zcrc.py's `crc` (zlib.crc32), without a Python
# call. Binlog events are short (about 100 bytes in the pipeline bench), where zlib's crc32 spends
# more on its set-up than on the bytes (~150 ns an event, measured): `crc32` below is the classic
# slice-by-8 table walk below 512 bytes (60 vs 330 ns at 113 bytes, measured), zlib's from there
# on and on a big-endian build. Link such a module with zlib (cdc/compiled.py C_LIBRARIES).
cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #include <zlib.h>
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    static uint32_t cdc_crc_table[8][256];
    static int cdc_crc_ready = 0;
    /* From here on zlib's braided loop is the faster (measured: 1.2 vs 2.1 GB/s at 300 bytes,
       3.2 vs 1.8 at 1,000). */
    #define CDC_CRC_ZLIB_FROM 512
    static void cdc_crc_init(void) {
        for (uint32_t n = 0; n < 256; n++) {
            uint32_t c = n;
            for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            cdc_crc_table[0][n] = c;
        }
        for (uint32_t n = 0; n < 256; n++) {
            uint32_t c = cdc_crc_table[0][n];
            for (int k = 1; k < 8; k++) {
                c = cdc_crc_table[0][c & 0xFF] ^ (c >> 8);
                cdc_crc_table[k][n] = c;
            }
        }
        cdc_crc_ready = 1;
    }
    static inline uint32_t cdc_crc32(uint32_t crc, const unsigned char *p, size_t n) {
        const uint32_t (*t)[256] = (const uint32_t (*)[256])cdc_crc_table;
        if (n >= CDC_CRC_ZLIB_FROM) return (uint32_t)crc32(crc, p, (uInt)n);
        if (!cdc_crc_ready) cdc_crc_init();
        crc = ~crc;
        while (n >= 8) {
            uint32_t one, two;
            memcpy(&one, p, 4);
            memcpy(&two, p + 4, 4);
            one ^= crc;
            crc = t[7][one & 0xFF] ^ t[6][(one >> 8) & 0xFF] ^ t[5][(one >> 16) & 0xFF]
                ^ t[4][one >> 24] ^ t[3][two & 0xFF] ^ t[2][(two >> 8) & 0xFF]
                ^ t[1][(two >> 16) & 0xFF] ^ t[0][two >> 24];
            p += 8;
            n -= 8;
        }
        while (n--) crc = t[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
        return ~crc;
    }
    #else
    static inline uint32_t cdc_crc32(uint32_t crc, const unsigned char *p, size_t n) {
        return (uint32_t)crc32(crc, p, (uInt)n);
    }
    #endif
    """
    unsigned int crc32 "cdc_crc32" (unsigned int crc, const unsigned char *buf, size_t len) nogil

cdef inline unsigned long crc(bytes data):
    return crc32(0, <const unsigned char*>data, <size_t>len(data))

cdef inline unsigned long crc_at(const unsigned char* p, Py_ssize_t at, Py_ssize_t n) noexcept nogil:
    return crc32(0, p + at, <size_t>n)
