/*
 * test_fuzz.c -- the fuzz targets under the test binary's ASan/UBSan build,
 * without libFuzzer:
 *
 *   /fuzz/regressions   every committed regression input,
 *                       tests/fuzz_regressions/<target>/<file>, through its
 *                       target (the directory is $MF_FUZZ_REGRESSIONS, else
 *                       found beside an in-place build's multifora/_ctest)
 *   /fuzz/targets/...   the targets reach what they are meant to: a log the
 *                       real writer made replays through the wal target, a
 *                       valid ping through the wire target
 */
#include "test.h"
#include "fuzz.h"
#include "../storage/wal.h"
#include "../wire/wire.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name;
    int (*fn)(const uint8_t *, size_t);
} targets[] = {
    {"bson", mf_fuzz_bson},
    {"wire", mf_fuzz_wire},
    {"wal", mf_fuzz_wal},
    {"scram", mf_fuzz_scram},
};

static bool regressions_dir(char *out, size_t cap)
{
    const char *env = getenv("MF_FUZZ_REGRESSIONS");
    struct stat st;
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        return stat(out, &st) == 0 && S_ISDIR(st.st_mode);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return false;
    *slash = '\0';
    if ((size_t)snprintf(out, cap, "%s/../tests/fuzz_regressions", exe) >= cap)
        return false;
    return stat(out, &st) == 0 && S_ISDIR(st.st_mode);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static bool read_file(const char *path, uint8_t **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc(n > 0 ? (size_t)n : 1);
    *len = n > 0 ? (size_t)n : 0;
    bool ok = *data && fread(*data, 1, *len, f) == *len;
    fclose(f);
    return ok;
}

MFT_CASE(fuzz_regressions, "/fuzz/regressions")
{
    char root[PATH_MAX], dir[PATH_MAX + 64], path[PATH_MAX + 320];
    CHECK(regressions_dir(root, sizeof root)); /* set MF_FUZZ_REGRESSIONS */
    mf_fuzz_init();
    int total = 0;
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        struct dirent **names;
        snprintf(dir, sizeof dir, "%s/%s", root, targets[t].name);
        int n = scandir(dir, &names, NULL, by_name);
        if (n < 0)
            continue; /* no regression input for this target (yet) */
        for (int i = 0; i < n; i++) {
            if (names[i]->d_name[0] != '.') {
                uint8_t *data = NULL;
                size_t len = 0;
                snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
                printf("  %s\n", path);
                fflush(stdout);
                bool ok = read_file(path, &data, &len);
                if (ok)
                    targets[t].fn(data, len); /* a regression aborts here */
                free(data);
                total++;
                if (!ok) {
                    mft_fail(__FILE__, __LINE__, path);
                    break;
                }
            }
            free(names[i]);
        }
        free(names);
    }
    printf("  %d regression inputs replayed\n", total);
    mf_fuzz_cleanup();
    mf_log_configure(MF_LOG_INFO, true);
}

/* A segment the real writer made, in the wal target's input format. */
MFT_CASE(fuzz_wal_replays_a_real_log, "/fuzz/targets/wal_replays_a_real_log")
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    mf_wal *w;
    mf_error err;
    mf_lsn lsn = 0;
    snprintf(dir, sizeof dir, "%s/log", mft_tmpdir());
    CHECK(mkdir(dir, 0700) == 0);
    CHECK_INT(mf_wal_open(dir, NULL, 0, NULL, NULL, &w, &err), 0);
    for (int i = 0; i < 3; i++)
        CHECK_INT(mf_wal_append(w, "record", 6, &lsn, &err), 0);
    CHECK_INT(mf_wal_commit(w, lsn, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);

    uint8_t *seg;
    size_t len;
    snprintf(path, sizeof path, "%s/wal.%016x", dir, 1u);
    CHECK(read_file(path, &seg, &len));
    CHECK(len > 32 + 48);
    /* The mode byte replaces the segment header: fix hashes, append after
     * recovery.  The blocks get the harness's salt. */
    seg[31] = 1 | 4;
    for (size_t off = 32; off + 48 <= len; off += 48 + mf_load_u32le(seg + off + 32)) {
        CHECK(memcmp(seg + off, "MFWB", 4) == 0);
        for (int b = 0; b < 8; b++)
            seg[off + 8 + b] = (uint8_t)(MF_FUZZ_WAL_SALT >> (8 * b));
    }
    mf_fuzz_init();
    mf_fuzz_wal_replayed = 0;
    mf_fuzz_wal(seg + 31, len - 31);
    free(seg);
    mf_fuzz_cleanup();
    mf_log_configure(MF_LOG_INFO, true);
    CHECK_INT(mf_fuzz_wal_replayed, 3);
}

MFT_CASE(fuzz_wire_parses_a_ping, "/fuzz/targets/wire_parses_a_ping")
{
    bson_t ping = BSON_INITIALIZER;
    BSON_APPEND_INT32(&ping, "ping", 1);
    BSON_APPEND_UTF8(&ping, "$db", "admin");
    mf_buf in = {0};
    uint8_t mode = 1, hdr[16] = {0};
    mf_buf_append(&in, &mode, 1);
    mf_store_i32le(hdr + 12, MF_OPCODE_MSG);
    mf_buf_append(&in, hdr, 16); /* length: set by mode bit 0 */
    mf_buf_put_i32le(&in, 0);
    mode = 0;
    mf_buf_append(&in, &mode, 1);
    mf_buf_append(&in, bson_get_data(&ping), ping.len);
    mf_fuzz_wire_parsed = 0;
    mf_fuzz_wire(in.data, in.len);
    CHECK_INT(mf_fuzz_wire_parsed, 1);
    mf_buf_free(&in);
    bson_destroy(&ping);
}
