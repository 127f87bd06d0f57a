/*
 * plan_near.c -- a $near / $nearSphere query's plan and scan (mongod's
 * GEO_NEAR_2DSPHERE stage, geo_near.cpp), over a 2dsphere index.
 *
 * Planning.  A filter whose top-level element is {path: {$near |
 * $nearSphere | $geoNear: ...}} is answered by a 2dsphere index with a
 * geo field on `path`, for a centre on the sphere (a GeoJSON point, or a
 * legacy pair under $nearSphere: mongod's rule in QueryPlannerIXSelect).
 * None is NoQueryExecutionPlans (291) "unable to find index for $geoNear
 * query"; a hint must name such an index.  The condition's arguments are
 * mongod's (geo.h mfi_geo_near_parse), distances in meters for a GeoJSON
 * centre (the earth's radius 6378.1 km) and in radians for a legacy one.
 *
 * Scanning.  The search goes out from the centre in rings [inner, outer)
 * of growing width, from $minDistance to $maxDistance (or half the
 * earth's circumference), as mongod's stage does.  For each ring the
 * index keys in the ring's covering (with parent cells, as a 2dsphere
 * query's bounds) give candidate RecordIds; each candidate is fetched,
 * and its distance -- to the nearest point of any geo value at `path`
 * -- decides whether it belongs to this ring (the last ring includes its
 * outer edge); the ring's documents are returned in order of distance.
 * A document is in exactly one ring, so it is returned once.  A ring's
 * candidates outlive the collection lock, as a $text scan's do (fetched
 * again by RecordId, a document deleted since skipped); each returned
 * document is judged by the matcher on the rest of the filter, which the
 * caller compiled without the near condition (mf_filter_strip_near).
 * The first ring is three cells of the index's finest level wide; a ring
 * that found fewer than 300 documents doubles the next one's width.
 *
 * What differs: the fields of a compound index before the geo field
 * bound the scan only by an equality on each (else every key is read and
 * its geo part tested); mongod scans their bounds.
 */
#include "geo.h"
#include "index_type.h"
#include "keygen.h"
#include "plan_int.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EARTH_RADIUS_METERS (6378.1 * 1000)
#define RING_GROW_BELOW 300 /* mongod's: fewer results, wider next ring */

struct hit {
    uint64_t rid;
    double dist; /* radians (sphere) */
};

struct mfi_near_scan {
    mf_geo_near n;
    char *path;
    size_t field;        /* the geo field's position in the index */
    uint32_t desc_mask;  /* the fields before it: descending */
    mf_s2_params p;
    double min_rad, max_rad;
    double unit;         /* the caller's units per radian */
    double inner, step;  /* the next ring: [inner, inner + step) */
    bool rings_done;
    mf_buf prefix_key;   /* the fields before the geo one, when each has an equality */
    bool prefix_known;
    struct hit *hits;
    size_t nhits, cap, next;
    uint64_t rings;
};

void mfi_plan_near_free(struct mfi_near_scan *t)
{
    if (!t)
        return;
    free(t->path);
    mf_buf_free(&t->prefix_key);
    free(t->hits);
    free(t);
}

/* ---------------------------------------------------------- the filter */

static bool is_near_op(const char *op)
{
    return strcmp(op, "$near") == 0 || strcmp(op, "$nearSphere") == 0 ||
           strcmp(op, "$geoNear") == 0;
}

/* The top-level element of `filter` that is a near condition: {path:
 * {$near...: ...}} with the near operator first. */
static bool near_element(const bson_t *filter, bson_iter_t *out)
{
    bson_iter_t it;
    if (!filter || !bson_iter_init(&it, filter))
        return false;
    while (bson_iter_next(&it)) {
        bson_iter_t ops;
        if (bson_iter_key(&it)[0] == '$' || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
            !bson_iter_recurse(&it, &ops) || !bson_iter_next(&ops))
            continue;
        if (is_near_op(bson_iter_key(&ops)) &&
            (BSON_ITER_HOLDS_DOCUMENT(&ops) || BSON_ITER_HOLDS_ARRAY(&ops))) {
            *out = it;
            return true;
        }
    }
    return false;
}

bool mf_filter_has_near(const bson_t *filter)
{
    bson_iter_t it;
    return near_element(filter, &it);
}

int mf_filter_strip_near(const bson_t *filter, bson_t *out)
{
    bson_iter_t near, it;
    bson_init(out);
    if (!near_element(filter, &near))
        return bson_concat(out, filter) ? 0 : -1;
    bson_iter_init(&it, filter);
    while (bson_iter_next(&it))
        if (it.off != near.off && !mf_bsonx_append_iter(out, bson_iter_key(&it), -1, &it))
            return -1;
    return 0;
}

/* ---------------------------------------------------------- planning */

/* The position of the 2dsphere field `path` in `d`, or SIZE_MAX. */
static size_t geo_field_of(const mf_index_desc *d, const char *path)
{
    if (d->type != &mfi_2dsphere_type || d->hidden || d->building)
        return SIZE_MAX;
    for (size_t i = 0; i < d->nfields && i < 32; i++)
        if ((d->geo >> i & 1u) && strcmp(d->paths[i], path) == 0)
            return i;
    return SIZE_MAX;
}

static int no_index(mf_error *err)
{
    return mf_error_set(err, MF_NoQueryExecutionPlans,
                        "error processing query: planner returned error :: caused by :: unable "
                        "to find index for $geoNear query");
}

/* The equalities on the fields before the geo one, as the key prefix the
 * scan seeks to; false when one lacks an equality. */
static int prefix_of(struct mfi_near_scan *t, const mf_index_desc *d, const bson_t *filter,
                     mf_error *err)
{
    mfi_preds preds;
    int rc = mfi_preds_collect_coll(filter, d->coll, &preds, err);
    if (rc)
        return rc;
    t->prefix_known = true;
    for (size_t i = 0; i < t->field && t->prefix_known; i++) {
        const mfi_pred *eq = NULL;
        for (size_t p = 0; p < preds.n && !eq; p++)
            if (strcmp(preds.v[p].path, d->paths[i]) == 0 && preds.v[p].equality &&
                !preds.v[p].negation && preds.v[p].oil.n == 1 &&
                mfi_oil_is_points(&preds.v[p].oil))
                eq = &preds.v[p];
        if (!eq || (d->multikey >> (i < 31 ? i : 31) & 1u)) {
            t->prefix_known = false;
            break;
        }
        /* the point as the index keys it: its collation, its direction */
        if (mf_bsonx_key_append_value_coll(&t->prefix_key, &eq->oil.v[0].lo_v, d->desc[i],
                                           d->coll) != 0)
            rc = oom(err);
    }
    mfi_preds_free(&preds);
    return rc;
}

int mfi_plan_near(mf_scan *s, const mf_index_desc *idx, size_t nidx, const bson_t *filter,
                  const char *hint_name, mf_error *err)
{
    bson_iter_t el;
    if (!near_element(filter, &el))
        return 0;
    uint32_t len;
    const uint8_t *data;
    bson_t section;
    bson_iter_document(&el, &len, &data);
    bson_init_static(&section, data, len);
    struct mfi_near_scan *t = calloc(1, sizeof *t);
    if (!t)
        return oom(err);
    s->near = t;
    s->kind = P_NEAR;
    int rc = mfi_geo_near_parse(&section, &t->n, err);
    if (rc)
        return rc;
    if (!(t->path = strdup(bson_iter_key(&el))))
        return oom(err);
    const mf_index_desc *d = NULL;
    for (size_t i = 0; i < nidx && !d && t->n.sphere; i++) {
        if (hint_name && strcmp(idx[i].name, hint_name) != 0)
            continue;
        if ((t->field = geo_field_of(&idx[i], t->path)) != SIZE_MAX)
            d = &idx[i];
    }
    if (!d)
        return no_index(err);
    if (d->kind)
        t->p = *(const mf_s2_params *)d->kind;
    else
        mfi_geo_s2_defaults(&t->p);
    t->unit = t->n.radians ? 1.0 : EARTH_RADIUS_METERS;
    t->min_rad = t->n.min_distance / t->unit;
    t->max_rad = t->n.max_distance >= DBL_MAX ? M_PI : fmin(t->n.max_distance / t->unit, M_PI);
    t->inner = t->min_rad;
    t->step = 3 * mfi_geo_cell_edge(t->p.finest);
    t->rings_done = t->min_rad > t->max_rad;
    for (size_t i = 0; i < t->field; i++)
        if (d->desc[i])
            t->desc_mask |= 1u << i;
    if ((rc = prefix_of(t, d, filter, err)) != 0)
        return rc;
    /* what explain shows of the index (scan_index, as an IXSCAN's) */
    s->ix.tree = d->tree;
    s->ix.multikey = d->multikey;
    s->ix.nfields = d->nfields;
    s->ix.unique = d->unique;
    s->ix.sparse = d->sparse;
    s->ix.partial = d->partial != NULL;
    s->ix.geo = d->geo;
    s->ix.type = d->type;
    if (!(s->ix.name = strdup(d->name)) || !(s->ix.key = bson_copy(d->key)) ||
        !(s->ix.paths = calloc(d->nfields, sizeof *s->ix.paths)) ||
        !(s->ix.desc = calloc(d->nfields, sizeof *s->ix.desc)))
        return oom(err);
    for (size_t i = 0; i < d->nfields; i++) {
        s->ix.desc[i] = d->desc[i];
        if (!(s->ix.paths[i] = strdup(d->paths[i])))
            return oom(err);
    }
    return 0;
}

/* ---------------------------------------------------------- scanning */

/* The encoded geo part of index key `k` (after the fields before it). */
static bool geo_part(const struct mfi_near_scan *t, const uint8_t *k, size_t kl,
                     const uint8_t **g, size_t *gl)
{
    size_t off = 0;
    for (size_t i = 0; i < t->field; i++) {
        size_t n = mf_bsonx_key_value_len(k + off, kl - off, t->desc_mask >> i & 1u);
        if (n == 0)
            return false;
        off += n;
    }
    size_t n = mf_bsonx_key_value_len(k + off, kl - off, false);
    if (n == 0)
        return false;
    *g = k + off;
    *gl = n;
    return true;
}

static int cmp_enc(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int enc_int64(mf_buf *out, int64_t v)
{
    bson_value_t x = {.value_type = BSON_TYPE_INT64, .value.v_int64 = v};
    out->len = 0;
    return mf_bsonx_key_append_value(out, &x, false);
}

static int push_hit(struct mfi_near_scan *t, uint64_t rid)
{
    if (t->nhits == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        struct hit *h = realloc(t->hits, cap * sizeof *h);
        if (!h)
            return -1;
        t->hits = h;
        t->cap = cap;
    }
    t->hits[t->nhits++] = (struct hit){rid, 0};
    return 0;
}

/* The RecordIds of the index keys in the ring's cells, into t->hits. */
static int ring_keys(mf_scan *s, mf_btree *tree, const mf_geo_interval *v, size_t n,
                     mf_error *err)
{
    struct mfi_near_scan *t = s->near;
    mf_buf lo = {0}, hi = {0}, start = {0};
    int rc = 0;
    /* with the prefix known, one seek per interval; else one pass over the
     * whole index, each key's geo part tested */
    size_t passes = t->prefix_known ? n : 1;
    for (size_t i = 0; rc == 0 && i < passes; i++) {
        mf_cursor cur;
        bool valid;
        start.len = 0;
        if (t->prefix_known &&
            (enc_int64(&lo, v[i].lo) != 0 || enc_int64(&hi, v[i].hi) != 0 ||
             mf_buf_append(&start, t->prefix_key.data, t->prefix_key.len) != 0 ||
             mf_buf_append(&start, lo.data, lo.len) != 0)) {
            rc = oom(err);
            break;
        }
        mf_cursor_init(&cur, tree);
        s->stats.seeks++;
        rc = mf_cursor_seek(&cur, start.data, start.len, false, &valid, err);
        while (rc == 0 && valid) {
            const uint8_t *k, *val, *g;
            size_t kl, vl, gl;
            mf_cursor_key(&cur, &k, &kl);
            if (t->prefix_known && (kl < t->prefix_key.len ||
                                    memcmp(k, t->prefix_key.data, t->prefix_key.len) != 0))
                break;
            s->stats.keys_examined++;
            bool in = geo_part(t, k, kl, &g, &gl);
            if (in && t->prefix_known) {
                if (cmp_enc(g, gl, hi.data, hi.len) > 0)
                    break;
            } else if (in) {
                /* the intervals are sorted and disjoint: binary search */
                size_t a = 0, b = n;
                in = false;
                while (a < b && !in) {
                    size_t m = (a + b) / 2;
                    if (enc_int64(&lo, v[m].lo) != 0 || enc_int64(&hi, v[m].hi) != 0) {
                        rc = oom(err);
                        break;
                    }
                    if (cmp_enc(g, gl, lo.data, lo.len) < 0)
                        b = m;
                    else if (cmp_enc(g, gl, hi.data, hi.len) > 0)
                        a = m + 1;
                    else
                        in = true;
                }
            }
            mf_cursor_value(&cur, &val, &vl);
            if (rc == 0 && in && vl == 8 && push_hit(t, get_be64(val)) != 0)
                rc = oom(err);
            if (rc == 0)
                rc = mf_cursor_next(&cur, &valid, err);
        }
    }
    mf_buf_free(&lo);
    mf_buf_free(&hi);
    mf_buf_free(&start);
    return rc;
}

static int cmp_rid(const void *a, const void *b)
{
    const struct hit *x = a, *y = b;
    return (x->rid > y->rid) - (x->rid < y->rid);
}

static int cmp_dist(const void *a, const void *b)
{
    const struct hit *x = a, *y = b;
    if (x->dist != y->dist)
        return (x->dist > y->dist) - (x->dist < y->dist);
    return (x->rid > y->rid) - (x->rid < y->rid);
}

typedef struct nearest {
    const mf_geo_near *n;
    double best;
    bool any;
    bson_iter_t at; /* the value nearest */
} nearest;

static int nearest_value(void *arg, const bson_iter_t *v)
{
    nearest *x = arg;
    double d;
    if (mfi_geo_near_distance(x->n, v, &d) && (!x->any || d < x->best)) {
        x->best = d;
        x->any = true;
        x->at = *v;
    }
    return 0;
}

int mf_scan_near_loc(const mf_scan *s, const bson_t *doc, bson_t *out)
{
    bson_init(out);
    if (!s || s->kind != P_NEAR)
        return 0;
    nearest x = {.n = &s->near->n};
    bool through = false;
    mfi_path_elements(doc, s->near->path, nearest_value, &x, &through);
    if (x.any && !mf_bsonx_append_iter(out, "", 0, &x.at))
        return -1;
    return 0;
}

bool mfi_near_distance(const mf_geo_near *n, const char *path, const bson_t *doc, double *out)
{
    nearest x = {.n = n};
    bool through = false;
    mfi_path_elements(doc, path, nearest_value, &x, &through);
    *out = x.best;
    return x.any;
}

/* Search the next ring: its documents, by distance, into t->hits. */
static int next_ring(mf_scan *s, mf_engine *e, mf_coll *c, mf_error *err)
{
    struct mfi_near_scan *t = s->near;
    mf_btree *tree = mf_engine_tree(e, s->ix.tree);
    mf_btree *records = mf_engine_tree(e, mf_coll_records(c));
    if (!tree || !records)
        return mf_error_set(err, MF_InternalError, "$near over %s: its tree is gone",
                            s->ix.name);
    double inner = t->inner, outer = inner + t->step;
    bool last = outer >= t->max_rad;
    if (last)
        outer = t->max_rad;
    t->nhits = t->next = 0;
    t->rings++;
    mf_geo_interval *v = NULL;
    size_t n = 0;
    int rc = mfi_geo_ring_cells(&t->n, inner, outer, &t->p, &v, &n) != 0 ? oom(err) : 0;
    if (rc == 0 && n)
        rc = ring_keys(s, tree, v, n, err);
    free(v);
    if (rc)
        return rc;
    /* one candidate per document, its distance from its stored values */
    qsort(t->hits, t->nhits, sizeof *t->hits, cmp_rid);
    size_t w = 0;
    for (size_t r = 0; r < t->nhits; r++) {
        if (w && t->hits[w - 1].rid == t->hits[r].rid)
            continue;
        uint8_t rid[8];
        const uint8_t *val;
        size_t vl;
        bool found;
        bson_t doc;
        put_be64(rid, t->hits[r].rid);
        if ((rc = mf_btree_get(records, rid, 8, &found, &val, &vl, err)) != 0)
            return rc;
        if (!found || !bson_init_static(&doc, val, vl))
            continue;
        s->stats.docs_examined++;
        double d;
        if (!mfi_near_distance(&t->n, t->path, &doc, &d))
            continue;
        if (d < inner || d < t->min_rad || d > t->max_rad || (d >= outer && !last))
            continue;
        t->hits[w++] = (struct hit){t->hits[r].rid, d};
    }
    t->nhits = w;
    qsort(t->hits, t->nhits, sizeof *t->hits, cmp_dist);
    if (t->nhits < RING_GROW_BELOW)
        t->step *= 2;
    t->inner = outer;
    t->rings_done = last;
    return 0;
}

int mfi_plan_near_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m,
                       mf_scan_row *row, bool *valid, mf_error *err)
{
    struct mfi_near_scan *t = s->near;
    int rc;
    *valid = false;
    mf_btree *records = mf_engine_tree(e, mf_coll_records(c));
    if (!records)
        return mf_error_set(err, MF_InternalError, "the collection's records are gone");
    for (;;) {
        if (s->deadline && (rc = mf_deadline_check(s->deadline, err)) != 0)
            return rc;
        if (t->next >= t->nhits) {
            if (t->rings_done)
                break;
            if ((rc = next_ring(s, e, c, err)) != 0)
                return rc;
            continue;
        }
        s->stats.works++;
        const struct hit *h = &t->hits[t->next++];
        uint8_t rid[8];
        const uint8_t *v;
        size_t vl;
        bool found, take = true;
        put_be64(rid, h->rid);
        if ((rc = mf_btree_get(records, rid, 8, &found, &v, &vl, err)) != 0)
            return rc;
        if (!found)
            continue; /* deleted since the ring was read */
        row->rid = h->rid;
        row->pos = -1;
        if (!bson_init_static(&row->doc, v, vl))
            return mf_error_set(err, MF_DataCorruption, "record %llu is not a document",
                                (unsigned long long)row->rid);
        row->data = v;
        row->dist = h->dist * t->unit;
        if (m && (rc = mf_matcher_eval(m, &row->doc, s->want_pos ? &row->pos : NULL, &take,
                                       err)) != 0)
            return rc;
        if (take) {
            *valid = true;
            return 0;
        }
    }
    s->eof = true;
    return 0;
}

const mf_geo_near *mfi_plan_near_query(const mf_scan *s, const char **path)
{
    if (!s || !s->near)
        return NULL;
    *path = s->near->path;
    return &s->near->n;
}

/* ------------------------------------------------------------- explain */

int mfi_plan_near_explain(const mf_scan *s, bool stats, bson_t *out)
{
    const struct mfi_near_scan *t = s->near;
    BSON_APPEND_UTF8(out, "stage", "GEO_NEAR_2DSPHERE");
    if (stats) {
        BSON_APPEND_INT32(out, "nReturned", (int32_t)s->stats.n_returned);
        BSON_APPEND_INT32(out, "executionTimeMillisEstimate",
                          (int32_t)(s->stats.time_ns / 1000000u));
        BSON_APPEND_INT32(out, "works", (int32_t)(s->stats.works + 1));
        BSON_APPEND_INT32(out, "advanced", (int32_t)s->stats.n_returned);
        BSON_APPEND_BOOL(out, "isEOF", s->eof);
        BSON_APPEND_INT32(out, "searchIntervals", (int32_t)t->rings);
        BSON_APPEND_INT32(out, "keysExamined", (int32_t)s->stats.keys_examined);
        BSON_APPEND_INT32(out, "docsExamined", (int32_t)s->stats.docs_examined);
    }
    BSON_APPEND_DOCUMENT(out, "keyPattern", s->ix.key);
    BSON_APPEND_UTF8(out, "indexName", s->ix.name);
    BSON_APPEND_INT32(out, "indexVersion", 2);
    return 0;
}
