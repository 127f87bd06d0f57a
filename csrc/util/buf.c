/*
 * buf.c -- a growable byte buffer, and clocks.
 */
#include "util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int mf_buf_reserve(mf_buf *b, size_t extra)
{
    if (extra <= b->cap - b->len)
        return 0;
    if (extra > SIZE_MAX / 2 - b->len)
        return -1;
    size_t need = b->len + extra;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p)
        return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

int mf_buf_append(mf_buf *b, const void *p, size_t n)
{
    if (mf_buf_reserve(b, n) != 0)
        return -1;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int mf_buf_put_i32le(mf_buf *b, int32_t v)
{
    uint8_t le[4];
    mf_store_i32le(le, v);
    return mf_buf_append(b, le, 4);
}

void mf_buf_free(mf_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

size_t mf_uint32_to_key(uint32_t v, const char **out, char *buf, size_t size)
{
    char *end = buf + size - 1, *p = end;
    *end = '\0';
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    *out = p;
    return (size_t)(end - p);
}

int64_t mf_clock_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t mf_clock_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int mf_deadline_expired(mf_error *err)
{
    return mf_error_set(err, MF_MaxTimeMSExpired, "operation exceeded time limit");
}

void mf_clock_deadline(int clock, int64_t ms, struct timespec *ts)
{
    clock_gettime((clockid_t)clock, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}
