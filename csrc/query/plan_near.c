/*
 * plan_near.c -- a $near / $nearSphere query's plan and scan, over a
 * 2dsphere index (mongod's GEO_NEAR_2DSPHERE stage, geo_near.cpp) or a
 * 2d index (GEO_NEAR_2D).
 *
 * Planning.  A filter whose top-level element is {path: {$near |
 * $nearSphere | $geoNear: ...}} is answered by an index with a geo field
 * on `path` that suits the centre, by mongod's rule in
 * QueryPlannerIXSelect: a 2dsphere index for a centre on the sphere (a
 * GeoJSON point, or a legacy pair under $nearSphere); a 2d index for a
 * flat centre (a legacy pair under $near) or one that does not wrap (any
 * centre under $nearSphere).  None is NoQueryExecutionPlans (291)
 * "unable to find index for $geoNear query"; a hint must name such an
 * index.  The condition's arguments are mongod's (geo.h
 * mfi_geo_near_parse): distances in meters for a GeoJSON centre (the
 * earth's radius 6378.1 km), in radians for a legacy one under
 * $nearSphere, in the plane's units for a legacy one under $near.
 *
 * Scanning a 2dsphere index.  The search goes out from the centre in rings [inner, outer)
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
 *
 * Scanning a 2d index, as mongod's GeoNear2DStage.  A density estimate
 * first: the cells of the centre's vertex neighbours (index_2d.c
 * mfi_2d_density_bounds), from the finest level coarser, until one holds
 * a key (or they hold the whole search); three of that level's cell
 * edges are the first ring's width (in meters on the sphere, at most
 * 20 km).  Each ring [inner, outer) is covered by at most 16 cells, less
 * the cells scanned before (so no key is read twice); every RecordId
 * found is fetched once and its distance computed, and it waits in a
 * buffer (mongod's _resultBuffer) until the ring its distance falls in:
 * a document found in a ring nearer than its own is kept for that one,
 * one found beyond its own ring (it has been returned, or lies within
 * $minDistance) is dropped.  A flat search keeps only documents with a
 * point in the whole annulus (mongod's TwoDPtInAnnulusExpression), and
 * widens its first inner and last outer radius by mongod's epsilon; a
 * spherical one measures in meters.  The width doubles after a ring
 * that returned fewer than 300 documents and halves after one that
 * returned more than 600, never below half a cell's diagonal.  Other
 * fields of a compound 2d index bound nothing; the matcher judges them.
 */
#include "geo.h"
#include "geohash.h"
#include "index_type.h"
#include "keygen.h"
#include "plan_int.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EARTH_RADIUS_METERS (6378.1 * 1000)
#define MAX_EARTH_METERS (M_PI * EARTH_RADIUS_METERS)
#define METERS_PER_DEGREE (2 * M_PI * EARTH_RADIUS_METERS / 360)
#define RING_GROW_BELOW 300   /* mongod's: fewer results, wider next ring */
#define RING_SHRINK_ABOVE 600 /* more, narrower (2d) */

struct hit {
    uint64_t rid;
    double dist; /* 2dsphere: radians; 2d: the plane's units, or meters */
};

/* What a search over a 2d index keeps (GeoNear2DStage's). */
struct twod {
    mf_index_desc d;     /* holds only the converter: what mfi_2d_* read */
    mfi_ghconv conv;
    mfi_2d_scanned *scanned;
    double full_inner, full_outer; /* the plane's units, or meters */
    double cur_outer;    /* the outer radius of the last ring */
    double inc, min_inc; /* the next ring's width, and its least */
    bool estimated;      /* the density estimate is made */
    uint64_t returned;   /* documents the last ring returned */
    struct hit *pend;    /* found, their ring not reached: by distance */
    size_t npend, pcap;
};

struct mfi_near_scan {
    mf_geo_near n;
    char *path;
    size_t field;        /* the geo field's position in the index */
    uint32_t desc_mask;  /* the fields before it: descending */
    mf_s2_params p;
    double min_rad, max_rad;
    double unit;         /* the caller's units per radian */
    double out_scale;    /* a hit's distance to the caller's units */
    struct twod *g2;     /* over a 2d index, else NULL */
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
    if (t->g2) {
        mfi_2d_scanned_free(t->g2->scanned);
        free(t->g2->pend);
        free(t->g2);
    }
    free(t->hits);
    free(t);
}

/* ---------------------------------------------------------- the filter */

static bool is_near_op(const char *op)
{
    return strcmp(op, "$near") == 0 || strcmp(op, "$nearSphere") == 0 ||
           strcmp(op, "$geoNear") == 0;
}

/* Whether `it` is a near condition's operator document: {$near...: ...}
 * with the near operator first. */
static bool is_near_section(const bson_iter_t *it)
{
    bson_iter_t ops;
    return BSON_ITER_HOLDS_DOCUMENT(it) && bson_iter_recurse(it, &ops) && bson_iter_next(&ops) &&
           is_near_op(bson_iter_key(&ops)) &&
           (BSON_ITER_HOLDS_DOCUMENT(&ops) || BSON_ITER_HOLDS_ARRAY(&ops));
}

/* Whether the clauses of the logical operator `it` are the top level's,
 * once mongod's optimizer has normalised the filter: those of a $and
 * (flattened into the top-level AND), and the one clause of a $or (which
 * replaces it). */
static bool joins_top_level(const bson_iter_t *it)
{
    bson_iter_t kids;
    const char *k = bson_iter_key(it);
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return false;
    if (strcmp(k, "$and") == 0)
        return true;
    if (strcmp(k, "$or") != 0 || !bson_iter_recurse(it, &kids))
        return false;
    int n = 0;
    while (bson_iter_next(&kids))
        n++;
    return n == 1;
}

/* The element of `filter` that is a near condition at its top level (a
 * field of it, or of a clause of a $and there): {path: {$near...: ...}}. */
static bool near_element(const bson_t *filter, bson_iter_t *out)
{
    bson_iter_t it, kids;
    bson_t clause;
    if (!filter || !bson_iter_init(&it, filter))
        return false;
    while (bson_iter_next(&it)) {
        if (bson_iter_key(&it)[0] == '$') {
            if (joins_top_level(&it) && bson_iter_recurse(&it, &kids))
                while (bson_iter_next(&kids))
                    if (mf_bsonx_doc_view(&kids, &clause) && near_element(&clause, out))
                        return true;
            continue;
        }
        if (is_near_section(&it)) {
            *out = it;
            return true;
        }
    }
    return false;
}

/* How many near conditions `filter` holds, anywhere (mongod's
 * countNodes(GEO_NEAR)): in its fields, its logical operators' clauses,
 * and the operator documents of $elemMatch and $not. */
static size_t count_near(const bson_t *filter)
{
    bson_iter_t it, kids, ops;
    bson_t sub;
    size_t n = 0;
    if (!bson_iter_init(&it, filter))
        return 0;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (is_near_op(k) && (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it))) {
            n++; /* in an operator document: {$not: {$near: ...}} */
        } else if (k[0] == '$') {
            if ((strcmp(k, "$and") == 0 || strcmp(k, "$or") == 0 || strcmp(k, "$nor") == 0) &&
                BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &kids))
                while (bson_iter_next(&kids))
                    if (mf_bsonx_doc_view(&kids, &sub))
                        n += count_near(&sub);
            /* an operator document's own: {$not: {$elemMatch: {...}}} */
            if ((strcmp(k, "$elemMatch") == 0 || strcmp(k, "$not") == 0) &&
                mf_bsonx_doc_view(&it, &sub))
                n += count_near(&sub);
        } else if (is_near_section(&it)) {
            n++;
        } else if (BSON_ITER_HOLDS_DOCUMENT(&it) && bson_iter_recurse(&it, &ops)) {
            while (bson_iter_next(&ops))
                if ((strcmp(bson_iter_key(&ops), "$elemMatch") == 0 ||
                     strcmp(bson_iter_key(&ops), "$not") == 0) &&
                    mf_bsonx_doc_view(&ops, &sub))
                    n += count_near(&sub);
        }
    }
    return n;
}

bool mf_filter_any_near(const bson_t *filter)
{
    return filter && count_near(filter) > 0;
}

bool mf_filter_has_near(const bson_t *filter)
{
    bson_iter_t it;
    return near_element(filter, &it);
}

int mf_filter_near_check(const bson_t *filter, bool text, bool natural_sort, bool natural_hint,
                         mf_error *err)
{
    bson_iter_t el;
    size_t n = filter ? count_near(filter) : 0;
    if (n == 0)
        return 0;
    if (n > 1)
        return mf_error_set(err, MF_BadValue, "Too many geoNear expressions");
    if (!near_element(filter, &el))
        return mf_error_set(err, MF_BadValue, "geoNear must be top-level expr");
    if (natural_sort)
        return mf_error_set(err, MF_BadValue,
                            "geoNear expression not allowed with $natural sort order");
    if (natural_hint)
        return mf_error_set(err, MF_BadValue, "geoNear expression not allowed with $natural hint");
    if (text)
        return mf_error_set(err, MF_BadValue, "text and geoNear not allowed in same query");
    return 0;
}

/* `in` without the element whose key is at `near_key`, found in it or in
 * its top-level $and / one-clause $or, into `out` (initialised by the
 * caller). */
static bool strip(const bson_t *in, const char *near_key, bson_t *out)
{
    bson_iter_t it, kids;
    bson_t clause, arr, rest;
    bson_iter_init(&it, in);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (k == near_key)
            continue;
        if (k[0] != '$' || !joins_top_level(&it) || !bson_iter_recurse(&it, &kids)) {
            if (!mf_bsonx_append_iter(out, k, -1, &it))
                return false;
            continue;
        }
        if (!bson_append_array_begin(out, k, -1, &arr))
            return false;
        for (uint32_t i = 0; bson_iter_next(&kids); i++) {
            char key[16];
            const char *kk;
            bson_uint32_to_string(i, &kk, key, sizeof key);
            bool ok;
            if (mf_bsonx_doc_view(&kids, &clause)) {
                bson_init(&rest);
                ok = strip(&clause, near_key, &rest) && bson_append_document(&arr, kk, -1, &rest);
                bson_destroy(&rest);
            } else {
                ok = mf_bsonx_append_iter(&arr, kk, -1, &kids);
            }
            if (!ok)
                return false;
        }
        if (!bson_append_array_end(out, &arr))
            return false;
    }
    return true;
}

int mf_filter_strip_near(const bson_t *filter, bson_t *out)
{
    bson_iter_t near;
    bson_init(out);
    if (!near_element(filter, &near))
        return bson_concat(out, filter) ? 0 : -1;
    return strip(filter, bson_iter_key(&near), out) ? 0 : -1;
}

/* ---------------------------------------------------------- planning */

/* The position in `d` of its geo field on `path` when `d` suits the
 * centre of `n`, or SIZE_MAX. */
static size_t geo_field_of(const mf_index_desc *d, const char *path, const mf_geo_near *n)
{
    if (d->hidden || d->building)
        return SIZE_MAX;
    if (d->type == &mfi_2d_type && (!n->sphere || !n->wrapping) && d->kind)
        return d->nfields && (d->geo & 1u) && strcmp(d->paths[0], path) == 0 ? 0 : SIZE_MAX;
    if (d->type != &mfi_2dsphere_type || !n->sphere)
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

/* The 2dsphere search's parameters (its index's levels), rings and
 * prefix. */
static int plan_2dsphere(struct mfi_near_scan *t, const mf_index_desc *d, const bson_t *filter,
                         mf_error *err)
{
    if (d->kind)
        t->p = *(const mf_s2_params *)d->kind;
    else
        mfi_geo_s2_defaults(&t->p);
    t->unit = t->n.radians ? 1.0 : EARTH_RADIUS_METERS;
    t->out_scale = t->unit;
    t->min_rad = t->n.min_distance / t->unit;
    t->max_rad = t->n.max_distance >= DBL_MAX ? M_PI : fmin(t->n.max_distance / t->unit, M_PI);
    t->inner = t->min_rad;
    t->step = 3 * mfi_geo_cell_edge(t->p.finest);
    t->rings_done = t->min_rad > t->max_rad;
    for (size_t i = 0; i < t->field; i++)
        if (d->desc[i])
            t->desc_mask |= 1u << i;
    return prefix_of(t, d, filter, err);
}

/* mongod's twoDDistanceBounds and min2DBoundsIncrement: the whole search
 * and the least ring width, in the plane's units or (on the sphere)
 * meters.  -1: out of memory. */
static int plan_2d(struct mfi_near_scan *t, const mf_index_desc *d)
{
    struct twod *g = t->g2 = calloc(1, sizeof *g);
    if (!g || !(g->scanned = mfi_2d_scanned_new()))
        return -1;
    g->conv = *(const mfi_ghconv *)d->kind;
    g->d.kind = &g->conv;
    mfi_2d_params p;
    mfi_2d_params_of(&g->d, &p);
    if (!t->n.sphere) {
        g->full_inner = t->n.min_distance;
        g->full_outer = fmin(t->n.max_distance, 1.5 * (p.max - p.min));
        g->min_inc = p.error / 2;
        t->out_scale = 1.0;
    } else {
        double lo = t->n.min_distance, hi = t->n.max_distance;
        if (t->n.radians) {
            lo *= EARTH_RADIUS_METERS;
            hi = hi >= DBL_MAX ? hi : hi * EARTH_RADIUS_METERS;
        }
        g->full_inner = fmin(lo, MAX_EARTH_METERS);
        g->full_outer = fmin(hi, MAX_EARTH_METERS);
        g->min_inc = p.error / 2 * METERS_PER_DEGREE;
        t->out_scale = t->n.radians ? 1.0 / EARTH_RADIUS_METERS : 1.0;
    }
    g->cur_outer = g->full_inner;
    t->field = 0;
    return 0;
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
    for (size_t i = 0; i < nidx && !d; i++) {
        if (hint_name && strcmp(idx[i].name, hint_name) != 0)
            continue;
        if ((t->field = geo_field_of(&idx[i], t->path, &t->n)) != SIZE_MAX)
            d = &idx[i];
    }
    if (!d)
        return no_index(err);
    if (d->type == &mfi_2d_type) {
        if ((rc = plan_2d(t, d)) != 0)
            return oom(err);
    } else if ((rc = plan_2dsphere(t, d, filter, err)) != 0) {
        return rc;
    }
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

/* Room for `n` hits in `*v` (`*cap`).  -1: out of memory. */
static int reserve(struct hit **v, size_t *cap, size_t n)
{
    if (n <= *cap)
        return 0;
    size_t c = *cap ? *cap : 256;
    while (c < n)
        c *= 2;
    struct hit *h = realloc(*v, c * sizeof *h);
    if (!h)
        return -1;
    *v = h;
    *cap = c;
    return 0;
}

static int push_hit(struct mfi_near_scan *t, uint64_t rid)
{
    if (reserve(&t->hits, &t->cap, t->nhits + 1) != 0)
        return -1;
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
        static const uint8_t none[1];
        rc = mf_cursor_seek(&cur, start.len ? start.data : none, start.len, false, &valid, err);
        while (rc == 0 && valid) {
            const uint8_t *k, *val, *g;
            size_t kl, vl, gl;
            mf_cursor_key(&cur, &k, &kl);
            if (t->prefix_known && t->prefix_key.len &&
                (kl < t->prefix_key.len ||
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

/* A document's geometries at a path, as mongod's extractGeometries:
 * each value there that parses as one, and the elements of an array
 * that does not (2d's [[x1, y1], [x2, y2]]). */
typedef struct nearest {
    const mf_geo_near *n;
    double best;
    bool any;
    bson_iter_t at;         /* the value nearest */
    const double *annulus;  /* a flat search's {inner, outer}, or NULL */
    bool in_annulus;        /* a point of the document lies in it */
} nearest;

static void nearest_one(nearest *x, const bson_iter_t *v)
{
    double d, px, py;
    if (!mfi_geo_near_distance(x->n, v, &d))
        return;
    if (!x->any || d < x->best) {
        x->best = d;
        x->any = true;
        x->at = *v;
    }
    if (x->annulus && !x->in_annulus && mfi_geo_stored_point(v, &px, &py))
        x->in_annulus = mfi_r2_annulus_contains(x->n->old_x, x->n->old_y, x->annulus[0],
                                                x->annulus[1], px, py);
}

static int nearest_value(void *arg, const bson_iter_t *v)
{
    nearest *x = arg;
    double d;
    bson_iter_t kids;
    if (mfi_geo_near_distance(x->n, v, &d) || !BSON_ITER_HOLDS_ARRAY(v)) {
        nearest_one(x, v);
    } else if (bson_iter_recurse(v, &kids)) {
        while (bson_iter_next(&kids))
            nearest_one(x, &kids);
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
    if (t->nhits > 1)
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
    if (t->nhits > 1)
        qsort(t->hits, t->nhits, sizeof *t->hits, cmp_dist);
    if (t->nhits < RING_GROW_BELOW)
        t->step *= 2;
    t->inner = outer;
    t->rings_done = last;
    return 0;
}

/* ---------------------------------------------------- over a 2d index */

/* The RecordIds of the keys of index `tree` in the 2d field's intervals
 * `o`, into t->hits; with `probe`, only whether there is one (*any). */
static int oil_keys(mf_scan *s, mf_btree *tree, const mfi_oil *o, bool probe, bool *any,
                    mf_error *err)
{
    struct mfi_near_scan *t = s->near;
    int rc = 0;
    *any = false;
    for (size_t i = 0; rc == 0 && i < o->n && !(probe && *any); i++) {
        const mfi_ival *iv = &o->v[i];
        mf_cursor cur;
        bool valid;
        mf_cursor_init(&cur, tree);
        s->stats.seeks++;
        rc = mf_cursor_seek(&cur, iv->lo.data, iv->lo.len, false, &valid, err);
        while (rc == 0 && valid) {
            const uint8_t *k, *val, *g;
            size_t kl, vl, gl;
            mf_cursor_key(&cur, &k, &kl);
            if (!geo_part(t, k, kl, &g, &gl))
                break;
            int hi = cmp_enc(g, gl, iv->hi.data, iv->hi.len);
            if (hi > 0 || (hi == 0 && !iv->hi_incl))
                break;
            s->stats.keys_examined++;
            if (iv->lo_incl || cmp_enc(g, gl, iv->lo.data, iv->lo.len) != 0) {
                *any = true;
                if (probe)
                    break;
                mf_cursor_value(&cur, &val, &vl);
                if (vl == 8 && push_hit(t, get_be64(val)) != 0)
                    rc = oom(err);
            }
            if (rc == 0)
                rc = mf_cursor_next(&cur, &valid, err);
        }
    }
    return rc;
}

/* mongod's GeoNear2DStage::DensityEstimator: the first ring's width from
 * the finest level whose cells around the centre hold a key. */
static int twod_estimate(mf_scan *s, mf_btree *tree, mf_error *err)
{
    struct mfi_near_scan *t = s->near;
    struct twod *g = t->g2;
    unsigned level = g->conv.bits > 0 ? (unsigned)g->conv.bits - 1 : 0;
    double est;
    for (;;) {
        mfi_oil o;
        bool any;
        int rc = mfi_2d_density_bounds(&g->d, t->n.old_x, t->n.old_y, level, &o, err);
        if (rc == 0) {
            rc = oil_keys(s, tree, &o, true, &any, err);
            mfi_oil_free(&o);
        }
        if (rc)
            return rc;
        double edge = mfi_2d_cell_edge(&g->d, level);
        if (any) {
            est = edge;
            break;
        }
        /* the four cells hold the whole search (mongod compares the
         * outer radius, meters on the sphere, with the edge as it is) */
        if (g->full_outer < 0.5 * edge) {
            est = 0.5 * edge;
            break;
        }
        if (level == 0) {
            est = edge;
            break;
        }
        level--;
    }
    if (t->n.sphere)
        g->inc = fmin(est * EARTH_RADIUS_METERS * 3 * (M_PI / 180), MAX_EARTH_METERS / 1000.0);
    else
        g->inc = 3 * est;
    g->estimated = true;
    return 0;
}

/* Whether `rid` is among the n hits `v`, sorted by RecordId. */
static bool has_rid(const struct hit *v, size_t n, uint64_t rid)
{
    size_t a = 0, b = n;
    while (a < b) {
        size_t m = (a + b) / 2;
        if (v[m].rid == rid)
            return true;
        if (v[m].rid < rid)
            a = m + 1;
        else
            b = m;
    }
    return false;
}

/* Search the next ring of a 2d index: its documents, by distance, into
 * t->hits (GeoNear2DStage::nextInterval, then NearStage's buffer). */
static int next_ring_2d(mf_scan *s, mf_engine *e, mf_coll *c, mf_error *err)
{
    struct mfi_near_scan *t = s->near;
    struct twod *g = t->g2;
    mf_btree *tree = mf_engine_tree(e, s->ix.tree);
    mf_btree *records = mf_engine_tree(e, mf_coll_records(c));
    int rc;
    if (!tree || !records)
        return mf_error_set(err, MF_InternalError, "$near over %s: its tree is gone",
                            s->ix.name);
    if (!g->estimated && (rc = twod_estimate(s, tree, err)) != 0)
        return rc;
    if (t->rings) {
        if (g->returned < RING_GROW_BELOW)
            g->inc *= 2;
        else if (g->returned > RING_SHRINK_ABOVE)
            g->inc /= 2;
    }
    g->inc = fmax(g->inc, g->min_inc);
    double inner = g->cur_outer, outer = fmin(g->cur_outer + g->inc, g->full_outer);
    bool last = outer == g->full_outer;
    g->cur_outer = outer;
    t->rings++;
    t->rings_done = last;
    mfi_2d_ring ring = {.x = t->n.old_x, .y = t->n.old_y, .sphere = t->n.sphere};
    if (!t->n.sphere) {
        /* the interval's thresholds, widened at the search's edges */
        double eps = DBL_EPSILON * (fmax(fabs(ring.x), fabs(ring.y)) + g->full_outer);
        if (inner > 0 && inner == g->full_inner)
            inner = fmax(0.0, inner - eps);
        if (outer > 0 && last)
            outer += eps;
        ring.inner = inner;
        ring.outer = outer;
        ring.full_outer = g->full_outer;
    } else {
        ring.inner = inner / EARTH_RADIUS_METERS;
        ring.outer = outer / EARTH_RADIUS_METERS;
    }
    mfi_oil o;
    bool any;
    t->nhits = t->next = 0;
    if (mfi_2d_ring_bounds(&g->d, &ring, g->scanned, &o) != 0)
        return oom(err);
    rc = oil_keys(s, tree, &o, false, &any, err);
    mfi_oil_free(&o);
    if (rc)
        return rc;
    /* each new RecordId, not one waiting already, fetched once */
    if (t->nhits > 1)
        qsort(t->hits, t->nhits, sizeof *t->hits, cmp_rid);
    if (g->npend > 1)
        qsort(g->pend, g->npend, sizeof *g->pend, cmp_rid);
    size_t waiting = g->npend;
    const double annulus[2] = {g->full_inner, g->full_outer};
    for (size_t r = 0; r < t->nhits; r++) {
        uint64_t id = t->hits[r].rid;
        if ((r && t->hits[r - 1].rid == id) || has_rid(g->pend, waiting, id))
            continue;
        uint8_t key[8];
        const uint8_t *val;
        size_t vl;
        bool found;
        bson_t doc;
        put_be64(key, id);
        if ((rc = mf_btree_get(records, key, 8, &found, &val, &vl, err)) != 0)
            return rc;
        if (!found || !bson_init_static(&doc, val, vl))
            continue;
        s->stats.docs_examined++;
        nearest x = {.n = &t->n, .annulus = t->n.sphere ? NULL : annulus};
        bool through = false;
        mfi_path_elements(&doc, t->path, nearest_value, &x, &through);
        if (!x.any || (!t->n.sphere && !x.in_annulus))
            continue;
        if (reserve(&g->pend, &g->pcap, g->npend + 1) != 0)
            return oom(err);
        g->pend[g->npend++] =
            (struct hit){id, t->n.sphere ? x.best * EARTH_RADIUS_METERS : x.best};
    }
    /* the waiting documents in this ring are its results; nearer ones
     * are dropped, farther ones wait */
    if (g->npend > 1)
        qsort(g->pend, g->npend, sizeof *g->pend, cmp_dist);
    if (reserve(&t->hits, &t->cap, g->npend) != 0)
        return oom(err);
    size_t keep = 0;
    t->nhits = 0;
    for (size_t i = 0; i < g->npend; i++) {
        double d = g->pend[i].dist;
        if (d < inner)
            continue;
        if (last ? d <= outer : d < outer)
            t->hits[t->nhits++] = g->pend[i];
        else
            g->pend[keep++] = g->pend[i];
    }
    g->npend = keep;
    g->returned = t->nhits;
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
            if ((rc = t->g2 ? next_ring_2d(s, e, c, err) : next_ring(s, e, c, err)) != 0)
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
        row->dist = h->dist * t->out_scale;
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
    BSON_APPEND_UTF8(out, "stage", t->g2 ? "GEO_NEAR_2D" : "GEO_NEAR_2DSPHERE");
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
