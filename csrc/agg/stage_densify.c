/*
 * stage_densify.c -- $densify and $fill.
 *
 * $densify desugars as mongod's: {$sort: {<partitionByFields>..., field: 1}}
 * (no partition fields with bounds "full") and the densify stage, whose
 * partition keys compare under the pipeline's collation (as the $sort's
 * do), which
 * reads its sorted input and adds, per partition, documents whose field
 * takes the values of a grid anchored at
 *     explicit bounds [lo, hi]   lo; values in [lo, hi) (hi exclusive)
 *     "full"                     the least value of all; values below the
 *                                greatest value of all
 *     "partition"                the partition's least value; values below
 *                                its greatest
 * that fall strictly between the documents present (a value a document
 * already has is not generated).  Documents whose field is null or missing
 * pass through.  A generated document holds the partition fields and the
 * field, in that order.  Grid values are anchor + k * step (numbers:
 * integer arithmetic while it is exact, as $add; dates: calendar.h's
 * dateAdd of k * step units, UTC).
 *
 * $fill desugars as mongod's document_source_fill.cpp: methods become a
 * $setWindowFields with $locf / $linearFill, values an $addFields with
 * {$ifNull: ["$field", <value>]}.
 */
#include "pipeline_int.h"
#include "calendar.h"
#include "expr_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DENSIFY_DOCS 500000

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

/* -------------------------------------------------------------- $densify */

typedef struct pstate {
    val key;                 /* the partition key document */
    int64_t k;               /* the next grid index to consider */
    bool started;
} pstate;

typedef struct {
    mfi_stage base;
    char *field;
    char **pfields;
    size_t npf;
    enum { BND_FULL, BND_PARTITION, BND_EXPLICIT } bounds;
    val step, lo, hi;        /* lo / hi: explicit bounds */
    int unit;                /* -1: numbers */
    bool done;
    bson_t **out;            /* the result, produced on the first pull */
    mf_meta *metas;          /* each one's metadata: an input document's own,
                                a generated one none (as mongod's) */
    size_t nout, capout, next;
    int64_t generated;
    mf_meta m;               /* the metadata of the document returned last */
} densify_stage;

/* Add `doc` (taken) to the result, with a copy of `meta` (NULL: none). */
static int push_out(densify_stage *d, bson_t *doc, const mf_meta *meta, mf_error *err)
{
    if (!doc)
        return oom(err);
    if (d->nout == d->capout) {
        size_t cap = d->capout ? 2 * d->capout : 64;
        bson_t **v = realloc(d->out, cap * sizeof *v);
        mf_meta *mv = v ? realloc(d->metas, cap * sizeof *mv) : NULL;
        if (v)
            d->out = v;
        if (!v || !mv) {
            bson_destroy(doc);
            return oom(err);
        }
        d->metas = mv;
        d->capout = cap;
    }
    d->metas[d->nout] = (mf_meta){0};
    d->out[d->nout] = doc;
    if (mf_meta_copy(&d->metas[d->nout++], meta) != 0)
        return oom(err);
    return 0;
}

/* anchor + k * step. */
static int grid(const densify_stage *d, const val *anchor, int64_t k, val *out, mf_error *err)
{
    if (d->unit >= 0) {
        int64_t ms, amount;
        if (__builtin_mul_overflow(k, as_long(&d->step), &amount) ||
            !mfi_cal_add(anchor->value.v_datetime, d->unit, amount, &mfi_tz_utc, &ms))
            return mf_error_set(err, MF_BadValue, "$densify date overflow");
        set_date(out, ms);
        return 0;
    }
    if (k == 0) {
        mf_bsonx_value_copy(anchor, out); /* the anchor itself, not anchor + 0 */
        return 0;
    }
    if (anchor->value_type == BSON_TYPE_DECIMAL128 || d->step.value_type == BSON_TYPE_DECIMAL128) {
        /* as mongod's ExpressionAdd: a decimal operand makes the sum decimal */
        mf_dec m = mf_dec_mul(mf_dec_from_int64(k), as_dec(&d->step));
        set_dec(out, mf_dec_add(as_dec(anchor), m));
        return 0;
    }
    bool ints = anchor->value_type != BSON_TYPE_DOUBLE && d->step.value_type != BSON_TYPE_DOUBLE;
    int64_t m, r;
    if (ints && !__builtin_mul_overflow(k, as_long(&d->step), &m) &&
        !__builtin_add_overflow(as_long(anchor), m, &r)) {
        if (anchor->value_type == BSON_TYPE_INT32 && d->step.value_type == BSON_TYPE_INT32)
            set_int_or_long(out, r);
        else
            set_long(out, r);
        return 0;
    }
    set_double(out, as_double(anchor) + (double)k * as_double(&d->step));
    return 0;
}

/* A generated document: the partition key's fields, then the field. */
static int generate(densify_stage *d, const val *key, const val *v, mf_error *err)
{
    if (++d->generated > MAX_DENSIFY_DOCS)
        return mf_error_set(err, 5897900,
                            "Generated %d documents in $densify, which is over the limit of %d. "
                            "Increase the 'internalQueryMaxAllowedDensifyDocs' parameter to "
                            "allow more generated documents",
                            MAX_DENSIFY_DOCS + 1, MAX_DENSIFY_DOCS);
    bson_t base;
    if (key && key->value_type == BSON_TYPE_DOCUMENT)
        bson_init_static(&base, key->value.v_doc.data, key->value.v_doc.data_len);
    else
        bson_init(&base);
    bson_t *doc = bson_new();
    if (doc)
        mfi_doc_set_path(&base, d->field, v, doc);
    bson_destroy(&base);
    return push_out(d, doc, NULL, err);
}

/* Generate the grid values of partition `p` below `limit` (exclusive;
 * NULL: no limit but the explicit upper bound), then skip those up to
 * `upto` (inclusive; NULL: none). */
static int fill_to(densify_stage *d, pstate *p, const val *anchor, const val *limit,
                   const val *upto, mf_error *err)
{
    int rc;
    for (;;) {
        val g;
        if ((rc = grid(d, anchor, p->k, &g, err)) != 0)
            return rc;
        if (d->bounds == BND_EXPLICIT && mfi_val_cmp(&g, &d->hi, NULL) >= 0)
            return 0;
        if (limit && mfi_val_cmp(&g, limit, NULL) < 0) {
            if ((rc = generate(d, d->npf ? &p->key : NULL, &g, err)) != 0)
                return rc;
            p->k++;
            continue;
        }
        if (upto && mfi_val_cmp(&g, upto, NULL) <= 0) {
            p->k++;
            continue;
        }
        return 0;
    }
}

static int partition_key(densify_stage *d, const bson_t *doc, val *key, mf_error *err)
{
    bson_t *k = bson_new();
    if (!k)
        return oom(err);
    for (size_t i = 0; i < d->npf; i++) {
        bson_iter_t it;
        if (mfi_doc_get_path(doc, d->pfields[i], &it)) {
            bson_t *nk = bson_new();
            if (nk)
                mfi_doc_set_path(k, d->pfields[i], bson_iter_value(&it), nk);
            bson_destroy(k);
            if (!(k = nk))
                return oom(err);
        }
    }
    return mfi_set_steal(key, k, BSON_TYPE_DOCUMENT, err); /* frees k */
}

static int check_type(const densify_stage *d, const val *v, mf_error *err)
{
    if (d->unit >= 0 && v->value_type != BSON_TYPE_DATE_TIME)
        return mf_error_set(err, 6053600,
                            "Densify field type must be a date when 'unit' is specified, found %s",
                            mfi_type_name(v));
    if (d->unit < 0 && !is_num(v))
        return mf_error_set(err, 5733201, "Densify field type must be numeric, found %s",
                            mfi_type_name(v));
    return 0;
}

static int densify_run(densify_stage *d, mf_error *err)
{
    mfi_stage *s = &d->base;
    pstate *ps = NULL;
    size_t nps = 0, capps = 0;
    val anchor = {.value_type = BSON_TYPE_EOD}, maxv = {.value_type = BSON_TYPE_EOD};
    int rc = 0;
    pstate *cur = NULL;
    for (;;) {
        bson_t doc;
        bool eof;
        if ((rc = mfi_stage_pull(s, &doc, &eof, err)) != 0 || eof)
            break;
        bson_iter_t fi;
        val v = {.value_type = BSON_TYPE_EOD};
        if (mfi_doc_get_path(&doc, d->field, &fi))
            v = *bson_iter_value(&fi);
        if (nullish(&v)) {
            rc = push_out(d, bson_copy(&doc), s->in_meta, err);
            bson_destroy(&doc);
            if (rc)
                break;
            continue;
        }
        if ((rc = check_type(d, &v, err)) != 0) {
            bson_destroy(&doc);
            break;
        }
        val key = {.value_type = BSON_TYPE_EOD};
        if (d->npf && (rc = partition_key(d, &doc, &key, err)) != 0) {
            bson_destroy(&doc);
            break;
        }
        /* the partition's state: a new one starts at grid index 0 */
        cur = NULL;
        for (size_t i = 0; i < nps; i++)
            if (!d->npf || mfi_val_cmp(&ps[i].key, &key, d->base.agg->collator) == 0)
                cur = &ps[i];
        if (!cur) {
            if (d->bounds != BND_FULL) {
                /* sorted by partition: the previous one is complete */
                for (size_t i = 0; rc == 0 && i < nps; i++)
                    if (d->bounds == BND_EXPLICIT && ps[i].started)
                        rc = fill_to(d, &ps[i], &d->lo, &d->hi, NULL, err);
                for (size_t i = 0; i < nps; i++)
                    mfi_val_free(&ps[i].key);
                nps = 0;
                if (d->bounds == BND_PARTITION) {
                    mfi_val_free(&anchor);
                    anchor.value_type = BSON_TYPE_EOD;
                }
            }
            if (rc == 0 && nps == capps) {
                size_t cap = capps ? 2 * capps : 16;
                pstate *np = realloc(ps, cap * sizeof *np);
                if (!np)
                    rc = oom(err);
                else {
                    ps = np;
                    capps = cap;
                }
            }
            if (rc) {
                mfi_val_free(&key);
                bson_destroy(&doc);
                break;
            }
            cur = &ps[nps++];
            memset(cur, 0, sizeof *cur);
            cur->key = key;
            key.value_type = BSON_TYPE_EOD;
        }
        mfi_val_free(&key);
        if (anchor.value_type == BSON_TYPE_EOD)
            mf_bsonx_value_copy(d->bounds == BND_EXPLICIT ? &d->lo : &v, &anchor);
        if (d->bounds != BND_EXPLICIT) {
            mfi_val_free(&maxv);
            mf_bsonx_value_copy(&v, &maxv);
        }
        cur->started = true;
        rc = fill_to(d, cur, &anchor, &v, &v, err);
        if (rc == 0)
            rc = push_out(d, bson_copy(&doc), s->in_meta, err);
        bson_destroy(&doc);
        if (rc)
            break;
    }
    /* the ends: explicit bounds fill to hi; "full" fills every partition
     * to the greatest value */
    for (size_t i = 0; rc == 0 && i < nps; i++) {
        if (d->bounds == BND_EXPLICIT)
            rc = fill_to(d, &ps[i], &d->lo, &d->hi, NULL, err);
        else if (d->bounds == BND_FULL && d->npf)
            rc = fill_to(d, &ps[i], &anchor, &maxv, NULL, err);
    }
    /* explicit bounds and no documents at all: the whole range (no partitions) */
    if (rc == 0 && d->bounds == BND_EXPLICIT && nps == 0 && !d->npf) {
        pstate p = {.key = {.value_type = BSON_TYPE_EOD}};
        rc = fill_to(d, &p, &d->lo, &d->hi, NULL, err);
    }
    for (size_t i = 0; i < nps; i++)
        mfi_val_free(&ps[i].key);
    free(ps);
    mfi_val_free(&anchor);
    mfi_val_free(&maxv);
    return rc;
}

static int densify_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    densify_stage *d = (densify_stage *)s;
    if (!d->done) {
        d->done = true;
        int rc = densify_run(d, err);
        if (rc)
            return rc;
    }
    if (d->next >= d->nout) {
        *eof = true;
        return 0;
    }
    bson_init(out);
    bson_concat(out, d->out[d->next]);
    bson_destroy(d->out[d->next]);
    mf_meta_clear(&d->m);
    d->m = d->metas[d->next]; /* taken over */
    d->metas[d->next] = (mf_meta){0};
    s->meta = d->m.has ? &d->m : NULL;
    d->out[d->next++] = NULL;
    *eof = false;
    return 0;
}

static void densify_free(mfi_stage *s)
{
    densify_stage *d = (densify_stage *)s;
    for (size_t i = d->next; i < d->nout; i++)
        if (d->out[i])
            bson_destroy(d->out[i]);
    for (size_t i = 0; i < d->nout; i++)
        mf_meta_clear(&d->metas[i]);
    free(d->out);
    free(d->metas);
    mf_meta_clear(&d->m);
    free(d->field);
    for (size_t i = 0; i < d->npf; i++)
        free(d->pfields[i]);
    free(d->pfields);
    mfi_val_free(&d->step);
    mfi_val_free(&d->lo);
    mfi_val_free(&d->hi);
}

static const mfi_stage_ops densify_ops = {"$densify", densify_next, NULL, densify_free, false,
                                          MFI_DEPS_SEE_NEXT};

/* A FieldPath argument (no "$"): checked as mongod's FieldPath. */
static int plain_path(const char *s, char **out, mf_error *err)
{
    if (!*s)
        return mf_error_set(err, 40352, "FieldPath cannot be constructed with empty string");
    char *d = bson_strdup_printf("$%s", s);
    int rc = mfi_agg_field_path(d, out, err);
    bson_free(d);
    return rc;
}

static int parse_range(densify_stage *d, const bson_iter_t *it, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field '$densify.range' is the wrong type '%s', expected type "
                            "'object'",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_t f, step_it, unit_it, bounds_it;
    bool has_step = false, has_unit = false, has_bounds = false;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "step") == 0) {
            step_it = f;
            has_step = true;
        } else if (strcmp(k, "unit") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&f))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field '$densify.range.unit' is the wrong type '%s', "
                                    "expected type 'string'",
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            unit_it = f;
            has_unit = true;
        } else if (strcmp(k, "bounds") == 0) {
            bounds_it = f;
            has_bounds = true;
        } else {
            return mf_error_set(err, 40415, "BSON field '$densify.range.%s' is an unknown field.",
                                k);
        }
    }
    if (!has_step)
        return mf_error_set(err, 40414,
                            "BSON field '$densify.range.step' is missing but a required field");
    if (!has_bounds)
        return mf_error_set(err, 40414,
                            "BSON field '$densify.range.bounds' is missing but a required field");
    if (!BSON_ITER_HOLDS_NUMBER(&step_it) && !BSON_ITER_HOLDS_DECIMAL128(&step_it))
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field '$densify.range.step' is the wrong type '%s', expected "
                            "types '[long, int, decimal, double']",
                            mf_bsonx_type_alias(bson_iter_type(&step_it)));
    mf_bsonx_value_copy(bson_iter_value(&step_it), &d->step);
    if (!(as_double(&d->step) > 0))
        return mf_error_set(err, 5733401,
                            "The step parameter in a range statement must be a strictly positive "
                            "numeric value");
    d->unit = -1;
    if (has_unit) {
        if (as_double(&d->step) != floor(as_double(&d->step)))
            return mf_error_set(err, 6586400,
                                "The step parameter in a range statement must be a whole number "
                                "when densifying a date range");
        const char *name = bson_iter_utf8(&unit_it, NULL);
        int rc = mfi_cal_unit_parse(name, strlen(name), &d->unit, err);
        if (rc)
            return rc;
    }
    if (BSON_ITER_HOLDS_ARRAY(&bounds_it)) {
        bson_iter_t e;
        val b[3];
        int n = 0;
        bson_iter_recurse(&bounds_it, &e);
        while (n < 3 && bson_iter_next(&e))
            b[n++] = *bson_iter_value(&e);
        if (n != 2)
            return mf_error_set(err, 5733403,
                                "A bounding array in a range statement must have exactly two "
                                "elements");
        if (mfi_val_cmp(&b[0], &b[1], NULL) > 0)
            return mf_error_set(err, 5733402,
                                "A bounding array must be an ascending array of either two dates "
                                "or two numbers");
        if (is_num(&b[0])) {
            if (has_unit)
                return mf_error_set(err, 5733409, "Numeric bounds may not have unit parameter");
            if (!is_num(&b[1]))
                return mf_error_set(err, 5733406,
                                    "A bounding array must contain either both dates or both "
                                    "numeric types");
            if (b[0].value_type != b[1].value_type || b[0].value_type != d->step.value_type)
                return mf_error_set(err, 5876900,
                                    "Upper bound, lower bound, and step must all have the same "
                                    "type");
        } else if (b[0].value_type == BSON_TYPE_DATE_TIME) {
            if (b[1].value_type != BSON_TYPE_DATE_TIME)
                return mf_error_set(err, 5733405,
                                    "A bounding array must contain either both dates or both "
                                    "numeric types");
            if (!has_unit)
                return mf_error_set(err, 5733410, "A bounding array of dates must specify a unit");
        } else {
            return mf_error_set(err, 5946800, "Explicit bounds must be numeric or dates");
        }
        mf_bsonx_value_copy(&b[0], &d->lo);
        mf_bsonx_value_copy(&b[1], &d->hi);
        d->bounds = BND_EXPLICIT;
        return 0;
    }
    if (BSON_ITER_HOLDS_UTF8(&bounds_it)) {
        const char *s = bson_iter_utf8(&bounds_it, NULL);
        if (strcmp(s, "full") == 0)
            d->bounds = BND_FULL;
        else if (strcmp(s, "partition") == 0)
            d->bounds = BND_PARTITION;
        else
            return mf_error_set(err, 5946802, "Bounds string must either be 'full' or 'partition'");
        return 0;
    }
    return mf_error_set(err, 5733404,
                        "The bounds in a range statement must be the string 'full', "
                        "'partition', or an ascending array of two numbers or two dates");
}

static bool path_prefix(const char *a, const char *b)
{
    /* mongod compares the strings (starts_with), not path components */
    return strncmp(b, a, strlen(a)) == 0;
}

int mfi_parse_densify(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_FailedToParse,
                            "The $densify stage specification must be an object, found %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_t f, field_it, pf_it, range_it;
    bool has_field = false, has_pf = false, has_range = false;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "field") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&f))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field '$densify.field' is the wrong type '%s', expected "
                                    "type 'string'",
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            field_it = f;
            has_field = true;
        } else if (strcmp(k, "partitionByFields") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&f))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field '$densify.partitionByFields' is the wrong type "
                                    "'%s', expected type 'array'",
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            pf_it = f;
            has_pf = true;
        } else if (strcmp(k, "range") == 0) {
            range_it = f;
            has_range = true;
        } else {
            return mf_error_set(err, 40415, "BSON field '$densify.%s' is an unknown field.", k);
        }
    }
    if (!has_field)
        return mf_error_set(err, 40414, "BSON field '$densify.field' is missing but a required field");
    if (!has_range)
        return mf_error_set(err, 40414, "BSON field '$densify.range' is missing but a required field");
    /* the sort goes first; the stage is appended after it */
    densify_stage tmp;
    memset(&tmp, 0, sizeof tmp);
    int rc = parse_range(&tmp, &range_it, err);
    const char *field = bson_iter_utf8(&field_it, NULL);
    char *fpath = NULL;
    char **pf = NULL;
    size_t npf = 0;
    if (rc == 0)
        rc = plain_path(field, &fpath, err);
    if (rc == 0 && has_pf) {
        bson_iter_t e;
        size_t n = 0;
        bson_iter_recurse(&pf_it, &e);
        while (bson_iter_next(&e))
            n++;
        if (n && !(pf = calloc(n, sizeof *pf)))
            rc = oom(err);
        bson_iter_recurse(&pf_it, &e);
        while (rc == 0 && bson_iter_next(&e)) {
            if (!BSON_ITER_HOLDS_UTF8(&e)) {
                rc = mf_error_set(err, MF_TypeMismatch,
                                  "BSON field '$densify.partitionByFields.%s' is the wrong type "
                                  "'%s', expected type 'string'",
                                  bson_iter_key(&e), mf_bsonx_type_alias(bson_iter_type(&e)));
                break;
            }
            const char *p = bson_iter_utf8(&e, NULL);
            if (path_prefix(field, p))
                rc = mf_error_set(err, 8993000,
                                  "partitionByFields '%s' cannot include field '%s' that is being "
                                  "densified.",
                                  p, field);
            else if (path_prefix(p, field))
                rc = mf_error_set(err, 9554500,
                                  "field '%s' that is being densified cannot include "
                                  "partitionByFields '%s'.",
                                  field, p);
            else
                rc = plain_path(p, &pf[npf], err);
            if (rc == 0)
                npf++;
        }
    }
    if (rc == 0 && tmp.bounds == BND_PARTITION && npf == 0)
        rc = mf_error_set(err, 5733408,
                          "One cannot specify the bounds as 'partition' without specifying a "
                          "non-empty array of partitionByFields. You may have meant to specify "
                          "'full' bounds.");
    if (rc == 0) {
        bson_t d = BSON_INITIALIZER, body;
        bson_iter_t di;
        BSON_APPEND_DOCUMENT_BEGIN(&d, "$sort", &body);
        if (tmp.bounds != BND_FULL)
            for (size_t i = 0; i < npf; i++)
                BSON_APPEND_INT32(&body, pf[i], 1);
        bool dup = false;
        for (size_t i = 0; tmp.bounds != BND_FULL && i < npf; i++)
            dup |= strcmp(pf[i], fpath) == 0;
        if (!dup)
            BSON_APPEND_INT32(&body, fpath, 1);
        bson_append_document_end(&d, &body);
        bson_iter_init(&di, &d);
        bson_iter_next(&di);
        rc = mfi_parse_sort(&di, agg, out, err);
        bson_destroy(&d);
    }
    densify_stage *ds = NULL;
    if (rc == 0 && !(ds = mfi_stage_new(out, &densify_ops, sizeof *ds, it, agg, err)))
        rc = MF_InternalError;
    if (rc == 0) {
        ds->field = fpath;
        ds->pfields = pf;
        ds->npf = npf;
        ds->bounds = tmp.bounds;
        ds->step = tmp.step;
        ds->lo = tmp.lo;
        ds->hi = tmp.hi;
        ds->unit = tmp.unit;
        return 0;
    }
    free(fpath);
    for (size_t i = 0; i < npf; i++)
        free(pf[i]);
    free(pf);
    mfi_val_free(&tmp.step);
    mfi_val_free(&tmp.lo);
    mfi_val_free(&tmp.hi);
    return rc;
}

/* ------------------------------------------------------------------ $fill */

int mfi_parse_fill(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_FailedToParse,
                            "The $fill stage specification must be an object, found %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_t f, sort_it, part_it, pf_it, out_it;
    bool has_sort = false, has_part = false, has_pf = false, has_out = false;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "sortBy") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field '$fill.sortBy' is the wrong type '%s', expected "
                                    "type 'object'",
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            sort_it = f;
            has_sort = true;
        } else if (strcmp(k, "partitionBy") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f) && !BSON_ITER_HOLDS_UTF8(&f))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field '$fill.partitionBy' is the wrong type '%s', "
                                    "expected types '[string, object']",
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            part_it = f;
            has_part = true;
        } else if (strcmp(k, "partitionByFields") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&f))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field '$fill.partitionByFields' is the wrong type '%s', "
                                    "expected type 'array'",
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            pf_it = f;
            has_pf = true;
        } else if (strcmp(k, "output") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field '$fill.output' is the wrong type '%s', expected "
                                    "type 'object'",
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            out_it = f;
            has_out = true;
        } else {
            return mf_error_set(err, 40415, "BSON field '$fill.%s' is an unknown field.", k);
        }
    }
    if (!has_out)
        return mf_error_set(err, 40414, "BSON field '$fill.output' is missing but a required field");
    bson_t swf = BSON_INITIALIZER, add = BSON_INITIALIZER, swo = BSON_INITIALIZER;
    bool need_swf = false;
    int rc = 0;
    bson_iter_t o;
    size_t nout = 0;
    bson_iter_recurse(&out_it, &o);
    while (rc == 0 && bson_iter_next(&o)) {
        const char *name = bson_iter_key(&o);
        nout++;
        if (!BSON_ITER_HOLDS_DOCUMENT(&o)) {
            rc = mf_error_set(err, 6050200,
                              "Each fill output specification must be an object with exactly one "
                              "field");
            break;
        }
        bson_iter_t a, method_it, value_it;
        bool has_method = false, has_value = false;
        bson_iter_recurse(&o, &a);
        while (rc == 0 && bson_iter_next(&a)) {
            const char *k = bson_iter_key(&a);
            if (strcmp(k, "method") == 0) {
                if (!BSON_ITER_HOLDS_UTF8(&a))
                    rc = mf_error_set(err, MF_TypeMismatch,
                                      "BSON field '$fill.output.method' is the wrong type '%s', "
                                      "expected type 'string'",
                                      mf_bsonx_type_alias(bson_iter_type(&a)));
                method_it = a;
                has_method = true;
            } else if (strcmp(k, "value") == 0) {
                value_it = a;
                has_value = true;
            } else {
                rc = mf_error_set(err, 40415, "BSON field '$fill.output.%s' is an unknown field.",
                                  k);
            }
        }
        if (rc)
            break;
        char *ref = bson_strdup_printf("$%s", name);
        if (has_method) {
            const char *m = bson_iter_utf8(&method_it, NULL);
            if (has_value)
                rc = mf_error_set(err, 6050201,
                                  "Each fill output specification must have exactly one of "
                                  "'method' or 'value' fields, not both");
            else if (strcmp(m, "locf") != 0 && strcmp(m, "linear") != 0)
                rc = mf_error_set(err, 6050202, "Method must be either locf or linear");
            else {
                bson_t fn;
                BSON_APPEND_DOCUMENT_BEGIN(&swo, name, &fn);
                BSON_APPEND_UTF8(&fn, strcmp(m, "locf") == 0 ? "$locf" : "$linearFill", ref);
                bson_append_document_end(&swo, &fn);
                need_swf = true;
            }
        }
        if (rc == 0 && has_value) {
            bson_t fn, arr;
            BSON_APPEND_DOCUMENT_BEGIN(&add, name, &fn);
            BSON_APPEND_ARRAY_BEGIN(&fn, "$ifNull", &arr);
            BSON_APPEND_UTF8(&arr, "0", ref);
            mf_bsonx_append_value(&arr, "1", 1, bson_iter_value(&value_it));
            bson_append_array_end(&fn, &arr);
            bson_append_document_end(&add, &fn);
        }
        bson_free(ref);
    }
    if (rc == 0 && nout == 0)
        rc = mf_error_set(err, 6050203,
                          "The output field in '$fill' must contain an object with at least one "
                          "element");
    if (rc == 0 && has_part && has_pf)
        rc = mf_error_set(err, 6050204,
                          "Maximum one of 'partitionBy' and 'partitionByFields can be specified "
                          "in '$fill'");
    if (rc == 0 && need_swf) {
        bson_t body;
        BSON_APPEND_DOCUMENT_BEGIN(&swf, "$setWindowFields", &body);
        if (has_sort)
            mf_bsonx_append_value(&body, "sortBy", 6, bson_iter_value(&sort_it));
        if (has_part)
            mf_bsonx_append_value(&body, "partitionBy", 11, bson_iter_value(&part_it));
        if (has_pf) {
            bson_t pb;
            bson_iter_t e;
            BSON_APPEND_DOCUMENT_BEGIN(&body, "partitionBy", &pb);
            bson_iter_recurse(&pf_it, &e);
            while (rc == 0 && bson_iter_next(&e)) {
                if (!BSON_ITER_HOLDS_UTF8(&e)) {
                    rc = mf_error_set(err, MF_TypeMismatch,
                                      "BSON field '$fill.partitionByFields.%s' is the wrong type "
                                      "'%s', expected type 'string'",
                                      bson_iter_key(&e), mf_bsonx_type_alias(bson_iter_type(&e)));
                    break;
                }
                char *ref = bson_strdup_printf("$%s", bson_iter_utf8(&e, NULL));
                BSON_APPEND_UTF8(&pb, bson_iter_utf8(&e, NULL), ref);
                bson_free(ref);
            }
            bson_append_document_end(&body, &pb);
        }
        BSON_APPEND_DOCUMENT(&body, "output", &swo);
        bson_append_document_end(&swf, &body);
        if (rc == 0) {
            bson_iter_t si;
            bson_iter_init(&si, &swf);
            bson_iter_next(&si);
            rc = mfi_parse_set_window_fields(&si, agg, out, err);
        }
    }
    if (rc == 0 && !bson_empty(&add)) {
        bson_t d = BSON_INITIALIZER;
        bson_iter_t di;
        BSON_APPEND_DOCUMENT(&d, "$addFields", &add);
        bson_iter_init(&di, &d);
        bson_iter_next(&di);
        rc = mfi_parse_add_fields(&di, agg, out, err);
        bson_destroy(&d);
    }
    bson_destroy(&swf);
    bson_destroy(&add);
    bson_destroy(&swo);
    return rc;
}
