/*
 * scan.c -- planning a read of a collection, and how often each index was
 * used, for $indexStats' `accesses: {ops, since}`.
 *
 * mongod's CollectionIndexUsageTracker counts, per index, the operations
 * whose plan read it; the counters live in memory, start at zero when the
 * server starts or the index is created, and vanish with the index.  Here
 * they are a small table in mf_cl_db keyed by (namespace, index name),
 * under its own mutex: mf_cl_scan_new counts a scan planned on an index
 * (IXSCAN or IDHACK), createIndexes starts a fresh counter (`since` now),
 * dropping an index, its collection or its database forgets the counters.
 * An index with no entry has existed since the server started: ops 0,
 * since the start.
 */
#include "coll.h"

#include <stdlib.h>
#include <string.h>

struct mf_cl_usage {
    char *ns;
    char *index;
    int64_t ops;
    int64_t since_ms;
};

void mf_cl_db_init(mf_cl_db *db, mf_engine *engine)
{
    memset(db, 0, sizeof *db);
    db->engine = engine;
    db->start_wall_ms = mf_clock_wall_ms();
    db->plan_cache = mf_plan_cache_new(); /* without it (no memory), trials every time */
    pthread_mutex_init(&db->usage_mu, NULL);
}

static void entry_free(mf_cl_usage *u)
{
    free(u->ns);
    free(u->index);
}

void mf_cl_db_destroy(mf_cl_db *db)
{
    for (size_t i = 0; i < db->nusage; i++)
        entry_free(&db->usage[i]);
    free(db->usage);
    db->usage = NULL;
    db->nusage = db->capusage = 0;
    pthread_mutex_destroy(&db->usage_mu);
    mf_plan_cache_free(db->plan_cache);
    db->plan_cache = NULL;
    mf_cl_capped_forget(db->engine); /* (its address may be the next engine's) */
}

/* The entry of (ns, index), NULL if none.  Caller holds usage_mu. */
static mf_cl_usage *find(mf_cl_db *db, const char *ns, const char *index)
{
    for (size_t i = 0; i < db->nusage; i++)
        if (strcmp(db->usage[i].ns, ns) == 0 && strcmp(db->usage[i].index, index) == 0)
            return &db->usage[i];
    return NULL;
}

/* A new entry (ops 0).  Caller holds usage_mu.  NULL when out of memory:
 * the counter is then not kept, which only under-reports. */
static mf_cl_usage *add(mf_cl_db *db, const char *ns, const char *index, int64_t since)
{
    if (db->nusage == db->capusage) {
        size_t cap = db->capusage ? 2 * db->capusage : 16;
        mf_cl_usage *v = realloc(db->usage, cap * sizeof *v);
        if (!v)
            return NULL;
        db->usage = v;
        db->capusage = cap;
    }
    mf_cl_usage *u = &db->usage[db->nusage];
    u->ns = strdup(ns);
    u->index = strdup(index);
    if (!u->ns || !u->index) {
        entry_free(u);
        return NULL;
    }
    u->ops = 0;
    u->since_ms = since;
    db->nusage++;
    return u;
}

void mf_cl_usage_count(mf_cl_db *db, const char *ns, const char *index)
{
    pthread_mutex_lock(&db->usage_mu);
    mf_cl_usage *u = find(db, ns, index);
    if (!u)
        u = add(db, ns, index, db->start_wall_ms);
    if (u)
        u->ops++;
    pthread_mutex_unlock(&db->usage_mu);
}

void mf_cl_usage_forget(mf_cl_db *db, const char *ns, const char *index)
{
    size_t nslen = strlen(ns);
    pthread_mutex_lock(&db->usage_mu);
    for (size_t i = 0; i < db->nusage;) {
        mf_cl_usage *u = &db->usage[i];
        bool hit = index ? strcmp(u->ns, ns) == 0 && strcmp(u->index, index) == 0
                         : strcmp(u->ns, ns) == 0 ||
                               (ns[nslen - 1] == '.' && strncmp(u->ns, ns, nslen) == 0);
        if (hit) {
            entry_free(u);
            db->usage[i] = db->usage[--db->nusage];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&db->usage_mu);
}

void mf_cl_usage_start(mf_cl_db *db, const char *ns, const char *index)
{
    mf_cl_usage_forget(db, ns, index);
    pthread_mutex_lock(&db->usage_mu);
    (void)add(db, ns, index, mf_clock_wall_ms());
    pthread_mutex_unlock(&db->usage_mu);
}

void mf_cl_usage_get(mf_cl_db *db, const char *ns, const char *index, int64_t *ops,
                         int64_t *since_ms)
{
    pthread_mutex_lock(&db->usage_mu);
    const mf_cl_usage *u = find(db, ns, index);
    *ops = u ? u->ops : 0;
    *since_ms = u ? u->since_ms : db->start_wall_ms;
    pthread_mutex_unlock(&db->usage_mu);
}

/* ------------------------------------------------------------ planning */

/* $indexStats: one more access of the index trial runs chose. */
static void count_chosen(void *arg, mf_coll *c, const char *index)
{
    mf_cl_usage_count(arg, mf_coll_name(c), index);
}

/* $indexStats: one more access of the index `s` reads, if any (once trial
 * runs choose it, if they are to: count_chosen). */
static void count_index_use(mf_cl_db *db, mf_coll *c, const mf_scan *s)
{
    size_t n = mf_scan_nkids(s);
    for (size_t i = 0; i < n; i++) /* an OR: each clause's index */
        count_index_use(db, c, mf_scan_kid(s, i));
    if (n || mf_scan_undecided(s))
        return;
    const char *name = mf_scan_index_name(s);
    if (!name && strcmp(mf_scan_describe(s), "IDHACK") == 0)
        name = "_id_"; /* mongod's IDHACK reports the _id index used */
    if (name)
        mf_cl_usage_count(db, mf_coll_name(c), name);
}

int mf_cl_scan_new(mf_cl_db *db, mf_coll *c, const mf_cl_indexes *ix, const bson_t *filter,
                 const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                 mf_scan **out, bool *sorted, mf_error *err)
{
    return mf_cl_scan_new_ex(db, c, ix, filter, hint, sort, coll, NULL, out, sorted, err);
}

int mf_cl_scan_new_ex(mf_cl_db *db, mf_coll *c, const mf_cl_indexes *ix, const bson_t *filter,
                    const bson_iter_t *hint, const bson_t *sort, const mf_collator *coll,
                    const mf_scan_extra *x, mf_scan **out, bool *sorted, mf_error *err)
{
    /* A query run for a client (`db`) keeps and uses the plan cache;
     * explain (no `db`) plans afresh, as it shows the trials. */
    mf_scan_extra with = x ? *x : (mf_scan_extra){0};
    /* inside a transaction: its snapshot and its own writes, read from
     * documents (a distinct scan would skip what the view adds) */
    mf_cl_txn *t = mf_cl_txn_bound();
    if (t && strncmp(mf_coll_name(c), "local.", 6) != 0) {
        with.view = mf_cl_txn_view(t);
        with.distinct_key = NULL;
    }
    if (db) {
        with.cache = db->plan_cache;
        with.chosen = count_chosen;
        with.chosen_arg = db;
    }
    int rc = mf_scan_new_ex(c, ix ? ix->v : NULL, ix ? ix->n : 0, filter, hint, sort, coll, &with,
                            out, sorted, err);
    if (rc == 0 && db)
        count_index_use(db, c, *out);
    return rc;
}
