/*
 * txn.c -- multi-document transactions of a replica set (issue 47,
 * docs/transactions.md): snapshots, write sets, the write-lock table,
 * and commit as one engine write.
 *
 * The trees hold the newest committed state and are changed in place, so
 * versions live here, beside them, in memory:
 *
 *   the sequence   every write through write.c takes the next number,
 *                  with its collection lock held exclusively; a
 *                  transaction's snapshot is the number when it began
 *                  (writes numbered after it are not its to see);
 *   the versions   while any transaction is open, each write keeps the
 *                  record's before-image under its number: a transaction
 *                  that began earlier reads that instead of the tree;
 *   the write set  a transaction's own writes (RecordId -> new document
 *                  or deleted), applied to no tree before commit;
 *   the locks      (collection, RecordId) and (unique index, key) -> the
 *                  transaction that wrote them and has not ended.
 *
 * A transaction writing a record another open transaction holds, or one
 * written after its snapshot, fails at once with WriteConflict.  A write
 * outside transactions that meets a record or key a transaction holds
 * waits for it, as mongod's does, when its command has written nothing
 * yet (the command is refused whole and run again by the dispatcher);
 * otherwise it goes on and marks that transaction killed: its next
 * statement or its commit fails (NoSuchTransaction, which drivers retry).
 *
 * Everything here is under the manager's mutex; it is taken after the
 * collection locks (a reader's view asks it per row).  The versions and
 * the lock table are emptied whenever no transaction is open; while one
 * is, they keep what the writes of its lifetime left (bounded by
 * transactionLifetimeLimitSeconds).
 */
#include "coll.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

/* ------------------------------------------------ a map of RecordIds */

/* (tree, rid) -> value, open addressing; values are never removed one by
 * one (a lock released is a value cleared), the map is emptied whole. */
typedef struct rslot {
    mf_tree_id tree;
    uint64_t rid;
    size_t val;
    bool used;
} rslot;

typedef struct rmap {
    rslot *v;
    size_t n, cap;
} rmap;

static size_t rhash(mf_tree_id tree, uint64_t rid, size_t cap)
{
    uint64_t h = (rid ^ (tree * 0xC2B2AE3D27D4EB4Full)) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

static size_t *rmap_get(const rmap *m, mf_tree_id tree, uint64_t rid)
{
    if (!m->cap)
        return NULL;
    for (size_t h = rhash(tree, rid, m->cap);; h = (h + 1) & (m->cap - 1)) {
        rslot *s = &m->v[h];
        if (!s->used)
            return NULL;
        if (s->tree == tree && s->rid == rid)
            return &s->val;
    }
}

/* Double the table (rehashing every entry); -1 out of memory. */
static int rmap_grow(rmap *m)
{
    size_t cap = m->cap ? 2 * m->cap : 64;
    rslot *v = calloc(cap, sizeof *v);
    if (!v)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->v[i].used)
            continue;
        size_t h = rhash(m->v[i].tree, m->v[i].rid, cap);
        while (v[h].used)
            h = (h + 1) & (cap - 1);
        v[h] = m->v[i];
    }
    free(m->v);
    m->v = v;
    m->cap = cap;
    return 0;
}

/* The value of (tree, rid), entered with 0 when absent; NULL out of
 * memory.  The map grows only for a new entry: a pointer another get
 * gave stays good while that entry is only read or set. */
static size_t *rmap_slot(rmap *m, mf_tree_id tree, uint64_t rid)
{
    size_t *have = rmap_get(m, tree, rid);
    if (have)
        return have;
    if ((m->n + 1) * 2 > m->cap && rmap_grow(m) != 0)
        return NULL;
    for (size_t h = rhash(tree, rid, m->cap);; h = (h + 1) & (m->cap - 1)) {
        rslot *s = &m->v[h];
        if (!s->used) {
            *s = (rslot){tree, rid, 0, true};
            m->n++;
            return &s->val;
        }
        if (s->tree == tree && s->rid == rid)
            return &s->val;
    }
}

static int rmap_put(rmap *m, mf_tree_id tree, uint64_t rid, size_t val)
{
    size_t *slot = rmap_slot(m, tree, rid);
    if (!slot)
        return -1;
    *slot = val;
    return 0;
}

static void rmap_clear(rmap *m)
{
    free(m->v);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------ the state */

/* A record of a write set: its collection (an index into `colls`), the
 * RecordId, and the document it gets (NULL: deleted). */
typedef struct wrec {
    size_t coll;
    uint64_t rid;
    bson_t *doc;
} wrec;

typedef struct wcoll {
    char *ns;
    mf_tree_id tree;
} wcoll;

/* A before-image: the record as it was before write number `seq` (NULL:
 * absent), that write's oplog ts (0: it logged none), and the older
 * version of the same record (-1: none). */
typedef struct version {
    mf_tree_id tree;
    uint64_t rid;
    uint64_t seq;
    uint64_t ts;
    uint8_t *before;  /* the document's bytes (malloc'd), or NULL */
    uint32_t blen;
    ptrdiff_t older;
} version;

/* `v`'s before-image as a document (borrowing its bytes); false: absent. */
static bool version_doc(const version *v, bson_t *out)
{
    return v->before && bson_init_static(out, v->before, v->blen);
}

/* A unique key a transaction's write set holds. */
typedef struct keylock {
    mf_tree_id index;
    uint8_t *key;
    size_t klen;
    mf_cl_txn *owner;
    uint64_t rid;
} keylock;

struct mf_cl_txn {
    mf_cl_txns *m;
    uint64_t id;          /* never reused (a pointer may be) */
    /* documents of the write set replaced during the running statement:
     * a caller may still hold one it read (mf_cl_read_record) */
    bson_t **retired;
    size_t nretired;
    uint64_t snap;        /* writes numbered above it are not seen */
    uint64_t snap_ts;     /* a read at a cluster time (mf_cl_snapshot_begin):
                             writes logged after it are not seen; 0: none */
    bool killed;          /* a write outside took what it holds */
    wrec *w;
    size_t nw, capw;
    rmap wmap;            /* (tree, rid) -> index in w, + 1 */
    wcoll *colls;
    size_t ncolls;
    size_t bytes;         /* of the write set's documents */
    mf_read_view view;
    mf_cl_txn *next;      /* the open transactions */
};

/* When a unique key last came or went (while a transaction was open):
 * a transaction may not add a key whose presence changed after its
 * snapshot, as WiredTiger's update chain of that key would refuse it. */
typedef struct keyver {
    mf_tree_id index;
    uint8_t *key;
    size_t klen;
    uint64_t seq;
} keyver;

struct mf_cl_txns {
    pthread_mutex_t mu;
    int64_t size_limit;   /* transactionSizeLimitBytes: of a write set's documents */
    pthread_cond_t ended; /* a transaction ended or was killed */
    uint64_t next_id;
    size_t gc_at;         /* versions kept past which the next end collects */
    keyver *kvers;
    size_t nkvers, capkvers;
    size_t *kvslot;       /* kver_find's hash table: positions + 1 */
    size_t kvcap, kvn;
    uint64_t seq;         /* the last write's number */
    size_t open;          /* transactions open */
    mf_cl_txn *list;
    rmap locks;           /* (tree, rid) -> the owner (mf_cl_txn *), 0: none */
    rmap vmap;            /* (tree, rid) -> its newest version, + 1 */
    version *vers;
    size_t nvers, capvers;
    keylock *keys;
    size_t nkeys, capkeys;
    rmap reserved;        /* (tree, 0) -> the largest RecordId a write set took */
    /* The history window for reads at a cluster time: versions are kept
     * without open transactions too, for `window_s` seconds and at most
     * about `budget` bytes; a read before `history_from` (an oplog ts) may
     * miss versions and is refused. */
    bool history;
    int64_t window_s;
    size_t budget;
    size_t vbytes;        /* what the versions kept take, roughly */
    size_t gc_bytes;      /* past which a write collects (>= budget) */
    uint64_t history_from;
};

/* What a version takes beyond its document: its entry, its map slot (the
 * map is at most half full) and the copy's allocation. */
#define VERSION_COST (sizeof(version) + 2 * sizeof(rslot) + 16)

static _Thread_local mf_cl_txn *bound;

int mf_cl_txns_open(mf_cl_txns **out, mf_error *err)
{
    mf_cl_txns *m = calloc(1, sizeof *m);
    if (!m)
        return mf_error_oom(err);
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->ended, NULL);
    m->gc_at = 1024;
    m->size_limit = INT64_MAX;
    m->budget = m->gc_bytes = MF_CL_HISTORY_BUDGET;
    *out = m;
    return 0;
}

/* Forget the versions and locks (mutex held; no transaction open). */
static void forget_all(mf_cl_txns *m)
{
    for (size_t i = 0; i < m->nvers; i++) {
        if (m->vers[i].ts > m->history_from) /* reads before it lose what it kept */
            m->history_from = m->vers[i].ts;
        free(m->vers[i].before);
    }
    free(m->vers);
    m->vers = NULL;
    m->nvers = m->capvers = 0;
    for (size_t i = 0; i < m->nkeys; i++)
        free(m->keys[i].key);
    free(m->keys);
    for (size_t i = 0; i < m->nkvers; i++)
        free(m->kvers[i].key);
    free(m->kvers);
    m->kvers = NULL;
    m->nkvers = m->capkvers = 0;
    free(m->kvslot);
    m->kvslot = NULL;
    m->kvcap = m->kvn = 0;
    m->keys = NULL;
    m->nkeys = m->capkeys = 0;
    rmap_clear(&m->vmap);
    rmap_clear(&m->locks);
    m->gc_at = 1024;
    m->vbytes = 0;
}

static void free_retired(mf_cl_txn *t)
{
    for (size_t i = 0; i < t->nretired; i++)
        bson_destroy(t->retired[i]);
    free(t->retired);
    t->retired = NULL;
    t->nretired = 0;
}

static void txn_free(mf_cl_txn *t)
{
    free_retired(t);
    for (size_t i = 0; i < t->nw; i++)
        if (t->w[i].doc)
            bson_destroy(t->w[i].doc);
    free(t->w);
    for (size_t i = 0; i < t->ncolls; i++)
        free(t->colls[i].ns);
    free(t->colls);
    rmap_clear(&t->wmap);
    free(t);
}

void mf_cl_txns_close(mf_cl_txns *m)
{
    if (!m)
        return;
    while (m->list) {
        mf_cl_txn *t = m->list;
        m->list = t->next;
        txn_free(t);
    }
    forget_all(m);
    rmap_clear(&m->reserved);
    pthread_cond_destroy(&m->ended);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

/* -------------------------------------------------------------- views */

/* Whether `t`'s snapshot does not see the write that left version `v`:
 * numbered after it, or, for a read at a cluster time, logged after it (a
 * write that logged nothing is seen: no such read reads its collection). */
static bool after_snapshot(const mf_cl_txn *t, const version *v)
{
    return t->snap_ts ? v->ts > t->snap_ts : v->seq > t->snap;
}

/* The oldest version of (tree, rid) `t`'s snapshot does not see: the
 * before-image it reads.  NULL when the tree's is the one. */
static const version *visible_version(const mf_cl_txns *m, mf_tree_id tree, uint64_t rid,
                                      const mf_cl_txn *t)
{
    size_t *head = rmap_get(&m->vmap, tree, rid);
    const version *seen = NULL;
    for (ptrdiff_t i = head ? (ptrdiff_t)*head - 1 : -1; i >= 0; i = m->vers[i].older) {
        if (!after_snapshot(t, &m->vers[i]))
            break;
        seen = &m->vers[i];
    }
    return seen;
}

static wrec *wfind(const mf_cl_txn *t, mf_tree_id tree, uint64_t rid)
{
    size_t *i = rmap_get(&t->wmap, tree, rid);
    return i ? &t->w[*i - 1] : NULL;
}

static bool view_hides(void *arg, const mf_coll *c, uint64_t rid)
{
    mf_cl_txn *t = arg;
    mf_tree_id tree = mf_coll_records(c);
    pthread_mutex_lock(&t->m->mu);
    bool hidden = wfind(t, tree, rid) || visible_version(t->m, tree, rid, t);
    pthread_mutex_unlock(&t->m->mu);
    return hidden;
}

static int view_extras(void *arg, const mf_coll *c,
                       int (*add)(void *to, uint64_t rid, const bson_t *doc, mf_error *err),
                       void *to, mf_error *err)
{
    mf_cl_txn *t = arg;
    mf_cl_txns *m = t->m;
    mf_tree_id tree = mf_coll_records(c);
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; rc == 0 && i < t->nw; i++)
        if (t->colls[t->w[i].coll].tree == tree && t->w[i].doc)
            rc = add(to, t->w[i].rid, t->w[i].doc, err);
    for (size_t i = 0; rc == 0 && i < m->vmap.cap; i++) {
        const rslot *s = &m->vmap.v[i];
        if (!s->used || s->tree != tree || wfind(t, tree, s->rid))
            continue;
        const version *v = visible_version(m, tree, s->rid, t);
        bson_t before;
        if (v && version_doc(v, &before))
            rc = add(to, s->rid, &before, err);
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* ------------------------------------------------------------ lifetime */

/* The window's start as an oplog ts (mutex held). */
static uint64_t window_start(const mf_cl_txns *m)
{
    int64_t start = mf_clock_wall_ms() / 1000 - m->window_s;
    return start > 0 ? (uint64_t)start << 32 : 0;
}

/* The oldest oplog ts a read may ask for (mutex held): neither older than
 * the window nor before what was dropped. */
static uint64_t oldest_readable(const mf_cl_txns *m)
{
    uint64_t start = window_start(m);
    return m->history_from > start ? m->history_from : start;
}

/* A snapshot: now's (`snap_ts` 0: a transaction's), or at oplog ts
 * `snap_ts`, when the history since then is still whole. */
static int snapshot_open(mf_cl_txns *m, uint64_t snap_ts, mf_cl_txn **out, mf_error *err)
{
    mf_cl_txn *t = calloc(1, sizeof *t);
    if (!t)
        return mf_error_oom(err);
    t->m = m;
    t->view = (mf_read_view){.hides = view_hides, .extras = view_extras, .arg = t};
    pthread_mutex_lock(&m->mu);
    if (snap_ts && snap_ts < oldest_readable(m)) {
        pthread_mutex_unlock(&m->mu);
        free(t);
        return mf_error_set(err, MF_SnapshotTooOld,
                            "Read timestamp Timestamp(%u, %u) is older than the oldest "
                            "available timestamp.",
                            (unsigned)(snap_ts >> 32), (unsigned)(snap_ts & 0xffffffffu));
    }
    m->open++;
    t->id = ++m->next_id;
    t->snap = m->seq;
    t->snap_ts = snap_ts;
    t->next = m->list;
    m->list = t;
    pthread_mutex_unlock(&m->mu);
    *out = t;
    return 0;
}

int mf_cl_txn_begin(mf_cl_txns *m, mf_cl_txn **out, mf_error *err)
{
    return snapshot_open(m, 0, out, err);
}

int mf_cl_snapshot_begin(mf_cl_txns *m, uint64_t ts, mf_cl_txn **out, mf_error *err)
{
    return snapshot_open(m, ts ? ts : 1, out, err);
}

void mf_cl_txns_history(mf_cl_txns *m, mf_cl_history *out)
{
    pthread_mutex_lock(&m->mu);
    *out = (mf_cl_history){m->nvers, m->vbytes, m->budget, oldest_readable(m)};
    pthread_mutex_unlock(&m->mu);
}

bool mf_cl_txn_is_snapshot(const mf_cl_txn *t)
{
    return t && t->snap_ts != 0;
}

void mf_cl_txns_set_history(mf_cl_txns *m, int64_t window_s, size_t budget, uint64_t from_ts)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->window_s = window_s;
    m->budget = m->gc_bytes = budget;
    m->history = window_s > 0;
    if (from_ts > m->history_from)
        m->history_from = from_ts;
    if (!m->history && m->open == 0)
        forget_all(m); /* (what was kept for the window) */
    pthread_mutex_unlock(&m->mu);
}

/* Drop the versions and key notes no open snapshot needs: those numbered
 * at or below the oldest open snapshot (mutex held; transactions are
 * open).  Versions are appended in number order, so one pass keeps the
 * rest in order and relinks each chain.  Run when what is kept has
 * doubled since the last pass: a store under transactions that never all
 * end at once stays bounded by what their lifetimes saw. */
static void kvslot_rebuild(mf_cl_txns *m);

/* The oplog ts before which the history window keeps no version: the
 * window's start, or later where the budget needs it (mutex held). */
static size_t version_bytes(const version *v)
{
    return VERSION_COST + v->blen;
}

static uint64_t history_cut(const mf_cl_txns *m)
{
    if (!m->history)
        return UINT64_MAX;
    uint64_t cut = window_start(m);
    if (m->vbytes <= m->budget)
        return cut;
    /* past the budget the oldest versions go until half of it is left
     * (the array is in number order, near enough to ts order for a cut) */
    size_t bytes = m->vbytes;
    for (size_t i = 0; i < m->nvers && bytes > m->budget / 2; i++) {
        bytes -= version_bytes(&m->vers[i]);
        if (m->vers[i].ts > cut)
            cut = m->vers[i].ts;
    }
    return cut;
}

static void collect(mf_cl_txns *m)
{
    /* what the open snapshots need: the versions numbered after the
     * oldest transaction's, and those logged after the oldest read's at a
     * cluster time; and what the history window keeps */
    uint64_t oldest = UINT64_MAX, oldest_ts = UINT64_MAX;
    for (const mf_cl_txn *t = m->list; t; t = t->next) {
        if (t->snap_ts && t->snap_ts < oldest_ts)
            oldest_ts = t->snap_ts;
        else if (!t->snap_ts && t->snap < oldest)
            oldest = t->snap;
    }
    uint64_t cut = history_cut(m);
    if (cut > oldest_ts)
        cut = oldest_ts;
    /* the kept versions into a new array and map; out of memory, nothing
     * changes (the next end tries again) */
    rmap fresh = {0};
    version *nv = malloc((m->nvers ? m->nvers : 1) * sizeof *nv);
    size_t k = 0, kept_bytes = 0;
    for (size_t i = 0; nv && i < m->nvers; i++) {
        version v = m->vers[i];
        if (v.seq <= oldest && v.ts <= cut)
            continue;
        kept_bytes += version_bytes(&v);
        size_t *head = rmap_get(&fresh, v.tree, v.rid);
        v.older = head ? (ptrdiff_t)*head - 1 : -1;
        if (rmap_put(&fresh, v.tree, v.rid, k + 1) != 0) {
            free(nv);
            nv = NULL;
            break;
        }
        nv[k++] = v;
    }
    if (!nv) {
        rmap_clear(&fresh);
        m->gc_at = 2 * m->gc_at;
        return;
    }
    for (size_t i = 0; i < m->nvers; i++) {
        version *v = &m->vers[i];
        if (v->seq > oldest || v->ts > cut)
            continue;
        if (v->ts > m->history_from) /* reads before it lose what it kept */
            m->history_from = v->ts;
        free(v->before);
    }
    free(m->vers);
    m->vers = nv;
    m->nvers = k;
    m->vbytes = kept_bytes;
    m->capvers = m->nvers ? m->nvers : 1;
    rmap_clear(&m->vmap);
    m->vmap = fresh;
    size_t j = 0;
    for (size_t i = 0; i < m->nkvers; i++) {
        if (m->kvers[i].seq <= oldest)
            free(m->kvers[i].key);
        else
            m->kvers[j++] = m->kvers[i];
    }
    m->nkvers = j;
    kvslot_rebuild(m);
    /* and the lock table's released entries (a lock is a slot cleared) */
    rmap locks = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < m->locks.cap; i++)
        if (m->locks.v[i].used && m->locks.v[i].val)
            ok = rmap_put(&locks, m->locks.v[i].tree, m->locks.v[i].rid, m->locks.v[i].val) == 0;
    if (ok) {
        rmap_clear(&m->locks);
        m->locks = locks;
    } else {
        rmap_clear(&locks);
    }
    m->gc_at = 2 * (m->nvers + m->nkvers + m->locks.n) + 1024;
    /* (what open snapshots pin may keep it past the budget: collect again
     * when that has doubled, not at every write) */
    m->gc_bytes = 2 * m->vbytes > m->budget ? 2 * m->vbytes : m->budget;
}

/* Release what `t` holds and free it (mutex held). */
static void end_locked(mf_cl_txn *t)
{
    mf_cl_txns *m = t->m;
    for (size_t i = 0; i < t->nw; i++) {
        size_t *o = rmap_get(&m->locks, t->colls[t->w[i].coll].tree, t->w[i].rid);
        if (o && *o == (size_t)t)
            *o = 0;
    }
    for (size_t i = 0; i < m->nkeys;) {
        if (m->keys[i].owner == t) {
            free(m->keys[i].key);
            m->keys[i] = m->keys[--m->nkeys];
        } else {
            i++;
        }
    }
    for (mf_cl_txn **pp = &m->list; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    pthread_cond_broadcast(&m->ended);
    if (--m->open == 0 && !m->history)
        forget_all(m);
    else if (m->nvers + m->nkvers + m->locks.n > m->gc_at)
        collect(m);
    if (bound == t)
        bound = NULL;
    txn_free(t);
}

void mf_cl_txn_abort(mf_cl_txn *t)
{
    if (!t)
        return;
    mf_cl_txns *m = t->m;
    pthread_mutex_lock(&m->mu);
    end_locked(t);
    pthread_mutex_unlock(&m->mu);
}

void mf_cl_txns_set_size_limit(mf_cl_txns *m, int64_t bytes)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    m->size_limit = bytes;
    pthread_mutex_unlock(&m->mu);
}

void mf_cl_txn_bind(mf_cl_txn *t)
{
    if (t) /* a new statement: what the last one read is not held */
        free_retired(t);
    bound = t;
}

int mf_cl_read_record(mf_engine *e, mf_coll *c, uint64_t rid, bson_t *doc, bool *found,
                      mf_error *err)
{
    mf_cl_txn *t = bound;
    if (t && strncmp(mf_coll_name(c), "local.", 6) != 0) {
        mf_tree_id tree = mf_coll_records(c);
        bool mine = false;
        pthread_mutex_lock(&t->m->mu);
        const wrec *r = wfind(t, tree, rid);
        const version *v = r ? NULL : visible_version(t->m, tree, rid, t);
        if (r) {
            mine = true;
            *found = r->doc && bson_init_static(doc, bson_get_data(r->doc), r->doc->len);
        } else if (v) {
            mine = true;
            *found = version_doc(v, doc);
        }
        pthread_mutex_unlock(&t->m->mu);
        if (mine) /* (the copies stay while the statement runs: retired or kept) */
            return 0;
    }
    uint8_t k[8];
    const uint8_t *v;
    size_t vl;
    mf_record_id_encode(rid, k);
    int rc = mf_btree_get(mf_engine_tree(e, mf_coll_records(c)), k, 8, found, &v, &vl, err);
    if (rc == 0 && *found && !bson_init_static(doc, v, vl))
        rc = mf_error_set(err, MF_DataCorruption, "record %llu is not a document",
                          (unsigned long long)rid);
    return rc;
}

mf_cl_txn *mf_cl_txn_bound(void)
{
    return bound;
}

const mf_read_view *mf_cl_txn_view(mf_cl_txn *t)
{
    return t ? &t->view : NULL;
}

uint64_t mf_cl_txn_id(const mf_cl_txn *t)
{
    return t->id;
}

bool mf_cl_txn_killed(mf_cl_txn *t)
{
    pthread_mutex_lock(&t->m->mu);
    bool k = t->killed;
    pthread_mutex_unlock(&t->m->mu);
    return k;
}

bool mf_cl_txn_wrote(const mf_cl_txn *t)
{
    return t->nw > 0;
}

/* -------------------------------------------------- RecordIds, sequence */

uint64_t mf_cl_txns_first_free(mf_cl_txns *m, const mf_coll *c, uint64_t next)
{
    if (!m)
        return next;
    pthread_mutex_lock(&m->mu);
    size_t *r = rmap_get(&m->reserved, mf_coll_records(c), 0);
    if (r && *r >= next)
        next = *r + 1;
    pthread_mutex_unlock(&m->mu);
    return next;
}

/* Keep the before-image `old` (NULL: absent) of (tree, rid) under write
 * number `seq`, logged at `ts` (mutex held; a snapshot is open or the
 * history window is kept). */
static int keep_version(mf_cl_txns *m, mf_tree_id tree, uint64_t rid, uint64_t seq, uint64_t ts,
                        const bson_t *old, mf_error *err)
{
    if (m->nvers == m->capvers) {
        size_t cap = m->capvers ? 2 * m->capvers : 64;
        version *v = realloc(m->vers, cap * sizeof *v);
        if (!v)
            return mf_error_oom(err);
        m->vers = v;
        m->capvers = cap;
    }
    /* a RecordId with versions is not handed out again while they are
     * kept (mf_cl_txns_first_free): a new record there would hide, in a
     * write set, the version an older snapshot sees at that RecordId */
    size_t *res = rmap_slot(&m->reserved, tree, 0);
    if (!res)
        return mf_error_oom(err);
    if (*res < rid)
        *res = rid;
    uint8_t *copy = old ? malloc(old->len) : NULL;
    if (old && !copy)
        return mf_error_oom(err);
    if (copy)
        memcpy(copy, bson_get_data(old), old->len);
    size_t *head = rmap_slot(&m->vmap, tree, rid);
    if (!head) {
        free(copy);
        return mf_error_oom(err);
    }
    m->vers[m->nvers] = (version){tree, rid, seq, ts, copy, old ? old->len : 0,
                                  (ptrdiff_t)*head - 1};
    *head = m->nvers + 1;
    m->vbytes += version_bytes(&m->vers[m->nvers]);
    m->nvers++;
    return 0;
}

/* ------------------------------------------------------- unique keys */

/* The unique keys `doc` gets in index `x` that `old` (may be NULL) has
 * not: into `out` (sorted, distinct). */
static int new_unique_keys(const mf_index_desc *x, const bson_t *old, const bson_t *doc,
                           mf_keyset *out, mf_error *err)
{
    mf_keyset before = {0};
    uint32_t mk = 0;
    int rc = doc ? mf_index_keys(x, doc, out, &mk, err) : 0;
    if (rc == 0 && old && (rc = mf_index_keys(x, old, &before, &mk, err)) == 0) {
        size_t k = 0;
        for (size_t i = 0; i < out->n; i++) {
            bool had = false;
            for (size_t j = 0; j < before.n && !had; j++)
                had = before.keys[j].len == out->keys[i].len &&
                      memcmp(before.keys[j].data, out->keys[i].data, out->keys[i].len) == 0;
            if (had)
                mf_buf_free(&out->keys[i]);
            else
                out->keys[k++] = out->keys[i];
        }
        out->n = k;
    }
    mf_keyset_free(&before);
    return rc;
}

/* Whether `doc` has `key` in index `x`. */
static bool doc_has_key(const mf_index_desc *x, const bson_t *doc, const mf_buf *key)
{
    mf_keyset ks = {0};
    uint32_t mk = 0;
    mf_error e;
    bool has = false;
    if (doc && mf_index_keys(x, doc, &ks, &mk, &e) == 0)
        for (size_t i = 0; i < ks.n && !has; i++)
            has = ks.keys[i].len == key->len && memcmp(ks.keys[i].data, key->data, key->len) == 0;
    mf_keyset_free(&ks);
    return has;
}

/* The key notes are found through a hash table of their positions + 1
 * (open addressing; rebuilt whole when the notes are compacted): every
 * unique-key write notes its key while a transaction is open, so a scan
 * per note would make a bulk load beside a long transaction quadratic. */
static uint64_t kv_hash(mf_tree_id index, const uint8_t *k, size_t klen)
{
    return XXH3_64bits_withSeed(k, klen, index);
}

static keyver *kver_find(mf_cl_txns *m, mf_tree_id index, const uint8_t *k, size_t klen)
{
    if (!m->kvcap)
        return NULL;
    for (size_t h = kv_hash(index, k, klen) & (m->kvcap - 1);; h = (h + 1) & (m->kvcap - 1)) {
        size_t i = m->kvslot[h];
        if (!i)
            return NULL;
        keyver *v = &m->kvers[i - 1];
        if (v->index == index && v->klen == klen && memcmp(v->key, k, klen) == 0)
            return v;
    }
}

/* Enter note `i` (0-based) in the hash table, growing it; -1 out of memory. */
static int kvslot_add(mf_cl_txns *m, size_t i)
{
    if ((m->kvn + 1) * 2 > m->kvcap) {
        size_t cap = m->kvcap ? 2 * m->kvcap : 64;
        size_t *v = calloc(cap, sizeof *v);
        if (!v)
            return -1;
        free(m->kvslot);
        m->kvslot = v;
        m->kvcap = cap;
        m->kvn = 0;
        for (size_t j = 0; j < m->nkvers; j++) { /* (`i` is m->nkvers: not yet in) */
            size_t h = kv_hash(m->kvers[j].index, m->kvers[j].key, m->kvers[j].klen) & (cap - 1);
            while (v[h])
                h = (h + 1) & (cap - 1);
            v[h] = j + 1;
            m->kvn++;
        }
    }
    size_t h = kv_hash(m->kvers[i].index, m->kvers[i].key, m->kvers[i].klen) & (m->kvcap - 1);
    while (m->kvslot[h])
        h = (h + 1) & (m->kvcap - 1);
    m->kvslot[h] = i + 1;
    m->kvn++;
    return 0;
}

/* Rebuild the hash table after the notes were compacted (collect). */
static void kvslot_rebuild(mf_cl_txns *m)
{
    size_t cap = 64;
    while (cap < 2 * (m->nkvers + 1))
        cap *= 2;
    size_t *v = calloc(cap, sizeof *v);
    free(m->kvslot);
    m->kvslot = v;
    m->kvcap = v ? cap : 0;
    m->kvn = 0;
    if (!v) {
        /* out of memory: drop the notes too (a conflict may then be
         * missed, never a crash; the next note starts a new table) */
        for (size_t j = 0; j < m->nkvers; j++)
            free(m->kvers[j].key);
        m->nkvers = 0;
        return;
    }
    for (size_t j = 0; j < m->nkvers; j++) {
        size_t h = kv_hash(m->kvers[j].index, m->kvers[j].key, m->kvers[j].klen) & (cap - 1);
        while (v[h])
            h = (h + 1) & (cap - 1);
        v[h] = j + 1;
        m->kvn++;
    }
}

static int kver_note(mf_cl_txns *m, mf_tree_id index, const mf_buf *k, uint64_t seq,
                     mf_error *err)
{
    keyver *have = kver_find(m, index, k->data, k->len);
    if (have) {
        have->seq = seq;
        return 0;
    }
    if (m->nkvers == m->capkvers) {
        size_t cap = m->capkvers ? 2 * m->capkvers : 16;
        keyver *v = realloc(m->kvers, cap * sizeof *v);
        if (!v)
            return mf_error_oom(err);
        m->kvers = v;
        m->capkvers = cap;
    }
    uint8_t *copy = malloc(k->len ? k->len : 1);
    if (!copy)
        return mf_error_oom(err);
    memcpy(copy, k->data, k->len);
    m->kvers[m->nkvers] = (keyver){index, copy, k->len, seq};
    if (kvslot_add(m, m->nkvers) != 0) {
        free(copy);
        return mf_error_oom(err);
    }
    m->nkvers++;
    return 0;
}

/* Note, under write number `seq`, the unique keys a write of `ix`'s
 * collection adds or removes (mutex held; a transaction is open). */
static int note_key_changes(mf_cl_txns *m, const mf_cl_indexes *ix, const bson_t *old,
                            const bson_t *new_doc, uint64_t seq, mf_error *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && ix && i < ix->n; i++) {
        mf_keyset gone = {0}, came = {0};
        if (!ix->v[i].unique)
            continue;
        if (new_doc)
            rc = new_unique_keys(&ix->v[i], old, new_doc, &came, err);
        if (rc == 0 && old)
            rc = new_unique_keys(&ix->v[i], new_doc, old, &gone, err);
        for (size_t k = 0; rc == 0 && k < came.n; k++)
            rc = kver_note(m, ix->v[i].tree, &came.keys[k], seq, err);
        for (size_t k = 0; rc == 0 && k < gone.n; k++)
            rc = kver_note(m, ix->v[i].tree, &gone.keys[k], seq, err);
        mf_keyset_free(&came);
        mf_keyset_free(&gone);
    }
    return rc;
}

static keylock *key_find(mf_cl_txns *m, mf_tree_id index, const mf_buf *k)
{
    for (size_t i = 0; i < m->nkeys; i++)
        if (m->keys[i].index == index && m->keys[i].klen == k->len &&
            memcmp(m->keys[i].key, k->data, k->len) == 0)
            return &m->keys[i];
    return NULL;
}

static int key_take(mf_cl_txns *m, mf_tree_id index, const mf_buf *k, mf_cl_txn *t, uint64_t rid,
                    mf_error *err)
{
    keylock *have = key_find(m, index, k);
    if (have) {
        have->owner = t;
        have->rid = rid;
        return 0;
    }
    if (m->nkeys == m->capkeys) {
        size_t cap = m->capkeys ? 2 * m->capkeys : 16;
        keylock *v = realloc(m->keys, cap * sizeof *v);
        if (!v)
            return mf_error_oom(err);
        m->keys = v;
        m->capkeys = cap;
    }
    uint8_t *copy = malloc(k->len ? k->len : 1);
    if (!copy)
        return mf_error_oom(err);
    memcpy(copy, k->data, k->len);
    m->keys[m->nkeys++] = (keylock){index, copy, k->len, t, rid};
    return 0;
}

static int write_conflict(mf_error *err)
{
    return mf_error_set(err, MF_WriteConflict,
                        "Write conflict during plan execution and yielding is disabled. :: "
                        "Please retry your operation or multi-document transaction.");
}

/* The record of `t`'s write set holding (tree, rid)'s newest version in
 * the transaction, or the tree's: whether it still has `key` in `x`. */
static bool still_has_key(mf_cl_txn *t, mf_engine *e, mf_coll *c, const mf_index_desc *x,
                          uint64_t rid, const mf_buf *key)
{
    wrec *r = wfind(t, mf_coll_records(c), rid);
    if (r)
        return doc_has_key(x, r->doc, key);
    uint8_t k[8];
    bson_t doc;
    bool found = false;
    mf_error e2;
    mf_record_id_encode(rid, k);
    if (mf_cl_record_doc(e, c, k, &doc, &found, &e2) != 0 || !found)
        return false;
    return doc_has_key(x, &doc, key);
}

/* A unique index refusing key `k` of the new document, or another
 * transaction holding it (mutex held, collection lock exclusive). */
static int check_unique(mf_cl_txn *t, mf_engine *e, mf_coll *c, const mf_index_desc *x,
                        uint64_t rid, const mf_buf *k, const bson_t *doc, mf_cl_dup *dup,
                        mf_error *err)
{
    mf_cl_txns *m = t->m;
    keylock *kl = key_find(m, x->tree, k);
    if (kl && kl->owner && kl->owner != t && !kl->owner->killed)
        return write_conflict(err); /* (a killed one will never commit) */
    if (kl && kl->owner == t && kl->rid != rid && still_has_key(t, e, c, x, kl->rid, k))
        goto duplicate;
    /* the key came or went after the snapshot (a record inserted, or
     * deleted, since): the snapshot's answer is stale */
    keyver *kv = kver_find(m, x->tree, k->data, k->len);
    if (kv && kv->seq > t->snap)
        return write_conflict(err);
    bool found;
    const uint8_t *v;
    size_t vl;
    int rc = mf_btree_get(mf_engine_tree(e, x->tree), k->data, k->len, &found, &v, &vl, err);
    if (rc || !found || vl != 8)
        return rc;
    uint64_t other = mf_record_id_decode(v);
    if (other == rid)
        return 0;
    if (wfind(t, mf_coll_records(c), other)) {
        if (still_has_key(t, e, c, x, other, k))
            goto duplicate;
        return 0;
    }
    if (visible_version(m, mf_coll_records(c), other, t))
        return write_conflict(err); /* written after the snapshot */
    /* fall through: the snapshot's document has the key */
duplicate:
    if (dup)
        mf_cl_dup_fill(dup, x, doc);
    return mf_error_set(err, MF_DuplicateKey, "duplicate key in index %s", x->name);
}

/* ------------------------------------------------------------- staging */

static int coll_index(mf_cl_txn *t, mf_coll *c, size_t *out, mf_error *err)
{
    mf_tree_id tree = mf_coll_records(c);
    for (size_t i = 0; i < t->ncolls; i++)
        if (t->colls[i].tree == tree && strcmp(t->colls[i].ns, mf_coll_name(c)) == 0) {
            *out = i;
            return 0;
        }
    wcoll *v = realloc(t->colls, (t->ncolls + 1) * sizeof *v);
    if (!v)
        return mf_error_oom(err);
    t->colls = v;
    char *ns = strdup(mf_coll_name(c));
    if (!ns)
        return mf_error_oom(err);
    t->colls[t->ncolls] = (wcoll){ns, tree};
    *out = t->ncolls++;
    return 0;
}

int mf_cl_txn_stage(mf_cl_txn *t, mf_engine *e, mf_coll *c, mf_cl_indexes *ix, uint64_t rid,
                    const bson_t *old_doc, const bson_t *new_doc, mf_cl_dup *dup, mf_error *err)
{
    mf_cl_txns *m = t->m;
    mf_tree_id tree = mf_coll_records(c);
    mf_keyset keys = {0};
    int rc = 0;

    pthread_mutex_lock(&m->mu);
    if (t->killed) {
        rc = write_conflict(err);
        goto out;
    }
    /* another transaction's record, or one written since the snapshot (a
     * new record has no past: its RecordId may be one a deleted record
     * had -- it conflicts through its unique keys only) */
    size_t *owner = rmap_get(&m->locks, tree, rid);
    if ((owner && *owner && *owner != (size_t)t && !((mf_cl_txn *)*owner)->killed) ||
        (old_doc && !wfind(t, tree, rid) && visible_version(m, tree, rid, t))) {
        rc = write_conflict(err);
        goto out;
    }
    /* the unique keys it gains, and the indexes it makes multikey */
    for (size_t i = 0; rc == 0 && new_doc && i < ix->n; i++) {
        const mf_index_desc *x = &ix->v[i];
        if (!x->unique)
            continue;
        mf_keyset_clear(&keys);
        if ((rc = new_unique_keys(x, old_doc, new_doc, &keys, err)) != 0)
            break;
        for (size_t k = 0; rc == 0 && k < keys.n; k++)
            rc = check_unique(t, e, c, x, rid, &keys.keys[k], new_doc, dup, err);
        for (size_t k = 0; rc == 0 && k < keys.n; k++)
            rc = key_take(m, x->tree, &keys.keys[k], t, rid, err);
    }
    if (rc)
        goto out;
    /* the record, in the write set and locked */
    wrec *r = wfind(t, tree, rid);
    bson_t *copy = new_doc ? bson_copy(new_doc) : NULL;
    if (new_doc && !copy) {
        rc = mf_error_oom(err);
        goto out;
    }
    if (r) {
        if (r->doc) {
            bson_t **v = realloc(t->retired, (t->nretired + 1) * sizeof *v);
            if (!v) {
                if (copy)
                    bson_destroy(copy);
                rc = mf_error_oom(err);
                goto out;
            }
            t->retired = v;
            t->retired[t->nretired++] = r->doc;
            t->bytes -= r->doc->len;
        }
        r->doc = copy;
    } else {
        size_t ci = 0;
        if (t->nw == t->capw) {
            size_t cap = t->capw ? 2 * t->capw : 16;
            wrec *v = realloc(t->w, cap * sizeof *v);
            if (v) {
                t->w = v;
                t->capw = cap;
            }
        }
        bool locked = false;
        if (t->nw == t->capw || (rc = coll_index(t, c, &ci, err)) != 0 ||
            !(locked = rmap_put(&m->locks, tree, rid, (size_t)t) == 0) ||
            rmap_put(&t->wmap, tree, rid, t->nw + 1) != 0) {
            if (locked) /* no write-set entry to release it at the end */
                *rmap_get(&m->locks, tree, rid) = 0;
            if (copy)
                bson_destroy(copy);
            if (rc == 0)
                rc = mf_error_oom(err);
            goto out;
        }
        t->w[t->nw] = (wrec){ci, rid, copy};
        t->nw++;
        if (!old_doc) {
            size_t *res = rmap_get(&m->reserved, tree, 0);
            if ((!res || *res < rid) && rmap_put(&m->reserved, tree, 0, rid) != 0)
                rc = mf_error_oom(err);
        }
    }
    if (copy)
        t->bytes += copy->len;
    if ((int64_t)t->bytes > m->size_limit)
        rc = mf_error_set(err, MF_TransactionTooLarge,
                          "Total size of all transaction operations must be less than server "
                          "parameter 'transactionSizeLimitBytes' = %lld",
                          (long long)m->size_limit);
out:
    pthread_mutex_unlock(&m->mu);
    mf_keyset_free(&keys);
    /* an index meeting its first array is marked now: a plan made before
     * commit must not take it for single-key */
    for (size_t i = 0; rc == 0 && new_doc && i < ix->n; i++) {
        mf_keyset ks = {0};
        uint32_t mk = 0;
        rc = mf_index_keys(&ix->v[i], new_doc, &ks, &mk, err);
        mf_keyset_free(&ks);
        if (rc == 0 && mk) {
            rc = mf_cl_mark_multikey(e, c, &ix->v[i], mk, err);
        }
    }
    return rc;
}

/* ------------------------------------------------ writes outside one */

/* The operation running on this thread, for writes outside transactions
 * (mf_cl_op_begin): whether it may wait for a transaction, the writes it
 * made (and its running statement made: mf_cl_op_statement), the
 * transaction it is to wait for. */
static _Thread_local struct {
    bool active;
    bool statements;  /* its statements can each start over */
    bool resumable;   /* its statement goes on after a wait */
    uint64_t writes, stmt_writes;
    uint64_t wait_id;
} op;

void mf_cl_op_begin(void)
{
    op.active = true;
    op.statements = op.resumable = false;
    op.writes = op.stmt_writes = 0;
    op.wait_id = 0;
}

uint64_t mf_cl_op_end(void)
{
    uint64_t id = op.wait_id;
    op.active = false;
    op.wait_id = 0;
    return id;
}

void mf_cl_op_statement(bool resumable)
{
    op.statements = true;
    op.resumable = resumable;
    op.stmt_writes = 0;
}

uint64_t mf_cl_op_take_wait(void)
{
    uint64_t id = op.wait_id;
    op.wait_id = 0;
    return id;
}

/* `h` holds the record or key: mark it killed, or, when the operation can
 * still start over -- it has written nothing, or its statement has not
 * and can start over, or goes on after a wait -- note it to be waited
 * for.  Mutex held. */
static void meet_holder(mf_cl_txn *h)
{
    if (!h || h->killed)
        return;
    if (op.active &&
        (op.writes == 0 || (op.statements && (op.stmt_writes == 0 || op.resumable)))) {
        if (!op.wait_id)
            op.wait_id = h->id;
    } else {
        h->killed = true;
    }
}

int mf_cl_txns_claim(mf_cl_txns *m, mf_coll *c, const mf_cl_indexes *ix, uint64_t rid,
                     const bson_t *old_doc, const bson_t *new_doc, mf_error *err)
{
    if (!m)
        return 0;
    pthread_mutex_lock(&m->mu);
    if (m->open) {
        size_t *owner = rmap_get(&m->locks, mf_coll_records(c), rid);
        if (owner && *owner)
            meet_holder((mf_cl_txn *)*owner);
        for (size_t i = 0; new_doc && m->nkeys && i < ix->n; i++) {
            mf_keyset keys = {0};
            mf_error e;
            if (!ix->v[i].unique || new_unique_keys(&ix->v[i], old_doc, new_doc, &keys, &e) != 0) {
                mf_keyset_free(&keys);
                continue;
            }
            for (size_t k = 0; k < keys.n; k++) {
                keylock *kl = key_find(m, ix->v[i].tree, &keys.keys[k]);
                if (kl && kl->owner)
                    meet_holder(kl->owner);
            }
            mf_keyset_free(&keys);
        }
    }
    pthread_mutex_unlock(&m->mu);
    /* waiting: this write, and every later one of the operation, is not
     * made; the dispatcher waits and runs the operation again */
    if (op.active && op.wait_id)
        return mf_error_set(err, MF_WriteConflict,
                            "a transaction holds a document this write changes: waiting");
    return 0;
}

int mf_cl_txns_wait(mf_cl_txns *m, uint64_t id, int64_t deadline_us, mf_error *err)
{
    pthread_mutex_lock(&m->mu);
    for (;;) {
        bool open = false;
        for (const mf_cl_txn *t = m->list; t && !open; t = t->next)
            open = t->id == id && !t->killed;
        if (!open)
            break;
        if (deadline_us && mf_clock_mono_us() >= deadline_us) {
            pthread_mutex_unlock(&m->mu);
            return mf_error_set(err, MF_MaxTimeMSExpired, "operation exceeded time limit");
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000000L; /* rechecks the deadline every 10 ms */
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&m->ended, &m->mu, &ts);
    }
    pthread_mutex_unlock(&m->mu);
    return 0;
}

/* Whether a write should collect (mutex held): past the byte budget, or
 * what is kept has doubled -- without transactions only when the window
 * lets its oldest version go (nothing else would be dropped). */
static bool collect_due(const mf_cl_txns *m)
{
    if (m->vbytes > m->gc_bytes)
        return true;
    if (m->nvers + m->nkvers + m->locks.n <= m->gc_at)
        return false;
    return m->open || (m->nvers && m->vers[0].ts < window_start(m));
}

/* A write logged at `ts` kept no version (mutex held): reads before it
 * cannot be served. */
static void history_lost(mf_cl_txns *m, uint64_t ts)
{
    if (ts > m->history_from)
        m->history_from = ts;
}

int mf_cl_txns_written(mf_cl_txns *m, mf_coll *c, const mf_cl_indexes *ix, uint64_t rid,
                       const bson_t *old_doc, const bson_t *new_doc, uint64_t ts,
                       mf_error *err)
{
    if (!m)
        return 0;
    int rc = 0;
    op.writes++;
    op.stmt_writes++;
    pthread_mutex_lock(&m->mu);
    uint64_t seq = ++m->seq;
    if (m->open || m->history)
        rc = keep_version(m, mf_coll_records(c), rid, seq, ts, old_doc, err);
    if (rc == 0 && m->open)
        rc = note_key_changes(m, ix, old_doc, new_doc, seq, err);
    if (rc || !(m->open || m->history))
        history_lost(m, ts);
    else if (collect_due(m))
        collect(m);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* -------------------------------------------------------------- commit */

static int cmp_ns(const void *a, const void *b)
{
    return strcmp(((const wcoll *)a)->ns, ((const wcoll *)b)->ns);
}

int mf_cl_txn_commit(mf_cl_txn *t, mf_engine *e, mf_cl_log *lg, mf_lsn *lsn, mf_error *err)
{
    mf_cl_txns *m = t->m;
    size_t nc = t->ncolls;
    mf_coll **cs = calloc(nc ? nc : 1, sizeof *cs);
    mf_cl_indexes *ixs = calloc(nc ? nc : 1, sizeof *ixs);
    size_t *order = calloc(nc ? nc : 1, sizeof *order);
    mf_cl_change *ch = calloc(t->nw ? t->nw : 1, sizeof *ch);
    /* bson_t is declared 128-byte aligned: calloc's 16 is not enough */
    size_t nolds = t->nw ? t->nw : 1;
    bson_t *olds = aligned_alloc(_Alignof(bson_t), nolds * sizeof *olds);
    if (olds)
        memset(olds, 0, nolds * sizeof *olds);
    bool *had = calloc(t->nw ? t->nw : 1, sizeof *had);
    size_t locked = 0, nch = 0;
    int rc = 0;

    if (!cs || !ixs || !order || !ch || !olds || !had) {
        rc = mf_error_oom(err);
        goto done;
    }
    bool catalog = lg && ((lg->txn_ops && !bson_empty(lg->txn_ops)) || lg->ncreated);
    if (t->nw == 0 && !catalog)
        goto done; /* read-only: nothing to write */
    /* the collections, locked in namespace order (the one place more than
     * one collection is locked: coll.h) */
    wcoll *sorted = malloc((nc ? nc : 1) * sizeof *sorted);
    if (!sorted) {
        rc = mf_error_oom(err);
        goto done;
    }
    memcpy(sorted, t->colls, nc * sizeof *sorted);
    qsort(sorted, nc, sizeof *sorted, cmp_ns);
    for (size_t i = 0; i < nc; i++)
        for (size_t j = 0; j < nc; j++)
            if (sorted[i].tree == t->colls[j].tree && strcmp(sorted[i].ns, t->colls[j].ns) == 0)
                order[i] = j;
    free(sorted);
    mf_engine_catalog_lock(e, false);
    for (; locked < nc; locked++) {
        size_t j = order[locked];
        mf_coll *c = mf_engine_coll(e, t->colls[j].ns);
        if (!c || mf_coll_records(c) != t->colls[j].tree) {
            rc = mf_error_set(err, MF_NoSuchTransaction,
                              "Transaction was aborted: collection %s was dropped",
                              t->colls[j].ns);
            break;
        }
        mf_coll_lock(c, true);
        cs[j] = c;
        if ((rc = mf_cl_indexes_load(c, &ixs[j], err)) != 0) {
            locked++;
            break;
        }
    }
    if (rc)
        goto unlock;
    pthread_mutex_lock(&m->mu);
    bool killed = t->killed;
    pthread_mutex_unlock(&m->mu);
    if (killed) {
        rc = mf_error_set(err, MF_NoSuchTransaction,
                          "Transaction was aborted: a write outside it changed what it wrote");
        goto unlock;
    }
    /* each record against the tree's version now */
    for (size_t i = 0; rc == 0 && i < t->nw; i++) {
        wrec *r = &t->w[i];
        mf_coll *c = cs[r->coll];
        uint8_t k[8];
        bson_t cur;
        bool found;
        mf_record_id_encode(r->rid, k);
        bson_init(&olds[i]);
        if ((rc = mf_cl_record_doc(e, c, k, &cur, &found, err)) != 0)
            break;
        if (found) {
            bson_concat(&olds[i], &cur);
            had[i] = true;
        }
        if (!found && !r->doc)
            continue; /* inserted and deleted again */
        ch[nch++] = (mf_cl_change){c, &ixs[r->coll], r->rid, found ? &olds[i] : NULL, r->doc};
    }
    if (rc == 0 && (nch || catalog))
        rc = mf_cl_write_changes(e, ch, nch, lg, lsn, err);
    if (rc == 0) {
        pthread_mutex_lock(&m->mu);
        uint64_t seq = ++m->seq;
        uint64_t ts = (uint64_t)lg->op_time.secs << 32 | lg->op_time.inc;
        bool keep = m->open > 1 || m->history;
        for (size_t i = 0; rc == 0 && i < t->nw && keep; i++) {
            rc = keep_version(m, t->colls[t->w[i].coll].tree, t->w[i].rid, seq, ts,
                              had[i] ? &olds[i] : NULL, err);
            if (rc == 0 && m->open > 1)
                rc = note_key_changes(m, &ixs[t->w[i].coll], had[i] ? &olds[i] : NULL,
                                      t->w[i].doc, seq, err);
        }
        /* and every unique key it wrote on the way (a key inserted and
         * deleted again in the transaction was still written, as in a
         * storage engine's update chain) */
        for (size_t i = 0; rc == 0 && i < m->nkeys && m->open > 1; i++)
            if (m->keys[i].owner == t)
                rc = kver_note(m, m->keys[i].index,
                               &(mf_buf){.data = m->keys[i].key, .len = m->keys[i].klen}, seq,
                               err);
        pthread_mutex_unlock(&m->mu);
        if (rc || !keep) /* committed: only what older snapshots see is lost */
            history_lost(m, ts);
        rc = 0;
    }
unlock:
    for (size_t i = 0; i < nc; i++) {
        if (cs[i]) {
            mf_cl_indexes_free(&ixs[i]);
            mf_coll_unlock(cs[i]);
        }
    }
    mf_engine_catalog_unlock(e);
done:
    for (size_t i = 0; olds && i < t->nw; i++)
        if (had && (had[i] || olds[i].len))
            bson_destroy(&olds[i]);
    free(cs);
    free(ixs);
    free(order);
    free(ch);
    free(olds);
    free(had);
    mf_cl_txn_abort(t); /* committed or not, it has ended */
    return rc;
}
