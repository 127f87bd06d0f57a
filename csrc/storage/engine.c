/*
 * engine.c -- trees, writes, checkpoints and recovery over the pager and
 * the log; the catalog of collections.  engine.h is the manual.
 *
 *   Log record (one per mf_engine_write):
 *   u8 version (1), u32 op count, then per op:
 *   u8 kind, u64 tree, u32 key length, key, u32 value length, value
 *
 *   Meta page user area (pager.h):
 *   0   8  LSN of the last record the checkpoint includes
 *   8   8  catalog tree root
 *   16  8  next tree id
 *
 *   Catalog entry "ns:<name>":
 *   u64 record tree, u32 options length, options,
 *   u32 index count, per index: u64 tree, u16 name length, name,
 *   u32 spec length, spec
 *
 * Checkpoint states (checkpoint()):
 *   writers running --freeze (apply lock exclusive: save changed roots into
 *   the catalog, mf_pager_checkpoint_freeze)--> writers running again
 *   --flush (mf_pager_checkpoint_write)--> durable --> old log dropped
 */
#include "engine.h"
#include "os.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define RECORD_VERSION 1
#define ROOT_PREFIX "root:"
#define NS_PREFIX "ns:"

typedef struct tree_ent {
    mf_tree_id id;
    mf_btree bt;
    mf_pgno saved_root; /* as the last checkpoint recorded it */
    bool saved;         /* a checkpoint recorded it (its "root:" entry exists);
                           an empty tree's root is 0, so saved_root alone
                           cannot tell */
} tree_ent;

struct mf_coll {
    char *name;
    mf_tree_id records;
    unsigned flags; /* MF_COLL_*: written under catalog_tree_mu */
    uint8_t *options;
    size_t options_len;
    mf_index_info *idx;
    size_t nidx;
    pthread_rwlock_t lock;
};

struct mf_engine {
    char *dir;
    mf_pager *pg;
    mf_wal *wal;
    mf_engine_options opt; /* opt.faults and opt.wal.faults: its fault table */
    mf_os_faults *own_faults; /* that table, when the engine made it */

    pthread_rwlock_t trees_lock; /* the table's shape; not the trees */
    tree_ent **trees;            /* sorted by id */
    size_t ntrees, cap_trees;
    mf_tree_id *dropped; /* ids dropped since the last checkpoint */
    size_t ndropped, cap_dropped;
    atomic_uint_fast64_t next_tree;

    pthread_rwlock_t catalog_lock;
    pthread_mutex_t catalog_tree_mu; /* writes to tree 1 outside exclusive */
    mf_coll **colls;                 /* sorted by name */
    size_t ncolls, cap_colls;

    pthread_rwlock_t apply_lock;
    pthread_mutex_t long_run_mu; /* one write needing a long page run at a
                                    time (mf_pager_reserve) */
    pthread_mutex_t state_mu; /* failed, checkpoint bookkeeping, thread */
    pthread_cond_t state_cond;
    char failed[MF_ERRMSG_MAX];
    bool is_failed;
    bool cp_no_space; /* the last checkpoint found no space (logged once) */
    mf_lsn last_cp_lsn, prev_cp_lsn;
    uint64_t cp_log_bytes; /* log record bytes (before compression) written
                              at the last checkpoint */
    uint64_t cp_log_carry; /* log record bytes replayed at open: written since
                              the last checkpoint by an earlier process; they
                              count toward the next checkpoint until it is
                              taken */
    int64_t cp_time_us;
    uint64_t checkpoints, replayed;
    pthread_mutex_t cp_mu; /* one checkpoint at a time */

    pthread_t thread;
    bool has_thread, stopping;
};

/* ------------------------------------------------------------ encoding */

static void put_u64be(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* --------------------------------------------------------------- trees */

static size_t tree_pos(mf_engine *e, mf_tree_id id)
{
    size_t lo = 0, hi = e->ntrees;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (e->trees[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static tree_ent *tree_find(mf_engine *e, mf_tree_id id)
{
    pthread_rwlock_rdlock(&e->trees_lock);
    size_t i = tree_pos(e, id);
    tree_ent *t = i < e->ntrees && e->trees[i]->id == id ? e->trees[i] : NULL;
    pthread_rwlock_unlock(&e->trees_lock);
    return t;
}

mf_btree *mf_engine_tree(mf_engine *e, mf_tree_id id)
{
    tree_ent *t = tree_find(e, id);
    return t ? &t->bt : NULL;
}

int mf_engine_tree_measure(mf_engine *e, mf_tree_id id, mf_btree_usage *out, mf_error *err)
{
    mf_btree *t = mf_engine_tree(e, id);
    if (!t) {
        memset(out, 0, sizeof *out);
        return mf_error_set(err, MF_NamespaceNotFound, "no tree %llu", (unsigned long long)id);
    }
    return mf_btree_measure(t, out, err);
}

static int tree_add(mf_engine *e, mf_tree_id id, mf_pgno root, bool saved, mf_error *err)
{
    int rc = 0;
    pthread_rwlock_wrlock(&e->trees_lock);
    size_t i = tree_pos(e, id);
    if (i < e->ntrees && e->trees[i]->id == id)
        goto out; /* replay may create a tree twice */
    if (e->ntrees == e->cap_trees) {
        size_t cap = e->cap_trees ? e->cap_trees * 2 : 16;
        tree_ent **v = realloc(e->trees, cap * sizeof *v);
        if (!v) {
            rc = mf_error_oom(err);
            goto out;
        }
        e->trees = v;
        e->cap_trees = cap;
    }
    tree_ent *t = calloc(1, sizeof *t);
    if (!t) {
        rc = mf_error_oom(err);
        goto out;
    }
    t->id = id;
    t->bt.pg = e->pg;
    t->bt.root = root;
    t->saved_root = root;
    t->saved = saved;
    memmove(&e->trees[i + 1], &e->trees[i], (e->ntrees - i) * sizeof *e->trees);
    e->trees[i] = t;
    e->ntrees++;
    if (id >= atomic_load(&e->next_tree))
        atomic_store(&e->next_tree, id + 1);
out:
    pthread_rwlock_unlock(&e->trees_lock);
    return rc;
}

/* Drop tree `id`: free its pages, forget it, remember to drop its saved
 * root at the next checkpoint. */
static int tree_drop(mf_engine *e, mf_tree_id id, mf_error *err)
{
    tree_ent *t = tree_find(e, id);
    if (!t)
        return 0; /* replay may drop twice */
    int rc = mf_btree_drop(&t->bt, err);
    if (rc != 0)
        return rc;
    pthread_rwlock_wrlock(&e->trees_lock);
    size_t i = tree_pos(e, id);
    memmove(&e->trees[i], &e->trees[i + 1], (e->ntrees - i - 1) * sizeof *e->trees);
    e->ntrees--;
    if (e->ndropped == e->cap_dropped) {
        size_t cap = e->cap_dropped ? e->cap_dropped * 2 : 16;
        mf_tree_id *v = realloc(e->dropped, cap * sizeof *v);
        if (v) {
            e->dropped = v;
            e->cap_dropped = cap;
        }
    }
    if (e->ndropped < e->cap_dropped && t->saved)
        e->dropped[e->ndropped++] = id;
    pthread_rwlock_unlock(&e->trees_lock);
    mf_btree_release(&t->bt);
    free(t);
    return 0;
}

mf_tree_id mf_engine_new_tree_id(mf_engine *e)
{
    return atomic_fetch_add(&e->next_tree, 1);
}

/* ---------------------------------------------------------------- apply */

static int apply_one(mf_engine *e, const mf_op *op, mf_error *err)
{
    tree_ent *t;
    bool flag;
    switch (op->kind) {
    case MF_OP_CREATE_TREE:
        return tree_add(e, op->tree, 0, false, err);
    case MF_OP_DROP_TREE:
        return tree_drop(e, op->tree, err);
    case MF_OP_PUT:
    case MF_OP_DELETE:
        t = tree_find(e, op->tree);
        if (!t)
            return mf_error_set(err, MF_InternalError, "write to unknown tree %llu",
                                (unsigned long long)op->tree);
        if (op->kind == MF_OP_PUT)
            return mf_btree_put(&t->bt, op->key, op->klen, op->val, op->vlen, false, &flag, err);
        return mf_btree_delete(&t->bt, op->key, op->klen, &flag, err);
    }
    return mf_error_set(err, MF_InternalError, "unknown operation %d", (int)op->kind);
}

static size_t encoded_size(const mf_op *ops, size_t n)
{
    size_t s = 5;
    for (size_t i = 0; i < n; i++)
        s += 1 + 8 + 4 + ops[i].klen + 4 + ops[i].vlen;
    return s;
}

static void encode(const mf_op *ops, size_t n, uint8_t *p)
{
    uint32_t n32 = (uint32_t)n;
    *p++ = RECORD_VERSION;
    memcpy(p, &n32, 4);
    p += 4;
    for (size_t i = 0; i < n; i++) {
        uint32_t kl = (uint32_t)ops[i].klen, vl = (uint32_t)ops[i].vlen;
        *p++ = (uint8_t)ops[i].kind;
        memcpy(p, &ops[i].tree, 8);
        memcpy(p + 8, &kl, 4);
        p += 12;
        if (kl)
            memcpy(p, ops[i].key, kl);
        p += kl;
        memcpy(p, &vl, 4);
        p += 4;
        if (vl)
            memcpy(p, ops[i].val, vl);
        p += vl;
    }
}

/* Decode and apply one log record at replay. */
static int replay_record(void *arg, mf_lsn lsn, const uint8_t *rec, size_t len, mf_error *err)
{
    mf_engine *e = arg;
    const uint8_t *p = rec, *end = rec + len;
    (void)lsn;
    if (len < 5 || p[0] != RECORD_VERSION)
        return mf_error_set(err, MF_DataCorruption, "log record %llu has an unknown format",
                            (unsigned long long)lsn);
    uint32_t n = get_u32(p + 1);
    p += 5;
    for (uint32_t i = 0; i < n; i++) {
        mf_op op = {0};
        if (end - p < 13)
            goto bad;
        op.kind = (mf_op_kind)p[0];
        op.tree = get_u64(p + 1);
        op.klen = get_u32(p + 9);
        p += 13;
        if ((size_t)(end - p) < op.klen + 4)
            goto bad;
        op.key = p;
        p += op.klen;
        op.vlen = get_u32(p);
        p += 4;
        if ((size_t)(end - p) < op.vlen)
            goto bad;
        op.val = p;
        p += op.vlen;
        int rc = apply_one(e, &op, err);
        if (rc != 0)
            return rc;
    }
    e->replayed++;
    e->cp_log_carry += len;
    return 0;
bad:
    return mf_error_set(err, MF_DataCorruption, "log record %llu is malformed",
                        (unsigned long long)lsn);
}

/* Whether the log has grown, or enough space waits for a checkpoint to be
 * reused, to justify a checkpoint now.  The log counts by its records'
 * bytes before compression -- the keys and documents a replay would apply
 * again -- not by what it stores: a load of documents that compress well
 * logs little and would otherwise never checkpoint, and every reopen would
 * replay all of it.  Freed space counts because it is reusable only two
 * checkpoints later: deletes log little, and without this the file would
 * grow by everything they free. */
static bool checkpoint_due(mf_engine *e)
{
    mf_wal_stats ws;
    mf_wal_get_stats(e->wal, &ws);
    uint64_t pending = mf_pager_pending_pages(e->pg) * MF_PAGE_SIZE;
    /* Waiting space is worth a checkpoint at an eighth of the file (at
     * least 4 MiB), or half the log threshold on a large file. */
    uint64_t file = mf_pager_file_pages(e->pg) * MF_PAGE_SIZE;
    uint64_t space_due = file / 8 > (4u << 20) ? file / 8 : (4u << 20);
    if (space_due > e->opt.checkpoint_log_bytes / 2)
        space_due = e->opt.checkpoint_log_bytes / 2;
    pthread_mutex_lock(&e->state_mu);
    /* The log since the last checkpoint includes what was replayed at open:
     * else a server killed again and again before it wrote a threshold's
     * worth of log would never checkpoint, and every reopen would replay a
     * longer log. */
    bool due = ws.bytes_raw - e->cp_log_bytes + e->cp_log_carry >=
                   e->opt.checkpoint_log_bytes ||
               pending >= space_due;
    pthread_mutex_unlock(&e->state_mu);
    return due;
}

static int engine_failed(mf_engine *e, mf_error *err)
{
    return mf_error_set(err, MF_IllegalOperation,
                        "the storage engine refuses writes until the database is reopened: %s",
                        e->failed);
}

static void set_failed(mf_engine *e, const mf_error *cause)
{
    pthread_mutex_lock(&e->state_mu);
    if (!e->is_failed) {
        e->is_failed = true;
        snprintf(e->failed, sizeof e->failed, "%s", cause->msg);
        mf_log(MF_LOG_ERROR, "STORAGE", 22435, "engine", "writes refused from now on: %s",
               cause->msg);
    }
    pthread_mutex_unlock(&e->state_mu);
}

static bool is_failed(mf_engine *e)
{
    pthread_mutex_lock(&e->state_mu);
    bool f = e->is_failed;
    pthread_mutex_unlock(&e->state_mu);
    return f;
}

/* Pages one operation may allocate, besides its value's overflow run: a
 * copy of each page on its path (copy-on-write) and a split at each level
 * plus a new root, for a tree of up to OP_HEIGHT levels. */
#define OP_HEIGHT 10
#define OP_PAGES (2 * OP_HEIGHT + 2)
/* Cells longer than this go to overflow runs (btree.c keeps cells at most
 * 1000 bytes; a little less here is a safe over-estimate). */
#define OP_INLINE 900u

/* The most pages `ops` can allocate, and the longest run among them. */
static uint64_t ops_pages(const mf_op *ops, size_t n, uint32_t *max_run)
{
    uint64_t pages = 0;
    *max_run = 1;
    for (size_t i = 0; i < n; i++) {
        pages += OP_PAGES;
        if (ops[i].kind != MF_OP_PUT || ops[i].klen + ops[i].vlen <= OP_INLINE)
            continue;
        /* Either may go to a run; counting both over-estimates safely. */
        uint64_t runs[2] = {(ops[i].klen + MF_PAGE_SIZE - 1) / MF_PAGE_SIZE,
                            (ops[i].vlen + MF_PAGE_SIZE - 1) / MF_PAGE_SIZE};
        for (int j = 0; j < 2; j++) {
            pages += runs[j];
            if (runs[j] > *max_run)
                *max_run = (uint32_t)runs[j]; /* a record is < 48 MiB */
        }
    }
    return pages;
}

/* Whether the trees can take every op of a write: checked before any is
 * applied, because an op the B+tree refuses half way through a write
 * leaves the trees holding what the log never will, which fails the
 * engine.  A key or value out of the B+tree's bounds is refused here
 * instead, the engine still usable. */
static int ops_fit(const mf_op *ops, size_t n, mf_error *err)
{
    int rc = 0;
    /* (a delete of a key no tree can hold finds nothing: not checked) */
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (ops[i].kind == MF_OP_PUT)
            rc = mf_btree_check_sizes(ops[i].klen, ops[i].vlen, err);
    return rc;
}

int mf_engine_write(mf_engine *e, const mf_op *ops, size_t nops, mf_lsn *lsn, mf_error *err)
{
    int rc = ops_fit(ops, nops, err);
    if (rc != 0)
        return rc;
    size_t size = encoded_size(ops, nops);
    if (size > MF_WAL_MAX_RECORD)
        return mf_error_set(err, MF_BadValue, "a write of %zu bytes is too large", size);
    uint8_t *rec = malloc(size);
    if (!rec)
        return mf_error_oom(err);
    encode(ops, nops, rec);
    uint32_t max_run;
    uint64_t pages = ops_pages(ops, nops, &max_run);
    bool long_run = max_run > 1, paged = false, logged = false;

    if (long_run)
        pthread_mutex_lock(&e->long_run_mu);
    pthread_rwlock_rdlock(&e->apply_lock);
    if (is_failed(e)) {
        rc = engine_failed(e, err);
        goto out;
    }
    /* Space first, in the file and in the log: a full disk refuses the
     * write here, before any tree changes, and the engine stays usable. */
    if ((rc = mf_pager_reserve(e->pg, pages, max_run, err)) != 0)
        goto out;
    paged = true;
    if ((rc = mf_wal_reserve(e->wal, size, err)) != 0)
        goto out;
    logged = true;
    for (size_t i = 0; i < nops; i++) {
        if ((rc = apply_one(e, &ops[i], err)) != 0) {
            /* The trees may now hold what the log never will. */
            set_failed(e, err);
            goto out;
        }
    }
    if ((rc = mf_wal_append(e->wal, rec, size, lsn, err)) != 0)
        set_failed(e, err);
    logged = false; /* the append took the reservation over */
out:
    if (logged)
        mf_wal_unreserve(e->wal, size);
    if (paged)
        mf_pager_unreserve(e->pg, pages);
    pthread_rwlock_unlock(&e->apply_lock);
    if (long_run)
        pthread_mutex_unlock(&e->long_run_mu);
    free(rec);
    if (rc == 0) {
        /* Wake the checkpointer if the log has grown enough. */
        if (checkpoint_due(e))
            pthread_cond_signal(&e->state_cond);
    }
    return rc;
}

bool mf_engine_failure(mf_engine *e, char *why, size_t cap)
{
    pthread_mutex_lock(&e->state_mu);
    bool f = e->is_failed;
    if (f && why && cap)
        snprintf(why, cap, "%s", e->failed);
    pthread_mutex_unlock(&e->state_mu);
    return f;
}

mf_lsn mf_engine_last_lsn(mf_engine *e)
{
    return mf_wal_last_lsn(e->wal);
}

int mf_engine_sync(mf_engine *e, mf_lsn lsn, mf_error *err)
{
    int rc = mf_wal_commit(e->wal, lsn, err);
    if (rc != 0)
        set_failed(e, err);
    return rc;
}

/* ----------------------------------------------------------- checkpoint */

static int save_roots(mf_engine *e, mf_error *err)
{
    tree_ent *cat = tree_find(e, MF_CATALOG_TREE);
    uint8_t key[sizeof ROOT_PREFIX - 1 + 8];
    memcpy(key, ROOT_PREFIX, sizeof ROOT_PREFIX - 1);
    int rc;
    bool flag;
    /* The apply lock is held exclusively: nothing else touches the table. */
    for (size_t i = 0; i < e->ndropped; i++) {
        put_u64be(key + sizeof ROOT_PREFIX - 1, e->dropped[i]);
        if ((rc = mf_btree_delete(&cat->bt, key, sizeof key, &flag, err)) != 0)
            return rc;
    }
    e->ndropped = 0;
    for (size_t i = 0; i < e->ntrees; i++) {
        tree_ent *t = e->trees[i];
        /* A new tree is recorded even while empty: the log before this
         * checkpoint, which created it, is not replayed again. */
        if (t->id == MF_CATALOG_TREE || (t->saved && t->bt.root == t->saved_root))
            continue;
        put_u64be(key + sizeof ROOT_PREFIX - 1, t->id);
        if ((rc = mf_btree_put(&cat->bt, key, sizeof key, (const uint8_t *)&t->bt.root, 8, false,
                               &flag, err)) != 0)
            return rc;
        t->saved_root = t->bt.root;
        t->saved = true;
    }
    return 0;
}

static int checkpoint(mf_engine *e, mf_error *err)
{
    int rc;
    mf_checkpoint *cp = NULL;
    uint8_t user[MF_META_USER_SIZE] = {0};

    pthread_mutex_lock(&e->cp_mu);
    /* The freeze allocates (changed roots into the catalog, the free
     * list): promise it the pages first, so a full disk postpones the
     * checkpoint instead of failing the engine half way through. */
    pthread_rwlock_rdlock(&e->trees_lock);
    uint64_t cp_pages = OP_PAGES + e->ntrees / 16 + mf_pager_checkpoint_pages(e->pg);
    pthread_rwlock_unlock(&e->trees_lock);
    if ((rc = mf_pager_reserve(e->pg, cp_pages, 1, err)) != 0) {
        pthread_mutex_lock(&e->state_mu);
        if (!e->cp_no_space)
            mf_log(MF_LOG_WARNING, "STORAGE", 22438, "checkpointer",
                   "checkpoint postponed: %s", err->msg);
        e->cp_no_space = true;
        pthread_mutex_unlock(&e->state_mu);
        goto out;
    }
    /* The freeze: writers held off. */
    pthread_rwlock_wrlock(&e->apply_lock);
    if (is_failed(e)) {
        pthread_rwlock_unlock(&e->apply_lock);
        mf_pager_unreserve(e->pg, cp_pages);
        rc = engine_failed(e, err);
        goto out;
    }
    mf_lsn lsn = mf_wal_last_lsn(e->wal);
    rc = save_roots(e, err);
    if (rc == 0) {
        mf_pgno cat_root = tree_find(e, MF_CATALOG_TREE)->bt.root;
        uint64_t next = atomic_load(&e->next_tree);
        memcpy(user, &lsn, 8);
        memcpy(user + 8, &cat_root, 8);
        memcpy(user + 16, &next, 8);
        rc = mf_pager_checkpoint_freeze(e->pg, user, &cp, err);
    }
    pthread_rwlock_unlock(&e->apply_lock);
    mf_pager_unreserve(e->pg, cp_pages);
    if (rc != 0) {
        set_failed(e, err);
        goto out;
    }
    /* The flush, beside the writers. */
    if ((rc = mf_pager_checkpoint_write(e->pg, cp, err)) != 0) {
        set_failed(e, err);
        goto out;
    }
    mf_wal_stats ws;
    mf_wal_get_stats(e->wal, &ws);
    pthread_mutex_lock(&e->state_mu);
    e->prev_cp_lsn = e->last_cp_lsn;
    e->last_cp_lsn = lsn;
    e->cp_log_bytes = ws.bytes_raw;
    e->cp_log_carry = 0;
    e->cp_time_us = mf_clock_mono_us();
    e->checkpoints++;
    e->cp_no_space = false;
    mf_lsn droppable = e->prev_cp_lsn;
    pthread_mutex_unlock(&e->state_mu);
    /* Recovery may still fall back to the previous checkpoint: keep the log
     * after it. */
    rc = mf_wal_drop_through(e->wal, droppable, err);
out:
    pthread_mutex_unlock(&e->cp_mu);
    return rc;
}

int mf_engine_checkpoint(mf_engine *e, mf_error *err)
{
    return checkpoint(e, err);
}

static void *checkpointer(void *arg)
{
    mf_engine *e = arg;
    pthread_mutex_lock(&e->state_mu);
    while (!e->stopping) {
        struct timespec ts;
        mf_clock_deadline(CLOCK_MONOTONIC, 1000, &ts);
        pthread_cond_timedwait(&e->state_cond, &e->state_mu, &ts);
        if (e->stopping || e->is_failed)
            continue;
        pthread_mutex_unlock(&e->state_mu);
        bool by_volume = checkpoint_due(e);
        pthread_mutex_lock(&e->state_mu);
        bool by_time = mf_wal_last_lsn(e->wal) > e->last_cp_lsn &&
                       mf_clock_mono_us() - e->cp_time_us >=
                           (int64_t)e->opt.checkpoint_interval_ms * 1000;
        if (!by_volume && !by_time)
            continue;
        pthread_mutex_unlock(&e->state_mu);
        mf_error err;
        if (checkpoint(e, &err) != 0 && err.code != MF_OutOfDiskSpace)
            mf_log(MF_LOG_ERROR, "STORAGE", 22436, "checkpointer", "checkpoint failed: %s",
                   err.msg);
        pthread_mutex_lock(&e->state_mu);
    }
    pthread_mutex_unlock(&e->state_mu);
    return NULL;
}

/* --------------------------------------------------------------- catalog */

static void coll_free(mf_coll *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nidx; i++) {
        free((char *)c->idx[i].name);
        free((uint8_t *)c->idx[i].spec);
    }
    free(c->idx);
    free(c->options);
    free(c->name);
    pthread_rwlock_destroy(&c->lock);
    free(c);
}

/* Parse a catalog entry. */
static mf_coll *coll_decode(const char *name, const uint8_t *v, size_t len)
{
    mf_coll *c = calloc(1, sizeof *c);
    const uint8_t *p = v, *end = v + len;
    if (!c)
        return NULL;
    pthread_rwlock_init(&c->lock, NULL);
    c->name = strdup(name);
    if (!c->name || end - p < 12)
        goto bad;
    c->records = get_u64(p);
    c->options_len = get_u32(p + 8);
    p += 12;
    if ((size_t)(end - p) < c->options_len + 4)
        goto bad;
    c->options = malloc(c->options_len ? c->options_len : 1);
    if (!c->options)
        goto bad;
    memcpy(c->options, p, c->options_len);
    p += c->options_len;
    uint32_t n = get_u32(p);
    p += 4;
    c->idx = calloc(n ? n : 1, sizeof *c->idx);
    if (!c->idx)
        goto bad;
    for (uint32_t i = 0; i < n; i++) {
        if (end - p < 10)
            goto bad;
        mf_index_info *x = &c->idx[i];
        x->tree = get_u64(p);
        uint16_t nl;
        memcpy(&nl, p + 8, 2);
        p += 10;
        if ((size_t)(end - p) < (size_t)nl + 4)
            goto bad;
        char *nm = malloc((size_t)nl + 1);
        if (!nm)
            goto bad;
        memcpy(nm, p, nl);
        nm[nl] = '\0';
        x->name = nm;
        p += nl;
        x->spec_len = get_u32(p);
        p += 4;
        if ((size_t)(end - p) < x->spec_len)
            goto bad;
        uint8_t *sp = malloc(x->spec_len ? x->spec_len : 1);
        if (!sp)
            goto bad;
        memcpy(sp, p, x->spec_len);
        x->spec = sp;
        p += x->spec_len;
        c->nidx++;
    }
    /* then its flags, when it has any (an entry without them has none) */
    if (end - p >= 4) {
        c->flags = get_u32(p);
        p += 4;
    }
    return c;
bad:
    coll_free(c);
    return NULL;
}

/* Encode `c`'s entry; the caller frees the result. */
static uint8_t *coll_encode(const mf_coll *c, size_t *len)
{
    size_t n = 12 + c->options_len + 4 + (c->flags ? 4 : 0);
    for (size_t i = 0; i < c->nidx; i++)
        n += 10 + strlen(c->idx[i].name) + 4 + c->idx[i].spec_len;
    uint8_t *b = malloc(n), *p = b;
    if (!b)
        return NULL;
    uint32_t ol = (uint32_t)c->options_len, ni = (uint32_t)c->nidx;
    memcpy(p, &c->records, 8);
    memcpy(p + 8, &ol, 4);
    p += 12;
    memcpy(p, c->options, c->options_len);
    p += c->options_len;
    memcpy(p, &ni, 4);
    p += 4;
    for (size_t i = 0; i < c->nidx; i++) {
        uint16_t nl = (uint16_t)strlen(c->idx[i].name);
        uint32_t sl = (uint32_t)c->idx[i].spec_len;
        memcpy(p, &c->idx[i].tree, 8);
        memcpy(p + 8, &nl, 2);
        p += 10;
        memcpy(p, c->idx[i].name, nl);
        p += nl;
        memcpy(p, &sl, 4);
        p += 4;
        memcpy(p, c->idx[i].spec, sl);
        p += sl;
    }
    if (c->flags) {
        uint32_t f = c->flags;
        memcpy(p, &f, 4);
    }
    *len = n;
    return b;
}

static size_t coll_pos(mf_engine *e, const char *ns)
{
    size_t lo = 0, hi = e->ncolls;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(e->colls[mid]->name, ns) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

mf_coll *mf_engine_coll(mf_engine *e, const char *ns)
{
    size_t i = coll_pos(e, ns);
    return i < e->ncolls && strcmp(e->colls[i]->name, ns) == 0 ? e->colls[i] : NULL;
}

static int coll_insert(mf_engine *e, mf_coll *c, mf_error *err)
{
    if (e->ncolls == e->cap_colls) {
        size_t cap = e->cap_colls ? e->cap_colls * 2 : 16;
        mf_coll **v = realloc(e->colls, cap * sizeof *v);
        if (!v)
            return mf_error_oom(err);
        e->colls = v;
        e->cap_colls = cap;
    }
    size_t i = coll_pos(e, c->name);
    memmove(&e->colls[i + 1], &e->colls[i], (e->ncolls - i) * sizeof *e->colls);
    e->colls[i] = c;
    e->ncolls++;
    return 0;
}

static void coll_remove(mf_engine *e, const char *ns)
{
    size_t i = coll_pos(e, ns);
    if (i < e->ncolls && strcmp(e->colls[i]->name, ns) == 0) {
        memmove(&e->colls[i], &e->colls[i + 1], (e->ncolls - i - 1) * sizeof *e->colls);
        e->ncolls--;
    }
}

void mf_engine_coll_each(mf_engine *e, void (*fn)(mf_coll *c, void *arg), void *arg)
{
    for (size_t i = 0; i < e->ncolls; i++)
        fn(e->colls[i], arg);
}

/* "ns:<name>" in a caller's buffer. */
static size_t ns_key(const char *ns, uint8_t *buf, size_t cap)
{
    return (size_t)snprintf((char *)buf, cap, NS_PREFIX "%s", ns);
}

/* Load every collection from the catalog tree (at open). */
static int load_catalog(mf_engine *e, mf_error *err)
{
    mf_cursor cur;
    bool valid;
    int rc;
    mf_cursor_init(&cur, mf_engine_tree(e, MF_CATALOG_TREE));
    if ((rc = mf_cursor_seek(&cur, (const uint8_t *)NS_PREFIX, 3, false, &valid, err)) != 0)
        return rc;
    while (valid) {
        const uint8_t *k, *v;
        size_t kl, vl;
        mf_cursor_key(&cur, &k, &kl);
        if (kl < 3 || memcmp(k, NS_PREFIX, 3) != 0)
            break;
        mf_cursor_value(&cur, &v, &vl);
        char name[1024];
        snprintf(name, sizeof name, "%.*s", (int)(kl - 3), (const char *)k + 3);
        mf_coll *c = coll_decode(name, v, vl);
        if (!c)
            return mf_error_set(err, MF_DataCorruption, "catalog entry for %s is damaged", name);
        if ((rc = coll_insert(e, c, err)) != 0) {
            coll_free(c);
            return rc;
        }
        if ((rc = mf_cursor_next(&cur, &valid, err)) != 0)
            return rc;
    }
    return 0;
}

void mf_engine_catalog_lock(mf_engine *e, bool exclusive)
{
    if (exclusive)
        pthread_rwlock_wrlock(&e->catalog_lock);
    else
        pthread_rwlock_rdlock(&e->catalog_lock);
}

void mf_engine_catalog_unlock(mf_engine *e)
{
    pthread_rwlock_unlock(&e->catalog_lock);
}

/* mf_engine_write of `ops` and then `also`'s, as one record. */
static int write_also(mf_engine *e, const mf_op *ops, size_t n, const mf_op_list *also,
                      mf_lsn *lsn, mf_error *err)
{
    if (!also || also->n == 0)
        return mf_engine_write(e, ops, n, lsn, err);
    mf_op *all = malloc((n + also->n) * sizeof *all);
    if (!all)
        return mf_error_oom(err);
    memcpy(all, ops, n * sizeof *all);
    memcpy(all + n, also->ops, also->n * sizeof *all);
    int rc = mf_engine_write(e, all, n + also->n, lsn, err);
    free(all);
    return rc;
}

int mf_engine_coll_create(mf_engine *e, const char *ns, const uint8_t *options,
                          size_t options_len, unsigned flags, mf_coll **out,
                          const mf_op_list *also, mf_lsn *lsn, mf_error *err)
{
    int rc;
    if (mf_engine_coll(e, ns))
        return mf_error_set(err, MF_NamespaceExists, "Collection %s already exists.", ns);
    mf_coll *c = calloc(1, sizeof *c);
    if (!c)
        return mf_error_oom(err);
    pthread_rwlock_init(&c->lock, NULL);
    c->name = strdup(ns);
    c->options = malloc(options_len ? options_len : 1);
    if (!c->name || !c->options) {
        coll_free(c);
        return mf_error_oom(err);
    }
    if (options_len)
        memcpy(c->options, options, options_len);
    c->options_len = options_len;
    c->flags = flags;
    c->records = mf_engine_new_tree_id(e);

    size_t vlen;
    uint8_t *val = coll_encode(c, &vlen), key[1100];
    size_t klen = ns_key(ns, key, sizeof key);
    mf_op ops[2] = {
        {.kind = MF_OP_CREATE_TREE, .tree = c->records},
        {.kind = MF_OP_PUT, .tree = MF_CATALOG_TREE, .key = key, .klen = klen, .val = val,
         .vlen = vlen},
    };
    rc = val ? write_also(e, ops, 2, also, lsn, err) : mf_error_oom(err);
    free(val);
    if (rc == 0)
        rc = coll_insert(e, c, err);
    if (rc != 0) {
        coll_free(c);
        return rc;
    }
    if (out)
        *out = c;
    return 0;
}

/* The ops that drop `c` (its catalog entry at `key`, every tree): n of
 * them at `ops`. */
static size_t drop_ops(const mf_coll *c, const uint8_t *key, size_t klen, mf_op *ops)
{
    ops[0] = (mf_op){.kind = MF_OP_DELETE, .tree = MF_CATALOG_TREE, .key = key, .klen = klen};
    ops[1] = (mf_op){.kind = MF_OP_DROP_TREE, .tree = c->records};
    for (size_t i = 0; i < c->nidx; i++)
        ops[2 + i] = (mf_op){.kind = MF_OP_DROP_TREE, .tree = c->idx[i].tree};
    return 2 + c->nidx;
}

int mf_engine_coll_drop(mf_engine *e, const char *ns, const mf_op_list *also, mf_lsn *lsn,
                        mf_error *err)
{
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c)
        return mf_error_set(err, MF_NamespaceNotFound, "ns not found: %s", ns);
    mf_op *ops = calloc(2 + c->nidx, sizeof *ops);
    if (!ops)
        return mf_error_oom(err);
    uint8_t key[1100];
    size_t n = drop_ops(c, key, ns_key(ns, key, sizeof key), ops);
    int rc = write_also(e, ops, n, also, lsn, err);
    free(ops);
    if (rc != 0)
        return rc;
    coll_remove(e, ns);
    coll_free(c);
    return 0;
}

int mf_engine_coll_rename(mf_engine *e, const char *from, const char *to, bool drop_target,
                          const mf_op_list *also, mf_lsn *lsn, mf_error *err)
{
    mf_coll *c = mf_engine_coll(e, from);
    if (!c)
        return mf_error_set(err, MF_NamespaceNotFound, "ns not found: %s", from);
    mf_coll *target = mf_engine_coll(e, to);
    if (target && !drop_target)
        return mf_error_set(err, MF_NamespaceExists, "target namespace exists");
    size_t vlen;
    uint8_t *val = coll_encode(c, &vlen), k1[1100], k2[1100];
    mf_op *ops = calloc(2 + (target ? 2 + target->nidx : 0), sizeof *ops);
    if (!val || !ops) {
        free(val);
        free(ops);
        return mf_error_oom(err);
    }
    size_t l1 = ns_key(from, k1, sizeof k1), l2 = ns_key(to, k2, sizeof k2), n = 0;
    /* the target's entry is at the key the renamed one takes: dropped first */
    if (target)
        n = drop_ops(target, k2, l2, ops);
    ops[n++] = (mf_op){.kind = MF_OP_DELETE, .tree = MF_CATALOG_TREE, .key = k1, .klen = l1};
    ops[n++] = (mf_op){.kind = MF_OP_PUT, .tree = MF_CATALOG_TREE, .key = k2, .klen = l2,
                       .val = val, .vlen = vlen};
    int rc = write_also(e, ops, n, also, lsn, err);
    free(val);
    free(ops);
    if (rc != 0)
        return rc;
    char *nm = strdup(to);
    if (!nm)
        return mf_error_oom(err);
    if (target) {
        coll_remove(e, to);
        coll_free(target);
    }
    coll_remove(e, from);
    free(c->name);
    c->name = nm;
    return coll_insert(e, c, err);
}

const char *mf_coll_name(const mf_coll *c) { return c->name; }
bool mf_coll_pending(const mf_coll *c) { return c->flags & MF_COLL_PENDING; }

int mf_engine_colls_settle(mf_engine *e, mf_coll *const *cs, size_t n, const mf_op *ops,
                           size_t nops, mf_lsn *lsn, mf_error *err)
{
    if (n == 0)
        return mf_engine_write(e, ops, nops, lsn, err);
    mf_op *all = malloc((nops + n) * sizeof *all);
    uint8_t **vals = calloc(n, sizeof *vals);
    uint8_t(*keys)[1100] = malloc(n * sizeof *keys);
    int rc = all && vals && keys ? 0 : mf_error_oom(err);
    /* (other collections' index changes write the catalog tree too) */
    pthread_mutex_lock(&e->catalog_tree_mu);
    for (size_t i = 0; rc == 0 && i < n; i++)
        cs[i]->flags &= ~(unsigned)MF_COLL_PENDING;
    if (rc == 0 && nops)
        memcpy(all, ops, nops * sizeof *all);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t vl, kl = ns_key(cs[i]->name, keys[i], sizeof keys[i]);
        if (!(vals[i] = coll_encode(cs[i], &vl)))
            rc = mf_error_oom(err);
        else
            all[nops + i] = (mf_op){.kind = MF_OP_PUT, .tree = MF_CATALOG_TREE, .key = keys[i],
                                    .klen = kl, .val = vals[i], .vlen = vl};
    }
    if (rc == 0)
        rc = mf_engine_write(e, all, nops + n, lsn, err);
    for (size_t i = 0; rc != 0 && i < n; i++)
        cs[i]->flags |= MF_COLL_PENDING; /* not settled (all were pending) */
    pthread_mutex_unlock(&e->catalog_tree_mu);
    for (size_t i = 0; vals && i < n; i++)
        free(vals[i]);
    free(vals);
    free(keys);
    free(all);
    return rc;
}
mf_tree_id mf_coll_records(const mf_coll *c) { return c->records; }
size_t mf_coll_index_count(const mf_coll *c) { return c->nidx; }
const mf_index_info *mf_coll_index(const mf_coll *c, size_t i) { return &c->idx[i]; }

void mf_coll_options(const mf_coll *c, const uint8_t **options, size_t *len)
{
    *options = c->options;
    *len = c->options_len;
}

void mf_coll_lock(mf_coll *c, bool exclusive)
{
    if (exclusive)
        pthread_rwlock_wrlock(&c->lock);
    else
        pthread_rwlock_rdlock(&c->lock);
}

void mf_coll_unlock(mf_coll *c)
{
    pthread_rwlock_unlock(&c->lock);
}

/* Log `c`'s entry, plus `extra` (a tree create or drop), then `also`. */
static int write_entry(mf_engine *e, mf_coll *c, const mf_op *extra, const mf_op_list *also,
                       mf_lsn *lsn, mf_error *err)
{
    size_t vlen;
    uint8_t *val = coll_encode(c, &vlen), key[1100];
    if (!val)
        return mf_error_oom(err);
    size_t klen = ns_key(c->name, key, sizeof key);
    mf_op put = {.kind = MF_OP_PUT, .tree = MF_CATALOG_TREE, .key = key, .klen = klen,
                 .val = val, .vlen = vlen};
    mf_op ops[2] = {extra ? *extra : put, put};
    /* Other collections' index changes write the catalog tree too. */
    pthread_mutex_lock(&e->catalog_tree_mu);
    int rc = write_also(e, ops, extra ? 2 : 1, also, lsn, err);
    pthread_mutex_unlock(&e->catalog_tree_mu);
    free(val);
    return rc;
}

int mf_coll_index_create(mf_engine *e, mf_coll *c, const char *name, const uint8_t *spec,
                         size_t spec_len, mf_tree_id *tree, mf_lsn *lsn, mf_error *err)
{
    for (size_t i = 0; i < c->nidx; i++)
        if (strcmp(c->idx[i].name, name) == 0)
            return mf_error_set(err, MF_IndexAlreadyExists, "index %s already exists", name);
    mf_index_info *v = realloc(c->idx, (c->nidx + 1) * sizeof *v);
    if (!v)
        return mf_error_oom(err);
    c->idx = v;
    mf_index_info *x = &c->idx[c->nidx];
    uint8_t *sp = malloc(spec_len ? spec_len : 1);
    char *nm = strdup(name);
    if (!sp || !nm) {
        free(sp);
        free(nm);
        return mf_error_oom(err);
    }
    if (spec_len)
        memcpy(sp, spec, spec_len);
    *x = (mf_index_info){.name = nm, .tree = mf_engine_new_tree_id(e), .spec = sp,
                         .spec_len = spec_len};
    c->nidx++;
    mf_op create = {.kind = MF_OP_CREATE_TREE, .tree = x->tree};
    int rc = write_entry(e, c, &create, NULL, lsn, err);
    if (rc != 0) {
        c->nidx--;
        free(nm);
        free(sp);
        return rc;
    }
    if (tree)
        *tree = x->tree;
    return 0;
}

int mf_coll_index_drop(mf_engine *e, mf_coll *c, const char *name, const mf_op_list *also,
                       mf_lsn *lsn, mf_error *err)
{
    size_t i;
    for (i = 0; i < c->nidx; i++)
        if (strcmp(c->idx[i].name, name) == 0)
            break;
    if (i == c->nidx)
        return mf_error_set(err, MF_IndexNotFound, "index not found with name [%s]", name);
    mf_index_info gone = c->idx[i];
    memmove(&c->idx[i], &c->idx[i + 1], (c->nidx - i - 1) * sizeof *c->idx);
    c->nidx--;
    mf_op drop = {.kind = MF_OP_DROP_TREE, .tree = gone.tree};
    int rc = write_entry(e, c, &drop, also, lsn, err);
    if (rc != 0) {
        memmove(&c->idx[i + 1], &c->idx[i], (c->nidx - i) * sizeof *c->idx);
        c->idx[i] = gone;
        c->nidx++;
        return rc;
    }
    free((char *)gone.name);
    free((uint8_t *)gone.spec);
    return 0;
}

int mf_coll_index_set_specs(mf_engine *e, mf_coll *c, const mf_index_spec_set *sets, size_t n,
                            const mf_op_list *also, mf_lsn *lsn, mf_error *err)
{
    /* What to put back if the write fails: each index's place and spec. */
    struct undo {
        size_t at;
        const uint8_t *spec;
        size_t len;
    } *undo = malloc((n ? n : 1) * sizeof *undo);
    size_t done = 0;
    int rc = 0;
    if (!undo)
        return mf_error_oom(err);
    for (size_t k = 0; rc == 0 && k < n; k++) {
        for (undo[k].at = 0; undo[k].at < c->nidx; undo[k].at++)
            if (strcmp(c->idx[undo[k].at].name, sets[k].name) == 0)
                break;
        if (undo[k].at == c->nidx)
            rc = mf_error_set(err, MF_IndexNotFound, "index not found with name [%s]", sets[k].name);
    }
    /* Swap every spec in, then write the collection's entry once. */
    for (; rc == 0 && done < n; done++) {
        uint8_t *sp = malloc(sets[done].len ? sets[done].len : 1);
        if (!sp) {
            rc = mf_error_oom(err);
            break;
        }
        if (sets[done].len)
            memcpy(sp, sets[done].spec, sets[done].len);
        mf_index_info *ix = &c->idx[undo[done].at];
        undo[done].spec = ix->spec;
        undo[done].len = ix->spec_len;
        ix->spec = sp;
        ix->spec_len = sets[done].len;
    }
    if (rc == 0)
        rc = write_entry(e, c, NULL, also, lsn, err);
    /* Undo in reverse on failure, so that an index named twice gets its
     * first spec back; else free the replaced ones. */
    while (done-- > 0) {
        mf_index_info *ix = &c->idx[undo[done].at];
        if (rc != 0) {
            free((uint8_t *)ix->spec);
            ix->spec = undo[done].spec;
            ix->spec_len = undo[done].len;
        } else {
            free((uint8_t *)undo[done].spec);
        }
    }
    free(undo);
    return rc;
}

int mf_coll_index_set_spec(mf_engine *e, mf_coll *c, const char *name, const uint8_t *spec,
                           size_t spec_len, const mf_op_list *also, mf_lsn *lsn, mf_error *err)
{
    mf_index_spec_set one = {name, spec, spec_len};
    return mf_coll_index_set_specs(e, c, &one, 1, also, lsn, err);
}

int mf_coll_set_options(mf_engine *e, mf_coll *c, const uint8_t *options, size_t options_len,
                        const mf_op_list *also, mf_lsn *lsn, mf_error *err)
{
    uint8_t *o = malloc(options_len ? options_len : 1);
    if (!o)
        return mf_error_oom(err);
    if (options_len)
        memcpy(o, options, options_len);
    uint8_t *old = c->options;
    size_t old_len = c->options_len;
    c->options = o;
    c->options_len = options_len;
    int rc = write_entry(e, c, NULL, also, lsn, err);
    if (rc != 0) {
        c->options = old;
        c->options_len = old_len;
        free(o);
        return rc;
    }
    free(old);
    return 0;
}

/* ----------------------------------------------------------- open, close */

/* Load every "root:" entry of the catalog into the tree table. */
static int load_roots(mf_engine *e, mf_error *err)
{
    mf_cursor cur;
    bool valid;
    int rc;
    mf_cursor_init(&cur, mf_engine_tree(e, MF_CATALOG_TREE));
    if ((rc = mf_cursor_seek(&cur, (const uint8_t *)ROOT_PREFIX, 5, false, &valid, err)) != 0)
        return rc;
    while (valid) {
        const uint8_t *k, *v;
        size_t kl, vl;
        mf_cursor_key(&cur, &k, &kl);
        if (kl != 13 || memcmp(k, ROOT_PREFIX, 5) != 0)
            break;
        mf_cursor_value(&cur, &v, &vl);
        if (vl != 8)
            return mf_error_set(err, MF_DataCorruption, "catalog root entry is damaged");
        mf_tree_id id = 0;
        for (int i = 0; i < 8; i++)
            id = id << 8 | k[5 + i];
        if ((rc = tree_add(e, id, get_u64(v), true, err)) != 0)
            return rc;
        if ((rc = mf_cursor_next(&cur, &valid, err)) != 0)
            return rc;
    }
    return 0;
}

static void engine_free(mf_engine *e)
{
    for (size_t i = 0; i < e->ntrees; i++) {
        mf_btree_release(&e->trees[i]->bt);
        free(e->trees[i]);
    }
    free(e->trees);
    free(e->dropped);
    for (size_t i = 0; i < e->ncolls; i++)
        coll_free(e->colls[i]);
    free(e->colls);
    pthread_rwlock_destroy(&e->trees_lock);
    pthread_rwlock_destroy(&e->catalog_lock);
    pthread_rwlock_destroy(&e->apply_lock);
    pthread_mutex_destroy(&e->long_run_mu);
    pthread_mutex_destroy(&e->catalog_tree_mu);
    pthread_mutex_destroy(&e->state_mu);
    pthread_mutex_destroy(&e->cp_mu);
    pthread_cond_destroy(&e->state_cond);
    mf_os_faults_free(e->own_faults);
    free(e->dir);
    free(e);
}

int mf_engine_open(const char *dir, const mf_engine_options *opt, mf_engine **out,
                   mf_error *err)
{
    int rc;
    char path[4096];
    uint8_t user[MF_META_USER_SIZE];
    uint64_t gen;
    mf_engine *e = calloc(1, sizeof *e);
    if (!e || !(e->dir = strdup(dir))) {
        free(e);
        return mf_error_oom(err);
    }
    if (opt)
        e->opt = *opt;
    /* Every file of the engine checks one fault table: the caller's, or
     * its own (os.h). */
    if (!e->opt.faults && !(e->opt.faults = e->own_faults = mf_os_faults_new())) {
        free(e->dir);
        free(e);
        return mf_error_oom(err);
    }
    e->opt.wal.faults = e->opt.faults;
    if (!e->opt.checkpoint_log_bytes)
        e->opt.checkpoint_log_bytes = 64u << 20;
    if (!e->opt.checkpoint_interval_ms)
        e->opt.checkpoint_interval_ms = 60000;
    pthread_rwlock_init(&e->trees_lock, NULL);
    pthread_rwlock_init(&e->catalog_lock, NULL);
    pthread_rwlock_init(&e->apply_lock, NULL);
    pthread_mutex_init(&e->long_run_mu, NULL);
    pthread_mutex_init(&e->catalog_tree_mu, NULL);
    pthread_mutex_init(&e->state_mu, NULL);
    pthread_mutex_init(&e->cp_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->state_cond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&e->next_tree, MF_CATALOG_TREE + 1);

    mf_pager_options popt = {.reserve_bytes = e->opt.reserve_bytes,
                             .huge_pages = e->opt.huge_pages,
                             .huge_max_bytes = e->opt.huge_max_bytes,
                             .faults = e->opt.faults};
    snprintf(path, sizeof path, "%s/data.mf", dir);
    if ((rc = mf_pager_open(path, &popt, &e->pg, user, &gen, err)) != 0)
        goto fail;
    mf_lsn cp_lsn = get_u64(user);
    mf_pgno cat_root = get_u64(user + 8);
    uint64_t next = get_u64(user + 16);
    if ((rc = tree_add(e, MF_CATALOG_TREE, cat_root, true, err)) != 0 ||
        (rc = load_roots(e, err)) != 0)
        goto fail;
    if (next > atomic_load(&e->next_tree))
        atomic_store(&e->next_tree, next);
    e->last_cp_lsn = e->prev_cp_lsn = cp_lsn;

    if ((rc = mf_wal_open(dir, &e->opt.wal, cp_lsn, replay_record, e, &e->wal, err)) != 0 ||
        (rc = load_catalog(e, err)) != 0)
        goto fail;
    mf_wal_stats ws;
    mf_wal_get_stats(e->wal, &ws);
    e->cp_log_bytes = ws.bytes_raw;
    e->cp_time_us = mf_clock_mono_us();
    if (e->replayed)
        mf_log(MF_LOG_INFO, "STORAGE", 22430, "engine",
               "recovered %s: checkpoint generation %llu, %llu log records replayed", dir,
               (unsigned long long)gen, (unsigned long long)e->replayed);
    if (!e->opt.no_background) {
        if (pthread_create(&e->thread, NULL, checkpointer, e) != 0) {
            rc = mf_error_set(err, MF_InternalError, "cannot start the checkpoint thread");
            goto fail;
        }
        e->has_thread = true;
    }
    *out = e;
    return 0;

fail:
    if (e->wal)
        mf_wal_abandon(e->wal);
    mf_pager_close(e->pg);
    engine_free(e);
    return rc;
}

mf_os_faults *mf_engine_faults(mf_engine *e)
{
    return e->opt.faults;
}

static void stop_thread(mf_engine *e)
{
    if (!e->has_thread)
        return;
    pthread_mutex_lock(&e->state_mu);
    e->stopping = true;
    pthread_cond_broadcast(&e->state_cond);
    pthread_mutex_unlock(&e->state_mu);
    pthread_join(e->thread, NULL);
    e->has_thread = false;
}

int mf_engine_close(mf_engine *e, mf_error *err)
{
    int rc = 0;
    mf_error tmp;
    stop_thread(e);
    if (!is_failed(e)) {
        /* Commit what is buffered first, then checkpoint so the next open
         * replays nothing. */
        rc = mf_wal_commit(e->wal, mf_wal_last_lsn(e->wal), err);
        if (rc == 0)
            rc = checkpoint(e, err);
    }
    if (mf_wal_close(e->wal, rc ? &tmp : err) != 0 && rc == 0)
        rc = err->code;
    mf_pager_close(e->pg);
    engine_free(e);
    return rc;
}

void mf_engine_abandon(mf_engine *e)
{
    stop_thread(e);
    mf_wal_abandon(e->wal);
    mf_pager_close(e->pg);
    engine_free(e);
}

void mf_engine_get_stats(mf_engine *e, mf_engine_stats *out)
{
    mf_pager_get_stats(e->pg, &out->pager);
    mf_wal_get_stats(e->wal, &out->wal);
    pthread_mutex_lock(&e->state_mu);
    out->checkpoints = e->checkpoints;
    out->checkpoint_lsn = e->last_cp_lsn;
    out->replayed = e->replayed;
    pthread_mutex_unlock(&e->state_mu);
}
