/*
 * bounds.c -- what a filter says about the values of each path, as
 * intervals an index scan can use (mongod's index_bounds_builder), and
 * whether a filter implies a partial index's filter.
 *
 * Each condition becomes an ordered interval list over the path's values:
 *
 *   {a: v}, {$eq: v}      [v, v]; an array also [first, first] (a multikey
 *                         index holds its elements), [] also [undefined,
 *                         undefined]; null [undefined, undefined] and
 *                         [null, null] (missing indexes as null, so it
 *                         matches documents without `a`; and an undefined
 *                         value equals null, as in mongod 7.0)
 *   {$in: [...]}          the union of the elements' equalities
 *   {$gt: v}, {$gte: v}   (v, end of v's type bracket]
 *   {$lt: v}, {$lte: v}   [start of v's type bracket, v)
 *   {$exists: true}       [MinKey, MaxKey];  false: [null, null]
 *   {$elemMatch: ...}     on values: the intersection of its conditions'
 *                         bounds; on documents, path.field for each field
 *                         (elem_match); never exact
 *   {$type: t}            each type's whole bracket ([nan.0, inf.0] for the
 *                         numbers, ["", {}) for strings ...), united; an
 *                         array type [MinKey, MaxKey]; never exact
 *   {$mod: [d, r]}        the numbers, [nan.0, inf.0]; never exact
 *   {$all: [x, y, ...]}   each element as {a: x} (or {a: {$elemMatch}})
 *                         would bound it: mongod's $and rewrite; never exact
 *   {a: /re/}, {$regex}   the strings starting with the regex's literal
 *                         prefix, ["abc", "abd") for /^abc/, and the regex
 *                         itself, [/re/, /re/] (a regex matches an equal
 *                         regex value); in a $in, united with the rest.
 *                         A regex with no prefix (no collation): every
 *                         string, ["", {}), and the regex value, with the
 *                         regex tested on each key (mfi_pred.key_re); in
 *                         a $in the same bounds, the FETCH testing it;
 *                         under a collation it bounds nothing
 *   {$ne: v}, {$nin: [...]}, {$not: {<one of the above>}}
 *                         the complement of the condition's bounds in
 *                         [MinKey, MaxKey] (translate_negation): {$ne: 5}
 *                         gives [MinKey, 5) and (5, MaxKey]
 *
 * Comparisons never cross type brackets, so a range stops at the edge of
 * its operand's bracket, drawn as mongod draws it: numbers -inf.0..inf.0
 * (NaN lies below -inf and matches no range; $type's bracket starts at
 * it), strings ""..{} (exclusive), objects {}..[] (exclusive), ObjectIds
 * 00..ff, dates and timestamps their extremes, booleans false..true.  A
 * condition with no such translation ($size, $gt: null, $not: /re/, ...)
 * bounds nothing: the matcher alone decides it.  The bounds may be wider
 * than the condition, never narrower (DESIGN.md section 5).
 *
 * Collations.  The end points are encoded under the collation of the index
 * they are built for (mfi_preds_collect_coll), so a string point holds its
 * sort key and "a" = "A" at strength 2 is one point.  Each pred records
 * whether its operand is collatable (a string, symbol, document or array,
 * as mongod's QueryPlannerIXSelect tests it): such a pred may bound only an
 * index whose collation is the query's.
 */
#include "geo.h"
#include "query_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- values */

static int cmp_bytes(const mf_buf *a, const mf_buf *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->data, b->data, n) : 0;
    if (c)
        return c;
    return (a->len > b->len) - (a->len < b->len);
}

static bool is_nan(const bson_iter_t *v)
{
    if (BSON_ITER_HOLDS_DOUBLE(v))
        return isnan(bson_iter_double(v));
    if (BSON_ITER_HOLDS_DECIMAL128(v)) {
        bson_decimal128_t d;
        int sign, exp10;
        uint64_t hi, lo;
        bson_iter_decimal128(v, &d);
        return mf_bsonx_decimal_parts(&d, &sign, &hi, &lo, &exp10) == MF_DEC_NAN;
    }
    return false;
}

/* A value as mongod's BSONElement::toString(false) prints it in bounds.
 * With `show_keys` (the bounds of an index with a collation) a string or
 * symbol is printed as mongod prints the bytes its bound holds,
 * "CollationKey(0x<hex>)": the sort key under `coll`, or the string's own
 * bytes when `coll` is NULL (a type bracket's edge, "" -- mongod does not
 * translate those). */
static char *value_string(const bson_iter_t *v, const mf_collator *coll, bool show_keys)
{
    char buf[512];
    if (show_keys && (BSON_ITER_HOLDS_UTF8(v) || BSON_ITER_HOLDS_SYMBOL(v))) {
        uint32_t len;
        const char *str = BSON_ITER_HOLDS_UTF8(v) ? bson_iter_utf8(v, &len)
                                                  : bson_iter_symbol(v, &len);
        mf_buf key = {0};
        if (coll ? mf_collator_sort_key(coll, str, len, &key) != 0
                 : mf_buf_append(&key, str, len) != 0)
            return NULL;
        size_t at = (size_t)snprintf(buf, sizeof buf, "CollationKey(0x");
        for (size_t i = 0; i < key.len && at + 4 < sizeof buf; i++)
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%02x", key.data[i]);
        snprintf(buf + at, sizeof buf - at, ")");
        mf_buf_free(&key);
    } else if (BSON_ITER_HOLDS_DOUBLE(v) && !isfinite(bson_iter_double(v))) {
        double d = bson_iter_double(v);
        snprintf(buf, sizeof buf, "%s", isnan(d) ? "nan.0" : d > 0 ? "inf.0" : "-inf.0");
    } else {
        mf_bsonx_elem_to_string(v, false, buf, sizeof buf);
    }
    return strdup(buf);
}

static void ival_free(mfi_ival *iv)
{
    mf_buf_free(&iv->lo);
    mf_buf_free(&iv->hi);
    free(iv->lo_s);
    free(iv->hi_s);
    bson_value_destroy(&iv->lo_v);
    bson_value_destroy(&iv->hi_v);
    memset(iv, 0, sizeof *iv);
}

/* bson_value_copy, which refuses an unset value (none stays none). */
static void value_copy(const bson_value_t *src, bson_value_t *dst)
{
    if (src->value_type == BSON_TYPE_EOD)
        memset(dst, 0, sizeof *dst);
    else
        mf_bsonx_value_copy(src, dst);
}

/* One end of an interval: its encoding, inclusion, text and value. */
typedef struct end_ref {
    const mf_buf *enc;
    bool incl;
    const char *s;
    const bson_value_t *v;
} end_ref;

static end_ref lower_end(const mfi_ival *iv)
{
    return (end_ref){&iv->lo, iv->lo_incl, iv->lo_s, &iv->lo_v};
}

static end_ref upper_end(const mfi_ival *iv)
{
    return (end_ref){&iv->hi, iv->hi_incl, iv->hi_s, &iv->hi_v};
}

/* `dst` (zeroed) from end `lo` to end `hi`; on failure the caller frees
 * it. */
static int ival_set_ends(mfi_ival *dst, end_ref lo, end_ref hi)
{
    dst->lo_incl = lo.incl;
    dst->hi_incl = hi.incl;
    dst->lo_s = strdup(lo.s);
    dst->hi_s = strdup(hi.s);
    if (!dst->lo_s || !dst->hi_s || mf_buf_append(&dst->lo, lo.enc->data, lo.enc->len) != 0 ||
        mf_buf_append(&dst->hi, hi.enc->data, hi.enc->len) != 0)
        return -1;
    value_copy(lo.v, &dst->lo_v);
    value_copy(hi.v, &dst->hi_v);
    return 0;
}

/* `dst`'s lower end from `lo`'s, its upper end from `hi`'s (`dst` zeroed;
 * on failure the caller frees it). */
static int ival_ends_from(mfi_ival *dst, const mfi_ival *lo, const mfi_ival *hi)
{
    return ival_set_ends(dst, lower_end(lo), upper_end(hi));
}

static int ival_copy(mfi_ival *dst, const mfi_ival *src)
{
    memset(dst, 0, sizeof *dst);
    if (ival_ends_from(dst, src, src) != 0) {
        ival_free(dst);
        return -1;
    }
    return 0;
}

static int oil_push(mfi_oil *o, mfi_ival *iv)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 4;
        mfi_ival *v = realloc(o->v, cap * sizeof *v);
        if (!v) {
            ival_free(iv);
            return -1;
        }
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = *iv;
    memset(iv, 0, sizeof *iv);
    return 0;
}

/* Push the interval from `lo` to `hi` (values, encoded under `lo_coll`
 * and `hi_coll`; `show_keys`: printed as an index with a collation shows
 * them); an empty one ((x, x], [x, x)) is dropped, as mongod drops it. */
static int oil_push_ends(mfi_oil *o, const bson_iter_t *lo, bool lo_incl,
                         const mf_collator *lo_coll, const bson_iter_t *hi, bool hi_incl,
                         const mf_collator *hi_coll, bool show_keys)
{
    mfi_ival iv = {.lo_incl = lo_incl, .hi_incl = hi_incl};
    if (mf_bsonx_key_append_coll(&iv.lo, lo, false, lo_coll) != 0 ||
        mf_bsonx_key_append_coll(&iv.hi, hi, false, hi_coll) != 0)
        goto fail;
    int c = cmp_bytes(&iv.lo, &iv.hi);
    if (c > 0 || (c == 0 && !(lo_incl && hi_incl))) {
        ival_free(&iv);
        return 0;
    }
    iv.lo_s = value_string(lo, lo_coll, show_keys);
    iv.hi_s = value_string(hi, hi_coll, show_keys);
    if (!iv.lo_s || !iv.hi_s)
        goto fail;
    mf_bsonx_value_copy(bson_iter_value((bson_iter_t *)lo), &iv.lo_v);
    mf_bsonx_value_copy(bson_iter_value((bson_iter_t *)hi), &iv.hi_v);
    return oil_push(o, &iv);
fail:
    ival_free(&iv);
    return -1;
}

/* Both ends under `coll` (NULL: simple). */
static int oil_push_range(mfi_oil *o, const bson_iter_t *lo, bool lo_incl, const bson_iter_t *hi,
                          bool hi_incl, const mf_collator *coll)
{
    return oil_push_ends(o, lo, lo_incl, coll, hi, hi_incl, coll, coll != NULL);
}

static int oil_push_point(mfi_oil *o, const bson_iter_t *v, const mf_collator *coll)
{
    return oil_push_range(o, v, true, v, true, coll);
}

int mfi_oil_push_point(mfi_oil *o, const bson_iter_t *v)
{
    return oil_push_point(o, v, NULL);
}

/* One value built into `tmp` (initialised here; the caller destroys it). */
typedef enum {
    V_MINKEY, V_MAXKEY, V_NULL, V_UNDEFINED, V_EMPTY_ARRAY
} special;

static void special_value(special k, bson_t *tmp, bson_iter_t *it)
{
    bson_init(tmp);
    switch (k) {
    case V_MINKEY: BSON_APPEND_MINKEY(tmp, ""); break;
    case V_MAXKEY: BSON_APPEND_MAXKEY(tmp, ""); break;
    case V_NULL: BSON_APPEND_NULL(tmp, ""); break;
    case V_UNDEFINED: BSON_APPEND_UNDEFINED(tmp, ""); break;
    case V_EMPTY_ARRAY: {
        bson_t child;
        BSON_APPEND_ARRAY_BEGIN(tmp, "", &child);
        bson_append_array_end(tmp, &child);
        break;
    }
    }
    bson_iter_init(it, tmp);
    bson_iter_next(it);
}

static int oil_push_special(mfi_oil *o, special k)
{
    bson_t tmp;
    bson_iter_t it;
    special_value(k, &tmp, &it);
    int rc = oil_push_point(o, &it, NULL);
    bson_destroy(&tmp);
    return rc;
}

int mfi_oil_push_range(mfi_oil *o, const bson_iter_t *lo, bool lo_incl, const bson_iter_t *hi,
                       bool hi_incl)
{
    return oil_push_range(o, lo, lo_incl, hi, hi_incl, NULL);
}

int mfi_oil_all(mfi_oil *o)
{
    bson_t a, b;
    bson_iter_t lo, hi;
    special_value(V_MINKEY, &a, &lo);
    special_value(V_MAXKEY, &b, &hi);
    int rc = oil_push_range(o, &lo, true, &hi, true, NULL);
    bson_destroy(&a);
    bson_destroy(&b);
    return rc;
}

/* The edge of type `t`'s bracket -- the upper one with `upper` -- into
 * `tmp`, as mongod's appendMinForType/appendMaxForType (numbers: -inf.0 /
 * inf.0).  `*incl`: the edge is of the same bracket (so it is included).
 * False for a type no range is built for. */
static bool bracket_edge(bson_type_t t, bool upper, bson_t *tmp, bson_iter_t *edge, bool *incl)
{
    bson_t child;
    bson_oid_t oid;
    *incl = true;
    bson_init(tmp);
    /* Regexes, dbPointers and code end where the next type begins, as
     * mongod's appendMaxForType draws them (it includes that first value;
     * here it is left out, as for strings and objects below). */
    if (upper && (t == BSON_TYPE_REGEX || t == BSON_TYPE_DBPOINTER || t == BSON_TYPE_CODE)) {
        t = t == BSON_TYPE_REGEX       ? BSON_TYPE_DBPOINTER
            : t == BSON_TYPE_DBPOINTER ? BSON_TYPE_CODE
                                       : BSON_TYPE_CODEWSCOPE;
        upper = false;
        *incl = false;
    }
    switch (t) {
    case BSON_TYPE_DOUBLE: case BSON_TYPE_INT32: case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128:
        BSON_APPEND_DOUBLE(tmp, "", upper ? INFINITY : -INFINITY);
        break;
    case BSON_TYPE_UTF8: case BSON_TYPE_SYMBOL:
        if (upper) {
            BSON_APPEND_DOCUMENT_BEGIN(tmp, "", &child);
            bson_append_document_end(tmp, &child);
            *incl = false;
        } else {
            BSON_APPEND_UTF8(tmp, "", "");
        }
        break;
    case BSON_TYPE_DOCUMENT:
        if (upper) {
            BSON_APPEND_ARRAY_BEGIN(tmp, "", &child);
            bson_append_array_end(tmp, &child);
            *incl = false;
        } else {
            BSON_APPEND_DOCUMENT_BEGIN(tmp, "", &child);
            bson_append_document_end(tmp, &child);
        }
        break;
    case BSON_TYPE_BINARY:
        if (upper) {
            memset(&oid, 0, sizeof oid);
            BSON_APPEND_OID(tmp, "", &oid);
            *incl = false;
        } else {
            bson_append_binary(tmp, "", 0, BSON_SUBTYPE_BINARY, (const uint8_t *)"", 0);
        }
        break;
    case BSON_TYPE_OID:
        memset(&oid, upper ? 0xff : 0, sizeof oid);
        BSON_APPEND_OID(tmp, "", &oid);
        break;
    case BSON_TYPE_BOOL:
        BSON_APPEND_BOOL(tmp, "", upper);
        break;
    case BSON_TYPE_DATE_TIME:
        BSON_APPEND_DATE_TIME(tmp, "", upper ? INT64_MAX : INT64_MIN);
        break;
    case BSON_TYPE_TIMESTAMP:
        BSON_APPEND_TIMESTAMP(tmp, "", upper ? UINT32_MAX : 0, upper ? UINT32_MAX : 0);
        break;
    case BSON_TYPE_REGEX:
        BSON_APPEND_REGEX(tmp, "", "", "");
        break;
    case BSON_TYPE_DBPOINTER:
        memset(&oid, 0, sizeof oid);
        bson_append_dbpointer(tmp, "", 0, "", &oid);
        break;
    case BSON_TYPE_CODE:
        BSON_APPEND_CODE(tmp, "", "");
        break;
    case BSON_TYPE_CODEWSCOPE:
        if (upper) {
            BSON_APPEND_MAXKEY(tmp, "");
            *incl = false;
        } else {
            /* {"": Code("", {})} by hand: libbson writes a code with an
             * empty scope as plain code */
            static const uint8_t least[] = {21, 0, 0, 0, BSON_TYPE_CODEWSCOPE, 0,
                                            14, 0, 0, 0, 1, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0};
            bson_destroy(tmp);
            bson_init_static(tmp, least, sizeof least);
        }
        break;
    default:
        bson_destroy(tmp);
        return false;
    }
    bson_iter_init(edge, tmp);
    bson_iter_next(edge);
    return true;
}

void mfi_oil_free(mfi_oil *o)
{
    for (size_t i = 0; i < o->n; i++)
        ival_free(&o->v[i]);
    free(o->v);
    memset(o, 0, sizeof *o);
}

int mfi_oil_copy(mfi_oil *dst, const mfi_oil *src)
{
    memset(dst, 0, sizeof *dst);
    for (size_t i = 0; i < src->n; i++) {
        mfi_ival iv;
        if (ival_copy(&iv, &src->v[i]) != 0 || oil_push(dst, &iv) != 0) {
            mfi_oil_free(dst);
            return -1;
        }
    }
    return 0;
}

bool mfi_oil_is_points(const mfi_oil *o)
{
    for (size_t i = 0; i < o->n; i++)
        if (!o->v[i].lo_incl || !o->v[i].hi_incl || cmp_bytes(&o->v[i].lo, &o->v[i].hi) != 0)
            return false;
    return true;
}

static int cmp_ival_lo(const void *a, const void *b)
{
    const mfi_ival *x = a, *y = b;
    int c = cmp_bytes(&x->lo, &y->lo);
    if (c)
        return c;
    return (int)y->lo_incl - (int)x->lo_incl; /* inclusive first */
}

/* Sort points and drop repeats (the union of a $in's equalities). */
static void oil_sort_points(mfi_oil *o)
{
    if (o->n < 2)
        return;
    qsort(o->v, o->n, sizeof *o->v, cmp_ival_lo);
    size_t w = 0;
    for (size_t r = 0; r < o->n; r++) {
        if (w > 0 && cmp_bytes(&o->v[w - 1].lo, &o->v[r].lo) == 0 &&
            cmp_bytes(&o->v[w - 1].hi, &o->v[r].hi) == 0) {
            ival_free(&o->v[r]);
            continue;
        }
        o->v[w++] = o->v[r];
    }
    o->n = w;
}

void mfi_oil_sort_points(mfi_oil *o)
{
    oil_sort_points(o);
}

/* Compare two ends of the same kind: lower ends (`upper` false) order an
 * inclusive one first; upper ends an exclusive one first. */
static int cmp_end(const mf_buf *a, bool a_incl, const mf_buf *b, bool b_incl, bool upper)
{
    int c = cmp_bytes(a, b);
    if (c || a_incl == b_incl)
        return c;
    return upper ? (a_incl ? 1 : -1) : (a_incl ? -1 : 1);
}

/* Sort intervals and merge those that overlap or touch (mongod's
 * unionize): the union of a $in's equalities and regexes. */
static int oil_union(mfi_oil *o)
{
    if (o->n < 2)
        return 0;
    qsort(o->v, o->n, sizeof *o->v, cmp_ival_lo);
    size_t w = 0;
    for (size_t r = 1; r < o->n; r++) {
        mfi_ival *a = &o->v[w], *b = &o->v[r];
        int c = cmp_bytes(&b->lo, &a->hi);
        if (c > 0 || (c == 0 && !a->hi_incl && !b->lo_incl)) { /* apart */
            o->v[++w] = *b;
            continue;
        }
        if (cmp_end(&b->hi, b->hi_incl, &a->hi, a->hi_incl, true) > 0) {
            mfi_ival iv = {0};
            if (ival_ends_from(&iv, a, b) != 0) {
                ival_free(&iv);
                for (size_t i = r; i < o->n; i++) /* [w+1, r) were moved or freed */
                    ival_free(&o->v[i]);
                o->n = w + 1;
                return -1;
            }
            ival_free(a);
            *a = iv;
        }
        ival_free(b);
    }
    o->n = w + 1;
    return 0;
}

int mfi_oil_intersect(mfi_oil *a, const mfi_oil *b)
{
    mfi_oil out = {0};
    size_t i = 0, j = 0;
    while (i < a->n && j < b->n) {
        const mfi_ival *x = &a->v[i], *y = &b->v[j];
        const mfi_ival *lo = cmp_end(&x->lo, x->lo_incl, &y->lo, y->lo_incl, false) >= 0 ? x : y;
        int hc = cmp_end(&x->hi, x->hi_incl, &y->hi, y->hi_incl, true);
        const mfi_ival *hi = hc <= 0 ? x : y;
        int c = cmp_bytes(&lo->lo, &hi->hi);
        if (c < 0 || (c == 0 && lo->lo_incl && hi->hi_incl)) {
            mfi_ival iv = {0};
            if (ival_ends_from(&iv, lo, hi) != 0 || oil_push(&out, &iv) != 0) {
                ival_free(&iv);
                mfi_oil_free(&out);
                return -1;
            }
        }
        if (hc <= 0)
            i++;
        if (hc >= 0)
            j++;
    }
    mfi_oil_free(a);
    *a = out;
    return 0;
}

/* Push the interval from end `lo` to end `hi` onto `o`, unless it is
 * empty. */
static int ival_between(mfi_oil *o, end_ref lo, end_ref hi)
{
    int c = cmp_bytes(lo.enc, hi.enc);
    if (c > 0 || (c == 0 && !(lo.incl && hi.incl)))
        return 0;
    /* No value lies between undefined and null: (undefined, null) is
     * empty, as mongod's complement of null equality shows it. */
    if (!lo.incl && !hi.incl && lo.v->value_type == BSON_TYPE_UNDEFINED &&
        hi.v->value_type == BSON_TYPE_NULL)
        return 0;
    mfi_ival iv = {0};
    if (ival_set_ends(&iv, lo, hi) != 0) {
        ival_free(&iv);
        return -1;
    }
    return oil_push(o, &iv);
}

/* `o` (ascending, disjoint) becomes what it leaves out of [MinKey,
 * MaxKey], as mongod's IndexBoundsBuilder complements the bounds of a
 * negated predicate: {$ne: 5} gives [MinKey, 5) and (5, MaxKey]. */
static int oil_complement(mfi_oil *o)
{
    mfi_oil all = {0}, out = {0};
    int rc = mfi_oil_all(&all);
    if (rc != 0)
        return -1;
    /* Each gap: from the end of one interval (MinKey first) to the start
     * of the next (MaxKey last), each end flipped in or out. */
    end_ref lo = lower_end(&all.v[0]);
    for (size_t i = 0; rc == 0 && i <= o->n; i++) {
        end_ref hi = upper_end(&all.v[0]);
        if (i < o->n) {
            hi = lower_end(&o->v[i]);
            hi.incl = !hi.incl;
        }
        rc = ival_between(&out, lo, hi);
        if (i < o->n) {
            lo = upper_end(&o->v[i]);
            lo.incl = !lo.incl;
        }
    }
    mfi_oil_free(&all);
    if (rc != 0) {
        mfi_oil_free(&out);
        return -1;
    }
    mfi_oil_free(o);
    *o = out;
    return 0;
}

/* ------------------------------------------------------- translations */

/* What equals null: an undefined value and null (a missing field is
 * indexed as null), [undefined, undefined] and [null, null], as mongod
 * 7.0 bounds it. */
static int push_null(mfi_oil *o)
{
    return oil_push_special(o, V_UNDEFINED) != 0 ? -1 : oil_push_special(o, V_NULL);
}

/* Equality to `v` (also one element of $in).  `*none`: no bounds. */
static int translate_eq(const bson_iter_t *v, const mf_collator *coll, mfi_oil *o, bool *missing,
                        bool *exact, bool *none)
{
    bson_iter_t el;
    switch (bson_iter_type(v)) {
    case BSON_TYPE_REGEX:
        *none = true; /* matches strings by pattern */
        return 0;
    case BSON_TYPE_UNDEFINED:
        /* mongod refuses it as an operand; the key undefined is also an
         * empty array's, which the matcher does not take for it */
        *none = true;
        return 0;
    case BSON_TYPE_ARRAY:
        /* The whole array, or an element equal to it; the index holds the
         * elements of arrays (an empty one as undefined). */
        *exact = false;
        if (bson_iter_recurse(v, &el) && bson_iter_next(&el)) {
            if (oil_push_point(o, &el, coll) != 0)
                return -1;
        } else if (oil_push_special(o, V_UNDEFINED) != 0) {
            return -1;
        }
        return oil_push_point(o, v, coll);
    case BSON_TYPE_NULL:
        *missing = true;
        *exact = false;
        return push_null(o);
    default:
        return oil_push_point(o, v, coll);
    }
}

/* Whether `s` may hold a '|' that is not escaped, so that the pattern has
 * alternatives.  A false yes only costs the prefix. */
static bool may_have_pipe(const char *s)
{
    for (size_t i = 0; s[i]; i++)
        if (s[i] == '|' && (i == 0 || s[i - 1] != '\\' || (i >= 2 && s[i - 2] == '\\')))
            return true;
    return false;
}

/* Where the last UTF-8 character of `b` starts (0 when it is empty). */
static size_t last_char_at(const mf_buf *b)
{
    size_t at = b->len ? b->len - 1 : 0;
    while (at > 0 && (b->data[at] & 0xc0) == 0x80)
        at--;
    return at;
}

/* Whether the "{" before `p` may repeat what precedes it zero times:
 * {0}, {0,n}, {,n} (PCRE2 10.43 reads that one as a quantifier, older
 * ones as text), with spaces inside as 10.43 allows them. */
static bool zero_repeat(const char *p)
{
    while (*p == ' ')
        p++;
    return *p == '0' || *p == ',';
}

/* The literal prefix that every string `re` (with `flags`) matches starts
 * with, into `out` (empty: none), found as mongod's simpleRegex finds it:
 * after ^ (or \A, which 'm' leaves alone), up to the first character that
 * is not itself -- a metacharacter, a class escape -- with a quantified
 * last character taken off again.  Flags other than 'm', 's', 'x' and 'u'
 * (such as 'i') give no prefix.  `*whole`: the pattern is that prefix and
 * nothing else (/^abc/).  Where it differs from mongod:
 *   - 'u' (UTF-8 mode; pymongo sends it for every re.compile pattern)
 *     keeps the prefix: literal characters match the same bytes with it
 *     or without.  mongod takes no prefix.
 *   - to keep the bounds no narrower than the condition, the last
 *     character comes off whenever a quantifier might still reach it:
 *     after a "{" that may repeat zero times ({0}, {,n}), and at the
 *     things PCRE2 reads as nothing, so that a quantifier after them
 *     applies to the character before -- a lone \E, a (?#...) comment,
 *     an 'x' comment, and under 'x' any non-ASCII character (PCRE2 skips
 *     some Unicode spaces there).  mongod keeps it.
 *   - a quantified character is taken off whole, all its UTF-8 bytes. */
static int regex_prefix(const char *re, const char *flags, mf_buf *out, bool *whole)
{
    bool from_a = false, extended = false;
    out->len = 0;
    *whole = false;
    if (re[0] == '\\' && re[1] == 'A') {
        from_a = true;
        re += 2;
    } else if (re[0] == '^') {
        re++;
    } else {
        return 0;
    }
    if (may_have_pipe(re))
        return 0;
    for (; *flags; flags++) {
        if (*flags == 'm' && !from_a)
            return 0; /* ^ would also match after every newline */
        if (*flags == 'x')
            extended = true;
        else if (*flags != 'm' && *flags != 's' && *flags != 'u')
            return 0;
    }
    while (*re) {
        unsigned char c = (unsigned char)*re++;
        if (c == '*' || c == '?' || (c == '{' && zero_repeat(re)) ||
            (c == '(' && re[0] == '?' && re[1] == '#') || (c == '\\' && *re == 'E') ||
            (extended && (c == '#' || c >= 0x80))) {
            out->len = last_char_at(out); /* optional, or a quantifier may follow */
            return 0;
        }
        if (c == '\\') {
            c = (unsigned char)*re;
            if (c == 'Q') { /* \Q...\E: all of it literal */
                for (re++; *re && !(re[0] == '\\' && re[1] == 'E'); re++)
                    if (mf_buf_append(out, re, 1) != 0)
                        return -1;
                if (*re)
                    re += 2;
                continue;
            }
            if (c == 0 || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                (c >= '0' && c <= '9'))
                return 0; /* a class, an anchor, a back reference ... */
            re++; /* an escaped punctuation character is itself */
        } else if (strchr("^$.[()+{", c)) {
            return 0;
        } else if (extended && (c == ' ' || (c >= '\t' && c <= '\r'))) {
            continue;
        }
        if (mf_buf_append(out, &c, 1) != 0)
            return -1;
    }
    *whole = out->len > 0;
    return 0;
}

/* The code point of the UTF-8 character `p` (`n` bytes), or false. */
static bool utf8_char(const uint8_t *p, size_t n, uint32_t *cp)
{
    static const uint8_t lead_bits[5] = {0, 0x7f, 0x1f, 0x0f, 0x07};
    size_t want = p[0] < 0x80 ? 1 : p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 0;
    if (want == 0 || want != n)
        return false;
    *cp = p[0] & lead_bits[n];
    for (size_t i = 1; i < n; i++)
        *cp = *cp << 6 | (p[i] & 0x3f);
    return *cp <= 0x10ffff;
}

static int utf8_put(mf_buf *out, uint32_t cp)
{
    uint8_t b[4];
    size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (n == 1) {
        b[0] = (uint8_t)cp;
    } else {
        for (size_t i = n - 1; i > 0; i--, cp >>= 6)
            b[i] = (uint8_t)(0x80 | (cp & 0x3f));
        b[0] = (uint8_t)((0xf00u >> n) | cp); /* 0xc0, 0xe0 or 0xf0, then the high bits */
    }
    return mf_buf_append(out, b, n);
}

/* `pre` made the least string past every string that starts with it: its
 * last character replaced by the next one.  UTF-8 keeps code points in
 * byte order, and no character's bytes begin another's, so all such
 * strings sort before it, and the bound is text (mongod adds one to the
 * last byte, which can leave invalid UTF-8 in explain).  A last character
 * with no next one goes, and the one before steps instead.  False when
 * nothing is left, the bytes are not UTF-8, or memory ran out. */
static bool next_prefix(mf_buf *pre)
{
    while (pre->len) {
        size_t at = last_char_at(pre);
        uint32_t cp;
        if (!utf8_char(pre->data + at, pre->len - at, &cp))
            return false;
        pre->len = at;
        if (cp == 0x10ffff)
            continue;
        /* past the surrogates */
        return utf8_put(pre, cp + 1 == 0xd800 ? 0xe000 : cp + 1) == 0;
    }
    return false;
}

/* `b` = {"0": lo, "1": hi, "2": the regex}: [lo, hi), then [regex, regex]. */
static int push_regex_bounds(mfi_oil *o, const bson_t *b)
{
    bson_iter_t lo, hi, re;
    if (!bson_iter_init(&lo, b) || !bson_iter_next(&lo))
        return -1;
    hi = lo;
    re = lo;
    if (!bson_iter_next(&hi) || !bson_iter_next(&re) || !bson_iter_next(&re))
        return -1;
    int rc = oil_push_range(o, &lo, true, &hi, false, NULL);
    return rc ? rc : oil_push_point(o, &re, NULL);
}

/* A regex with no literal prefix, as mongod bounds it: every string,
 * ["", {}), then the regex value itself.  Inexact: the scan tests the
 * regex on each string key (mfi_pred.key_re), or the FETCH does. */
static int all_strings(const char *pattern, const char *flags, mfi_oil *o)
{
    bson_t tmp = BSON_INITIALIZER, empty = BSON_INITIALIZER;
    int rc = -1;
    if (bson_append_utf8(&tmp, "0", 1, "", 0) && bson_append_document(&tmp, "1", 1, &empty) &&
        bson_append_regex(&tmp, "2", 1, pattern, flags))
        rc = push_regex_bounds(o, &tmp);
    bson_destroy(&tmp);
    return rc;
}

/* A regex match (mongod's translateRegex): the strings starting with the
 * pattern's literal prefix, ["abc", "abd"), then the regex value itself;
 * with no prefix every string (all_strings, `*every`), inexact.  Under a
 * collation strings are ordered by their sort keys, not their bytes, so
 * it bounds nothing (`*none`), nor does a pattern with a NUL in it (the
 * matcher refuses it).  `*exact`: the bounds are the condition (a
 * whole-prefix pattern). */
static int translate_regex(const char *pattern, size_t plen, const char *flags,
                           const mf_collator *coll, mfi_oil *o, bool *exact, bool *every,
                           bool *none)
{
    mf_buf pre = {0};
    bool whole = false;
    int rc = 0;
    bool raw = !coll && strlen(pattern) == plen;
    if (raw && (rc = regex_prefix(pattern, flags, &pre, &whole)) != 0)
        goto out;
    bson_t tmp = BSON_INITIALIZER;
    if (pre.len)
        bson_append_utf8(&tmp, "0", 1, (const char *)pre.data, (int)pre.len);
    if (pre.len == 0 || !next_prefix(&pre)) {
        bson_destroy(&tmp);
        if (raw) {
            *exact = false;
            *every = true;
            rc = all_strings(pattern, flags, o);
        } else {
            *none = true;
        }
        goto out;
    }
    bson_append_utf8(&tmp, "1", 1, (const char *)pre.data, (int)pre.len);
    bson_append_regex(&tmp, "2", 1, pattern, flags);
    rc = push_regex_bounds(o, &tmp);
    bson_destroy(&tmp);
    *exact = whole;
out:
    mf_buf_free(&pre);
    return rc;
}

/* The pattern and flags of a regex condition: {a: /re/}, {$regex: /re/},
 * {$regex: "re", $options: "f"} (`options`: the operator document's
 * $options, or NULL).  False when it is malformed (the matcher reports
 * that). */
static bool regex_operand(const bson_iter_t *v, const bson_iter_t *options, const char **pattern,
                          size_t *plen, const char **flags)
{
    const char *opt = NULL;
    if (options) {
        if (!BSON_ITER_HOLDS_UTF8(options))
            return false;
        opt = bson_iter_utf8(options, NULL);
    }
    if (BSON_ITER_HOLDS_REGEX(v)) {
        *pattern = bson_iter_regex(v, flags);
        *plen = strlen(*pattern);
        if (opt && **flags)
            return false; /* options in both places */
        if (opt)
            *flags = opt;
        return true;
    }
    if (!BSON_ITER_HOLDS_UTF8(v))
        return false;
    uint32_t len;
    *pattern = bson_iter_utf8(v, &len);
    *plen = len;
    *flags = opt ? opt : "";
    return true;
}

static bool is_range_op(const char *op)
{
    return strcmp(op, "$gt") == 0 || strcmp(op, "$gte") == 0 || strcmp(op, "$lt") == 0 ||
           strcmp(op, "$lte") == 0;
}

/* $gt/$gte/$lt/$lte `v`. */
static int translate_range(const char *op, const bson_iter_t *v, const mf_collator *coll,
                           mfi_oil *o, bool *missing, bool *none)
{
    bool lower = op[1] == 'g', incl = op[3] == 'e';
    bson_type_t t = bson_iter_type(v);
    if (t == BSON_TYPE_MINKEY || t == BSON_TYPE_MAXKEY) {
        /* Everything is <= MaxKey and >= MinKey, null and missing fields
         * too (a sparse index lacks them); the rest bounds nothing. */
        if ((t == BSON_TYPE_MAXKEY) != lower) {
            *missing = true;
            return mfi_oil_all(o);
        }
        *none = true;
        return 0;
    }
    if (t == BSON_TYPE_NULL) {
        if (!incl) {
            *none = true;
            return 0;
        }
        *missing = true; /* $gte/$lte null is $eq null (type brackets) */
        return push_null(o);
    }
    if (is_nan(v))
        return incl ? oil_push_point(o, v, coll) : 0; /* only NaN is <= NaN; nothing < NaN */
    bson_t tmp;
    bson_iter_t edge;
    bool edge_incl;
    if (!bracket_edge(bson_iter_type(v), lower, &tmp, &edge, &edge_incl)) {
        *none = true;
        return 0;
    }
    /* The edge as it is: the empty string encodes below every sort key. */
    int rc = lower ? oil_push_ends(o, v, incl, coll, &edge, edge_incl, NULL, coll != NULL)
                   : oil_push_ends(o, &edge, edge_incl, NULL, v, incl, coll, coll != NULL);
    bson_destroy(&tmp);
    return rc;
}

/* The whole bracket of BSON type `t` into `o` (mongod's appendMinForType
 * to appendMaxForType); numbers from NaN, which lies below -inf.
 * `*known` false, and nothing pushed, for a type without one here.
 * Returns 0 or -1 (out of memory). */
static int push_bracket(mfi_oil *o, bson_type_t t, bool *known)
{
    bson_t lo, hi;
    bson_iter_t lo_it, hi_it;
    bool lo_incl, hi_incl;
    *known = bracket_edge(t, false, &lo, &lo_it, &lo_incl);
    if (!*known)
        return 0;
    bracket_edge(t, true, &hi, &hi_it, &hi_incl);
    if (t == BSON_TYPE_DOUBLE) { /* NaN, below -inf, is a number too */
        bson_reinit(&lo);
        BSON_APPEND_DOUBLE(&lo, "", NAN);
        bson_iter_init(&lo_it, &lo);
        bson_iter_next(&lo_it);
    }
    int rc = oil_push_ends(o, &lo_it, lo_incl, NULL, &hi_it, hi_incl, NULL, false);
    bson_destroy(&lo);
    bson_destroy(&hi);
    return rc;
}

/* {$type: ...}: the brackets of its types, as mongod bounds it; never
 * exact (a bracket holds other types: int beside double, symbol beside
 * string; null keys stand for missing fields too).  An array type: every
 * key, for an array's key is its elements'.  A type without a bracket
 * here bounds nothing. */
static int translate_type(const bson_iter_t *v, mfi_oil *o, bool *collatable, bool *none)
{
    mf_error err;
    uint32_t mask;
    if (mfi_type_mask(v, &mask, &err) != 0) {
        *none = true; /* the matcher reports it */
        return 0;
    }
    if (mask & (1u << BSON_TYPE_ARRAY))
        return mfi_oil_all(o);
    if (mask & MFI_TYPE_NUMBER)
        mask |= 1u << BSON_TYPE_DOUBLE;
    int rc = 0;
    for (unsigned t = 1; rc == 0 && !*none && t < 20; t++) {
        if (!(mask >> t & 1u))
            continue;
        bson_type_t bt = (bson_type_t)t;
        *collatable |= bt == BSON_TYPE_UTF8 || bt == BSON_TYPE_SYMBOL || bt == BSON_TYPE_DOCUMENT;
        if (bt == BSON_TYPE_NULL || bt == BSON_TYPE_UNDEFINED) {
            rc = oil_push_special(o, bt == BSON_TYPE_NULL ? V_NULL : V_UNDEFINED);
            continue;
        }
        /* the numbers share one bracket, which starts at NaN */
        bool known, number = bt == BSON_TYPE_INT32 || bt == BSON_TYPE_INT64 ||
                             bt == BSON_TYPE_DECIMAL128;
        rc = push_bracket(o, number ? BSON_TYPE_DOUBLE : bt, &known);
        *none = !known;
    }
    if (rc == 0 && !*none && (mask & MFI_TYPE_MINKEY))
        rc = oil_push_special(o, V_MINKEY);
    if (rc == 0 && !*none && (mask & MFI_TYPE_MAXKEY))
        rc = oil_push_special(o, V_MAXKEY);
    return rc == 0 && !*none ? oil_union(o) : rc;
}

static int preds_push(mfi_preds *p, mfi_pred *pr)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        mfi_pred *v = realloc(p->v, cap * sizeof *v);
        if (!v)
            return -1;
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = *pr;
    return 0;
}

static bool range_exact(const bson_iter_t *v)
{
    switch (bson_iter_type(v)) {
    case BSON_TYPE_INT32: case BSON_TYPE_INT64: case BSON_TYPE_DECIMAL128:
    case BSON_TYPE_UTF8: case BSON_TYPE_OID: case BSON_TYPE_DATE_TIME:
    case BSON_TYPE_BOOL: case BSON_TYPE_TIMESTAMP: case BSON_TYPE_BINARY:
        return true;
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(v);
        return d == d;
    }
    default:
        return false;
    }
}

bool mfi_collatable(const bson_iter_t *v)
{
    switch (bson_iter_type(v)) {
    case BSON_TYPE_UTF8: case BSON_TYPE_SYMBOL: case BSON_TYPE_DOCUMENT: case BSON_TYPE_ARRAY:
        return true;
    default:
        return false;
    }
}

/* {$exists: want}: any value, [MinKey, MaxKey]; or a missing field,
 * indexed as null, [null, null].  Never exact: null may be stored. */
static int translate_exists(bool want, mfi_pred *pr)
{
    pr->exact = false;
    if (want)
        return mfi_oil_all(&pr->oil);
    pr->matches_missing = true;
    return oil_push_special(&pr->oil, V_NULL);
}

/* Whether `o` is exactly the two points of null equality (push_null). */
static bool is_null_points(const mfi_oil *o)
{
    return o->n == 2 && mfi_oil_is_points(o) && o->v[0].lo_v.value_type == BSON_TYPE_UNDEFINED &&
           o->v[1].lo_v.value_type == BSON_TYPE_NULL;
}

/* A negation -- {$ne: v}, {$nin: [...]}, {$not: {<op>: v}} -- as mongod
 * 7.0 bounds it (IndexBoundsBuilder, QueryPlannerIXSelect::_compatible):
 * the complement of the bounds of the condition negated.  That is sound
 * only when those bounds hold no key of a value the condition rejects
 * (their complement would then leave out a document the negation
 * matches), so the condition must be one whose bounds are its values:
 *
 *   - an equality or $in, with no array (an array's bounds hold its first
 *     element, which does not equal the array) and no regex in it; the one
 *     list with an array allowed is [null, []] (mongod's canUseIndexForNin),
 *     whose complement needs a fetch even on a non-multikey field;
 *   - a $gt/$gte/$lt/$lte whose operand keeps to one type bracket
 *     (range_exact), or $gte/$lte null, which are equality to null;
 *   - $exists: true, whose negation is $exists: false.
 *
 * A negated null (pr->neg_null) bounds no multikey field: {a: []} has the
 * key undefined, which {$ne: null} leaves out, yet it matches.  Nor does
 * [null, []] on a dotted path: {a: [2]} gives "a.b" the key null, and
 * matches {"a.b": {$nin: [null, []]}}.  The complement matches a missing
 * field (a sparse index cannot serve it) unless the condition is equality
 * to null alone, as mongod lets a sparse index serve {$ne: null} and no
 * other negation.  `*none`: no bounds. */
static int translate_negation(const char *path, const char *op, const bson_iter_t *v,
                              const mf_collator *coll, mfi_pred *pr, bool *none)
{
    const char *inner = strcmp(op, "$ne") == 0 ? "$eq" : strcmp(op, "$nin") == 0 ? "$in" : NULL;
    bson_iter_t operand = *v;
    if (!inner) { /* $not: one operator (a regex or two operators: nothing) */
        bson_iter_t ops;
        if (!BSON_ITER_HOLDS_DOCUMENT(v) || !bson_iter_recurse(v, &ops) || !bson_iter_next(&ops))
            goto none;
        inner = bson_iter_key(&ops);
        operand = ops;
        if (bson_iter_next(&ops))
            goto none;
    }
    mfi_oil pos = {0};
    bool missing = false, nin_null_empty = false, ignored;
    int rc = 0;
    if (strcmp(inner, "$eq") == 0) {
        if (BSON_ITER_HOLDS_ARRAY(&operand) || BSON_ITER_HOLDS_REGEX(&operand))
            goto none;
        pr->collatable = mfi_collatable(&operand);
        rc = translate_eq(&operand, coll, &pos, &missing, &ignored, none);
    } else if (strcmp(inner, "$in") == 0) {
        bson_iter_t el;
        int nulls = 0, empties = 0, others = 0;
        if (!BSON_ITER_HOLDS_ARRAY(&operand) || !bson_iter_recurse(&operand, &el))
            goto none;
        while (bson_iter_next(&el)) {
            bson_iter_t inside;
            if (BSON_ITER_HOLDS_REGEX(&el))
                goto none;
            if (BSON_ITER_HOLDS_NULL(&el))
                nulls++;
            else if (BSON_ITER_HOLDS_ARRAY(&el) && bson_iter_recurse(&el, &inside) &&
                     !bson_iter_next(&inside))
                empties++;
            else if (BSON_ITER_HOLDS_ARRAY(&el))
                goto none;
            else
                others++;
        }
        nin_null_empty = nulls && empties && !others;
        if (empties && !nin_null_empty)
            goto none;
        bson_iter_recurse(&operand, &el);
        while (rc == 0 && !*none && bson_iter_next(&el)) {
            pr->collatable |= mfi_collatable(&el);
            rc = translate_eq(&el, coll, &pos, &missing, &ignored, none);
        }
        if (rc == 0)
            oil_sort_points(&pos);
    } else if (is_range_op(inner)) {
        bool null_eq = BSON_ITER_HOLDS_NULL(&operand) && inner[3] == 'e';
        if (!null_eq && !range_exact(&operand))
            goto none; /* MinKey, MaxKey, NaN, documents, arrays: wider bounds */
        pr->collatable = mfi_collatable(&operand);
        rc = translate_range(inner, &operand, coll, &pos, &missing, none);
    } else if (strcmp(inner, "$exists") == 0 && bson_iter_as_bool(&operand)) {
        return translate_exists(false, pr);
    } else {
        goto none; /* $regex, $type, $mod, $elemMatch, $size, $all ...: the matcher's */
    }
    bool only_null = rc == 0 && is_null_points(&pos);
    if (rc == 0 && !*none)
        rc = oil_complement(&pos);
    if (rc != 0 || *none) {
        mfi_oil_free(&pos);
        return rc;
    }
    pr->oil = pos;
    pr->negation = true;
    pr->exact = !nin_null_empty;
    pr->neg_null = missing && (!nin_null_empty || strchr(path, '.'));
    pr->matches_missing = !only_null;
    return 0;
none:
    *none = true;
    return 0;
}

static bool has_number_part(const char *f);

/* One condition on `path`: operator `op` (NULL: an implicit equality) with
 * operand `v`; `options` is $options beside a $regex (else NULL).
 * `*used`: it became a pred. */
static int add_condition(mfi_preds *p, const char *path, const char *op, const bson_iter_t *v,
                         const bson_iter_t *options, size_t top, bool *used)
{
    mfi_pred pr = {.path = path, .exact = true, .top = top};
    const mf_collator *coll = p->coll;
    const char *pattern = NULL, *flags = NULL;
    size_t plen;
    bool none = false;
    int rc = 0;
    *used = false;
    if ((!op && BSON_ITER_HOLDS_REGEX(v)) || (op && strcmp(op, "$regex") == 0)) {
        /* A regex value is a pattern, not a collatable operand. */
        bool every = false;
        if (regex_operand(v, options, &pattern, &plen, &flags))
            rc = translate_regex(pattern, plen, flags, coll, &pr.oil, &pr.exact, &every, &none);
        else
            none = true;
        /* No prefix: the scan tests the regex on each key, which is the
         * string itself (no collation, no NUL in the pattern). */
        if (every) {
            pr.key_re = pattern;
            pr.key_re_flags = flags;
        }
    } else if (!op || strcmp(op, "$eq") == 0) {
        pr.collatable = mfi_collatable(v);
        rc = translate_eq(v, coll, &pr.oil, &pr.matches_missing, &pr.exact, &none);
        pr.equality = true;
        /* An array operand is two points, the array and its first element,
         * in that order: sorted here as $in's are ({a: [true]}: true
         * sorts after arrays), since the key check bisects them. */
        if (rc == 0 && BSON_ITER_HOLDS_ARRAY(v))
            oil_sort_points(&pr.oil);
    } else if (strcmp(op, "$in") == 0 && BSON_ITER_HOLDS_ARRAY(v)) {
        bson_iter_t el;
        bool regexes = false;
        bson_iter_recurse(v, &el);
        while (rc == 0 && !none && bson_iter_next(&el)) {
            bool exact = true, every = false;
            if (BSON_ITER_HOLDS_REGEX(&el)) {
                regexes = true;
                regex_operand(&el, NULL, &pattern, &plen, &flags);
                rc = translate_regex(pattern, plen, flags, coll, &pr.oil, &exact, &every, &none);
                pr.exact = pr.exact && exact;
                continue;
            }
            pr.collatable |= mfi_collatable(&el);
            rc = translate_eq(&el, coll, &pr.oil, &pr.matches_missing, &pr.exact, &none);
        }
        if (rc == 0 && regexes)
            rc = oil_union(&pr.oil);
        else if (rc == 0)
            oil_sort_points(&pr.oil);
        pr.equality = !regexes;
    } else if (is_range_op(op)) {
        pr.collatable = mfi_collatable(v);
        rc = translate_range(op, v, coll, &pr.oil, &pr.matches_missing, &none);
        /* Exact only for operands whose comparisons stay inside one plain
         * type bracket; MinKey, MaxKey, null, NaN, documents and arrays
         * have rules of their own: the matcher decides those. */
        pr.exact = range_exact(v);
    } else if (strcmp(op, "$ne") == 0 || strcmp(op, "$nin") == 0 || strcmp(op, "$not") == 0) {
        rc = translate_negation(path, op, v, coll, &pr, &none);
    } else if (strcmp(op, "$exists") == 0) {
        rc = translate_exists(bson_iter_as_bool(v), &pr);
    } else if (strcmp(op, "$type") == 0) {
        pr.exact = false;
        rc = translate_type(v, &pr.oil, &pr.collatable, &none);
    } else if (strcmp(op, "$mod") == 0) {
        /* Only a number has a remainder: the numbers' bracket, as mongod
         * bounds it (the matcher checks the operand and each remainder). */
        bool known;
        pr.exact = false;
        rc = push_bracket(&pr.oil, BSON_TYPE_DOUBLE, &known);
    } else {
        none = true;
    }
    /* A condition that a missing field meets bounds no positional path
     * ("a.0", "c.0.d"): through an array the matcher also reads each
     * element's field "0", and an element without one is a missing value
     * ({a: [{x: 1}]} matches {"a.0": null}), while the index keys only the
     * element the position names ({x: 1}), never a null for it.  The
     * same for a negated null ({"a.0": {$ne: null}}): an empty array at
     * the position is keyed undefined without making the index multikey,
     * and an element without the field reads as null, which the key
     * does not show.  The matcher answers such a condition alone. */
    if (rc == 0 && !none && (pr.matches_missing || pr.neg_null) && has_number_part(path))
        none = true;
    if (rc == 0 && !none) {
        if (preds_push(p, &pr) != 0)
            rc = -1;
        else
            *used = true;
    }
    if (!*used)
        mfi_oil_free(&pr.oil);
    return rc;
}

/* Whether the operator document `v` holds a $regex. */
static bool has_regex_beside(const bson_iter_t *v)
{
    bson_iter_t ops;
    return bson_iter_recurse(v, &ops) && bson_iter_find(&ops, "$regex");
}

static int field_conditions(mfi_preds *p, const char *path, const bson_iter_t *v, size_t top,
                            bool of_elements, bool *done);

/* Whether a component of the dotted path `f` is all digits. */
static bool has_number_part(const char *f)
{
    for (const char *c = f; *c;) {
        size_t n = strcspn(c, ".");
        if (n && strspn(c, "0123456789") >= n)
            return true;
        c += n + (c[n] == '.');
    }
    return false;
}

/* Whether a component of the dotted path `f` past its first is all digits
 * (a position in an array, where "0" alone is a field's name). */
static bool positional_below(const char *f)
{
    const char *dot = strchr(f, '.');
    return dot && has_number_part(dot + 1);
}

/* `path` joined to `field` with a dot, kept by `p` (its preds borrow it). */
static const char *owned_path(mfi_preds *p, const char *path, const char *field)
{
    char **v = realloc(p->owned, (p->nowned + 1) * sizeof *v);
    if (!v)
        return NULL;
    p->owned = v;
    size_t n = strlen(path) + 1 + strlen(field) + 1;
    if (!(v[p->nowned] = malloc(n)))
        return NULL;
    snprintf(v[p->nowned], n, "%s.%s", path, field);
    return v[p->nowned++];
}

/* {path: {$elemMatch: sub}}, as mongod bounds it (never exactly: only the
 * document tells that one element satisfied it all):
 *   - on values ({$gt: 1, $lt: 5}): one element meets every condition, so
 *     its key lies in the intersection of their bounds (an $elemMatch in
 *     there is about the element's own elements: it bounds nothing);
 *   - on documents ({a: 1, b: {$gt: 2}}): some element's `a` is 1, so
 *     path.a has a key [1, 1], and so on for each field -- each alone:
 *     two conditions on one field may be met by two values of an array
 *     inside the element. */
static int elem_match(mfi_preds *p, const char *path, const bson_iter_t *v, size_t top)
{
    /* (A field named by a number, {arr: {$elemMatch: {"0": 5}}}, means
     * field or position 0 of each element, where the index path arr.0
     * means arr's first element: such a field bounds nothing.) */
    bson_iter_t sub, first;
    if (!bson_iter_recurse(v, &sub))
        return 0;
    first = sub;
    if (!bson_iter_next(&first))
        return 0;
    size_t before = p->n;
    if (!mfi_elem_match_is_value(v)) {
        /* documents' fields (a DBRef's "$ref"/"$id" among them: skipped
         * below, the matcher tests them) */
        bool ignored = true;
        while (bson_iter_next(&sub)) {
            const char *f = bson_iter_key(&sub), *sp;
            if (f[0] == '$' || has_number_part(f))
                continue; /* $and, $or ... inside: the matcher's; and see above */
            if (!(sp = owned_path(p, path, f)) ||
                field_conditions(p, sp, &sub, top, false, &ignored))
                return -1;
        }
    } else if (positional_below(path)) {
        /* On values through a position ("a.0", "a.0.b"): an array the
         * position names is keyed whole ({a: [[1, 5]]} has the one key
         * [1, 5] under "a.0"), while the $elemMatch is about its
         * elements: no bounds (mongod's planner refuses such an index
         * for it too). */
        return 0;
    } else {
        mfi_preds one = {.coll = p->coll, .owned = p->owned, .nowned = p->nowned};
        bool ignored = true;
        int rc = field_conditions(&one, path, v, top, true, &ignored);
        p->owned = one.owned; /* a nested $elemMatch may have added paths */
        p->nowned = one.nowned;
        one.owned = NULL;
        one.nowned = 0;
        mfi_pred pr = {.path = path, .top = top};
        for (size_t i = 0; rc == 0 && i < one.n; i++) {
            pr.collatable |= one.v[i].collatable;
            pr.neg_null |= one.v[i].neg_null;
            if (i == 0) {
                pr.oil = one.v[0].oil;
                one.v[0].oil = (mfi_oil){0};
            } else {
                rc = mfi_oil_intersect(&pr.oil, &one.v[i].oil);
            }
        }
        bool any = one.n > 0;
        mfi_preds_free(&one);
        if (rc == 0 && any && preds_push(p, &pr) != 0)
            rc = -1;
        if (rc != 0 || !any)
            mfi_oil_free(&pr.oil);
        if (rc != 0)
            return -1;
    }
    for (size_t i = before; i < p->n; i++)
        p->v[i].exact = false;
    return 0;
}

/* {path: {$all: [...]}}: each element must hold, as {path: element} (a
 * value or a regex) or {path: {$elemMatch: ...}} would, so each bounds
 * the path as that condition does; mongod rewrites $all into that $and.
 * The bounds of a multikey field take one of them, of any other field
 * their intersection (cand_build).  Never exact: the FETCH filter keeps
 * the $all, whose matcher also rejects what mongod rejects ($all: 5,
 * {$gt: 1} in the list; a DBRef there is a value).  [] bounds nothing: it
 * matches no document, which the matcher decides. */
static int all_conditions(mfi_preds *p, const char *path, const bson_iter_t *v, size_t top)
{
    bson_iter_t el;
    if (!BSON_ITER_HOLDS_ARRAY(v) || !bson_iter_recurse(v, &el))
        return 0;
    size_t before = p->n;
    while (bson_iter_next(&el)) {
        bson_iter_t sub;
        bool has_first = BSON_ITER_HOLDS_DOCUMENT(&el) && bson_iter_recurse(&el, &sub) &&
                         bson_iter_next(&sub);
        if (has_first && strcmp(bson_iter_key(&sub), "$elemMatch") == 0) {
            if (BSON_ITER_HOLDS_DOCUMENT(&sub) && elem_match(p, path, &sub, top) != 0)
                return -1;
            continue;
        }
        if (has_first && mfi_is_path_operator(bson_iter_key(&sub)))
            continue; /* refused by the matcher */
        bool used;
        if (add_condition(p, path, NULL, &el, NULL, top, &used) != 0)
            return -1;
    }
    for (size_t i = before; i < p->n; i++)
        p->v[i].exact = false;
    return 0;
}

/* {path: {$geoWithin | $within | $geoIntersects: ...}}: a pred holding
 * the parsed query (`v` its operator document, which the geo operator
 * owns whole), for a geo index field's cells; never exact.  A condition
 * that does not parse bounds nothing: the matcher reports it. */
static int geo_condition(mfi_preds *p, const char *path, const bson_iter_t *v, size_t top)
{
    uint32_t len;
    const uint8_t *data;
    bson_t section;
    mf_geo_query *q;
    mf_error err;
    bson_iter_document(v, &len, &data);
    if (!data || !bson_init_static(&section, data, len))
        return 0;
    if (mfi_geo_query_parse(&section, &q, &err) != 0)
        return err.code == MF_InternalError ? -1 : 0;
    mfi_pred pr = {.path = path, .top = top, .geo = q};
    if (preds_push(p, &pr) != 0) {
        mfi_geo_query_free(q);
        return -1;
    }
    return 0;
}

static bool is_geo_operator(const char *op)
{
    return strcmp(op, "$geoWithin") == 0 || strcmp(op, "$within") == 0 ||
           strcmp(op, "$geoIntersects") == 0;
}

/* The conditions on one field: `v` is its value in the filter, an operator
 * document or a value to equal (`of_elements`: the conditions of an
 * $elemMatch on values).  `*done` is cleared unless each became a pred
 * that may answer it. */
static int field_conditions(mfi_preds *p, const char *path, const bson_iter_t *v, size_t top,
                            bool of_elements, bool *done)
{
    bool used;
    if (!mfi_is_operator_doc(v, false)) {
        if (add_condition(p, path, NULL, v, NULL, top, &used) != 0)
            return -1;
        *done = *done && used;
        return 0;
    }
    bson_iter_t ops, options;
    bool has_options = bson_iter_recurse(v, &ops) && bson_iter_find(&ops, "$options");
    options = ops;
    bson_iter_recurse(v, &ops);
    while (bson_iter_next(&ops)) {
        const char *op = bson_iter_key(&ops);
        bool regex = strcmp(op, "$regex") == 0;
        if (strcmp(op, "$options") == 0 && has_regex_beside(v))
            continue; /* part of the $regex's pred */
        if (strcmp(op, "$elemMatch") == 0 && BSON_ITER_HOLDS_DOCUMENT(&ops)) {
            if (!of_elements && elem_match(p, path, &ops, top) != 0)
                return -1;
            *done = false;
            continue;
        }
        if (strcmp(op, "$all") == 0) {
            if (!of_elements && all_conditions(p, path, &ops, top) != 0)
                return -1;
            *done = false;
            continue;
        }
        if (is_geo_operator(op)) {
            if (!of_elements && geo_condition(p, path, v, top) != 0)
                return -1;
            *done = false;
            break; /* the operator document is the geo operator's */
        }
        if (add_condition(p, path, op, &ops, regex && has_options ? &options : NULL, top,
                          &used) != 0)
            return -1;
        *done = *done && used;
    }
    return 0;
}

/* The conditions of one filter document; `top` < SIZE_MAX: all belong to
 * that top-level element (inside a $and). */
static int collect(const bson_t *filter, mfi_preds *p, size_t top, bool *complete)
{
    bson_iter_t it;
    size_t t = 0;
    if (!bson_iter_init(&it, filter))
        return 0;
    for (; bson_iter_next(&it); t++) {
        size_t at = top != SIZE_MAX ? top : t;
        bool *done = top != SIZE_MAX ? complete : &p->complete[t];
        const char *k = bson_iter_key(&it);
        if (top == SIZE_MAX)
            *done = true;
        if (strcmp(k, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t el;
            bson_iter_recurse(&it, &el);
            while (bson_iter_next(&el)) {
                uint32_t len;
                const uint8_t *data;
                bson_t sub;
                if (!BSON_ITER_HOLDS_DOCUMENT(&el)) {
                    *done = false;
                    continue;
                }
                bson_iter_document(&el, &len, &data);
                if (!bson_init_static(&sub, data, len) || collect(&sub, p, at, done) != 0)
                    return -1;
            }
            continue;
        }
        if (k[0] == '$') {
            *done = false; /* $or, $nor, $expr ...: the matcher's */
            continue;
        }
        if (field_conditions(p, k, &it, at, false, done) != 0)
            return -1;
    }
    return 0;
}

int mfi_preds_collect(const bson_t *filter, mfi_preds *out, mf_error *err)
{
    return mfi_preds_collect_coll(filter, NULL, out, err);
}

int mfi_preds_collect_coll(const bson_t *filter, const mf_collator *coll, mfi_preds *out,
                           mf_error *err)
{
    memset(out, 0, sizeof *out);
    out->coll = coll;
    if (!filter)
        return 0;
    out->ntop = bson_count_keys(filter);
    out->complete = calloc(out->ntop ? out->ntop : 1, sizeof *out->complete);
    if (!out->complete || collect(filter, out, SIZE_MAX, NULL) != 0) {
        mfi_preds_free(out);
        return mf_error_oom(err);
    }
    return 0;
}

void mfi_preds_free(mfi_preds *p)
{
    for (size_t i = 0; i < p->n; i++) {
        mfi_oil_free(&p->v[i].oil);
        mfi_geo_query_free((mf_geo_query *)p->v[i].geo);
    }
    for (size_t i = 0; i < p->nowned; i++)
        free(p->owned[i]);
    free(p->owned);
    free(p->v);
    free(p->complete);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------ partial filter implication */

/* A condition: an operator and its operand ("$eq" for an implicit one). */
typedef struct cond {
    const char *op;
    bson_iter_t v;
} cond;

static bool same_bracket(const bson_iter_t *a, const bson_iter_t *b)
{
    return mf_bsonx_canonical_type(bson_iter_type(a)) == mf_bsonx_canonical_type(bson_iter_type(b));
}

/* Whether the value `w` satisfies `want` (a comparison or $exists: true),
 * strings compared under `coll`. */
static bool value_satisfies(const bson_iter_t *w, const cond *want, const mf_collator *coll)
{
    if (strcmp(want->op, "$exists") == 0)
        return bson_iter_type(w) != BSON_TYPE_NULL;
    if (!same_bracket(w, &want->v) || bson_iter_type(w) == BSON_TYPE_ARRAY ||
        bson_iter_type(w) == BSON_TYPE_REGEX || is_nan(w) || is_nan(&want->v))
        return false;
    int c = mf_bsonx_compare_values_coll(w, &want->v, coll);
    if (strcmp(want->op, "$eq") == 0)
        return c == 0;
    if (strcmp(want->op, "$gt") == 0)
        return c > 0;
    if (strcmp(want->op, "$gte") == 0)
        return c >= 0;
    if (strcmp(want->op, "$lt") == 0)
        return c < 0;
    if (strcmp(want->op, "$lte") == 0)
        return c <= 0;
    return false;
}

/* Whether the filter condition `have` implies `want` (same path). */
static bool cond_implies(const cond *have, const cond *want, const mf_collator *coll)
{
    const char *h = have->op;
    if (strcmp(h, "$eq") == 0)
        return value_satisfies(&have->v, want, coll);
    if (strcmp(h, "$in") == 0) {
        bson_iter_t el;
        bool any = false;
        if (!BSON_ITER_HOLDS_ARRAY(&have->v) || !bson_iter_recurse(&have->v, &el))
            return false;
        while (bson_iter_next(&el)) {
            if (!value_satisfies(&el, want, coll))
                return false;
            any = true;
        }
        return any || strcmp(want->op, "$exists") != 0;
    }
    if (strcmp(h, "$exists") == 0)
        return strcmp(want->op, "$exists") == 0 && bson_iter_as_bool(&have->v);
    if (!is_range_op(h) || bson_iter_type(&have->v) == BSON_TYPE_NULL ||
        bson_iter_type(&have->v) == BSON_TYPE_ARRAY || is_nan(&have->v))
        return false;
    if (strcmp(want->op, "$exists") == 0) {
        /* A range on a non-null value cannot match a missing field, but
         * one past MinKey or MaxKey takes null and missing too ({$gt:
         * MinKey}, {$lte: MaxKey}), as mongod's comparison does. */
        bson_type_t t = bson_iter_type(&have->v);
        return t != BSON_TYPE_MINKEY && t != BSON_TYPE_MAXKEY;
    }
    /* NaN is below every number, and {$gt: NaN} takes none of them: no
     * range implies a range on NaN (mongod's _isSubsetOf, unless both are
     * NaN). */
    if (!is_range_op(want->op) || h[1] != want->op[1] || is_nan(&want->v) ||
        !same_bracket(&have->v, &want->v))
        return false;
    int c = mf_bsonx_compare_values_coll(&have->v, &want->v, coll);
    bool have_incl = h[3] == 'e', want_incl = want->op[3] == 'e';
    if (h[1] == 'g')
        return c > 0 || (c == 0 && (want_incl || !have_incl));
    return c < 0 || (c == 0 && (want_incl || !have_incl));
}

/* Whether some condition on `path` in `filter` (top level, $and) implies `want`. */
static bool filter_has(const bson_t *filter, const char *path, const cond *want,
                       const mf_collator *coll)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, filter))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t el;
            bson_iter_recurse(&it, &el);
            while (bson_iter_next(&el)) {
                uint32_t len;
                const uint8_t *data;
                bson_t sub;
                if (!BSON_ITER_HOLDS_DOCUMENT(&el))
                    continue;
                bson_iter_document(&el, &len, &data);
                if (bson_init_static(&sub, data, len) && filter_has(&sub, path, want, coll))
                    return true;
            }
            continue;
        }
        if (strcmp(k, path) != 0)
            continue;
        if (!mfi_is_operator_doc(&it, false)) {
            cond have = {.op = "$eq", .v = it};
            if (cond_implies(&have, want, coll))
                return true;
            continue;
        }
        bson_iter_t ops;
        bson_iter_recurse(&it, &ops);
        while (bson_iter_next(&ops)) {
            cond have = {.op = bson_iter_key(&ops), .v = ops};
            if (cond_implies(&have, want, coll))
                return true;
        }
    }
    return false;
}

bool mfi_filter_implies(const bson_t *filter, const bson_t *partial)
{
    return mfi_filter_implies_coll(filter, partial, NULL);
}

bool mfi_filter_implies_coll(const bson_t *filter, const bson_t *partial, const mf_collator *coll)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, partial))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "$and") == 0 && BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_iter_t el;
            bson_iter_recurse(&it, &el);
            while (bson_iter_next(&el)) {
                uint32_t len;
                const uint8_t *data;
                bson_t sub;
                if (!BSON_ITER_HOLDS_DOCUMENT(&el))
                    return false;
                bson_iter_document(&el, &len, &data);
                if (!bson_init_static(&sub, data, len) || !filter ||
                    !mfi_filter_implies_coll(filter, &sub, coll))
                    return false;
            }
            continue;
        }
        if (k[0] == '$' || !filter)
            return false;
        if (!mfi_is_operator_doc(&it, false)) {
            cond want = {.op = "$eq", .v = it};
            if (bson_iter_type(&it) == BSON_TYPE_REGEX || BSON_ITER_HOLDS_ARRAY(&it) ||
                !filter_has(filter, k, &want, coll))
                return false;
            continue;
        }
        bson_iter_t ops;
        bson_iter_recurse(&it, &ops);
        while (bson_iter_next(&ops)) {
            cond want = {.op = bson_iter_key(&ops), .v = ops};
            bool ok = strcmp(want.op, "$eq") == 0 || is_range_op(want.op) ||
                      (strcmp(want.op, "$exists") == 0 && bson_iter_as_bool(&ops));
            if (!ok || !filter_has(filter, k, &want, coll))
                return false;
        }
    }
    return true;
}

bool mfi_has_strings(const bson_t *doc)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return false;
    while (bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_UTF8(&it) || BSON_ITER_HOLDS_SYMBOL(&it))
            return true;
        if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
            uint32_t len;
            const uint8_t *data;
            bson_t sub;
            if (BSON_ITER_HOLDS_DOCUMENT(&it))
                bson_iter_document(&it, &len, &data);
            else
                bson_iter_array(&it, &len, &data);
            if (bson_init_static(&sub, data, len) && mfi_has_strings(&sub))
                return true;
        }
    }
    return false;
}
