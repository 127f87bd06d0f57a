/*
 * plan_cache.c -- the plan cache (mongod's PlanCache): which plan won the
 * trials (plan_trial.c) for a query shape, with how many works, and what
 * $planCacheStats and planCacheClear see of it; and the query shapes and
 * keys (queryHash, planCacheKey) that index it.
 */
#include "plan_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The plan cache: which index won the trials for a query shape (mongod's
 * PlanCache, keyed as its query shape is, without the values), and with
 * how many works.  One table for the instance, direct-mapped: a shape
 * whose slot another took is planned again.  The key covers the
 * collection's indexes, so a built or dropped index makes old entries
 * unreachable; they age out as their slots are reused. */
#define PLAN_CACHE_SLOTS 1024

typedef struct cache_slot {
    uint64_t key;        /* 0: empty */
    uint64_t indexes;    /* the collection and its indexes (indexes_hash) */
    uint64_t ns_hash;    /* the collection alone (planCacheClear) */
    uint32_t query_hash; /* the shape alone: filter, sort, projection, collation */
    char index[64];
    uint64_t works;
    bool active; /* used by queries of its shape (mongod's isActive) */
    /* for $planCacheStats: the query that made it, the plan, and each
     * candidate's trial (creationExecStats) and score, best first */
    int64_t created_ms;
    bson_t *query, *sort, *projection, *plan, *creation, *scores;
} cache_slot;

struct mf_plan_cache {
    pthread_mutex_t mu;
    cache_slot slot[PLAN_CACHE_SLOTS];
};

mf_plan_cache *mf_plan_cache_new(void)
{
    mf_plan_cache *pc = calloc(1, sizeof *pc);
    if (pc)
        pthread_mutex_init(&pc->mu, NULL);
    return pc;
}

static void slot_clear(cache_slot *sl)
{
    if (sl->query)
        bson_destroy(sl->query);
    if (sl->sort)
        bson_destroy(sl->sort);
    if (sl->projection)
        bson_destroy(sl->projection);
    if (sl->plan)
        bson_destroy(sl->plan);
    if (sl->creation)
        bson_destroy(sl->creation);
    if (sl->scores)
        bson_destroy(sl->scores);
    memset(sl, 0, sizeof *sl);
}

void mf_plan_cache_free(mf_plan_cache *pc)
{
    if (!pc)
        return;
    for (size_t i = 0; i < PLAN_CACHE_SLOTS; i++)
        slot_clear(&pc->slot[i]);
    pthread_mutex_destroy(&pc->mu);
    free(pc);
}

/* The active entry of `key`: an inactive one is as none (mongod's
 * getCacheEntryIfActive). */
bool mfi_plan_cache_get(mf_plan_cache *pc, uint64_t key, char *index, size_t cap, uint64_t *works)
{
    pthread_mutex_lock(&pc->mu);
    const cache_slot *sl = &pc->slot[key % PLAN_CACHE_SLOTS];
    bool hit = sl->key == key && sl->active && strlen(sl->index) < cap;
    if (hit) {
        strcpy(index, sl->index);
        *works = sl->works;
    }
    pthread_mutex_unlock(&pc->mu);
    return hit;
}

/* Its cached plan did not finish in its budget: the entry of `key` is
 * inactive until trials make it active again (mongod's CachedPlanStage
 * deactivates it before it replans). */
void mfi_plan_cache_deactivate(mf_plan_cache *pc, uint64_t key)
{
    pthread_mutex_lock(&pc->mu);
    cache_slot *sl = &pc->slot[key % PLAN_CACHE_SLOTS];
    if (sl->key == key)
        sl->active = false;
    pthread_mutex_unlock(&pc->mu);
}

/* The trials' winner `index` of `key`, in `works`, as mongod's
 * getNewEntryState keeps it: a new entry is inactive; an inactive one is
 * replaced, active, by a winner of no more works, and otherwise its works
 * grow to the lesser of the winner's and twice its own
 * (internalQueryCacheWorksGrowthCoefficient); an active one is replaced
 * only by a winner of fewer works. */
void mfi_plan_cache_put(mf_plan_cache *pc, uint64_t key, const char *index, uint64_t works,
                        cache_entry *x)
{
    bson_t *query = NULL, *sort = NULL, *projection = NULL, *plan = x->plan;
    bson_t *creation = x->creation, *scores = x->scores;
    x->plan = x->creation = x->scores = NULL;
    if (strlen(index) >= sizeof pc->slot[0].index || !plan || !creation || !scores ||
        !(query = x->query ? bson_copy(x->query) : bson_new()) ||
        !(sort = x->sort ? bson_copy(x->sort) : bson_new()) ||
        !(projection = x->projection ? bson_copy(x->projection) : bson_new())) {
        /* not cached: planned each time */
        bson_t *made[] = {plan, creation, scores, query, sort};
        for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
            if (made[i])
                bson_destroy(made[i]);
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    pthread_mutex_lock(&pc->mu);
    cache_slot *sl = &pc->slot[key % PLAN_CACHE_SLOTS];
    bool active = false;
    if (sl->key == key) {
        if (sl->active ? works >= sl->works : works > sl->works) { /* kept */
            if (!sl->active)
                sl->works = works < 2 * sl->works ? works : 2 * sl->works;
            pthread_mutex_unlock(&pc->mu);
            bson_t *made[] = {plan, creation, scores, query, sort, projection};
            for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
                bson_destroy(made[i]);
            return;
        }
        active = true;
    }
    slot_clear(sl);
    *sl = (cache_slot){.key = key, .indexes = x->indexes, .ns_hash = x->ns_hash,
                       .query_hash = x->query_hash, .works = works, .active = active,
                       .created_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000,
                       .query = query, .sort = sort, .projection = projection, .plan = plan,
                       .creation = creation, .scores = scores};
    strcpy(sl->index, index);
    pthread_mutex_unlock(&pc->mu);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* A filter's shape: its paths, operators and nesting, not its values
 * (each value only its BSON type).  It goes into an operator document, a
 * $and/$or/$nor array and each clause of one (`clauses`). */
static uint64_t shape_of(uint64_t h, bson_iter_t *it, bool clauses)
{
    bson_iter_t sub;
    while (bson_iter_next(it)) {
        const char *k = bson_iter_key(it);
        uint8_t t = (uint8_t)bson_iter_type(it);
        h = fnv(fnv(h, k, strlen(k) + 1), &t, 1);
        bool doc = BSON_ITER_HOLDS_DOCUMENT(it);
        bool logical = BSON_ITER_HOLDS_ARRAY(it) &&
                       (strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0);
        bool ops = mfi_is_operator_doc(it, false); /* a DBRef is one value */
        if ((logical || ops || (clauses && doc)) && bson_iter_recurse(it, &sub))
            h = fnv(shape_of(h, &sub, logical), "}", 1);
    }
    return h;
}

/* A collection's name, or, with its indexes, what the plan cache keys
 * cover of it (a hidden, unhidden or finished index makes a new key, as
 * mongod clears its cache then). */
uint64_t mfi_plan_ns_hash(mf_coll *c)
{
    const char *ns = c ? mf_coll_name(c) : "";
    return fnv(0xcbf29ce484222325ull, ns, strlen(ns) + 1);
}

static uint64_t indexes_hash(mf_coll *c, const mf_index_desc *idx, size_t nidx)
{
    uint64_t h = mfi_plan_ns_hash(c);
    for (size_t i = 0; i < nidx; i++) {
        h = fnv(h, idx[i].name, strlen(idx[i].name) + 1);
        h = fnv(h, &idx[i].hidden, sizeof idx[i].hidden);
        h = fnv(h, &idx[i].building, sizeof idx[i].building);
    }
    return h;
}

/* A query's shape (mongod's queryHash): the filter's paths and operators
 * without their values, the sort, the projection and the collation.  An
 * empty filter, sort or projection is none. */
static uint64_t query_shape(const bson_t *filter, const bson_t *sort, const bson_t *projection,
                            const mf_collator *coll)
{
    uint64_t h = 0xcbf29ce484222325ull;
    bson_iter_t it;
    if (filter && !bson_empty(filter) && bson_iter_init(&it, filter))
        h = shape_of(fnv(h, "f", 1), &it, false);
    if (sort && !bson_empty(sort))
        h = fnv(fnv(h, "s", 1), bson_get_data(sort), sort->len);
    if (projection && !bson_empty(projection))
        h = fnv(fnv(h, "p", 1), bson_get_data(projection), projection->len);
    if (coll) { /* the collation's spec, not the collator's address */
        bson_t spec = BSON_INITIALIZER;
        mf_collator_to_bson(coll, &spec);
        h = fnv(fnv(h, "c", 1), bson_get_data(&spec), spec.len);
        bson_destroy(&spec);
    }
    return h;
}

/* The key of a query in the plan cache (mongod's planCacheKey): its
 * collection and that collection's indexes, and its shape. */
static uint64_t cache_key(uint64_t indexes, uint64_t shape)
{
    uint64_t h = fnv(indexes, &shape, sizeof shape);
    return h ? h : 1;
}

void mf_plan_cache_clear(mf_plan_cache *pc, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                         bool one, const bson_t *filter, const bson_t *sort,
                         const bson_t *projection, const mf_collator *coll)
{
    uint64_t nh = mfi_plan_ns_hash(c);
    uint64_t key =
        one ? cache_key(indexes_hash(c, idx, nidx), query_shape(filter, sort, projection, coll))
            : 0;
    pthread_mutex_lock(&pc->mu);
    if (one) { /* a shape has one slot */
        cache_slot *sl = &pc->slot[key % PLAN_CACHE_SLOTS];
        if (sl->key == key)
            slot_clear(sl);
    } else { /* a collection's entries may be in any */
        for (size_t i = 0; i < PLAN_CACHE_SLOTS; i++)
            if (pc->slot[i].key && pc->slot[i].ns_hash == nh)
                slot_clear(&pc->slot[i]);
    }
    pthread_mutex_unlock(&pc->mu);
}

int mf_plan_cache_stats(mf_plan_cache *pc, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                        const char *host, bson_t *out)
{
    uint64_t ih = indexes_hash(c, idx, nidx);
    uint32_t n = 0;
    bool ok = true;
    pthread_mutex_lock(&pc->mu);
    for (size_t i = 0; ok && i < PLAN_CACHE_SLOTS; i++) {
        const cache_slot *sl = &pc->slot[i];
        if (!sl->key || sl->indexes != ih) /* another collection's, or its indexes have changed */
            continue;
        char key[16], hash[16];
        const char *k;
        bson_t doc, from;
        mf_uint32_to_key(n++, &k, key, sizeof key);
        ok = bson_append_document_begin(out, k, -1, &doc) &&
             BSON_APPEND_UTF8(&doc, "version", "1");
        snprintf(hash, sizeof hash, "%08X", sl->query_hash);
        ok = ok && BSON_APPEND_UTF8(&doc, "queryHash", hash);
        snprintf(hash, sizeof hash, "%08X", (uint32_t)sl->key);
        ok = ok && BSON_APPEND_UTF8(&doc, "planCacheKey", hash) &&
             BSON_APPEND_BOOL(&doc, "isActive", sl->active) &&
             BSON_APPEND_INT64(&doc, "works", (int64_t)sl->works) &&
             BSON_APPEND_DATE_TIME(&doc, "timeOfCreation", sl->created_ms) &&
             BSON_APPEND_DOCUMENT_BEGIN(&doc, "createdFromQuery", &from) &&
             BSON_APPEND_DOCUMENT(&from, "query", sl->query) &&
             BSON_APPEND_DOCUMENT(&from, "sort", sl->sort) &&
             BSON_APPEND_DOCUMENT(&from, "projection", sl->projection) &&
             bson_append_document_end(&doc, &from) &&
             BSON_APPEND_DOCUMENT(&doc, "cachedPlan", sl->plan) &&
             BSON_APPEND_ARRAY(&doc, "creationExecStats", sl->creation) &&
             BSON_APPEND_ARRAY(&doc, "candidatePlanScores", sl->scores) &&
             BSON_APPEND_BOOL(&doc, "indexFilterSet", false) &&
             BSON_APPEND_INT64(&doc, "estimatedSizeBytes",
                               (int64_t)(sizeof *sl + sl->query->len + sl->sort->len +
                                         sl->projection->len + sl->plan->len +
                                         sl->creation->len + sl->scores->len)) &&
             BSON_APPEND_UTF8(&doc, "host", host ? host : "") &&
             bson_append_document_end(out, &doc);
    }
    pthread_mutex_unlock(&pc->mu);
    return ok ? 0 : -1;
}

/* The query's shape (queryHash) and its key in the plan cache
 * (planCacheKey), kept in `s`. */
void mfi_plan_hash_shape(mf_scan *s, mf_coll *c, const mf_index_desc *idx, size_t nidx,
                         const bson_t *filter, const bson_t *sort, const bson_t *projection,
                         const mf_collator *coll)
{
    uint64_t shape = query_shape(filter, sort, projection, coll);
    s->cache_indexes = indexes_hash(c, idx, nidx);
    s->query_hash = (uint32_t)shape;
    s->shape = cache_key(s->cache_indexes, shape);
}

bool mf_scan_hashes(const mf_scan *s, uint32_t *query_hash, uint32_t *plan_cache_key)
{
    *query_hash = s->query_hash;
    *plan_cache_key = (uint32_t)s->shape;
    return s->shape != 0;
}
