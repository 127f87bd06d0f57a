/*
 * accumulator.c -- the accumulators of $group (and of $bucket,
 * $bucketAuto and $setWindowFields): $sum $avg $min $max $first $last
 * $push $addToSet $count $mergeObjects $stdDevPop $stdDevSamp $top
 * $bottom $topN $bottomN $firstN $lastN $maxN $minN.
 *
 * An accumulator is parsed once (mfi_acc_parse) and keeps one state per
 * group.  States can be saved as BSON and merged (mfi_acc_save,
 * mfi_acc_merge) so that $group can spill partial groups to disk and
 * combine them later; merging a later partial into an earlier one gives the
 * same result as accumulating both inputs in order.
 *
 * Sums as mongod's AccumulatorSum: integers are added exactly (in 128
 * bits), doubles with compensated (Neumaier) summation; the result has the
 * widest type seen (int if every input was an int and the total fits, else
 * long if the total fits, else double).  Non-numeric inputs are ignored.
 */
#include "accumulator.h"
#include "expr_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

enum {
    A_SUM, A_AVG, A_MIN, A_MAX, A_FIRST, A_LAST, A_PUSH, A_ADD_TO_SET, A_COUNT,
    A_MERGE_OBJECTS, A_STDDEV_POP, A_STDDEV_SAMP, A_TOP, A_BOTTOM, A_TOP_N, A_BOTTOM_N,
    A_FIRST_N, A_LAST_N, A_MAX_N, A_MIN_N,
};

typedef struct acc_def {
    const char *name;
    int kind;
} acc_def;

static const acc_def defs[] = {
    {"$addToSet", A_ADD_TO_SET}, {"$avg", A_AVG},        {"$bottom", A_BOTTOM},
    {"$bottomN", A_BOTTOM_N},    {"$count", A_COUNT},    {"$first", A_FIRST},
    {"$firstN", A_FIRST_N},      {"$last", A_LAST},      {"$lastN", A_LAST_N},
    {"$max", A_MAX},             {"$maxN", A_MAX_N},     {"$mergeObjects", A_MERGE_OBJECTS},
    {"$min", A_MIN},             {"$minN", A_MIN_N},     {"$push", A_PUSH},
    {"$stdDevPop", A_STDDEV_POP}, {"$stdDevSamp", A_STDDEV_SAMP}, {"$sum", A_SUM},
    {"$top", A_TOP},             {"$topN", A_TOP_N},
};

#define PER_ACC_LIMIT (100 * 1024 * 1024)

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

bool mfi_acc_known(const char *name)
{
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (strcmp(defs[i].name, name) == 0)
            return true;
    return false;
}

/* ------------------------------------------------------------- parsing */

void mfi_acc_clear(mfi_acc *a)
{
    free(a->field);
    mf_expr_free(a->arg);
    mf_expr_free(a->n);
    mf_sort_free(a->sort_by);
    memset(a, 0, sizeof *a);
}

static int parse_n_form(const char *op, const bson_iter_t *it, mfi_agg *agg, mfi_acc *a,
                        bool with_sort, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 5787801, "specification must be an object; found %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_t f, n_it, in_it, sort_it;
    bool has_n = false, has_in = false, has_sort = false;
    bool single = a->kind == A_TOP || a->kind == A_BOTTOM;
    const char *in_name = with_sort ? "output" : "input";
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "n") == 0 && !single) {
            n_it = f;
            has_n = true;
        } else if (strcmp(k, in_name) == 0) {
            in_it = f;
            has_in = true;
        } else if (with_sort && strcmp(k, "sortBy") == 0) {
            sort_it = f;
            has_sort = true;
        } else {
            return mf_error_set(err, 5787901, "Unknown argument for 'n' operator: %s", k);
        }
    }
    if (!single && !has_n)
        return mf_error_set(err, 5787906, "Missing value for 'n'");
    if (!has_in)
        return mf_error_set(err, 5787907, "Missing value for '%s'", in_name);
    if (with_sort && !has_sort)
        return mf_error_set(err, 5788604, "%s requires a sortBy", op);
    int rc = mfi_agg_expr(agg, &in_it, &a->arg, err);
    if (rc == 0 && has_n)
        rc = mfi_agg_expr(agg, &n_it, &a->n, err);
    if (rc == 0 && with_sort) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&sort_it))
            return mf_error_set(err, 5788604, "expected an object for sortBy, found %s",
                                mf_bsonx_type_alias(bson_iter_type(&sort_it)));
        uint32_t l;
        const uint8_t *d;
        bson_t spec;
        bson_iter_document(&sort_it, &l, &d);
        bson_init_static(&spec, d, l);
        rc = mf_sort_parse_coll(&spec, agg->collator, &a->sort_by, err);
    }
    return rc;
}

int mfi_acc_parse(const bson_iter_t *field, mfi_agg *agg, mfi_acc *a, mf_error *err)
{
    memset(a, 0, sizeof *a);
    const char *name = bson_iter_key(field);
    if (!BSON_ITER_HOLDS_DOCUMENT(field))
        return mf_error_set(err, 40234, "The field '%s' must be an accumulator object", name);
    bson_iter_t op;
    bson_iter_recurse(field, &op);
    if (!bson_iter_next(&op))
        return mf_error_set(err, 40238, "The field '%s' must specify one accumulator", name);
    bson_iter_t more = op;
    if (bson_iter_next(&more))
        return mf_error_set(err, 40238, "The field '%s' must specify one accumulator", name);
    const char *opname = bson_iter_key(&op);
    const acc_def *def = NULL;
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (strcmp(defs[i].name, opname) == 0)
            def = &defs[i];
    if (!def)
        return mf_error_set(err, 15952, "unknown group operator '%s'", opname);
    a->kind = def->kind;
    a->name = def->name;
    a->coll = agg->collator;
    if (!(a->field = bson_strdup(name)))
        return oom(err);
    switch (a->kind) {
    case A_COUNT: {
        if (!BSON_ITER_HOLDS_DOCUMENT(&op))
            return mf_error_set(err, MF_TypeMismatch, "$count takes no arguments, i.e. $count:{}");
        bson_iter_t e;
        bson_iter_recurse(&op, &e);
        if (bson_iter_next(&e))
            return mf_error_set(err, MF_TypeMismatch, "$count takes no arguments, i.e. $count:{}");
        return 0;
    }
    case A_TOP: case A_BOTTOM: case A_TOP_N: case A_BOTTOM_N:
        return parse_n_form(opname, &op, agg, a, true, err);
    case A_FIRST_N: case A_LAST_N: case A_MAX_N: case A_MIN_N:
        return parse_n_form(opname, &op, agg, a, false, err);
    default:
        if (BSON_ITER_HOLDS_ARRAY(&op)) {
            bson_iter_t e;
            bson_iter_recurse(&op, &e);
            int cnt = 0;
            while (bson_iter_next(&e))
                cnt++;
            if (cnt == 1) {
                bson_iter_recurse(&op, &e);
                bson_iter_next(&e);
                return mfi_agg_expr(agg, &e, &a->arg, err);
            }
            return mf_error_set(err, 40237, "The %s accumulator is a unary operator", opname);
        }
        return mfi_agg_expr(agg, &op, &a->arg, err);
    }
}

/* -------------------------------------------------------------- states */

struct mfi_acc_state {
    bson_type_t widest;      /* sum, avg: the widest numeric type seen */
    __int128 isum;           /* exact integer sum (2^64 inputs cannot overflow it) */
    double dsum, dcomp;      /* compensated double sum */
    mf_dec dec;              /* sum of the decimal inputs (has_dec) */
    bool has_dec;
    int64_t count;           /* numeric inputs (avg, stddev) */
    double mean, m2;         /* stddev (Welford) */
    val v;                   /* first, last, min, max, mergeObjects (EOD: none) */
    bool has;
    /* push, addToSet, and the N forms: entries */
    struct entry {
        mf_buf key;          /* sort key (top/bottom, max/min), or empty */
        uint64_t seq;
        val v;
    } *e;
    size_t ne, cape;
    int64_t n;               /* the N forms' n */
    bool n_set;
    /* addToSet: hashes of the entries' encodings */
    uint64_t *set;
    size_t set_cap;
    size_t mem;
};

static void kahan_add(mfi_acc_state *s, double x)
{
    double t = s->dsum + x;
    if (fabs(s->dsum) >= fabs(x))
        s->dcomp += (s->dsum - t) + x;
    else
        s->dcomp += (x - t) + s->dsum;
    s->dsum = t;
}

static int type_rank(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_INT32: return 1;
    case BSON_TYPE_INT64: return 2;
    case BSON_TYPE_DOUBLE: return 3;
    case BSON_TYPE_DECIMAL128: return 4;
    default: return 0;
    }
}

static void widen(mfi_acc_state *s, bson_type_t t)
{
    if (type_rank(t) > type_rank(s->widest))
        s->widest = t;
}

static void add_long(mfi_acc_state *s, int64_t x)
{
    s->isum += x;
}

static bool isum_fits_long(const mfi_acc_state *s)
{
    return s->isum >= INT64_MIN && s->isum <= INT64_MAX;
}

mfi_acc_state *mfi_acc_state_new(void)
{
    mfi_acc_state *s = calloc(1, sizeof *s);
    if (s)
        s->v.value_type = BSON_TYPE_EOD;
    return s;
}

void mfi_acc_state_free(mfi_acc_state *s)
{
    if (!s)
        return;
    mfi_val_free(&s->v);
    for (size_t i = 0; i < s->ne; i++) {
        mf_buf_free(&s->e[i].key);
        mfi_val_free(&s->e[i].v);
    }
    free(s->e);
    free(s->set);
    free(s);
}

size_t mfi_acc_state_mem(const mfi_acc_state *s)
{
    return sizeof *s + s->mem;
}

static size_t val_mem(const val *v)
{
    switch (v->value_type) {
    case BSON_TYPE_UTF8: return v->value.v_utf8.len + 16;
    case BSON_TYPE_DOCUMENT: case BSON_TYPE_ARRAY: return v->value.v_doc.data_len + 16;
    case BSON_TYPE_BINARY: return v->value.v_binary.data_len + 16;
    default: return 16;
    }
}

/* The encoding of a value (for set membership and ordering): values
 * equal under the collation encode alike. */
static int encode(const mfi_acc *a, const val *v, mf_buf *out, bool desc, mf_error *err)
{
    return mf_bsonx_key_append_value_coll(out, v, desc, a->coll) == 0 ? 0 : oom(err);
}

static int entries_grow(mfi_acc_state *s, mf_error *err)
{
    if (s->ne < s->cape)
        return 0;
    size_t cap = s->cape ? 2 * s->cape : 4;
    struct entry *e = realloc(s->e, cap * sizeof *e);
    if (!e)
        return oom(err);
    s->e = e;
    s->cape = cap;
    return 0;
}

/* Insert an entry at `at`, taking `v` and `key`. */
static int entry_insert(mfi_acc_state *s, size_t at, val *v, mf_buf *key, uint64_t seq,
                        mf_error *err)
{
    if (entries_grow(s, err) != 0)
        return MF_InternalError;
    memmove(&s->e[at + 1], &s->e[at], (s->ne - at) * sizeof *s->e);
    s->e[at].v = *v;
    s->e[at].key = *key;
    s->e[at].seq = seq;
    *key = (mf_buf){0};
    v->value_type = BSON_TYPE_EOD;
    s->ne++;
    s->mem += val_mem(&s->e[at].v) + s->e[at].key.len + sizeof *s->e;
    return 0;
}

static void entry_remove(mfi_acc_state *s, size_t at)
{
    s->mem -= val_mem(&s->e[at].v) + s->e[at].key.len + sizeof *s->e;
    mf_buf_free(&s->e[at].key);
    mfi_val_free(&s->e[at].v);
    memmove(&s->e[at], &s->e[at + 1], (s->ne - at - 1) * sizeof *s->e);
    s->ne--;
}

static int key_cmp(const mf_buf *a, uint64_t sa, const mf_buf *b, uint64_t sb)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->data, b->data, n);
    if (c == 0)
        c = a->len < b->len ? -1 : a->len > b->len;
    if (c == 0)
        c = sa < sb ? -1 : sa > sb;
    return c;
}

/* Add to an ordered N form: entries ascending by (key, seq); keep the
 * first n (top, min, max) or the last n (bottom). */
static int ordered_add(mfi_acc_state *s, val *v, mf_buf *key, uint64_t seq, bool keep_last,
                       mf_error *err)
{
    size_t lo = 0, hi = s->ne;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (key_cmp(&s->e[mid].key, s->e[mid].seq, key, seq) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!keep_last && (int64_t)lo >= s->n)
        return 0;
    int rc = entry_insert(s, lo, v, key, seq, err);
    if (rc)
        return rc;
    while ((int64_t)s->ne > s->n)
        entry_remove(s, keep_last ? 0 : s->ne - 1);
    return 0;
}

static bool set_contains_or_add(mfi_acc_state *s, uint64_t h, bool add, mf_error *err,
                                int *rc)
{
    *rc = 0;
    if (!h)
        h = 1;
    if (s->set_cap == 0 || (s->ne + 1) * 2 > s->set_cap) {
        size_t cap = s->set_cap ? 2 * s->set_cap : 16;
        uint64_t *t = calloc(cap, sizeof *t);
        if (!t) {
            *rc = oom(err);
            return false;
        }
        for (size_t i = 0; i < s->set_cap; i++)
            if (s->set[i])
                for (size_t j = s->set[i] & (cap - 1);; j = (j + 1) & (cap - 1))
                    if (!t[j]) {
                        t[j] = s->set[i];
                        break;
                    }
        free(s->set);
        s->set = t;
        s->mem += (cap - s->set_cap) * sizeof *t;
        s->set_cap = cap;
    }
    for (size_t j = h & (s->set_cap - 1);; j = (j + 1) & (s->set_cap - 1)) {
        if (!s->set[j]) {
            if (add)
                s->set[j] = h;
            return false;
        }
        if (s->set[j] == h)
            return true;
    }
}

/* addToSet: the encoding's hash decides membership only after comparing
 * encodings of entries with the same hash (kept in the entries' keys). */
static int set_add(const mfi_acc *a, mfi_acc_state *s, val *v, mf_error *err)
{
    mf_buf key = {0};
    int rc = encode(a, v, &key, false, err);
    if (rc)
        return rc;
    uint64_t h = XXH3_64bits(key.data, key.len);
    bool maybe = set_contains_or_add(s, h, false, err, &rc);
    if (rc == 0 && maybe) {
        for (size_t i = 0; i < s->ne; i++)
            if (s->e[i].key.len == key.len && memcmp(s->e[i].key.data, key.data, key.len) == 0) {
                mf_buf_free(&key);
                return 0;
            }
    }
    if (rc == 0) {
        set_contains_or_add(s, h, true, err, &rc);
        if (rc == 0)
            rc = entry_insert(s, s->ne, v, &key, 0, err);
    }
    mf_buf_free(&key);
    return rc;
}

static int take_n(const mfi_acc *a, mfi_acc_state *s, const bson_t *group_root, mfi_agg *agg,
                  mf_error *err)
{
    val nv;
    int rc = mfi_agg_eval(agg, a->n, group_root, &nv, err);
    if (rc)
        return rc;
    char shown[64];
    mfi_val_str(&nv, shown, sizeof shown);
    if (!is_num(&nv) || !mfi_integral32(&nv)) {
        bool whole = nv.value_type == BSON_TYPE_INT64 ||
                     (nv.value_type == BSON_TYPE_DOUBLE && nv.value.v_double == floor(nv.value.v_double) &&
                      fabs(nv.value.v_double) < 9.2e18);
        if (!whole) {
            mfi_val_free(&nv);
            return mf_error_set(err, 5787902,
                                "Value for 'n' must be of integral type, but found %s", shown);
        }
    }
    int64_t n = as_long(&nv);
    mfi_val_free(&nv);
    if (n <= 0)
        return mf_error_set(err, 5787908, "'n' must be greater than 0, found %s", shown);
    s->n = n;
    s->n_set = true;
    return 0;
}

/* $mergeObjects: `add`'s fields over the state's document. */
static int merge_into(mfi_acc_state *s, const val *add_v, mf_error *err)
{
    bson_t merged = BSON_INITIALIZER, cur, add;
    bson_iter_t it, o;
    bson_init_static(&add, add_v->value.v_doc.data, add_v->value.v_doc.data_len);
    if (s->has) {
        bson_init_static(&cur, s->v.value.v_doc.data, s->v.value.v_doc.data_len);
        bson_iter_init(&it, &cur);
        while (bson_iter_next(&it)) {
            if (bson_iter_init_find(&o, &add, bson_iter_key(&it)))
                mf_bsonx_append_iter(&merged, NULL, 0, &o);
            else
                mf_bsonx_append_iter(&merged, NULL, 0, &it);
        }
        bson_iter_init(&it, &add);
        while (bson_iter_next(&it))
            if (!bson_iter_init_find(&o, &cur, bson_iter_key(&it)))
                mf_bsonx_append_iter(&merged, NULL, 0, &it);
    } else {
        bson_concat(&merged, &add);
    }
    s->mem -= s->has ? val_mem(&s->v) : 0;
    mfi_val_free(&s->v);
    int rc = mfi_set_steal(&s->v, &merged, BSON_TYPE_DOCUMENT, err);
    s->mem += val_mem(&s->v);
    s->has = rc == 0;
    return rc;
}

static int add_value(const mfi_acc *a, mfi_acc_state *s, const bson_t *doc, val v,
                     uint64_t seq, mf_error *err);

int mfi_acc_add(const mfi_acc *a, mfi_acc_state *s, const bson_t *doc, const bson_t *group_root,
                uint64_t seq, mfi_agg *agg, mf_error *err)
{
    val v = {.value_type = BSON_TYPE_EOD};
    int rc = 0;
    if (a->n && !s->n_set && (rc = take_n(a, s, group_root, agg, err)) != 0)
        return rc;
    if (a->arg && (rc = mfi_agg_eval(agg, a->arg, doc, &v, err)) != 0)
        return rc;
    return add_value(a, s, doc, v, seq, err);
}

int mfi_acc_init_kind(mfi_acc *a, const char *name)
{
    memset(a, 0, sizeof *a);
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++)
        if (strcmp(defs[i].name, name) == 0) {
            a->kind = defs[i].kind;
            a->name = defs[i].name;
            return 0;
        }
    return -1;
}

int mfi_acc_add_value(const mfi_acc *a, mfi_acc_state *s, const bson_value_t *v, mf_error *err)
{
    val copy = {.value_type = BSON_TYPE_EOD};
    if (v->value_type != BSON_TYPE_EOD)
        mf_bsonx_value_copy(v, &copy);
    return add_value(a, s, NULL, copy, 0, err);
}

/* Accumulate `v` (taken: freed here). */
static int add_value(const mfi_acc *a, mfi_acc_state *s, const bson_t *doc, val v,
                     uint64_t seq, mf_error *err)
{
    int rc = 0;
    switch (a->kind) {
    case A_COUNT:
        set_int(&v, 1);
        /* fall through */
    case A_SUM:
    case A_AVG:
        switch (v.value_type) {
        case BSON_TYPE_INT32: add_long(s, v.value.v_int32); break;
        case BSON_TYPE_INT64: add_long(s, v.value.v_int64); break;
        case BSON_TYPE_DOUBLE: kahan_add(s, v.value.v_double); break;
        case BSON_TYPE_DECIMAL128:
            s->dec = s->has_dec ? mf_dec_add(s->dec, v.value.v_decimal128) : v.value.v_decimal128;
            s->has_dec = true;
            break;
        default: break;
        }
        if (is_num(&v)) {
            widen(s, v.value_type);
            s->count++;
        }
        break;
    case A_STDDEV_POP:
    case A_STDDEV_SAMP:
        if (is_num(&v)) { /* decimals count as doubles, as mongod */
            double x = as_double(&v);
            s->count++;
            double d = x - s->mean;
            s->mean += d / (double)s->count;
            s->m2 += d * (x - s->mean);
        }
        break;
    case A_MIN:
    case A_MAX:
        if (!nullish(&v)) {
            int c = s->has ? mfi_val_cmp(&v, &s->v, a->coll) : 0;
            if (!s->has || (a->kind == A_MIN ? c < 0 : c > 0)) {
                s->mem -= s->has ? val_mem(&s->v) : 0;
                mfi_val_free(&s->v);
                s->v = v;
                s->mem += val_mem(&v);
                v.value_type = BSON_TYPE_EOD;
                s->has = true;
            }
        }
        break;
    case A_FIRST:
        if (!s->has) {
            s->v = v;
            if (v.value_type == BSON_TYPE_EOD)
                set_null(&s->v);
            s->mem += val_mem(&s->v);
            v.value_type = BSON_TYPE_EOD;
            s->has = true;
        }
        break;
    case A_LAST:
        s->mem -= s->has ? val_mem(&s->v) : 0;
        mfi_val_free(&s->v);
        s->v = v;
        if (v.value_type == BSON_TYPE_EOD)
            set_null(&s->v);
        s->mem += val_mem(&s->v);
        v.value_type = BSON_TYPE_EOD;
        s->has = true;
        break;
    case A_MERGE_OBJECTS:
        if (!nullish(&v)) {
            if (v.value_type != BSON_TYPE_DOCUMENT) {
                char shown[128];
                mfi_val_str(&v, shown, sizeof shown);
                rc = mf_error_set(err, 40400,
                                  "$mergeObjects requires object inputs, but input %s is of "
                                  "type %s",
                                  shown, mfi_type_name(&v));
                break;
            }
            rc = merge_into(s, &v, err);
        }
        break;
    case A_PUSH:
        if (v.value_type != BSON_TYPE_EOD) {
            mf_buf none = {0};
            rc = entry_insert(s, s->ne, &v, &none, seq, err);
            if (rc == 0 && s->mem > PER_ACC_LIMIT)
                rc = mf_error_set(err, 4568,
                                  "$push used too much memory and cannot spill to disk. Memory "
                                  "limit: %d bytes",
                                  PER_ACC_LIMIT);
        }
        break;
    case A_ADD_TO_SET:
        if (v.value_type != BSON_TYPE_EOD) {
            rc = set_add(a, s, &v, err);
            if (rc == 0 && s->mem > PER_ACC_LIMIT)
                rc = mf_error_set(err, 4569,
                                  "$addToSet used too much memory and cannot spill to disk. "
                                  "Memory limit: %d bytes",
                                  PER_ACC_LIMIT);
        }
        break;
    case A_FIRST_N:
        if (v.value_type == BSON_TYPE_EOD)
            set_null(&v);
        if ((int64_t)s->ne < s->n) {
            mf_buf none = {0};
            rc = entry_insert(s, s->ne, &v, &none, seq, err);
        }
        break;
    case A_LAST_N: {
        if (v.value_type == BSON_TYPE_EOD)
            set_null(&v);
        mf_buf none = {0};
        rc = entry_insert(s, s->ne, &v, &none, seq, err);
        while (rc == 0 && (int64_t)s->ne > s->n)
            entry_remove(s, 0);
        break;
    }
    case A_MAX_N:
    case A_MIN_N:
        if (!nullish(&v)) {
            mf_buf key = {0};
            rc = encode(a, &v, &key, a->kind == A_MAX_N, err);
            if (rc == 0)
                rc = ordered_add(s, &v, &key, seq, false, err);
            mf_buf_free(&key);
        }
        break;
    case A_TOP:
    case A_BOTTOM:
    case A_TOP_N:
    case A_BOTTOM_N: {
        if (!s->n_set) {
            s->n = 1;
            s->n_set = true;
        }
        if (v.value_type == BSON_TYPE_EOD)
            set_null(&v);
        mf_buf key = {0};
        rc = mf_sort_key(a->sort_by, doc, &key, err);
        if (rc == 0)
            rc = ordered_add(s, &v, &key, seq,
                             a->kind == A_BOTTOM || a->kind == A_BOTTOM_N, err);
        mf_buf_free(&key);
        break;
    }
    }
    mfi_val_free(&v);
    return rc;
}

/* The non-decimal part of a sum as a decimal. */
static mf_dec nondec_total(const mfi_acc_state *s)
{
    mf_dec t;
    if (isum_fits_long(s)) {
        t = mf_dec_from_int64((int64_t)s->isum);
    } else {
        /* hi * 2^64 + lo, lo as two 32-bit halves */
        uint64_t lo = (uint64_t)s->isum;
        mf_dec two32 = mf_dec_from_int64((int64_t)1 << 32);
        t = mf_dec_mul(mf_dec_mul(mf_dec_from_int64((int64_t)(s->isum >> 64)), two32), two32);
        t = mf_dec_add(t, mf_dec_mul(mf_dec_from_int64((int64_t)(lo >> 32)), two32));
        t = mf_dec_add(t, mf_dec_from_int64((int64_t)(lo & 0xffffffffu)));
    }
    if (s->dsum == 0 && s->dcomp == 0)
        return t;
    return mf_dec_add(mf_dec_add(mf_dec_from_double34(s->dsum), mf_dec_from_double34(s->dcomp)),
                      t);
}

/* The sum as mongod reports it. */
static void sum_value(const mfi_acc_state *s, val *out)
{
    if (s->widest == BSON_TYPE_DECIMAL128) {
        mf_dec t = nondec_total(s);
        set_dec(out, s->has_dec ? mf_dec_add(s->dec, t) : t);
        return;
    }
    /* integers only: exact, as mongod's DoubleDoubleSummation; a total
     * that does not fit in a long (even if a partial sum did not) is a
     * double */
    if (isum_fits_long(s) && (s->widest == BSON_TYPE_INT32 || s->widest == BSON_TYPE_EOD)) {
        set_int_or_long(out, (int64_t)s->isum);
        return;
    }
    if (isum_fits_long(s) && s->widest == BSON_TYPE_INT64) {
        set_long(out, (int64_t)s->isum);
        return;
    }
    set_double(out, (s->dsum + s->dcomp) + (double)s->isum);
}

static int array_of_entries(const mfi_acc_state *s, val *out, mf_error *err)
{
    bson_t arr = BSON_INITIALIZER;
    for (size_t i = 0; i < s->ne; i++)
        mfi_arr_push(&arr, (uint32_t)i, &s->e[i].v);
    return mfi_set_steal(out, &arr, BSON_TYPE_ARRAY, err);
}

int mfi_acc_result(const mfi_acc *a, const mfi_acc_state *s, bson_value_t *out, mf_error *err)
{
    out->value_type = BSON_TYPE_EOD;
    switch (a->kind) {
    case A_SUM:
    case A_COUNT:
        sum_value(s, out);
        return 0;
    case A_AVG:
        if (s->count == 0) {
            set_null(out);
        } else if (s->widest == BSON_TYPE_DECIMAL128) {
            val sv;
            sum_value(s, &sv);
            set_dec(out, mf_dec_div(sv.value.v_decimal128, mf_dec_from_int64(s->count)));
        } else {
            val sv;
            sum_value(s, &sv);
            set_double(out, as_double(&sv) / (double)s->count);
        }
        return 0;
    case A_STDDEV_POP:
        if (s->count == 0)
            set_null(out);
        else
            set_double(out, sqrt(s->m2 / (double)s->count));
        return 0;
    case A_STDDEV_SAMP:
        if (s->count < 2)
            set_null(out);
        else
            set_double(out, sqrt(s->m2 / (double)(s->count - 1)));
        return 0;
    case A_MIN:
    case A_MAX:
    case A_FIRST:
    case A_LAST:
        if (!s->has) {
            set_null(out);
            return 0;
        }
        mf_bsonx_value_copy(&s->v, out);
        return 0;
    case A_MERGE_OBJECTS:
        if (!s->has) {
            bson_t empty = BSON_INITIALIZER;
            return mfi_set_steal(out, &empty, BSON_TYPE_DOCUMENT, err);
        }
        mf_bsonx_value_copy(&s->v, out);
        return 0;
    case A_TOP:
    case A_BOTTOM:
        if (s->ne == 0)
            set_null(out);
        else
            mf_bsonx_value_copy(&s->e[0].v, out);
        return 0;
    default:
        return array_of_entries(s, out, err);
    }
}

/* ------------------------------------------------------- save and merge */

int mfi_acc_save(const mfi_acc_state *s, bson_t *out, const char *key)
{
    bson_t d, arr, ent;
    BSON_APPEND_DOCUMENT_BEGIN(out, key, &d);
    BSON_APPEND_INT32(&d, "w", (int32_t)s->widest);
    BSON_APPEND_INT64(&d, "l", (int64_t)(uint64_t)s->isum);           /* low 64 bits */
    BSON_APPEND_INT64(&d, "h", (int64_t)(s->isum >> 64));             /* high */
    BSON_APPEND_DOUBLE(&d, "d", s->dsum);
    BSON_APPEND_DOUBLE(&d, "c", s->dcomp);
    BSON_APPEND_INT64(&d, "n", s->count);
    BSON_APPEND_DOUBLE(&d, "m", s->mean);
    BSON_APPEND_DOUBLE(&d, "q", s->m2);
    BSON_APPEND_INT64(&d, "N", s->n);
    if (s->has_dec)
        BSON_APPEND_DECIMAL128(&d, "D", &s->dec);
    BSON_APPEND_BOOL(&d, "S", s->n_set);
    if (s->has)
        mf_bsonx_append_value(&d, "v", 1, &s->v);
    BSON_APPEND_ARRAY_BEGIN(&d, "e", &arr);
    for (size_t i = 0; i < s->ne; i++) {
        char k[24];
        snprintf(k, sizeof k, "%zu", i);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, k, &ent);
        bson_append_binary(&ent, "k", 1, BSON_SUBTYPE_BINARY, s->e[i].key.data,
                           (uint32_t)s->e[i].key.len);
        BSON_APPEND_INT64(&ent, "s", (int64_t)s->e[i].seq);
        mf_bsonx_append_value(&ent, "v", 1, &s->e[i].v);
        bson_append_document_end(&arr, &ent);
    }
    bson_append_array_end(&d, &arr);
    bson_append_document_end(out, &d);
    return 0;
}

int mfi_acc_merge(const mfi_acc *a, mfi_acc_state *s, const bson_iter_t *saved, mfi_agg *agg,
                  mf_error *err)
{
    bson_iter_t f;
    mfi_acc_state o = {.v = {.value_type = BSON_TYPE_EOD}};
    bson_iter_recurse(saved, &f);
    bson_iter_t entries;
    bool has_entries = false;
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        switch (k[0]) {
        case 'w': o.widest = (bson_type_t)bson_iter_int32(&f); break;
        case 'l': o.isum |= (unsigned __int128)(uint64_t)bson_iter_int64(&f); break;
        case 'h': o.isum |= (__int128)bson_iter_int64(&f) * ((__int128)1 << 64); break;
        case 'd': o.dsum = bson_iter_double(&f); break;
        case 'c': o.dcomp = bson_iter_double(&f); break;
        case 'n': o.count = bson_iter_int64(&f); break;
        case 'm': o.mean = bson_iter_double(&f); break;
        case 'q': o.m2 = bson_iter_double(&f); break;
        case 'N': o.n = bson_iter_int64(&f); break;
        case 'D': bson_iter_decimal128(&f, &o.dec); o.has_dec = true; break;
        case 'S': o.n_set = bson_iter_bool(&f); break;
        case 'v': mf_bsonx_value_copy(bson_iter_value(&f), &o.v); o.has = true; break;
        case 'e': entries = f; has_entries = true; break;
        }
    }
    int rc = 0;
    if (o.n_set && !s->n_set) {
        s->n = o.n;
        s->n_set = true;
    }
    switch (a->kind) {
    case A_SUM: case A_AVG: case A_COUNT:
        widen(s, o.widest);
        s->count += o.count;
        if (o.has_dec) {
            s->dec = s->has_dec ? mf_dec_add(s->dec, o.dec) : o.dec;
            s->has_dec = true;
        }
        s->isum += o.isum;
        kahan_add(s, o.dsum);
        kahan_add(s, o.dcomp);
        break;
    case A_STDDEV_POP: case A_STDDEV_SAMP:
        if (o.count) {
            int64_t n = s->count + o.count;
            double d = o.mean - s->mean;
            s->m2 += o.m2 + d * d * (double)s->count * (double)o.count / (double)n;
            s->mean += d * (double)o.count / (double)n;
            s->count = n;
        }
        break;
    case A_MIN: case A_MAX:
        if (o.has) {
            int c = s->has ? mfi_val_cmp(&o.v, &s->v, a->coll) : 0;
            if (!s->has || (a->kind == A_MIN ? c < 0 : c > 0)) {
                mfi_val_free(&s->v);
                s->v = o.v;
                o.v.value_type = BSON_TYPE_EOD;
                s->has = true;
            }
        }
        break;
    case A_FIRST:
        if (!s->has && o.has) {
            s->v = o.v;
            o.v.value_type = BSON_TYPE_EOD;
            s->has = true;
        }
        break;
    case A_LAST:
        if (o.has) {
            mfi_val_free(&s->v);
            s->v = o.v;
            o.v.value_type = BSON_TYPE_EOD;
            s->has = true;
        }
        break;
    case A_MERGE_OBJECTS:
        if (o.has) {
            rc = merge_into(s, &o.v, err);
        }
        break;
    default:
        break;
    }
    if (rc == 0 && has_entries) {
        bson_iter_t el;
        bson_iter_recurse(&entries, &el);
        while (rc == 0 && bson_iter_next(&el)) {
            bson_iter_t ef;
            mf_buf key = {0};
            uint64_t seq = 0;
            val v = {.value_type = BSON_TYPE_EOD};
            bson_iter_recurse(&el, &ef);
            while (bson_iter_next(&ef)) {
                const char *k = bson_iter_key(&ef);
                if (k[0] == 'k') {
                    bson_subtype_t st;
                    uint32_t bl;
                    const uint8_t *b;
                    bson_iter_binary(&ef, &st, &bl, &b);
                    if (bl && mf_buf_append(&key, b, bl) != 0)
                        rc = oom(err);
                } else if (k[0] == 's') {
                    seq = (uint64_t)bson_iter_int64(&ef);
                } else if (k[0] == 'v') {
                    mf_bsonx_value_copy(bson_iter_value(&ef), &v);
                }
            }
            if (rc == 0) {
                switch (a->kind) {
                case A_PUSH:
                    rc = entry_insert(s, s->ne, &v, &key, seq, err);
                    break;
                case A_ADD_TO_SET:
                    rc = set_add(a, s, &v, err);
                    break;
                case A_FIRST_N:
                    if ((int64_t)s->ne < s->n)
                        rc = entry_insert(s, s->ne, &v, &key, seq, err);
                    break;
                case A_LAST_N:
                    rc = entry_insert(s, s->ne, &v, &key, seq, err);
                    while (rc == 0 && (int64_t)s->ne > s->n)
                        entry_remove(s, 0);
                    break;
                default:
                    rc = ordered_add(s, &v, &key, seq,
                                     a->kind == A_BOTTOM || a->kind == A_BOTTOM_N, err);
                    break;
                }
            }
            mf_buf_free(&key);
            mfi_val_free(&v);
        }
    }
    (void)agg;
    mfi_val_free(&o.v);
    return rc;
}
