/* Cases for csrc/query/plan.c over real trees: a collection and index trees
 * written through the engine (index keys built here by a small reference:
 * top-level fields, one key per array element, missing as null, [] as
 * undefined), then scans whose results are compared with a brute-force
 * filter over every record -- compound ranges, descending fields, the
 * non-unique RecordId suffix, multikey deduplication, unique point lookups,
 * and re-seeking after every row.  Then the same over indexes with
 * collations (built from their specs by mf_index_desc_init, keys by
 * mf_index_keys): which index a query of each collation may use, its
 * bounds, its order, hints, counting from keys, and the _id fast path. */
#include "test.h"
#include "../query/query.h"
#include "../storage/engine.h"

#include <stdlib.h>

#define NDOCS 400

typedef struct world {
    mf_engine *e;
    mf_coll *c;
    mf_index_desc idx[5];
    size_t nidx;
    char *paths[5][2];
    bool desc[5][2];
    bson_t *docs[NDOCS + 1]; /* by RecordId */
} world;

/* The keys of `doc` for index `d` (each without RecordId), into `keys`. */
static size_t doc_keys(const mf_index_desc *d, const bson_t *doc, mf_buf keys[16])
{
    size_t n = 1;
    memset(keys, 0, 16 * sizeof *keys);
    for (size_t f = 0; f < d->nfields; f++) {
        bson_iter_t it, el;
        bson_t tmp;
        bson_init(&tmp);
        if (!bson_iter_init_find(&it, doc, d->paths[f])) {
            BSON_APPEND_NULL(&tmp, "v");
            bson_iter_init_find(&it, &tmp, "v");
        }
        if (BSON_ITER_HOLDS_ARRAY(&it)) {
            /* one array per document in these cases: fan the keys out */
            mf_buf base = keys[0];
            size_t m = 0;
            bson_iter_recurse(&it, &el);
            mf_buf out[16] = {{0}};
            while (bson_iter_next(&el) && m < 16) {
                mf_buf_append(&out[m], base.data, base.len);
                mf_bsonx_key_append(&out[m], &el, d->desc[f]);
                m++;
            }
            if (m == 0) {
                bson_t u;
                bson_iter_t ui;
                bson_init(&u);
                BSON_APPEND_UNDEFINED(&u, "u");
                bson_iter_init_find(&ui, &u, "u");
                mf_buf_append(&out[0], base.data, base.len);
                mf_bsonx_key_append(&out[0], &ui, d->desc[f]);
                bson_destroy(&u);
                m = 1;
            }
            for (size_t i = 0; i < n; i++)
                mf_buf_free(&keys[i]);
            for (size_t i = 0; i < m; i++)
                keys[i] = out[i];
            n = m;
        } else {
            for (size_t i = 0; i < n; i++)
                mf_bsonx_key_append(&keys[i], &it, d->desc[f]);
        }
        bson_destroy(&tmp);
    }
    return n;
}

#define RND_SEED 88172645463325252ull
static uint64_t rnd_state = RND_SEED;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

static bson_t *make_doc(uint64_t rid)
{
    bson_t *d = bson_new();
    BSON_APPEND_INT64(d, "_id", (int64_t)rid);
    if (rnd() % 10)
        BSON_APPEND_INT32(d, "a", (int32_t)(rnd() % 8));
    if (rnd() % 7)
        BSON_APPEND_INT32(d, "b", (int32_t)(rnd() % 20));
    else if (rnd() % 2)
        BSON_APPEND_UTF8(d, "b", rnd() % 2 ? "x" : "y");
    BSON_APPEND_INT64(d, "u", (int64_t)(rid * 7 % 1000));
    bson_t arr;
    char k[8];
    BSON_APPEND_ARRAY_BEGIN(d, "t", &arr);
    int nt = (int)(rnd() % 4);
    for (int i = 0; i < nt; i++) {
        snprintf(k, sizeof k, "%d", i);
        BSON_APPEND_INT32(&arr, k, (int32_t)(rnd() % 6));
    }
    bson_append_array_end(d, &arr);
    return d;
}

static void add_index(world *w, const char *name, const char *p0, int d0, const char *p1, int d1,
                      bool unique, uint32_t multikey)
{
    mf_index_desc *d = &w->idx[w->nidx];
    memset(d, 0, sizeof *d);
    d->type = mf_index_type_find(""); /* the b-tree */
    d->name = (char *)name;
    d->nfields = p1 ? 2 : 1;
    w->paths[w->nidx][0] = (char *)p0;
    w->paths[w->nidx][1] = (char *)p1;
    w->desc[w->nidx][0] = d0 < 0;
    w->desc[w->nidx][1] = d1 < 0;
    d->paths = w->paths[w->nidx];
    d->desc = w->desc[w->nidx];
    d->key = bson_new();
    BSON_APPEND_INT32(d->key, p0, d0);
    if (p1)
        BSON_APPEND_INT32(d->key, p1, d1);
    d->unique = unique;
    d->is_id = strcmp(name, "_id_") == 0;
    d->multikey = multikey;
    d->expire_after = -1;
    w->nidx++;
}

/* The entries of `doc`'s keys in index `ix`, pointing at record `rid`
 * (collection write-locked). */
static int put_keys(world *w, size_t ix, const bson_t *doc, uint64_t rid, mf_error *err)
{
    uint8_t rk[8];
    mf_buf keys[16];
    mf_lsn lsn;
    int rc = 0;
    mf_record_id_encode(rid, rk);
    size_t n = doc_keys(&w->idx[ix], doc, keys);
    for (size_t k = 0; k < n; k++) {
        if (!w->idx[ix].unique)
            mf_buf_append(&keys[k], rk, 8);
        mf_op op = {.kind = MF_OP_PUT, .tree = w->idx[ix].tree, .key = keys[k].data,
                    .klen = keys[k].len, .val = rk, .vlen = 8};
        if (rc == 0)
            rc = mf_engine_write(w->e, &op, 1, &lsn, err);
        mf_buf_free(&keys[k]);
    }
    return rc;
}

static int build(world *w, mf_error *err)
{
    mf_engine_options opt = {.no_background = true, .reserve_bytes = (size_t)1 << 30};
    mf_lsn lsn;
    int rc;
    /* the same documents whichever cases ran before in this process (the
     * binary runs one case, or all in turn) */
    rnd_state = RND_SEED;
    mf_log_configure(MF_LOG_WARNING, false);
    if ((rc = mf_engine_open(mft_tmpdir(), &opt, &w->e, err)) != 0)
        return rc;
    add_index(w, "_id_", "_id", 1, NULL, 0, true, 0);
    add_index(w, "a_1_b_-1", "a", 1, "b", -1, false, 0);
    add_index(w, "b_1", "b", 1, NULL, 0, false, 0);
    add_index(w, "t_1", "t", 1, NULL, 0, false, 1);
    add_index(w, "u_1", "u", 1, NULL, 0, true, 0);
    mf_engine_catalog_lock(w->e, true);
    rc = mf_engine_coll_create(w->e, "db.c", (const uint8_t *)"", 0, 0, &w->c, NULL, &lsn, err);
    for (size_t i = 0; rc == 0 && i < w->nidx; i++)
        rc = mf_coll_index_create(w->e, w->c, w->idx[i].name, (const uint8_t *)"x", 1,
                                  &w->idx[i].tree, &lsn, err);
    mf_engine_catalog_unlock(w->e);
    if (rc)
        return rc;
    mf_coll_lock(w->c, true);
    for (uint64_t rid = 1; rc == 0 && rid <= NDOCS; rid++) {
        uint8_t rk[8];
        mf_record_id_encode(rid, rk);
        bson_t *doc = w->docs[rid] = make_doc(rid);
        mf_op op = {.kind = MF_OP_PUT, .tree = mf_coll_records(w->c), .key = rk, .klen = 8,
                    .val = bson_get_data(doc), .vlen = doc->len};
        rc = mf_engine_write(w->e, &op, 1, &lsn, err);
        for (size_t i = 0; rc == 0 && i < w->nidx; i++)
            rc = put_keys(w, i, doc, rid, err);
    }
    mf_coll_unlock(w->c);
    return rc;
}

static void teardown(world *w)
{
    mf_error err;
    for (size_t i = 0; i < w->nidx; i++)
        bson_destroy(w->idx[i].key);
    for (size_t r = 1; r <= NDOCS; r++)
        if (w->docs[r])
            bson_destroy(w->docs[r]);
    if (w->e)
        mf_engine_close(w->e, &err);
}

/* Between two rows: the scan lets go of its position and `c`'s lock is
 * dropped and taken again, as a cursor does between getMores. */
static void let_go(mf_scan *s, mf_coll *c)
{
    mf_scan_release(s);
    mf_coll_unlock(c);
    mf_coll_lock(c, false);
}

/* What one planned scan gave: its plan, and the RecordIds of the rows it
 * returned, in order. */
typedef struct scan_run {
    char stage[32], index[64];
    bool sorted;
    uint64_t rids[2 * NDOCS]; /* more than NDOCS rows: some came twice */
    size_t n;
} scan_run;

/* Plan `filter` (with `sort` and `x`) over `w`'s indexes and read every row
 * `m` passes, the scan released after each when `reseek`, into `run`.
 * Returns a message on failure (in `msg`), or NULL. */
static const char *run_scan(world *w, const char *json, const bson_t *filter, const bson_t *sort,
                            const mf_scan_extra *x, const mf_matcher *m, bool reseek,
                            scan_run *run, char *msg, size_t cap)
{
    mf_scan *s = NULL;
    mf_error err;
    bool valid = true;
    const char *fail = NULL;
    run->n = 0;
    mf_coll_lock(w->c, false);
    if (mf_scan_new_ex(w->c, w->idx, w->nidx, filter, NULL, sort, NULL, x, &s, &run->sorted,
                       &err) != 0) {
        mf_coll_unlock(w->c);
        snprintf(msg, cap, "%s: plan: %s", json, err.msg);
        return msg;
    }
    const char *used = mf_scan_index_name(s);
    snprintf(run->stage, sizeof run->stage, "%s", mf_scan_describe(s));
    snprintf(run->index, sizeof run->index, "%s", used ? used : "");
    while (!fail && valid) {
        mf_scan_row row;
        if (mf_scan_next(s, w->e, w->c, m, &row, &valid, &err) != 0) {
            snprintf(msg, cap, "%s: scan: %s", json, err.msg);
            fail = msg;
        } else if (valid && run->n == sizeof run->rids / sizeof run->rids[0]) {
            snprintf(msg, cap, "%s: more than %zu rows", json, run->n);
            fail = msg;
        } else if (valid) {
            run->rids[run->n++] = row.rid;
            if (reseek)
                let_go(s, w->c);
        }
    }
    mf_coll_unlock(w->c);
    mf_scan_free(s);
    return fail;
}

/* Run the query through the planner and a scan (released after every row
 * when `reseek`), and through brute force; the index used must be
 * `want_index` ("OR" for an OR plan, NULL for none).  Returns a message on
 * a difference, or NULL. */
static const char *check_query(world *w, const char *json, const char *sort_json,
                               const char *want_index, bool want_sorted, bool reseek)
{
    static char msg[1024];
    static scan_run run;
    static bool got[NDOCS + 1];
    bson_error_t berr;
    bson_t *filter = bson_new_from_json((const uint8_t *)json, -1, &berr);
    bson_t *sort = sort_json ? bson_new_from_json((const uint8_t *)sort_json, -1, &berr) : NULL;
    mf_matcher *m = NULL;
    mf_sort *so = NULL;
    mf_error err;
    const char *fail = NULL;
    mf_buf prev = {0};
    memset(got, 0, sizeof got);
    if (!filter || mf_matcher_parse(filter, &m, &err) != 0 ||
        (sort && mf_sort_parse(sort, &so, &err) != 0)) {
        snprintf(msg, sizeof msg, "%s: bad query", json);
        fail = msg;
        goto out;
    }
    if ((fail = run_scan(w, json, filter, sort, NULL, m, reseek, &run, msg, sizeof msg)) != NULL)
        goto out;
    const char *used = run.index[0] ? run.index : strcmp(run.stage, "OR") == 0 ? "OR" : NULL;
    if ((want_index || used) && (!want_index || !used || strcmp(want_index, used) != 0)) {
        snprintf(msg, sizeof msg, "%s: index %s, wanted %s", json, used ? used : "none",
                 want_index ? want_index : "none");
        fail = msg;
    }
    if (!fail && run.sorted != want_sorted) {
        snprintf(msg, sizeof msg, "%s: sorted %d", json, run.sorted);
        fail = msg;
    }
    for (size_t i = 0; !fail && i < run.n; i++) {
        uint64_t rid = run.rids[i];
        if (rid == 0 || rid > NDOCS || got[rid]) {
            snprintf(msg, sizeof msg, "%s: record %llu twice or unknown", json,
                     (unsigned long long)rid);
            fail = msg;
            break;
        }
        got[rid] = true;
        if (so) {
            mf_buf key = {0};
            mf_sort_key(so, w->docs[rid], &key, &err);
            size_t l = key.len < prev.len ? key.len : prev.len;
            int c = l ? memcmp(key.data, prev.data, l) : 0;
            if (i > 0 && (c < 0 || (c == 0 && key.len < prev.len))) {
                snprintf(msg, sizeof msg, "%s: out of order at record %llu", json,
                         (unsigned long long)rid);
                fail = msg;
            }
            mf_buf_free(&prev);
            prev = key;
        }
    }
    for (uint64_t r = 1; !fail && r <= NDOCS; r++) {
        bool match = mf_matcher_match(m, w->docs[r]);
        if (match != got[r]) {
            snprintf(msg, sizeof msg, "%s: record %llu %s", json, (unsigned long long)r,
                     match ? "missing" : "extra");
            fail = msg;
        }
    }
out:
    mf_buf_free(&prev);
    mf_matcher_free(m);
    mf_sort_free(so);
    if (filter)
        bson_destroy(filter);
    if (sort)
        bson_destroy(sort);
    return fail;
}

/* Run `check` on the case's world `w` as the scan is kept, then released
 * after every row; on a difference fail the case (tearing `w` down). */
#define BOTH_WAYS(check, ...)                                                             \
    do {                                                                                  \
        const char *f_ = check(&w, __VA_ARGS__, false);                                  \
        if (!f_)                                                                          \
            f_ = check(&w, __VA_ARGS__, true);                                           \
        if (f_) {                                                                         \
            mft_fail(__FILE__, __LINE__, f_);                                             \
            teardown(&w);                                                                 \
            return;                                                                       \
        }                                                                                 \
    } while (0)

#define QUERY(json, sort, index, sorted) BOTH_WAYS(check_query, json, sort, index, sorted)

MFT_CASE(plan_scans, "/query/plan/scans_match_brute_force")
{
    world w = {0};
    mf_error err;
    CHECK_INT(build(&w, &err), 0);
    /* compound, non-unique, descending second field */
    QUERY("{\"a\": 3}", NULL, "a_1_b_-1", false);
    QUERY("{\"a\": {\"$in\": [1, 3, 5]}, \"b\": {\"$gt\": 5}}", NULL, "a_1_b_-1", false);
    QUERY("{\"a\": 2, \"b\": {\"$gte\": 4, \"$lt\": 12}}", NULL, "a_1_b_-1", false);
    QUERY("{\"a\": {\"$gte\": 2, \"$lt\": 6}}", NULL, "a_1_b_-1", false);
    QUERY("{\"a\": {\"$gt\": 6}}", NULL, "a_1_b_-1", false);
    QUERY("{\"a\": null}", NULL, "a_1_b_-1", false);
    QUERY("{\"a\": 4, \"b\": {\"$lte\": \"x\"}}", NULL, "a_1_b_-1", false);
    QUERY("{\"a\": {\"$in\": [0, 7]}, \"b\": {\"$in\": [1, 2, 19, \"y\"]}}", NULL, "a_1_b_-1",
          false);
    QUERY("{\"a\": {\"$in\": []}}", NULL, "a_1_b_-1", false);
    /* index order, both directions, after an equality */
    QUERY("{\"a\": 5}", "{\"b\": -1}", "a_1_b_-1", true);
    QUERY("{\"a\": 5}", "{\"b\": 1}", "a_1_b_-1", true);
    QUERY("{\"a\": {\"$gt\": 1}}", "{\"a\": 1, \"b\": -1}", "a_1_b_-1", true);
    QUERY("{\"a\": {\"$lt\": 6}}", "{\"a\": -1, \"b\": 1}", "a_1_b_-1", true);
    QUERY("{}", "{\"b\": 1}", "b_1", true);
    QUERY("{\"b\": {\"$gt\": 3, \"$lt\": 15}}", "{\"b\": -1}", "b_1", true);
    QUERY("{\"b\": {\"$exists\": true}}", NULL, "b_1", false);
    QUERY("{\"b\": {\"$gte\": \"x\"}}", NULL, "b_1", false);
    /* multikey: each document once */
    QUERY("{\"t\": {\"$in\": [1, 2, 3]}}", NULL, "t_1", false);
    QUERY("{\"t\": {\"$gt\": 1, \"$lt\": 4}}", NULL, "t_1", false);
    QUERY("{\"t\": []}", NULL, "t_1", false);
    QUERY("{\"t\": [1, 2]}", NULL, "t_1", false);
    /* unique lookups */
    QUERY("{\"u\": {\"$in\": [7, 14, 21, 999, 70]}}", NULL, "u_1", false);
    QUERY("{\"u\": {\"$in\": [7, 14, 21]}}", "{\"u\": -1}", "u_1", true);
    QUERY("{\"_id\": {\"$in\": [3, 1, 400, 401]}}", NULL, "_id_", false);
    QUERY("{\"_id\": {\"$gt\": 390}}", "{\"_id\": -1}", "_id_", true);
    QUERY("{\"_id\": 17}", NULL, "_id_", false);
    /* a regex prefix; $elemMatch on values and on documents */
    QUERY("{\"b\": {\"$regex\": \"^x\"}}", NULL, "b_1", false);
    QUERY("{\"b\": {\"$in\": [{\"$regex\": \"^y\"}, 3, 4]}}", NULL, "b_1", false);
    QUERY("{\"t\": {\"$elemMatch\": {\"$gt\": 1, \"$lt\": 4}}}", NULL, "t_1", false);
    QUERY("{\"t\": {\"$elemMatch\": {\"$in\": [0, 5], \"$ne\": 5}}}", NULL, "t_1", false);
    /* a rooted $or of index scans, each document once, released after
     * every row too */
    QUERY("{\"$or\": [{\"a\": 1}, {\"b\": 2}]}", NULL, "OR", false);
    QUERY("{\"$or\": [{\"t\": 1}, {\"t\": {\"$gt\": 3}}, {\"_id\": 5}, {\"u\": 14}]}",
          NULL, "OR", false);
    QUERY("{\"$or\": [{\"a\": {\"$lt\": 3}}, {\"b\": {\"$regex\": \"^x\"}}]}", NULL, "OR",
          false);
    /* an index that gives the sort is taken before an OR */
    QUERY("{\"$or\": [{\"a\": {\"$lt\": 3}}, {\"b\": 7}]}", "{\"b\": 1}", "b_1", true);
    /* nothing usable */
    QUERY("{\"x\": 1}", NULL, NULL, false);
    QUERY("{\"$or\": [{\"a\": 1}, {\"x\": 2}]}", NULL, NULL, false);
    teardown(&w);
}

/* An entry for the keys of `doc_json` in index `ix`, pointing at record
 * `rid`, whose document holds other values: what a stale or damaged index
 * gives. */
static int put_stale(world *w, size_t ix, const char *doc_json, uint64_t rid, mf_error *err)
{
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)doc_json, -1, &berr);
    if (!doc)
        return mf_error_set(err, MF_BadValue, "bad JSON %s", doc_json);
    mf_coll_lock(w->c, true);
    int rc = put_keys(w, ix, doc, rid, err);
    mf_coll_unlock(w->c);
    bson_destroy(doc);
    return rc;
}

/* The index invariant (DESIGN.md section 5): an index only proposes
 * records, and each is checked against the whole filter, even where the
 * bounds alone answer it.  Entries whose keys no document holds, pointing
 * at records that do not match, must not reach the results: through
 * exact bounds on a single field, a compound key, a multikey index, a
 * unique index's point lookups and a range. */
MFT_CASE(plan_candidates_rechecked, "/query/plan/candidates_rechecked")
{
    world w = {0};
    mf_error err;
    CHECK_INT(build(&w, &err), 0);
    /* w.idx: 0 _id_, 1 a_1_b_-1, 2 b_1, 3 t_1 (multikey), 4 u_1 (unique) */
    CHECK_INT(put_stale(&w, 2, "{\"b\": 999}", 5, &err), 0);
    CHECK_INT(put_stale(&w, 1, "{\"a\": 3, \"b\": 25}", 1, &err), 0);
    CHECK_INT(put_stale(&w, 3, "{\"t\": [77]}", 3, &err), 0);
    CHECK_INT(put_stale(&w, 4, "{\"u\": 5000}", 7, &err), 0);
    CHECK_INT(put_stale(&w, 0, "{\"_id\": 999999}", 2, &err), 0);
    QUERY("{\"b\": 999}", NULL, "b_1", false);
    QUERY("{\"b\": {\"$gte\": 999, \"$lt\": 1000}}", NULL, "b_1", false);
    QUERY("{\"b\": {\"$in\": [999, 3]}}", NULL, "b_1", false);
    QUERY("{\"a\": 3, \"b\": 25}", NULL, "a_1_b_-1", false);
    QUERY("{\"t\": 77}", NULL, "t_1", false);
    QUERY("{\"u\": 5000}", NULL, "u_1", false);
    QUERY("{\"u\": {\"$in\": [5000, 14]}}", NULL, "u_1", false);
    QUERY("{\"_id\": 999999}", NULL, "_id_", false);
    teardown(&w);
}

/* A document's value of `key` as a slot of the table below: ints 0..19,
 * "x" 20, "y" 21; -1 when it has none. */
static int value_slot(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key))
        return -1;
    if (BSON_ITER_HOLDS_INT32(&it))
        return bson_iter_int32(&it);
    return bson_iter_utf8(&it, NULL)[0] == 'x' ? 20 : 21;
}

/* distinct's DISTINCT_SCAN (mf_scan_extra.distinct_key): the values of the
 * rows it returns are those of every matching document, though it returns
 * fewer rows than there are matches; released after every row as well
 * (a skip's target must survive mf_scan_release). */
static const char *check_distinct(world *w, const char *json, const char *key,
                                  const char *want_index, bool reseek)
{
    static char msg[1024];
    static scan_run run;
    bson_error_t berr;
    bson_t *filter = bson_new_from_json((const uint8_t *)json, -1, &berr);
    mf_matcher *m = NULL;
    mf_error err;
    bool seen[22] = {0}, want[22] = {0};
    size_t matches = 0;
    const char *fail = NULL;
    mf_scan_extra x = {.distinct_key = key};
    if (!filter || mf_matcher_parse(filter, &m, &err) != 0) {
        snprintf(msg, sizeof msg, "%s: bad filter", json);
        fail = msg;
    }
    if (!fail)
        fail = run_scan(w, json, filter, NULL, &x, m, reseek, &run, msg, sizeof msg);
    if (!fail && (strcmp(run.stage, "DISTINCT_SCAN") != 0 || strcmp(run.index, want_index) != 0)) {
        snprintf(msg, sizeof msg, "%s: %s over %s", json, run.stage,
                 run.index[0] ? run.index : "nothing");
        fail = msg;
    }
    for (size_t i = 0; !fail && i < run.n; i++) {
        int v = value_slot(w->docs[run.rids[i]], key);
        if (v >= 0)
            seen[v] = true;
    }
    for (uint64_t r = 1; !fail && r <= NDOCS; r++) {
        if (!mf_matcher_match(m, w->docs[r]))
            continue;
        matches++;
        int v = value_slot(w->docs[r], key);
        if (v >= 0)
            want[v] = true;
    }
    for (int v = 0; !fail && v < 22; v++)
        if (seen[v] != want[v]) {
            snprintf(msg, sizeof msg, "%s: value slot %d %s", json, v,
                     want[v] ? "missing" : "extra");
            fail = msg;
        }
    if (!fail && run.n >= matches) {
        snprintf(msg, sizeof msg, "%s: %zu rows of %zu matches: no skipping", json, run.n,
                 matches);
        fail = msg;
    }
    mf_matcher_free(m);
    if (filter)
        bson_destroy(filter);
    return fail;
}

#define DISTINCT(json, key, index) BOTH_WAYS(check_distinct, json, key, index)

MFT_CASE(plan_distinct_scan, "/query/plan/distinct_scan")
{
    world w = {0};
    mf_error err;
    CHECK_INT(build(&w, &err), 0);
    /* The simple distinct: the index whose first field is the key. */
    DISTINCT("{}", "a", "a_1_b_-1");
    DISTINCT("{}", "b", "b_1");
    /* The second field, after a point or points on the first (its
     * descending order inverted in the skip's target). */
    DISTINCT("{\"a\": 3}", "b", "a_1_b_-1");
    DISTINCT("{\"a\": {\"$in\": [1, 5, 6]}}", "b", "a_1_b_-1");
    DISTINCT("{\"b\": {\"$gte\": 4}}", "b", "b_1");
    teardown(&w);
}

MFT_CASE(plan_explain_stats, "/query/plan/explain_counts")
{
    world w = {0};
    mf_error err;
    CHECK_INT(build(&w, &err), 0);
    bson_error_t berr;
    bson_t *filter = bson_new_from_json((const uint8_t *)"{\"t\": {\"$in\": [1, 2]}}", -1, &berr);
    mf_scan *s = NULL;
    mf_matcher *m = NULL;
    bool sorted, valid = true;
    CHECK_INT(mf_matcher_parse(filter, &m, &err), 0);
    mf_coll_lock(w.c, false);
    CHECK_INT(mf_scan_new(w.c, w.idx, w.nidx, filter, NULL, NULL, NULL, &s, &sorted, &err), 0);
    uint64_t n = 0;
    while (valid) {
        mf_scan_row row;
        CHECK_INT(mf_scan_next(s, w.e, w.c, m, &row, &valid, &err), 0);
        n += valid;
    }
    mf_coll_unlock(w.c);
    const mf_scan_stats *st = mf_scan_get_stats(s);
    CHECK_INT(st->n_returned, n);
    CHECK(st->dups_tested >= st->docs_examined);
    CHECK(st->dups_dropped > 0); /* some document holds both 1 and 2 */
    CHECK_INT(st->docs_examined, n); /* the bounds are exact: every fetch matches */
    bson_t out = BSON_INITIALIZER;
    CHECK_INT(mf_scan_explain(s, true, &out), 0);
    bson_iter_t it;
    CHECK(bson_iter_init_find(&it, &out, "stage"));
    CHECK_STR(bson_iter_utf8(&it, NULL), "FETCH");
    CHECK(bson_iter_init_find(&it, &out, "nReturned"));
    CHECK_INT(bson_iter_int32(&it), n);
    CHECK(bson_iter_init(&it, &out) && bson_iter_find_descendant(&it, "inputStage.dupsDropped", &it));
    CHECK_INT(bson_iter_int32(&it), st->dups_dropped);
    bson_destroy(&out);
    mf_scan_free(s);
    mf_matcher_free(m);
    bson_destroy(filter);
    teardown(&w);
}

MFT_CASE(plan_reseek_across_writes, "/query/plan/reseek_sees_deletes")
{
    world w = {0};
    mf_error err;
    CHECK_INT(build(&w, &err), 0);
    bson_error_t berr;
    bson_t *filter = bson_new_from_json((const uint8_t *)"{\"b\": {\"$gte\": 0}}", -1, &berr);
    mf_scan *s = NULL;
    bool sorted, valid = true;
    mf_coll_lock(w.c, false);
    CHECK_INT(mf_scan_new(w.c, w.idx, w.nidx, filter, NULL, NULL, NULL, &s, &sorted, &err), 0);
    CHECK_STR(mf_scan_index_name(s), "b_1");
    mf_scan_row row;
    CHECK_INT(mf_scan_next(s, w.e, w.c, NULL, &row, &valid, &err), 0);
    CHECK(valid);
    mf_scan_release(s);
    mf_coll_unlock(w.c);
    /* delete every other record (records only: the index entries then lead
     * nowhere, and the scan must skip them) */
    mf_coll_lock(w.c, true);
    for (uint64_t r = 1; r <= NDOCS; r += 2) {
        uint8_t rk[8];
        mf_lsn lsn;
        mf_record_id_encode(r, rk);
        mf_op op = {.kind = MF_OP_DELETE, .tree = mf_coll_records(w.c), .key = rk, .klen = 8};
        CHECK_INT(mf_engine_write(w.e, &op, 1, &lsn, &err), 0);
    }
    mf_coll_unlock(w.c);
    size_t n = 1;
    mf_coll_lock(w.c, false);
    while (valid) {
        CHECK_INT(mf_scan_next(s, w.e, w.c, NULL, &row, &valid, &err), 0);
        if (valid) {
            CHECK(row.rid % 2 == 0);
            n++;
        }
        mf_scan_release(s);
    }
    mf_coll_unlock(w.c);
    CHECK(n > 50);
    mf_scan_free(s);
    bson_destroy(filter);
    teardown(&w);
}

/* ------------------------------------------------------------ collations */

#define CDOCS 240
#define STRENGTH2 "{\"locale\": \"en\", \"strength\": 2}"

typedef struct cworld {
    mf_engine *e;
    mf_coll *c;
    mf_index_desc idx[6];
    size_t nidx;
    bson_t *docs[CDOCS + 1];
    mf_collator *ci; /* en, strength 2: case-insensitive */
} cworld;

static const char *const words[] = {"apple", "Apple", "APPLE", "\xc3\xa4pple", "banana",
                                    "Banana", "cafe",  "caf\xc3\xa9", "CAFE", "b",
                                    "B",     "a",     "A",    "\xc3\xa1",   "zebra"};
#define NWORDS (sizeof words / sizeof words[0])

/* An index from its spec (JSON) as the catalog stores it. */
static int cadd(cworld *w, const char *json, mf_error *err)
{
    bson_error_t berr;
    bson_t *spec = bson_new_from_json((const uint8_t *)json, -1, &berr);
    mf_lsn lsn;
    bson_iter_t it;
    mf_tree_id tree = 0;
    int rc;
    if (!spec)
        return mf_error_set(err, MF_BadValue, "bad spec %s", json);
    bson_iter_init_find(&it, spec, "name");
    const char *name = bson_iter_utf8(&it, NULL);
    rc = mf_coll_index_create(w->e, w->c, name, bson_get_data(spec), spec->len, &tree, &lsn, err);
    if (rc == 0)
        rc = mf_index_desc_init(&w->idx[w->nidx], NULL, tree, bson_get_data(spec), spec->len, err);
    if (rc == 0)
        w->nidx++;
    bson_destroy(spec);
    return rc;
}

/* Records with string (sometimes numeric) `s` and `n`, and the indexes in
 * `specs` (NULL-terminated), keys written by mf_index_keys. */
static int cbuild(cworld *w, const char *const *specs, bool string_ids, mf_error *err)
{
    mf_engine_options opt = {.no_background = true, .reserve_bytes = (size_t)1 << 30};
    bson_error_t berr;
    bson_t *ci = bson_new_from_json((const uint8_t *)STRENGTH2, -1, &berr);
    mf_keyset ks = {0};
    mf_lsn lsn;
    int rc;
    mf_log_configure(MF_LOG_WARNING, false);
    if ((rc = mf_collator_new(ci, &w->ci, err)) != 0 ||
        (rc = mf_engine_open(mft_tmpdir(), &opt, &w->e, err)) != 0) {
        bson_destroy(ci);
        return rc;
    }
    bson_destroy(ci);
    mf_engine_catalog_lock(w->e, true);
    rc = mf_engine_coll_create(w->e, "db.c", (const uint8_t *)"", 0, 0, &w->c, NULL, &lsn, err);
    for (size_t i = 0; rc == 0 && specs[i]; i++)
        rc = cadd(w, specs[i], err);
    mf_engine_catalog_unlock(w->e);
    if (rc)
        return rc;
    mf_coll_lock(w->c, true);
    for (uint64_t rid = 1; rc == 0 && rid <= CDOCS; rid++) {
        uint8_t rk[8];
        bson_t *d = w->docs[rid] = bson_new();
        mf_record_id_encode(rid, rk);
        if (string_ids) {
            char id[32];
            snprintf(id, sizeof id, "%s-%u", words[rid % NWORDS], (unsigned)rid);
            BSON_APPEND_UTF8(d, "_id", id);
        } else
            BSON_APPEND_INT64(d, "_id", (int64_t)rid);
        if (rnd() % 8) {
            const char *word = words[rnd() % NWORDS]; /* the macro reads it twice */
            BSON_APPEND_UTF8(d, "s", word);
        }
        else
            BSON_APPEND_INT32(d, "s", (int32_t)(rnd() % 4));
        BSON_APPEND_INT32(d, "n", (int32_t)(rnd() % 5));
        mf_op op = {.kind = MF_OP_PUT, .tree = mf_coll_records(w->c), .key = rk, .klen = 8,
                    .val = bson_get_data(d), .vlen = d->len};
        rc = mf_engine_write(w->e, &op, 1, &lsn, err);
        for (size_t i = 0; rc == 0 && i < w->nidx; i++) {
            uint32_t mk;
            if ((rc = mf_index_keys(&w->idx[i], d, &ks, &mk, err)) != 0)
                break;
            for (size_t k = 0; rc == 0 && k < ks.n; k++) {
                mf_buf key = {0};
                mf_buf_append(&key, ks.keys[k].data, ks.keys[k].len);
                if (!w->idx[i].unique)
                    mf_buf_append(&key, rk, 8);
                mf_op iop = {.kind = MF_OP_PUT, .tree = w->idx[i].tree, .key = key.data,
                             .klen = key.len, .val = rk, .vlen = 8};
                rc = mf_engine_write(w->e, &iop, 1, &lsn, err);
                mf_buf_free(&key);
            }
        }
    }
    mf_coll_unlock(w->c);
    mf_keyset_free(&ks);
    return rc;
}

static void cteardown(cworld *w)
{
    mf_error err;
    for (size_t i = 0; i < w->nidx; i++)
        mf_index_desc_clear(&w->idx[i]);
    for (size_t r = 1; r <= CDOCS; r++)
        if (w->docs[r])
            bson_destroy(w->docs[r]);
    mf_collator_unref(w->ci);
    if (w->e)
        mf_engine_close(w->e, &err);
}

typedef struct cquery {
    const char *filter, *sort, *hint; /* JSON; hint: an index name */
    bool ci;                          /* the query's collation: strength 2, else simple */
    bool count_only;
    const char *want_index; /* NULL: a collection scan */
    bool want_sorted;
    size_t *nrows, *keys_only; /* out, may be NULL */
    bson_t *explain;            /* out (initialised by the caller), may be NULL */
} cquery;

/* Plan and scan `q` (released after every row when `reseek`), compared
 * with the matcher over every record under the query's collation. */
static const char *ccheck(cworld *w, const cquery *q, bool reseek)
{
    static char msg[1024];
    bson_error_t berr;
    const mf_collator *coll = q->ci ? w->ci : NULL;
    bson_t *filter = bson_new_from_json((const uint8_t *)q->filter, -1, &berr);
    bson_t *sort = q->sort ? bson_new_from_json((const uint8_t *)q->sort, -1, &berr) : NULL;
    bson_t hint_doc = BSON_INITIALIZER;
    bson_iter_t hint;
    mf_matcher *m = NULL;
    mf_sort *so = NULL;
    mf_scan *s = NULL;
    mf_error err;
    bool sorted = false, valid = true;
    static bool got[CDOCS + 1];
    size_t n = 0;
    const char *fail = NULL;
    mf_buf prev = {0};
    memset(got, 0, sizeof got);
    if (q->hint) {
        BSON_APPEND_UTF8(&hint_doc, "h", q->hint);
        bson_iter_init_find(&hint, &hint_doc, "h");
    }
    if (!filter || mf_matcher_parse_coll(filter, NULL, coll, &m, &err) != 0 ||
        (sort && mf_sort_parse_coll(sort, coll, &so, &err) != 0)) {
        snprintf(msg, sizeof msg, "%s: bad query", q->filter);
        fail = msg;
        goto out;
    }
    mf_coll_lock(w->c, false);
    if (mf_scan_new(w->c, w->idx, w->nidx, filter, q->hint ? &hint : NULL, sort, coll, &s,
                    &sorted, &err) != 0) {
        mf_coll_unlock(w->c);
        snprintf(msg, sizeof msg, "%s: plan: %s", q->filter, err.msg);
        fail = msg;
        goto out;
    }
    mf_scan_count_only(s, q->count_only);
    const char *used = mf_scan_index_name(s);
    if ((q->want_index || used) &&
        (!q->want_index || !used || strcmp(q->want_index, used) != 0)) {
        snprintf(msg, sizeof msg, "%s (ci %d): index %s, wanted %s", q->filter, q->ci,
                 used ? used : "none", q->want_index ? q->want_index : "none");
        fail = msg;
    }
    if (!fail && sorted != q->want_sorted) {
        snprintf(msg, sizeof msg, "%s (ci %d): sorted %d", q->filter, q->ci, sorted);
        fail = msg;
    }
    while (!fail && valid) {
        mf_scan_row row;
        if (mf_scan_next(s, w->e, w->c, m, &row, &valid, &err) != 0) {
            snprintf(msg, sizeof msg, "%s: scan: %s", q->filter, err.msg);
            fail = msg;
            break;
        }
        if (!valid)
            break;
        if (row.rid == 0 || row.rid > CDOCS || got[row.rid]) {
            snprintf(msg, sizeof msg, "%s: record %llu twice or unknown", q->filter,
                     (unsigned long long)row.rid);
            fail = msg;
            break;
        }
        got[row.rid] = true;
        n++;
        if (so && q->want_sorted) {
            mf_buf key = {0};
            mf_sort_key(so, w->docs[row.rid], &key, &err);
            size_t l = key.len < prev.len ? key.len : prev.len;
            int c = l ? memcmp(key.data, prev.data, l) : 0;
            if (n > 1 && (c < 0 || (c == 0 && key.len < prev.len))) {
                snprintf(msg, sizeof msg, "%s: out of order at record %llu", q->filter,
                         (unsigned long long)row.rid);
                fail = msg;
            }
            mf_buf_free(&prev);
            prev = key;
        }
        if (reseek)
            let_go(s, w->c);
    }
    mf_coll_unlock(w->c);
    for (uint64_t r = 1; !fail && r <= CDOCS; r++) {
        bool match = mf_matcher_match(m, w->docs[r]);
        if (match != got[r]) {
            snprintf(msg, sizeof msg, "%s (ci %d): record %llu %s", q->filter, q->ci,
                     (unsigned long long)r, match ? "missing" : "extra");
            fail = msg;
        }
    }
    if (!fail && q->nrows)
        *q->nrows = n;
    if (!fail && q->keys_only)
        *q->keys_only = mf_scan_get_stats(s)->keys_only;
    if (!fail && q->explain)
        mf_scan_explain(s, false, q->explain);
out:
    mf_buf_free(&prev);
    mf_scan_free(s);
    mf_matcher_free(m);
    mf_sort_free(so);
    bson_destroy(&hint_doc);
    if (filter)
        bson_destroy(filter);
    if (sort)
        bson_destroy(sort);
    return fail;
}

#define CQUERY(...)                                                                       \
    do {                                                                                  \
        cquery q_ = {__VA_ARGS__};                                                        \
        const char *f_ = ccheck(&w, &q_, false);                                          \
        if (!f_)                                                                          \
            f_ = ccheck(&w, &q_, true);                                                   \
        if (f_) {                                                                         \
            mft_fail(__FILE__, __LINE__, f_);                                             \
            cteardown(&w);                                                                \
            return;                                                                       \
        }                                                                                 \
    } while (0)

static const char *const ci_and_simple[] = {
    "{\"v\": 2, \"key\": {\"_id\": 1}, \"name\": \"_id_\"}",
    "{\"v\": 2, \"key\": {\"s\": 1}, \"name\": \"s_ci\", \"collation\": " STRENGTH2 "}",
    "{\"v\": 2, \"key\": {\"s\": 1}, \"name\": \"s_plain\"}",
    "{\"v\": 2, \"key\": {\"n\": 1, \"s\": -1}, \"name\": \"n_s_ci\", \"collation\": " STRENGTH2 "}",
    NULL};

MFT_CASE(plan_collation_choice, "/query/plan/collation/choice_and_results")
{
    cworld w = {0};
    mf_error err;
    CHECK_INT(cbuild(&w, ci_and_simple, false, &err), 0);
    /* a string predicate: only the index of the query's collation */
    CQUERY(.filter = "{\"s\": \"apple\"}", .ci = true, .want_index = "s_ci");
    CQUERY(.filter = "{\"s\": \"apple\"}", .ci = false, .want_index = "s_plain");
    CQUERY(.filter = "{\"s\": {\"$in\": [\"CAFE\", \"b\"]}}", .ci = true, .want_index = "s_ci");
    CQUERY(.filter = "{\"s\": {\"$gte\": \"B\", \"$lt\": \"c\"}}", .ci = true, .want_index = "s_ci");
    CQUERY(.filter = "{\"s\": {\"$gt\": \"b\"}}", .ci = false, .want_index = "s_plain");
    /* a number is compared alike under both: either index; the names decide */
    CQUERY(.filter = "{\"s\": 2}", .ci = false, .want_index = "s_ci");
    CQUERY(.filter = "{\"s\": {\"$lt\": 3}}", .ci = true, .want_index = "s_ci");
    /* compound: the string field's bound only under the same collation */
    CQUERY(.filter = "{\"n\": 3, \"s\": \"Banana\"}", .ci = true, .want_index = "n_s_ci");
    CQUERY(.filter = "{\"n\": 3, \"s\": \"Banana\"}", .ci = false, .want_index = "s_plain");
    /* order: only from an index of the query's collation */
    CQUERY(.filter = "{}", .sort = "{\"s\": 1}", .ci = true, .want_index = "s_ci",
           .want_sorted = true);
    CQUERY(.filter = "{}", .sort = "{\"s\": -1}", .ci = false, .want_index = "s_plain",
           .want_sorted = true);
    CQUERY(.filter = "{\"n\": 1}", .sort = "{\"s\": 1}", .ci = true, .want_index = "n_s_ci",
           .want_sorted = true);
    /* a hint to an index of another collation: obeyed, the matcher decides */
    CQUERY(.filter = "{\"s\": \"apple\"}", .hint = "s_ci", .ci = false, .want_index = "s_ci");
    CQUERY(.filter = "{\"s\": \"APPLE\"}", .hint = "s_plain", .ci = true,
           .want_index = "s_plain");
    CQUERY(.filter = "{}", .sort = "{\"s\": 1}", .hint = "s_plain", .ci = true,
           .want_index = "s_plain", .want_sorted = false);
    cteardown(&w);
}

MFT_CASE(plan_collation_no_simple_index, "/query/plan/collation/other_collation_unused")
{
    static const char *const only_ci[] = {
        "{\"v\": 2, \"key\": {\"_id\": 1}, \"name\": \"_id_\"}",
        "{\"v\": 2, \"key\": {\"s\": 1}, \"name\": \"s_ci\", \"collation\": " STRENGTH2 "}",
        NULL};
    cworld w = {0};
    mf_error err;
    CHECK_INT(cbuild(&w, only_ci, false, &err), 0);
    CQUERY(.filter = "{\"s\": \"apple\"}", .ci = false, .want_index = NULL);
    CQUERY(.filter = "{\"s\": {\"$in\": [1, \"b\"]}}", .ci = false, .want_index = NULL);
    CQUERY(.filter = "{\"s\": {\"$gt\": {\"x\": 1}}}", .ci = false, .want_index = NULL);
    CQUERY(.filter = "{\"s\": {\"$in\": [1, 3]}}", .ci = false, .want_index = "s_ci");
    CQUERY(.filter = "{\"s\": {\"$exists\": true}}", .ci = false, .want_index = "s_ci");
    CQUERY(.filter = "{}", .sort = "{\"s\": 1}", .ci = false, .want_index = NULL);
    CQUERY(.filter = "{\"s\": \"apple\"}", .ci = true, .want_index = "s_ci");
    cteardown(&w);
}

MFT_CASE(plan_collation_count_and_explain, "/query/plan/collation/count_keys_explain")
{
    cworld w = {0};
    mf_error err;
    size_t rows = 0, keys = 0, brute = 0;
    bson_iter_t it;
    CHECK_INT(cbuild(&w, ci_and_simple, false, &err), 0);
    /* The collated bounds answer {s: "apple"} exactly: counted from keys. */
    CQUERY(.filter = "{\"s\": \"apple\"}", .ci = true, .count_only = true, .want_index = "s_ci",
           .nrows = &rows, .keys_only = &keys);
    for (size_t r = 1; r <= CDOCS; r++) {
        bson_iter_t s;
        if (bson_iter_init_find(&s, w.docs[r], "s") && BSON_ITER_HOLDS_UTF8(&s) &&
            strcasecmp(bson_iter_utf8(&s, NULL), "apple") == 0)
            brute++;
    }
    CHECK(brute > 3);
    CHECK_INT(rows, brute);
    CHECK_INT(keys, brute);
    /* Through the same index under the simple collation the keys say
     * nothing exact: every row is fetched and judged. */
    rows = keys = 0;
    CQUERY(.filter = "{\"s\": \"apple\"}", .ci = false, .hint = "s_ci", .count_only = true,
           .want_index = "s_ci", .nrows = &rows, .keys_only = &keys);
    CHECK(rows > 0 && rows < brute);
    CHECK_INT(keys, 0);

    /* explain: the IXSCAN's collation after indexName, sort-key bounds */
    bson_t ex = BSON_INITIALIZER;
    CQUERY(.filter = "{\"s\": \"a\"}", .ci = true, .want_index = "s_ci", .explain = &ex);
    CHECK(bson_iter_init(&it, &ex) && bson_iter_find_descendant(&it, "inputStage.collation", &it));
    bson_t coll_doc;
    uint32_t len;
    const uint8_t *data;
    bson_iter_document(&it, &len, &data);
    bson_init_static(&coll_doc, data, len);
    char shown[512];
    mf_bsonx_to_string(&coll_doc, shown, sizeof shown);
    CHECK(strncmp(shown, "{ locale: \"en\", caseLevel: false, caseFirst: \"off\", strength: 2, ",
                  62) == 0);
    bson_iter_t f;
    const char *order[] = {"stage", "keyPattern", "indexName", "collation", "isMultiKey"};
    CHECK(bson_iter_init(&it, &ex) && bson_iter_find_descendant(&it, "inputStage", &it));
    bson_iter_recurse(&it, &f);
    for (size_t i = 0; i < 5; i++) {
        CHECK(bson_iter_next(&f));
        CHECK_STR(bson_iter_key(&f), order[i]);
    }
    CHECK(bson_iter_init(&it, &ex) &&
          bson_iter_find_descendant(&it, "inputStage.indexBounds.s.0", &it));
    mf_buf key = {0};
    char hex[128] = "", want[300];
    CHECK_INT(mf_collator_sort_key(w.ci, "A", 1, &key), 0);
    CHECK(key.len > 0 && key.len < 60);
    for (size_t i = 0; i < key.len; i++)
        snprintf(hex + 2 * i, sizeof hex - 2 * i, "%02x", key.data[i]);
    mf_buf_free(&key);
    snprintf(want, sizeof want, "[CollationKey(0x%s), CollationKey(0x%s)]", hex, hex);
    CHECK_STR(bson_iter_utf8(&it, NULL), want);
    bson_destroy(&ex);
    /* a range: the string bracket's lower edge is the empty string's key */
    bson_init(&ex);
    CQUERY(.filter = "{\"s\": {\"$lt\": \"b\"}}", .ci = true, .want_index = "s_ci",
           .explain = &ex);
    CHECK(bson_iter_init(&it, &ex) &&
          bson_iter_find_descendant(&it, "inputStage.indexBounds.s.0", &it));
    CHECK(strncmp(bson_iter_utf8(&it, NULL), "[CollationKey(0x), CollationKey(0x", 34) == 0);
    bson_destroy(&ex);
    /* the simple index shows no collation */
    bson_init(&ex);
    CQUERY(.filter = "{\"s\": \"a\"}", .ci = false, .want_index = "s_plain", .explain = &ex);
    CHECK(bson_iter_init(&it, &ex) && bson_iter_find_descendant(&it, "inputStage", &it));
    bson_iter_recurse(&it, &f);
    CHECK(!bson_iter_find(&f, "collation"));
    CHECK(bson_iter_init(&it, &ex) &&
          bson_iter_find_descendant(&it, "inputStage.indexBounds.s.0", &it));
    CHECK_STR(bson_iter_utf8(&it, NULL), "[\"a\", \"a\"]");
    bson_destroy(&ex);
    cteardown(&w);
}

MFT_CASE(plan_collation_idhack, "/query/plan/collation/id_index")
{
    static const char *const ci_id[] = {
        "{\"v\": 2, \"key\": {\"_id\": 1}, \"name\": \"_id_\", \"collation\": " STRENGTH2 "}",
        NULL};
    cworld w = {0};
    mf_error err;
    CHECK_INT(cbuild(&w, ci_id, true, &err), 0);
    /* The _id index of a case-insensitive collection: an equality on a
     * string uses it only under the same collation. */
    CQUERY(.filter = "{\"_id\": \"APPLE-1\"}", .ci = true, .want_index = "_id_");
    CQUERY(.filter = "{\"_id\": \"APPLE-1\"}", .ci = false, .want_index = NULL);
    CQUERY(.filter = "{\"_id\": 7}", .ci = false, .want_index = "_id_");
    bson_error_t berr;
    bson_t *filter = bson_new_from_json((const uint8_t *)"{\"_id\": \"cafe-22\"}", -1, &berr);
    mf_scan *s = NULL;
    bool sorted;
    mf_coll_lock(w.c, false);
    CHECK_INT(mf_scan_new(w.c, w.idx, w.nidx, filter, NULL, NULL, w.ci, &s, &sorted, &err), 0);
    mf_coll_unlock(w.c);
    CHECK_STR(mf_scan_describe(s), "IDHACK");
    mf_scan_free(s);
    mf_coll_lock(w.c, false);
    CHECK_INT(mf_scan_new(w.c, w.idx, w.nidx, filter, NULL, NULL, NULL, &s, &sorted, &err), 0);
    mf_coll_unlock(w.c);
    CHECK_STR(mf_scan_describe(s), "COLLSCAN");
    mf_scan_free(s);
    /* without descriptors the catalog's _id spec is read: its collation too */
    mf_coll_lock(w.c, false);
    CHECK_INT(mf_scan_new(w.c, NULL, 0, filter, NULL, NULL, NULL, &s, &sorted, &err), 0);
    mf_coll_unlock(w.c);
    CHECK_STR(mf_scan_describe(s), "COLLSCAN");
    mf_scan_free(s);
    mf_coll_lock(w.c, false);
    CHECK_INT(mf_scan_new(w.c, NULL, 0, filter, NULL, NULL, w.ci, &s, &sorted, &err), 0);
    mf_coll_unlock(w.c);
    CHECK_STR(mf_scan_describe(s), "IDHACK");
    mf_scan_free(s);
    bson_destroy(filter);
    cteardown(&w);
}

MFT_CASE(plan_collation_partial, "/query/plan/collation/partial_filter")
{
    static const char *const partial[] = {
        "{\"v\": 2, \"key\": {\"_id\": 1}, \"name\": \"_id_\"}",
        "{\"v\": 2, \"key\": {\"n\": 1}, \"name\": \"n_ci_partial\", \"collation\": " STRENGTH2
        ", \"partialFilterExpression\": {\"s\": {\"$gte\": \"b\"}}}",
        NULL};
    cworld w = {0};
    mf_error err;
    CHECK_INT(cbuild(&w, partial, false, &err), 0);
    /* Under the index's collation "B" >= "b" holds, so {s: "B"} implies the
     * partial filter; simple bytes would say "B" < "b". */
    CQUERY(.filter = "{\"s\": \"B\", \"n\": 2}", .ci = true, .want_index = "n_ci_partial");
    /* Under another collation the implication is not drawn over strings. */
    CQUERY(.filter = "{\"s\": \"b\", \"n\": 2}", .ci = false, .want_index = NULL);
    /* Bytes put "\xc3\xa1" (a-acute) above "b"; the collation below it: the
     * index lacks those documents and must not be used. */
    CQUERY(.filter = "{\"s\": \"\xc3\xa1\", \"n\": 2}", .ci = true, .want_index = NULL);
    CQUERY(.filter = "{\"s\": \"zebra\", \"n\": 2}", .ci = true, .want_index = "n_ci_partial");
    cteardown(&w);
}

/* ------------------------------------------------- specs and keys (index.c) */

static bson_t *json_doc(const char *json)
{
    bson_error_t berr;
    return bson_new_from_json((const uint8_t *)json, -1, &berr);
}

MFT_CASE(index_collation_specs, "/query/index/collation/specs")
{
    mf_error err;
    mf_collator *ci = NULL;
    bson_t *cs = json_doc(STRENGTH2), *in, out, id, full = BSON_INITIALIZER;
    char shown[700], want[700], fulls[400];
    bson_iter_t it;
    CHECK_INT(mf_collator_new(cs, &ci, &err), 0);
    mf_collator_to_bson(ci, &full);
    mf_bsonx_to_string(&full, fulls, sizeof fulls);
    /* a v: 2 index inherits the collection's default, spelled out, last */
    in = json_doc("{\"key\": {\"a\": 1}, \"name\": \"a_1\", \"sparse\": true}");
    CHECK_INT(mf_index_spec_normalize_coll(in, ci, &out, &err), 0);
    mf_bsonx_to_string(&out, shown, sizeof shown);
    snprintf(want, sizeof want,
             "{ v: 2, key: { a: 1 }, name: \"a_1\", sparse: true, collation: %s }", fulls);
    CHECK_STR(shown, want);
    bson_destroy(&out);
    bson_destroy(in);
    /* v: 1 cannot have one: the simple collation */
    in = json_doc("{\"key\": {\"a\": 1}, \"name\": \"a_1\", \"v\": 1}");
    CHECK_INT(mf_index_spec_normalize_coll(in, ci, &out, &err), 0);
    CHECK(!bson_iter_init_find(&it, &out, "collation"));
    bson_destroy(&out);
    bson_destroy(in);
    /* an explicit simple collation opts out */
    in = json_doc("{\"key\": {\"a\": 1}, \"name\": \"a_1\", \"collation\": {\"locale\": "
                  "\"simple\"}}");
    CHECK_INT(mf_index_spec_normalize_coll(in, ci, &out, &err), 0);
    CHECK(!bson_iter_init_find(&it, &out, "collation"));
    bson_destroy(&out);
    bson_destroy(in);
    /* the _id index takes the default, as mf_index_id_spec builds it */
    in = json_doc("{\"key\": {\"_id\": 1}, \"name\": \"_id_\"}");
    CHECK_INT(mf_index_spec_normalize_coll(in, ci, &out, &err), 0);
    mf_index_id_spec(ci, &id);
    CHECK(bson_equal(&out, &id));
    bson_destroy(&id);
    bson_destroy(&out);
    mf_index_id_spec(NULL, &id);
    mf_bsonx_to_string(&id, shown, sizeof shown);
    CHECK_STR(shown, "{ v: 2, key: { _id: 1 }, name: \"_id_\" }");
    bson_destroy(&id);
    /* ... and no other */
    CHECK_INT(mf_index_spec_normalize_coll(in, NULL, &out, &err), 0);
    bson_destroy(&out);
    bson_destroy(in);
    in = json_doc("{\"key\": {\"_id\": 1}, \"name\": \"_id_\", \"collation\": " STRENGTH2 "}");
    CHECK_INT(mf_index_spec_normalize_coll(in, NULL, &out, &err), MF_BadValue);
    snprintf(want, sizeof want,
             "The _id index must have the same collation as the collection. Index collation: "
             "%s, collection collation: { locale: \"simple\" }",
             fulls);
    CHECK_STR(err.msg, want);
    bson_destroy(&out);
    bson_destroy(in);
    in = json_doc("{\"key\": {\"_id\": 1}, \"name\": \"_id_\", \"collation\": {\"locale\": "
                  "\"simple\"}}");
    CHECK_INT(mf_index_spec_normalize_coll(in, ci, &out, &err), MF_BadValue);
    snprintf(want, sizeof want,
             "The _id index must have the same collation as the collection. Index collation: "
             "{ locale: \"simple\" }, collection collation: %s",
             fulls);
    CHECK_STR(err.msg, want);
    bson_destroy(&out);
    bson_destroy(in);
    /* a bad collation: the collator's error, prefixed as mongod */
    in = json_doc("{\"key\": {\"a\": 1}, \"name\": \"a_1\", \"collation\": {\"locale\": \"en\", "
                  "\"strength\": 9}}");
    int rc = mf_index_spec_normalize_coll(in, NULL, &out, &err);
    CHECK(rc != 0);
    CHECK(strncmp(err.msg,
                  "failed to add collation information to index spec for index creation: { key: "
                  "{ a: 1 }, name: \"a_1\", collation: { locale: \"en\", strength: 9 }, v: 2 } :: "
                  "caused by :: ",
                  148) == 0);
    bson_destroy(&out);
    bson_destroy(in);
    bson_destroy(&full);
    bson_destroy(cs);
    mf_collator_unref(ci);
}

MFT_CASE(index_collation_conflicts, "/query/index/collation/conflicts")
{
    mf_error err;
    bool same;
    bson_t a, b, c;
    bson_t *ia = json_doc("{\"key\": {\"s\": 1}, \"name\": \"s_ci\", \"collation\": " STRENGTH2 "}");
    bson_t *ib = json_doc("{\"key\": {\"s\": 1}, \"name\": \"s_1\"}");
    bson_t *ic = json_doc("{\"key\": {\"s\": 1}, \"name\": \"s_ci\"}");
    CHECK_INT(mf_index_spec_normalize(ia, &a, &err), 0);
    CHECK_INT(mf_index_spec_normalize(ib, &b, &err), 0);
    CHECK_INT(mf_index_spec_normalize(ic, &c, &err), 0);
    /* one key pattern, two collations: two indexes */
    CHECK_INT(mf_index_spec_conflict(&a, &b, &same, &err), 0);
    CHECK(!same);
    /* the same spec again: the same index */
    CHECK_INT(mf_index_spec_conflict(&a, &a, &same, &err), 0);
    CHECK(same);
    /* one name, two collations */
    CHECK_INT(mf_index_spec_conflict(&a, &c, &same, &err), 86);
    CHECK(strncmp(err.msg, "An existing index has the same name as the requested index.", 59) == 0);
    bson_destroy(&a);
    bson_destroy(&b);
    bson_destroy(&c);
    bson_destroy(ia);
    bson_destroy(ib);
    bson_destroy(ic);
}

MFT_CASE(index_collation_keys, "/query/index/collation/keys")
{
    mf_error err;
    mf_index_desc d;
    mf_keyset ka = {0}, kb = {0};
    uint32_t mk;
    static const char *const specs[] = {
        "{\"v\": 2, \"key\": {\"s\": 1, \"n\": -1}, \"name\": \"x\", \"unique\": true, "
        "\"collation\": {\"locale\": \"en\", \"strength\": 2}}",
        "{\"v\": 2, \"key\": {\"s\": 1, \"n\": -1}, \"name\": \"x\", \"unique\": true, "
        "\"collation\": {\"locale\": \"en\", \"strength\": 1}}",
        "{\"v\": 2, \"key\": {\"s\": 1, \"n\": -1}, \"name\": \"x\", \"unique\": true}"};
    /* "a" vs "A", "a" vs a-acute, arrays and documents holding them */
    static const char *const pairs[][2] = {
        {"{\"s\": \"a\", \"n\": 1}", "{\"s\": \"A\", \"n\": 1}"},
        {"{\"s\": \"a\", \"n\": 1}", "{\"s\": \"\\u00e1\", \"n\": 1}"},
        {"{\"s\": {\"x\": \"Caf\\u00e9\"}, \"n\": 1}", "{\"s\": {\"x\": \"caf\\u00e9\"}, \"n\": 1}"},
        {"{\"s\": [\"B\"], \"n\": 1}", "{\"s\": \"b\", \"n\": 1}"},
    };
    /* same key? per spec (strength 2, strength 1, simple), per pair */
    static const bool same[3][4] = {{true, false, true, true},
                                    {true, true, true, true},
                                    {false, false, false, false}};
    for (size_t i = 0; i < 3; i++) {
        bson_t *spec = json_doc(specs[i]);
        CHECK_INT(mf_index_desc_init(&d, NULL, 1, bson_get_data(spec), spec->len, &err), 0);
        CHECK((d.coll != NULL) == (i < 2));
        for (size_t p = 0; p < 4; p++) {
            bson_t *x = json_doc(pairs[p][0]), *y = json_doc(pairs[p][1]);
            CHECK_INT(mf_index_keys(&d, x, &ka, &mk, &err), 0);
            CHECK_INT(mf_index_keys(&d, y, &kb, &mk, &err), 0);
            CHECK_INT(ka.n, 1);
            CHECK_INT(kb.n, 1);
            bool eq = ka.keys[0].len == kb.keys[0].len &&
                      memcmp(ka.keys[0].data, kb.keys[0].data, ka.keys[0].len) == 0;
            if (eq != same[i][p]) {
                char m[128];
                snprintf(m, sizeof m, "spec %zu pair %zu: same key %d", i, p, eq);
                mft_fail(__FILE__, __LINE__, m);
            }
            bson_destroy(x);
            bson_destroy(y);
        }
        mf_index_desc_clear(&d);
        bson_destroy(spec);
        if (mft_failed())
            break;
    }
    mf_keyset_free(&ka);
    mf_keyset_free(&kb);
}

/* Plan `json` with plan cache `pc` (may be NULL), read every row; the
 * index the scan ended up on (after its trials) into `index`, the rows
 * into `*n`, and the documents brute force matches into `*want`. */
static int run_cached(world *w, const char *json, mf_plan_cache *pc, char *index, size_t cap,
                      size_t *n, size_t *want)
{
    mf_error err;
    bson_t *filter = json_doc(json);
    mf_matcher *m = NULL;
    mf_scan *s = NULL;
    bool sorted, valid = true, first = true;
    int rc = filter ? mf_matcher_parse(filter, &m, &err) : -1;
    *n = *want = 0;
    if (rc == 0) {
        mf_coll_lock(w->c, false);
        rc = mf_scan_new_ex(w->c, w->idx, w->nidx, filter, NULL, NULL, NULL,
                            &(mf_scan_extra){.cache = pc}, &s, &sorted, &err);
        while (rc == 0 && valid) {
            mf_scan_row row;
            rc = mf_scan_next(s, w->e, w->c, m, &row, &valid, &err);
            *n += rc == 0 && valid;
            if (first && rc == 0) { /* decided by now */
                const char *used = mf_scan_index_name(s);
                snprintf(index, cap, "%s", used ? used : "");
                first = false;
            }
            if (rc == 0 && valid)
                let_go(s, w->c); /* the trial's rows come back across getMores */
        }
        mf_coll_unlock(w->c);
    }
    for (size_t r = 1; rc == 0 && r <= NDOCS; r++) {
        bool take;
        rc = mf_matcher_eval(m, w->docs[r], NULL, &take, &err);
        *want += take;
    }
    mf_scan_free(s);
    mf_matcher_free(m);
    if (filter)
        bson_destroy(filter);
    return rc;
}

MFT_CASE(plan_trials_cache, "/query/plan/trials_and_plan_cache")
{
    /* u is unique (rid * 7 % 1000), a in 0..7.  {a: 3, u: {$gte: 990}}:
     * u_1 reads a few keys, a_1_b_-1 some 45 with few matches -- the
     * trials take u_1, though choose() ranks the equality first; its entry
     * is made inactive, and active when the next trials agree.  The same
     * shape with {$gte: 0}: the cached u_1 does not finish within ten
     * times its works, so the entry is made inactive and all run again:
     * a_1_b_-1 wins, in more works than the entry's, which keeps u_1
     * (mongod's CachedPlanStage and getNewEntryState); the next narrow
     * query's trials take u_1 again. */
    world w = {0};
    mf_error err;
    CHECK_INT(build(&w, &err), 0);
    mf_plan_cache *pc = mf_plan_cache_new();
    CHECK(pc != NULL);
    char index[64];
    size_t n, want;
    const char *narrow = "{\"a\": 3, \"u\": {\"$gte\": 990}}";
    const char *wide = "{\"a\": 3, \"u\": {\"$gte\": 0}}";
    CHECK_INT(run_cached(&w, narrow, NULL, index, sizeof index, &n, &want), 0);
    CHECK_STR(index, "u_1");
    CHECK(want > 0 && n == want);
    for (int i = 0; i < 2; i++) { /* inactive, then active */
        CHECK_INT(run_cached(&w, narrow, pc, index, sizeof index, &n, &want), 0);
        CHECK_STR(index, "u_1");
        CHECK(n == want);
    }
    for (int i = 0; i < 2; i++) { /* over the budget, then inactive */
        CHECK_INT(run_cached(&w, wide, pc, index, sizeof index, &n, &want), 0);
        CHECK_STR(index, "a_1_b_-1");
        CHECK(want > 0 && n == want);
    }
    CHECK_INT(run_cached(&w, narrow, pc, index, sizeof index, &n, &want), 0);
    CHECK_STR(index, "u_1");
    CHECK(n == want);
    mf_plan_cache_free(pc);
    teardown(&w);
}
