/*
 * Cases for csrc/storage/wal.c: round trips, torn tails at every offset,
 * bit flips, stale blocks, segments and drop_through, group commit under
 * threads, injected faults at every site, and simulated power loss.
 *
 * Records are generated from (seed, LSN), so a replay is checked against
 * the generator instead of a stored copy.  Everything is deterministic
 * except the segment salts, which the log draws at random.
 */
#include "test.h"
#include "../storage/os.h"
#include "../storage/wal.h"

#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

/* ------------------------------------------------------------ helpers */

static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

enum { GEN_MIXED, GEN_RANDOM, GEN_ZIP };

/* Record `lsn` has size sizes[(lsn - 1) % nsizes]; its bytes are random
 * or compressible as `kind` says (GEN_MIXED: each size both ways, in
 * alternate passes over the table). */
typedef struct gen {
    uint64_t seed;
    const size_t *sizes;
    size_t nsizes;
    int kind;
    mf_lsn zip_from; /* if set: records from this LSN on are compressible,
                        the others random */
} gen;

static size_t gen_len(const gen *g, mf_lsn lsn)
{
    return g->sizes[(lsn - 1) % g->nsizes];
}

static bool gen_zip(const gen *g, mf_lsn lsn)
{
    if (g->zip_from)
        return lsn >= g->zip_from;
    if (g->kind != GEN_MIXED)
        return g->kind == GEN_ZIP;
    return ((lsn + (lsn - 1) / g->nsizes) & 1) != 0;
}

static void gen_fill(const gen *g, mf_lsn lsn, uint8_t *buf, size_t len)
{
    uint64_t s = mix64(g->seed ^ (lsn * 0x9E3779B97F4A7C15ull));
    if (gen_zip(g, lsn)) {
        static const char words[] = "the quick brown fox jumps over the lazy dog; ";
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)words[(i + s % 7) % (sizeof words - 1)];
    } else {
        for (size_t i = 0; i < len; i += 8) {
            uint64_t r = mix64(s + i);
            size_t n = len - i < 8 ? len - i : 8;
            memcpy(buf + i, &r, n);
        }
    }
    /* The LSN stamped in, so no two records are alike. */
    for (size_t i = 0; i < len && i < 8; i++)
        buf[i] ^= (uint8_t)(lsn >> (8 * i));
}

/* Append record `lsn` of `g` (it must get that LSN). */
static int put(mf_wal *w, const gen *g, mf_lsn lsn, mf_error *err)
{
    size_t len = gen_len(g, lsn);
    uint8_t *buf = malloc(len);
    mf_lsn got = 0;
    if (!buf)
        return mf_error_set(err, MF_InternalError, "test: out of memory");
    gen_fill(g, lsn, buf, len);
    int rc = mf_wal_append(w, buf, len, &got, err);
    free(buf);
    if (rc == 0 && got != lsn)
        return mf_error_set(err, MF_InternalError, "appended as LSN %" PRIu64 ", not %" PRIu64,
                            got, lsn);
    return rc;
}

/* What a replay delivered. */
typedef struct seen {
    const gen *g;    /* if set, every record must be its generator's */
    mf_lsn first, last;
    size_t n;
    int bad;         /* out of order, or not the generator's bytes */
    uint64_t digest; /* of the whole sequence, order-sensitive */
    mf_lsn stop_at;  /* fail the replay at this LSN (0: never) */
} seen;

static int collect(void *arg, mf_lsn lsn, const uint8_t *rec, size_t len, mf_error *err)
{
    seen *s = arg;
    if (s->n == 0)
        s->first = lsn;
    else if (lsn != s->last + 1)
        s->bad++;
    s->last = lsn;
    s->n++;
    s->digest = XXH3_64bits_withSeed(rec, len, s->digest ^ lsn);
    if (s->g) {
        uint8_t *want = malloc(len);
        if (!want || gen_len(s->g, lsn) != len)
            s->bad++;
        else {
            gen_fill(s->g, lsn, want, len);
            if (memcmp(want, rec, len) != 0)
                s->bad++;
        }
        free(want);
    }
    if (s->stop_at && lsn == s->stop_at)
        return mf_error_set(err, MF_OperationFailed, "replay stopped at %" PRIu64, lsn);
    return 0;
}

/* The fault table of the logs these cases open (os.h): quiet() makes it,
 * open_log gives it to each log, and the cases arm it. */
static mf_os_faults *log_faults;

static int open_log(const char *dir, const mf_wal_options *opt, mf_lsn after, seen *s,
                    const gen *g, mf_wal **w, mf_error *err)
{
    mf_wal_options o = opt ? *opt : (mf_wal_options){0};
    o.faults = log_faults;
    memset(s, 0, sizeof *s);
    s->g = g;
    return mf_wal_open(dir, &o, after, collect, s, w, err);
}

static void subdir(char *out, size_t cap, const char *name)
{
    if (snprintf(out, cap, "%s/%s", mft_tmpdir(), name) >= (int)cap)
        out[0] = '\0';
    mkdir(out, 0755);
}

static void seg_file(char *out, size_t cap, const char *dir, mf_lsn first)
{
    if (snprintf(out, cap, "%s/wal.%016" PRIx64, dir, first) >= (int)cap)
        out[0] = '\0';
}

static long long fsize(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

static bool spit(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The first LSNs of the segment files in `dir`, ascending. */
static int list_segs(const char *dir, mf_lsn *firsts, int max)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "wal.", 4) == 0 && strlen(e->d_name) == 20 && n < max)
            firsts[n++] = strtoull(e->d_name + 4, NULL, 16);
    }
    closedir(d);
    qsort(firsts, (size_t)n, sizeof *firsts, cmp_u64);
    return n;
}

/* Blocks of a segment image: offset, record count, codec. */
typedef struct blocks {
    size_t n;
    uint64_t off[256], end[256];
    uint32_t count[256];
    uint8_t codec[256];
} blocks;

static void walk_blocks(const uint8_t *img, size_t len, blocks *b)
{
    size_t off = 32;
    b->n = 0;
    while (off + 48 <= len && b->n < 256) {
        uint32_t stored = mf_load_u32le(img + off + 32);
        b->off[b->n] = off;
        b->count[b->n] = mf_load_u32le(img + off + 24);
        b->codec[b->n] = img[off + 4];
        off += 48 + stored;
        b->end[b->n++] = off;
    }
}

/* Append and commit records first..last, `per` to a commit. */
static int put_commit(mf_wal *w, const gen *g, mf_lsn first, mf_lsn last, int per,
                      mf_error *err)
{
    for (mf_lsn l = first; l <= last; l++) {
        int rc = put(w, g, l, err);
        if (rc == 0 && ((l - first + 1) % (mf_lsn)per == 0 || l == last))
            rc = mf_wal_commit(w, l, err);
        if (rc)
            return rc;
    }
    return 0;
}

static void quiet(void)
{
    if (!log_faults)
        log_faults = mf_os_faults_new();
    mf_os_fault_clear(log_faults);
    mf_os_sim_enable(false);
    mf_log_configure(MF_LOG_INFO, false); /* torn tails are logged as warnings */
}

/* ------------------------------------------------------------- round trips */

static const size_t big_sizes[] = {1,     2,     3,     5,      16,          100,
                                   255,   1000,  4095,  4096,   65535,       65536,
                                   65537, 300000, (1u << 20) - 4, 1u << 20, (1u << 20) + 1,
                                   2u << 20};

MFT_CASE(roundtrip, "/storage/wal/roundtrip_sizes_1B_to_2MiB")
{
    quiet();
    const char *dir = mft_tmpdir();
    size_t ns = sizeof big_sizes / sizeof big_sizes[0];
    gen g = {.seed = 42, .sizes = big_sizes, .nsizes = ns, .kind = GEN_MIXED};
    mf_lsn n = 2 * ns; /* every size random once and compressible once */
    mf_error err;
    mf_wal *w;
    seen s;
    CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, 0);
    CHECK_INT(mf_wal_last_lsn(w), 0);
    /* Commit groups of 1, 2, 3, ... records. */
    int group = 1, in_group = 0;
    for (mf_lsn l = 1; l <= n; l++) {
        CHECK_INT(put(w, &g, l, &err), 0);
        CHECK_INT(mf_wal_last_lsn(w), l);
        if (++in_group == group || l == n) {
            CHECK_INT(mf_wal_commit(w, l, &err), 0);
            CHECK_INT(mf_wal_durable_lsn(w), l);
            group = group % 4 + 1;
            in_group = 0;
        }
    }
    mf_wal_stats st;
    mf_wal_get_stats(w, &st);
    CHECK_INT(st.appends, n);
    CHECK(st.bytes_stored < st.bytes_raw); /* LZ4 was used where it helps */
    CHECK(st.blocks >= st.syncs);
    CHECK_INT(mf_wal_close(w, &err), 0);

    /* Replayed twice: the same records, the same digest. */
    uint64_t digest = 0;
    for (int k = 0; k < 2; k++) {
        CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), 0);
        CHECK_INT(s.n, n);
        CHECK_INT(s.first, 1);
        CHECK_INT(s.bad, 0);
        CHECK_INT(mf_wal_last_lsn(w), n);
        CHECK_INT(mf_wal_durable_lsn(w), n);
        if (k == 0)
            digest = s.digest;
        CHECK(s.digest == digest);
        CHECK_INT(mf_wal_close(w, &err), 0);
    }
    /* Exactly the records after after_lsn. */
    mf_lsn afters[] = {1, 17, n - 1, n};
    for (size_t i = 0; i < 4; i++) {
        CHECK_INT(open_log(dir, NULL, afters[i], &s, &g, &w, &err), 0);
        CHECK_INT(s.n, n - afters[i]);
        if (s.n)
            CHECK_INT(s.first, afters[i] + 1);
        CHECK_INT(s.bad, 0);
        CHECK_INT(mf_wal_close(w, &err), 0);
    }
    /* And the log goes on where it ended. */
    CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), 0);
    CHECK_INT(put_commit(w, &g, n + 1, n + 3, 3, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    CHECK_INT(open_log(dir, NULL, n, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, 3);
    CHECK_INT(s.bad, 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
}

MFT_CASE(split_blocks, "/storage/wal/blocks_split_at_block_target")
{
    quiet();
    const char *dir = mft_tmpdir();
    static const size_t sizes[] = {50, 90, 150, 20, 400, 1};
    gen g = {.seed = 7, .sizes = sizes, .nsizes = 6, .kind = GEN_MIXED};
    mf_wal_options opt = {.block_target = 256};
    mf_error err;
    mf_wal *w;
    seen s;
    CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), 0);
    CHECK_INT(put_commit(w, &g, 1, 120, 20, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);

    char path[600];
    size_t len;
    seg_file(path, sizeof path, dir, 1);
    uint8_t *img = slurp(path, &len);
    CHECK(img);
    blocks b;
    walk_blocks(img, len, &b);
    CHECK(b.n > 6 * 2); /* 6 commits, each split */
    CHECK_INT(b.end[b.n - 1], len);
    uint32_t total = 0;
    for (size_t i = 0; i < b.n; i++) {
        uint32_t raw = mf_load_u32le(img + b.off[i] + 28);
        CHECK(raw <= 256 || b.count[i] == 1); /* a bigger record gets its own */
        total += b.count[i];
    }
    free(img);
    CHECK_INT(total, 120);
    CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, 120);
    CHECK_INT(s.bad, 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
}

MFT_CASE(api_limits, "/storage/wal/api_limits_and_close")
{
    quiet();
    const char *dir = mft_tmpdir();
    static const size_t sizes[] = {33};
    gen g = {.seed = 3, .sizes = sizes, .nsizes = 1, .kind = GEN_RANDOM};
    mf_error err;
    mf_wal *w;
    seen s;
    mf_lsn lsn;
    /* Other files in the directory are not segments. */
    char junk[600];
    snprintf(junk, sizeof junk, "%s/multifora.lock", dir);
    CHECK(spit(junk, "x", 1));
    snprintf(junk, sizeof junk, "%s/wal.notasegment", dir);
    CHECK(spit(junk, "x", 1));
    CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), 0);
    CHECK_INT(mf_wal_append(w, "x", 0, &lsn, &err), MF_BadValue);
    CHECK_INT(mf_wal_append(w, "x", (size_t)MF_WAL_MAX_RECORD + 1, &lsn, &err), MF_BadValue);
    CHECK(!mf_wal_is_failed(w));
    CHECK_INT(mf_wal_commit(w, 1, &err), MF_BadValue); /* not appended yet */
    CHECK_INT(mf_wal_commit(w, 0, &err), 0);
    CHECK_INT(put(w, &g, 1, &err), 0);
    CHECK_INT(mf_wal_durable_lsn(w), 0);
    CHECK_INT(mf_wal_commit(w, 1, &err), 0);
    CHECK_INT(mf_wal_commit(w, 1, &err), 0); /* already durable */
    CHECK_INT(put(w, &g, 2, &err), 0);
    CHECK_INT(put(w, &g, 3, &err), 0);
    CHECK_INT(mf_wal_durable_lsn(w), 1);
    CHECK_INT(mf_wal_close(w, &err), 0); /* commits 2 and 3 */
    CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, 3);
    CHECK_INT(s.bad, 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    /* A replay callback's error stops the open and is returned. */
    memset(&s, 0, sizeof s);
    s.stop_at = 2;
    w = NULL;
    CHECK_INT(mf_wal_open(dir, NULL, 0, collect, &s, &w, &err), MF_OperationFailed);
    CHECK(w == NULL);
    CHECK(strstr(err.msg, "replay stopped at 2") != NULL);
    CHECK_INT(s.n, 2);
}

/* ------------------------------------------------------------ torn tails */

MFT_CASE(torn_tail, "/storage/wal/torn_tail_at_every_offset_of_the_last_two_blocks")
{
    quiet();
    char src[600], cut[600], path[600], cpath[600];
    subdir(src, sizeof src, "src");
    subdir(cut, sizeof cut, "cut");
    /* 7 commits of 3 small random records (stored raw), then one of 3
     * compressible ones (stored LZ4). */
    static const size_t sizes[] = {12, 27, 19, 30, 10, 22, 25, 14, 17, 29, 11, 20,
                                   16, 23, 28, 13, 21, 26, 18, 24, 15, 120, 120, 120};
    gen g = {.seed = 11, .sizes = sizes, .nsizes = 24, .zip_from = 22};
    mf_error err;
    mf_wal *w;
    seen s;
    CHECK_INT(open_log(src, NULL, 0, &s, NULL, &w, &err), 0);
    CHECK_INT(put_commit(w, &g, 1, 24, 3, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    seg_file(path, sizeof path, src, 1);
    seg_file(cpath, sizeof cpath, cut, 1);
    size_t len;
    uint8_t *img = slurp(path, &len);
    CHECK(img);
    blocks b;
    walk_blocks(img, len, &b);
    CHECK_INT(b.n, 8);
    CHECK_INT(b.codec[6], 0);
    CHECK_INT(b.codec[7], 1);

    for (uint64_t t = b.off[6]; t <= len; t++) {
        size_t whole = 0, nrec = 0;
        while (whole < b.n && b.end[whole] <= t)
            nrec += b.count[whole++];
        uint64_t keep = whole ? b.end[whole - 1] : 32;
        CHECK(spit(cpath, img, (size_t)t));
        CHECK_INT(open_log(cut, NULL, 0, &s, &g, &w, &err), 0);
        CHECK_INT(s.n, nrec);
        CHECK_INT(s.first, 1);
        CHECK_INT(s.bad, 0);
        CHECK_INT(fsize(cpath), keep); /* the torn tail is gone */
        CHECK_INT(mf_wal_last_lsn(w), nrec);
        /* The log accepts appends after it. */
        CHECK_INT(put(w, &g, nrec + 1, &err), 0);
        CHECK_INT(mf_wal_commit(w, nrec + 1, &err), 0);
        CHECK_INT(mf_wal_close(w, &err), 0);
        CHECK_INT(open_log(cut, NULL, 0, &s, &g, &w, &err), 0);
        CHECK_INT(s.n, nrec + 1);
        CHECK_INT(s.bad, 0);
        CHECK_INT(mf_wal_close(w, &err), 0);
    }
    free(img);
}

/* Flip one bit of a copy of `img` at `at`, open it, and return open's rc
 * (the log is closed again). */
static int open_flipped(const char *dir, const char *file, const uint8_t *img, size_t len,
                        uint64_t at, seen *s, mf_error *err)
{
    uint8_t *copy = malloc(len);
    mf_wal *w = NULL;
    if (!copy)
        return -1;
    memcpy(copy, img, len);
    copy[at] ^= 0x10;
    bool ok = spit(file, copy, len);
    free(copy);
    if (!ok)
        return -1;
    int rc = open_log(dir, NULL, 0, s, NULL, &w, err);
    if (rc == 0) {
        mf_lsn lsn;
        /* It must take appends after a truncated tail. */
        if (mf_wal_append(w, "after", 5, &lsn, err) != 0 || lsn != s->n + 1 ||
            mf_wal_commit(w, lsn, err) != 0)
            rc = -2;
        mf_wal_close(w, NULL);
    }
    return rc;
}

MFT_CASE(bit_flips, "/storage/wal/bit_flips_whole_last_block_corrupt_torn_truncated_interior_corrupt")
{
    quiet();
    char src[600], dst[600], path[600], dpath[600];
    subdir(src, sizeof src, "src");
    subdir(dst, sizeof dst, "dst");
    static const size_t sizes[] = {40, 300, 77};
    gen g = {.seed = 5, .sizes = sizes, .nsizes = 3, .kind = GEN_MIXED};
    mf_error err;
    mf_wal *w;
    seen s;
    CHECK_INT(open_log(src, NULL, 0, &s, NULL, &w, &err), 0);
    CHECK_INT(put_commit(w, &g, 1, 12, 2, &err), 0); /* 6 blocks */
    CHECK_INT(mf_wal_close(w, &err), 0);
    seg_file(path, sizeof path, src, 1);
    seg_file(dpath, sizeof dpath, dst, 1);
    size_t len;
    uint8_t *img = slurp(path, &len);
    CHECK(img);
    blocks b;
    walk_blocks(img, len, &b);
    CHECK_INT(b.n, 6);

    /* Where in a block: header fields (magic, codec, salt, LSN, count,
     * lengths, header hash), the payload hash, the payload. */
    static const unsigned where[] = {1, 4, 9, 16, 24, 29, 33, 37, 41, 47, 48, 50};
    for (size_t k = 0; k < sizeof where / sizeof where[0]; k++) {
        /* The last block, whole: changed bytes, not a torn write, so
         * corruption (cutting it would drop acknowledged records). */
        uint64_t at = b.off[5] + where[k];
        CHECK_INT(open_flipped(dst, dpath, img, len, at, &s, &err), MF_DataCorruption);
        CHECK(strstr(err.msg, dpath) != NULL);
        CHECK(strstr(err.msg, "in the last block, which is whole") != NULL);
        CHECK_INT(s.n, 10); /* the blocks before it were replayed */
        CHECK_INT(fsize(dpath), len); /* and nothing was cut */
        /* An interior block: corruption, naming the file and offset. */
        at = b.off[2] + where[k];
        CHECK_INT(open_flipped(dst, dpath, img, len, at, &s, &err), MF_DataCorruption);
        CHECK(strstr(err.msg, dpath) != NULL);
        char off[64];
        snprintf(off, sizeof off, "at offset %" PRIu64, b.off[2]);
        CHECK(strstr(err.msg, off) != NULL);
        CHECK(s.n <= 4); /* nothing past the damage was replayed */
        CHECK_INT(fsize(dpath), len); /* and nothing was cut */
    }
    /* The same flips in the last block when zero sectors follow it (a
     * crash that extended the file but never wrote those sectors): a torn
     * tail, cut off, and the log takes appends after it. */
    uint8_t *ext = calloc(1, len + 1024);
    CHECK(ext);
    memcpy(ext, img, len);
    for (size_t k = 0; k < sizeof where / sizeof where[0]; k++) {
        CHECK_INT(open_flipped(dst, dpath, ext, len + 1024, b.off[5] + where[k], &s, &err), 0);
        CHECK_INT(s.n, 10);
        CHECK_INT(s.bad, 0);
        CHECK_INT(fsize(dpath), b.off[5] + 48 + 5 + 4); /* cut, then one append */
    }
    /* Zeros alone after the last block: cut, nothing lost. */
    CHECK_INT(open_flipped(dst, dpath, ext, len + 1024, len + 1023, &s, &err), 0);
    CHECK_INT(s.n, 12);
    CHECK_INT(fsize(dpath), len + 48 + 5 + 4);
    free(ext);
    /* The segment header: magic, version, reserved, salt, first LSN. */
    static const unsigned hdr[] = {0, 8, 12, 16, 24};
    for (size_t k = 0; k < 5; k++) {
        CHECK_INT(open_flipped(dst, dpath, img, len, hdr[k], &s, &err), MF_DataCorruption);
        CHECK(strstr(err.msg, dpath) != NULL);
        CHECK(strstr(err.msg, "at offset 0") != NULL);
    }
    free(img);
}

MFT_CASE(stale_blocks, "/storage/wal/stale_blocks_of_an_older_log_end_the_log")
{
    quiet();
    char a[600], bdir[600], apath[600], bpath[600];
    subdir(a, sizeof a, "a");
    subdir(bdir, sizeof bdir, "b");
    static const size_t sizes[] = {60, 100};
    gen ga = {.seed = 100, .sizes = sizes, .nsizes = 2, .kind = GEN_MIXED};
    gen gb = {.seed = 200, .sizes = sizes, .nsizes = 2, .kind = GEN_MIXED};
    mf_error err;
    mf_wal *w;
    seen s;
    /* Log A: 10 blocks of one record.  Log B: 5 blocks of other records. */
    CHECK_INT(open_log(a, NULL, 0, &s, NULL, &w, &err), 0);
    CHECK_INT(put_commit(w, &ga, 1, 10, 1, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    CHECK_INT(open_log(bdir, NULL, 0, &s, NULL, &w, &err), 0);
    CHECK_INT(put_commit(w, &gb, 1, 5, 1, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    seg_file(apath, sizeof apath, a, 1);
    seg_file(bpath, sizeof bpath, bdir, 1);
    size_t alen, blen;
    uint8_t *aimg = slurp(apath, &alen), *bimg = slurp(bpath, &blen);
    CHECK(aimg && bimg);
    blocks ab;
    walk_blocks(aimg, alen, &ab);
    CHECK_INT(ab.n, 10);
    /* B, then A's blocks 6..10: intact, and their LSNs follow B's end;
     * only the salt tells them apart. */
    uint8_t *mix = malloc(blen + alen);
    CHECK(mix);
    memcpy(mix, bimg, blen);
    memcpy(mix + blen, aimg + ab.off[5], alen - ab.off[5]);
    CHECK(spit(bpath, mix, blen + alen - ab.off[5]));
    free(mix);
    free(aimg);
    free(bimg);
    CHECK_INT(open_log(bdir, NULL, 0, &s, &gb, &w, &err), 0);
    CHECK_INT(s.n, 5);
    CHECK_INT(s.bad, 0);
    CHECK_INT(fsize(bpath), blen);
    CHECK_INT(put_commit(w, &gb, 6, 7, 1, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    CHECK_INT(open_log(bdir, NULL, 0, &s, &gb, &w, &err), 0);
    CHECK_INT(s.n, 7);
    CHECK_INT(s.bad, 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
}

MFT_CASE(out_of_sequence, "/storage/wal/block_out_of_sequence_ends_the_log")
{
    quiet();
    char src[600], dst[600], path[600], dpath[600];
    subdir(src, sizeof src, "src");
    subdir(dst, sizeof dst, "dst");
    static const size_t sizes[] = {70, 20};
    gen g = {.seed = 13, .sizes = sizes, .nsizes = 2, .kind = GEN_RANDOM};
    mf_error err;
    mf_wal *w;
    seen s;
    CHECK_INT(open_log(src, NULL, 0, &s, NULL, &w, &err), 0);
    CHECK_INT(put_commit(w, &g, 1, 10, 2, &err), 0); /* 5 blocks */
    CHECK_INT(mf_wal_close(w, &err), 0);
    seg_file(path, sizeof path, src, 1);
    seg_file(dpath, sizeof dpath, dst, 1);
    size_t len;
    uint8_t *img = slurp(path, &len);
    CHECK(img);
    blocks b;
    walk_blocks(img, len, &b);
    CHECK_INT(b.n, 5);
    size_t blen = b.end[2] - b.off[2];
    uint8_t *dup = malloc(len + blen);
    CHECK(dup);
    /* Block 3 again after the end: intact, this log's salt, but its LSN
     * does not follow.  The end of the log, cut off. */
    memcpy(dup, img, len);
    memcpy(dup + len, img + b.off[2], blen);
    CHECK(spit(dpath, dup, len + blen));
    CHECK_INT(open_log(dst, NULL, 0, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, 10);
    CHECK_INT(s.bad, 0);
    CHECK_INT(fsize(dpath), len);
    CHECK_INT(mf_wal_close(w, &err), 0);
    /* Block 3 in place of block 4, block 5 behind it: corruption. */
    memcpy(dup, img, len);
    memcpy(dup + b.off[3], img + b.off[2], blen);
    CHECK_INT(b.end[3] - b.off[3], blen); /* same shape, so block 5 stays put */
    CHECK(spit(dpath, dup, len));
    CHECK_INT(open_log(dst, NULL, 0, &s, &g, &w, &err), MF_DataCorruption);
    char off[64];
    snprintf(off, sizeof off, "at offset %" PRIu64, b.off[3]);
    CHECK(strstr(err.msg, off) != NULL);
    CHECK(strstr(err.msg, dpath) != NULL);
    free(dup);
    free(img);
}

MFT_CASE(blank_last, "/storage/wal/segment_cut_short_at_creation_is_removed")
{
    quiet();
    const char *dir = mft_tmpdir();
    static const size_t sizes[] = {80};
    gen g = {.seed = 9, .sizes = sizes, .nsizes = 1, .kind = GEN_RANDOM};
    mf_error err;
    mf_wal *w;
    seen s;
    char path[600];
    uint8_t zeros[32] = {0};
    CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), 0);
    CHECK_INT(put_commit(w, &g, 1, 4, 2, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    /* What a crash during rotation leaves: an empty file, part of a
     * header, a header of zeros. */
    size_t cuts[] = {0, 10, 32, 32};
    for (size_t k = 0; k < 4; k++) {
        mf_lsn next = 5 + k;
        seg_file(path, sizeof path, dir, next);
        if (k == 3)
            memset(zeros, 0xA5, sizeof zeros); /* a garbled header, no blocks */
        CHECK(spit(path, zeros, cuts[k]));
        CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), 0);
        CHECK_INT(s.n, next - 1);
        CHECK_INT(s.bad, 0);
        CHECK_INT(fsize(path), -1);
        CHECK_INT(put_commit(w, &g, next, next, 1, &err), 0);
        CHECK_INT(mf_wal_close(w, &err), 0);
    }
    /* A zeroed header with more behind it is not a creation cut short. */
    seg_file(path, sizeof path, dir, 9);
    uint8_t more[100] = {0};
    CHECK(spit(path, more, sizeof more));
    CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), MF_DataCorruption);
    CHECK(strstr(err.msg, path) != NULL);
}

/* ------------------------------------------------------------- segments */

static const size_t seg_sizes[] = {200, 150, 230, 90};

/* A log in `dir` of `n` records, 2 to a commit, in segments of ~1.5 KB. */
static int make_segmented(const char *dir, const gen *g, mf_lsn n, mf_error *err)
{
    mf_wal_options opt = {.segment_target = 1500};
    mf_wal *w;
    seen s;
    int rc = open_log(dir, &opt, 0, &s, NULL, &w, err);
    if (rc)
        return rc;
    rc = put_commit(w, g, 1, n, 2, err);
    int rc2 = mf_wal_close(w, err);
    return rc ? rc : rc2;
}

MFT_CASE(segments, "/storage/wal/segments_rotate_and_drop_through")
{
    quiet();
    const char *dir = mft_tmpdir();
    gen g = {.seed = 21, .sizes = seg_sizes, .nsizes = 4, .kind = GEN_RANDOM};
    mf_wal_options opt = {.segment_target = 1500};
    mf_error err;
    mf_wal *w;
    seen s;
    mf_lsn f[64];
    CHECK_INT(make_segmented(dir, &g, 60, &err), 0);
    int n = list_segs(dir, f, 64);
    CHECK(n >= 5);
    CHECK_INT(f[0], 1);
    for (int i = 1; i < n; i++)
        CHECK(f[i] > f[i - 1]);

    CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, 60);
    CHECK_INT(s.bad, 0);
    mf_wal_stats st;
    mf_wal_get_stats(w, &st);
    CHECK_INT(st.segments, n);
    /* Segment 2 ends at f[3] - 1: one LSN short of it keeps it. */
    CHECK_INT(mf_wal_drop_through(w, f[3] - 2, &err), 0);
    mf_lsn left[64];
    CHECK_INT(list_segs(dir, left, 64), n - 2);
    CHECK_INT(left[0], f[2]);
    CHECK_INT(mf_wal_drop_through(w, f[3] - 1, &err), 0);
    CHECK_INT(list_segs(dir, left, 64), n - 3);
    CHECK_INT(left[0], f[3]);
    mf_wal_get_stats(w, &st);
    CHECK_INT(st.segments, n - 3);
    CHECK_INT(mf_wal_close(w, &err), 0);

    /* From the checkpoint on, the log is whole; before it, it is not. */
    CHECK_INT(open_log(dir, &opt, f[3] - 1, &s, &g, &w, &err), 0);
    CHECK_INT(s.first, f[3]);
    CHECK_INT(s.n, 60 - (f[3] - 1));
    CHECK_INT(s.bad, 0);
    /* Never the segment being written, however far the LSN. */
    CHECK_INT(mf_wal_drop_through(w, 1000000, &err), 0);
    CHECK_INT(list_segs(dir, left, 64), 1);
    CHECK_INT(left[0], f[n - 1]);
    CHECK_INT(put_commit(w, &g, 61, 64, 2, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), MF_DataCorruption);
    CHECK(strstr(err.msg, "missing") != NULL);
    CHECK_INT(open_log(dir, &opt, f[n - 1] - 1, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, 64 - (f[n - 1] - 1));
    CHECK_INT(s.bad, 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
}

MFT_CASE(missing_middle, "/storage/wal/missing_middle_segment_is_corruption")
{
    quiet();
    const char *dir = mft_tmpdir();
    gen g = {.seed = 22, .sizes = seg_sizes, .nsizes = 4, .kind = GEN_RANDOM};
    mf_error err;
    mf_wal *w;
    seen s;
    mf_lsn f[64];
    char path[600];
    CHECK_INT(make_segmented(dir, &g, 40, &err), 0);
    int n = list_segs(dir, f, 64);
    CHECK(n >= 4);
    seg_file(path, sizeof path, dir, f[2]);
    CHECK_INT(unlink(path), 0);
    CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), MF_DataCorruption);
    CHECK(strstr(err.msg, "missing") != NULL);
    CHECK_INT(open_log(dir, NULL, f[2], &s, &g, &w, &err), MF_DataCorruption);
    /* Once the checkpoint covers the missing records, the log opens. */
    CHECK_INT(open_log(dir, NULL, f[3] - 1, &s, &g, &w, &err), 0);
    CHECK_INT(s.first, f[3]);
    CHECK_INT(s.n, 40 - (f[3] - 1));
    CHECK_INT(s.bad, 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    /* A damaged block at the end of a segment that is not the last is
     * corruption too: every segment but the last was synced whole. */
    seg_file(path, sizeof path, dir, f[3]);
    long long sz = fsize(path);
    CHECK(sz > 100);
    CHECK_INT(truncate(path, sz - 3), 0);
    CHECK_INT(open_log(dir, NULL, f[3] - 1, &s, &g, &w, &err), MF_DataCorruption);
    CHECK(strstr(err.msg, path) != NULL);
}

MFT_CASE(after_past_end, "/storage/wal/checkpoint_past_the_end_starts_a_segment")
{
    quiet();
    const char *dir = mft_tmpdir();
    static const size_t sizes[] = {64};
    gen g = {.seed = 31, .sizes = sizes, .nsizes = 1, .kind = GEN_RANDOM};
    mf_error err;
    mf_wal *w;
    seen s;
    CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), 0);
    CHECK_INT(put_commit(w, &g, 1, 5, 5, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    CHECK_INT(open_log(dir, NULL, 20, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, 0);
    CHECK_INT(mf_wal_last_lsn(w), 20);
    CHECK_INT(put_commit(w, &g, 21, 22, 2, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    mf_lsn f[8];
    CHECK_INT(list_segs(mft_tmpdir(), f, 8), 2);
    CHECK_INT(f[1], 21);
    CHECK_INT(open_log(dir, NULL, 20, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, 2);
    CHECK_INT(s.first, 21);
    CHECK_INT(s.bad, 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    CHECK_INT(open_log(dir, NULL, 3, &s, &g, &w, &err), MF_DataCorruption);
    CHECK(strstr(err.msg, "missing") != NULL);
}

/* --------------------------------------------------------- group commit */

#define GC_THREADS 8
#define GC_EACH 200

typedef struct gc_arg {
    mf_wal *w;
    int t;
    int fails;
} gc_arg;

static void *gc_thread(void *p)
{
    gc_arg *a = p;
    char rec[128];
    for (int i = 0; i < GC_EACH; i++) {
        mf_error err;
        mf_lsn lsn;
        int n = snprintf(rec, sizeof rec, "t%d-%d-%.*s", a->t, i, 10 + (i * 7) % 60,
                         "................................................................");
        if (mf_wal_append(a->w, rec, (size_t)n, &lsn, &err) != 0 ||
            mf_wal_commit(a->w, lsn, &err) != 0 || mf_wal_durable_lsn(a->w) < lsn)
            a->fails++;
    }
    return NULL;
}

typedef struct gc_seen {
    int next[GC_THREADS]; /* each thread's records arrive in its order */
    int n, bad;
    mf_lsn last;
} gc_seen;

static int gc_collect(void *arg, mf_lsn lsn, const uint8_t *rec, size_t len, mf_error *err)
{
    (void)err;
    gc_seen *s = arg;
    char buf[128];
    int t, i;
    if (len >= sizeof buf || lsn != s->last + 1) {
        s->bad++;
        return 0;
    }
    memcpy(buf, rec, len);
    buf[len] = '\0';
    if (sscanf(buf, "t%d-%d-", &t, &i) != 2 || t < 0 || t >= GC_THREADS || i != s->next[t])
        s->bad++;
    else
        s->next[t]++;
    s->last = lsn;
    s->n++;
    return 0;
}

MFT_CASE(group_commit, "/storage/wal/group_commit_8_threads")
{
    quiet();
    const char *dir = mft_tmpdir();
    mf_error err;
    mf_wal *w;
    CHECK_INT(mf_wal_open(dir, NULL, 0, NULL, NULL, &w, &err), 0);
    pthread_t th[GC_THREADS];
    gc_arg args[GC_THREADS];
    for (int t = 0; t < GC_THREADS; t++) {
        args[t] = (gc_arg){.w = w, .t = t};
        CHECK_INT(pthread_create(&th[t], NULL, gc_thread, &args[t]), 0);
    }
    for (int t = 0; t < GC_THREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < GC_THREADS; t++)
        CHECK_INT(args[t].fails, 0);
    mf_wal_stats st;
    mf_wal_get_stats(w, &st);
    printf("  group commit: %" PRIu64 " appends, %" PRIu64 " commits, %" PRIu64
           " syncs, %" PRIu64 " blocks\n",
           st.appends, st.commits, st.syncs, st.blocks);
    CHECK_INT(st.appends, GC_THREADS * GC_EACH);
    CHECK_INT(st.commits, GC_THREADS * GC_EACH);
    CHECK(st.syncs < st.commits); /* commits shared syncs */
    CHECK_INT(mf_wal_durable_lsn(w), GC_THREADS * GC_EACH);
    CHECK_INT(mf_wal_close(w, &err), 0);
    gc_seen s = {0};
    CHECK_INT(mf_wal_open(dir, NULL, 0, gc_collect, &s, &w, &err), 0);
    CHECK_INT(s.n, GC_THREADS * GC_EACH);
    CHECK_INT(s.bad, 0);
    for (int t = 0; t < GC_THREADS; t++)
        CHECK_INT(s.next[t], GC_EACH);
    CHECK_INT(mf_wal_close(w, &err), 0);
}

/* --------------------------------------------------------------- faults */

MFT_CASE(failed_sync, "/storage/wal/failed_sync_fails_the_log")
{
    quiet();
    const char *dir = mft_tmpdir();
    static const size_t sizes[] = {100, 7};
    gen g = {.seed = 41, .sizes = sizes, .nsizes = 2, .kind = GEN_MIXED};
    mf_error err;
    mf_wal *w;
    seen s;
    mf_lsn lsn;
    CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), 0);
    CHECK_INT(put_commit(w, &g, 1, 10, 3, &err), 0);
    mf_os_fault_set(log_faults, "wal.sync", MF_FAULT_EIO, 0, 1);
    CHECK_INT(put(w, &g, 11, &err), 0);
    CHECK(mf_wal_commit(w, 11, &err) != 0);
    CHECK_INT(mf_os_fault_hits(log_faults), 1);
    CHECK(strstr(err.msg, "could not be made durable") != NULL);
    CHECK(strstr(err.msg, "until the database is reopened") != NULL);
    CHECK(mf_wal_is_failed(w));
    CHECK_INT(mf_wal_durable_lsn(w), 10);
    /* Failed stays failed, though the fault is spent. */
    CHECK(mf_wal_append(w, "x", 1, &lsn, &err) != 0);
    CHECK(strstr(err.msg, "reopened") != NULL);
    CHECK(mf_wal_commit(w, 11, &err) != 0);
    CHECK(mf_wal_commit(w, 5, &err) != 0);
    CHECK(mf_wal_close(w, &err) != 0); /* 11 is not durable */
    mf_os_fault_clear(log_faults);
    CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), 0);
    CHECK(s.n >= 10 && s.n <= 11);
    CHECK_INT(s.bad, 0);
    CHECK(!mf_wal_is_failed(w));
    CHECK_INT(put_commit(w, &g, s.n + 1, s.n + 1, 1, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
}

typedef struct fault_case {
    const char *site;
    mf_fault_kind kind;
    int skip;
    bool rotate; /* a segment per flush: the fault hits a rotation */
} fault_case;

static const fault_case fault_cases[] = {
    {"wal.write", MF_FAULT_EIO, 0, false},    {"wal.write", MF_FAULT_ENOSPC, 0, false},
    {"wal.write", MF_FAULT_SHORT, 0, false},  {"wal.sync", MF_FAULT_EIO, 0, false},
    {"wal.write", MF_FAULT_EIO, 0, true},     {"wal.write", MF_FAULT_SHORT, 0, true},
    {"wal.write", MF_FAULT_ENOSPC, 1, true},  {"wal.write", MF_FAULT_SHORT, 1, true},
    {"wal.sync", MF_FAULT_EIO, 0, true},      {"wal.create", MF_FAULT_EIO, 0, true},
    {"wal.dir", MF_FAULT_EIO, 0, true},
    /* (ENOSPC at wal.create does not fail the log: full_disk below) */
};

/* Commit 6 records, arm the fault, commit until it bites; then check the
 * log refuses everything, and that a reopen without the fault has every
 * committed record and nothing partial. */
static void one_fault(const fault_case *fc, int count, int idx)
{
    char dir[600];
    char name[32];
    snprintf(name, sizeof name, "f%d.%d", idx, count);
    subdir(dir, sizeof dir, name);
    static const size_t sizes[] = {300, 45, 1000};
    gen g = {.seed = 50 + (uint64_t)idx, .sizes = sizes, .nsizes = 3, .kind = GEN_MIXED};
    mf_wal_options opt = {.segment_target = fc->rotate ? 1 : 0};
    mf_error err;
    mf_wal *w;
    seen s;
    mf_lsn lsn, committed = 6, next = 7;
    int rc = 0;
    CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), 0);
    CHECK_INT(put_commit(w, &g, 1, committed, 1, &err), 0);
    mf_os_fault_set(log_faults, fc->site, fc->kind, fc->skip, count);
    for (int k = 0; k < 3 && rc == 0; k++, next += 2) {
        CHECK_INT(put(w, &g, next, &err), 0);
        CHECK_INT(put(w, &g, next + 1, &err), 0);
        rc = mf_wal_commit(w, next + 1, &err);
        if (rc == 0)
            committed = next + 1;
    }
    CHECK(rc != 0);
    CHECK(mf_os_fault_hits(log_faults) >= 1);
    if (fc->kind == MF_FAULT_ENOSPC)
        CHECK_INT(err.code, MF_OutOfDiskSpace);
    CHECK(strstr(err.msg, fc->site) != NULL);
    CHECK(strstr(err.msg, "reopened") != NULL);
    CHECK(mf_wal_is_failed(w));
    CHECK_INT(mf_wal_durable_lsn(w), committed);
    CHECK(mf_wal_append(w, "x", 1, &lsn, &err) != 0);
    CHECK(mf_wal_commit(w, committed, &err) != 0);
    mf_lsn appended = mf_wal_last_lsn(w);
    CHECK(mf_wal_close(w, &err) != 0);
    mf_os_fault_clear(log_faults);

    CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), 0);
    CHECK(s.n >= committed);
    CHECK(s.n <= appended);
    CHECK_INT(s.first, 1);
    CHECK_INT(s.bad, 0); /* whole records only, each the one written */
    mf_lsn n = s.n;
    CHECK_INT(put_commit(w, &g, n + 1, n + 3, 2, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, n + 3);
    CHECK_INT(s.bad, 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
}

MFT_CASE(fault_sites, "/storage/wal/fault_at_each_write_site_once_and_forever")
{
    quiet();
    for (size_t i = 0; i < sizeof fault_cases / sizeof fault_cases[0]; i++) {
        for (int count = 1; count >= -1; count -= 2) {
            one_fault(&fault_cases[i], count, (int)i);
            mf_os_fault_clear(log_faults);
            if (mft_failed()) {
                printf("  in case %zu (%s, kind %d, skip %d, count %d)\n", i,
                       fault_cases[i].site, (int)fault_cases[i].kind, fault_cases[i].skip,
                       count);
                return;
            }
        }
    }
}

/* A full disk: a reservation is refused without failing the log, and a
 * rotation that finds no room keeps writing the current segment (which
 * has the blocks its records reserved); both work again once there is
 * room. */
MFT_CASE(full_disk, "/storage/wal/full_disk_refuses_reservations_and_rotations")
{
    quiet();
    char dir[600], path[600];
    static const size_t sizes[] = {300, 45, 1000};
    gen g = {.seed = 77, .sizes = sizes, .nsizes = 3, .kind = GEN_MIXED};
    mf_wal_options opt = {.segment_target = 1};
    mf_error err;
    mf_wal *w;
    seen s;
    mf_wal_stats st;
    subdir(dir, sizeof dir, "full");
    CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), 0);
    CHECK_INT(put_commit(w, &g, 1, 4, 1, &err), 0);
    mf_wal_get_stats(w, &st);
    uint64_t segs = st.segments;

    /* No room for a new segment: records go on into the current one. */
    mf_os_fault_set(log_faults, "wal.create", MF_FAULT_ENOSPC, 0, -1);
    CHECK_INT(put_commit(w, &g, 5, 10, 2, &err), 0);
    CHECK(mf_os_fault_hits(log_faults) >= 1);
    mf_os_fault_clear(log_faults);
    mf_wal_get_stats(w, &st);
    CHECK_INT(st.segments, segs);
    CHECK(!mf_wal_is_failed(w));
    /* The file it started is gone: open would take it for the last one. */
    seg_file(path, sizeof path, dir, 5);
    CHECK(access(path, F_OK) != 0);

    /* No room to reserve: refused, the log goes on. */
    mf_os_fault_set(log_faults, "wal.reserve", MF_FAULT_ENOSPC, 0, -1);
    int rc = 0;
    for (int i = 0; i < 2000 && rc == 0; i++)
        rc = mf_wal_reserve(w, 4000, &err);
    mf_os_fault_clear(log_faults);
    CHECK_INT(rc, MF_OutOfDiskSpace);
    CHECK(!mf_wal_is_failed(w));
    mf_wal_unreserve(w, 4000000); /* give back more than was taken: clamps */
    CHECK_INT(put_commit(w, &g, 11, 14, 1, &err), 0);
    mf_wal_get_stats(w, &st);
    CHECK(st.segments > segs); /* room again: rotations resume */
    CHECK_INT(mf_wal_close(w, &err), 0);

    CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, 14);
    CHECK_INT(s.bad, 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
}

MFT_CASE(open_faults, "/storage/wal/fault_at_each_open_site")
{
    quiet();
    static const size_t sizes[] = {70, 20};
    gen g = {.seed = 61, .sizes = sizes, .nsizes = 2, .kind = GEN_MIXED};
    static const struct {
        const char *site;
        bool fresh; /* on an empty directory */
        bool torn;  /* with a torn tail to cut */
        bool blank; /* with a last segment cut short at creation */
    } cases[] = {
        {"wal.open", false, false, false},     {"wal.read", false, false, false},
        {"wal.sync", false, false, false},     {"wal.truncate", false, true, false},
        {"wal.sync", false, true, false},      {"wal.unlink", false, false, true},
        {"wal.dir", false, false, true},       {"wal.create", true, false, false},
        {"wal.write", true, false, false},     {"wal.sync", true, false, false},
        {"wal.dir", true, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int count = 1; count >= -1; count -= 2) {
            char dir[600], name[32], path[600];
            mf_error err;
            mf_wal *w = NULL;
            seen s;
            snprintf(name, sizeof name, "o%zu.%d", i, count);
            subdir(dir, sizeof dir, name);
            mf_lsn n = 0;
            if (!cases[i].fresh) {
                n = 9;
                CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), 0);
                CHECK_INT(put_commit(w, &g, 1, n, 3, &err), 0);
                CHECK_INT(mf_wal_close(w, &err), 0);
                seg_file(path, sizeof path, dir, 1);
                if (cases[i].torn) {
                    CHECK_INT(truncate(path, fsize(path) - 5), 0);
                    n = 6;
                }
                seg_file(path, sizeof path, dir, n + 1);
                if (cases[i].blank)
                    CHECK(spit(path, "MFW", 3));
            }
            mf_os_fault_set(log_faults, cases[i].site, MF_FAULT_EIO, 0, count);
            w = NULL;
            int rc = open_log(dir, NULL, 0, &s, &g, &w, &err);
            mf_os_fault_clear(log_faults);
            if (rc == 0 || w != NULL)
                printf("  open did not fail at %s (case %zu)\n", cases[i].site, i);
            CHECK(rc != 0);
            CHECK(w == NULL);
            CHECK(strstr(err.msg, cases[i].site) != NULL);
            if (cases[i].fresh) {
                /* A creation that failed part way leaves at most a
                 * blank segment, which the next open replaces. */
                mf_lsn f[4];
                CHECK(list_segs(dir, f, 4) <= 1);
            }
            CHECK_INT(open_log(dir, NULL, 0, &s, &g, &w, &err), 0);
            CHECK_INT(s.n, n);
            CHECK_INT(s.bad, 0);
            CHECK_INT(put_commit(w, &g, n + 1, n + 1, 1, &err), 0);
            CHECK_INT(mf_wal_close(w, &err), 0);
        }
    }
}

MFT_CASE(drop_fault, "/storage/wal/drop_through_unlink_fault")
{
    quiet();
    const char *dir = mft_tmpdir();
    gen g = {.seed = 71, .sizes = seg_sizes, .nsizes = 4, .kind = GEN_RANDOM};
    mf_wal_options opt = {.segment_target = 1500};
    mf_error err;
    mf_wal *w;
    seen s;
    mf_lsn f[64];
    CHECK_INT(make_segmented(dir, &g, 40, &err), 0);
    int n = list_segs(dir, f, 64);
    CHECK(n >= 4);
    CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), 0);
    /* The second unlink fails: the first segment is gone, the rest stay. */
    mf_os_fault_set(log_faults, "wal.unlink", MF_FAULT_EIO, 1, 1);
    CHECK(mf_wal_drop_through(w, f[3] - 1, &err) != 0);
    CHECK(strstr(err.msg, "wal.unlink") != NULL);
    mf_os_fault_clear(log_faults);
    CHECK(!mf_wal_is_failed(w)); /* durability is not at stake */
    mf_lsn left[64];
    CHECK_INT(list_segs(dir, left, 64), n - 1);
    mf_wal_stats st;
    mf_wal_get_stats(w, &st);
    CHECK_INT(st.segments, n - 1);
    CHECK_INT(mf_wal_drop_through(w, f[3] - 1, &err), 0);
    CHECK_INT(list_segs(dir, left, 64), n - 3);
    CHECK_INT(put_commit(w, &g, 41, 42, 2, &err), 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    CHECK_INT(open_log(dir, &opt, f[3] - 1, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, 42 - (f[3] - 1));
    CHECK_INT(s.bad, 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
}

/* ----------------------------------------------------------- power loss */

MFT_CASE(power_loss, "/storage/wal/power_loss_keeps_every_committed_record")
{
    quiet();
    const char *dir = mft_tmpdir();
    static const size_t sizes[] = {120, 64, 500, 33, 250};
    gen g = {.seed = 81, .sizes = sizes, .nsizes = 5, .kind = GEN_MIXED};
    mf_wal_options opt = {.segment_target = 2000};
    mf_error err;
    mf_wal *w;
    seen s;
    mf_lsn committed = 0, appended = 0;
    mf_os_sim_enable(true);
    for (int round = 0; round < 6; round++) {
        CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), 0);
        CHECK(s.n >= committed); /* every acknowledged record */
        CHECK(s.n <= appended);
        CHECK(s.n == 0 || s.first == 1);
        CHECK_INT(s.bad, 0); /* whole, in order, each the one written */
        committed = appended = s.n;
        CHECK_INT(put_commit(w, &g, committed + 1, committed + 15, 3, &err), 0);
        committed += 15;
        /* Appended, never committed. */
        for (mf_lsn l = committed + 1; l <= committed + 4; l++)
            CHECK_INT(put(w, &g, l, &err), 0);
        appended = committed + 4;
        if (round % 2 == 1) {
            /* Written, but the sync fails: not durable, and the crash
             * takes it away. */
            mf_os_fault_set(log_faults, "wal.sync", MF_FAULT_EIO, 0, 1);
            CHECK(mf_wal_commit(w, appended, &err) != 0);
            mf_os_fault_clear(log_faults);
        }
        mf_wal_abandon(w);
        CHECK_INT(mf_os_sim_crash(&err), 0);
    }
    CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), 0);
    CHECK(s.n >= committed && s.n <= appended);
    CHECK_INT(s.bad, 0);
    mf_lsn f[64];
    CHECK(list_segs(dir, f, 64) > 2); /* the crashes crossed rotations */
    CHECK_INT(mf_wal_close(w, &err), 0);
    mf_os_sim_enable(false);
}

MFT_CASE(power_loss_rotation, "/storage/wal/power_loss_during_rotation")
{
    quiet();
    const char *dir = mft_tmpdir();
    static const size_t sizes[] = {90};
    gen g = {.seed = 91, .sizes = sizes, .nsizes = 1, .kind = GEN_RANDOM};
    mf_wal_options opt = {.segment_target = 1}; /* a segment per flush */
    mf_error err;
    mf_wal *w;
    seen s;
    mf_lsn f[16];
    mf_os_sim_enable(true);
    CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), 0);
    CHECK_INT(put_commit(w, &g, 1, 3, 1, &err), 0);
    CHECK_INT(list_segs(dir, f, 16), 3);
    /* The fourth flush creates wal.4, writes it, and its sync fails. */
    mf_os_fault_set(log_faults, "wal.sync", MF_FAULT_EIO, 0, 1);
    CHECK_INT(put(w, &g, 4, &err), 0);
    CHECK(mf_wal_commit(w, 4, &err) != 0);
    mf_os_fault_clear(log_faults);
    CHECK_INT(list_segs(dir, f, 16), 4);
    mf_wal_abandon(w);
    CHECK_INT(mf_os_sim_crash(&err), 0);
    char path[600];
    seg_file(path, sizeof path, dir, 4);
    CHECK_INT(fsize(path), 0); /* never synced: empty after the crash */
    CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, 3);
    CHECK_INT(s.bad, 0);
    CHECK_INT(list_segs(dir, f, 16), 3); /* the blank segment is gone */
    CHECK_INT(put_commit(w, &g, 4, 5, 1, &err), 0);
    mf_wal_abandon(w);
    CHECK_INT(mf_os_sim_crash(&err), 0);
    CHECK_INT(open_log(dir, &opt, 0, &s, &g, &w, &err), 0);
    CHECK_INT(s.n, 5);
    CHECK_INT(s.bad, 0);
    CHECK_INT(mf_wal_close(w, &err), 0);
    mf_os_sim_enable(false);
}
