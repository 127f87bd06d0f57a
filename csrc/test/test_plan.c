/* Cases for csrc/query/plan.c over real trees: a collection and index trees
 * written through the engine (index keys built here by a small reference:
 * top-level fields, one key per array element, missing as null, [] as
 * undefined), then scans whose results are compared with a brute-force
 * filter over every record -- compound ranges, descending fields, the
 * non-unique RecordId suffix, multikey deduplication, unique point lookups,
 * and re-seeking after every row. */
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

static uint64_t rnd_state = 88172645463325252ull;
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

static int build(world *w, mf_error *err)
{
    mf_engine_options opt = {.no_background = true, .reserve_bytes = (size_t)1 << 30};
    mf_lsn lsn;
    int rc;
    mf_log_configure(MF_LOG_WARNING, false);
    if ((rc = mf_engine_open(mft_tmpdir(), &opt, &w->e, err)) != 0)
        return rc;
    add_index(w, "_id_", "_id", 1, NULL, 0, true, 0);
    add_index(w, "a_1_b_-1", "a", 1, "b", -1, false, 0);
    add_index(w, "b_1", "b", 1, NULL, 0, false, 0);
    add_index(w, "t_1", "t", 1, NULL, 0, false, 1);
    add_index(w, "u_1", "u", 1, NULL, 0, true, 0);
    mf_engine_catalog_lock(w->e, true);
    rc = mf_engine_coll_create(w->e, "db.c", (const uint8_t *)"", 0, &w->c, &lsn, err);
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
        for (size_t i = 0; rc == 0 && i < w->nidx; i++) {
            mf_buf keys[16];
            size_t n = doc_keys(&w->idx[i], doc, keys);
            for (size_t k = 0; k < n; k++) {
                if (!w->idx[i].unique)
                    mf_buf_append(&keys[k], rk, 8);
                mf_op iop = {.kind = MF_OP_PUT, .tree = w->idx[i].tree, .key = keys[k].data,
                             .klen = keys[k].len, .val = rk, .vlen = 8};
                if (rc == 0)
                    rc = mf_engine_write(w->e, &iop, 1, &lsn, err);
                mf_buf_free(&keys[k]);
            }
        }
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

/* Run the query through the planner and a scan (released after every row
 * when `reseek`), and through brute force; `*index` gets the index used.
 * Returns a message on a difference, or NULL. */
static const char *check_query(world *w, const char *json, const char *sort_json,
                               const char *want_index, bool want_sorted, bool reseek)
{
    static char msg[1024];
    bson_error_t berr;
    bson_t *filter = bson_new_from_json((const uint8_t *)json, -1, &berr);
    bson_t *sort = sort_json ? bson_new_from_json((const uint8_t *)sort_json, -1, &berr) : NULL;
    mf_matcher *m = NULL;
    mf_scan *s = NULL;
    mf_sort *so = NULL;
    mf_error err;
    bool sorted = false, valid = true;
    static bool got[NDOCS + 1];
    size_t n = 0, want = 0;
    const char *fail = NULL;
    mf_buf prev = {0};
    memset(got, 0, sizeof got);
    if (!filter || mf_matcher_parse(filter, &m, &err) != 0 ||
        (sort && mf_sort_parse(sort, &so, &err) != 0)) {
        snprintf(msg, sizeof msg, "%s: bad query", json);
        fail = msg;
        goto out;
    }
    mf_coll_lock(w->c, false);
    if (mf_scan_new(w->c, w->idx, w->nidx, filter, NULL, sort, NULL, &s, &sorted, &err) != 0) {
        mf_coll_unlock(w->c);
        snprintf(msg, sizeof msg, "%s: plan: %s", json, err.msg);
        fail = msg;
        goto out;
    }
    const char *used = mf_scan_index_name(s);
    if ((want_index || used) && (!want_index || !used || strcmp(want_index, used) != 0)) {
        snprintf(msg, sizeof msg, "%s: index %s, wanted %s", json, used ? used : "none",
                 want_index ? want_index : "none");
        fail = msg;
    }
    if (!fail && sorted != want_sorted) {
        snprintf(msg, sizeof msg, "%s: sorted %d", json, sorted);
        fail = msg;
    }
    while (!fail && valid) {
        mf_scan_row row;
        if (mf_scan_next(s, w->e, w->c, m, &row, &valid, &err) != 0) {
            snprintf(msg, sizeof msg, "%s: scan: %s", json, err.msg);
            fail = msg;
            break;
        }
        if (!valid)
            break;
        if (row.rid == 0 || row.rid > NDOCS || got[row.rid]) {
            snprintf(msg, sizeof msg, "%s: record %llu twice or unknown", json,
                     (unsigned long long)row.rid);
            fail = msg;
            break;
        }
        got[row.rid] = true;
        n++;
        if (so) {
            mf_buf key = {0};
            mf_sort_key(so, w->docs[row.rid], &key, &err);
            size_t l = key.len < prev.len ? key.len : prev.len;
            int c = l ? memcmp(key.data, prev.data, l) : 0;
            if (n > 1 && (c < 0 || (c == 0 && key.len < prev.len))) {
                snprintf(msg, sizeof msg, "%s: out of order at record %llu", json,
                         (unsigned long long)row.rid);
                fail = msg;
            }
            mf_buf_free(&prev);
            prev = key;
        }
        if (reseek) {
            mf_scan_release(s);
            mf_coll_unlock(w->c);
            mf_coll_lock(w->c, false);
        }
    }
    mf_coll_unlock(w->c);
    for (uint64_t r = 1; !fail && r <= NDOCS; r++) {
        bool match = mf_matcher_match(m, w->docs[r]);
        want += match;
        if (match != got[r]) {
            snprintf(msg, sizeof msg, "%s: record %llu %s", json, (unsigned long long)r,
                     match ? "missing" : "extra");
            fail = msg;
        }
    }
    (void)want;
out:
    mf_buf_free(&prev);
    mf_scan_free(s);
    mf_matcher_free(m);
    mf_sort_free(so);
    if (filter)
        bson_destroy(filter);
    if (sort)
        bson_destroy(sort);
    return fail;
}

#define QUERY(json, sort, index, sorted)                                                  \
    do {                                                                                  \
        const char *f_ = check_query(&w, json, sort, index, sorted, false);              \
        if (!f_)                                                                          \
            f_ = check_query(&w, json, sort, index, sorted, true);                       \
        if (f_) {                                                                         \
            mft_fail(__FILE__, __LINE__, f_);                                             \
            teardown(&w);                                                                 \
            return;                                                                       \
        }                                                                                 \
    } while (0)

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
    /* nothing usable */
    QUERY("{\"x\": 1}", NULL, NULL, false);
    QUERY("{\"$or\": [{\"a\": 1}, {\"b\": 2}]}", NULL, NULL, false);
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
