/*
 * stage_stats.c -- the statistics stages: $collStats and $indexStats.
 *
 * Both must begin the pipeline and make their own documents (they never
 * pull from the collection read); the numbers come from the environment
 * (pipeline.h: coll_stats, index_stats), which the command layer fills from
 * the catalog and the trees, as the collStats command does.
 */
#include "pipeline_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* DocumentSource's PositionRequirement::kFirst: stage 0 of the list is the
 * source, so a first stage is added when the list holds one. */
static int check_first(const mfi_stage_list *out, const char *name, mf_error *err)
{
    if (out->n != 1)
        return mf_error_set(err, 40602, "%s is only valid as the first stage in a pipeline",
                            name);
    return 0;
}

/* ------------------------------------------------------------ $collStats */

typedef struct {
    mfi_stage base;
    mf_agg_coll_stats q;
    bool done;
} coll_stats_stage;

static int coll_stats_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    coll_stats_stage *c = (coll_stats_stage *)s;
    mfi_agg *a = s->agg;
    *eof = c->done;
    if (c->done)
        return 0;
    c->done = true;
    bson_init(out);
    int rc = a->env->coll_stats(a->env->arg, a->db, a->coll, &c->q, out, err);
    if (rc) {
        bson_destroy(out);
        *eof = true;
    }
    return rc;
}

static const mfi_stage_ops coll_stats_ops = {"$collStats", coll_stats_next, NULL, NULL};

static int object_field(const bson_iter_t *f, const char *name, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(f))
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field '%s' is the wrong type '%s', expected type 'object'", name,
                            mf_bsonx_type_alias(bson_iter_type(f)));
    return 0;
}

/* storageStats: {scale, verbose, waitForLock, numericOnly} (IDL's
 * StorageStatsSpec; scale a safeInt >= 1). */
static int parse_storage_stats(const bson_iter_t *it, mf_agg_coll_stats *q, mf_error *err)
{
    bson_iter_t f;
    q->storage = true;
    q->scale = 1;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "scale") == 0) {
            double d;
            switch (bson_iter_type(&f)) {
            case BSON_TYPE_INT32:
            case BSON_TYPE_INT64:
            case BSON_TYPE_DOUBLE:
            case BSON_TYPE_DECIMAL128:
                d = bson_iter_as_double(&f);
                break;
            default:
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field '$collStats.storageStats.scale' is the wrong type "
                                    "'%s', expected types '[long, int, decimal, double']",
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            }
            if (BSON_ITER_HOLDS_DECIMAL128(&f)) {
                bson_decimal128_t dec;
                char s[BSON_DECIMAL128_STRING];
                bson_iter_decimal128(&f, &dec);
                bson_decimal128_to_string(&dec, s);
                d = strtod(s, NULL);
            }
            d = isnan(d) ? 0 : trunc(d);
            q->scale = d < -2147483648.0 ? INT32_MIN : d > 2147483647.0 ? INT32_MAX : (int64_t)d;
            if (q->scale < 1)
                return mf_error_set(err, 51024,
                                    "BSON field 'scale' value must be >= 1, actual value '%lld'",
                                    (long long)q->scale);
        } else if (strcmp(k, "verbose") == 0 || strcmp(k, "waitForLock") == 0 ||
                   strcmp(k, "numericOnly") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&f))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field '$collStats.storageStats.%s' is the wrong type "
                                    "'%s', expected type 'bool'",
                                    k, mf_bsonx_type_alias(bson_iter_type(&f)));
        } else {
            return mf_error_set(err, 40415,
                                "BSON field '$collStats.storageStats.%s' is an unknown field.", k);
        }
    }
    return 0;
}

int mfi_parse_coll_stats(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it)) {
        char shown[256];
        mf_bsonx_elem_to_string(it, true, shown, sizeof shown);
        return mf_error_set(err, 40166, "$collStats must take a nested object but found: %s",
                            shown);
    }
    mf_agg_coll_stats q = {.scale = 1};
    bson_iter_t f;
    int rc;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "storageStats") == 0) {
            if ((rc = object_field(&f, "$collStats.storageStats", err)) != 0 ||
                (rc = parse_storage_stats(&f, &q, err)) != 0)
                return rc;
        } else if (strcmp(k, "count") == 0) {
            if ((rc = object_field(&f, "$collStats.count", err)) != 0)
                return rc;
            q.count = true;
        } else if (strcmp(k, "latencyStats") == 0 || strcmp(k, "queryExecStats") == 0) {
            char name[64];
            snprintf(name, sizeof name, "$collStats.%s", k);
            if ((rc = object_field(&f, name, err)) != 0)
                return rc;
            /* No per-collection latency histograms or collection-scan
             * counters are kept yet. */
            return mf_error_set(err, MF_NotImplemented,
                                "$collStats %s is not supported by MultiforaDB yet", k);
        } else {
            return mf_error_set(err, 40415, "BSON field '$collStats.%s' is an unknown field.", k);
        }
    }
    if ((rc = check_first(out, "$collStats", err)) != 0)
        return rc;
    coll_stats_stage *c = mfi_stage_new(out, &coll_stats_ops, sizeof *c, it, agg, err);
    if (!c)
        return MF_InternalError;
    c->q = q;
    return 0;
}

/* ------------------------------------------- $indexStats, $planCacheStats */

/* Both list what the environment reports of the collection, one document
 * an element of the array it fills. */
typedef struct {
    mfi_stage base;
    bool plan_cache;      /* $planCacheStats, else $indexStats */
    bson_t docs;          /* the array from the environment */
    bson_iter_t it;
    bool loaded;
} index_stats_stage;

static int index_stats_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    index_stats_stage *x = (index_stats_stage *)s;
    mfi_agg *a = s->agg;
    *eof = true;
    if (!x->loaded) {
        x->loaded = true;
        int rc = x->plan_cache ? a->env->plan_cache_stats(a->env->arg, a->db, a->coll, &x->docs, err)
                               : a->env->index_stats(a->env->arg, a->db, a->coll, &x->docs, err);
        if (rc)
            return rc;
        bson_iter_init(&x->it, &x->docs);
    }
    mfi_next_array_doc(&x->it, out, eof);
    return 0;
}

static void index_stats_free(mfi_stage *s)
{
    bson_destroy(&((index_stats_stage *)s)->docs);
}

static const mfi_stage_ops index_stats_ops = {"$indexStats", index_stats_next, NULL,
                                              index_stats_free};
static const mfi_stage_ops plan_cache_stats_ops = {"$planCacheStats", index_stats_next, NULL,
                                                   index_stats_free};

/* The stage `ops` names, first in the pipeline. */
static int env_list_new(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                        const mfi_stage_ops *ops, mf_error *err)
{
    int rc = check_first(out, ops->name, err);
    if (rc)
        return rc;
    index_stats_stage *x = mfi_stage_new(out, ops, sizeof *x, it, agg, err);
    if (!x)
        return MF_InternalError;
    x->plan_cache = ops == &plan_cache_stats_ops;
    bson_init(&x->docs);
    return 0;
}

int mfi_parse_index_stats(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                          mf_error *err)
{
    bson_iter_t f;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || (bson_iter_recurse(it, &f) && bson_iter_next(&f)))
        return mf_error_set(err, 28803,
                            "The $indexStats stage specification must be an empty object");
    return env_list_new(it, agg, out, &index_stats_ops, err);
}

/* {$planCacheStats: {}}: the collection's plan cache entries (mongod's
 * DocumentSourcePlanCacheStats; no options on a mongod). */
int mfi_parse_plan_cache_stats(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                               mf_error *err)
{
    bson_iter_t f;
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_FailedToParse,
                            "$planCacheStats value must be an object. Found: %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    if (bson_iter_recurse(it, &f) && bson_iter_next(&f))
        return mf_error_set(err, MF_FailedToParse,
                            "$planCacheStats parameters object must be empty. Found: object");
    return env_list_new(it, agg, out, &plan_cache_stats_ops, err);
}
