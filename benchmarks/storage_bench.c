/*
 * storage_bench.c -- what issue 3 asks the storage engine to show, measured
 * on the engine alone (no server, no Python):
 *
 *   storage_bench reopen DIR GB       load GB of 16 KiB documents in a child,
 *                                     SIGKILL it, reopen in a fresh process:
 *                                     open time, RSS after open, count, last
 *                                     document byte-identical
 *   storage_bench churn DIR SIZE N    N documents of SIZE bytes: 6 rounds of
 *                                     delete-half-and-refill, then random
 *                                     replacement over 5x the collection;
 *                                     file size / live bytes per round
 *   storage_bench commit DIR          durable commits/s with 1, 4, 16 writer
 *                                     threads beside the machine's single
 *                                     fdatasync rate, in the same run
 *
 * Built by benchmarks/storage_bench.py against csrc/; prints plain lines.
 */
#include "../csrc/storage/engine.h"
#include "../csrc/storage/os.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static double now_s(void)
{
    return (double)mf_clock_mono_us() / 1e6;
}

static long rss_kb(void)
{
    long pages_virt = 0, pages_res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages_virt, &pages_res) != 2)
            pages_res = 0;
        fclose(f);
    }
    return pages_res * (sysconf(_SC_PAGESIZE) / 1024);
}

static void die(const char *what, const mf_error *err)
{
    fprintf(stderr, "%s: %s\n", what, err ? err->msg : "");
    exit(1);
}

/* A document's bytes: random-looking (incompressible), from its id. */
static void doc_bytes(uint8_t *buf, size_t len, uint64_t id, uint64_t version)
{
    uint64_t x = id * 0x9E3779B97F4A7C15ull + version * 0xD1B54A32D192ED03ull + 1;
    for (size_t i = 0; i + 8 <= len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(buf + i, &x, 8);
    }
    for (size_t i = len & ~(size_t)7; i < len; i++)
        buf[i] = (uint8_t)(id + i);
}

static void key_of(uint64_t id, uint8_t k[8])
{
    for (int i = 7; i >= 0; i--, id >>= 8)
        k[i] = (uint8_t)id;
}

static mf_engine *open_engine(const char *dir)
{
    mf_engine *e;
    mf_error err;
    mf_engine_options opt = {0};
    if (mf_engine_open(dir, &opt, &e, &err) != 0)
        die("open", &err);
    return e;
}

static mf_coll *collection(mf_engine *e)
{
    mf_error err;
    mf_lsn lsn;
    mf_coll *c;
    mf_engine_catalog_lock(e, true);
    c = mf_engine_coll(e, "bench.docs");
    if (!c && mf_engine_coll_create(e, "bench.docs", NULL, 0, 0, &c, NULL, &lsn, &err) != 0)
        die("create", &err);
    mf_engine_catalog_unlock(e);
    return c;
}

/* One put (doc != NULL) or delete of document `id`, optionally synced. */
static void write_doc(mf_engine *e, mf_coll *c, uint64_t id, const uint8_t *doc, size_t len,
                      bool sync)
{
    mf_error err;
    mf_lsn lsn;
    uint8_t k[8];
    key_of(id, k);
    mf_op op = {.kind = doc ? MF_OP_PUT : MF_OP_DELETE, .tree = mf_coll_records(c), .key = k,
                .klen = 8, .val = doc, .vlen = len};
    mf_coll_lock(c, true);
    if (mf_engine_write(e, &op, 1, &lsn, &err) != 0)
        die("write", &err);
    mf_coll_unlock(c);
    if (sync && mf_engine_sync(e, lsn, &err) != 0)
        die("sync", &err);
}

static void put_doc(mf_engine *e, mf_coll *c, uint64_t id, const uint8_t *doc, size_t len,
                    bool sync)
{
    write_doc(e, c, id, doc, len, sync);
}

static void del_doc(mf_engine *e, mf_coll *c, uint64_t id, bool sync)
{
    write_doc(e, c, id, NULL, 0, sync);
}

/* ---------------------------------------------------------------- reopen */

static int bench_reopen(const char *dir, double gb)
{
    const size_t size = 16384;
    uint64_t n = (uint64_t)(gb * 1e9 / size);
    double t0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        mf_engine *e = open_engine(dir);
        mf_coll *c = collection(e);
        uint8_t *doc = malloc(size);
        for (uint64_t i = 0; i < n; i++) {
            doc_bytes(doc, size, i, 0);
            put_doc(e, c, i, doc, size, i % 256 == 255 || i == n - 1);
        }
        raise(SIGKILL); /* no close: what a crash leaves */
    }
    int status;
    waitpid(pid, &status, 0);
    double load = now_s() - t0;
    printf("reopen: loaded %llu x %zu B = %.2f GB in %.1f s (%.0f MB/s), then SIGKILL\n",
           (unsigned long long)n, size, (double)n * size / 1e9, load,
           (double)n * size / 1e6 / load);

    /* A fresh process opens it, as a restarted server would. */
    int p[2];
    if (pipe(p) != 0)
        return 1;
    pid = fork();
    if (pid == 0) {
        close(p[0]);
        long rss0 = rss_kb();
        double t = now_s();
        mf_engine *e = open_engine(dir);
        double open_s = now_s() - t;
        long rss1 = rss_kb();
        mf_engine_stats st;
        mf_engine_get_stats(e, &st);
        mf_engine_catalog_lock(e, false);
        mf_coll *c = mf_engine_coll(e, "bench.docs");
        mf_btree *t_ = mf_engine_tree(e, mf_coll_records(c));
        /* Count through the leaves (the documents are not touched). */
        mf_cursor cur;
        mf_error err;
        bool valid;
        uint64_t count = 0;
        mf_cursor_init(&cur, t_);
        for (mf_cursor_first(&cur, &valid, &err); valid; mf_cursor_next(&cur, &valid, &err))
            count++;
        /* The last document, byte for byte. */
        uint8_t k[8], *want = malloc(size);
        key_of(n - 1, k);
        doc_bytes(want, size, n - 1, 0);
        bool found;
        const uint8_t *v;
        size_t vl;
        mf_btree_get(t_, k, 8, &found, &v, &vl, &err);
        bool same = found && vl == size && memcmp(v, want, size) == 0;
        mf_engine_catalog_unlock(e);
        dprintf(p[1],
                "reopen: open %.3f s, %llu log records replayed; RSS %ld MB before open, %ld MB "
                "after (%.2f%% of the data); count %llu (%s); last document %s\n",
                open_s, (unsigned long long)st.replayed, rss0 / 1024, rss1 / 1024,
                100.0 * (double)rss1 * 1024 / ((double)n * size), (unsigned long long)count,
                count == n ? "correct" : "WRONG", same ? "byte-identical" : "DIFFERENT");
        mf_engine_abandon(e);
        _exit(0);
    }
    close(p[1]);
    char buf[1024];
    ssize_t r;
    while ((r = read(p[0], buf, sizeof buf)) > 0)
        fwrite(buf, 1, (size_t)r, stdout);
    waitpid(pid, &status, 0);
    return 0;
}

/* ----------------------------------------------------------------- churn */

static double file_ratio(const char *dir, uint64_t live_docs, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/data.mf", dir);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fclose(f);
    return (double)bytes / ((double)live_docs * size);
}

static int bench_churn(const char *dir, size_t size, uint64_t n)
{
    mf_engine *e = open_engine(dir);
    mf_coll *c = collection(e);
    uint8_t *doc = malloc(size);
    mf_error err;
    uint64_t version = 1;
    for (uint64_t i = 0; i < n; i++) {
        doc_bytes(doc, size, i, 0);
        put_doc(e, c, i, doc, size, i % 256 == 255);
    }
    mf_engine_checkpoint(e, &err);
    printf("churn %zu B x %llu: loaded, file/live %.3f\n", size, (unsigned long long)n,
           file_ratio(dir, n, size));
    uint64_t x = 88172645463325252ull;
    for (int round = 1; round <= 6; round++) {
        /* Delete a random half, then refill it. */
        uint64_t *ids = malloc(n / 2 * sizeof *ids);
        for (uint64_t i = 0; i < n / 2; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            ids[i] = x % n;
        }
        for (uint64_t i = 0; i < n / 2; i++)
            del_doc(e, c, ids[i], i % 256 == 255);
        for (uint64_t i = 0; i < n / 2; i++) {
            doc_bytes(doc, size, ids[i], version++);
            put_doc(e, c, ids[i], doc, size, i % 256 == 255);
        }
        free(ids);
        printf("churn %zu B: delete-half-and-refill round %d: file/live %.3f\n", size, round,
               file_ratio(dir, n, size));
    }
    for (int round = 1; round <= 5; round++) {
        for (uint64_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint64_t id = x % n;
            doc_bytes(doc, size, id, version++);
            put_doc(e, c, id, doc, size, i % 256 == 255);
        }
        printf("churn %zu B: random replacement %dx: file/live %.3f\n", size, round,
               file_ratio(dir, n, size));
    }
    mf_engine_stats st;
    mf_engine_get_stats(e, &st);
    printf("churn %zu B: %llu checkpoints, %llu free pages, %llu pending, %llu extents\n", size,
           (unsigned long long)st.checkpoints, (unsigned long long)st.pager.free_pages,
           (unsigned long long)st.pager.pending_pages, (unsigned long long)st.pager.extents);
    mf_engine_close(e, &err);
    free(doc);
    return 0;
}

/* ---------------------------------------------------------------- commit */

typedef struct worker {
    mf_engine *e;
    mf_coll *c;
    int id;
    double until;
    uint64_t done;
} worker;

static void *commit_worker(void *arg)
{
    worker *w = arg;
    uint8_t doc[200];
    uint64_t i = 0;
    while (now_s() < w->until) {
        doc_bytes(doc, sizeof doc, i, (uint64_t)w->id);
        put_doc(w->e, w->c, (uint64_t)w->id << 40 | i, doc, sizeof doc, true);
        i++;
    }
    w->done = i;
    return NULL;
}

static int bench_commit(const char *dir)
{
    /* The machine's own rate: write 200 bytes, fdatasync, repeat. */
    char path[4096];
    snprintf(path, sizeof path, "%s/fsync.probe", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    uint8_t b[200] = {0};
    double t = now_s();
    int syncs = 0;
    while (now_s() - t < 3.0) {
        if (pwrite(fd, b, sizeof b, (off_t)syncs * 200) != (ssize_t)sizeof b || fdatasync(fd))
            return 1;
        syncs++;
    }
    double raw = syncs / (now_s() - t);
    close(fd);
    unlink(path);
    printf("commit: single fdatasync rate %.0f/s\n", raw);

    mf_engine *e = open_engine(dir);
    mf_coll *c = collection(e);
    int threads[] = {1, 4, 16};
    for (int k = 0; k < 3; k++) {
        int n = threads[k];
        worker *w = calloc((size_t)n, sizeof *w);
        pthread_t *tid = calloc((size_t)n, sizeof *tid);
        mf_engine_stats s0, s1;
        mf_engine_get_stats(e, &s0);
        double t0 = now_s();
        for (int i = 0; i < n; i++) {
            w[i] = (worker){.e = e, .c = c, .id = k * 100 + i, .until = t0 + 3.0};
            pthread_create(&tid[i], NULL, commit_worker, &w[i]);
        }
        uint64_t total = 0;
        for (int i = 0; i < n; i++) {
            pthread_join(tid[i], NULL);
            total += w[i].done;
        }
        double secs = now_s() - t0;
        mf_engine_get_stats(e, &s1);
        printf("commit: %2d writer thread%s: %.0f durable commits/s (%.2fx the fdatasync rate), "
               "%.1f commits per log sync\n",
               n, n == 1 ? " " : "s", total / secs, total / secs / raw,
               (double)(s1.wal.commits - s0.wal.commits) /
                   (double)(s1.wal.syncs - s0.wal.syncs ? s1.wal.syncs - s0.wal.syncs : 1));
        free(w);
        free(tid);
    }
    mf_error err;
    mf_engine_close(e, &err);
    return 0;
}

int main(int argc, char **argv)
{
    mf_log_configure(MF_LOG_WARNING, true);
    if (argc >= 4 && strcmp(argv[1], "reopen") == 0)
        return bench_reopen(argv[2], atof(argv[3]));
    if (argc >= 5 && strcmp(argv[1], "churn") == 0)
        return bench_churn(argv[2], (size_t)atol(argv[3]), (uint64_t)atoll(argv[4]));
    if (argc >= 3 && strcmp(argv[1], "commit") == 0)
        return bench_commit(argv[2]);
    fprintf(stderr, "usage: storage_bench reopen DIR GB | churn DIR SIZE N | commit DIR\n");
    return 2;
}
