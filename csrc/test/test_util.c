/* Cases for csrc/util: CRC-32C, the error table, buffers, the log ring. */
#include "test.h"
#include "../util/util.h"

#include <stdlib.h>

uint32_t mfi_crc32c_sw(uint32_t crc, const void *data, size_t len);
bool mfi_error_table_is_sorted(void);

/* RFC 3720 appendix B.4 vectors, and the customary "123456789" check. */
MFT_CASE(crc_vectors, "/util/crc32c/rfc3720_vectors")
{
    uint8_t buf[32];
    uint32_t (*impl[2])(uint32_t, const void *, size_t) = {mf_crc32c, mfi_crc32c_sw};
    for (int k = 0; k < 2; k++) {
        memset(buf, 0, 32);
        CHECK_INT(impl[k](0, buf, 32), 0x8A9136AAu);
        memset(buf, 0xff, 32);
        CHECK_INT(impl[k](0, buf, 32), 0x62A8AB43u);
        for (int i = 0; i < 32; i++)
            buf[i] = (uint8_t)i;
        CHECK_INT(impl[k](0, buf, 32), 0x46DD794Eu);
        for (int i = 0; i < 32; i++)
            buf[i] = (uint8_t)(31 - i);
        CHECK_INT(impl[k](0, buf, 32), 0x113FDB5Cu);
        CHECK_INT(impl[k](0, "123456789", 9), 0xE3069283u);
    }
}

MFT_CASE(crc_incremental, "/util/crc32c/incremental_equals_whole")
{
    uint8_t buf[1000];
    for (int i = 0; i < 1000; i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    uint32_t whole = mf_crc32c(0, buf, sizeof buf);
    for (size_t cut = 0; cut <= sizeof buf; cut += 37) {
        uint32_t part = mf_crc32c(mf_crc32c(0, buf, cut), buf + cut, sizeof buf - cut);
        CHECK_INT(part, whole);
        CHECK_INT(mfi_crc32c_sw(mfi_crc32c_sw(0, buf, cut), buf + cut, sizeof buf - cut), whole);
    }
}

MFT_CASE(error_names, "/util/error/names")
{
    char scratch[24];
    CHECK(mfi_error_table_is_sorted());
    CHECK_STR(mf_error_name(59, scratch), "CommandNotFound");
    CHECK_STR(mf_error_name(2, scratch), "BadValue");
    CHECK_STR(mf_error_name(11000, scratch), "DuplicateKey");
    CHECK_STR(mf_error_name(288, scratch), "ChecksumMismatch");
    CHECK_STR(mf_error_name(40571, scratch), "Location40571");
}

MFT_CASE(error_set, "/util/error/set_returns_code_and_truncates")
{
    mf_error err;
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_INT(mf_error_set(&err, 2, "bad %s", "thing"), 2);
    CHECK_STR(err.msg, "bad thing");
    CHECK_INT(mf_error_set(&err, 22, "%s", big), 22);
    CHECK_INT(strlen(err.msg), MF_ERRMSG_MAX - 1);
    CHECK_INT(mf_error_set(NULL, 7, "ignored"), 7);
}

MFT_CASE(buf_grow, "/util/buf/append_and_grow")
{
    mf_buf b = {0};
    for (int i = 0; i < 10000; i++)
        CHECK(mf_buf_put_i32le(&b, i) == 0);
    CHECK_INT(b.len, 40000);
    CHECK_INT(mf_load_i32le(b.data + 4 * 9999), 9999);
    CHECK_INT(mf_load_i32le(b.data), 0);
    mf_buf_free(&b);
    CHECK(b.data == NULL && b.len == 0);
}

MFT_CASE(uint32_key, "/util/buf/uint32_to_key_matches_printf")
{
    static const uint32_t vs[] = {0, 1, 9, 10, 99, 100, 999, 1000, 10000, 123456789,
                                  4294967295u};
    for (size_t i = 0; i < sizeof vs / sizeof vs[0]; i++) {
        char buf[16], want[16];
        const char *k;
        snprintf(want, sizeof want, "%u", vs[i]);
        CHECK_INT(mf_uint32_to_key(vs[i], &k, buf, sizeof buf), strlen(want));
        CHECK_STR(k, want);
    }
}

typedef struct {
    int n;
    char first[256];
    char last[256];
} ring_seen;

static void see(const char *line, void *arg)
{
    ring_seen *s = arg;
    if (s->n++ == 0)
        snprintf(s->first, sizeof s->first, "%s", line);
    snprintf(s->last, sizeof s->last, "%s", line);
}

MFT_CASE(log_ring, "/util/log/ring_keeps_the_last_lines")
{
    mf_log_configure(MF_LOG_INFO, false);
    ring_seen before = {0};
    uint64_t start = mf_log_ring_each(see, &before);
    for (int i = 0; i < MF_LOG_RING + 100; i++)
        mf_log(MF_LOG_INFO, "TEST", 1, "ctest", "line %d \"quoted\"", i);
    mf_log(MF_LOG_DEBUG, "TEST", 1, "ctest", "dropped: below the level");
    ring_seen s = {0};
    uint64_t total = mf_log_ring_each(see, &s);
    CHECK_INT(total, start + MF_LOG_RING + 100);
    CHECK_INT(s.n, MF_LOG_RING);
    CHECK(strstr(s.first, "\"msg\":\"line 100 \\\"quoted\\\"\"") != NULL);
    CHECK(strstr(s.last, "line 1123") != NULL);
    CHECK(strncmp(s.last, "{\"t\":{\"$date\":\"", 15) == 0);
    CHECK(strstr(s.last, "\"s\":\"I\",\"c\":\"TEST    \",\"id\":1,\"ctx\":\"ctest\"") != NULL);
}
