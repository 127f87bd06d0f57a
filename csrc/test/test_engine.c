/* Cases for csrc/storage/engine.c: catalog, writes, reopen, recovery,
 * a SIGKILL crash loop, simulated power loss, and fault injection. */
#include "test.h"
#include "../storage/engine.h"
#include "../storage/os.h"

#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define NKEYS 300

static mf_engine *open_engine(const char *dir, bool background, mf_error *err)
{
    mf_engine *e = NULL;
    mf_log_configure(MF_LOG_WARNING, false);
    mf_engine_options opt = {
        .no_background = !background,
        .checkpoint_log_bytes = 64 * 1024,
        .checkpoint_interval_ms = 50,
        .reserve_bytes = (size_t)4 << 30,
        .wal = {.segment_target = 256 * 1024},
    };
    if (mf_engine_open(dir, &opt, &e, err) != 0)
        return NULL;
    return e;
}

/* ------------------------------------------------ the scripted workload */

/* Operation i (1-based) of the workload, deterministic: on key i % NKEYS,
 * put "v<i>" (7 in 10) or delete, in both the record tree and the index
 * tree, as ONE write.  Ops 150 and 420 create index "late" and fill it. */
static bool op_is_put(uint64_t i)
{
    return (i * 2654435761u) % 10 < 7;
}

typedef struct ctx {
    mf_engine *e;
    mf_coll *c;
    mf_tree_id rec, idx;
} ctx;

static int setup(ctx *x, mf_error *err)
{
    mf_lsn lsn;
    int rc;
    mf_engine_catalog_lock(x->e, true);
    x->c = mf_engine_coll(x->e, "db.c");
    if (!x->c) {
        if ((rc = mf_engine_coll_create(x->e, "db.c", (const uint8_t *)"{}", 2, 0, &x->c, NULL,
                                        &lsn, err)) != 0 ||
            (rc = mf_coll_index_create(x->e, x->c, "k_1", (const uint8_t *)"k", 1, &x->idx,
                                       &lsn, err)) != 0 ||
            (rc = mf_engine_sync(x->e, lsn, err)) != 0) {
            mf_engine_catalog_unlock(x->e);
            return rc;
        }
    }
    mf_engine_catalog_unlock(x->e);
    x->rec = mf_coll_records(x->c);
    x->idx = mf_coll_index(x->c, 0)->tree;
    return 0;
}

static int run_op(ctx *x, uint64_t i, mf_error *err)
{
    char key[32], ikey[32], val[32];
    int kl = snprintf(key, sizeof key, "k%05llu", (unsigned long long)(i % NKEYS));
    int il = snprintf(ikey, sizeof ikey, "i%05llu", (unsigned long long)(i % NKEYS));
    int vl = snprintf(val, sizeof val, "v%llu", (unsigned long long)i);
    mf_lsn lsn;
    int rc;
    mf_engine_catalog_lock(x->e, false);
    mf_coll_lock(x->c, true);
    if (i == 150 || i == 420) {
        /* An index build: a new tree, filled in one write. */
        char name[16];
        snprintf(name, sizeof name, "late%llu", (unsigned long long)i);
        mf_tree_id t;
        rc = mf_coll_index_create(x->e, x->c, name, (const uint8_t *)"x", 1, &t, &lsn, err);
        if (rc == 0) {
            mf_op ops[50];
            char keys[50][16];
            for (int j = 0; j < 50; j++) {
                int l = snprintf(keys[j], sizeof keys[j], "e%02d", j);
                ops[j] = (mf_op){.kind = MF_OP_PUT, .tree = t, .key = (uint8_t *)keys[j],
                                 .klen = (size_t)l, .val = (uint8_t *)val, .vlen = (size_t)vl};
            }
            rc = mf_engine_write(x->e, ops, 50, &lsn, err);
        }
    } else if (op_is_put(i)) {
        mf_op ops[2] = {
            {.kind = MF_OP_PUT, .tree = x->rec, .key = (uint8_t *)key, .klen = (size_t)kl,
             .val = (uint8_t *)val, .vlen = (size_t)vl},
            {.kind = MF_OP_PUT, .tree = x->idx, .key = (uint8_t *)ikey, .klen = (size_t)il,
             .val = (uint8_t *)val, .vlen = (size_t)vl},
        };
        rc = mf_engine_write(x->e, ops, 2, &lsn, err);
    } else {
        mf_op ops[2] = {
            {.kind = MF_OP_DELETE, .tree = x->rec, .key = (uint8_t *)key, .klen = (size_t)kl},
            {.kind = MF_OP_DELETE, .tree = x->idx, .key = (uint8_t *)ikey, .klen = (size_t)il},
        };
        rc = mf_engine_write(x->e, ops, 2, &lsn, err);
    }
    mf_coll_unlock(x->c);
    mf_engine_catalog_unlock(x->e);
    if (rc == 0)
        rc = mf_engine_sync(x->e, lsn, err);
    return rc;
}

/* Whether the database holds exactly the state after ops 1..n. */
static bool state_is(ctx *x, uint64_t n, mf_error *err)
{
    mf_btree *rec = mf_engine_tree(x->e, x->rec), *idx = mf_engine_tree(x->e, x->idx);
    uint64_t entries = 0, want_entries = 0;
    for (uint64_t k = 0; k < NKEYS; k++) {
        /* The last op on key k that is not an index build decides it. */
        uint64_t last = 0;
        for (uint64_t i = n; i >= 1; i--)
            if (i % NKEYS == k && i != 150 && i != 420) {
                last = i;
                break;
            }
        char key[32], ikey[32], val[32];
        int kl = snprintf(key, sizeof key, "k%05llu", (unsigned long long)k);
        int il = snprintf(ikey, sizeof ikey, "i%05llu", (unsigned long long)k);
        bool want = last && op_is_put(last);
        int vl = snprintf(val, sizeof val, "v%llu", (unsigned long long)last);
        bool f1, f2;
        const uint8_t *v1, *v2;
        size_t l1, l2;
        if (mf_btree_get(rec, (uint8_t *)key, (size_t)kl, &f1, &v1, &l1, err) != 0 ||
            mf_btree_get(idx, (uint8_t *)ikey, (size_t)il, &f2, &v2, &l2, err) != 0)
            return false;
        if (f1 != want || f2 != want) {
            if (getenv("MF_DEBUG"))
                printf("  key %llu: want %d got %d %d (n=%llu)\n", (unsigned long long)k, want, f1, f2, (unsigned long long)n);
            return false;
        }
        if (want && (l1 != (size_t)vl || memcmp(v1, val, l1) != 0 || l2 != l1 ||
                     memcmp(v2, val, l2) != 0))
            return false;
        want_entries += want;
    }
    if (mf_btree_validate(rec, &entries, err) != 0 || entries != want_entries) {
        if (getenv("MF_DEBUG"))
            printf("  rec validate: %s entries %llu want %llu\n", err->msg, (unsigned long long)entries, (unsigned long long)want_entries);
        return false;
    }
    if (mf_btree_validate(idx, &entries, err) != 0 || entries != want_entries)
        return false;
    /* The late indexes: whole (50 entries) if their op is in, absent if not. */
    for (uint64_t b = 150; b <= 420; b += 270) {
        char name[16];
        snprintf(name, sizeof name, "late%llu", (unsigned long long)b);
        const mf_index_info *found = NULL;
        for (size_t i = 0; i < mf_coll_index_count(x->c); i++)
            if (strcmp(mf_coll_index(x->c, i)->name, name) == 0)
                found = mf_coll_index(x->c, i);
        if ((found != NULL) != (n >= b)) {
            if (getenv("MF_DEBUG"))
                printf("  index %s found %d n %llu\n", name, found != NULL, (unsigned long long)n);
            return false;
        }
        if (found) {
            if (mf_btree_validate(mf_engine_tree(x->e, found->tree), &entries, err) != 0 ||
                entries != 50)
                return false;
        }
    }
    return true;
}

MFT_CASE(reopen, "/storage/engine/catalog_and_data_survive_close")
{
    mf_error err;
    ctx x = {0};
    x.e = open_engine(mft_tmpdir(), false, &err);
    CHECK(x.e);
    CHECK_INT(setup(&x, &err), 0);
    for (uint64_t i = 1; i <= 500; i++)
        CHECK_INT(run_op(&x, i, &err), 0);
    CHECK(state_is(&x, 500, &err));
    CHECK_INT(mf_engine_close(x.e, &err), 0);

    x.e = open_engine(mft_tmpdir(), false, &err);
    CHECK(x.e);
    mf_engine_stats st;
    mf_engine_get_stats(x.e, &st);
    CHECK_INT(st.replayed, 0); /* a clean close left nothing to replay */
    CHECK_INT(setup(&x, &err), 0);
    CHECK(state_is(&x, 500, &err));
    CHECK_INT(mf_coll_index_count(x.c), 3);

    /* Rename and drop go through the catalog too. */
    mf_lsn lsn;
    mf_engine_catalog_lock(x.e, true);
    CHECK_INT(mf_engine_coll_create(x.e, "db.d", NULL, 0, 0, NULL, NULL, &lsn, &err), 0);
    CHECK_INT(mf_engine_coll_create(x.e, "db.d", NULL, 0, 0, NULL, NULL, &lsn, &err),
              MF_NamespaceExists);
    CHECK_INT(mf_engine_coll_rename(x.e, "db.d", "db.e", false, NULL, &lsn, &err), 0);
    CHECK_INT(mf_engine_coll_drop(x.e, "db.zz", NULL, &lsn, &err), MF_NamespaceNotFound);
    /* A rename onto an existing collection drops it in the same record,
     * with the caller's ops (`also`). */
    mf_coll *g;
    CHECK_INT(mf_engine_coll_create(x.e, "db.f", NULL, 0, 0, NULL, NULL, &lsn, &err), 0);
    CHECK_INT(mf_engine_coll_create(x.e, "db.g", NULL, 0, 0, &g, NULL, &lsn, &err), 0);
    CHECK_INT(mf_engine_coll_rename(x.e, "db.d2", "db.f", false, NULL, &lsn, &err),
              MF_NamespaceNotFound);
    CHECK_INT(mf_engine_coll_create(x.e, "db.d2", NULL, 0, 0, NULL, NULL, &lsn, &err), 0);
    CHECK_INT(mf_engine_coll_rename(x.e, "db.d2", "db.f", false, NULL, &lsn, &err),
              MF_NamespaceExists);
    mf_op put = {.kind = MF_OP_PUT, .tree = mf_coll_records(g), .key = (const uint8_t *)"k",
                 .klen = 1, .val = (const uint8_t *)"v", .vlen = 1};
    mf_op_list also = {&put, 1};
    CHECK_INT(mf_engine_coll_rename(x.e, "db.d2", "db.f", true, &also, &lsn, &err), 0);
    mf_engine_catalog_unlock(x.e);
    CHECK_INT(mf_engine_sync(x.e, lsn, &err), 0);
    mf_engine_abandon(x.e); /* no checkpoint: the log must carry it */

    x.e = open_engine(mft_tmpdir(), false, &err);
    CHECK(x.e);
    mf_engine_get_stats(x.e, &st);
    CHECK(st.replayed > 0);
    mf_engine_catalog_lock(x.e, true);
    CHECK(mf_engine_coll(x.e, "db.e") != NULL);
    CHECK(mf_engine_coll(x.e, "db.d") == NULL);
    CHECK(mf_engine_coll(x.e, "db.d2") == NULL);
    CHECK(mf_engine_coll(x.e, "db.f") != NULL);
    CHECK((g = mf_engine_coll(x.e, "db.g")) != NULL);
    bool found;
    const uint8_t *v;
    size_t vl;
    CHECK_INT(mf_btree_get(mf_engine_tree(x.e, mf_coll_records(g)), (const uint8_t *)"k", 1,
                           &found, &v, &vl, &err), 0);
    CHECK(found && vl == 1 && v[0] == 'v');
    CHECK_INT(mf_engine_coll_drop(x.e, "db.e", NULL, &lsn, &err), 0);
    CHECK_INT(mf_engine_coll_drop(x.e, "db.f", NULL, &lsn, &err), 0);
    CHECK_INT(mf_engine_coll_drop(x.e, "db.g", NULL, &lsn, &err), 0);
    mf_engine_catalog_unlock(x.e);
    CHECK_INT(setup(&x, &err), 0);
    CHECK(state_is(&x, 500, &err));
    CHECK_INT(mf_engine_close(x.e, &err), 0);
}

/* A transaction's collection is created MF_COLL_PENDING, and stays so
 * across a crash until mf_engine_colls_settle logs its entry with the
 * commit's ops in one record: after the next crash both are there. */
MFT_CASE(pending_collection, "/storage/engine/pending_collection_settled_with_its_ops")
{
    mf_error err;
    mf_lsn lsn;
    mf_coll *p, *q;
    mf_engine *e = open_engine(mft_tmpdir(), false, &err);
    CHECK(e);
    mf_engine_catalog_lock(e, true);
    CHECK_INT(mf_engine_coll_create(e, "db.p", NULL, 0, MF_COLL_PENDING, &p, NULL, &lsn, &err),
              0);
    CHECK_INT(mf_engine_coll_create(e, "db.q", NULL, 0, 0, &q, NULL, &lsn, &err), 0);
    CHECK(mf_coll_pending(p) && !mf_coll_pending(q));
    mf_engine_catalog_unlock(e);
    CHECK_INT(mf_engine_sync(e, lsn, &err), 0);
    mf_engine_abandon(e); /* a crash: the log carries the flag */

    CHECK((e = open_engine(mft_tmpdir(), false, &err)) != NULL);
    mf_engine_catalog_lock(e, true);
    CHECK((p = mf_engine_coll(e, "db.p")) != NULL && mf_coll_pending(p));
    CHECK((q = mf_engine_coll(e, "db.q")) != NULL && !mf_coll_pending(q));
    mf_op put = {.kind = MF_OP_PUT, .tree = mf_coll_records(p), .key = (const uint8_t *)"k",
                 .klen = 1, .val = (const uint8_t *)"v", .vlen = 1};
    CHECK_INT(mf_engine_colls_settle(e, &p, 1, &put, 1, &lsn, &err), 0);
    CHECK(!mf_coll_pending(p));
    mf_engine_catalog_unlock(e);
    CHECK_INT(mf_engine_sync(e, lsn, &err), 0);
    mf_engine_abandon(e);

    CHECK((e = open_engine(mft_tmpdir(), false, &err)) != NULL);
    mf_engine_catalog_lock(e, false);
    CHECK((p = mf_engine_coll(e, "db.p")) != NULL && !mf_coll_pending(p));
    bool found;
    const uint8_t *v;
    size_t vl;
    CHECK_INT(mf_btree_get(mf_engine_tree(e, mf_coll_records(p)), (const uint8_t *)"k", 1,
                           &found, &v, &vl, &err), 0);
    CHECK(found && vl == 1 && v[0] == 'v');
    mf_engine_catalog_unlock(e);
    CHECK_INT(mf_engine_close(e, &err), 0);
}

/* A write with a key the B+tree cannot hold is refused whole, before any
 * of its ops is applied, and the engine takes the next write: before, the
 * first op went into the trees, the second failed, and the engine refused
 * every write until reopened. */
MFT_CASE(oversize_key, "/storage/engine/oversize_key_refused_before_any_op")
{
    mf_error err;
    ctx x = {0};
    x.e = open_engine(mft_tmpdir(), false, &err);
    CHECK(x.e);
    CHECK_INT(setup(&x, &err), 0);
    size_t big = MF_BTREE_MAX_KEY + 1;
    uint8_t *long_key = malloc(big);
    CHECK(long_key);
    memset(long_key, 'x', big);
    const uint8_t *v = (const uint8_t *)"v";
    mf_op ops[2] = {
        {.kind = MF_OP_PUT, .tree = x.rec, .key = (const uint8_t *)"r1", .klen = 2, .val = v,
         .vlen = 1},
        {.kind = MF_OP_PUT, .tree = x.idx, .key = long_key, .klen = big, .val = v, .vlen = 1},
    };
    mf_lsn lsn;
    mf_engine_catalog_lock(x.e, false);
    mf_coll_lock(x.c, true);
    CHECK_INT(mf_engine_write(x.e, ops, 2, &lsn, &err), MF_BadValue);
    ops[1].klen = 0;
    CHECK_INT(mf_engine_write(x.e, ops, 2, &lsn, &err), MF_BadValue);
    bool found;
    const uint8_t *got;
    size_t gl;
    CHECK_INT(mf_btree_get(mf_engine_tree(x.e, x.rec), (const uint8_t *)"r1", 2, &found, &got,
                           &gl, &err), 0);
    CHECK(!found); /* the op before the refused one was not applied */
    /* Deleting such a key finds nothing, and is no error. */
    mf_op del = {.kind = MF_OP_DELETE, .tree = x.idx, .key = long_key, .klen = big};
    CHECK_INT(mf_engine_write(x.e, &del, 1, &lsn, &err), 0);
    ops[1].klen = MF_BTREE_MAX_KEY; /* the longest key the tree takes */
    CHECK_INT(mf_engine_write(x.e, ops, 2, &lsn, &err), 0);
    mf_coll_unlock(x.c);
    mf_engine_catalog_unlock(x.e);
    CHECK(!mf_engine_failure(x.e, NULL, 0));
    CHECK_INT(mf_engine_sync(x.e, lsn, &err), 0);
    CHECK_INT(mf_btree_get(mf_engine_tree(x.e, x.rec), (const uint8_t *)"r1", 2, &found, &got,
                           &gl, &err), 0);
    CHECK(found);
    CHECK_INT(mf_btree_get(mf_engine_tree(x.e, x.idx), long_key, MF_BTREE_MAX_KEY, &found, &got,
                           &gl, &err), 0);
    CHECK(found);
    free(long_key);
    mf_engine_abandon(x.e); /* the log must carry the write that was taken */
    x.e = open_engine(mft_tmpdir(), false, &err);
    CHECK(x.e);
    CHECK_INT(setup(&x, &err), 0);
    CHECK_INT(mf_btree_get(mf_engine_tree(x.e, x.rec), (const uint8_t *)"r1", 2, &found, &got,
                           &gl, &err), 0);
    CHECK(found);
    CHECK_INT(mf_engine_close(x.e, &err), 0);
}

/* A log replayed at open counts toward the next checkpoint: a process
 * killed before it writes a threshold's worth of log of its own still
 * leaves the next one a checkpoint, so reopen never replays an ever longer
 * log (a crash-looping server did, before). */
MFT_CASE(replayed_log_checkpoints, "/storage/engine/replayed_log_counts_toward_checkpoint")
{
    mf_error err;
    ctx x = {0};
    x.e = open_engine(mft_tmpdir(), false, &err); /* no checkpoints */
    CHECK(x.e);
    CHECK_INT(setup(&x, &err), 0);
    for (uint64_t i = 1; i <= 3000; i++)
        CHECK_INT(run_op(&x, i, &err), 0);
    mf_engine_stats st;
    mf_engine_get_stats(x.e, &st);
    mf_engine_abandon(x.e); /* killed: the log holds it all */

    mf_engine_options opt = {
        .checkpoint_log_bytes = 64 * 1024,
        .checkpoint_interval_ms = 3600 * 1000, /* never by time in this test */
        .reserve_bytes = (size_t)4 << 30,
        .wal = {.segment_target = 256 * 1024},
    };
    CHECK_INT(mf_engine_open(mft_tmpdir(), &opt, &x.e, &err), 0);
    mf_engine_get_stats(x.e, &st);
    CHECK(st.replayed > 0);
    /* Nothing new is written, yet the checkpointer (it looks every second)
     * takes a checkpoint for the replayed log. */
    for (int t = 0; t < 50 && st.checkpoints == 0; t++) {
        usleep(100 * 1000);
        mf_engine_get_stats(x.e, &st);
    }
    CHECK(st.checkpoints >= 1);
    CHECK_INT(setup(&x, &err), 0);
    CHECK(state_is(&x, 3000, &err));
    mf_engine_abandon(x.e);
    /* The next open starts from that checkpoint. */
    x.e = open_engine(mft_tmpdir(), false, &err);
    CHECK(x.e);
    mf_engine_get_stats(x.e, &st);
    CHECK_INT(st.replayed, 0);
    CHECK_INT(setup(&x, &err), 0);
    CHECK(state_is(&x, 3000, &err));
    CHECK_INT(mf_engine_close(x.e, &err), 0);
}

/* Checkpoints come from the work a replay would redo, not from the log's
 * stored size: documents that compress to almost nothing in the log still
 * trigger one.  Before, 2 MiB of 16 KiB documents of one repeated byte
 * logged about 16 KiB of LZ4 and never reached a 256 KiB threshold, so a
 * kill -9 after the load replayed all of it. */
MFT_CASE(compressible_load_checkpoints, "/storage/engine/compressible_log_triggers_checkpoint")
{
    enum { NDOCS = 128, DOC = 16384 };
    mf_error err;
    mf_engine *e = NULL;
    mf_coll *c = NULL;
    mf_lsn lsn;
    mf_engine_options opt = {
        .checkpoint_log_bytes = 256 * 1024,
        .checkpoint_interval_ms = 3600 * 1000, /* never by time in this test */
        .reserve_bytes = (size_t)4 << 30,
        .wal = {.segment_target = 256 * 1024},
    };
    mf_log_configure(MF_LOG_WARNING, false);
    CHECK_INT(mf_engine_open(mft_tmpdir(), &opt, &e, &err), 0);
    mf_engine_catalog_lock(e, true);
    CHECK_INT(mf_engine_coll_create(e, "db.c", (const uint8_t *)"{}", 2, 0, &c, NULL, &lsn, &err), 0);
    mf_engine_catalog_unlock(e);
    CHECK_INT(mf_engine_sync(e, lsn, &err), 0);
    uint8_t *doc = malloc(DOC);
    CHECK(doc);
    memset(doc, 'x', DOC);
    for (uint64_t i = 0; i < NDOCS; i++) {
        uint8_t key[8];
        for (int b = 0; b < 8; b++)
            key[b] = (uint8_t)(i >> (56 - 8 * b));
        mf_op op = {.kind = MF_OP_PUT, .tree = mf_coll_records(c), .key = key, .klen = 8,
                    .val = doc, .vlen = DOC};
        mf_engine_catalog_lock(e, false);
        mf_coll_lock(c, true);
        CHECK_INT(mf_engine_write(e, &op, 1, &lsn, &err), 0);
        mf_coll_unlock(c);
        mf_engine_catalog_unlock(e);
        CHECK_INT(mf_engine_sync(e, lsn, &err), 0);
    }
    free(doc);
    mf_engine_stats st;
    mf_engine_get_stats(e, &st);
    CHECK(st.wal.bytes_stored < opt.checkpoint_log_bytes); /* the log alone would never */
    for (int t = 0; t < 50 && st.checkpoints < 3; t++) {
        usleep(100 * 1000);
        mf_engine_get_stats(e, &st);
    }
    /* 2 MiB of work at a 256 KiB threshold: several checkpoints (one at
     * least per wake-up of the checkpointer that finds one due) */
    CHECK(st.checkpoints >= 3);
    mf_engine_abandon(e); /* killed */
    e = NULL;
    CHECK_INT(mf_engine_open(mft_tmpdir(), &opt, &e, &err), 0);
    mf_engine_get_stats(e, &st);
    CHECK(st.replayed < NDOCS / 2);
    CHECK_INT(mf_engine_close(e, &err), 0);
}

/* A tree created, still empty at a checkpoint, then written: the log that
 * created it is before the checkpoint and not replayed, so the checkpoint
 * itself must record it (a kill -9 during an index build met "write to
 * unknown tree" at open).  And a recorded tree, emptied and then dropped,
 * must not come back at the next open. */
static int index_op(ctx *x, bool create, mf_tree_id *t, mf_error *err)
{
    mf_lsn lsn;
    mf_engine_catalog_lock(x->e, false);
    mf_coll_lock(x->c, true);
    int rc = create ? mf_coll_index_create(x->e, x->c, "late", (const uint8_t *)"x", 1, t, &lsn,
                                           err)
                    : mf_coll_index_drop(x->e, x->c, "late", NULL, &lsn, err);
    mf_coll_unlock(x->c);
    mf_engine_catalog_unlock(x->e);
    return rc ? rc : mf_engine_sync(x->e, lsn, err);
}

static int tree_op(ctx *x, mf_op_kind kind, mf_tree_id t, mf_error *err)
{
    mf_lsn lsn;
    mf_op op = {.kind = kind, .tree = t, .key = (const uint8_t *)"e1", .klen = 2,
                .val = (const uint8_t *)"v", .vlen = kind == MF_OP_PUT ? 1 : 0};
    mf_engine_catalog_lock(x->e, false);
    mf_coll_lock(x->c, true);
    int rc = mf_engine_write(x->e, &op, 1, &lsn, err);
    mf_coll_unlock(x->c);
    mf_engine_catalog_unlock(x->e);
    return rc ? rc : mf_engine_sync(x->e, lsn, err);
}

MFT_CASE(empty_tree_at_checkpoint, "/storage/engine/tree_empty_at_checkpoint_survives_replay")
{
    mf_error err;
    ctx x = {0};
    mf_tree_id t;
    bool found;
    const uint8_t *v;
    size_t vl;
    x.e = open_engine(mft_tmpdir(), false, &err);
    CHECK(x.e);
    CHECK_INT(setup(&x, &err), 0);
    CHECK_INT(index_op(&x, true, &t, &err), 0);
    CHECK_INT(mf_engine_checkpoint(x.e, &err), 0); /* the new tree is empty */
    CHECK_INT(tree_op(&x, MF_OP_PUT, t, &err), 0);
    mf_engine_abandon(x.e);

    x.e = open_engine(mft_tmpdir(), false, &err);
    if (!x.e)
        fprintf(stderr, "open: %s\n", err.msg);
    CHECK(x.e);
    CHECK(mf_engine_tree(x.e, t) != NULL);
    CHECK_INT(mf_btree_get(mf_engine_tree(x.e, t), (const uint8_t *)"e1", 2, &found, &v, &vl,
                           &err),
              0);
    CHECK(found && vl == 1 && v[0] == 'v');
    /* emptied, recorded empty, then dropped: gone for good */
    CHECK_INT(setup(&x, &err), 0);
    CHECK_INT(tree_op(&x, MF_OP_DELETE, t, &err), 0);
    CHECK_INT(mf_engine_checkpoint(x.e, &err), 0);
    CHECK_INT(index_op(&x, false, &t, &err), 0);
    CHECK_INT(mf_engine_close(x.e, &err), 0);
    x.e = open_engine(mft_tmpdir(), false, &err);
    CHECK(x.e);
    CHECK(mf_engine_tree(x.e, t) == NULL);
    CHECK_INT(mf_engine_close(x.e, &err), 0);
}

/* The child: run the workload, reporting each committed op on `fd`. */
static void child_run(const char *dir, int fd, uint64_t total)
{
    mf_error err;
    ctx x = {0};
    x.e = open_engine(dir, true, &err);
    if (!x.e || setup(&x, &err) != 0)
        _exit(3);
    for (uint64_t i = 1; i <= total; i++) {
        if (run_op(&x, i, &err) != 0)
            _exit(4);
        if (i % 40 == 0 && mf_engine_checkpoint(x.e, &err) != 0)
            _exit(5);
        if (write(fd, &i, sizeof i) != sizeof i)
            _exit(6);
    }
    mf_engine_close(x.e, &err);
    _exit(0);
}

MFT_CASE(crash_loop, "/storage/engine/sigkill_crash_loop")
{
    const int points = getenv("MF_CRASH_POINTS") ? atoi(getenv("MF_CRASH_POINTS")) : 200;
    const uint64_t total = 480;
    char dir[512];
    mf_error err;
    int bad = 0;
    for (int pt = 0; pt < points && !bad; pt++) {
        snprintf(dir, sizeof dir, "%s/run%d", mft_tmpdir(), pt);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
        CHECK(system(cmd) == 0);
        /* Kill after an evenly spaced number of acknowledged ops. */
        uint64_t kill_after = 1 + (uint64_t)pt * (total - 2) / (uint64_t)(points > 1 ? points - 1 : 1);
        int p[2];
        CHECK(pipe(p) == 0);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            child_run(dir, p[1], total);
        }
        close(p[1]);
        uint64_t acked = 0, v;
        while (read(p[0], &v, sizeof v) == sizeof v) {
            acked = v;
            if (acked >= kill_after) {
                kill(pid, SIGKILL);
                break;
            }
        }
        int status;
        waitpid(pid, &status, 0);
        /* The child may have run ahead of what we read: its last ack is
         * the last one in the pipe. */
        while (read(p[0], &v, sizeof v) == sizeof v)
            acked = v;
        close(p[0]);
        CHECK(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 0));

        ctx x = {0};
        x.e = open_engine(dir, false, &err);
        if (!x.e)
            printf("  point %d (acked %llu): reopen failed: %d %s\n", pt,
                   (unsigned long long)acked, err.code, err.msg);
        CHECK(x.e);
        if (acked == 0) {
            /* Killed before anything committed: only check it opens. */
            mf_engine_abandon(x.e);
            continue;
        }
        CHECK_INT(setup(&x, &err), 0);
        /* Every acknowledged op is there; at most one more may be. */
        bool ok = state_is(&x, acked, &err) || state_is(&x, acked + 1, &err);
        if (!ok)
            printf("  point %d: state after reopen is not ops 1..%llu (+1)\n", pt,
                   (unsigned long long)acked);
        CHECK(ok);
        mf_engine_abandon(x.e);
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0);
    }
}

MFT_CASE(power_loss, "/storage/engine/simulated_power_loss")
{
    const int points = getenv("MF_CRASH_POINTS") ? atoi(getenv("MF_CRASH_POINTS")) : 200;
    const uint64_t total = 480;
    char dir[512];
    mf_error err;
    mf_os_sim_enable(true);
    for (int pt = 0; pt < points; pt++) {
        snprintf(dir, sizeof dir, "%s/pl%d", mft_tmpdir(), pt);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
        CHECK(system(cmd) == 0);
        uint64_t stop = 1 + (uint64_t)pt * (total - 2) / (uint64_t)(points > 1 ? points - 1 : 1);
        ctx x = {0};
        x.e = open_engine(dir, false, &err);
        CHECK(x.e);
        CHECK_INT(setup(&x, &err), 0);
        for (uint64_t i = 1; i <= stop; i++) {
            CHECK_INT(run_op(&x, i, &err), 0);
            if (i % 40 == 0)
                CHECK_INT(mf_engine_checkpoint(x.e, &err), 0);
        }
        /* One more op, applied and appended but never synced. */
        mf_engine_abandon(x.e);
        CHECK_INT(mf_os_sim_crash(&err), 0);
        x.e = open_engine(dir, false, &err);
        if (!x.e)
            printf("  point %d: %s\n", pt, err.msg);
        CHECK(x.e);
        CHECK_INT(setup(&x, &err), 0);
        CHECK(state_is(&x, stop, &err));
        mf_engine_abandon(x.e);
        mf_os_sim_enable(false); /* forget this directory's files */
        mf_os_sim_enable(true);
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0);
    }
    mf_os_sim_enable(false);
}

/* ------------------------------------------------------- fault injection */

/* Op i: put key i with a 3000-byte value (an overflow run, so the file
 * keeps growing) in one write, then sync. */
/* Values of 3 overflow pages: the 2 MiB the file grows by last ~150 writes. */
#define FAULT_VAL 12000

static int fault_op(ctx *x, uint64_t i, mf_error *err)
{
    char key[16];
    uint8_t val[FAULT_VAL];
    int kl = snprintf(key, sizeof key, "f%06llu", (unsigned long long)i);
    memset(val, (int)(i & 0xff), sizeof val);
    mf_lsn lsn;
    mf_op op = {.kind = MF_OP_PUT, .tree = x->rec, .key = (uint8_t *)key, .klen = (size_t)kl,
                .val = val, .vlen = sizeof val};
    mf_coll_lock(x->c, true);
    int rc = mf_engine_write(x->e, &op, 1, &lsn, err);
    mf_coll_unlock(x->c);
    return rc ? rc : mf_engine_sync(x->e, lsn, err);
}

/* Keys f1..f`n` present with their values, and nothing past n + 1. */
static bool fault_state(ctx *x, uint64_t n, mf_error *err)
{
    mf_btree *rec = mf_engine_tree(x->e, x->rec);
    for (uint64_t i = 1; i <= n + 50; i++) {
        char key[16];
        int kl = snprintf(key, sizeof key, "f%06llu", (unsigned long long)i);
        bool found;
        const uint8_t *v;
        size_t vl;
        if (mf_btree_get(rec, (uint8_t *)key, (size_t)kl, &found, &v, &vl, err) != 0)
            return false;
        if (i <= n && (!found || vl != FAULT_VAL || v[0] != (uint8_t)(i & 0xff) ||
                       v[FAULT_VAL - 1] != (uint8_t)(i & 0xff)))
            return false;
        if (i > n + 1 && found)
            return false;
    }
    uint64_t entries;
    return mf_btree_validate(rec, &entries, err) == 0;
}

MFT_CASE(faults, "/storage/engine/faults_at_each_site")
{
    /* `refused`: the fault hits while a write takes its space, before it
     * changes anything -- that write fails and the engine goes on; every
     * other fault fails the engine until it is reopened. */
    static const struct {
        const char *site;
        mf_fault_kind kind;
        bool refused;
    } faults[] = {
        {"pager.grow", MF_FAULT_EIO, true},   {"pager.grow", MF_FAULT_ENOSPC, true},
        {"pager.map", MF_FAULT_EIO, true},    {"pager.sync", MF_FAULT_EIO, false},
        {"pager.meta", MF_FAULT_EIO, false},  {"pager.meta", MF_FAULT_SHORT, false},
        {"pager.meta", MF_FAULT_ENOSPC, false}, {"wal.write", MF_FAULT_EIO, false},
        {"wal.write", MF_FAULT_ENOSPC, false}, {"wal.write", MF_FAULT_SHORT, false},
        {"wal.sync", MF_FAULT_EIO, false},
    };
    mf_error err;
    char dir[512];
    for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++) {
        for (int persistent = 0; persistent < 2; persistent++) {
            snprintf(dir, sizeof dir, "%s/f%zu_%d", mft_tmpdir(), f, persistent);
            char cmd[600];
            snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
            CHECK(system(cmd) == 0);
            ctx x = {0};
            x.e = open_engine(dir, false, &err);
            CHECK(x.e);
            CHECK_INT(setup(&x, &err), 0);
            uint64_t committed = 0;
            for (uint64_t i = 1; i <= 60; i++) {
                CHECK_INT(fault_op(&x, i, &err), 0);
                committed = i;
            }
            CHECK_INT(mf_engine_checkpoint(x.e, &err), 0);
            /* Arm the fault, then keep writing (and checkpointing) until
             * an error comes back. */
            mf_os_fault_set(mf_engine_faults(x.e), faults[f].site, faults[f].kind, 0,
                            persistent ? -1 : 1);
            int failed_at = 0;
            uint64_t last = committed + 400;
            for (uint64_t i = committed + 1; i <= last && !failed_at; i++) {
                int rc = fault_op(&x, i, &err);
                if (rc == 0 && i % 20 == 0)
                    rc = mf_engine_checkpoint(x.e, &err);
                if (rc != 0)
                    failed_at = (int)i;
                else
                    committed = i;
            }
            bool fired = mf_os_fault_hits(mf_engine_faults(x.e)) > 0;
            mf_os_fault_clear(mf_engine_faults(x.e));
            if (!fired)
                printf("  %s never ran\n", faults[f].site);
            CHECK(fired);
            /* A one-time ENOSPC at growth may be absorbed: the pager then
             * asks for just what it needs, and gets it. */
            CHECK(failed_at != 0 || (faults[f].refused && !persistent));
            if (faults[f].refused && failed_at) {
                /* Nothing was applied: the same write now succeeds. */
                CHECK_INT(fault_op(&x, (uint64_t)failed_at, &err), 0);
                committed = (uint64_t)failed_at;
            } else if (!faults[f].refused) {
                /* The engine refuses writes from now on, and says why. */
                CHECK(fault_op(&x, 100000, &err) == MF_IllegalOperation);
                CHECK(strstr(err.msg, "refuses writes") != NULL);
            }
            mf_engine_abandon(x.e);
            /* Reopen without the fault: everything committed is intact. */
            x.e = open_engine(dir, false, &err);
            if (!x.e)
                printf("  %s/%d/%d: reopen: %s\n", faults[f].site, faults[f].kind, persistent,
                       err.msg);
            CHECK(x.e);
            CHECK_INT(setup(&x, &err), 0);
            if (!fault_state(&x, committed, &err))
                printf("  %s/%d/%d: state is not ops 1..%llu\n", faults[f].site,
                       faults[f].kind, persistent, (unsigned long long)committed);
            CHECK(fault_state(&x, committed, &err));
            /* And it takes writes again. */
            CHECK_INT(fault_op(&x, committed + 1, &err), 0);
            mf_engine_abandon(x.e);
        }
    }
}

/* Two engines in one process: each checks its own fault table, so a fault
 * armed on one fails that one's file operations and never the other's.
 * (With one table for the process, as before, b's sync fails too.) */
MFT_CASE(faults_per_engine, "/storage/engine/faults_are_per_engine")
{
    mf_error err;
    char da[512], db[512], cmd[1100];
    snprintf(da, sizeof da, "%s/pe_a", mft_tmpdir());
    snprintf(db, sizeof db, "%s/pe_b", mft_tmpdir());
    snprintf(cmd, sizeof cmd, "mkdir -p %s %s", da, db);
    CHECK(system(cmd) == 0);
    ctx a = {0}, b = {0};
    a.e = open_engine(da, false, &err);
    b.e = open_engine(db, false, &err);
    CHECK(a.e && b.e);
    CHECK_INT(setup(&a, &err), 0);
    CHECK_INT(setup(&b, &err), 0);
    mf_os_faults *fa = mf_engine_faults(a.e), *fb = mf_engine_faults(b.e);
    CHECK(fa && fb);
    /* Every call a's engine makes fails from now on; b's pass. */
    mf_os_fault_set(fa, "", MF_FAULT_EIO, 0, -1);
    CHECK_INT(fault_op(&b, 1, &err), 0);
    CHECK_INT(mf_engine_checkpoint(b.e, &err), 0);
    CHECK_INT(mf_os_fault_hits(fa), 0);
    CHECK_INT(mf_os_fault_calls(fb), 0); /* b's table was never armed */
    CHECK(fault_op(&a, 1, &err) != 0);
    CHECK(strstr(err.msg, "wal.") != NULL);
    CHECK(mf_os_fault_hits(fa) >= 1);
    CHECK_INT(fault_op(&b, 2, &err), 0);
    mf_os_fault_clear(fa);
    mf_engine_abandon(a.e);

    /* A table the caller gives, armed before the open: that engine's open
     * fails, and another opened meanwhile without it does not. */
    mf_os_faults *t = mf_os_faults_new();
    CHECK(t);
    mf_os_fault_set(t, "", MF_FAULT_EIO, 0, -1);
    mf_engine_options opt = {.no_background = true, .reserve_bytes = (size_t)4 << 30,
                             .faults = t};
    mf_engine *c = NULL;
    CHECK(mf_engine_open(da, &opt, &c, &err) != 0);
    CHECK(c == NULL);
    CHECK(mf_os_fault_hits(t) >= 1);
    CHECK_INT(fault_op(&b, 3, &err), 0);
    /* Counting, not failing: the table sees its engine's calls alone. */
    mf_os_fault_set(t, "", MF_FAULT_EIO, INT_MAX, 0);
    CHECK_INT(mf_engine_open(da, &opt, &c, &err), 0);
    CHECK(mf_engine_faults(c) == t);
    int calls = mf_os_fault_calls(t);
    CHECK(calls > 0);
    CHECK_INT(fault_op(&b, 4, &err), 0);
    CHECK_INT(mf_engine_checkpoint(b.e, &err), 0);
    CHECK_INT(mf_os_fault_calls(t), calls);
    CHECK_INT(mf_engine_close(c, &err), 0);
    CHECK(mf_os_fault_calls(t) > calls); /* its close's checkpoint */
    CHECK_INT(mf_os_fault_hits(t), 0);
    mf_os_faults_free(t);
    CHECK_INT(mf_engine_close(b.e, &err), 0);
}

/* ---------------------------------------------------------- concurrency */

#include <pthread.h>
#include <stdatomic.h>

typedef struct conc {
    mf_engine *e;
    mf_coll *c;
    int id;
    atomic_bool *stop;
    uint64_t done, scanned;
    int failed;
} conc;

static void *conc_writer(void *arg)
{
    conc *w = arg;
    mf_error err;
    uint8_t val[600];
    for (uint64_t i = 0; !atomic_load(w->stop); i++) {
        char key[24];
        int kl = snprintf(key, sizeof key, "w%d-%08llu", w->id, (unsigned long long)(i % 5000));
        memset(val, (int)i, sizeof val);
        mf_op op = {.kind = (i % 7 == 6) ? MF_OP_DELETE : MF_OP_PUT,
                    .tree = mf_coll_records(w->c), .key = (uint8_t *)key, .klen = (size_t)kl,
                    .val = val, .vlen = (size_t)(100 + i % 500)};
        mf_lsn lsn;
        mf_engine_catalog_lock(w->e, false);
        mf_coll_lock(w->c, true);
        int rc = mf_engine_write(w->e, &op, 1, &lsn, &err);
        mf_coll_unlock(w->c);
        mf_engine_catalog_unlock(w->e);
        if (rc == 0 && i % 16 == 0)
            rc = mf_engine_sync(w->e, lsn, &err);
        if (rc != 0) {
            w->failed = rc;
            break;
        }
        w->done++;
    }
    return NULL;
}

static void *conc_reader(void *arg)
{
    conc *r = arg;
    mf_error err;
    while (!atomic_load(r->stop)) {
        mf_engine_catalog_lock(r->e, false);
        mf_coll_lock(r->c, false);
        mf_cursor cur;
        bool valid;
        const uint8_t *prev = NULL;
        size_t prev_len = 0;
        uint8_t last[64];
        mf_cursor_init(&cur, mf_engine_tree(r->e, mf_coll_records(r->c)));
        int rc = mf_cursor_first(&cur, &valid, &err);
        while (rc == 0 && valid) {
            const uint8_t *k, *v;
            size_t kl, vl;
            mf_cursor_key(&cur, &k, &kl);
            mf_cursor_value(&cur, &v, &vl);
            if (prev && (kl == 0 || memcmp(last, k, kl < prev_len ? kl : prev_len) > 0))
                r->failed = 1; /* out of order: a torn read */
            memcpy(last, k, kl < sizeof last ? kl : sizeof last);
            prev = last;
            prev_len = kl < sizeof last ? kl : sizeof last;
            r->scanned++;
            rc = mf_cursor_next(&cur, &valid, &err);
        }
        mf_coll_unlock(r->c);
        mf_engine_catalog_unlock(r->e);
        if (rc != 0)
            r->failed = rc;
    }
    return NULL;
}

MFT_CASE(concurrency, "/storage/engine/writers_readers_and_checkpoints_together")
{
    mf_error err;
    mf_engine *e = open_engine(mft_tmpdir(), true, &err); /* background checkpoints */
    CHECK(e);
    mf_coll *colls[4];
    mf_lsn lsn;
    mf_engine_catalog_lock(e, true);
    for (int i = 0; i < 4; i++) {
        char ns[16];
        snprintf(ns, sizeof ns, "db.c%d", i);
        CHECK_INT(mf_engine_coll_create(e, ns, NULL, 0, 0, &colls[i], NULL, &lsn, &err), 0);
    }
    mf_engine_catalog_unlock(e);
    atomic_bool stop = false;
    conc w[4], r[2];
    pthread_t tw[4], tr[2];
    for (int i = 0; i < 4; i++) {
        w[i] = (conc){.e = e, .c = colls[i], .id = i, .stop = &stop};
        pthread_create(&tw[i], NULL, conc_writer, &w[i]);
    }
    for (int i = 0; i < 2; i++) {
        r[i] = (conc){.e = e, .c = colls[i], .id = i, .stop = &stop};
        pthread_create(&tr[i], NULL, conc_reader, &r[i]);
    }
    usleep(2500 * 1000);
    atomic_store(&stop, true);
    for (int i = 0; i < 4; i++)
        pthread_join(tw[i], NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(tr[i], NULL);
    mf_engine_stats st;
    mf_engine_get_stats(e, &st);
    for (int i = 0; i < 4; i++) {
        CHECK_INT(w[i].failed, 0);
        CHECK(w[i].done > 100);
    }
    for (int i = 0; i < 2; i++) {
        CHECK_INT(r[i].failed, 0);
        CHECK(r[i].scanned > 0);
    }
    CHECK(st.checkpoints >= 1); /* they ran beside the writers */
    /* Every tree is sound, before and after a reopen. */
    uint64_t counts[4], entries;
    for (int i = 0; i < 4; i++)
        CHECK_INT(mf_btree_validate(mf_engine_tree(e, mf_coll_records(colls[i])), &counts[i],
                                    &err), 0);
    CHECK_INT(mf_engine_close(e, &err), 0);
    e = open_engine(mft_tmpdir(), false, &err);
    CHECK(e);
    for (int i = 0; i < 4; i++) {
        char ns[16];
        snprintf(ns, sizeof ns, "db.c%d", i);
        mf_coll *c = mf_engine_coll(e, ns);
        CHECK(c);
        CHECK_INT(mf_btree_validate(mf_engine_tree(e, mf_coll_records(c)), &entries, &err), 0);
        CHECK_INT(entries, counts[i]);
    }
    CHECK_INT(mf_engine_close(e, &err), 0);
}
