/*
 * expr_array.c -- array operators of the aggregation language: $arrayElemAt,
 * $first, $last, $size, $isArray, $in, $concatArrays, $slice,
 * $reverseArray, $range, $indexOfArray, $sortArray, $zip, and the ones
 * that bind a variable per element: $filter, $map, $reduce.
 *
 * Variables.  $filter and $map bind `as` (default "this"), $reduce binds
 * "this" and "value".  Each gets a slot at parse time, as $let's bindings
 * (expr.c), visible only in cond/in; the node keeps the slots in n->slots.
 * Per element the slot is overwritten with a copy of the element.
 */
#include "expr_int.h"
#include "../query/query.h"

#include <stdlib.h>
#include <string.h>

/* Iterate the array value `v` (BSON_TYPE_ARRAY). */
static void arr_begin(const val *v, bson_t *tmp, bson_iter_t *it)
{
    bson_init_static(tmp, v->value.v_doc.data, v->value.v_doc.data_len);
    bson_iter_init(it, tmp);
}

static uint32_t arr_count(const val *v)
{
    bson_t t;
    bson_iter_t it;
    uint32_t k = 0;
    arr_begin(v, &t, &it);
    while (bson_iter_next(&it))
        k++;
    return k;
}

/* Copy element `i` (0-based, < count) of array `v` to `out`. */
static void arr_get(const val *v, uint32_t i, val *out)
{
    bson_t t;
    bson_iter_t it;
    arr_begin(v, &t, &it);
    while (bson_iter_next(&it))
        if (i-- == 0) {
            mf_bsonx_value_copy(bson_iter_value(&it), out);
            return;
        }
    out->value_type = BSON_TYPE_EOD;
}

/* Append the elements [lo, hi) of array `v` to `b` from index *k on. */
static void arr_copy(const val *v, uint32_t lo, uint32_t hi, bson_t *b, uint32_t *k)
{
    bson_t t;
    bson_iter_t it;
    uint32_t i = 0;
    arr_begin(v, &t, &it);
    while (bson_iter_next(&it) && i < hi) {
        if (i++ >= lo)
            mfi_arr_push(b, (*k)++, bson_iter_value(&it));
    }
}

static bool is_arr(const val *v) { return v->value_type == BSON_TYPE_ARRAY; }

/* ---------------------------------------------------------- element access */

static int op_arrayelemat(const node *n, ctx *c, val *out)
{
    val v[2];
    char buf[64];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    if (nullish(&v[0]) || nullish(&v[1])) {
        set_null(out);
    } else if (!is_arr(&v[0])) {
        rc = mf_error_set(c->err, 28689, "$arrayElemAt's first argument must be an array, but "
                          "is %s", mfi_type_name(&v[0]));
    } else if (!is_num(&v[1])) {
        rc = mf_error_set(c->err, 28690, "$arrayElemAt's second argument must be a numeric "
                          "value, but is %s", mfi_type_name(&v[1]));
    } else if (!mfi_integral32(&v[1])) {
        mfi_val_str(&v[1], buf, sizeof buf);
        rc = mf_error_set(c->err, 28691, "$arrayElemAt's second argument must be representable "
                          "as a 32-bit integer: %s", buf);
    } else {
        int64_t i = as_long(&v[1]), k = arr_count(&v[0]);
        if (i < 0)
            i += k;
        if (i >= 0 && i < k)
            arr_get(&v[0], (uint32_t)i, out);
    }
    mfi_free_all(v, 2);
    return rc;
}

static int first_last(const node *n, ctx *c, val *out, bool last)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc != 0)
        return rc;
    if (nullish(&v)) {
        set_null(out);
    } else if (!is_arr(&v)) {
        rc = mf_error_set(c->err, 28689, "%s's argument must be an array, but is %s",
                          n->op->name, mfi_type_name(&v));
    } else {
        uint32_t k = arr_count(&v);
        if (k > 0)
            arr_get(&v, last ? k - 1 : 0, out);
    }
    mfi_val_free(&v);
    return rc;
}

static int op_first(const node *n, ctx *c, val *out) { return first_last(n, c, out, false); }
static int op_last(const node *n, ctx *c, val *out) { return first_last(n, c, out, true); }

static int op_size(const node *n, ctx *c, val *out)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc != 0)
        return rc;
    if (!is_arr(&v))
        rc = mf_error_set(c->err, 17124, "The argument to $size must be an array. Type of the "
                          "argument was: %s", mfi_type_name(&v));
    else
        set_int_or_long(out, arr_count(&v));
    mfi_val_free(&v);
    return rc;
}

static int op_isarray(const node *n, ctx *c, val *out)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc == 0) {
        set_bool(out, is_arr(&v));
        mfi_val_free(&v);
    }
    return rc;
}

static int op_in(const node *n, ctx *c, val *out)
{
    val v[2];
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    if (!is_arr(&v[1])) {
        rc = mf_error_set(c->err, 40081, "$in requires an array as a second argument, found: %s",
                          mfi_type_name(&v[1]));
    } else {
        bson_t t;
        bson_iter_t it;
        bool hit = false;
        arr_begin(&v[1], &t, &it);
        while (!hit && bson_iter_next(&it))
            hit = mfi_val_cmp(&v[0], bson_iter_value(&it), ctx_coll(c)) == 0;
        set_bool(out, hit);
    }
    mfi_free_all(v, 2);
    return rc;
}

/* ------------------------------------------------------------ building */

static int op_concatarrays(const node *n, ctx *c, val *out)
{
    bson_t b;
    uint32_t k = 0;
    bson_init(&b);
    for (size_t i = 0; i < n->nargs; i++) {
        val v;
        int rc = mfi_eval(n->args[i], c, &v);
        if (rc != 0) {
            bson_destroy(&b);
            return rc;
        }
        if (nullish(&v)) {
            bson_destroy(&b);
            set_null(out);
            return 0;
        }
        if (!is_arr(&v)) {
            rc = mf_error_set(c->err, 28664, "$concatArrays only supports arrays, not %s",
                              mfi_type_name(&v));
            mfi_val_free(&v);
            bson_destroy(&b);
            return rc;
        }
        arr_copy(&v, 0, UINT32_MAX, &b, &k);
        mfi_val_free(&v);
    }
    return mfi_set_steal(out, &b, BSON_TYPE_ARRAY, c->err);
}

static int op_slice(const node *n, ctx *c, val *out)
{
    val v[3];
    char buf[64];
    size_t na = n->nargs;
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    bool any_null = false;
    for (size_t i = 0; i < na; i++)
        any_null |= nullish(&v[i]);
    val *cnt = &v[na - 1], *pos = na == 3 ? &v[1] : NULL;
    if (any_null) {
        set_null(out);
    } else if (!is_arr(&v[0])) {
        rc = mf_error_set(c->err, 28724, "First argument to $slice must be an array, but is of "
                          "type: %s", mfi_type_name(&v[0]));
    } else if (!is_num(&v[1])) {
        rc = mf_error_set(c->err, 28725, "Second argument to $slice must be a numeric value, "
                          "but is of type: %s", mfi_type_name(&v[1]));
    } else if (!mfi_integral32(&v[1])) {
        mfi_val_str(&v[1], buf, sizeof buf);
        rc = mf_error_set(c->err, 28726, "Second argument to $slice can't be represented as a "
                          "32-bit integer: %s", buf);
    } else if (pos && !is_num(cnt)) {
        rc = mf_error_set(c->err, 28727, "Third argument to $slice must be numeric, but is of "
                          "type: %s", mfi_type_name(cnt));
    } else if (pos && !mfi_integral32(cnt)) {
        mfi_val_str(cnt, buf, sizeof buf);
        rc = mf_error_set(c->err, 28728, "Third argument to $slice can't be represented as a "
                          "32-bit integer: %s", buf);
    } else if (pos && as_long(cnt) <= 0) {
        mfi_val_str(cnt, buf, sizeof buf);
        rc = mf_error_set(c->err, 28729, "Third argument to $slice must be positive: %s", buf);
    } else {
        int64_t k = arr_count(&v[0]), lo, hi;
        int64_t m = as_long(cnt);
        if (!pos) { /* [arr, n]: the first n, or the last -n */
            lo = m >= 0 ? 0 : (k + m < 0 ? 0 : k + m);
            hi = m >= 0 ? (m < k ? m : k) : k;
        } else {
            int64_t p = as_long(pos);
            lo = p >= 0 ? (p < k ? p : k) : (k + p < 0 ? 0 : k + p);
            hi = lo + m < k ? lo + m : k;
        }
        bson_t b;
        uint32_t j = 0;
        bson_init(&b);
        arr_copy(&v[0], (uint32_t)lo, (uint32_t)hi, &b, &j);
        rc = mfi_set_steal(out, &b, BSON_TYPE_ARRAY, c->err);
    }
    mfi_free_all(v, na);
    return rc;
}

static int op_reversearray(const node *n, ctx *c, val *out)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc != 0)
        return rc;
    if (nullish(&v)) {
        set_null(out);
    } else if (!is_arr(&v)) {
        rc = mf_error_set(c->err, 34435, "The argument to $reverseArray must be an array, but "
                          "was of type: %s", mfi_type_name(&v));
    } else {
        uint32_t k = arr_count(&v);
        bson_value_t *el = k ? calloc(k, sizeof *el) : NULL;
        if (k && !el) {
            rc = mf_error_oom(c->err);
        } else {
            bson_t t, b;
            bson_iter_t it;
            uint32_t i = 0;
            arr_begin(&v, &t, &it);
            while (bson_iter_next(&it) && i < k)
                el[i++] = *bson_iter_value(&it); /* borrowed from v, not copied */
            bson_init(&b);
            for (uint32_t j = 0; j < k; j++)
                mfi_arr_push(&b, j, &el[k - 1 - j]);
            free(el);
            rc = mfi_set_steal(out, &b, BSON_TYPE_ARRAY, c->err);
        }
    }
    mfi_val_free(&v);
    return rc;
}

static int op_range(const node *n, ctx *c, val *out)
{
    static const char *const what[] = {"starting", "ending", "step"};
    val v[3];
    char buf[64];
    size_t na = n->nargs;
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    int64_t x[3] = {0, 0, 1};
    for (size_t i = 0; i < na && rc == 0; i++) {
        if (!is_num(&v[i])) {
            rc = mf_error_set(c->err, 34443 + 2 * (int)i, "$range requires a numeric %s value, "
                              "found value of type: %s", what[i], mfi_type_name(&v[i]));
        } else if (!mfi_integral32(&v[i])) {
            mfi_val_str(&v[i], buf, sizeof buf);
            rc = mf_error_set(c->err, 34444 + 2 * (int)i, "$range requires a%s %s value that "
                              "can be represented as a 32-bit integer, found value: %s",
                              i == 1 ? "n" : "", what[i], buf);
        } else {
            x[i] = as_long(&v[i]);
        }
    }
    if (rc == 0 && x[2] == 0)
        rc = mf_error_set(c->err, 34449, "$range requires a non-zero step value");
    if (rc == 0) {
        bson_t b;
        uint32_t k = 0;
        bson_init(&b);
        for (int64_t i = x[0]; x[2] > 0 ? i < x[1] : i > x[1]; i += x[2]) {
            val e;
            set_int(&e, (int32_t)i);
            mfi_arr_push(&b, k++, &e);
        }
        rc = mfi_set_steal(out, &b, BSON_TYPE_ARRAY, c->err);
    }
    mfi_free_all(v, na);
    return rc;
}

static int op_indexofarray(const node *n, ctx *c, val *out)
{
    val v[4];
    size_t na = n->nargs;
    int rc = mfi_eval_all(n, c, v);
    if (rc != 0)
        return rc;
    int64_t lo = 0, hi = INT64_MAX;
    if (nullish(&v[0])) {
        set_null(out);
    } else if (!is_arr(&v[0])) {
        rc = mf_error_set(c->err, 40090, "$indexOfArray requires an array as a first argument, "
                          "found: %s", mfi_type_name(&v[0]));
    } else if ((na > 2 && (rc = mfi_index_arg("$indexOfArray", "starting index", &v[2], &lo,
                                               c->err)) != 0) ||
               (na > 3 && (rc = mfi_index_arg("$indexOfArray", "ending index", &v[3], &hi,
                                               c->err)) != 0)) {
        /* rc set */
    } else {
        bson_t t;
        bson_iter_t it;
        int64_t i = 0, found = -1;
        arr_begin(&v[0], &t, &it);
        for (; bson_iter_next(&it) && i < hi; i++)
            if (i >= lo && mfi_val_cmp(&v[1], bson_iter_value(&it), ctx_coll(c)) == 0) {
                found = i;
                break;
            }
        set_int_or_long(out, found);
    }
    mfi_free_all(v, na);
    return rc;
}

/* ------------------------------------------------- $filter, $map, $reduce */

#define MAXF 4

typedef struct field_spec {
    const char *names[MAXF];
    size_t k;
    int c_obj, c_unknown, c_missing[MAXF]; /* c_missing 0: optional */
    const char *obj_fmt, *unknown_fmt, *missing_fmt;
} field_spec;

typedef struct fields {
    struct { bson_iter_t it; } at[MAXF]; /* bson_iter_t alone is over-aligned for an array */
    bool has[MAXF];
} fields;

/* Find the named fields of the object at `it`, with the operator's errors. */
static int collect(const op_def *op, const bson_iter_t *it, const field_spec *fs, fields *f,
                   mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, fs->c_obj, fs->obj_fmt, op->name,
                            mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_t ch;
    memset(f->has, 0, sizeof f->has);
    bson_iter_recurse(it, &ch);
    while (bson_iter_next(&ch)) {
        size_t i = 0;
        while (i < fs->k && strcmp(bson_iter_key(&ch), fs->names[i]) != 0)
            i++;
        if (i == fs->k)
            return mf_error_set(err, fs->c_unknown, fs->unknown_fmt, op->name,
                                bson_iter_key(&ch));
        f->at[i].it = ch;
        f->has[i] = true;
    }
    for (size_t i = 0; i < fs->k; i++)
        if (!f->has[i] && fs->c_missing[i])
            return mf_error_set(err, fs->c_missing[i], fs->missing_fmt, fs->names[i], op->name);
    return 0;
}

/* Parse field `i` (or push NULL when absent) onto n->args. */
static int parse_field(fields *f, size_t i, scope *sc, node *n, mf_error *err)
{
    node *a = NULL;
    int rc;
    if (f->has[i] && (rc = mfi_parse_node(&f->at[i].it, sc, &a, err)) != 0)
        return rc;
    return mfi_push_arg(n, a, err);
}

/* Bind `names` (k of them) to new slots in n->slots, then parse field `body`
 * with them in scope. */
static int parse_scoped(fields *f, size_t body, const char *const *names, size_t k, scope *sc,
                        node *n, mf_error *err)
{
    int rc;
    if (!(n->slots = calloc(k, sizeof *n->slots)))
        return mf_error_oom(err);
    size_t depth = sc->n;
    for (size_t i = 0; i < k; i++)
        if ((rc = mfi_scope_push(sc, names[i], &n->slots[i], err)) != 0)
            return rc;
    rc = parse_field(f, body, sc, n, err);
    sc->n = depth; /* the names go out of scope; their slots stay unique */
    return rc;
}

/* The `as` name of $filter/$map ("this" by default), validated. */
static int as_name(fields *f, size_t i, const char **name, mf_error *err)
{
    *name = "this";
    if (f->has[i])
        *name = BSON_ITER_HOLDS_UTF8(&f->at[i].it) ? bson_iter_utf8(&f->at[i].it, NULL) : "";
    return mfi_check_var_name(*name, err);
}

/* $filter: args input, cond, limit (NULL when absent); slots[0] is `as`. */
static int parse_filter(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                        mf_error *err)
{
    static const field_spec fs = {
        {"input", "as", "cond", "limit"}, 4, 28646, 28647, {28648, 0, 28650, 0},
        "%s only supports an object as its argument", "Unrecognized parameter to %s: %s",
        "Missing '%s' parameter to %s"};
    fields f;
    const char *as;
    int rc;
    if ((rc = collect(op, it, &fs, &f, err)) != 0 || (rc = parse_field(&f, 0, vsc, n, err)) != 0 ||
        (rc = as_name(&f, 1, &as, err)) != 0 ||
        (rc = parse_scoped(&f, 2, &as, 1, vsc, n, err)) != 0)
        return rc;
    return parse_field(&f, 3, vsc, n, err);
}

/* $map: args input, in; slots[0] is `as`. */
static int parse_map(const op_def *op, const bson_iter_t *it, void *vsc, node *n, mf_error *err)
{
    static const field_spec fs = {
        {"input", "as", "in"}, 3, 16878, 16879, {16880, 0, 16882},
        "%s only supports an object as its argument", "Unrecognized parameter to %s: %s",
        "Missing '%s' parameter to %s"};
    fields f;
    const char *as;
    int rc;
    if ((rc = collect(op, it, &fs, &f, err)) != 0 || (rc = parse_field(&f, 0, vsc, n, err)) != 0 ||
        (rc = as_name(&f, 1, &as, err)) != 0)
        return rc;
    return parse_scoped(&f, 2, &as, 1, vsc, n, err);
}

/* $reduce: args input, initialValue, in; slots[0] "this", slots[1] "value". */
static int parse_reduce(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                        mf_error *err)
{
    static const field_spec fs = {
        {"input", "initialValue", "in"}, 3, 40075, 40076, {40077, 40078, 40079},
        "%s requires an object as an argument, found: %s", "%s found an unknown argument: %s",
        "$reduce requires '%s' to be specified%.0s"}; /* gets (field, op) */
    static const char *const names[] = {"this", "value"};
    fields f;
    int rc;
    if ((rc = collect(op, it, &fs, &f, err)) != 0)
        return rc;
    if ((rc = parse_field(&f, 0, vsc, n, err)) != 0 || (rc = parse_field(&f, 1, vsc, n, err)) != 0)
        return rc;
    return parse_scoped(&f, 2, names, 2, vsc, n, err);
}

/* Evaluate the input array of $filter/$map/$reduce: *done with a null
 * result when it is nullish; `code`/`fmt` when it is not an array. */
static int eval_input(const node *n, ctx *c, val *in, bool *done, val *out, int code,
                      const char *fmt)
{
    char buf[128];
    int rc = mfi_eval(n->args[0], c, in);
    *done = false;
    if (rc != 0)
        return rc;
    if (nullish(in)) {
        set_null(out);
        *done = true;
    } else if (!is_arr(in)) {
        if (code == 40080)
            mfi_val_str(in, buf, sizeof buf);
        rc = mf_error_set(c->err, code, fmt, code == 40080 ? buf : mfi_type_name(in));
    }
    if (rc != 0 || *done)
        mfi_val_free(in);
    return rc;
}

static void bind(ctx *c, int slot, const bson_value_t *v)
{
    mfi_val_free(&c->slots[slot]);
    mf_bsonx_value_copy(v, &c->slots[slot]);
}

static int op_filter(const node *n, ctx *c, val *out)
{
    val in, lim;
    char buf[64];
    bool done;
    int rc = eval_input(n, c, &in, &done, out, 28651, "input to $filter must be an array not %s");
    if (rc != 0 || done)
        return rc;
    int64_t limit = INT64_MAX;
    lim.value_type = BSON_TYPE_EOD;
    if (n->args[2] && (rc = mfi_eval(n->args[2], c, &lim)) == 0 && !nullish(&lim)) {
        mfi_val_str(&lim, buf, sizeof buf);
        if (!is_num(&lim) || !mfi_integral32(&lim))
            rc = mf_error_set(c->err, 327391, "$filter: limit must be represented as a 32-bit "
                              "integral value: %s", buf);
        else if ((limit = as_long(&lim)) < 1)
            rc = mf_error_set(c->err, 327392, "$filter: limit must be greater than 0: %s", buf);
    }
    mfi_val_free(&lim);
    bson_t t, b;
    bson_iter_t it;
    uint32_t k = 0;
    bson_init(&b);
    arr_begin(&in, &t, &it);
    while (rc == 0 && k < limit && bson_iter_next(&it)) {
        val r;
        bind(c, n->slots[0], bson_iter_value(&it));
        if ((rc = mfi_eval(n->args[1], c, &r)) != 0)
            break;
        if (mfi_truthy(&r))
            mfi_arr_push(&b, k++, bson_iter_value(&it));
        mfi_val_free(&r);
    }
    if (rc == 0)
        rc = mfi_set_steal(out, &b, BSON_TYPE_ARRAY, c->err);
    else
        bson_destroy(&b);
    mfi_val_free(&in);
    return rc;
}

static int op_map(const node *n, ctx *c, val *out)
{
    val in;
    bool done;
    int rc = eval_input(n, c, &in, &done, out, 16883, "input to $map must be an array not %s");
    if (rc != 0 || done)
        return rc;
    bson_t t, b;
    bson_iter_t it;
    uint32_t k = 0;
    bson_init(&b);
    arr_begin(&in, &t, &it);
    while (rc == 0 && bson_iter_next(&it)) {
        val r;
        bind(c, n->slots[0], bson_iter_value(&it));
        if ((rc = mfi_eval(n->args[1], c, &r)) != 0)
            break;
        mfi_arr_push(&b, k++, &r); /* missing becomes null */
        mfi_val_free(&r);
    }
    if (rc == 0)
        rc = mfi_set_steal(out, &b, BSON_TYPE_ARRAY, c->err);
    else
        bson_destroy(&b);
    mfi_val_free(&in);
    return rc;
}

static int op_reduce(const node *n, ctx *c, val *out)
{
    val in, acc;
    bool done;
    int rc = eval_input(n, c, &in, &done, out, 40080, "$reduce requires that 'input' be an "
                        "array, found: %s");
    if (rc != 0 || done)
        return rc;
    if ((rc = mfi_eval(n->args[1], c, &acc)) != 0) {
        mfi_val_free(&in);
        return rc;
    }
    bson_t t;
    bson_iter_t it;
    arr_begin(&in, &t, &it);
    while (bson_iter_next(&it)) {
        bind(c, n->slots[0], bson_iter_value(&it));
        /* the accumulator moves into $$value: no copy */
        mfi_val_free(&c->slots[n->slots[1]]);
        c->slots[n->slots[1]] = acc;
        acc.value_type = BSON_TYPE_EOD;
        if ((rc = mfi_eval(n->args[2], c, &acc)) != 0)
            break;
    }
    mfi_val_free(&in);
    if (rc == 0)
        *out = acc;
    return rc;
}

/* ------------------------------------------------------ $sortArray, $zip */

/* {$sortArray: {input, sortBy}}: args[0] input; sortBy is not an
 * expression but a constant kept in n->cst: a number (1 or -1: whole
 * values in MongoDB order) or a sort pattern (fields of documents; other
 * elements sort as documents without those fields), checked at parse. */
static int parse_sortarray(const op_def *op, const bson_iter_t *it, void *vsc, node *n,
                           mf_error *err)
{
    (void)op;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 2942500, "$sortArray requires an object as an argument, "
                            "found: %s", mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_t ch, in_it, by_it;
    bool has_in = false, has_by = false;
    bson_iter_recurse(it, &ch);
    while (bson_iter_next(&ch)) {
        if (strcmp(bson_iter_key(&ch), "input") == 0) {
            in_it = ch;
            has_in = true;
        } else if (strcmp(bson_iter_key(&ch), "sortBy") == 0) {
            by_it = ch;
            has_by = true;
        } else {
            return mf_error_set(err, 2942501, "$sortArray found an unknown argument: %s",
                                bson_iter_key(&ch));
        }
    }
    if (!has_in)
        return mf_error_set(err, 2942502, "$sortArray requires 'input' to be specified");
    if (!has_by)
        return mf_error_set(err, 2942503, "$sortArray requires 'sortBy' to be specified");
    const bson_value_t *by = bson_iter_value(&by_it);
    if (by->value_type == BSON_TYPE_DOCUMENT) {
        bson_t spec;
        mf_sort *s = NULL;
        bson_init_static(&spec, by->value.v_doc.data, by->value.v_doc.data_len);
        if (bson_count_keys(&spec) == 0)
            return mf_error_set(err, 15976, "$sort stage must have at least one sort key");
        int rc = mf_sort_parse(&spec, &s, err);
        mf_sort_free(s);
        if (rc != 0)
            return rc;
    } else if (is_num(by)) {
        double d = as_double(by);
        if (d != 1 && d != -1)
            return mf_error_set(err, 2942506, "The $sort element value must be either 1 or -1");
    } else {
        return mf_error_set(err, 2942505, "The $sort is invalid: use 1/-1 to sort the whole "
                            "element, or {field:1/-1} to sort embedded fields");
    }
    mf_bsonx_value_copy(by, &n->cst);
    node *a = NULL;
    int rc = mfi_parse_node(&in_it, vsc, &a, err);
    return rc != 0 ? rc : mfi_push_arg(n, a, err);
}

typedef struct sort_item {
    bson_value_t v; /* borrowed from the input array */
    uint8_t *key;   /* the sort key, for a pattern */
    size_t klen;
    size_t pos;     /* input position: keeps the sort stable */
    int dir;
    const mf_collator *coll; /* whole values compare under it */
} sort_item;

static int cmp_items(const void *pa, const void *pb)
{
    const sort_item *a = pa, *b = pb;
    int r;
    if (a->key || b->key) {
        size_t m = a->klen < b->klen ? a->klen : b->klen;
        r = memcmp(a->key, b->key, m);
        if (r == 0)
            r = (a->klen > b->klen) - (a->klen < b->klen);
    } else {
        r = mfi_val_cmp(&a->v, &b->v, a->coll) * a->dir;
    }
    return r != 0 ? r : (a->pos > b->pos) - (a->pos < b->pos);
}

static int op_sortarray(const node *n, ctx *c, val *out)
{
    val v;
    int rc = mfi_eval(n->args[0], c, &v);
    if (rc != 0)
        return rc;
    if (nullish(&v)) {
        set_null(out);
        mfi_val_free(&v);
        return 0;
    }
    if (v.value_type != BSON_TYPE_ARRAY) {
        rc = mf_error_set(c->err, 2942504, "The input argument to $sortArray must be an array, "
                          "but was of type: %s", mfi_type_name(&v));
        mfi_val_free(&v);
        return rc;
    }
    uint32_t k = arr_count(&v);
    sort_item *items = calloc(k ? k : 1, sizeof *items);
    mf_sort *s = NULL;
    if (!items) {
        mfi_val_free(&v);
        return mf_error_oom(c->err);
    }
    if (n->cst.value_type == BSON_TYPE_DOCUMENT) {
        bson_t spec;
        bson_init_static(&spec, n->cst.value.v_doc.data, n->cst.value.v_doc.data_len);
        rc = mf_sort_parse_coll(&spec, ctx_coll(c), &s, c->err);
    }
    bson_t t;
    bson_iter_t it;
    size_t i = 0;
    arr_begin(&v, &t, &it);
    while (rc == 0 && bson_iter_next(&it)) {
        sort_item *x = &items[i];
        x->v = *bson_iter_value(&it);
        x->pos = i++;
        x->dir = s ? 1 : (as_double(&n->cst) < 0 ? -1 : 1);
        x->coll = ctx_coll(c);
        if (!s)
            continue;
        /* a non-document sorts as a document without the pattern's fields */
        bson_t doc, empty;
        bson_init(&empty);
        if (x->v.value_type == BSON_TYPE_DOCUMENT)
            bson_init_static(&doc, x->v.value.v_doc.data, x->v.value.v_doc.data_len);
        mf_buf key = {0};
        rc = mf_sort_key(s, x->v.value_type == BSON_TYPE_DOCUMENT ? &doc : &empty, &key, c->err);
        bson_destroy(&empty);
        x->key = key.data ? key.data : malloc(1);
        x->klen = key.len;
    }
    if (rc == 0) {
        qsort(items, k, sizeof *items, cmp_items);
        bson_t b;
        bson_init(&b);
        for (uint32_t j = 0; j < k; j++)
            mfi_arr_push(&b, j, &items[j].v);
        rc = mfi_set_steal(out, &b, BSON_TYPE_ARRAY, c->err);
    }
    for (uint32_t j = 0; j < k; j++)
        free(items[j].key);
    free(items);
    mf_sort_free(s);
    mfi_val_free(&v);
    return rc;
}

/* {$zip: {inputs, useLongestLength?, defaults?}}: args are the inputs then
 * the defaults; n->slots = {number of inputs, useLongestLength}. */
static int parse_zip(const op_def *op, const bson_iter_t *it, void *vsc, node *n, mf_error *err)
{
    (void)op;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 34460, "$zip only supports an object as an argument, found %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_t ch, in_it, def_it;
    bool has_in = false, has_def = false, longest = false;
    int rc;
    bson_iter_recurse(it, &ch);
    while (bson_iter_next(&ch)) {
        const char *k = bson_iter_key(&ch);
        if (strcmp(k, "inputs") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&ch))
                return mf_error_set(err, 34461, "inputs must be an array of expressions, found "
                                    "%s", mf_bsonx_type_alias(bson_iter_type(&ch)));
            in_it = ch;
            has_in = true;
        } else if (strcmp(k, "defaults") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&ch))
                return mf_error_set(err, 34462, "defaults must be an array of expressions, "
                                    "found %s", mf_bsonx_type_alias(bson_iter_type(&ch)));
            def_it = ch;
            has_def = true;
        } else if (strcmp(k, "useLongestLength") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&ch)) /* sic: mongod names the type of the whole */
                return mf_error_set(err, 34463, "useLongestLength must be a bool, found object");
            longest = bson_iter_bool(&ch);
        } else {
            return mf_error_set(err, 34464, "$zip found an unknown argument: %s", k);
        }
    }
    size_t nin = 0, ndef = 0;
    bson_iter_t el;
    if (has_in) {
        bson_iter_recurse(&in_it, &el);
        while (bson_iter_next(&el)) {
            node *a = NULL;
            if ((rc = mfi_parse_node(&el, vsc, &a, err)) != 0 || (rc = mfi_push_arg(n, a, err)) != 0)
                return rc;
            nin++;
        }
    }
    if (has_def) {
        bson_iter_recurse(&def_it, &el);
        while (bson_iter_next(&el)) {
            node *a = NULL;
            if ((rc = mfi_parse_node(&el, vsc, &a, err)) != 0 || (rc = mfi_push_arg(n, a, err)) != 0)
                return rc;
            ndef++;
        }
    }
    if (nin == 0)
        return mf_error_set(err, 34465, "$zip requires at least one input array");
    if (ndef && !longest)
        return mf_error_set(err, 34466, "cannot specify defaults unless useLongestLength is "
                            "true");
    if (ndef && ndef != nin)
        return mf_error_set(err, 34467, "defaults and inputs must have the same length");
    if (!(n->slots = calloc(2, sizeof *n->slots)))
        return mf_error_oom(err);
    n->slots[0] = (int)nin;
    n->slots[1] = longest;
    return 0;
}

static int op_zip(const node *n, ctx *c, val *out)
{
    size_t nin = (size_t)n->slots[0];
    bool longest = n->slots[1] != 0;
    val *v = calloc(2 * nin, sizeof *v); /* inputs, then defaults */
    int rc = 0;
    if (!v)
        return mf_error_oom(c->err);
    for (size_t i = 0; i < 2 * nin; i++)
        v[i].value_type = BSON_TYPE_EOD;
    uint32_t lo = 0, hi = 0;
    bool is_null = false;
    for (size_t i = 0; i < nin && rc == 0 && !is_null; i++) {
        if ((rc = mfi_eval(n->args[i], c, &v[i])) != 0)
            break;
        if (nullish(&v[i])) {
            is_null = true;
        } else if (v[i].value_type != BSON_TYPE_ARRAY) {
            char buf[256];
            mfi_val_str(&v[i], buf, sizeof buf);
            rc = mf_error_set(c->err, 34468, "$zip found a non-array expression in input: %s",
                              buf);
        } else {
            uint32_t k = arr_count(&v[i]);
            lo = i == 0 || k < lo ? k : lo;
            hi = i == 0 || k > hi ? k : hi;
        }
    }
    if (rc == 0 && is_null)
        set_null(out);
    if (rc == 0 && !is_null) {
        /* defaults are evaluated only when the lengths differ */
        for (size_t i = 0; lo != hi && nin + i < n->nargs && rc == 0; i++)
            rc = mfi_eval(n->args[nin + i], c, &v[nin + i]);
    }
    if (rc == 0 && !is_null) {
        uint32_t rows = longest ? hi : lo;
        /* each input's elements, borrowed from v[i] (bson_iter_t is
         * over-aligned, so no array of iterators) */
        bson_value_t **cols = calloc(nin, sizeof *cols);
        uint32_t *lens = calloc(nin, sizeof *lens);
        bson_t b;
        bson_init(&b);
        if (!cols || !lens)
            rc = mf_error_oom(c->err);
        for (size_t i = 0; i < nin && rc == 0; i++) {
            bson_t t;
            bson_iter_t it;
            if (!(cols[i] = calloc(arr_count(&v[i]) + 1, sizeof **cols))) {
                rc = mf_error_oom(c->err);
                break;
            }
            arr_begin(&v[i], &t, &it);
            while (bson_iter_next(&it))
                cols[i][lens[i]++] = *bson_iter_value(&it);
        }
        for (uint32_t r = 0; r < rows && rc == 0; r++) {
            bson_t row;
            char kb[16];
            const char *key;
            size_t kl = mf_uint32_to_key(r, &key, kb, sizeof kb);
            bson_append_array_begin(&b, key, (int)kl, &row);
            for (size_t i = 0; i < nin; i++) {
                val d;
                set_null(&d);
                mfi_arr_push(&row, (uint32_t)i, r < lens[i] ? &cols[i][r]
                             : v[nin + i].value_type == BSON_TYPE_EOD ? &d : &v[nin + i]);
            }
            bson_append_array_end(&b, &row);
        }
        for (size_t i = 0; cols && i < nin; i++)
            free(cols[i]);
        free(cols);
        free(lens);
        if (rc == 0)
            rc = mfi_set_steal(out, &b, BSON_TYPE_ARRAY, c->err);
        else
            bson_destroy(&b);
    }
    mfi_free_all(v, 2 * nin);
    free(v);
    return rc;
}

const op_def mfi_expr_array_ops[] = {
    {"$arrayElemAt", op_arrayelemat, 2, 2, NULL},
    {"$concatArrays", op_concatarrays, 0, -1, NULL},
    {"$filter", op_filter, 0, 0, parse_filter},
    {"$first", op_first, 1, 1, NULL},
    {"$in", op_in, 2, 2, NULL},
    {"$indexOfArray", op_indexofarray, 2, 4, NULL},
    {"$isArray", op_isarray, 1, 1, NULL},
    {"$last", op_last, 1, 1, NULL},
    {"$map", op_map, 0, 0, parse_map},
    {"$range", op_range, 2, 3, NULL},
    {"$reduce", op_reduce, 0, 0, parse_reduce},
    {"$reverseArray", op_reversearray, 1, 1, NULL},
    {"$size", op_size, 1, 1, NULL},
    {"$slice", op_slice, 2, 3, NULL},
    {"$sortArray", op_sortarray, 0, 0, parse_sortarray},
    {"$zip", op_zip, 0, 0, parse_zip},
};
const size_t mfi_expr_narray_ops = sizeof mfi_expr_array_ops / sizeof mfi_expr_array_ops[0];
