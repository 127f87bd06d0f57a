/*
 * plan.c -- the access path of a query on one collection, and its scan.
 *
 * Until secondary indexes exist there are two paths:
 *   collection scan   the record tree in RecordId order (or reversed, for
 *                     {$natural: -1})
 *   _id index         points (equality, $in) or a range ($gt ... $lte) on
 *                     `_id`, or the whole index when the sort is {_id: +-1}
 *                     or the hint names it; each key leads to its record
 * The index only narrows what is read: every document is still given to the
 * matcher, so a bound that is wider than the predicate (a range that runs
 * to the end of a type bracket) costs reads, never answers.
 *
 * A scan does not hold tree positions across calls that release the
 * collection lock: mf_scan_release() forgets them, and the next call seeks
 * again from the last key it returned (the position a cursor saves between
 * getMores, DESIGN.md section 4).  Writes in between are seen as they are
 * at that moment: a deleted document is not returned, one inserted ahead
 * of the position is.
 */
#include "query.h"

#include <stdlib.h>
#include <string.h>

#define ID_INDEX "_id_"

typedef enum { P_COLLSCAN, P_ID_POINTS, P_ID_RANGE } plan_kind;

struct mf_scan {
    plan_kind kind;
    bool backward;
    /* P_ID_POINTS: sorted, distinct encoded keys */
    mf_buf *points;
    size_t npoints, next_point;
    /* P_ID_RANGE: bounds on encoded keys (empty lo: from the start; no hi:
     * to the end) */
    mf_buf lo, hi;
    bool lo_incl, hi_incl, has_hi;
    /* position */
    bool want_pos; /* compute the matcher's array position per row */
    bool started, positioned, eof;
    mf_buf last; /* the last key returned (record id or index key) */
    mf_cursor cur;
    mf_scan_stats stats;
};

static int oom(mf_error *err)
{
    return mf_error_set(err, MF_InternalError, "out of memory");
}

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

void mf_record_id_encode(uint64_t rid, uint8_t out[8])
{
    put_be64(out, rid);
}

uint64_t mf_record_id_decode(const uint8_t *key)
{
    return get_be64(key);
}

mf_tree_id mf_coll_index_tree(const mf_coll *c, const char *name)
{
    for (size_t i = 0; i < mf_coll_index_count(c); i++)
        if (strcmp(mf_coll_index(c, i)->name, name) == 0)
            return mf_coll_index(c, i)->tree;
    return 0;
}

/* ------------------------------------------------------------- planning */

static int cmp_buf(const mf_buf *a, const mf_buf *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->data, b->data, n);
    if (c)
        return c;
    return (a->len > b->len) - (a->len < b->len);
}

static int cmp_points(const void *a, const void *b)
{
    return cmp_buf(a, b);
}

/* Whether an operand can bound the _id index by its type bracket: the
 * values whose comparisons stay inside one bracket. */
static bool rangeable(const bson_iter_t *v)
{
    switch (bson_iter_type(v)) {
    case BSON_TYPE_DOUBLE: case BSON_TYPE_INT32: case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128: case BSON_TYPE_UTF8: case BSON_TYPE_SYMBOL:
    case BSON_TYPE_OID: case BSON_TYPE_BOOL: case BSON_TYPE_DATE_TIME:
    case BSON_TYPE_TIMESTAMP: case BSON_TYPE_BINARY: case BSON_TYPE_DOCUMENT:
        return true;
    default:
        return false;
    }
}

/* Whether an equality operand may be looked up in the index (arrays and
 * regexes match by other rules; an _id is never either). */
static bool pointable(const bson_iter_t *v)
{
    bson_type_t t = bson_iter_type(v);
    return t != BSON_TYPE_ARRAY && t != BSON_TYPE_REGEX;
}

static int add_point(mf_scan *s, const bson_iter_t *v, mf_error *err)
{
    mf_buf *p = realloc(s->points, (s->npoints + 1) * sizeof *p);
    if (!p)
        return oom(err);
    s->points = p;
    memset(&p[s->npoints], 0, sizeof *p);
    if (mf_bsonx_key_append(&p[s->npoints], v, false) != 0)
        return oom(err);
    s->npoints++;
    return 0;
}

/* Narrow the range with one bound.  `lower`: a $gt/$gte bound. */
static int add_bound(mf_scan *s, const bson_iter_t *v, bool lower, bool incl, mf_error *err)
{
    mf_buf key = {0}, edge = {0};
    if (mf_bsonx_key_append(&key, v, false) != 0)
        return oom(err);
    /* The edge of the operand's type bracket on the open side. */
    uint8_t tag = key.data[0];
    if (lower)
        tag++;
    if (mf_buf_append(&edge, &tag, 1) != 0) {
        mf_buf_free(&key);
        return oom(err);
    }
    mf_buf *newlo = lower ? &key : &edge, *newhi = lower ? &edge : &key;
    bool lo_incl = lower ? incl : true, hi_incl = lower ? false : incl;
    if (s->lo.len == 0 || cmp_buf(newlo, &s->lo) > 0 ||
        (cmp_buf(newlo, &s->lo) == 0 && !lo_incl)) {
        mf_buf_free(&s->lo);
        s->lo = *newlo;
        s->lo_incl = lo_incl;
        *newlo = (mf_buf){0};
    }
    if (!s->has_hi || cmp_buf(newhi, &s->hi) < 0 || (cmp_buf(newhi, &s->hi) == 0 && !hi_incl)) {
        mf_buf_free(&s->hi);
        s->hi = *newhi;
        s->hi_incl = hi_incl;
        s->has_hi = true;
        *newhi = (mf_buf){0};
    }
    mf_buf_free(&key);
    mf_buf_free(&edge);
    return 0;
}

/* Collect what the predicate on `_id` (value `v`) says about the index:
 * points, or bounds.  Sets `*points`/`*range` when it added any. */
static int analyse_id(mf_scan *s, const bson_iter_t *v, bool *points, bool *range,
                      mf_error *err)
{
    bson_iter_t ops;
    int rc = 0;
    if (BSON_ITER_HOLDS_DOCUMENT(v) && bson_iter_recurse(v, &ops) && bson_iter_next(&ops) &&
        bson_iter_key(&ops)[0] == '$') {
        bson_iter_recurse(v, &ops);
        while (rc == 0 && bson_iter_next(&ops)) {
            const char *op = bson_iter_key(&ops);
            if (strcmp(op, "$eq") == 0 && pointable(&ops)) {
                if (*points)
                    continue; /* one equality narrows enough */
                rc = add_point(s, &ops, err);
                *points = true;
            } else if (strcmp(op, "$in") == 0 && BSON_ITER_HOLDS_ARRAY(&ops) && !*points) {
                bson_iter_t el;
                bool usable = true;
                bson_iter_recurse(&ops, &el);
                while (bson_iter_next(&el))
                    if (bson_iter_type(&el) == BSON_TYPE_REGEX)
                        usable = false; /* a regex in $in matches strings by pattern */
                if (!usable)
                    continue;
                bson_iter_recurse(&ops, &el);
                while (rc == 0 && bson_iter_next(&el))
                    if (pointable(&el))
                        rc = add_point(s, &el, err);
                *points = true;
            } else if ((strcmp(op, "$gt") == 0 || strcmp(op, "$gte") == 0) && rangeable(&ops)) {
                rc = add_bound(s, &ops, true, op[3] == 'e', err);
                *range = true;
            } else if ((strcmp(op, "$lt") == 0 || strcmp(op, "$lte") == 0) && rangeable(&ops)) {
                rc = add_bound(s, &ops, false, op[3] == 'e', err);
                *range = true;
            }
        }
        return rc;
    }
    if (pointable(v) && !*points) {
        rc = add_point(s, v, err);
        *points = true;
    }
    return rc;
}

/* The _id predicates at the top of `filter` and in its top-level $and. */
static int analyse_filter(mf_scan *s, const bson_t *filter, bool *points, bool *range,
                          mf_error *err)
{
    bson_iter_t it;
    int rc = 0;
    if (!filter || !bson_iter_init(&it, filter))
        return 0;
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "_id") == 0) {
            rc = analyse_id(s, &it, points, range, err);
        } else if (strcmp(k, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t el;
            bson_iter_recurse(&it, &el);
            while (rc == 0 && bson_iter_next(&el)) {
                uint32_t len;
                const uint8_t *data;
                bson_t sub;
                if (!BSON_ITER_HOLDS_DOCUMENT(&el))
                    continue;
                bson_iter_document(&el, &len, &data);
                if (bson_init_static(&sub, data, len))
                    rc = analyse_filter(s, &sub, points, range, err);
            }
        }
    }
    return rc;
}

/* Whether `hint` names the _id index: "_id_" or {_id: 1}. */
static bool hint_is_id(const bson_iter_t *hint)
{
    if (BSON_ITER_HOLDS_UTF8(hint))
        return strcmp(bson_iter_utf8(hint, NULL), ID_INDEX) == 0;
    bson_iter_t k;
    if (!BSON_ITER_HOLDS_DOCUMENT(hint) || !bson_iter_recurse(hint, &k) || !bson_iter_next(&k))
        return false;
    int64_t dir = 0;
    if (BSON_ITER_HOLDS_INT32(&k) || BSON_ITER_HOLDS_INT64(&k) || BSON_ITER_HOLDS_DOUBLE(&k))
        dir = (int64_t)bson_iter_as_double(&k);
    return strcmp(bson_iter_key(&k), "_id") == 0 && dir == 1 && !bson_iter_next(&k);
}

/* {$natural: 1 | -1}: sets `*backward`. */
static bool hint_is_natural(const bson_iter_t *hint, bool *backward)
{
    bson_iter_t k;
    if (!BSON_ITER_HOLDS_DOCUMENT(hint) || !bson_iter_recurse(hint, &k) || !bson_iter_next(&k) ||
        strcmp(bson_iter_key(&k), "$natural") != 0)
        return false;
    *backward = bson_iter_as_double(&k) < 0;
    return true;
}

/* Whether the sort is {_id: 1} or {_id: -1} alone; `*dir` gets the sign. */
static bool sort_is_id(const bson_t *sort, int *dir)
{
    bson_iter_t k;
    if (!sort || !bson_iter_init(&k, sort) || !bson_iter_next(&k) ||
        strcmp(bson_iter_key(&k), "_id") != 0)
        return false;
    double d = (BSON_ITER_HOLDS_INT32(&k) || BSON_ITER_HOLDS_INT64(&k) ||
                BSON_ITER_HOLDS_DOUBLE(&k)) ? bson_iter_as_double(&k) : 0;
    if (d != 1 && d != -1)
        return false;
    *dir = (int)d;
    return !bson_iter_next(&k);
}

int mf_scan_new(mf_coll *c, const bson_t *filter, const bson_iter_t *hint, const bson_t *sort,
                mf_scan **out, bool *sorted, mf_error *err)
{
    mf_scan *s = calloc(1, sizeof *s);
    int rc = 0, dir = 0;
    bool points = false, range = false, natural_back = false, use_id = false;
    if (!s)
        return oom(err);
    *sorted = false;
    if (hint && hint_is_natural(hint, &natural_back)) {
        s->kind = P_COLLSCAN;
        s->backward = natural_back;
        *out = s;
        return 0;
    }
    if (hint) {
        bson_iter_t k;
        bool empty = BSON_ITER_HOLDS_DOCUMENT(hint) &&
                     (!bson_iter_recurse(hint, &k) || !bson_iter_next(&k));
        if (!empty && !hint_is_id(hint)) {
            free(s);
            return mf_error_set(err, MF_BadValue,
                                "hint provided does not correspond to an existing index");
        }
        use_id = !empty;
    }
    if (!mf_coll_index_tree(c, ID_INDEX)) {
        s->kind = P_COLLSCAN; /* a collection without an _id index (not made yet) */
        *out = s;
        return 0;
    }
    rc = analyse_filter(s, filter, &points, &range, err);
    if (rc) {
        mf_scan_free(s);
        return rc;
    }
    bool by_id = sort_is_id(sort, &dir);
    if (points) {
        qsort(s->points, s->npoints, sizeof *s->points, cmp_points);
        size_t w = 0;
        for (size_t r = 0; r < s->npoints; r++) {
            if (w > 0 && cmp_buf(&s->points[w - 1], &s->points[r]) == 0) {
                mf_buf_free(&s->points[r]);
                continue;
            }
            s->points[w++] = s->points[r];
        }
        s->npoints = w;
        s->kind = P_ID_POINTS;
        mf_buf_free(&s->lo);
        mf_buf_free(&s->hi);
        s->has_hi = false;
        if (by_id && dir > 0)
            *sorted = true;
    } else if (range || use_id || by_id) {
        s->kind = P_ID_RANGE;
        if (by_id) {
            s->backward = dir < 0;
            *sorted = true;
        }
    } else {
        s->kind = P_COLLSCAN;
    }
    *out = s;
    return 0;
}

void mf_scan_free(mf_scan *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->npoints; i++)
        mf_buf_free(&s->points[i]);
    free(s->points);
    mf_buf_free(&s->lo);
    mf_buf_free(&s->hi);
    mf_buf_free(&s->last);
    free(s);
}

const char *mf_scan_describe(const mf_scan *s)
{
    switch (s->kind) {
    case P_COLLSCAN: return "COLLSCAN";
    case P_ID_POINTS: return "IDHACK";
    default: return "IXSCAN";
    }
}

const mf_scan_stats *mf_scan_get_stats(const mf_scan *s)
{
    return &s->stats;
}

void mf_scan_want_pos(mf_scan *s, bool want)
{
    s->want_pos = want;
}

bool mf_scan_eof(const mf_scan *s)
{
    return s->eof;
}

void mf_scan_release(mf_scan *s)
{
    s->positioned = false;
}

/* --------------------------------------------------------------- scanning */

static int remember(mf_scan *s, const uint8_t *k, size_t kl, mf_error *err)
{
    s->last.len = 0;
    if (mf_buf_append(&s->last, k, kl) != 0)
        return oom(err);
    return 0;
}

/* Put the tree cursor on the first entry not yet returned. */
static int position(mf_scan *s, bool *valid, mf_error *err)
{
    int rc;
    if (!s->started) {
        s->started = true;
        if (s->kind == P_ID_RANGE && !s->backward && s->lo.len)
            rc = mf_cursor_seek(&s->cur, s->lo.data, s->lo.len, false, valid, err);
        else if (s->kind == P_ID_RANGE && s->backward && s->has_hi)
            rc = mf_cursor_seek(&s->cur, s->hi.data, s->hi.len, true, valid, err);
        else if (s->backward)
            rc = mf_cursor_last(&s->cur, valid, err);
        else
            rc = mf_cursor_first(&s->cur, valid, err);
        return rc;
    }
    /* Again from the last key returned: the first entry past it. */
    rc = mf_cursor_seek(&s->cur, s->last.data, s->last.len, s->backward, valid, err);
    if (rc == 0 && *valid) {
        const uint8_t *k;
        size_t kl;
        mf_cursor_key(&s->cur, &k, &kl);
        if (kl == s->last.len && memcmp(k, s->last.data, kl) == 0)
            rc = s->backward ? mf_cursor_prev(&s->cur, valid, err)
                             : mf_cursor_next(&s->cur, valid, err);
    }
    return rc;
}

/* Whether index key `k` lies inside the range; `*past` when it is beyond
 * the end in the scan's direction. */
static bool in_range(const mf_scan *s, const uint8_t *k, size_t kl, bool *past)
{
    mf_buf key = {(uint8_t *)k, kl, kl};
    *past = false;
    if (s->lo.len) {
        int c = cmp_buf(&key, &s->lo);
        if (c < 0 || (c == 0 && !s->lo_incl)) {
            *past = s->backward;
            return false;
        }
    }
    if (s->has_hi) {
        int c = cmp_buf(&key, &s->hi);
        if (c > 0 || (c == 0 && !s->hi_incl)) {
            *past = !s->backward;
            return false;
        }
    }
    return true;
}

/* The record `rid` into `row`; `*found` false if it is gone. */
static int fetch(mf_engine *e, mf_coll *c, const uint8_t *rid, mf_scan_row *row, bool *found,
                 mf_error *err)
{
    const uint8_t *v;
    size_t vl;
    int rc = mf_btree_get(mf_engine_tree(e, mf_coll_records(c)), rid, 8, found, &v, &vl, err);
    if (rc || !*found)
        return rc;
    row->rid = get_be64(rid);
    if (!bson_init_static(&row->doc, v, vl))
        return mf_error_set(err, MF_DataCorruption, "record %llu is not a document",
                            (unsigned long long)row->rid);
    return 0;
}

/* Offer the row to the matcher; `*take` when it passes. */
static void judge(mf_scan *s, const mf_matcher *m, mf_scan_row *row, bool *take)
{
    s->stats.docs_examined++;
    row->pos = -1;
    if (!m)
        *take = true;
    else if (s->want_pos)
        *take = mf_matcher_match_pos(m, &row->doc, &row->pos);
    else
        *take = mf_matcher_match(m, &row->doc);
}

static int next_point(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m,
                      mf_scan_row *row, bool *valid, mf_error *err)
{
    mf_btree *idx = mf_engine_tree(e, mf_coll_index_tree(c, ID_INDEX));
    while (s->next_point < s->npoints) {
        const mf_buf *p = &s->points[s->next_point++];
        bool found, take;
        const uint8_t *rid;
        size_t rl;
        s->stats.keys_examined++;
        int rc = mf_btree_get(idx, p->data, p->len, &found, &rid, &rl, err);
        if (rc == 0 && found && rl == 8)
            rc = fetch(e, c, rid, row, &found, err);
        if (rc)
            return rc;
        if (!found || rl != 8)
            continue;
        judge(s, m, row, &take);
        if (take) {
            *valid = true;
            return 0;
        }
    }
    s->eof = true;
    *valid = false;
    return 0;
}

int mf_scan_next(mf_scan *s, mf_engine *e, mf_coll *c, const mf_matcher *m, mf_scan_row *row,
                 bool *valid, mf_error *err)
{
    int rc;
    *valid = false;
    if (s->eof)
        return 0;
    if (s->kind == P_ID_POINTS)
        return next_point(s, e, c, m, row, valid, err);
    bool index = s->kind == P_ID_RANGE;
    if (!s->positioned) {
        mf_tree_id t = index ? mf_coll_index_tree(c, ID_INDEX) : mf_coll_records(c);
        mf_btree *tree = mf_engine_tree(e, t);
        if (!tree)
            return mf_error_set(err, MF_InternalError, "tree %llu is gone",
                                (unsigned long long)t);
        mf_cursor_init(&s->cur, tree);
        rc = position(s, valid, err);
        if (rc)
            return rc;
        s->positioned = true;
    } else {
        rc = s->backward ? mf_cursor_prev(&s->cur, valid, err)
                         : mf_cursor_next(&s->cur, valid, err);
        if (rc)
            return rc;
    }
    for (;;) {
        if (!*valid) {
            s->eof = true;
            return 0;
        }
        const uint8_t *k, *v;
        size_t kl, vl;
        bool take = false, found = true, past;
        mf_cursor_key(&s->cur, &k, &kl);
        mf_cursor_value(&s->cur, &v, &vl);
        if ((rc = remember(s, k, kl, err)) != 0)
            return rc;
        if (index) {
            s->stats.keys_examined++;
            if (!in_range(s, k, kl, &past)) {
                if (past) {
                    *valid = false;
                    s->eof = true;
                    return 0;
                }
            } else if (vl == 8) {
                /* fetch() moves no cursor: the index cursor stays put. */
                if ((rc = fetch(e, c, v, row, &found, err)) != 0)
                    return rc;
                if (found)
                    judge(s, m, row, &take);
            }
        } else if (kl == 8) {
            row->rid = get_be64(k);
            if (!bson_init_static(&row->doc, v, vl))
                return mf_error_set(err, MF_DataCorruption, "record %llu is not a document",
                                    (unsigned long long)row->rid);
            judge(s, m, row, &take);
        }
        if (take)
            return 0;
        rc = s->backward ? mf_cursor_prev(&s->cur, valid, err)
                         : mf_cursor_next(&s->cur, valid, err);
        if (rc)
            return rc;
    }
}
