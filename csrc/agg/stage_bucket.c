/*
 * stage_bucket.c -- $bucket, $bucketAuto and $redact.
 *
 * $bucket desugars as mongod's document_source_bucket.cpp into
 *     {$group: {_id: {$switch: {branches: [{case: {$and: [{$gte: [G, b0]},
 *               {$lt: [G, b1]}]}, then: b0}, ...], default: D}}, <output>}}
 *     {$sort: {_id: 1}}
 * (output defaults to {count: {$sum: 1}}), so a value outside the
 * boundaries without a default fails as $switch does (40066).
 *
 * $bucketAuto sorts its input by the groupBy value through mf_sorter
 * (stable: equal values keep their input order; past
 * internalDocumentSourceBucketAutoMaxMemoryBytes it spills sorted runs to
 * disk with allowDiskUse, else fails with 292), then, the count known,
 * streams the sorted records into buckets of about
 * round(n / buckets) documents; equal values never straddle a bucket, a
 * bucket's max is the next bucket's min (the last one's is its greatest
 * value), and with a granularity the boundaries are rounded to the
 * preferred-number series (R5 ... E192, 1-2-5) or powers of two, as
 * mongod's GranularityRounder.
 *
 * $redact evaluates its expression on the document and, for $$DESCEND, on
 * each sub-document (in arrays too), keeping, pruning or descending.  The
 * variables DESCEND, PRUNE and KEEP exist only inside $redact, as in
 * mongod, so they are passed as extra `let` names of the expression.  The
 * sub-document being judged is $$CURRENT (what "$field" reads); $$ROOT stays
 * the input document, as in mongod.
 */
#include "accumulator.h"
#include "expr_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

/* mongod's canonicalizeBSONType: types that compare as one family. */
static int canonical(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_MINKEY: return -1;
    case BSON_TYPE_EOD: case BSON_TYPE_UNDEFINED: return 0;
    case BSON_TYPE_NULL: return 5;
    case BSON_TYPE_INT32: case BSON_TYPE_INT64: case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: return 10;
    case BSON_TYPE_UTF8: case BSON_TYPE_SYMBOL: return 15;
    case BSON_TYPE_DOCUMENT: return 20;
    case BSON_TYPE_ARRAY: return 25;
    case BSON_TYPE_BINARY: return 30;
    case BSON_TYPE_OID: return 35;
    case BSON_TYPE_BOOL: return 40;
    case BSON_TYPE_DATE_TIME: return 45;
    case BSON_TYPE_TIMESTAMP: return 47;
    case BSON_TYPE_REGEX: return 50;
    case BSON_TYPE_DBPOINTER: return 55;
    case BSON_TYPE_CODE: return 60;
    case BSON_TYPE_CODEWSCOPE: return 65;
    case BSON_TYPE_MAXKEY: return 127;
    default: return 0;
    }
}

/* A constant expression's value (copied into *out), or false. */
static bool const_value(mfi_agg *agg, const bson_iter_t *it, val *out)
{
    mf_expr *e = NULL;
    const bson_value_t *cv;
    mf_error err;
    if (mfi_agg_expr(agg, it, &e, &err) != 0)
        return false;
    bool c = mf_expr_is_const(e, &cv);
    if (c)
        mf_bsonx_value_copy(cv, out);
    mf_expr_free(e);
    return c;
}

static void elem_str(const bson_iter_t *it, char *buf, size_t cap)
{
    mf_bsonx_elem_to_string(it, false, buf, cap);
}

/* --------------------------------------------------------------- $bucket */

int mfi_parse_bucket(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 40201,
                            "Argument to $bucket stage must be an object, but found type: %s.",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_t f, group_by, output;
    bool has_group_by = false, has_output = false;
    val *bounds = NULL;
    size_t nb = 0, capb = 0;
    val def = {.value_type = BSON_TYPE_EOD};
    char shown[512];
    int rc = 0;
    bson_iter_recurse(it, &f);
    while (rc == 0 && bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "groupBy") == 0) {
            group_by = f;
            has_group_by = true;
            bool ok = false;
            if (BSON_ITER_HOLDS_DOCUMENT(&f)) {
                bson_iter_t g;
                bson_iter_recurse(&f, &g);
                ok = bson_iter_next(&g) && bson_iter_key(&g)[0] == '$';
            } else if (BSON_ITER_HOLDS_UTF8(&f)) {
                ok = bson_iter_utf8(&f, NULL)[0] == '$';
            }
            if (!ok) {
                elem_str(&f, shown, sizeof shown);
                rc = mf_error_set(err, 40202,
                                  "The $bucket 'groupBy' field must be defined as a $-prefixed "
                                  "path or an expression, but found: %s.",
                                  shown);
            }
        } else if (strcmp(k, "boundaries") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&f)) {
                rc = mf_error_set(err, 40200,
                                  "The $bucket 'boundaries' field must be an array, but found "
                                  "type: %s.",
                                  mf_bsonx_type_alias(bson_iter_type(&f)));
                break;
            }
            bson_iter_t e;
            bson_iter_recurse(&f, &e);
            while (rc == 0 && bson_iter_next(&e)) {
                if (nb == capb) {
                    size_t cap = capb ? 2 * capb : 8;
                    val *v = realloc(bounds, cap * sizeof *v);
                    if (!v) {
                        rc = oom(err);
                        break;
                    }
                    bounds = v;
                    capb = cap;
                }
                if (!const_value(agg, &e, &bounds[nb])) {
                    elem_str(&e, shown, sizeof shown);
                    rc = mf_error_set(err, 40191,
                                      "The $bucket 'boundaries' field must be an array of "
                                      "constant values, but found value: %s.",
                                      shown);
                    break;
                }
                nb++;
            }
            if (rc)
                break;
            if (nb < 2) {
                rc = mf_error_set(err, 40192,
                                  "The $bucket 'boundaries' field must have at least 2 values, "
                                  "but found %zu value(s).",
                                  nb);
                break;
            }
            for (size_t i = 1; rc == 0 && i < nb; i++) {
                const val *lo = &bounds[i - 1], *hi = &bounds[i];
                if (canonical(lo->value_type) != canonical(hi->value_type)) {
                    rc = mf_error_set(err, 40193,
                                      "All values in the the 'boundaries' option to $bucket must "
                                      "have the same type. Found conflicting types %s and %s.",
                                      mf_bsonx_type_alias(lo->value_type),
                                      mf_bsonx_type_alias(hi->value_type));
                } else if (mfi_val_cmp(lo, hi, agg->collator) >= 0) {
                    char ls[128], hs[128];
                    mfi_val_str(lo, ls, sizeof ls);
                    mfi_val_str(hi, hs, sizeof hs);
                    rc = mf_error_set(err, 40194,
                                      "The 'boundaries' option to $bucket must be sorted, but "
                                      "elements %zu and %zu are not in ascending order (%s is not "
                                      "less than %s).",
                                      i - 1, i, ls, hs);
                }
            }
        } else if (strcmp(k, "default") == 0) {
            mfi_val_free(&def);
            def.value_type = BSON_TYPE_EOD;
            if (!const_value(agg, &f, &def)) {
                elem_str(&f, shown, sizeof shown);
                rc = mf_error_set(err, 40195,
                                  "The $bucket 'default' field must be a constant expression, but "
                                  "found: %s.",
                                  shown);
            }
        } else if (strcmp(k, "output") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                rc = mf_error_set(err, 40196,
                                  "The $bucket 'output' field must be an object, but found type: "
                                  "%s.",
                                  mf_bsonx_type_alias(bson_iter_type(&f)));
            output = f;
            has_output = true;
        } else {
            rc = mf_error_set(err, 40197, "Unrecognized option to $bucket: %s.", k);
        }
    }
    if (rc == 0 && (!has_group_by || nb == 0))
        rc = mf_error_set(err, 40198, "$bucket requires 'groupBy' and 'boundaries' to be specified.");
    if (rc == 0 && def.value_type != BSON_TYPE_EOD &&
        canonical(def.value_type) == canonical(bounds[0].value_type) &&
        !(mfi_val_cmp(&def, &bounds[0], agg->collator) < 0 ||
          mfi_val_cmp(&def, &bounds[nb - 1], agg->collator) >= 0))
        rc = mf_error_set(err, 40199,
                          "The $bucket 'default' field must be less than the lowest boundary or "
                          "greater than or equal to the highest boundary.");
    if (rc == 0) {
        bson_t g = BSON_INITIALIZER, srt = BSON_INITIALIZER, body, id, sw, br, c, and, cmp, acc;
        BSON_APPEND_DOCUMENT_BEGIN(&g, "$group", &body);
        if (has_output) {
            bson_iter_t o;
            bson_iter_recurse(&output, &o);
            while (bson_iter_next(&o))
                mf_bsonx_append_iter(&body, NULL, 0, &o);
        }
        BSON_APPEND_DOCUMENT_BEGIN(&body, "_id", &id);
        BSON_APPEND_DOCUMENT_BEGIN(&id, "$switch", &sw);
        if (def.value_type != BSON_TYPE_EOD)
            mf_bsonx_append_value(&sw, "default", 7, &def);
        BSON_APPEND_ARRAY_BEGIN(&sw, "branches", &br);
        for (size_t i = 1; i < nb; i++) {
            char key[24];
            snprintf(key, sizeof key, "%zu", i - 1);
            BSON_APPEND_DOCUMENT_BEGIN(&br, key, &c);
            BSON_APPEND_DOCUMENT_BEGIN(&c, "case", &and);
            bson_t arr, cmp_arr;
            BSON_APPEND_ARRAY_BEGIN(&and, "$and", &arr);
            BSON_APPEND_DOCUMENT_BEGIN(&arr, "0", &cmp);
            BSON_APPEND_ARRAY_BEGIN(&cmp, "$gte", &cmp_arr);
            mf_bsonx_append_value(&cmp_arr, "0", 1, bson_iter_value(&group_by));
            mf_bsonx_append_value(&cmp_arr, "1", 1, &bounds[i - 1]);
            bson_append_array_end(&cmp, &cmp_arr);
            bson_append_document_end(&arr, &cmp);
            BSON_APPEND_DOCUMENT_BEGIN(&arr, "1", &cmp);
            BSON_APPEND_ARRAY_BEGIN(&cmp, "$lt", &cmp_arr);
            mf_bsonx_append_value(&cmp_arr, "0", 1, bson_iter_value(&group_by));
            mf_bsonx_append_value(&cmp_arr, "1", 1, &bounds[i]);
            bson_append_array_end(&cmp, &cmp_arr);
            bson_append_document_end(&arr, &cmp);
            bson_append_array_end(&and, &arr);
            bson_append_document_end(&c, &and);
            mf_bsonx_append_value(&c, "then", 4, &bounds[i - 1]);
            bson_append_document_end(&br, &c);
        }
        bson_append_array_end(&sw, &br);
        bson_append_document_end(&id, &sw);
        bson_append_document_end(&body, &id);
        if (!has_output) {
            BSON_APPEND_DOCUMENT_BEGIN(&body, "count", &acc);
            BSON_APPEND_INT32(&acc, "$sum", 1);
            bson_append_document_end(&body, &acc);
        }
        bson_append_document_end(&g, &body);
        BSON_APPEND_DOCUMENT_BEGIN(&srt, "$sort", &body);
        BSON_APPEND_INT32(&body, "_id", 1);
        bson_append_document_end(&srt, &body);
        bson_iter_t gi, si;
        bson_iter_init(&gi, &g);
        bson_iter_next(&gi);
        bson_iter_init(&si, &srt);
        bson_iter_next(&si);
        rc = mfi_parse_group(&gi, agg, out, err);
        if (rc == 0)
            rc = mfi_parse_sort(&si, agg, out, err);
        bson_destroy(&g);
        bson_destroy(&srt);
    }
    for (size_t i = 0; i < nb; i++)
        mfi_val_free(&bounds[i]);
    free(bounds);
    mfi_val_free(&def);
    return rc;
}

/* ----------------------------------------------------------- $bucketAuto */

static const double r5[] = {10, 16, 25, 40, 63};
static const double r10[] = {100, 125, 160, 200, 250, 315, 400, 500, 630, 800};
static const double r20[] = {100, 112, 125, 140, 160, 180, 200, 224, 250, 280,
                             315, 355, 400, 450, 500, 560, 630, 710, 800, 900};
static const double r40[] = {100, 106, 112, 118, 125, 132, 140, 150, 160, 170, 180, 190, 200,
                             212, 224, 236, 250, 265, 280, 300, 315, 355, 375, 400, 425, 450,
                             475, 500, 530, 560, 600, 630, 670, 710, 750, 800, 850, 900, 950};
static const double r80[] = {103, 109, 115, 122, 128, 136, 145, 155, 165, 175, 185, 195, 206, 218,
                             230, 243, 258, 272, 290, 307, 325, 345, 365, 387, 412, 437, 462, 487,
                             515, 545, 575, 615, 650, 690, 730, 775, 825, 875, 925, 975};
static const double s125[] = {10, 20, 50};
static const double e6[] = {10, 15, 22, 33, 47, 68};
static const double e12[] = {10, 12, 15, 18, 22, 27, 33, 39, 47, 56, 68, 82};
static const double e24[] = {10, 11, 12, 13, 15, 16, 18, 20, 22, 24, 27, 30,
                             33, 36, 39, 43, 47, 51, 56, 62, 68, 75, 82, 91};
static const double e48[] = {100, 105, 110, 115, 121, 127, 133, 140, 147, 154, 162, 169,
                             178, 187, 196, 205, 215, 226, 237, 249, 261, 274, 287, 301,
                             316, 332, 348, 365, 383, 402, 422, 442, 464, 487, 511, 536,
                             562, 590, 619, 649, 681, 715, 750, 787, 825, 866, 909, 953};
static const double e96[] = {100, 102, 105, 107, 110, 113, 115, 118, 121, 124, 127, 130, 133, 137,
                             140, 143, 147, 150, 154, 158, 162, 165, 169, 174, 178, 182, 187, 191,
                             196, 200, 205, 210, 215, 221, 226, 232, 237, 243, 249, 255, 261, 267,
                             274, 280, 287, 294, 301, 309, 316, 324, 332, 340, 348, 357, 365, 374,
                             383, 392, 402, 412, 422, 432, 442, 453, 464, 475, 487, 499, 511, 523,
                             536, 549, 562, 576, 590, 604, 619, 634, 649, 665, 681, 698, 715, 732,
                             750, 768, 787, 806, 825, 845, 866, 887, 909, 931, 953, 976};
static const double e192[] = {
    100, 101, 102, 104, 105, 106, 107, 109, 110, 111, 113, 114, 115, 117, 118, 120, 121, 123,
    124, 126, 127, 129, 130, 132, 133, 135, 137, 138, 140, 142, 143, 145, 147, 149, 150, 152,
    154, 156, 158, 160, 162, 164, 165, 167, 169, 172, 174, 176, 178, 180, 182, 184, 187, 189,
    191, 193, 196, 198, 200, 203, 205, 208, 210, 213, 215, 218, 221, 223, 226, 229, 232, 234,
    237, 240, 243, 246, 249, 252, 255, 258, 261, 264, 267, 271, 274, 277, 280, 284, 287, 291,
    294, 298, 301, 305, 309, 312, 316, 320, 324, 328, 332, 336, 340, 344, 348, 352, 357, 361,
    365, 370, 374, 379, 383, 388, 392, 397, 402, 407, 412, 417, 422, 427, 432, 437, 442, 448,
    453, 459, 464, 470, 475, 481, 487, 493, 499, 505, 511, 517, 523, 530, 536, 542, 549, 556,
    562, 569, 576, 583, 590, 597, 604, 612, 619, 626, 634, 642, 649, 657, 665, 673, 681, 690,
    698, 706, 715, 723, 732, 741, 750, 759, 768, 777, 787, 796, 806, 816, 825, 835, 845, 856,
    866, 876, 887, 898, 909, 920, 931, 942, 953, 965, 976, 988};

typedef struct series {
    const char *name;
    const double *v;         /* NULL: powers of two */
    size_t n;
} series;

#define S(name, a) {name, a, sizeof a / sizeof a[0]}
static const series all_series[] = {
    S("R5", r5),   S("R10", r10), S("R20", r20), S("R40", r40),   S("R80", r80),
    S("1-2-5", s125), S("E6", e6), S("E12", e12), S("E24", e24), S("E48", e48),
    S("E96", e96), S("E192", e192), {"POWERSOF2", NULL, 0},
};
#undef S

/* The decimal path of mongod's rounders: the series as Decimal128(double)
 * (15 digits, so 16 is 16.0000000000000) scaled by powers of ten kept in
 * decimal, and $pow(2, exp) computed in decimal for POWERSOF2. */
static void round_dec(const series *s, mf_dec x, bool up, val *out)
{
    if (s->v == NULL) {
        double l2 = mf_dec_to_double(mf_dec_log(x, mf_dec_from_int64(2)), NULL);
        int exp = up ? (int)(floor(l2) + 1.0) : (int)(ceil(l2) - 1.0);
        set_dec(out, mf_dec_pow(mf_dec_from_int64(2), mf_dec_from_int64(exp)));
        return;
    }
    size_t n = s->n;
    mf_dec ten = mf_dec_from_int64(10), m = mf_dec_from_int64(1);
    mf_dec first = mf_dec_from_double(s->v[0]), last = mf_dec_from_double(s->v[n - 1]);
#define AT(e, mult) mf_dec_mul((e), (mult))
    if (up) {
        while (mf_dec_cmp(x, AT(last, m)) >= 0)
            m = mf_dec_mul(m, ten);
        while (mf_dec_cmp(x, AT(first, m)) < 0) {
            mf_dec prev_min = AT(first, m);
            m = mf_dec_div(m, ten);
            if (mf_dec_cmp(x, AT(last, m)) >= 0) {
                set_dec(out, prev_min);
                return;
            }
        }
        size_t i = 0;
        while (i < n - 1 && !(mf_dec_cmp(x, AT(mf_dec_from_double(s->v[i]), m)) < 0))
            i++;
        set_dec(out, AT(mf_dec_from_double(s->v[i]), m));
        return;
    }
    while (mf_dec_cmp(x, AT(first, m)) <= 0)
        m = mf_dec_div(m, ten);
    while (mf_dec_cmp(x, AT(last, m)) > 0) {
        mf_dec prev_max = AT(last, m);
        m = mf_dec_mul(m, ten);
        if (mf_dec_cmp(x, AT(first, m)) <= 0) {
            set_dec(out, prev_max);
            return;
        }
    }
    size_t i = 0;
    while (i < n && mf_dec_cmp(AT(mf_dec_from_double(s->v[i]), m), x) < 0)
        i++;
    set_dec(out, AT(mf_dec_from_double(s->v[i - 1]), m));
#undef AT
}

/* Round `x` (a non-negative number) up (strictly above) or down (strictly
 * below) to the series, as mongod's rounders. */
static int round_to(const series *s, const val *x, bool up, val *out, mf_error *err)
{
    bool p2 = s->v == NULL;
    if (!is_num(x))
        return mf_error_set(err, p2 ? 40265 : 40262,
                            "A granularity rounder can only round numeric values, but found type: "
                            "%s",
                            mf_bsonx_type_alias(x->value_type));
    double d = as_double(x);
    if (isnan(d))
        return mf_error_set(err, p2 ? 40266 : 40263, "A granularity rounder cannot round NaN");
    if (d < 0)
        return mf_error_set(err, p2 ? 40267 : 40268,
                            "A granularity rounder can only round non-negative numbers");
    if (d == 0) {
        mf_bsonx_value_copy(x, out);
        return 0;
    }
    /* (mongod 7.0 loops forever here; later versions answer 11785400) */
    if (isinf(d))
        return mf_error_set(err, 11785400, "A granularity rounder can only round finite numbers");
    if (x->value_type == BSON_TYPE_DECIMAL128) {
        round_dec(s, x->value.v_decimal128, up, out);
        return 0;
    }
    if (p2) {
        int exp;
        if (x->value_type == BSON_TYPE_DOUBLE) {
            exp = up ? (int)(floor(log2(d)) + 1.0) : (int)(ceil(log2(d)) - 1.0);
        } else {
            uint64_t n = (uint64_t)as_long(x);
            int lz = __builtin_clzll(n), tz = __builtin_ctzll(n);
            exp = up ? 63 - lz + 1 : (lz + tz == 63 ? 63 - lz - 1 : 63 - lz);
        }
        /* $pow(2, exp): an int or long for exp >= 0, a double below */
        if (exp < 0)
            set_double(out, ldexp(1.0, exp));
        else if (exp < 63)
            set_int_or_long(out, (int64_t)1 << exp);
        else
            set_double(out, ldexp(1.0, exp));
        return 0;
    }
    const double *v = s->v;
    size_t n = s->n;
    double m = 1.0;
    if (up) {
        while (d >= v[n - 1] * m)
            m *= 10.0;
        while (d < v[0] * m) {
            double prev_min = v[0] * m;
            m /= 10.0;
            if (d >= v[n - 1] * m) {
                set_double(out, prev_min);
                return 0;
            }
        }
        size_t i = 0;
        while (i < n && !(d < v[i] * m))
            i++;
        set_double(out, v[i] * m);
        return 0;
    }
    while (d <= v[0] * m)
        m /= 10.0;
    while (d > v[n - 1] * m) {
        double prev_max = v[n - 1] * m;
        m *= 10.0;
        if (d <= v[0] * m) {
            set_double(out, prev_max);
            return 0;
        }
    }
    size_t i = 0;
    while (i < n && v[i] * m < d)
        i++;
    set_double(out, v[i - 1] * m);
    return 0;
}

/* The sorter's records: key = the encoded groupBy value (input order
 * breaks ties), document = {k: <groupBy value>, p: <input position>,
 * d: <the input document>, m: <its metadata, when it has some>} (the
 * accumulators read it, as mongod's sorted Documents keep it). */
typedef struct {
    mfi_stage base;
    mf_expr *group_by;
    int64_t nbuckets;
    const series *gran;
    mfi_acc *accs;
    size_t nacc;
    bool done;
    mf_sorter *sorter;
    int64_t n;               /* input documents */
    /* the first record not yet in a bucket (has_next false at the end) */
    bool has_next;
    val next_key;
    bson_t *next_doc;
    mf_meta next_meta;
    int64_t next_pos;
    int64_t bucket_no;
    val prev_max;            /* the previous bucket's max (granularity) */
    int64_t approx;
} bauto_stage;

/* The groupBy value of `d` (missing -> null) into *k; granularity checks. */
static int bauto_key(bauto_stage *b, const bson_t *d, val *k, mf_error *err)
{
    int rc = mfi_agg_eval(b->base.agg, b->group_by, d, k, err);
    if (rc)
        return rc;
    if (b->gran) {
        if (!is_num(k))
            rc = mf_error_set(err, 40258,
                              "$bucketAuto can specify a 'granularity' with numeric "
                              "boundaries only, but found a value with type: %s",
                              mf_bsonx_type_alias(k->value_type));
        else if (isnan(as_double(k)))
            rc = mf_error_set(err, 40259,
                              "$bucketAuto can specify a 'granularity' with numeric "
                              "boundaries only, but found a NaN");
        else if (as_double(k) < 0)
            rc = mf_error_set(err, 40260,
                              "$bucketAuto can specify a 'granularity' with non-negative "
                              "numbers only, but found a negative number");
        if (rc) {
            mfi_val_free(k);
            return rc;
        }
    }
    if (k->value_type == BSON_TYPE_EOD)
        set_null(k);
    return 0;
}

/* Add one input document to the sorter. */
static int bauto_add(bauto_stage *b, const bson_t *d, mf_buf *key, mf_error *err)
{
    val k;
    int rc = bauto_key(b, d, &k, err);
    if (rc)
        return rc;
    bson_t rec = BSON_INITIALIZER;
    bson_iter_t it;
    mf_bsonx_append_value(&rec, "k", 1, &k);
    mfi_val_free(&k);
    BSON_APPEND_INT64(&rec, "p", b->n);
    BSON_APPEND_DOCUMENT(&rec, "d", d);
    if (b->base.in_meta && b->base.in_meta->has) {
        bson_t m;
        BSON_APPEND_DOCUMENT_BEGIN(&rec, "m", &m);
        mf_meta_to_bson(b->base.in_meta, &m);
        bson_append_document_end(&rec, &m);
    }
    key->len = 0;
    bson_iter_init_find(&it, &rec, "k");
    if (mf_bsonx_key_append_coll(key, &it, false, b->base.agg->collator) != 0)
        rc = oom(err);
    if (rc == 0)
        rc = mf_sorter_add(b->sorter, key->data, key->len, bson_get_data(&rec), rec.len, err);
    bson_destroy(&rec);
    if (rc == 0)
        b->n++;
    return rc;
}

/* Move to the next sorted record (has_next false at the end). */
static int bauto_advance(bauto_stage *b, mf_error *err)
{
    mfi_val_free(&b->next_key);
    if (b->next_doc) {
        bson_destroy(b->next_doc);
        b->next_doc = NULL;
    }
    const uint8_t *data;
    size_t len;
    bool valid;
    int rc = mf_sorter_next(b->sorter, &data, &len, &valid, err);
    b->has_next = false;
    if (rc || !valid)
        return rc;
    bson_t rec;
    bson_iter_t it;
    if (!bson_init_static(&rec, data, len) || !bson_iter_init(&it, &rec))
        return mf_error_set(err, MF_InternalError, "$bucketAuto: corrupt sorter record");
    bool has_k = false, has_d = false;
    mf_meta_clear(&b->next_meta);
    while (bson_iter_next(&it)) {
        const char *f = bson_iter_key(&it);
        if (strcmp(f, "k") == 0) {
            mf_bsonx_value_copy(bson_iter_value(&it), &b->next_key);
            has_k = true;
        } else if (strcmp(f, "p") == 0) {
            b->next_pos = bson_iter_int64(&it);
        } else if (strcmp(f, "d") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *dd;
            uint32_t dl;
            bson_iter_document(&it, &dl, &dd);
            if (!(b->next_doc = bson_new_from_data(dd, dl)))
                return oom(err);
            has_d = true;
        } else if (strcmp(f, "m") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            const uint8_t *md;
            uint32_t ml;
            bson_iter_document(&it, &ml, &md);
            if (mf_meta_from_bson(&b->next_meta, md, ml) != 0)
                return mf_error_set(err, MF_InternalError, "$bucketAuto: corrupt sorter record");
        }
    }
    if (!has_k || !has_d)
        return mf_error_set(err, MF_InternalError, "$bucketAuto: corrupt sorter record");
    b->has_next = true;
    return 0;
}

/* Sort the whole input through the sorter (spilling with allowDiskUse),
 * then position on the first record. */
static int bauto_read(bauto_stage *b, mf_error *err)
{
    mfi_stage *s = &b->base;
    mfi_agg *agg = s->agg;
    if (agg->allow_disk_use && agg->tmpdir)
        (void)mkdir(agg->tmpdir, 0700);
    /* without allowDiskUse the sorter fails past the limit with 292 "Sort
     * exceeded memory limit of N bytes, but did not opt in to external
     * sorting.", as mongod's $bucketAuto (its Sorter says the same) */
    if (!(b->sorter = mf_sorter_new(agg->bucket_auto_max_bytes, agg->allow_disk_use, agg->tmpdir,
                                    0)))
        return oom(err);
    mf_buf key = {0};
    int rc = 0;
    for (;;) {
        bson_t d;
        bool eof;
        if ((rc = mfi_stage_pull(s, &d, &eof, err)) != 0 || eof)
            break;
        rc = bauto_add(b, &d, &key, err);
        bson_destroy(&d);
        if (rc)
            break;
    }
    mf_buf_free(&key);
    if (rc == 0)
        rc = mf_sorter_finish(b->sorter, err);
    if (rc == 0)
        rc = bauto_advance(b, err);
    b->approx = (int64_t)llround((double)b->n / (double)b->nbuckets);
    if (b->approx < 1)
        b->approx = 1;
    return rc;
}

/* Accumulate the current record into the bucket, make its key the
 * bucket's max, and advance. */
static int bucket_add(bauto_stage *b, mfi_acc_state **st, val *max, mf_error *err)
{
    bson_t root = BSON_INITIALIZER;
    int rc = 0;
    /* the accumulators read the document's own metadata */
    b->base.agg->vars.meta = b->next_meta.has ? &b->next_meta : NULL;
    for (size_t a = 0; rc == 0 && a < b->nacc; a++)
        rc = mfi_acc_add(&b->accs[a], st[a], b->next_doc, &root, (uint64_t)b->next_pos,
                         b->base.agg, err);
    bson_destroy(&root);
    mfi_val_free(max);
    mf_bsonx_value_copy(&b->next_key, max);
    return rc ? rc : bauto_advance(b, err);
}

static int bauto_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    bauto_stage *b = (bauto_stage *)s;
    int rc = 0;
    if (!b->done) {
        b->done = true;
        if ((rc = bauto_read(b, err)) != 0)
            return rc;
    }
    if (b->bucket_no >= b->nbuckets || !b->has_next) {
        *eof = true;
        return 0;
    }
    b->bucket_no++;
    bool last = b->bucket_no == b->nbuckets;
    mfi_acc_state **st = calloc(b->nacc ? b->nacc : 1, sizeof *st);
    if (!st)
        return oom(err);
    for (size_t a = 0; a < b->nacc; a++)
        if (!(st[a] = mfi_acc_state_new()))
            rc = oom(err);
    val min = {.value_type = BSON_TYPE_EOD}, max = {.value_type = BSON_TYPE_EOD};
    if (rc == 0) {
        if (b->gran && b->prev_max.value_type != BSON_TYPE_EOD)
            mf_bsonx_value_copy(&b->prev_max, &min);
        else if (b->gran)
            rc = round_to(b->gran, &b->next_key, false, &min, err);
        else
            mf_bsonx_value_copy(&b->next_key, &min);
    }
    int64_t taken = 0;
    while (rc == 0 && b->has_next && (taken < b->approx || last)) {
        rc = bucket_add(b, st, &max, err);
        taken++;
    }
    if (rc == 0 && b->gran) {
        val bound;
        if ((rc = round_to(b->gran, &max, true, &bound, err)) == 0) {
            while (rc == 0 && b->has_next &&
                   (mfi_val_cmp(&bound, &b->next_key, NULL) > 0 ||
                    mfi_val_cmp(&max, &b->next_key, NULL) == 0))
                rc = bucket_add(b, st, &max, err);
            if (rc == 0) {
                mfi_val_free(&max);
                if (as_double(&bound) == 0.0 && b->has_next) {
                    rc = round_to(b->gran, &b->next_key, false, &max, err);
                    mfi_val_free(&bound);
                } else {
                    max = bound;
                }
            } else {
                mfi_val_free(&bound);
            }
        }
        if (rc == 0) {
            mfi_val_free(&b->prev_max);
            mf_bsonx_value_copy(&max, &b->prev_max);
        }
    } else if (rc == 0) {
        while (rc == 0 && b->has_next &&
               mfi_val_cmp(&max, &b->next_key, b->base.agg->collator) == 0)
            rc = bucket_add(b, st, &max, err);
        if (rc == 0 && b->has_next) {
            mfi_val_free(&max);
            mf_bsonx_value_copy(&b->next_key, &max);
        }
    }
    if (rc == 0) {
        bson_t id;
        bson_init(out);
        BSON_APPEND_DOCUMENT_BEGIN(out, "_id", &id);
        mf_bsonx_append_value(&id, "min", 3, &min);
        mf_bsonx_append_value(&id, "max", 3, &max);
        bson_append_document_end(out, &id);
        for (size_t a = 0; rc == 0 && a < b->nacc; a++) {
            val v;
            if ((rc = mfi_acc_result(&b->accs[a], st[a], &v, err)) != 0)
                break;
            if (v.value_type == BSON_TYPE_EOD)
                set_null(&v);
            mf_bsonx_append_value(out, b->accs[a].field, -1, &v);
            mfi_val_free(&v);
        }
        if (rc)
            bson_destroy(out);
    }
    for (size_t a = 0; a < b->nacc; a++)
        mfi_acc_state_free(st[a]);
    free(st);
    mfi_val_free(&min);
    mfi_val_free(&max);
    *eof = false;
    return rc;
}

static void bauto_free(mfi_stage *s)
{
    bauto_stage *b = (bauto_stage *)s;
    mf_sorter_free(b->sorter);
    mfi_val_free(&b->next_key);
    if (b->next_doc)
        bson_destroy(b->next_doc);
    mf_meta_clear(&b->next_meta);
    mf_expr_free(b->group_by);
    for (size_t a = 0; a < b->nacc; a++)
        mfi_acc_clear(&b->accs[a]);
    free(b->accs);
    mfi_val_free(&b->prev_max);
}

static const mfi_stage_ops bauto_ops = {"$bucketAuto", bauto_next, NULL, bauto_free, false,
                                        MFI_DEPS_EXHAUSTIVE_ALL};

int mfi_parse_bucket_auto(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                          mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 40240,
                            "The argument to $bucketAuto must be an object, but found type: %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    bauto_stage *b = mfi_stage_new(out, &bauto_ops, sizeof *b, it, agg, err);
    if (!b)
        return MF_InternalError;
    b->prev_max.value_type = BSON_TYPE_EOD;
    b->next_key.value_type = BSON_TYPE_EOD;
    bson_iter_t f;
    bool has_buckets = false;
    char shown[512];
    int rc = 0;
    bson_iter_recurse(it, &f);
    while (rc == 0 && bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "groupBy") == 0) {
            bool ok = false;
            if (BSON_ITER_HOLDS_DOCUMENT(&f)) {
                bson_iter_t g;
                bson_iter_recurse(&f, &g);
                ok = bson_iter_next(&g) && bson_iter_key(&g)[0] == '$';
            } else if (BSON_ITER_HOLDS_UTF8(&f)) {
                uint32_t l;
                const char *sv = bson_iter_utf8(&f, &l);
                ok = l >= 2 && sv[0] == '$';
            }
            if (!ok) {
                elem_str(&f, shown, sizeof shown);
                return mf_error_set(err, 40239,
                                    "The $bucketAuto 'groupBy' field must be defined as a "
                                    "$-prefixed path or an expression object, but found: %s",
                                    shown);
            }
            mf_expr_free(b->group_by);
            b->group_by = NULL;
            rc = mfi_agg_expr(agg, &f, &b->group_by, err);
        } else if (strcmp(k, "buckets") == 0) {
            if (!BSON_ITER_HOLDS_NUMBER(&f) && !BSON_ITER_HOLDS_DECIMAL128(&f))
                return mf_error_set(err, 40241,
                                    "The $bucketAuto 'buckets' field must be a numeric value, but "
                                    "found type: %s",
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            val v = *bson_iter_value(&f);
            if (!mfi_integral32(&v)) {
                char num[64];
                snprintf(num, sizeof num, "%g", as_double(&v));
                return mf_error_set(err, 40242,
                                    "The $bucketAuto 'buckets' field must be representable as a "
                                    "32-bit integer, but found %s",
                                    num);
            }
            b->nbuckets = (int64_t)as_double(&v);
            has_buckets = true;
        } else if (strcmp(k, "output") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                return mf_error_set(err, 40244,
                                    "The $bucketAuto 'output' field must be an object, but found "
                                    "type: %s",
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            bson_iter_t o;
            size_t n = 0;
            bson_iter_recurse(&f, &o);
            while (bson_iter_next(&o))
                n++;
            for (size_t a = 0; a < b->nacc; a++)
                mfi_acc_clear(&b->accs[a]);
            free(b->accs);
            b->nacc = 0;
            if (!(b->accs = calloc(n ? n : 1, sizeof *b->accs)))
                return oom(err);
            bson_iter_recurse(&f, &o);
            while (rc == 0 && bson_iter_next(&o)) {
                rc = mfi_acc_parse(&o, agg, &b->accs[b->nacc], err);
                if (rc == 0 || b->accs[b->nacc].field)
                    b->nacc++;
            }
        } else if (strcmp(k, "granularity") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&f))
                return mf_error_set(err, 40261,
                                    "The $bucketAuto 'granularity' field must be a string, but "
                                    "found type: %s",
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            const char *g = bson_iter_utf8(&f, NULL);
            b->gran = NULL;
            for (size_t i = 0; i < sizeof all_series / sizeof all_series[0]; i++)
                if (strcmp(all_series[i].name, g) == 0)
                    b->gran = &all_series[i];
            if (!b->gran)
                return mf_error_set(err, 40257, "Unknown rounding granularity '%s'", g);
        } else {
            return mf_error_set(err, 40245, "Unrecognized option to $bucketAuto: %s", k);
        }
    }
    if (rc)
        return rc;
    if (!b->group_by || !has_buckets)
        return mf_error_set(err, 40246, "$bucketAuto requires 'groupBy' and 'buckets' to be specified");
    if (b->nbuckets <= 0)
        return mf_error_set(err, 40243,
                            "The $bucketAuto 'buckets' field must be greater than 0, but found: "
                            "%lld",
                            (long long)b->nbuckets);
    if (b->nacc == 0) {
        bson_t d = BSON_INITIALIZER, acc;
        bson_iter_t di;
        BSON_APPEND_DOCUMENT_BEGIN(&d, "count", &acc);
        BSON_APPEND_INT32(&acc, "$sum", 1);
        bson_append_document_end(&d, &acc);
        bson_iter_init(&di, &d);
        bson_iter_next(&di);
        free(b->accs);
        if (!(b->accs = calloc(1, sizeof *b->accs)))
            rc = oom(err);
        if (rc == 0 && (rc = mfi_acc_parse(&di, agg, &b->accs[0], err)) == 0)
            b->nacc = 1;
        bson_destroy(&d);
    }
    return rc;
}

/* --------------------------------------------------------------- $redact */

typedef struct {
    mfi_stage base;
    mf_expr *e;
    bson_t vars_doc;         /* the command's let values + DESCEND, PRUNE, KEEP */
    mf_expr_vars vars;
} redact_stage;

enum { R_KEEP, R_PRUNE, R_DESCEND };

static int judge(redact_stage *r, const bson_t *root, const bson_t *doc, int *what,
                 mf_error *err)
{
    val v;
    int rc = mf_expr_eval_value_at(r->e, root, doc, &r->vars, &v, err);
    if (rc)
        return rc;
    const char *s = v.value_type == BSON_TYPE_UTF8 ? v.value.v_utf8.str : "";
    if (v.value_type == BSON_TYPE_UTF8 && strcmp(s, "keep") == 0)
        *what = R_KEEP;
    else if (v.value_type == BSON_TYPE_UTF8 && strcmp(s, "prune") == 0)
        *what = R_PRUNE;
    else if (v.value_type == BSON_TYPE_UTF8 && strcmp(s, "descend") == 0)
        *what = R_DESCEND;
    else {
        char shown[256];
        if (v.value_type == BSON_TYPE_EOD)
            snprintf(shown, sizeof shown, "MISSING");
        else
            mfi_val_str(&v, shown, sizeof shown);
        rc = mf_error_set(err, 17053,
                          "$redact's expression should not return anything aside from the "
                          "variables $$KEEP, $$DESCEND, and $$PRUNE, but returned %s",
                          shown);
    }
    mfi_val_free(&v);
    return rc;
}

static int redact_doc(redact_stage *r, const bson_t *root, const bson_t *doc, bson_t *out,
                      bool *kept, mf_error *err);

/* The elements of an array, documents redacted (pruned ones dropped). */
static int redact_array(redact_stage *r, const bson_t *root, const bson_iter_t *arr_it,
                        bson_t *out, mf_error *err)
{
    bson_iter_t e;
    uint32_t i = 0;
    int rc = 0;
    bson_iter_recurse(arr_it, &e);
    while (rc == 0 && bson_iter_next(&e)) {
        char kb[16];
        const char *key;
        size_t kl = mf_uint32_to_key(i, &key, kb, sizeof kb);
        if (BSON_ITER_HOLDS_DOCUMENT(&e)) {
            uint32_t l;
            const uint8_t *d;
            bson_t sub, res;
            bool kept;
            bson_iter_document(&e, &l, &d);
            bson_init_static(&sub, d, l);
            bson_init(&res);
            if ((rc = redact_doc(r, root, &sub, &res, &kept, err)) == 0 && kept) {
                bson_append_document(out, key, (int)kl, &res);
                i++;
            }
            bson_destroy(&res);
        } else if (BSON_ITER_HOLDS_ARRAY(&e)) {
            bson_t child;
            bson_append_array_begin(out, key, (int)kl, &child);
            rc = redact_array(r, root, &e, &child, err);
            bson_append_array_end(out, &child);
            i++;
        } else {
            mf_bsonx_append_iter(out, key, (int)kl, &e);
            i++;
        }
    }
    return rc;
}

/* Redact `doc` (a part of the input document `root`) into `out`
 * (initialised by the caller); *kept false when pruned. */
static int redact_doc(redact_stage *r, const bson_t *root, const bson_t *doc, bson_t *out,
                      bool *kept, mf_error *err)
{
    int what, rc;
    *kept = false;
    if ((rc = judge(r, root, doc, &what, err)) != 0)
        return rc;
    if (what == R_PRUNE)
        return 0;
    *kept = true;
    if (what == R_KEEP) {
        bson_concat(out, doc);
        return 0;
    }
    bson_iter_t it;
    bson_iter_init(&it, doc);
    while (rc == 0 && bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
            uint32_t l;
            const uint8_t *d;
            bson_t sub, res;
            bool sub_kept;
            bson_iter_document(&it, &l, &d);
            bson_init_static(&sub, d, l);
            bson_init(&res);
            if ((rc = redact_doc(r, root, &sub, &res, &sub_kept, err)) == 0 && sub_kept)
                bson_append_document(out, bson_iter_key(&it), -1, &res);
            bson_destroy(&res);
        } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
            bson_t child;
            bson_append_array_begin(out, bson_iter_key(&it), -1, &child);
            rc = redact_array(r, root, &it, &child, err);
            bson_append_array_end(out, &child);
        } else {
            mf_bsonx_append_iter(out, NULL, 0, &it);
        }
    }
    return rc;
}

static int redact_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    redact_stage *r = (redact_stage *)s;
    for (;;) {
        bson_t d;
        int rc = mfi_stage_pull(s, &d, eof, err);
        if (rc || *eof)
            return rc;
        bool kept;
        bson_init(out);
        rc = redact_doc(r, &d, &d, out, &kept, err);
        bson_destroy(&d);
        if (rc || !kept) {
            bson_destroy(out);
            if (rc)
                return rc;
            continue;
        }
        return 0;
    }
}

static void redact_free(mfi_stage *s)
{
    redact_stage *r = (redact_stage *)s;
    mf_expr_free(r->e);
    bson_destroy(&r->vars_doc);
}

/* mongod's $redact keeps the document's metadata, and its dependency
 * analysis stops at it (no getDependencies of its own) */
static const mfi_stage_ops redact_ops = {"$redact", redact_next, NULL, redact_free, true,
                                         MFI_DEPS_NOT_SUPPORTED};

int mfi_parse_redact(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    redact_stage *r = mfi_stage_new(out, &redact_ops, sizeof *r, it, agg, err);
    if (!r)
        return MF_InternalError;
    bson_init(&r->vars_doc);
    bson_concat(&r->vars_doc, &agg->let_values);
    BSON_APPEND_UTF8(&r->vars_doc, "DESCEND", "descend");
    BSON_APPEND_UTF8(&r->vars_doc, "PRUNE", "prune");
    BSON_APPEND_UTF8(&r->vars_doc, "KEEP", "keep");
    r->vars = agg->vars;
    r->vars.let = &r->vars_doc;
    const char **names = calloc(agg->nlet + 3, sizeof *names);
    if (!names)
        return oom(err);
    for (size_t i = 0; i < agg->nlet; i++)
        names[i] = agg->let_names[i];
    names[agg->nlet] = "DESCEND";
    names[agg->nlet + 1] = "PRUNE";
    names[agg->nlet + 2] = "KEEP";
    int rc = mf_expr_parse(it, names, agg->nlet + 3, &r->e, err);
    free(names);
    return rc;
}
