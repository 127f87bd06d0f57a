/*
 * expr_acc.c -- the accumulators as expressions: $sum $avg $min $max
 * $stdDevPop $stdDevSamp, and $firstN $lastN $minN $maxN over an array.
 *
 * As mongod's ExpressionFromAccumulator: with one operand that evaluates
 * to an array the accumulator takes each element; otherwise it takes each
 * operand's value (an array among several operands is one value).  The
 * arithmetic is the accumulators' own (accumulator.c), so {$sum: [...]}
 * and $group's $sum agree to the last bit and type.
 */
#include "accumulator.h"
#include "expr_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int accumulate(const node *n, ctx *c, val *out)
{
    mfi_acc a;
    int rc = 0;
    if (mfi_acc_init_kind(&a, n->op->name) != 0)
        return mf_error_set(c->err, MF_InternalError, "no accumulator %s", n->op->name);
    a.coll = ctx_coll(c); /* $max and $min compare under it */
    mfi_acc_state *s = mfi_acc_state_new();
    if (!s)
        return mf_error_oom(c->err);
    for (size_t i = 0; rc == 0 && i < n->nargs; i++) {
        val v;
        if ((rc = mfi_eval(n->args[i], c, &v)) != 0)
            break;
        if (n->nargs == 1 && v.value_type == BSON_TYPE_ARRAY) {
            bson_t arr;
            bson_iter_t it;
            bson_init_static(&arr, v.value.v_doc.data, v.value.v_doc.data_len);
            bson_iter_init(&it, &arr);
            while (rc == 0 && bson_iter_next(&it))
                rc = mfi_acc_add_value(&a, s, bson_iter_value(&it), c->err);
        } else {
            rc = mfi_acc_add_value(&a, s, &v, c->err);
        }
        mfi_val_free(&v);
    }
    if (rc == 0)
        rc = mfi_acc_result(&a, s, out, c->err);
    mfi_acc_state_free(s);
    return rc;
}

/* $minN / $maxN order: by value under the collation (descending for
 * $maxN), equal values in input order, as mongod's multimap keeps them. */
typedef struct n_item {
    val v;
    size_t pos;
} n_item;

typedef struct n_order {
    const mf_collator *coll;
    int dir;
} n_order;

static int cmp_n(const void *pa, const void *pb, void *arg)
{
    const n_item *a = pa, *b = pb;
    const n_order *o = arg;
    int r = mfi_val_cmp(&a->v, &b->v, o->coll) * o->dir;
    return r != 0 ? r : (a->pos > b->pos) - (a->pos < b->pos);
}

/* {$firstN|$lastN|$minN|$maxN: {input: <array>, n: <positive integer>}} */
enum { N_INPUT, N_N };

static int parse_n(const op_def *op, const bson_iter_t *it, void *sc, node *n, mf_error *err)
{
    static const char *const names[] = {"input", "n"};
    static const int missing[] = {5787907, 5787906};
    return mfi_parse_named(op, it, sc, n, names, 2, 0, 5787900,
                           "specification of %s must be an object; found %s", 5787901, missing,
                           "%s: missing value for '%s'", err);
}

static int op_n(const node *n, ctx *c, val *out)
{
    val in, nv;
    int rc = mfi_eval(n->args[N_N], c, &nv);
    if (rc)
        return rc;
    char shown[64];
    mfi_val_str(&nv, shown, sizeof shown);
    if (!is_num(&nv) || (nv.value_type == BSON_TYPE_DOUBLE &&
                         nv.value.v_double != floor(nv.value.v_double))) {
        mfi_val_free(&nv);
        return mf_error_set(c->err, 5787902,
                            "Value for 'n' must be of integral type, but found %s", shown);
    }
    int64_t k = as_long(&nv);
    mfi_val_free(&nv);
    if (k <= 0)
        return mf_error_set(c->err, 5787908, "'n' must be greater than 0, found %s", shown);
    if ((rc = mfi_eval(n->args[N_INPUT], c, &in)) != 0)
        return rc;
    if (in.value_type != BSON_TYPE_ARRAY) {
        char v[128];
        mfi_val_str(&in, v, sizeof v);
        mfi_val_free(&in);
        return mf_error_set(c->err, 5788200, "Input must be an array, but found %s", v);
    }
    /* The elements, kept in input order (firstN, lastN) or in value order
     * (minN ascending, maxN descending; null and missing skipped). */
    bool is_min = strcmp(n->op->name, "$minN") == 0, is_max = strcmp(n->op->name, "$maxN") == 0;
    bool is_last = strcmp(n->op->name, "$lastN") == 0;
    bson_t arr, res = BSON_INITIALIZER;
    bson_iter_t it;
    bson_init_static(&arr, in.value.v_doc.data, in.value.v_doc.data_len);
    size_t total = 0;
    bson_iter_init(&it, &arr);
    while (bson_iter_next(&it))
        total++;
    if (is_min || is_max) {
        /* the non-null elements, copied, sorted; the first n */
        n_item *all = bson_malloc0((total ? total : 1) * sizeof *all);
        size_t cnt = 0;
        bson_iter_init(&it, &arr);
        while (bson_iter_next(&it))
            if (!nullish(bson_iter_value(&it))) {
                all[cnt].v = *bson_iter_value(&it); /* borrowed from `in` */
                all[cnt].pos = cnt;
                cnt++;
            }
        n_order o = {ctx_coll(c), is_min ? 1 : -1};
        qsort_r(all, cnt, sizeof *all, cmp_n, &o);
        for (size_t i = 0; i < cnt && i < (size_t)k; i++)
            mfi_arr_push(&res, (uint32_t)i, &all[i].v);
        bson_free(all);
    } else {
        size_t start = is_last && total > (size_t)k ? total - (size_t)k : 0, i = 0, np = 0;
        bson_iter_init(&it, &arr);
        while (bson_iter_next(&it) && np < (size_t)k) {
            if (i++ < start)
                continue;
            mfi_arr_push(&res, (uint32_t)np++, bson_iter_value(&it));
        }
    }
    mfi_val_free(&in);
    return mfi_set_steal(out, &res, BSON_TYPE_ARRAY, c->err);
}

const op_def mfi_expr_acc_ops[] = {
    {"$avg", accumulate, 0, -1, NULL},
    {"$firstN", op_n, 0, 0, parse_n},
    {"$lastN", op_n, 0, 0, parse_n},
    {"$max", accumulate, 0, -1, NULL},
    {"$maxN", op_n, 0, 0, parse_n},
    {"$min", accumulate, 0, -1, NULL},
    {"$minN", op_n, 0, 0, parse_n},
    {"$stdDevPop", accumulate, 0, -1, NULL},
    {"$stdDevSamp", accumulate, 0, -1, NULL},
    {"$sum", accumulate, 0, -1, NULL},
};
const size_t mfi_expr_nacc_ops = sizeof mfi_expr_acc_ops / sizeof mfi_expr_acc_ops[0];
