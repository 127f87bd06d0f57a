/*
 * crc32c.c -- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum OP_MSG carries when its checksumPresent flag is set.
 *
 * Written here rather than linked: Debian ships no C library for it (only
 * Python bindings), and it is the one small algorithm the wire needs.  On
 * x86-64 with SSE4.2 the crc32 instruction does the work; elsewhere, and on
 * older CPUs, a byte-at-a-time table built on first use.  The C tests check
 * both paths against the RFC 3720 test vectors.
 */
#include "util.h"

#include <pthread.h>
#include <string.h>

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_build(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
}

/* The portable path; exported to the tests through mfi_crc32c_sw. */
uint32_t mfi_crc32c_sw(uint32_t crc, const void *data, size_t len);
uint32_t mfi_crc32c_sw(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    pthread_once(&table_once, table_build);
    crc = ~crc;
    while (len--)
        crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
static uint32_t crc32c_hw(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t c = ~crc;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}

uint32_t mf_crc32c(uint32_t crc, const void *data, size_t len)
{
    /* A load of a flag libgcc sets before main; cheap enough per call. */
    if (__builtin_cpu_supports("sse4.2"))
        return crc32c_hw(crc, data, len);
    return mfi_crc32c_sw(crc, data, len);
}
#else
uint32_t mf_crc32c(uint32_t crc, const void *data, size_t len)
{
    return mfi_crc32c_sw(crc, data, len);
}
#endif
