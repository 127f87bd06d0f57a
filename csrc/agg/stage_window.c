/*
 * stage_window.c -- $setWindowFields (and the window functions $fill
 * desugars into).
 *
 * Desugaring, as mongod's document_source_set_window_fields.cpp:
 *     {$setWindowFields: {partitionBy: P, sortBy: S, output: O}}
 * becomes
 *     [{$addFields: {__internal_setWindowFields_partition_key: P}}]  (P not a plain path)
 *     {$sort: {<partition path>: 1, ...S}}                           (if P or S)
 *     the window stage proper
 *     [{$unset: "__internal_setWindowFields_partition_key"}]
 * so the window stage sees each partition as a run of consecutive
 * documents with equal keys (missing is null, as mongod's
 * PartitionIterator; an array key fails with TypeMismatch).
 *
 * Execution.  A partition is buffered whole, then every output is
 * computed for every document of the partition and the documents go out
 * in order.  The buffer (spill.c) keeps documents in memory up to
 * internalDocumentSourceSetWindowFieldsMaxMemoryBytes; past it, with
 * allowDiskUse, they move to a temporary file and are read back by
 * position (as mongod's SpillableCache), else the stage fails with
 * 5414201.  What stays in memory per document is its sortBy value and
 * sort key and the computed outputs.
 *
 * Windows.  Endpoints follow mongod's PartitionIterator: documents
 * [l, u] are offsets from the current document clamped to the partition;
 * range [l, u] compares the sortBy value with current + l / + u ("current"
 * is the current document itself, offset 0, not its peers), skipping
 * documents whose sortBy value has the wrong type at the unbounded ends.
 * Accumulator-style functions reuse accumulator.c: the window of each
 * document is accumulated afresh from its endpoints -- O(n * w) -- except
 * that when the next window starts where the last one did and ends at or
 * after it, the state is extended instead of rebuilt (running totals stay
 * O(n)).
 */
#include "accumulator.h"
#include "calendar.h"
#include "expr_int.h"
#include "spill.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PARTITION_KEY_TMP "__internal_setWindowFields_partition_key"

enum {
    W_ACC, W_FIRST, W_LAST, W_RANK, W_DENSE_RANK, W_DOC_NUMBER, W_SHIFT, W_EMA,
    W_DERIVATIVE, W_INTEGRAL, W_COV_POP, W_COV_SAMP, W_LOCF, W_LINEAR_FILL,
};

/* One bound of a window: unbounded, current, or a number (documents: an
 * offset; range: a delta added to the current sortBy value). */
typedef struct bound {
    enum { B_UNBOUNDED, B_CURRENT, B_VALUE } kind;
    int64_t off;             /* documents */
    val delta;               /* range */
} bound;

typedef struct wfn {
    int kind;
    char *field;             /* the output path */
    const char *name;        /* "$sum" */
    mfi_acc acc;             /* W_ACC */
    mf_expr *input;          /* the other kinds' input */
    bool is_range;
    bound lo, hi;
    int unit;                /* range windows over dates: the time unit (-1: none) */
    int64_t unit_ms;         /* $derivative / $integral unit (0: none) */
    int64_t shift_by;
    val shift_default;
    mf_dec alpha;            /* $expMovingAvg, as mongod keeps it */
} wfn;

typedef struct {
    mfi_stage base;
    mf_expr *part;           /* NULL: one partition */
    mf_sort *sort;           /* sortBy (NULL: none) */
    size_t nsort;
    bool sort_asc;           /* the first sortBy key ascends */
    mf_expr *sort_expr;      /* "$<first sortBy path>" */
    wfn *f;
    size_t nf;
    /* the partition being returned: documents 0..n-1 of `buf` */
    mfi_docbuf buf;
    size_t n, next;
    val **res;               /* res[f][i] */
    bson_t *pending;         /* the first document of the next partition */
    val pending_key;
    bool eof;
    /* each buffered document's metadata (mongod's partition keeps
     * Documents whole: the output keeps it, expressions read it), and the
     * pending one's; in memory: metadata is small */
    mf_meta *metas;
    size_t metas_cap;
    mf_meta pending_meta;
} window_stage;

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

/* ------------------------------------------------------------ parsing */

static const char *const fn_names[] = {
    "$addToSet", "$avg", "$bottom", "$bottomN", "$count", "$covariancePop", "$covarianceSamp",
    "$denseRank", "$derivative", "$documentNumber", "$expMovingAvg", "$first", "$firstN",
    "$integral", "$last", "$lastN", "$linearFill", "$locf", "$max", "$maxN", "$min", "$minN",
    "$push", "$rank", "$shift", "$stdDevPop", "$stdDevSamp", "$sum", "$top", "$topN",
};

static bool is_function(const char *name)
{
    for (size_t i = 0; i < sizeof fn_names / sizeof fn_names[0]; i++)
        if (strcmp(fn_names[i], name) == 0)
            return true;
    return false;
}

static bool integral_value(const bson_iter_t *it, int64_t *out)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: *out = bson_iter_int32(it); return true;
    case BSON_TYPE_INT64: *out = bson_iter_int64(it); return true;
    case BSON_TYPE_DOUBLE: {
        double d = bson_iter_double(it);
        if (d != d || d < -9.2e18 || d > 9.2e18 || floor(d) != d)
            return false;
        *out = (int64_t)d;
        return true;
    }
    default:
        return false;
    }
}

/* A bound's number: a constant expression (mongod optimizes the bound
 * expression and requires a constant). */
static int bound_parse(mfi_agg *agg, const bson_iter_t *it, bool is_range, bool with_unit,
                       bound *b, mf_error *err)
{
    if (BSON_ITER_HOLDS_UTF8(it)) {
        const char *s = bson_iter_utf8(it, NULL);
        if (strcmp(s, "unbounded") == 0)
            b->kind = B_UNBOUNDED;
        else if (strcmp(s, "current") == 0)
            b->kind = B_CURRENT;
        else
            return mf_error_set(err, MF_FailedToParse,
                                "Window bounds must be 'unbounded', 'current', or a number.");
        return 0;
    }
    mf_expr *e = NULL;
    const bson_value_t *cv;
    int rc = mfi_agg_expr(agg, it, &e, err);
    if (rc)
        return rc;
    if (!mf_expr_is_const(e, &cv)) {
        mf_expr_free(e);
        return mf_error_set(err, MF_FailedToParse, "Window bounds expression must be a constant.");
    }
    val v;
    mf_bsonx_value_copy(cv, &v);
    mf_expr_free(e);
    b->kind = B_VALUE;
    if (!is_range || with_unit) {
        bson_t tmp = BSON_INITIALIZER;
        bson_iter_t vi;
        int64_t n = 0;
        mf_bsonx_append_value(&tmp, "v", 1, &v);
        bson_iter_init(&vi, &tmp);
        bson_iter_next(&vi);
        bool ok = integral_value(&vi, &n) && (with_unit || (n >= INT32_MIN && n <= INT32_MAX));
        bson_destroy(&tmp);
        mfi_val_free(&v);
        if (!ok)
            return mf_error_set(err, MF_FailedToParse,
                                with_unit ? "With 'unit', range-based bounds must be an integer"
                                          : "Numeric document-based bounds must be an integer");
        b->off = n;
        set_long(&b->delta, n);
        return 0;
    }
    if (!is_num(&v)) {
        mfi_val_free(&v);
        return mf_error_set(err, MF_FailedToParse, "Range-based bounds expression must be a number");
    }
    b->delta = v;
    return 0;
}

static void bound_str(const bound *b, char *out, size_t cap)
{
    if (b->kind != B_VALUE)
        snprintf(out, cap, "0");
    else
        mfi_val_str(&b->delta, out, cap);
}

static int parse_window(window_stage *w, wfn *f, const bson_iter_t *it, mf_error *err)
{
    mfi_agg *agg = w->base.agg;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_FailedToParse, "'window' field must be an object");
    bson_iter_t a, docs, range, unit;
    bool has_docs = false, has_range = false, has_unit = false;
    int nfields = 0;
    bson_iter_recurse(it, &a);
    while (bson_iter_next(&a)) {
        const char *k = bson_iter_key(&a);
        nfields++;
        if (strcmp(k, "documents") == 0 && !has_docs) {
            docs = a;
            has_docs = true;
        } else if (strcmp(k, "range") == 0 && !has_range) {
            range = a;
            has_range = true;
        } else if (strcmp(k, "unit") == 0 && !has_unit) {
            unit = a;
            has_unit = true;
        }
    }
    if (has_docs && has_range)
        return mf_error_set(err, MF_FailedToParse,
                            "Window bounds can specify either 'documents' or 'unit', not both.");
    if (!has_range && has_unit)
        return mf_error_set(err, MF_FailedToParse,
                            "Window bounds can only specify 'unit' with range-based bounds.");
    if (!has_range && !has_docs) {
        if (nfields)
            return mf_error_set(err, MF_FailedToParse,
                                "'window' field can only contain 'documents' as the only "
                                "argument or 'range' with an optional 'unit' field");
        f->lo.kind = f->hi.kind = B_UNBOUNDED;
        return 0;
    }
    bson_iter_t *arr = has_docs ? &docs : &range;
    bson_iter_t e0, e1, probe;
    int cnt = 0;
    if (BSON_ITER_HOLDS_ARRAY(arr)) {
        bson_iter_recurse(arr, &probe);
        while (bson_iter_next(&probe))
            cnt++;
    }
    if (!BSON_ITER_HOLDS_ARRAY(arr) || cnt != 2) {
        char shown[256];
        mf_bsonx_elem_to_string(arr, true, shown, sizeof shown);
        return mf_error_set(err, MF_FailedToParse, "Window bounds must be a 2-element array: %s",
                            shown);
    }
    bson_iter_recurse(arr, &e0);
    bson_iter_next(&e0);
    e1 = e0;
    bson_iter_next(&e1);
    int rc;
    if (has_docs) {
        if (nfields != 1)
            return mf_error_set(err, MF_FailedToParse,
                                "'window' field that specifies documents cannot have other fields");
        if ((rc = bound_parse(agg, &e0, false, false, &f->lo, err)) != 0 ||
            (rc = bound_parse(agg, &e1, false, false, &f->hi, err)) != 0)
            return rc;
    } else {
        if (has_unit) {
            if (nfields != 2)
                return mf_error_set(err, MF_FailedToParse,
                                    "'window' field that specifies unit cannot have other fields "
                                    "besides 'range'");
            if (!BSON_ITER_HOLDS_UTF8(&unit))
                return mf_error_set(err, MF_FailedToParse, "'unit' must be a string");
        } else if (nfields != 1) {
            return mf_error_set(err, MF_FailedToParse,
                                "'window' field that specifies range cannot have other fields "
                                "besides 'unit'");
        }
        if ((rc = bound_parse(agg, &e0, true, has_unit, &f->lo, err)) != 0 ||
            (rc = bound_parse(agg, &e1, true, has_unit, &f->hi, err)) != 0)
            return rc;
        const char *name = has_unit ? bson_iter_utf8(&unit, NULL) : NULL;
        if (name && (rc = mfi_cal_unit_parse(name, strlen(name), &f->unit, err)) != 0)
            return rc;
        f->is_range = true;
    }
    /* lower <= upper, 'current' counting as 0 */
    if (f->lo.kind != B_UNBOUNDED && f->hi.kind != B_UNBOUNDED) {
        val l, u;
        set_int(&l, 0);
        set_int(&u, 0);
        if (f->lo.kind == B_VALUE)
            l = f->is_range ? f->lo.delta : (val){.value_type = BSON_TYPE_INT64, .value.v_int64 = f->lo.off};
        if (f->hi.kind == B_VALUE)
            u = f->is_range ? f->hi.delta : (val){.value_type = BSON_TYPE_INT64, .value.v_int64 = f->hi.off};
        if (mfi_val_cmp(&l, &u, NULL) > 0) {
            char ls[64], us[64];
            bound_str(&f->lo, ls, sizeof ls);
            bound_str(&f->hi, us, sizeof us);
            return mf_error_set(err, 5339900, "Lower bound must not exceed upper bound: [%s, %s]",
                                ls, us);
        }
    }
    if (has_docs) {
        if (!(f->lo.kind == B_UNBOUNDED && f->hi.kind == B_UNBOUNDED) && !w->sort)
            return mf_error_set(err, 5339901, "Document-based bounds require a sortBy");
        return 0;
    }
    if (!w->sort || w->nsort != 1)
        return mf_error_set(err, 5339902, "Range-based bounds require sortBy a single field");
    if (!w->sort_asc)
        return mf_error_set(err, 5339903, "Range-based bounds require an ascending sortBy");
    return 0;
}

/* {<field>: {<$acc>: arg}} for mfi_acc_parse. */
static int parse_acc(window_stage *w, wfn *f, const char *op, const bson_iter_t *arg,
                     mf_error *err)
{
    bson_t d = BSON_INITIALIZER, inner;
    bson_iter_t it;
    BSON_APPEND_DOCUMENT_BEGIN(&d, f->field, &inner);
    if (strcmp(op, "$count") == 0)
        BSON_APPEND_INT32(&inner, "$sum", 1);
    else
        mf_bsonx_append_value(&inner, op, -1, bson_iter_value((bson_iter_t *)arg));
    bson_append_document_end(&d, &inner);
    bson_iter_init(&it, &d);
    bson_iter_next(&it);
    int rc = mfi_acc_parse(&it, w->base.agg, &f->acc, err);
    bson_destroy(&d);
    return rc;
}

static int require_sort(const window_stage *w, const char *name, mf_error *err)
{
    if (!w->sort)
        return mf_error_set(err, MF_FailedToParse, "%s requires a sortBy", name);
    if (w->nsort != 1)
        return mf_error_set(err, MF_FailedToParse, "%s requires a non-compound sortBy", name);
    return 0;
}

/* {input: <expr>, unit: <string>} of $derivative and $integral. */
static int parse_with_unit(window_stage *w, wfn *f, const bson_iter_t *it, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it)) {
        char shown[256];
        mf_bsonx_elem_to_string(it, true, shown, sizeof shown);
        return mf_error_set(err, MF_FailedToParse, "%s expects an object, but got a %s: %s",
                            f->name, mf_bsonx_type_alias(bson_iter_type(it)), shown);
    }
    bson_iter_t a;
    bson_iter_recurse(it, &a);
    int rc = 0;
    while (rc == 0 && bson_iter_next(&a)) {
        const char *k = bson_iter_key(&a);
        if (strcmp(k, "input") == 0) {
            mf_expr_free(f->input);
            f->input = NULL;
            rc = mfi_agg_expr(w->base.agg, &a, &f->input, err);
        } else if (strcmp(k, "unit") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&a))
                return mf_error_set(err, MF_FailedToParse, "unit' must be a string, but got %s",
                                    mf_bsonx_type_alias(bson_iter_type(&a)));
            const char *name = bson_iter_utf8(&a, NULL);
            int unit;
            if ((rc = mfi_cal_unit_parse(name, strlen(name), &unit, err)) != 0)
                return rc;
            if (mfi_cal_unit_ms(unit) == 0)
                return mf_error_set(err, 5490710, "unit must be 'week' or smaller");
            f->unit_ms = mfi_cal_unit_ms(unit);
        } else {
            return mf_error_set(err, MF_FailedToParse, "%s got unexpected argument: %s", f->name, k);
        }
    }
    if (rc == 0 && !f->input)
        rc = mf_error_set(err, MF_FailedToParse, "%s requires an 'input' expression", f->name);
    return rc;
}

static int parse_shift(window_stage *w, wfn *f, const bson_iter_t *it, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_FailedToParse, "Argument to $shift must be an object");
    bson_iter_t a;
    bool has_by = false;
    int rc = 0;
    bson_iter_recurse(it, &a);
    while (rc == 0 && bson_iter_next(&a)) {
        const char *k = bson_iter_key(&a);
        if (strcmp(k, "output") == 0) {
            mf_expr_free(f->input);
            f->input = NULL;
            rc = mfi_agg_expr(w->base.agg, &a, &f->input, err);
        } else if (strcmp(k, "default") == 0) {
            mf_expr *e = NULL;
            const bson_value_t *cv;
            if ((rc = mfi_agg_expr(w->base.agg, &a, &e, err)) != 0)
                return rc;
            bool c = mf_expr_is_const(e, &cv);
            if (c) {
                mfi_val_free(&f->shift_default);
                mf_bsonx_value_copy(cv, &f->shift_default);
            }
            mf_expr_free(e);
            if (!c)
                return mf_error_set(err, MF_FailedToParse,
                                    "'$shift:default' expression must yield a constant value.");
        } else if (strcmp(k, "by") == 0) {
            int64_t n;
            if (!integral_value(&a, &n) || n < INT32_MIN || n > INT32_MAX) {
                char shown[256];
                mf_bsonx_elem_to_string(&a, true, shown, sizeof shown);
                return mf_error_set(err, MF_FailedToParse,
                                    "'$shift:by' field must be an integer, but found  %s", shown);
            }
            f->shift_by = n;
            has_by = true;
        } else {
            return mf_error_set(err, MF_FailedToParse, "Unknown argument in $shift");
        }
    }
    if (rc)
        return rc;
    if (!f->input)
        return mf_error_set(err, MF_FailedToParse, "$shift requires an 'output' expression.");
    if (!has_by)
        return mf_error_set(err, MF_FailedToParse, "$shift requires 'by' as an integer value.");
    return 0;
}

static int parse_ema(window_stage *w, wfn *f, const bson_iter_t *it, int nfields, mf_error *err)
{
    static const char shape[] = "$expMovingAvg sub object must have exactly two fields: An "
                                "'input' field, and either an 'N' field or an 'alpha' field";
    if (nfields != 1 || !BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_FailedToParse,
                            "$expMovingAvg must have exactly one argument that is an object");
    bson_iter_t a, in_it, n_it, alpha_it;
    bool has_in = false, has_n = false, has_alpha = false;
    int cnt = 0;
    bson_iter_recurse(it, &a);
    while (bson_iter_next(&a)) {
        const char *k = bson_iter_key(&a);
        cnt++;
        if (strcmp(k, "input") == 0 && !has_in) {
            in_it = a;
            has_in = true;
        } else if (strcmp(k, "N") == 0 && !has_n) {
            n_it = a;
            has_n = true;
        } else if (strcmp(k, "alpha") == 0 && !has_alpha) {
            alpha_it = a;
            has_alpha = true;
        }
    }
    if (cnt != 2 || !has_in)
        return mf_error_set(err, MF_FailedToParse, "%s", shape);
    if (!w->sort)
        return mf_error_set(err, MF_FailedToParse, "$expMovingAvg requires an explicit 'sortBy'");
    int rc = mfi_agg_expr(w->base.agg, &in_it, &f->input, err);
    if (rc)
        return rc;
    f->lo.kind = B_UNBOUNDED;
    f->hi.kind = B_CURRENT;
    if (has_n) {
        if (!BSON_ITER_HOLDS_NUMBER(&n_it))
            return mf_error_set(err, MF_FailedToParse,
                                "'N' field must be an integer, but found type %s",
                                mf_bsonx_type_alias(bson_iter_type(&n_it)));
        double d = bson_iter_as_double(&n_it);
        if (d != floor(d)) {
            char shown[256];
            mf_bsonx_elem_to_string(&n_it, true, shown, sizeof shown);
            return mf_error_set(err, MF_FailedToParse,
                                "'N' field must be an integer, but found  %s. To use a "
                                "non-integer, use the 'alpha' argument instead",
                                shown);
        }
        int64_t n = bson_iter_as_int64(&n_it);
        if (n <= 0)
            return mf_error_set(err, MF_FailedToParse,
                                "'N' must be greater than zero. Got %lld", (long long)n);
        f->alpha = mf_dec_div(mf_dec_from_int64(2),
                              mf_dec_add(mf_dec_from_int64(n), mf_dec_from_int64(1)));
        return 0;
    }
    if (has_alpha) {
        if (!BSON_ITER_HOLDS_NUMBER(&alpha_it) && !BSON_ITER_HOLDS_DECIMAL128(&alpha_it))
            return mf_error_set(err, MF_FailedToParse, "'alpha' must be a number");
        val av;
        mf_bsonx_value_copy(bson_iter_value(&alpha_it), &av);
        mf_dec d = as_dec(&av);
        if (!(mf_dec_cmp(d, mf_dec_from_int64(0)) > 0 && mf_dec_cmp(d, mf_dec_from_int64(1)) < 0)) {
            char shown[256];
            mf_bsonx_elem_to_string(&alpha_it, true, shown, sizeof shown);
            return mf_error_set(err, MF_FailedToParse,
                                "'alpha' must be between 0 and 1 (exclusive), found %s", shown);
        }
        f->alpha = d;
        return 0;
    }
    return mf_error_set(err, MF_FailedToParse, "Got unrecognized field in $expMovingAvg%s", shape);
}

/* Parse one output statement {<fn>: <arg>, window: {...}} into `f`. */
static int parse_fn(window_stage *w, wfn *f, const bson_iter_t *stmt, mf_error *err)
{
    const char *field = bson_iter_key(stmt);
    if (!BSON_ITER_HOLDS_DOCUMENT(stmt))
        return mf_error_set(err, MF_FailedToParse, "The field '%s' must be an object", field);
    bson_iter_t a, fn_it, win_it;
    const char *fn = NULL;
    const char *first_key = NULL;
    int nfields = 0;
    bson_iter_recurse(stmt, &a);
    while (bson_iter_next(&a)) {
        const char *k = bson_iter_key(&a);
        nfields++;
        if (!first_key)
            first_key = k;
        if (!fn && k[0] == '$') {
            if (!is_function(k))
                return mf_error_set(err, MF_FailedToParse, "Unrecognized window function, %s", k);
            fn = k;
            fn_it = a;
        }
    }
    if (!fn) {
        if (first_key && *first_key)
            return mf_error_set(err, MF_FailedToParse,
                                "Expected a $-prefixed window function, %s", first_key);
        return mf_error_set(err, MF_FailedToParse, "Expected a $-prefixed window function");
    }
    f->name = fn;
    f->unit = -1;
    f->lo.kind = f->hi.kind = B_UNBOUNDED;
    f->shift_default.value_type = BSON_TYPE_NULL;
    int rc = 0;
    bool has_window = false;

    /* the rank functions: {$rank: {}} and nothing else */
    if (!strcmp(fn, "$rank") || !strcmp(fn, "$denseRank") || !strcmp(fn, "$documentNumber")) {
        if (nfields != 1)
            return mf_error_set(err, 5371601, "Rank style window functions take no other arguments");
        bson_iter_t e;
        bool empty = BSON_ITER_HOLDS_DOCUMENT(&fn_it);
        if (empty) {
            bson_iter_recurse(&fn_it, &e);
            empty = !bson_iter_next(&e);
        }
        if (!empty)
            return mf_error_set(err, 5371603, "%s must be specified with '{}' as the value", fn);
        if (!w->sort || w->nsort != 1)
            return mf_error_set(err, 5371602,
                                "%s must be specified with a top level sortBy expression with "
                                "exactly one element",
                                fn);
        f->kind = !strcmp(fn, "$rank") ? W_RANK : !strcmp(fn, "$denseRank") ? W_DENSE_RANK
                                                                             : W_DOC_NUMBER;
        return 0;
    }
    if (!strcmp(fn, "$expMovingAvg")) {
        f->kind = W_EMA;
        return parse_ema(w, f, &fn_it, nfields, err);
    }
    if (!strcmp(fn, "$shift")) {
        f->kind = W_SHIFT;
        bson_iter_recurse(stmt, &a);
        while (bson_iter_next(&a)) {
            const char *k = bson_iter_key(&a);
            if (strcmp(k, "window") == 0)
                return mf_error_set(err, MF_FailedToParse, "$shift does not accept a 'window' field");
            if (k != fn && is_function(k))
                return mf_error_set(err, MF_FailedToParse,
                                    "Cannot specify multiple functions in window function spec");
            if (k != fn)
                return mf_error_set(err, MF_FailedToParse,
                                    "Window function found an unknown argument: %s", k);
        }
        if ((rc = parse_shift(w, f, &fn_it, err)) != 0)
            return rc;
        if (!w->sort)
            return mf_error_set(err, MF_FailedToParse, "'$shift' requires a sortBy");
        return 0;
    }
    bool is_deriv = !strcmp(fn, "$derivative"), is_integral = !strcmp(fn, "$integral");
    bool is_first = !strcmp(fn, "$first"), is_last = !strcmp(fn, "$last");
    bool is_n = !strcmp(fn, "$firstN") || !strcmp(fn, "$lastN") || !strcmp(fn, "$minN") ||
                !strcmp(fn, "$maxN") || !strcmp(fn, "$topN") || !strcmp(fn, "$bottomN") ||
                !strcmp(fn, "$top") || !strcmp(fn, "$bottom");
    bool left_unbounded = !strcmp(fn, "$locf") || !strcmp(fn, "$linearFill");
    if ((is_deriv || is_integral) && (rc = require_sort(w, fn, err)) != 0)
        return rc;

    /* the other arguments: 'window' and nothing else */
    bson_iter_recurse(stmt, &a);
    while (bson_iter_next(&a)) {
        const char *k = bson_iter_key(&a);
        if (k == fn)
            continue;
        if (strcmp(k, "window") == 0) {
            if (has_window && (is_first || is_last || is_n))
                return mf_error_set(err, MF_FailedToParse,
                                    "saw multiple 'window' fields in '%s' expression", fn);
            if (has_window && is_integral)
                return mf_error_set(err, MF_FailedToParse,
                                    "There can be only one 'window' field for $integral");
            has_window = true;
            win_it = a;
            if (!left_unbounded && (rc = parse_window(w, f, &win_it, err)) != 0)
                return rc;
            continue;
        }
        if (is_first || is_last || is_deriv || is_integral || is_n)
            return mf_error_set(err, MF_FailedToParse, "%s got unexpected argument: %s", fn, k);
        if (is_function(k))
            return mf_error_set(err, MF_FailedToParse,
                                "Cannot specify two functions in window function spec");
        return mf_error_set(err, MF_FailedToParse, "Window function found an unknown argument: %s",
                            k);
    }
    if (left_unbounded) {
        if (has_window)
            return mf_error_set(err, MF_FailedToParse, "'window' field is not allowed in %s", fn);
        f->hi.kind = B_CURRENT;
        if (!strcmp(fn, "$locf")) {
            f->kind = W_LOCF;
        } else {
            f->kind = W_LINEAR_FILL;
            if (!w->sort || w->nsort != 1)
                return mf_error_set(err, 605001,
                                    "$linearFill must be specified with a top level sortBy "
                                    "expression with exactly one element");
        }
        return mfi_agg_expr(w->base.agg, &fn_it, &f->input, err);
    }
    if (is_deriv || is_integral) {
        f->kind = is_deriv ? W_DERIVATIVE : W_INTEGRAL;
        if ((rc = parse_with_unit(w, f, &fn_it, err)) != 0)
            return rc;
        if (is_deriv && !has_window)
            return mf_error_set(err, MF_FailedToParse, "$derivative requires explicit window bounds");
        return 0;
    }
    if (is_first || is_last) {
        f->kind = is_first ? W_FIRST : W_LAST;
        return mfi_agg_expr(w->base.agg, &fn_it, &f->input, err);
    }
    if (!strcmp(fn, "$covariancePop") || !strcmp(fn, "$covarianceSamp")) {
        f->kind = fn[11] == 'P' ? W_COV_POP : W_COV_SAMP;
        return mfi_agg_expr(w->base.agg, &fn_it, &f->input, err);
    }
    if (!strcmp(fn, "$count")) {
        bson_iter_t e;
        bool empty = BSON_ITER_HOLDS_DOCUMENT(&fn_it);
        if (empty) {
            bson_iter_recurse(&fn_it, &e);
            empty = !bson_iter_next(&e);
        }
        if (!empty)
            return mf_error_set(err, MF_FailedToParse,
                                "$count only accepts an empty object as input");
    }
    f->kind = W_ACC;
    return parse_acc(w, f, fn, &fn_it, err);
}

/* Whether two output paths conflict (equal, or one a prefix of the other). */
static bool paths_conflict(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t n = la < lb ? la : lb;
    if (memcmp(a, b, n) != 0)
        return false;
    return la == lb || (la < lb ? b[la] == '.' : a[lb] == '.');
}

/* ----------------------------------------------------------- execution */

static int eval(window_stage *w, const mf_expr *e, const bson_t *doc, val *out, mf_error *err)
{
    return mfi_agg_eval(w->base.agg, e, doc, out, err);
}

/* Document i of the partition: borrowed until the next doc_at.  Its
 * metadata becomes what expressions read. */
static int doc_at(window_stage *w, size_t i, const bson_t **doc, mf_error *err)
{
    w->base.agg->vars.meta = i < w->metas_cap && w->metas[i].has ? &w->metas[i] : NULL;
    return mfi_docbuf_get(&w->buf, i, doc, err);
}

/* Keep `m` (NULL: none) as the metadata of the document buffered last
 * (index buf.n - 1); `m` is taken when `take`. */
static int keep_meta(window_stage *w, mf_meta *m, bool take, mf_error *err)
{
    size_t i = w->buf.n - 1;
    if (i >= w->metas_cap) {
        size_t cap = w->metas_cap ? w->metas_cap * 2 : 64;
        while (cap <= i)
            cap *= 2;
        mf_meta *v = realloc(w->metas, cap * sizeof *v);
        if (!v)
            return oom(err);
        memset(v + w->metas_cap, 0, (cap - w->metas_cap) * sizeof *v);
        w->metas = v;
        w->metas_cap = cap;
    }
    if (take) {
        mf_meta_clear(&w->metas[i]);
        w->metas[i] = *m;
        *m = (mf_meta){0};
        return 0;
    }
    return mf_meta_copy(&w->metas[i], m) != 0 ? oom(err) : 0;
}

/* Evaluate `e` on document i. */
static int eval_at(window_stage *w, const mf_expr *e, size_t i, val *out, mf_error *err)
{
    const bson_t *doc;
    int rc = doc_at(w, i, &doc, err);
    return rc ? rc : eval(w, e, doc, out, err);
}

static void free_results(window_stage *w)
{
    if (w->res) {
        for (size_t k = 0; k < w->nf; k++) {
            if (!w->res[k])
                continue;
            for (size_t i = 0; i < w->n; i++)
                mfi_val_free(&w->res[k][i]);
            free(w->res[k]);
        }
        free(w->res);
        w->res = NULL;
    }
    for (size_t i = 0; i < w->buf.n && i < w->metas_cap; i++)
        mf_meta_clear(&w->metas[i]);
    mfi_docbuf_clear(&w->buf);
    w->n = w->next = 0;
}

/* The partition key of `doc` (missing -> null). */
static int partition_key(window_stage *w, const bson_t *doc, val *key, mf_error *err)
{
    key->value_type = BSON_TYPE_NULL;
    if (!w->part)
        return 0;
    int rc = eval(w, w->part, doc, key, err);
    if (rc)
        return rc;
    if (key->value_type == BSON_TYPE_EOD)
        key->value_type = BSON_TYPE_NULL;
    if (key->value_type == BSON_TYPE_ARRAY) {
        mfi_val_free(key);
        return mf_error_set(err, MF_TypeMismatch, "Cannot 'partitionBy' an expression of type array");
    }
    return 0;
}

/* Add `doc` (a heap bson_t, taken) to the partition: past the memory
 * limit the partition's documents go to disk with allowDiskUse, else the
 * stage fails with 5414201 as mongod's. */
static int buffer_doc(window_stage *w, bson_t *doc, mf_error *err)
{
    mfi_agg *agg = w->base.agg;
    int rc = mfi_docbuf_add(&w->buf, doc, err);
    if (rc || w->buf.mem_bytes <= agg->window_max_bytes)
        return rc;
    if (!agg->allow_disk_use)
        return mf_error_set(err, 5414201,
                            "Exceeded memory limit in DocumentSourceSetWindowFields, used %zu "
                            "bytes but max allowed is %zu",
                            w->buf.mem_bytes, agg->window_max_bytes);
    if (agg->tmpdir)
        (void)mkdir(agg->tmpdir, 0700);
    return mfi_docbuf_spill(&w->buf, err);
}

/* Read the next partition into w->buf. */
static int read_partition(window_stage *w, mf_error *err)
{
    mfi_stage *s = &w->base;
    int rc = 0;
    val key = {.value_type = BSON_TYPE_EOD};
    if (w->pending) {
        bson_t *first = w->pending;
        w->pending = NULL;
        key = w->pending_key;
        w->pending_key.value_type = BSON_TYPE_EOD;
        rc = buffer_doc(w, first, err);
        if (rc == 0)
            rc = keep_meta(w, &w->pending_meta, true, err);
    }
    while (rc == 0 && !w->eof) {
        bson_t d;
        bool eof;
        if ((rc = mfi_stage_pull(s, &d, &eof, err)) != 0)
            break;
        if (eof) {
            w->eof = true;
            break;
        }
        val k;
        if ((rc = partition_key(w, &d, &k, err)) != 0) {
            bson_destroy(&d);
            break;
        }
        bson_t *copy = bson_copy(&d);
        bson_destroy(&d);
        if (!copy) {
            mfi_val_free(&k);
            rc = oom(err);
            break;
        }
        if (w->buf.n && key.value_type != BSON_TYPE_EOD &&
            mfi_val_cmp(&k, &key, s->agg->collator) != 0) {
            w->pending = copy;
            w->pending_key = k;
            if (mf_meta_copy(&w->pending_meta, s->in_meta) != 0)
                rc = oom(err);
            break;
        }
        mfi_val_free(&key);
        key = k;
        rc = buffer_doc(w, copy, err);
        if (rc == 0)
            rc = keep_meta(w, (mf_meta *)s->in_meta, false, err);
    }
    w->n = w->buf.n;
    mfi_val_free(&key);
    return rc;
}

/* Per-document values the functions need, computed once per partition. */
typedef struct part_ctx {
    val *sortv;              /* the first sortBy path's value per document */
    mf_buf *keys;            /* sort keys per document (ranks) */
} part_ctx;

static bool expected_type(const wfn *f, const val *v)
{
    return f->unit >= 0 ? v->value_type == BSON_TYPE_DATE_TIME : is_num(v);
}

/* base + delta for range windows. */
/* In the values v[from..n): the first index whose value is >= x (or > x
 * when `strict`), n if none.  Ascending values (the usual case) are
 * searched by bisection, so a range window's edges cost O(log n)
 * comparisons rather than a scan of the partition. */
static int64_t first_not_below(const val *v, int64_t from, int64_t n, const val *x, bool strict)
{
    int64_t lo = from, hi = n;
    if (n - from > 1 && mfi_val_cmp(&v[from], &v[n - 1], NULL) > 0) {
        /* not ascending (a descending sortBy): scan, as before */
        for (; lo < n; lo++) {
            int c = mfi_val_cmp(&v[lo], x, NULL);
            if (strict ? c > 0 : c >= 0)
                break;
        }
        return lo;
    }
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = mfi_val_cmp(&v[mid], x, NULL);
        if (strict ? c <= 0 : c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int range_add(const wfn *f, const val *base, const val *delta, val *out, mf_error *err)
{
    if (f->unit >= 0) {
        int64_t ms;
        if (!mfi_cal_add(base->value.v_datetime, f->unit, as_long(delta), &mfi_tz_utc, &ms))
            return mf_error_set(err, MF_BadValue, "date overflow in window bounds");
        set_date(out, ms);
        return 0;
    }
    if (base->value_type == BSON_TYPE_DECIMAL128 || delta->value_type == BSON_TYPE_DECIMAL128) {
        set_dec(out, mf_dec_add(as_dec(base), as_dec(delta)));
        return 0;
    }
    bool ints = base->value_type != BSON_TYPE_DOUBLE && delta->value_type != BSON_TYPE_DOUBLE;
    int64_t r;
    if (ints && !__builtin_add_overflow(as_long(base), as_long(delta), &r))
        set_long(out, r);
    else
        set_double(out, as_double(base) + as_double(delta));
    return 0;
}

/* The window of document i: [*lo, *hi], or *empty. */
static int endpoints(window_stage *w, const wfn *f, const part_ctx *pc, size_t i, size_t *lo,
                     size_t *hi, bool *empty, mf_error *err)
{
    int64_t n = (int64_t)w->n;
    *empty = false;
    if (!f->is_range) {
        int64_t l = f->lo.kind == B_UNBOUNDED ? 0 : (int64_t)i + (f->lo.kind == B_VALUE ? f->lo.off : 0);
        int64_t u = f->hi.kind == B_UNBOUNDED ? n - 1
                                              : (int64_t)i + (f->hi.kind == B_VALUE ? f->hi.off : 0);
        if (l > n - 1 || u < 0 || l > u) {
            *empty = true;
            return 0;
        }
        *lo = (size_t)(l < 0 ? 0 : l);
        *hi = (size_t)(u > n - 1 ? n - 1 : u);
        return 0;
    }
    const val *base = &pc->sortv[i];
    if (f->unit >= 0) {
        if (base->value_type != BSON_TYPE_DATE_TIME)
            return mf_error_set(err, 5429513,
                                "Invalid range: Expected the sortBy field to be a Date, but it was %s",
                                mfi_type_name(base));
    } else {
        if (base->value_type == BSON_TYPE_DATE_TIME)
            return mf_error_set(err, 5429413,
                                "Invalid range: For windows that involve date or time ranges, a "
                                "unit must be provided.");
        if (!is_num(base))
            return mf_error_set(err, 5429414,
                                "Invalid range: Expected the sortBy field to be a number, but it "
                                "was %s",
                                mfi_type_name(base));
    }
    int64_t l = -1, u = -1;
    val th;
    int rc;
    switch (f->lo.kind) {
    case B_CURRENT: l = (int64_t)i; break;
    case B_UNBOUNDED:
        for (int64_t j = 0; j < n; j++)
            if (expected_type(f, &pc->sortv[j])) {
                l = j;
                break;
            }
        break;
    case B_VALUE:
        if ((rc = range_add(f, base, &f->lo.delta, &th, err)) != 0)
            return rc;
        {
            /* the first value >= th (the partition is sorted) */
            int64_t j = first_not_below(pc->sortv, 0, n, &th, false);
            if (j < n && expected_type(f, &pc->sortv[j]))
                l = j;
        }
        mfi_val_free(&th);
        break;
    }
    if (l < 0) {
        *empty = true;
        return 0;
    }
    switch (f->hi.kind) {
    case B_CURRENT: u = (int64_t)i; break;
    case B_UNBOUNDED: {
        int64_t j = l > 0 ? l : 0;
        while (j < n && expected_type(f, &pc->sortv[j]))
            j++;
        u = j - 1;
        break;
    }
    case B_VALUE: {
        if ((rc = range_add(f, base, &f->hi.delta, &th, err)) != 0)
            return rc;
        /* the first value > th, from l on */
        int64_t j = first_not_below(pc->sortv, l, n, &th, true);
        mfi_val_free(&th);
        u = j == l && j < n ? -1 : j - 1;
        break;
    }
    }
    if (u < l) {
        *empty = true;
        return 0;
    }
    *lo = (size_t)l;
    *hi = (size_t)u;
    return 0;
}

/* $addToSet over a bounded window comes out sorted (mongod's removable
 * $addToSet keeps a sorted multiset, under the collation). */
static void sort_array(val *v, const mf_collator *coll)
{
    if (v->value_type != BSON_TYPE_ARRAY)
        return;
    bson_t arr;
    bson_iter_t it;
    size_t n = 0, i = 0;
    bson_init_static(&arr, v->value.v_doc.data, v->value.v_doc.data_len);
    bson_iter_init(&it, &arr);
    while (bson_iter_next(&it))
        n++;
    if (n < 2)
        return;
    val *e = calloc(n, sizeof *e);
    if (!e)
        return;
    bson_iter_init(&it, &arr);
    while (bson_iter_next(&it))
        e[i++] = *bson_iter_value(&it); /* borrowed from v until v is replaced */
    qsort_r(e, n, sizeof *e, mfi_val_cmp_r, (void *)coll);
    bson_t out = BSON_INITIALIZER;
    for (i = 0; i < n; i++)
        mfi_arr_push(&out, (uint32_t)i, &e[i]);
    free(e);
    val nv;
    mf_error err;
    if (mfi_set_steal(&nv, &out, BSON_TYPE_ARRAY, &err) == 0) {
        mfi_val_free(v);
        *v = nv;
    }
}

static int compute_acc(window_stage *w, wfn *f, const part_ctx *pc, val *res, mf_error *err)
{
    mfi_acc_state *st = NULL;
    size_t st_lo = 0, st_next = 0; /* the state holds [st_lo, st_next) */
    int rc = 0;
    bson_t root = BSON_INITIALIZER;
    for (size_t i = 0; rc == 0 && i < w->n; i++) {
        size_t lo, hi;
        bool empty;
        if ((rc = endpoints(w, f, pc, i, &lo, &hi, &empty, err)) != 0)
            break;
        if (!st || empty || lo != st_lo || hi + 1 < st_next) {
            mfi_acc_state_free(st);
            if (!(st = mfi_acc_state_new())) {
                rc = oom(err);
                break;
            }
            st_lo = st_next = empty ? 0 : lo;
        }
        if (!empty)
            for (; rc == 0 && st_next <= hi; st_next++)
            {
                const bson_t *doc;
                if ((rc = doc_at(w, st_next, &doc, err)) == 0)
                    rc = mfi_acc_add(&f->acc, st, doc, &root, st_next, w->base.agg, err);
            }
        if (rc == 0)
            rc = mfi_acc_result(&f->acc, st, &res[i], err);
        if (rc == 0 && f->lo.kind != B_UNBOUNDED && strcmp(f->acc.name, "$addToSet") == 0)
            sort_array(&res[i], w->base.agg->collator);
        if (empty) {
            mfi_acc_state_free(st);
            st = NULL;
        }
    }
    mfi_acc_state_free(st);
    bson_destroy(&root);
    return rc;
}

/* $first / $last: the input at the window's first / last document (missing
 * stays missing); null for an empty window. */
static int compute_first_last(window_stage *w, wfn *f, const part_ctx *pc, val *res,
                              mf_error *err)
{
    for (size_t i = 0; i < w->n; i++) {
        size_t lo, hi;
        bool empty;
        int rc = endpoints(w, f, pc, i, &lo, &hi, &empty, err);
        if (rc)
            return rc;
        if (empty) {
            set_null(&res[i]);
            continue;
        }
        if ((rc = eval_at(w, f->input, f->kind == W_FIRST ? lo : hi, &res[i], err)) != 0)
            return rc;
    }
    return 0;
}

static int compute_rank(window_stage *w, wfn *f, const part_ctx *pc, val *res)
{
    int64_t rank = 0, same = 1;
    for (size_t i = 0; i < w->n; i++) {
        bool eq = i > 0 && pc->keys[i].len == pc->keys[i - 1].len &&
                  memcmp(pc->keys[i].data, pc->keys[i - 1].data, pc->keys[i].len) == 0;
        switch (f->kind) {
        case W_DOC_NUMBER: rank = (int64_t)i + 1; break;
        case W_DENSE_RANK: if (!eq) rank++; break;
        default:
            if (eq) {
                same++;
            } else {
                rank += same;
                same = 1;
            }
            break;
        }
        set_int_or_long(&res[i], rank);
    }
    return 0;
}

static int compute_shift(window_stage *w, wfn *f, val *res, mf_error *err)
{
    for (size_t i = 0; i < w->n; i++) {
        int64_t j = (int64_t)i + f->shift_by;
        if (j < 0 || j >= (int64_t)w->n) {
            mf_bsonx_value_copy(&f->shift_default, &res[i]);
            continue;
        }
        int rc = eval_at(w, f->input, j, &res[i], err);
        if (rc)
            return rc;
    }
    return 0;
}

/* As mongod's AccumulatorExpMovingAvg: computed in Decimal128 throughout;
 * the result is a double unless a decimal input was seen. */
static int compute_ema(window_stage *w, wfn *f, val *res, mf_error *err)
{
    mf_dec ema = mf_dec_from_int64(0);
    mf_dec keep = mf_dec_sub(mf_dec_from_int64(1), f->alpha);
    bool has = false, is_dec = false;
    for (size_t i = 0; i < w->n; i++) {
        val v;
        int rc = eval_at(w, f->input, i, &v, err);
        if (rc)
            return rc;
        if (is_num(&v)) {
            mf_dec x = as_dec(&v);
            is_dec |= v.value_type == BSON_TYPE_DECIMAL128;
            ema = has ? mf_dec_add(mf_dec_mul(x, f->alpha), mf_dec_mul(ema, keep)) : x;
            has = true;
        }
        mfi_val_free(&v);
        if (has && is_dec)
            set_dec(&res[i], ema);
        else if (has)
            set_double(&res[i], mf_dec_to_double(ema, NULL));
        else
            set_null(&res[i]);
    }
    return 0;
}

/* b - a for two numbers or two dates (dates: milliseconds). */
static int subtract(const val *b, const val *a, val *out, mf_error *err)
{
    if (b->value_type == BSON_TYPE_DATE_TIME && a->value_type == BSON_TYPE_DATE_TIME) {
        set_long(out, b->value.v_datetime - a->value.v_datetime);
        return 0;
    }
    if (!is_num(a) || !is_num(b))
        return mf_error_set(err, 16556, "cant $subtract a %s from a %s", mfi_type_name(a),
                            mfi_type_name(b));
    if (a->value_type == BSON_TYPE_DECIMAL128 || b->value_type == BSON_TYPE_DECIMAL128) {
        set_dec(out, mf_dec_sub(as_dec(b), as_dec(a)));
        return 0;
    }
    if (a->value_type == BSON_TYPE_DOUBLE || b->value_type == BSON_TYPE_DOUBLE) {
        set_double(out, as_double(b) - as_double(a));
        return 0;
    }
    int64_t r;
    if (__builtin_sub_overflow(as_long(b), as_long(a), &r))
        set_double(out, as_double(b) - as_double(a));
    else if (a->value_type == BSON_TYPE_INT64 || b->value_type == BSON_TYPE_INT64)
        set_long(out, r);
    else
        set_int_or_long(out, r);
    return 0;
}

static int compute_derivative(window_stage *w, wfn *f, const part_ctx *pc, val *res,
                              mf_error *err)
{
    for (size_t i = 0; i < w->n; i++) {
        size_t lo, hi;
        bool empty;
        int rc = endpoints(w, f, pc, i, &lo, &hi, &empty, err);
        if (rc)
            return rc;
        set_null(&res[i]);
        if (empty)
            continue;
        const val *lt = &pc->sortv[lo], *rt = &pc->sortv[hi];
        if (f->unit_ms) {
            if (lt->value_type != BSON_TYPE_DATE_TIME || rt->value_type != BSON_TYPE_DATE_TIME)
                return mf_error_set(err, 5624900,
                                    "$derivative with 'unit' expects the sortBy field to be a Date");
        } else {
            if (lt->value_type == BSON_TYPE_DATE_TIME || rt->value_type == BSON_TYPE_DATE_TIME)
                return mf_error_set(err, 5624901,
                                    "$derivative where the sortBy is a Date requires an 'unit'");
            if (!is_num(lt) || !is_num(rt))
                return mf_error_set(err, 5624902,
                                    "$derivative (with no 'unit') expects the sortBy field to be "
                                    "numeric");
        }
        val run, rise, ly, ry;
        if ((rc = subtract(rt, lt, &run, err)) != 0)
            return rc;
        if ((rc = eval_at(w, f->input, lo, &ly, err)) != 0)
            return rc;
        if ((rc = eval_at(w, f->input, hi, &ry, err)) != 0) {
            mfi_val_free(&ly);
            return rc;
        }
        if (nullish(&ly) || nullish(&ry)) {
            mfi_val_free(&ly);
            mfi_val_free(&ry);
            return mf_error_set(err, 5624903, "$derivative input must not be null or missing");
        }
        rc = subtract(&ry, &ly, &rise, err);
        mfi_val_free(&ly);
        mfi_val_free(&ry);
        if (rc)
            return rc;
        if (as_double(&run) == 0)
            continue;
        if (rise.value_type == BSON_TYPE_DECIMAL128 || run.value_type == BSON_TYPE_DECIMAL128) {
            mf_dec q = mf_dec_div(as_dec(&rise), as_dec(&run));
            if (f->unit_ms)
                q = mf_dec_mul(q, mf_dec_from_int64(f->unit_ms));
            set_dec(&res[i], q);
            continue;
        }
        double r = as_double(&rise) / as_double(&run);
        if (f->unit_ms)
            r *= (double)f->unit_ms;
        set_double(&res[i], r);
    }
    return 0;
}

static int compute_integral(window_stage *w, wfn *f, const part_ctx *pc, val *res,
                            mf_error *err)
{
    val *y = calloc(w->n ? w->n : 1, sizeof *y);
    if (!y)
        return oom(err);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < w->n; i++) {
        rc = eval_at(w, f->input, i, &y[i], err);
        if (rc == 0 && !is_num(&y[i]))
            rc = mf_error_set(err, 5423900,
                              "$integral only works with numeric types, but found %s",
                              mfi_type_name(&y[i]));
        const val *x = &pc->sortv[i];
        if (rc == 0 && f->unit_ms && x->value_type != BSON_TYPE_DATE_TIME)
            rc = mf_error_set(err, 5423901,
                              "$integral with 'unit' expects the sortBy field to be a Date");
        if (rc == 0 && !f->unit_ms && !is_num(x))
            rc = mf_error_set(err, 5423902,
                              x->value_type == BSON_TYPE_DATE_TIME
                                  ? "$integral where the sortBy is a Date requires an 'unit'"
                                  : "$integral (with no 'unit') expects the sortBy field to be "
                                    "numeric");
    }
    for (size_t i = 0; rc == 0 && i < w->n; i++) {
        size_t lo, hi;
        bool empty;
        if ((rc = endpoints(w, f, pc, i, &lo, &hi, &empty, err)) != 0)
            break;
        if (empty) {
            set_null(&res[i]);
            continue;
        }
        double sum = 0, comp = 0;
        for (size_t k = lo; k < hi; k++) {
            const val *x0 = &pc->sortv[k], *x1 = &pc->sortv[k + 1];
            double dx = x0->value_type == BSON_TYPE_DATE_TIME
                            ? (double)(x1->value.v_datetime - x0->value.v_datetime)
                            : as_double(x1) - as_double(x0);
            double a = dx * (as_double(&y[k]) + as_double(&y[k + 1])) / 2.0;
            double t = sum + a; /* compensated, as mongod's sums */
            comp += fabs(sum) >= fabs(a) ? (sum - t) + a : (a - t) + sum;
            sum = t;
        }
        sum += comp;
        if (f->unit_ms)
            sum /= (double)f->unit_ms;
        set_double(&res[i], sum);
    }
    mfi_free_all(y, w->n);
    free(y);
    return rc;
}

static int compute_covariance(window_stage *w, wfn *f, const part_ctx *pc, val *res,
                              mf_error *err)
{
    double *xs = calloc(w->n ? w->n : 1, sizeof *xs), *ys = calloc(w->n ? w->n : 1, sizeof *ys);
    bool *ok = calloc(w->n ? w->n : 1, sizeof *ok);
    int rc = 0;
    if (!xs || !ys || !ok)
        rc = oom(err);
    for (size_t i = 0; rc == 0 && i < w->n; i++) {
        val v;
        if ((rc = eval_at(w, f->input, i, &v, err)) != 0)
            break;
        if (v.value_type == BSON_TYPE_ARRAY) {
            bson_t arr;
            bson_iter_t it;
            val e[2];
            int k = 0;
            bson_init_static(&arr, v.value.v_doc.data, v.value.v_doc.data_len);
            bson_iter_init(&it, &arr);
            while (k < 3 && bson_iter_next(&it)) {
                if (k < 2)
                    e[k] = *bson_iter_value(&it);
                k++;
            }
            if (k == 2 && is_num(&e[0]) && is_num(&e[1])) {
                xs[i] = as_double(&e[0]);
                ys[i] = as_double(&e[1]);
                ok[i] = true;
            }
        }
        mfi_val_free(&v);
    }
    for (size_t i = 0; rc == 0 && i < w->n; i++) {
        size_t lo, hi;
        bool empty;
        if ((rc = endpoints(w, f, pc, i, &lo, &hi, &empty, err)) != 0)
            break;
        double mx = 0, my = 0, c = 0;
        int64_t cnt = 0;
        for (size_t k = lo; !empty && k <= hi; k++) {
            if (!ok[k])
                continue;
            cnt++;
            double dx = xs[k] - mx;
            mx += dx / (double)cnt;
            my += (ys[k] - my) / (double)cnt;
            c += dx * (ys[k] - my);
        }
        if (f->kind == W_COV_POP ? cnt == 0 : cnt < 2)
            set_null(&res[i]);
        else
            set_double(&res[i], c / (double)(f->kind == W_COV_POP ? cnt : cnt - 1));
    }
    free(xs);
    free(ys);
    free(ok);
    return rc;
}

static int compute_locf(window_stage *w, wfn *f, val *res, mf_error *err)
{
    val last = {.value_type = BSON_TYPE_NULL};
    for (size_t i = 0; i < w->n; i++) {
        val v;
        int rc = eval_at(w, f->input, i, &v, err);
        if (rc) {
            mfi_val_free(&last);
            return rc;
        }
        if (!nullish(&v)) {
            mfi_val_free(&last);
            last = v;
        } else {
            mfi_val_free(&v);
        }
        mf_bsonx_value_copy(&last, &res[i]);
    }
    mfi_val_free(&last);
    return 0;
}

/* y = y1 + (x - x1) * ((y2 - y1) / (x2 - x1)), as mongod's linear fill. */
static int compute_linear_fill(window_stage *w, wfn *f, const part_ctx *pc, val *res,
                               mf_error *err)
{
    val *y = calloc(w->n ? w->n : 1, sizeof *y);
    if (!y)
        return oom(err);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < w->n; i++) {
        rc = eval_at(w, f->input, i, &y[i], err);
        const val *x = &pc->sortv[i];
        if (rc == 0 && !is_num(&y[i]) && !nullish(&y[i]))
            rc = mf_error_set(err, MF_TypeMismatch,
                              "Value to be filled must be numeric or nullish, but found %s",
                              mfi_type_name(&y[i]));
        if (rc == 0 && !is_num(x) && x->value_type != BSON_TYPE_DATE_TIME &&
            x->value_type != BSON_TYPE_TIMESTAMP)
            rc = mf_error_set(err, MF_TypeMismatch,
                              "Value of the sortBy field must be numeric or a date, but found %s",
                              mfi_type_name(x));
        if (rc == 0 && i > 0) {
            const val *px = &pc->sortv[i - 1];
            if (mfi_val_cmp(x, px, NULL) == 0)
                rc = mf_error_set(err, 6050106, "There can be no repeated values in the sort field");
            else if (is_num(x) != is_num(px))
                rc = mf_error_set(err, MF_TypeMismatch,
                                  "Conflicting sort value types, previously received type %s, but "
                                  "found %s",
                                  mfi_type_name(px), mfi_type_name(x));
        }
    }
    int64_t prev = -1;
    for (size_t i = 0; rc == 0 && i < w->n; i++) {
        if (!nullish(&y[i])) {
            mf_bsonx_value_copy(&y[i], &res[i]);
            prev = (int64_t)i;
            continue;
        }
        size_t nx = i + 1;
        while (nx < w->n && nullish(&y[nx]))
            nx++;
        if (prev < 0 || nx >= w->n) {
            set_null(&res[i]);
            continue;
        }
        const val *x1 = &pc->sortv[prev], *x2 = &pc->sortv[nx], *x = &pc->sortv[i];
        val dx, dx21, dy;
        if ((rc = subtract(x, x1, &dx, err)) != 0 || (rc = subtract(x2, x1, &dx21, err)) != 0 ||
            (rc = subtract(&y[nx], &y[prev], &dy, err)) != 0)
            break;
        double r = as_double(&y[prev]) + as_double(&dx) * (as_double(&dy) / as_double(&dx21));
        set_double(&res[i], r);
    }
    mfi_free_all(y, w->n);
    free(y);
    return rc;
}

static int compute_partition(window_stage *w, mf_error *err)
{
    part_ctx pc = {0};
    int rc = 0;
    if (!(w->res = calloc(w->nf, sizeof *w->res)))
        return oom(err);
    for (size_t k = 0; k < w->nf; k++)
        if (!(w->res[k] = calloc(w->n ? w->n : 1, sizeof **w->res)))
            return oom(err);
    if (w->sort_expr) {
        if (!(pc.sortv = calloc(w->n ? w->n : 1, sizeof *pc.sortv)))
            return oom(err);
        for (size_t i = 0; rc == 0 && i < w->n; i++)
            rc = eval_at(w, w->sort_expr, i, &pc.sortv[i], err);
    }
    if (rc == 0 && w->sort) {
        if (!(pc.keys = calloc(w->n ? w->n : 1, sizeof *pc.keys)))
            rc = oom(err);
        for (size_t i = 0; rc == 0 && i < w->n; i++)
        {
            const bson_t *doc;
            if ((rc = doc_at(w, i, &doc, err)) == 0)
                rc = mf_sort_key(w->sort, doc, &pc.keys[i], err);
        }
    }
    for (size_t k = 0; rc == 0 && k < w->nf; k++) {
        wfn *f = &w->f[k];
        val *res = w->res[k];
        switch (f->kind) {
        case W_ACC: rc = compute_acc(w, f, &pc, res, err); break;
        case W_FIRST: case W_LAST: rc = compute_first_last(w, f, &pc, res, err); break;
        case W_RANK: case W_DENSE_RANK: case W_DOC_NUMBER: rc = compute_rank(w, f, &pc, res); break;
        case W_SHIFT: rc = compute_shift(w, f, res, err); break;
        case W_EMA: rc = compute_ema(w, f, res, err); break;
        case W_DERIVATIVE: rc = compute_derivative(w, f, &pc, res, err); break;
        case W_INTEGRAL: rc = compute_integral(w, f, &pc, res, err); break;
        case W_COV_POP: case W_COV_SAMP: rc = compute_covariance(w, f, &pc, res, err); break;
        case W_LOCF: rc = compute_locf(w, f, res, err); break;
        case W_LINEAR_FILL: rc = compute_linear_fill(w, f, &pc, res, err); break;
        }
    }
    if (pc.sortv) {
        mfi_free_all(pc.sortv, w->n);
        free(pc.sortv);
    }
    if (pc.keys) {
        for (size_t i = 0; i < w->n; i++)
            mf_buf_free(&pc.keys[i]);
        free(pc.keys);
    }
    return rc;
}

static int window_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    window_stage *w = (window_stage *)s;
    int rc;
    if (w->next >= w->n) {
        free_results(w);
        if (w->eof && !w->pending) {
            *eof = true;
            return 0;
        }
        if ((rc = read_partition(w, err)) != 0)
            return rc;
        if (w->n == 0) {
            *eof = true;
            return 0;
        }
        if ((rc = compute_partition(w, err)) != 0)
            return rc;
    }
    size_t i = w->next++;
    /* each output rewrites the document; keep heap bson_t's and swap the
     * pointers (a grown bson_t must not be copied by value) */
    const bson_t *doc;
    if ((rc = doc_at(w, i, &doc, err)) != 0)
        return rc;
    s->meta = w->base.agg->vars.meta; /* what it came with (doc_at) */
    bson_t *cur = bson_copy(doc);
    for (size_t k = 0; cur && k < w->nf; k++) {
        const val *v = &w->res[k][i];
        bson_t *nd = bson_new();
        if (nd)
            mfi_doc_set_path(cur, w->f[k].field, v->value_type == BSON_TYPE_EOD ? NULL : v, nd);
        bson_destroy(cur);
        cur = nd;
    }
    if (!cur)
        return oom(err);
    bson_init(out);
    bson_concat(out, cur);
    bson_destroy(cur);
    *eof = false;
    return 0;
}

static void window_free(mfi_stage *s)
{
    window_stage *w = (window_stage *)s;
    free_results(w);
    mfi_docbuf_free(&w->buf);
    free(w->metas);
    mf_meta_clear(&w->pending_meta);
    if (w->pending)
        bson_destroy(w->pending);
    mfi_val_free(&w->pending_key);
    mf_expr_free(w->part);
    mf_sort_free(w->sort);
    mf_expr_free(w->sort_expr);
    for (size_t k = 0; k < w->nf; k++) {
        wfn *f = &w->f[k];
        free(f->field);
        mfi_acc_clear(&f->acc);
        mf_expr_free(f->input);
        mfi_val_free(&f->lo.delta);
        mfi_val_free(&f->hi.delta);
        mfi_val_free(&f->shift_default);
    }
    free(w->f);
}

static const mfi_stage_ops window_ops = {"$setWindowFields", window_next, NULL, window_free,
                                         false, MFI_DEPS_SEE_NEXT};

/* ------------------------------------------------------------ the stage */

static int parse_iter_of(const bson_t *d, bson_iter_t *it)
{
    bson_iter_init(it, d);
    return bson_iter_next(it) ? 0 : -1;
}

static int make_path_expr(mfi_agg *agg, const char *path, mf_expr **out, mf_error *err)
{
    bson_t d = BSON_INITIALIZER;
    bson_iter_t it;
    char *s = bson_strdup_printf("$%s", path);
    BSON_APPEND_UTF8(&d, "v", s);
    bson_free(s);
    parse_iter_of(&d, &it);
    int rc = mfi_agg_expr(agg, &it, out, err);
    bson_destroy(&d);
    return rc;
}

static const char *wrong_type(bson_type_t t)
{
    return mf_bsonx_type_alias(t);
}

int mfi_parse_set_window_fields(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                                mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_FailedToParse,
                            "the $setWindowFields stage specification must be an object, found %s",
                            wrong_type(bson_iter_type(it)));
    bson_iter_t f, part_it, sort_it, out_it;
    bool has_part = false, has_sort = false, has_out = false;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "partitionBy") == 0) {
            part_it = f;
            has_part = true;
        } else if (strcmp(k, "sortBy") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field '$setWindowFields.sortBy' is the wrong type '%s', "
                                    "expected type 'object'",
                                    wrong_type(bson_iter_type(&f)));
            sort_it = f;
            has_sort = true;
        } else if (strcmp(k, "output") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field '$setWindowFields.output' is the wrong type '%s', "
                                    "expected type 'object'",
                                    wrong_type(bson_iter_type(&f)));
            out_it = f;
            has_out = true;
        } else {
            return mf_error_set(err, 40415, "BSON field '$setWindowFields.%s' is an unknown field.",
                                k);
        }
    }
    if (!has_out)
        return mf_error_set(err, 40414,
                            "BSON field '$setWindowFields.output' is missing but a required field");

    /* the sort spec and the partition expression */
    bson_t sort_spec = BSON_INITIALIZER;
    mf_expr *part = NULL;
    const bson_value_t *pc;
    char *part_path = NULL;
    bool complex_part = false;
    int rc = 0;
    if (has_sort) {
        uint32_t l;
        const uint8_t *d;
        bson_t s;
        bson_iter_document(&sort_it, &l, &d);
        bson_init_static(&s, d, l);
        bson_concat(&sort_spec, &s);
    }
    if (has_part) {
        if ((rc = mfi_agg_expr(agg, &part_it, &part, err)) != 0)
            goto done;
        /* mongod folds constants: an array of literals is a constant array */
        bool const_array = BSON_ITER_HOLDS_ARRAY(&part_it);
        if (const_array) {
            bson_iter_t e;
            bson_iter_recurse(&part_it, &e);
            while (bson_iter_next(&e))
                if (BSON_ITER_HOLDS_DOCUMENT(&e) || BSON_ITER_HOLDS_ARRAY(&e) ||
                    (BSON_ITER_HOLDS_UTF8(&e) && bson_iter_utf8(&e, NULL)[0] == '$'))
                    const_array = false;
        }
        if (const_array || mf_expr_is_const(part, &pc)) {
            if (const_array || pc->value_type == BSON_TYPE_ARRAY) {
                rc = mf_error_set(err, MF_TypeMismatch,
                                  "An expression used to partition cannot evaluate to value of "
                                  "type array");
                goto done;
            }
            mf_expr_free(part);
            part = NULL;
        } else if (BSON_ITER_HOLDS_UTF8(&part_it) && bson_iter_utf8(&part_it, NULL)[0] == '$' &&
                   bson_iter_utf8(&part_it, NULL)[1] != '$') {
            if ((rc = mfi_agg_field_path(bson_iter_utf8(&part_it, NULL), &part_path, err)) != 0)
                goto done;
        } else {
            complex_part = true;
            part_path = bson_strdup(PARTITION_KEY_TMP);
        }
    }

    /* $addFields for a computed partition key */
    if (complex_part) {
        bson_t d = BSON_INITIALIZER, body;
        bson_iter_t di;
        BSON_APPEND_DOCUMENT_BEGIN(&d, "$addFields", &body);
        mf_bsonx_append_value(&body, PARTITION_KEY_TMP, -1, bson_iter_value(&part_it));
        bson_append_document_end(&d, &body);
        parse_iter_of(&d, &di);
        rc = mfi_parse_add_fields(&di, agg, out, err);
        bson_destroy(&d);
        if (rc)
            goto done;
    }
    /* $sort by the partition key, then sortBy */
    window_stage *w = NULL;
    {
        bson_t d = BSON_INITIALIZER, body;
        bson_iter_t di, si;
        BSON_APPEND_DOCUMENT_BEGIN(&d, "$sort", &body);
        if (part_path)
            BSON_APPEND_INT32(&body, part_path, 1);
        bson_iter_init(&si, &sort_spec);
        while (bson_iter_next(&si))
            if (!part_path || strcmp(bson_iter_key(&si), part_path) != 0)
                mf_bsonx_append_iter(&body, NULL, 0, &si);
        bson_append_document_end(&d, &body);
        parse_iter_of(&d, &di);
        bson_iter_t bi;
        bson_iter_recurse(&di, &bi);
        bool nonempty = bson_iter_next(&bi);
        /* validate sortBy first (its errors are mongod's SortPattern's) */
        mf_sort *probe = NULL;
        if (has_sort && (rc = mf_sort_parse_coll(&sort_spec, agg->collator, &probe, err)) != 0) {
            bson_destroy(&d);
            goto done;
        }
        mf_sort_free(probe);
        if (nonempty)
            rc = mfi_parse_sort(&di, agg, out, err);
        bson_destroy(&d);
        if (rc)
            goto done;
    }
    w = mfi_stage_new(out, &window_ops, sizeof *w, it, agg, err);
    if (!w) {
        rc = MF_InternalError;
        goto done;
    }
    w->pending_key.value_type = BSON_TYPE_EOD;
    mfi_docbuf_init(&w->buf, agg->tmpdir);
    if (part_path && !complex_part) {
        w->part = part;
        part = NULL;
    } else if (complex_part && (rc = make_path_expr(agg, PARTITION_KEY_TMP, &w->part, err)) != 0) {
        goto done;
    }
    if (has_sort && !bson_empty(&sort_spec)) {
        if ((rc = mf_sort_parse_coll(&sort_spec, agg->collator, &w->sort, err)) != 0)
            goto done;
        w->nsort = mf_sort_nkeys(w->sort);
        bson_iter_t si;
        bson_iter_init(&si, &sort_spec);
        bson_iter_next(&si);
        w->sort_asc = bson_iter_as_double(&si) > 0;
        if ((rc = make_path_expr(agg, bson_iter_key(&si), &w->sort_expr, err)) != 0)
            goto done;
    }
    /* the output statements */
    bson_iter_t o;
    size_t n = 0;
    bson_iter_recurse(&out_it, &o);
    while (bson_iter_next(&o))
        n++;
    if (n && !(w->f = calloc(n, sizeof *w->f))) {
        rc = oom(err);
        goto done;
    }
    bson_iter_recurse(&out_it, &o);
    while (rc == 0 && bson_iter_next(&o)) {
        const char *k = bson_iter_key(&o);
        char *path = NULL;
        char *dollar = bson_strdup_printf("$%s", k);
        rc = mfi_agg_field_path(dollar, &path, err);
        bson_free(dollar);
        if (rc)
            break;
        for (size_t j = 0; j < w->nf; j++)
            if (paths_conflict(w->f[j].field, path)) {
                free(path);
                rc = mf_error_set(err, 6307900,
                                  "$setWindowFields 'output' specification contains two "
                                  "conflicting paths");
                goto done;
            }
        wfn *fn = &w->f[w->nf++];
        fn->field = path;
        fn->lo.delta.value_type = fn->hi.delta.value_type = BSON_TYPE_EOD;
        fn->shift_default.value_type = BSON_TYPE_EOD;
        rc = parse_fn(w, fn, &o, err);
    }
    /* $unset the computed partition key */
    if (rc == 0 && complex_part) {
        bson_t d = BSON_INITIALIZER;
        bson_iter_t di;
        BSON_APPEND_UTF8(&d, "$unset", PARTITION_KEY_TMP);
        parse_iter_of(&d, &di);
        rc = mfi_parse_unset(&di, agg, out, err);
        bson_destroy(&d);
    }
done:
    mf_expr_free(part);
    free(part_path);
    bson_destroy(&sort_spec);
    return rc;
}
