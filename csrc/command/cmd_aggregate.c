/*
 * cmd_aggregate.c -- the aggregate command, and the environment through
 * which pipelines read collections.
 *
 * A pipeline (agg/pipeline.c) asks the environment to open a read with a
 * filter, sort, hint and limit.  The read is planned here with the query
 * planner, under the collection's lock, and then fills chunks of documents:
 * each chunk takes the catalog and collection locks, seeks back to where
 * the last one stopped (the scan's saved position), reads up to 1,000
 * documents or 4 MB, and releases them.  So a pipeline holds no lock while
 * its stages run, a cursor over it holds none between getMores, and a
 * dropped collection shows as QueryPlanKilled (175), as with find.
 */
#include "command_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_FIRST_BATCH 101
#define CHUNK_DOCS 1000
#define CHUNK_BYTES (4 * 1024 * 1024)

/* --------------------------------------------------------------- reads */

typedef struct coll_read {
    mf_agg_source base;
    mf_instance *inst;
    char ns[MF_MAX_NS_LEN + 1];
    bool exists;
    uint8_t uuid[16];
    mf_cl_indexes ix;
    mf_scan *scan;
    mf_matcher *m;
    const mf_matcher *judge;  /* m, or NULL when counting everything: no record read */
    bson_t filter, sort;
    bool has_sort, sorted;
    int64_t limit, returned;
    mf_buf chunk;            /* documents, back to back */
    size_t pos;
    /* a $geoNear read: the scan's filter (the query and the near
     * condition), and per document of the chunk its distance and the
     * {"": location} includeLocs asks for, back to back */
    const mf_agg_geo_near *near;
    bson_t near_filter;
    mf_buf dists, locs;
    size_t loc_pos, ndone;
    double last_dist;
    bson_t last_loc;
    bool eof;
    bool explain;
    bool no_fields;          /* hand out empty documents (mf_agg_read.no_fields) */
    bool text;               /* a $text read: each document in `chunk` is
                                followed by [scored: 1 byte][score: 8] */
    mf_meta meta;            /* the metadata of the document returned last */
    int64_t nreturned;
    mf_scan_stats seen;      /* the scan's work already added to an operation */
} coll_read;

static int read_chunk(coll_read *r, mf_error *err)
{
    mf_engine *e = r->inst->engine;
    int rc = 0;
    r->chunk.len = 0;
    r->pos = 0;
    r->dists.len = r->locs.len = 0;
    r->loc_pos = r->ndone = 0;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, r->ns);
    uint8_t uuid[16];
    if (!c || !mf_cl_uuid(c, uuid) || memcmp(uuid, r->uuid, 16) != 0) {
        mf_engine_catalog_unlock(e);
        return mf_error_set(err, MF_QueryPlanKilled,
                            "collection dropped. UUID changed between getMore calls");
    }
    mf_coll_lock(c, false);
    size_t n = 0;
    while (n < CHUNK_DOCS && r->chunk.len < CHUNK_BYTES) {
        if (r->limit > 0 && r->returned >= r->limit) {
            r->eof = true;
            break;
        }
        mf_scan_row row;
        bool valid;
        if ((rc = mf_scan_next(r->scan, e, c, r->judge, &row, &valid, err)) != 0)
            break;
        if (!valid) {
            r->eof = true;
            break;
        }
        static const uint8_t empty_doc[5] = {5, 0, 0, 0, 0};
        if ((r->no_fields ? mf_buf_append(&r->chunk, empty_doc, sizeof empty_doc)
                          : mf_buf_append(&r->chunk, bson_get_data(&row.doc), row.doc.len)) != 0) {
            rc = mf_error_oom(err);
            break;
        }
        if (r->near) {
            bson_t loc;
            if (mf_buf_append(&r->dists, &row.dist, sizeof row.dist) != 0 ||
                mf_scan_near_loc(r->scan, &row.doc, &loc) != 0 || /* geoNearPoint */
                mf_buf_append(&r->locs, bson_get_data(&loc), loc.len) != 0) {
                rc = mf_error_oom(err);
                break;
            }
            bson_destroy(&loc);
        }
        if (r->text) { /* the row's textScore metadata, beside it */
            uint8_t sc[9] = {row.scored};
            memcpy(sc + 1, &row.score, 8);
            if (mf_buf_append(&r->chunk, sc, sizeof sc) != 0) {
                rc = mf_error_oom(err);
                break;
            }
        }
        n++;
        r->returned++;
    }
    /* the work goes to the operation reading: aggregate or its getMore */
    mfi_op_debug_scan(mfi_op_debug_current(), r->scan, &r->seen);
    mf_scan_release(r->scan);
    mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    return rc;
}

static int read_next(mf_agg_source *s, bson_t *out, bool *eof, mf_error *err)
{
    coll_read *r = (coll_read *)s;
    if (!r->exists) {
        *eof = true;
        return 0;
    }
    if (r->pos >= r->chunk.len) {
        if (r->eof) {
            *eof = true;
            return 0;
        }
        int rc = read_chunk(r, err);
        if (rc)
            return rc;
        if (r->chunk.len == 0) {
            *eof = true;
            return 0;
        }
    }
    const uint8_t *d = r->chunk.data + r->pos;
    uint32_t len;
    memcpy(&len, d, 4);
    len = BSON_UINT32_FROM_LE(len);
    bson_t tmp;
    if (!bson_init_static(&tmp, d, len) || (r->text && r->pos + len + 9 > r->chunk.len))
        return mf_error_set(err, MF_InternalError, "a read chunk is damaged");
    bson_init(out);
    bson_concat(out, &tmp);
    r->pos += len;
    r->base.meta = NULL;
    if (r->text) {
        double score;
        memcpy(&score, r->chunk.data + r->pos + 1, 8);
        if (r->chunk.data[r->pos]) {
            mf_meta_set_double(&r->meta, MF_META_TEXT_SCORE, score);
            r->base.meta = &r->meta;
        }
        r->pos += 9;
    }
    r->nreturned++;
    if (r->near) {
        uint32_t ll;
        memcpy(&r->last_dist, r->dists.data + r->ndone * sizeof(double), sizeof(double));
        memcpy(&ll, r->locs.data + r->loc_pos, 4);
        ll = BSON_UINT32_FROM_LE(ll);
        if (!bson_init_static(&r->last_loc, r->locs.data + r->loc_pos, ll))
            return mf_error_set(err, MF_InternalError, "a read chunk is damaged");
        r->loc_pos += ll;
        r->ndone++;
    }
    *eof = false;
    return 0;
}

static void read_near_meta(mf_agg_source *s, double *dist, const bson_t **loc)
{
    coll_read *r = (coll_read *)s;
    *dist = r->last_dist;
    *loc = &r->last_loc;
}

/* $geoNear without a key: the field of the collection's one 2d index,
 * else of its one 2dsphere index (mongod's
 * extractGeoNearFieldFromIndexes). */
static int geo_near_key(const coll_read *r, const char **key, mf_error *err)
{
    static const char *const kinds[] = {"2d", "2dsphere"};
    for (size_t k = 0; k < 2; k++) {
        const char *found = NULL;
        size_t n = 0;
        for (size_t i = 0; i < r->ix.n; i++) {
            const mf_index_desc *d = &r->ix.v[i];
            bson_iter_t it;
            if (d->hidden || d->building || !bson_iter_init(&it, d->key))
                continue;
            const char *field = NULL;
            while (bson_iter_next(&it))
                if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), kinds[k]) == 0)
                    field = bson_iter_key(&it);
            if (field) {
                found = field;
                n++;
            }
        }
        if (n > 1)
            return mf_error_set(err, MF_IndexNotFound,
                                "There is more than one %s index on %s; unsure which to use for "
                                "$geoNear",
                                kinds[k], r->ns);
        if (n == 1) {
            *key = found;
            return 0;
        }
    }
    return mf_error_set(err, MF_IndexNotFound,
                        "$geoNear requires a 2d or 2dsphere index, but none were found");
}

/* The near read's filter: the query, and {key: {$near...: near, ...}}. */
static int near_filter(coll_read *r, mf_error *err)
{
    const mf_agg_geo_near *g = r->near;
    const char *key = g->key;
    int rc;
    if (!key && (rc = geo_near_key(r, &key, err)) != 0)
        return rc;
    bson_t cond;
    bson_iter_t nv;
    bson_reinit(&r->near_filter);
    bson_concat(&r->near_filter, &r->filter);
    if (!bson_iter_init(&nv, g->near) || !bson_iter_next(&nv))
        return mf_error_set(err, MF_BadValue, "$geoNear requires a 'near' argument");
    BSON_APPEND_DOCUMENT_BEGIN(&r->near_filter, key, &cond);
    mf_bsonx_append_iter(&cond, g->spherical ? "$nearSphere" : "$near", -1, &nv);
    if (g->has_min)
        BSON_APPEND_DOUBLE(&cond, "$minDistance", g->min);
    if (g->has_max)
        BSON_APPEND_DOUBLE(&cond, "$maxDistance", g->max);
    bson_append_document_end(&r->near_filter, &cond);
    return 0;
}

/* The read's explain: find's queryPlanner (and executionStats). */
static int read_explain(mf_agg_source *s, int exec, bson_t *out, mf_error *err)
{
    coll_read *r = (coll_read *)s;
    bson_t qp, plan = BSON_INITIALIZER, stats = BSON_INITIALIZER;
    int rc = 0;
    if (!r->exists) {
        BSON_APPEND_UTF8(&plan, "stage", "EOF");
        BSON_APPEND_UTF8(&stats, "stage", "EOF");
        BSON_APPEND_INT64(&stats, "nReturned", 0);
    } else if (mf_scan_explain(r->scan, false, &plan) != 0 ||
               (exec && mf_scan_explain(r->scan, true, &stats) != 0)) {
        rc = mf_error_set(err, MF_InternalError, "explain: out of memory");
    }
    if (rc == 0) {
        BSON_APPEND_DOCUMENT_BEGIN(out, "queryPlanner", &qp);
        BSON_APPEND_UTF8(&qp, "namespace", r->ns);
        BSON_APPEND_BOOL(&qp, "indexFilterSet", false);
        BSON_APPEND_DOCUMENT(&qp, "parsedQuery", &r->filter);
        if (mf_matcher_collation(r->m)) {
            /* mongod shows the query's collator after parsedQuery */
            bson_t cs;
            BSON_APPEND_DOCUMENT_BEGIN(&qp, "collation", &cs);
            mf_collator_to_bson(mf_matcher_collation(r->m), &cs);
            bson_append_document_end(&qp, &cs);
        }
        uint32_t qh = 0, pk = 0;
        bool hashed = r->exists && mf_scan_hashes(r->scan, &qh, &pk);
        mfi_put_hashes(&qp, hashed, qh, pk);
        BSON_APPEND_DOCUMENT(&qp, "winningPlan", &plan);
        bson_t rej = BSON_INITIALIZER;
        if (r->exists && mf_scan_explain_rejected(r->scan, &rej) != 0)
            rc = mf_error_set(err, MF_InternalError, "explain: out of memory");
        BSON_APPEND_ARRAY(&qp, "rejectedPlans", &rej);
        bson_destroy(&rej);
        bson_append_document_end(out, &qp);
        if (exec) {
            bson_t es;
            const mf_scan_stats *st = r->exists ? mf_scan_get_stats(r->scan) : NULL;
            BSON_APPEND_DOCUMENT_BEGIN(out, "executionStats", &es);
            BSON_APPEND_BOOL(&es, "executionSuccess", true);
            BSON_APPEND_INT64(&es, "nReturned", r->nreturned);
            BSON_APPEND_INT64(&es, "totalKeysExamined", st ? (int64_t)st->keys_examined : 0);
            BSON_APPEND_INT64(&es, "totalDocsExamined", st ? (int64_t)st->docs_examined : 0);
            BSON_APPEND_DOCUMENT(&es, "executionStages", &stats);
            if (exec > 1) { /* each candidate's trial, the winner's first */
                bson_t all = BSON_INITIALIZER;
                if (r->exists && mf_scan_explain_all_plans(r->scan, &all) != 0)
                    rc = mf_error_set(err, MF_InternalError, "explain: out of memory");
                BSON_APPEND_ARRAY(&es, "allPlansExecution", &all);
                bson_destroy(&all);
            }
            bson_append_document_end(out, &es);
        }
    }
    bson_destroy(&plan);
    bson_destroy(&stats);
    return rc;
}

static void read_free(mf_agg_source *s)
{
    coll_read *r = (coll_read *)s;
    mf_scan_free(r->scan);
    mf_cl_indexes_free(&r->ix);
    mf_matcher_free(r->m);
    bson_destroy(&r->filter);
    bson_destroy(&r->sort);
    mf_buf_free(&r->chunk);
    mf_buf_free(&r->dists);
    mf_buf_free(&r->locs);
    bson_destroy(&r->near_filter);
    mf_meta_clear(&r->meta);
    free(r);
}

static int read_open(void *arg, const mf_agg_read *q, mf_agg_source **out, bool *sorted,
                     mf_error *err)
{
    mf_instance *inst = arg;
    mf_engine *e = inst->engine;
    *out = NULL;
    *sorted = false;
    coll_read *r = calloc(1, sizeof *r);
    if (!r)
        return mf_error_oom(err);
    r->base.next = read_next;
    r->base.explain = read_explain;
    r->base.free = read_free;
    r->inst = inst;
    r->explain = q->explain;
    r->no_fields = q->no_fields;
    r->near = q->geo_near;
    if (r->near)
        r->base.near_meta = read_near_meta;
    bson_init(&r->near_filter);
    bson_init(&r->last_loc);
    bson_init(&r->filter);
    bson_init(&r->sort);
    if (q->filter)
        bson_concat(&r->filter, q->filter);
    if (q->sort) {
        bson_concat(&r->sort, q->sort);
        r->has_sort = true;
    }
    snprintf(r->ns, sizeof r->ns, "%s.%s", q->db, q->coll);
    int rc = mf_matcher_parse_coll(&r->filter, q->hooks, q->collation, &r->m, err);
    if (rc) {
        read_free(&r->base);
        return rc;
    }
    r->judge = r->no_fields && bson_empty(&r->filter) ? NULL : r->m;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, r->ns);
    if (c) {
        mf_coll_lock(c, false);
        r->exists = mf_cl_uuid(c, r->uuid);
        rc = mf_cl_indexes_load(c, &r->ix, err);
        if (rc == 0 && r->near)
            rc = near_filter(r, err);
        if (rc == 0)
            rc = mf_cl_scan_new_ex(mfi_cl(q->explain ? NULL : inst), c, &r->ix,
                                 r->near ? &r->near_filter : &r->filter, q->hint,
                                 r->has_sort ? &r->sort : NULL, q->collation,
                                 &(mf_scan_extra){.sort_trials = r->has_sort,
                                                  .explain = q->explain,
                                                  .text_score = q->text_score},
                                 &r->scan, &r->sorted, err);
        if (rc == 0) {
            r->text = mf_scan_is_text(r->scan);
            mf_scan_deadline(r->scan, q->deadline);
            mf_scan_timed(r->scan, q->explain);
            /* Keys answer where the bounds answer the whole filter
             * (mongod's COUNT_SCAN). */
            mf_scan_count_only(r->scan, r->no_fields);
            /* Whether the pipeline sorts depends on the winner when the
             * trials differ in giving the sort; explain shows the plan a
             * run uses: the trials choose now then too. */
            bool mixed = r->has_sort && mf_scan_sort_undecided(r->scan);
            if (mixed && q->limit > 0)
                mf_scan_trial_results(r->scan, (uint64_t)q->limit);
            if (q->explain || mixed)
                rc = mf_scan_decide(r->scan, e, c, r->judge, err);
            if (rc == 0 && mixed)
                r->sorted = mf_scan_sorted(r->scan);
            mf_scan_release(r->scan);
        }
        mf_coll_unlock(c);
    }
    mf_engine_catalog_unlock(e);
    if (rc) {
        read_free(&r->base);
        return rc;
    }
    /* A limit applies only when the read delivers the order asked for. */
    r->limit = (!r->has_sort || r->sorted) ? q->limit : 0;
    *sorted = r->sorted || !c;
    *out = &r->base;
    return 0;
}

void mfi_agg_env_init(mf_instance *inst)
{
    inst->agg_env.arg = inst;
    inst->agg_env.open = read_open;
    mfi_agg_env_write_init(inst); /* $out, $merge, $collStats, $indexStats */
    inst->agg_env.list_sessions = mfi_sessions_list; /* sessions.c */
    atomic_store(&inst->agg_group_max_bytes, MF_AGG_DEFAULT_MEMORY_LIMIT);
    atomic_store(&inst->agg_sort_max_bytes, MF_AGG_DEFAULT_MEMORY_LIMIT);
    atomic_store(&inst->agg_bucket_auto_max_bytes, MF_AGG_DEFAULT_MEMORY_LIMIT);
    atomic_store(&inst->agg_window_max_bytes, MF_AGG_DEFAULT_MEMORY_LIMIT);
    atomic_store(&inst->txn_lifetime_s, 60); /* (not aggregation's: set with the others) */
    atomic_store(&inst->txn_size_limit, INT64_MAX);
    atomic_store(&inst->snap_window_s, 300);
    atomic_store(&inst->snap_budget, (int64_t)MF_CL_HISTORY_BUDGET);
}

/* ------------------------------------------------------------ aggregate */

typedef struct agg_args {
    bson_t pipeline;
    bool has_pipeline;
    bool has_cursor;
    int64_t batch_size;      /* -1: default */
    bool allow_disk_use, explain;
    bson_t let;
    bool has_let;
    bson_iter_t hint;
    bool has_hint;
    bson_iter_t collation;   /* a document */
    bool has_collation;      /* given and not empty */
    bool has_write_concern;
    int64_t deadline;
} agg_args;

static int parse_args(const bson_t *cmd, bool explain_ctx, agg_args *a, mf_error *err)
{
    bson_iter_t it;
    memset(a, 0, sizeof *a);
    a->batch_size = -1;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        int rc = 0;
        if (strcmp(k, "pipeline") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return mfi_type_error(err, "aggregate", k, &it, "array");
            uint32_t l;
            const uint8_t *d;
            bson_iter_array(&it, &l, &d);
            bson_init_static(&a->pipeline, d, l);
            a->has_pipeline = true;
        } else if (strcmp(k, "cursor") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return mfi_type_error(err, "aggregate", k, &it, "object");
            bson_iter_t c;
            bson_iter_recurse(&it, &c);
            while (bson_iter_next(&c)) {
                if (strcmp(bson_iter_key(&c), "batchSize") == 0) {
                    if (!mfi_as_int64(&c, &a->batch_size))
                        return mfi_type_error(err, "aggregate", "cursor.batchSize", &c, "long");
                    if (a->batch_size < 0)
                        return mf_error_set(err, 51024,
                                            "BSON field 'batchSize' value must be >= 0, actual "
                                            "value '%lld'",
                                            (long long)a->batch_size);
                } else {
                    return mf_error_set(err, 40415,
                                        "BSON field 'aggregate.cursor.%s' is an unknown field.",
                                        bson_iter_key(&c));
                }
            }
            a->has_cursor = true;
        } else if (strcmp(k, "allowDiskUse") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return mfi_type_error(err, "aggregate", k, &it, "bool");
            a->allow_disk_use = bson_iter_bool(&it);
        } else if (strcmp(k, "explain") == 0) {
            if (!BSON_ITER_HOLDS_BOOL(&it))
                return mfi_type_error(err, "aggregate", k, &it, "bool");
            a->explain = bson_iter_bool(&it);
        } else if (strcmp(k, "let") == 0) {
            if (!mfi_doc_arg(&it, &a->let))
                return mfi_type_error(err, "aggregate", k, &it, "object");
            a->has_let = true;
        } else if (strcmp(k, "hint") == 0) {
            if ((rc = mfi_hint_arg(&it, "hint", err)) != 0)
                return rc;
            a->hint = it;
            a->has_hint = true;
        } else if (strcmp(k, "maxTimeMS") == 0) {
            /* aggregate's IDL types the field (TypeMismatch, then 51024
             * below 0) before mongod's parseMaxTimeMS reads it */
            int64_t ms;
            if (!mfi_is_number(&it))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field 'aggregate.maxTimeMS' is the wrong type '%s', "
                                    "expected types '[long, int, decimal, double]'",
                                    mf_bsonx_type_alias(bson_iter_type(&it)));
            if (mfi_safe_number_long(&it) < 0)
                return mf_error_set(err, 51024,
                                    "BSON field 'maxTimeMS' value must be >= 0, actual value "
                                    "'%lld'",
                                    (long long)mfi_safe_number_long(&it));
            if ((rc = mfi_max_time_arg(&it, &ms, err)) != 0)
                return rc;
            a->deadline = ms ? mf_clock_mono_us() + ms * 1000 : 0;
        } else if (strcmp(k, "collation") == 0) {
            bson_t spec;
            if (!mfi_doc_arg(&it, &spec))
                return mfi_type_error(err, "aggregate", k, &it, "object");
            /* an empty collation is none given: the collection's applies */
            a->collation = it;
            a->has_collation = !bson_empty(&spec);
        } else if (strcmp(k, "writeConcern") == 0) {
            a->has_write_concern = true; /* checked by the dispatcher */
        } else if (strcmp(k, "bypassDocumentValidation") == 0 ||
                   strcmp(k, "readConcern") == 0 || strcmp(k, "writeConcern") == 0 ||
                   strcmp(k, "fromMongos") == 0 || strcmp(k, "needsMerge") == 0 ||
                   strcmp(k, "isMapReduceCommand") == 0 || strcmp(k, "rawData") == 0 ||
                   mfi_is_generic_arg(k)) {
        } else {
            return mf_error_set(err, 40415, "BSON field 'aggregate.%s' is an unknown field.", k);
        }
    }
    if (!a->has_pipeline)
        return mf_error_set(err, 40414,
                            "BSON field 'aggregate.pipeline' is missing but a required field");
    if (!a->has_cursor && !a->explain && !explain_ctx)
        return mf_error_set(err, MF_FailedToParse,
                            "The 'cursor' option is required, except for aggregate with the "
                            "explain argument");
    if ((a->explain || explain_ctx) && a->has_write_concern)
        return mf_error_set(err, MF_FailedToParse,
                            "Aggregation explain does not support the'writeConcern' option");
    return 0;
}

/* The aggregate's collation (mongod's resolveCollator): the command's
 * `collation` if given, else the default of the collection `ns` (NULL: a
 * database pipeline), else simple (*out NULL).  $lookup, $graphLookup and
 * $unionWith read their collections under it too, as in mongod. */
static int resolve_collation(mf_cmd_ctx *ctx, const agg_args *a, const char *ns,
                             mf_collator **out, mf_error *err)
{
    *out = NULL;
    if (a->has_collation)
        return mfi_collation_arg(&a->collation, "aggregate", "collation", out, err);
    if (!ns)
        return 0;
    return mf_cl_collation_of_ns(ctx->inst->engine, ns, false, NULL, out, err);
}

int mfi_cmd_aggregate(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    return mfi_aggregate_run(ctx, cmd, 0, reply, err);
}

static int aggregate_resolved(mf_cmd_ctx *ctx, const bson_t *cmd, int explain, bson_t *reply,
                              const char *ns, const char *coll, agg_args *pa,
                              mf_collator *collation, mf_error *err);

/* An aggregate of view `ns` (`v` resolved): its stages go first, the read
 * is of the collection the views end at (`*coll` becomes its name), and
 * the collation is the view's -- another one given is 167, as mongod's
 * "Cannot override a view's default collation". */
static int on_view(const char *ns, const mfi_resolved_view *v, agg_args *a, bson_t *combined,
                   const char **coll, mf_collator **collation, mf_error *err)
{
    int rc = 0;
    if (mfi_change_stream_first(&a->pipeline))
        return mf_error_set(err, MF_CommandNotSupportedOnView,
                            "Namespace %s is a view, not a collection", ns);
    mf_collator *mine = NULL;
    if ((rc = mf_collator_new_doc(&v->collation, &mine, err)) != 0)
        return rc;
    if (a->has_collation) {
        mf_collator *given = NULL;
        rc = mfi_collation_arg(&a->collation, "aggregate", "collation", &given, err);
        bool same = rc == 0 && (given && mine ? mf_collator_equal(given, mine) : !given && !mine);
        mf_collator_unref(given);
        if (rc == 0 && !same)
            rc = mf_error_set(err, MF_OptionNotSupportedOnView,
                              "Cannot override a view's default collation");
        if (rc) {
            mf_collator_unref(mine);
            return rc;
        }
    }
    *collation = mine;
    /* the views' stages, then the command's */
    bson_iter_t it;
    uint32_t n = 0;
    bson_init(combined);
    for (int part = 0; part < 2; part++) {
        bson_iter_init(&it, part ? &a->pipeline : &v->pipeline);
        while (bson_iter_next(&it)) {
            char key[16];
            const char *k;
            mf_uint32_to_key(n++, &k, key, sizeof key);
            mf_bsonx_append_iter(combined, k, -1, &it);
        }
    }
    bson_init_static(&a->pipeline, bson_get_data(combined), combined->len);
    *coll = strchr(v->base, '.') + 1;
    return 0;
}

int mfi_aggregate_run(mf_cmd_ctx *ctx, const bson_t *cmd, int explain, bson_t *reply,
                      mf_error *err)
{
    bson_iter_t it;
    char ns[MF_MAX_NS_LEN + 1];
    const char *coll = NULL;
    int rc = 0;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (BSON_ITER_HOLDS_UTF8(&it)) {
        if ((rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err)) != 0)
            return rc;
        coll = ns + strlen(ctx->db) + 1;
    } else if (BSON_ITER_HOLDS_NUMBER(&it) && bson_iter_as_int64(&it) == 1) {
        snprintf(ns, sizeof ns, "%s.$cmd.aggregate", ctx->db);
    } else {
        return mf_error_set(err, MF_FailedToParse,
                            "Invalid command format: the '%s' field must specify a collection "
                            "name or 1",
                            bson_iter_key(&it));
    }
    agg_args a;
    if ((rc = parse_args(cmd, explain != 0, &a, err)) != 0 ||
        (rc = mfi_api_check_pipeline(&ctx->api, &a.pipeline, err)) != 0)
        return rc;
    a.explain |= explain != 0;
    /* Its own maxTimeMS read, the check the dispatcher makes for other
     * commands (maxTimeAlwaysTimeOut); under an explain with a time limit
     * of its own, the dispatcher made it. */
    if (a.deadline && !ctx->deadline.at_us && (rc = mfi_max_time_check(ctx->inst, err)) != 0)
        return rc;
    /* under explain, the explain command's own maxTimeMS too: the smaller */
    a.deadline = mfi_deadline_min(a.deadline, ctx->deadline.at_us);
    atomic_fetch_add_explicit(&ctx->inst->counters.op_command, 1, memory_order_relaxed);

    mf_collator *collation = NULL;
    mfi_resolved_view view = {0};
    bson_t combined = BSON_INITIALIZER;
    if (coll && (rc = mfi_view_resolve(ctx->inst, ns, &view, err)) != 0)
        return rc;
    if (view.is_view) {
        rc = on_view(ns, &view, &a, &combined, &coll, &collation, err);
    } else {
        rc = resolve_collation(ctx, &a, coll ? ns : NULL, &collation, err);
    }
    if (rc) {
        if (coll)
            mfi_view_clear(&view);
        bson_destroy(&combined);
        return rc;
    }
    rc = aggregate_resolved(ctx, cmd, explain, reply, ns, coll, &a, collation, err);
    if (coll)
        mfi_view_clear(&view);
    bson_destroy(&combined);
    return rc;
}

/* mfi_aggregate_run once the namespace is resolved: `coll` is the
 * collection read (a view's base), `ns` the name the cursor keeps; takes
 * over `collation`. */
static int aggregate_resolved(mf_cmd_ctx *ctx, const bson_t *cmd, int explain, bson_t *reply,
                              const char *ns, const char *coll, agg_args *pa,
                              mf_collator *collation, mf_error *err)
{
    int rc = 0;
    agg_args a = *pa;
    /* a change stream (a replica set's; a standalone's pipeline parse
     * refuses it, 40573) */
    if (ctx->inst->cl.oplog && !a.explain && mfi_change_stream_first(&a.pipeline)) {
        mfi_change_stream_args cs = {.pipeline = &a.pipeline,
                                     .ns = ns,
                                     .coll = coll,
                                     .batch_size = a.batch_size,
                                     .deadline_us = a.deadline,
                                     .let = a.has_let ? &a.let : NULL,
                                     .collation = collation};
        rc = mfi_change_stream_open(ctx, &cs, reply, err);
        mf_collator_unref(collation);
        return rc;
    }
    char tmp[4096];
    mfi_tmpdir_of(ctx->inst, tmp, sizeof tmp);
    mf_agg_opts o = {
        .db = ctx->db,
        .coll = coll,
        .env = &ctx->inst->agg_env,
        .let = a.has_let ? &a.let : NULL,
        .hint = a.has_hint ? &a.hint : NULL,
        .collation = collation,
        .allow_disk_use = a.allow_disk_use,
        .tmpdir = tmp,
        .deadline_us = a.deadline,
        .now_ms = mf_clock_wall_ms(),
        .explain = a.explain,
        .group_max_bytes = atomic_load(&ctx->inst->agg_group_max_bytes),
        .sort_max_bytes = atomic_load(&ctx->inst->agg_sort_max_bytes),
        .bucket_auto_max_bytes = atomic_load(&ctx->inst->agg_bucket_auto_max_bytes),
        .window_max_bytes = atomic_load(&ctx->inst->agg_window_max_bytes),
        .change_streams = ctx->inst->cl.oplog != NULL,
    };
    mf_pipeline *p = NULL;
    rc = mf_pipeline_parse(&a.pipeline, &o, &p, err);
    mf_collator_unref(collation); /* the pipeline holds its own reference */
    if (rc)
        return rc;
    /* $out and $merge write: not at a snapshot, and not with
     * linearizable (mongod's writer stages' supportsReadConcern) */
    const char *level = mfi_read_concern_level(cmd);
    if (mf_pipeline_writes(p) && !ctx->txn &&
        (strcmp(level, "linearizable") == 0 || strcmp(level, "snapshot") == 0)) {
        char why[96];
        snprintf(why, sizeof why, "$out and $merge cannot be used with a '%s' read concern level",
                 level);
        mf_pipeline_free(p);
        return mfi_read_concern_refuse("aggregate", cmd, why, err);
    }
    if (a.explain && explain > 1 && mf_pipeline_writes(p)) {
        /* explain must not write: mongod refuses execution statistics of
         * a $out or $merge (51029 / 51184) */
        mf_pipeline_free(p);
        return mf_error_set(err, 51029,
                            "Explain of an aggregation ending in $out or $merge cannot run it: use "
                            "the 'queryPlanner' verbosity");
    }
    if (a.explain) {
        /* explain runs nothing unless a verbosity (from the explain
         * command) asks for statistics */
        BSON_APPEND_UTF8(reply, "explainVersion", "1");
        /* `explain: true` (explain 0) is queryPlanner's */
        rc = mf_pipeline_explain(p, explain > 1 ? explain - 1 : 0, reply, err);
        if (rc == 0) {
            bson_t si;
            BSON_APPEND_DOCUMENT(reply, "command", cmd);
            BSON_APPEND_DOCUMENT_BEGIN(reply, "serverInfo", &si);
            BSON_APPEND_UTF8(&si, "host", ctx->inst->host);
            BSON_APPEND_UTF8(&si, "version", "7.0.0");
            bson_append_document_end(reply, &si);
        }
        mf_pipeline_free(p);
        return rc;
    }
    /* The read is planned now, as mongod's PipelineD prepares the
     * pipeline's cursor source before it runs: what planning refuses (a
     * bad hint, $text with a hint, no text index) is the command's error,
     * not the executor's. */
    if ((rc = mf_pipeline_prepare(p, err)) != 0) {
        mf_pipeline_free(p);
        if (rc == MF_MaxTimeMSExpired) { /* trials that ran out of time: running */
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            mf_error_set(err, rc, "PlanExecutor error during aggregation :: caused by :: %s", msg);
        }
        return rc;
    }
    if (mf_pipeline_writes(p)) {
        /* $out / $merge: run to the end here, reply an empty, closed
         * cursor; the writes are durable before the reply (the sinks sync
         * at commit). */
        bson_t d, c, fb;
        bool eof = false;
        mfi_agg_bypass_validation(mfi_bypass_validation(cmd));
        while (rc == 0 && !eof) {
            rc = mf_pipeline_next(p, &d, &eof, err);
            if (rc == 0 && !eof)
                bson_destroy(&d);
        }
        mfi_agg_bypass_validation(false);
        if (rc && ctx->err_info)
            bson_concat(ctx->err_info, mf_pipeline_error_info(p));
        mf_pipeline_free(p);
        if (rc) {
            if (rc != MF_QueryPlanKilled)
                mfi_executor_error(err, "aggregate command");
            return rc;
        }
        BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &c);
        BSON_APPEND_ARRAY_BEGIN(&c, "firstBatch", &fb);
        bson_append_array_end(&c, &fb);
        BSON_APPEND_INT64(&c, "id", 0);
        BSON_APPEND_UTF8(&c, "ns", ns);
        bson_append_document_end(reply, &c);
        return 0;
    }
    mfi_cursor *cur = calloc(1, sizeof *cur);
    if (!cur) {
        mf_pipeline_free(p);
        return mf_error_oom(err);
    }
    snprintf(cur->ns, sizeof cur->ns, "%s", ns);
    cur->pipeline = p;
    cur->limit = -1;
    cur->deadline.at_us = a.deadline;
    int64_t first = a.batch_size >= 0 ? a.batch_size : DEFAULT_FIRST_BATCH;
    rc = mfi_cursor_first_batch(ctx, cur, first, false, reply, err);
    if (rc && rc != MF_QueryPlanKilled &&
        strncmp(err->msg, "PlanExecutor error", 18) != 0) {
        /* mongod's context for an error met while running a pipeline */
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        mf_error_set(err, err->code, "PlanExecutor error during aggregation :: caused by :: %s",
                     msg);
    }
    return rc;
}

/* ----------------------------------------------- reads of views (views.c) */

int mfi_aggregate_each(mf_cmd_ctx *ctx, const char *ns, const bson_t *stages,
                       const bson_iter_t *collation_arg, const char *cmdname,
                       int (*fn)(void *arg, const bson_t *doc, mf_error *err), void *arg,
                       mf_collator **used, mf_error *err)
{
    agg_args a;
    memset(&a, 0, sizeof a);
    bson_init_static(&a.pipeline, bson_get_data(stages), stages->len);
    if (collation_arg && mfi_collation_given(collation_arg)) {
        a.collation = *collation_arg;
        a.has_collation = true;
    }
    a.deadline = ctx->deadline.at_us;
    mfi_resolved_view view;
    bson_t combined = BSON_INITIALIZER;
    mf_collator *collation = NULL;
    const char *coll = strchr(ns, '.') + 1;
    int rc = mfi_view_resolve(ctx->inst, ns, &view, err);
    if (rc)
        return rc;
    if (view.is_view)
        rc = on_view(ns, &view, &a, &combined, &coll, &collation, err);
    else
        rc = resolve_collation(ctx, &a, ns, &collation, err);
    char tmp[4096];
    mfi_tmpdir_of(ctx->inst, tmp, sizeof tmp);
    mf_agg_opts o = {
        .db = ctx->db,
        .coll = coll,
        .env = &ctx->inst->agg_env,
        .collation = collation,
        .tmpdir = tmp,
        .deadline_us = a.deadline,
        .now_ms = mf_clock_wall_ms(),
        .group_max_bytes = atomic_load(&ctx->inst->agg_group_max_bytes),
        .sort_max_bytes = atomic_load(&ctx->inst->agg_sort_max_bytes),
        .bucket_auto_max_bytes = atomic_load(&ctx->inst->agg_bucket_auto_max_bytes),
        .window_max_bytes = atomic_load(&ctx->inst->agg_window_max_bytes),
    };
    mf_pipeline *p = NULL;
    if (rc == 0)
        rc = mf_pipeline_parse(&a.pipeline, &o, &p, err);
    if (rc == 0)
        rc = mf_pipeline_prepare(p, err);
    bool eof = false;
    while (rc == 0 && !eof) {
        bson_t d;
        rc = mf_pipeline_next(p, &d, &eof, err);
        if (rc == 0 && !eof) {
            rc = fn(arg, &d, err);
            bson_destroy(&d);
        }
    }
    if (rc && p && rc != MF_QueryPlanKilled && strncmp(err->msg, "PlanExecutor error", 18) != 0)
        mfi_executor_error(err, cmdname);
    mf_pipeline_free(p);
    if (used)
        *used = collation;
    else
        mf_collator_unref(collation);
    mfi_view_clear(&view);
    bson_destroy(&combined);
    return rc;
}
