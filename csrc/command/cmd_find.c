/*
 * cmd_find.c -- find, distinct and planCacheClear (getMore and killCursors,
 * and the batches every cursor command replies with, are cursor.c's).
 *
 * find parses everything first (filter, projection, sort: a bad one is an
 * error even when the collection does not exist), then plans a scan
 * (query/plan.c) under the collection's read lock.  Without a sort the
 * scan itself is the cursor's source: each batch takes the locks, seeks
 * back to where the last one stopped, and releases them.  With a sort that
 * the scan does not already provide, the whole result goes through the
 * sorter (100 MB in memory, spilling with allowDiskUse) and the cursor
 * reads the sorter.
 *
 * Batches as mongod's: at most batchSize documents (101 for a first batch
 * without one) and 16 MiB; the document that would overflow a batch is
 * kept for the next.  A cursor whose source is exhausted, whose limit is
 * reached or that was asked for a single batch is closed (id 0).
 */
#include "command_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_FIRST_BATCH 101
#define SORT_MEMORY_LIMIT (100 * 1024 * 1024)

/* A sub-document argument as a static bson_t. */
static bool doc_empty(const bson_t *d)
{
    return !d || d->len <= 5;
}

/* A non-negative whole-number argument (skip, limit, batchSize). */
static int count_arg(const char *cmdname, const bson_iter_t *it, int64_t *out, mf_error *err)
{
    if (!mfi_as_int64(it, out))
        return mfi_type_error(err, cmdname, bson_iter_key(it), it, "long");
    if (*out < 0)
        return mf_error_set(err, 51024, "BSON field '%s' value must be >= 0, actual value '%lld'",
                            bson_iter_key(it), (long long)*out);
    return 0;
}

/* ------------------------------------------------------------------ find */

typedef struct find_args {
    bson_t filter, projection, sort, let, min, max;
    bool has_filter, has_projection, has_sort, has_let, has_min, has_max;
    bson_iter_t hint;
    bool has_hint;
    bool natural_sort;      /* the sort was {$natural: ...} (now the hint) */
    bool user_hint;         /* a hint given, not empty (before the $natural sort's) */
    bool natural_hint;      /* that hint is {$natural: ...} */
    int64_t skip, limit, batch_size; /* limit 0: none; batch_size -1: default */
    bool single_batch, allow_disk_use, no_cursor_timeout, show_record_id, return_key;
    bool tailable, await_data;
    mf_collator *coll; /* the command's collation (one reference), if has_coll */
    bool has_coll;
} find_args;

static int parse_find(const bson_t *cmd, find_args *a, mf_error *err)
{
    bson_iter_t it;
    int rc = 0;
    memset(a, 0, sizeof *a);
    a->batch_size = -1;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "filter") == 0) {
            if (!(a->has_filter = mfi_doc_arg(&it, &a->filter)))
                rc = mfi_type_error(err, "find", k, &it, "object");
        } else if (strcmp(k, "projection") == 0) {
            if (!(a->has_projection = mfi_doc_arg(&it, &a->projection)))
                rc = mfi_type_error(err, "find", k, &it, "object");
        } else if (strcmp(k, "sort") == 0) {
            if (!(a->has_sort = mfi_doc_arg(&it, &a->sort)))
                rc = mfi_type_error(err, "find", k, &it, "object");
        } else if (strcmp(k, "hint") == 0) {
            if ((rc = mfi_hint_arg(&it, "find.hint", err)) != 0)
                break;
            a->hint = it;
            a->has_hint = true;
        } else if (strcmp(k, "skip") == 0) {
            rc = count_arg("find", &it, &a->skip, err);
        } else if (strcmp(k, "limit") == 0) {
            rc = count_arg("find", &it, &a->limit, err);
        } else if (strcmp(k, "batchSize") == 0) {
            rc = count_arg("find", &it, &a->batch_size, err);
        } else if (strcmp(k, "singleBatch") == 0) {
            a->single_batch = bson_iter_as_bool(&it);
        } else if (strcmp(k, "allowDiskUse") == 0) {
            a->allow_disk_use = bson_iter_as_bool(&it);
        } else if (strcmp(k, "noCursorTimeout") == 0) {
            a->no_cursor_timeout = bson_iter_as_bool(&it);
        } else if (strcmp(k, "showRecordId") == 0) {
            a->show_record_id = bson_iter_as_bool(&it);
        } else if (strcmp(k, "let") == 0) {
            if (!(a->has_let = mfi_doc_arg(&it, &a->let)))
                rc = mfi_type_error(err, "find", k, &it, "object");
        } else if (strcmp(k, "collation") == 0) {
            mf_collator_unref(a->coll);
            a->coll = NULL;
            a->has_coll = mfi_collation_given(&it);
            if (a->has_coll)
                rc = mfi_collation_arg(&it, "find", k, &a->coll, err);
        } else if (strcmp(k, "tailable") == 0) {
            a->tailable = bson_iter_as_bool(&it);
        } else if (strcmp(k, "awaitData") == 0) {
            a->await_data = bson_iter_as_bool(&it);
        } else if (strcmp(k, "min") == 0) {
            if (!(a->has_min = mfi_doc_arg(&it, &a->min)))
                rc = mfi_type_error(err, "find", k, &it, "object");
        } else if (strcmp(k, "max") == 0) {
            if (!(a->has_max = mfi_doc_arg(&it, &a->max)))
                rc = mfi_type_error(err, "find", k, &it, "object");
        } else if (strcmp(k, "returnKey") == 0) {
            a->return_key = bson_iter_as_bool(&it);
        } else if (strcmp(k, "oplogReplay") == 0 || strcmp(k, "allowPartialResults") == 0 ||
                   strcmp(k, "readOnce") == 0 || strcmp(k, "singleBatch") == 0 ||
                   strcmp(k, "term") == 0 || strcmp(k, "$_requestResumeToken") == 0 ||
                   strcmp(k, "$_resumeAfter") == 0 || strcmp(k, "rawData") == 0 ||
                   mfi_is_generic_arg(k)) {
            /* accepted; nothing to do */
        } else {
            rc = mf_error_set(err, 40415, "BSON field 'find.%s' is an unknown field.", k);
        }
    }
    /* query_request_helper's checks of a tailable find, tailable_mode's */
    bson_iter_t nat;
    if (rc == 0 && a->tailable && a->has_sort && !doc_empty(&a->sort) &&
        !(bson_iter_init(&nat, &a->sort) && bson_iter_next(&nat) &&
          strcmp(bson_iter_key(&nat), "$natural") == 0 && mfi_is_number(&nat) &&
          bson_iter_as_int64(&nat) == 1 && !bson_iter_next(&nat)))
        rc = mf_error_set(err, MF_BadValue,
                          "cannot use tailable option with a sort other than {$natural: 1}");
    if (rc == 0 && a->tailable && a->single_batch)
        rc = mf_error_set(err, MF_BadValue,
                          "cannot use tailable option with the 'singleBatch' option");
    if (rc == 0 && a->await_data && !a->tailable)
        rc = mf_error_set(err, MF_FailedToParse,
                          "Cannot set 'awaitData' without also setting 'tailable'");
    if (rc == 0)
        rc = mf_minmax_check(a->has_min ? &a->min : NULL, a->has_max ? &a->max : NULL, err);
    if (rc == 0) {
        bson_t h;
        a->user_hint = a->has_hint && !(BSON_ITER_HOLDS_DOCUMENT(&a->hint) &&
                                        mfi_doc_arg(&a->hint, &h) && bson_empty(&h));
        bson_iter_t first;
        a->natural_hint = a->user_hint && BSON_ITER_HOLDS_DOCUMENT(&a->hint) &&
                          mfi_doc_arg(&a->hint, &h) && bson_iter_init(&first, &h) &&
                          bson_iter_next(&first) && strcmp(bson_iter_key(&first), "$natural") == 0;
        bool had_sort = a->has_sort;
        rc = mfi_natural_sort(&a->sort, &a->has_sort, &a->hint, &a->has_hint, err);
        a->natural_sort = had_sort && !a->has_sort;
    }
    return rc;
}

/* The parsed parts of a query, freed together. */
typedef struct query_parts {
    mf_matcher *m;
    mf_projection *proj;
    mf_sort *sort;
} query_parts;

static void parts_free(query_parts *q)
{
    mf_matcher_free(q->m);
    mf_projection_free(q->proj);
    mf_sort_free(q->sort);
    memset(q, 0, sizeof *q);
}

/* Whether `filter` has a $near, $nearSphere or $geoNear condition (at the
 * top or in a top-level $and): the query then has geoNear metadata. */
/* What of a find mongod's CanonicalQuery checks beside its parts. */
typedef struct canon_opts {
    bool natural_sort, hint, natural_hint, tailable;
} canon_opts;

/* `hooks` compile the filter's $expr and the projection's computed fields;
 * strings compare under `coll`.  With `co` (find), mongod's checks of the
 * canonical query in its order: the filter, then what $text refuses
 * beside it (a $natural sort, a hint, a tailable cursor: BadValue), the
 * projection and the metadata it asks for (40218 where the query has
 * none: text score without $text, geoNear without $near; sortKey without
 * a sort), then the sort and its metadata. */
static int parse_parts(const bson_t *filter, const bson_t *projection, const bson_t *sort,
                       const mf_expr_hooks *hooks, const mf_collator *coll,
                       const canon_opts *co, query_parts *q, mf_error *err)
{
    static const bson_t empty = BSON_INITIALIZER;
    int rc;
    bool text = filter && mf_filter_has_text(filter);
    if (co && (rc = mf_filter_near_check(filter, text, co->natural_sort, co->natural_hint,
                                         err)) != 0)
        return rc;
    if (filter && mf_filter_has_near(filter)) {
        /* the planner's search by distance answers the near condition */
        bson_t rest;
        rc = mf_filter_strip_near(filter, &rest) == 0
                 ? mf_matcher_parse_coll(&rest, hooks, coll, &q->m, err)
                 : mf_error_oom(err);
        bson_destroy(&rest);
    } else {
        rc = mf_matcher_parse_coll(filter ? filter : &empty, hooks, coll, &q->m, err);
    }
    if (rc == 0 && co && text) {
        if (co->natural_sort)
            rc = mf_error_set(err, MF_BadValue,
                              "text expression not allowed with $natural sort order");
        else if (co->hint)
            rc = mf_error_set(err, MF_BadValue, "text and hint not allowed in same query");
        else if (co->tailable)
            rc = mf_error_set(err, MF_BadValue,
                              "text and tailable cursor not allowed in same query");
    }
    uint32_t unavailable = (text ? 0 : MF_META_BIT(MF_META_TEXT_SCORE)) |
                           (filter && mf_filter_has_near(filter) ? 0
                                                    : MF_META_BIT(MF_META_GEO_NEAR_DISTANCE) |
                                                          MF_META_BIT(MF_META_GEO_NEAR_POINT));
    bool has_sort = sort && !doc_empty(sort);
    if (rc == 0 && projection && !doc_empty(projection))
        rc = mf_projection_parse_coll(projection, filter ? filter : &empty, hooks, MF_PROJ_FIND,
                                      coll, &q->proj, err);
    uint32_t needs = mf_projection_meta_needs(q->proj);
    if (rc == 0 && (needs & unavailable))
        rc = mf_meta_unavailable(needs & unavailable, err);
    if (rc == 0 && (needs & MF_META_BIT(MF_META_SORT_KEY)) && !has_sort)
        rc = mf_error_set(err, MF_BadValue, "cannot use sortKey $meta projection without a sort");
    if (rc == 0 && has_sort)
        rc = mf_sort_parse_coll(sort, coll, &q->sort, err);
    needs = mf_sort_meta_needs(q->sort);
    if (rc == 0 && (needs & unavailable))
        rc = mf_meta_unavailable(needs & unavailable, err);
    if (rc)
        parts_free(q);
    return rc;
}

/* Run the whole scan through a sorter (collection lock held). */
static int sort_all(mf_cmd_ctx *ctx, mfi_cursor *cur, mf_coll *c, const mf_sort *sort,
                    int64_t skip, int64_t limit, bool allow_disk, mf_error *err)
{
    char tmp[4096];
    mf_engine *e = ctx->inst->engine;
    mfi_tmpdir_of(ctx->inst, tmp, sizeof tmp);
    if (allow_disk)
        (void)mkdir(tmp, 0700); /* an existing one is fine; a failure shows at spill */
    int64_t keep = limit > 0 ? skip + limit : 0;
    cur->sorter = mf_sorter_new(SORT_MEMORY_LIMIT, allow_disk, tmp, keep);
    if (!cur->sorter)
        return mf_error_oom(err);
    mf_buf key = {0}, rec = {0};
    mf_meta km = {0}; /* a row's metadata its sort key reads */
    int rc = 0;
    /* mongod projects before sorting only when the projection is simple,
     * keeps every sort field and there is no limit; otherwise it sorts
     * whole documents -- which counts against the memory limit. */
    cur->project_late = false;
    /* rows with metadata (a score, what the projection asks for): project
     * them now */
    bool text = mf_scan_is_text(cur->scan);
    if (cur->proj && !text && !cur->meta_needs) {
        bool keeps = limit == 0;
        for (size_t i = 0; keeps && i < mf_sort_nkeys(sort); i++)
            keeps = mf_projection_keeps(cur->proj, mf_sort_path(sort, i));
        cur->project_late = !keeps;
    }
    for (;;) {
        mf_scan_row row;
        bool valid;
        if ((rc = mf_deadline_check(&cur->deadline, err)) != 0)
            break;
        if ((rc = mf_scan_next(cur->scan, e, c, cur->matcher, &row, &valid, err)) != 0 || !valid)
            break;
        key.len = 0;
        mf_meta_clear(&km);
        if (text && row.scored)
            mf_meta_set_double(&km, MF_META_TEXT_SCORE, row.score);
        if ((rc = mf_sort_key_meta(sort, &row.doc, &km, &key, err)) != 0)
            break;
        if (cur->project_late) {
            uint8_t p16[16];
            for (int i = 0; i < 8; i++) {
                p16[i] = (uint8_t)((uint64_t)row.pos >> (8 * i));
                p16[8 + i] = (uint8_t)(row.rid >> (8 * i));
            }
            rec.len = 0;
            if (mf_buf_append(&rec, p16, 16) != 0 ||
                mf_buf_append(&rec, bson_get_data(&row.doc), row.doc.len) != 0) {
                rc = mf_error_oom(err);
                break;
            }
            rc = mf_sorter_add(cur->sorter, key.data, key.len, rec.data, rec.len, err);
        } else {
            bson_t out;
            const bson_t *doc;
            rc = mfi_cursor_shape(cur, &row, &out, &doc, err);
            if (rc == 0)
                rc = mf_sorter_add(cur->sorter, key.data, key.len, bson_get_data(doc), doc->len,
                                   err);
            if (mfi_cursor_reshaped(cur))
                bson_destroy(&out);
        }
        if (rc)
            break;
    }
    mf_buf_free(&key);
    mf_buf_free(&rec);
    mf_meta_clear(&km);
    if (rc == 0)
        rc = mf_sorter_finish(cur->sorter, err);
    /* The scan is done with (its caller frees it, or keeps it for
     * explain's counters): the cursor reads the sorter now. */
    for (int64_t i = 0; rc == 0 && i < skip; i++) {
        const uint8_t *d;
        size_t dl;
        bool valid;
        rc = mf_sorter_next(cur->sorter, &d, &dl, &valid, err);
        if (!valid)
            break;
    }
    cur->skip = 0;
    return rc;
}

/* What find and explain's find start from: the command parsed into `a`,
 * the query's collation (`*coll`, one reference or NULL), its sort (in
 * `q`), and a cursor holding the matcher, projection, skip and limit. */
static int find_prepare(mf_cmd_ctx *ctx, const bson_t *cmd, char ns[MF_MAX_NS_LEN + 1],
                        find_args *a, query_parts *q, mf_collator **coll, mfi_cursor **curp,
                        mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    mf_expr_ctx *xctx = NULL;
    mf_expr_hooks hooks;
    mf_sort *key_sort = NULL;
    uint32_t meta_needs = 0;
    *coll = NULL;
    int rc = mfi_coll_arg(ctx, cmd, ns, MF_MAX_NS_LEN + 1, err);
    if (rc == 0)
        rc = parse_find(cmd, a, err);
    if (rc == 0)
        rc = mf_cl_collation_of_ns(e, ns, a->has_coll, a->coll, coll, err);
    mf_collator_unref(a->coll);
    a->coll = NULL;
    if (rc == 0)
        rc = mf_expr_ctx_new_coll(a->has_let ? &a->let : NULL, mf_clock_wall_ms(), *coll, &xctx,
                                  err);
    if (rc == 0) {
        mf_expr_ctx_hooks(xctx, &hooks);
        canon_opts co = {.natural_sort = a->natural_sort, .hint = a->user_hint,
                         .natural_hint = a->natural_hint, .tailable = a->tailable};
        rc = parse_parts(a->has_filter ? &a->filter : NULL,
                         a->has_projection ? &a->projection : NULL,
                         a->has_sort ? &a->sort : NULL, &hooks, *coll, &co, q, err);
        /* the metadata the projection asks of each row; sortKey's values
         * from a copy of the sort the cursor keeps */
        uint32_t needs = rc == 0 ? mf_projection_meta_needs(q->proj) : 0;
        if (rc == 0 && (needs & MF_META_BIT(MF_META_SORT_KEY)))
            rc = mf_sort_parse_coll(&a->sort, *coll, &key_sort, err);
        meta_needs = needs;
    }
    mfi_cursor *cur = rc == 0 ? calloc(1, sizeof *cur) : NULL;
    if (rc == 0 && !cur) {
        parts_free(q);
        rc = mf_error_oom(err);
    }
    if (rc) {
        mf_sort_free(key_sort);
        parts_free(q);
        mf_expr_ctx_free(xctx);
        mf_collator_unref(*coll);
        *coll = NULL;
        return rc;
    }
    cur->xctx = xctx;
    cur->meta_needs = meta_needs;
    cur->key_sort = key_sort;
    snprintf(cur->ns, sizeof cur->ns, "%s", ns);
    cur->matcher = q->m;
    cur->proj = q->proj;
    q->m = NULL;
    q->proj = NULL;
    cur->skip = a->skip;
    cur->limit = a->limit > 0 ? a->limit : -1;
    cur->no_timeout = a->no_cursor_timeout;
    cur->deadline.at_us = ctx->deadline.at_us; /* maxTimeMS, from the dispatcher */
    cur->show_record_id = a->show_record_id && !a->return_key;
    cur->return_key = a->return_key;
    if (a->return_key) { /* parsed, and refused if bad, but not applied */
        mf_projection_free(cur->proj);
        cur->proj = NULL;
    }
    *curp = cur;
    return 0;
}

/* Plan the cursor's scan of `c` (its lock held; `inst` counts the index
 * used, NULL for explain, which also times the scan) and, for a sort the
 * index does not give, run every row through the sorter.  `*running`:
 * planning succeeded, so a later error is the executor's. */
static int find_start(mf_cmd_ctx *ctx, mf_instance *inst, mfi_cursor *cur, mf_coll *c,
                      find_args *a, const query_parts *q, const mf_collator *coll, bool *sorted,
                      bool *running, mf_error *err)
{
    int rc;
    *sorted = *running = false;
    cur->has_coll = mf_cl_uuid(c, cur->coll_uuid);
    cur->ix = calloc(1, sizeof *cur->ix);
    rc = cur->ix ? mf_cl_indexes_load(c, cur->ix, err)
                 : mf_error_oom(err);
    if (rc == 0)
        rc = mf_cl_scan_new_ex(mfi_cl(inst), c, cur->ix, a->has_filter ? &a->filter : NULL,
                             a->has_hint ? &a->hint : NULL, q->sort ? &a->sort : NULL, coll,
                             &(mf_scan_extra){.min = a->has_min ? &a->min : NULL,
                                              .max = a->has_max ? &a->max : NULL,
                                              .sort_trials = q->sort != NULL,
                                              .projection =
                                                  a->has_projection ? &a->projection : NULL,
                                              .explain = inst == NULL},
                             &cur->scan, sorted, err);
    *running = rc == 0;
    if (rc == 0) {
        mf_scan_deadline(cur->scan, &cur->deadline);
        mf_scan_want_pos(cur->scan, cur->proj && mf_projection_needs_pos(cur->proj));
        mf_scan_timed(cur->scan, inst == NULL);
        /* A trial stops at the rows the first batch needs, as mongod's.
         * Under a sort that an index scan's rows come in only when no
         * trial differs in giving it, its rows are not the query's. */
        bool mixed = q->sort && mf_scan_sort_undecided(cur->scan);
        int64_t first = a->limit > 0 ? a->limit : 0;
        if (a->batch_size > 0 && (first == 0 || a->batch_size < first))
            first = a->batch_size;
        if ((!q->sort || mixed) && first > 0)
            mf_scan_trial_results(cur->scan, (uint64_t)(first + a->skip));
        /* Whether to sort depends on the winner: the trials run now. */
        if (mixed && (rc = mf_scan_decide(cur->scan, ctx->inst->engine, c, cur->matcher,
                                          err)) == 0)
            *sorted = mf_scan_sorted(cur->scan);
    }
    if (rc == 0 && q->sort && !*sorted)
        rc = sort_all(ctx, cur, c, q->sort, a->skip, a->limit, a->allow_disk_use, err);
    return rc;
}

int mfi_cmd_find(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    find_args a = {0};
    query_parts q = {0};
    mf_collator *coll = NULL;
    mfi_cursor *cur = NULL;
    bool view = false;
    int rc = mfi_view_find(ctx, cmd, 0, reply, &view, err);
    if (view)
        return rc;
    rc = find_prepare(ctx, cmd, ns, &a, &q, &coll, &cur, err);
    if (rc)
        return rc;
    atomic_fetch_add_explicit(&ctx->inst->counters.op_query, 1, memory_order_relaxed);

    bool exhausted = true;
    int64_t first = a.batch_size >= 0 ? a.batch_size : DEFAULT_FIRST_BATCH;
    mfi_batch b = {.max_docs = first};
    bool running = false; /* errors past planning are the executor's */
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    /* a tailable cursor: a capped collection's, read in insertion order */
    bson_t natural = BSON_INITIALIZER, nat;
    BSON_APPEND_DOCUMENT_BEGIN(&natural, "hint", &nat);
    BSON_APPEND_INT32(&nat, "$natural", 1);
    bson_append_document_end(&natural, &nat);
    if (!c && a.has_filter && mf_filter_has_text(&a.filter)) /* no collection, no text index */
        rc = mf_error_set(err, MF_IndexNotFound, "text index required for $text query");
    else if (c && a.tailable && !mf_cl_capped(c, NULL, NULL))
        rc = mf_error_set(err, MF_BadValue,
                          "error processing query: tailable cursor requested on non capped "
                          "collection");
    else if (c && a.tailable) /* mongod's planner: a collection scan, whatever the hint */
        a.has_hint = bson_iter_init_find(&a.hint, &natural, "hint");
    cur->tailable = a.tailable;
    cur->await_data = a.await_data;
    if (c && rc == 0) {
        bool sorted;
        mf_coll_lock(c, false);
        rc = find_start(ctx, ctx->inst, cur, c, &a, &q, coll, &sorted, &running, err);
        if (rc == 0 && cur->tailable)
            mf_scan_tail(cur->scan);
        if (rc == 0 && cur->sorter) { /* the cursor reads the sorter now */
            mfi_op_debug_scan(ctx->dbg, cur->scan, &cur->stats_seen);
            if (ctx->dbg)
                ctx->dbg->has_sort_stage = true;
            mf_scan_free(cur->scan);
            cur->scan = NULL;
        }
        if (rc == 0)
            rc = mfi_cursor_fill(cur, e, c, &b, &cur->deadline, &exhausted, err);
        if (rc == 0) /* while locked: the batch refers to the collection's pages */
            rc = mfi_batch_reply(&b, reply, "firstBatch", ns, err);
        if (cur->scan) {
            mfi_op_debug_scan(ctx->dbg, cur->scan, &cur->stats_seen);
            mf_scan_release(cur->scan);
        }
        mf_coll_unlock(c);
    } else if (rc == 0) {
        rc = mfi_batch_reply(&b, reply, "firstBatch", ns, err);
        if (ctx->dbg) /* no collection: mongod's EOF plan */
            snprintf(ctx->dbg->plan_summary, sizeof ctx->dbg->plan_summary, "EOF");
    }
    bson_destroy(&natural);
    mf_engine_catalog_unlock(e);
    parts_free(&q);
    mf_collator_unref(coll);
    if (rc == 0 && ctx->dbg) {
        ctx->dbg->nreturned = b.n;
        ctx->dbg->cursor_exhausted = exhausted || a.single_batch;
    }
    if (rc == 0) {
        if (!(exhausted || a.single_batch)) {
            /* what getMore's profile entries show */
            cur->origin = bson_copy(cmd);
            if (ctx->dbg)
                memcpy(cur->plan_summary, ctx->dbg->plan_summary, sizeof cur->plan_summary);
            int64_t id = mfi_cursor_register(ctx, cur);
            mfi_batch_set_id(&b, id);
            if (ctx->dbg)
                ctx->dbg->cursorid = id;
        } else {
            mfi_cursor_free(cur);
        }
    } else {
        mfi_batch_free(&b);
        mfi_cursor_free(cur);
        if (running)
            mfi_executor_error(err, "find command");
    }
    return rc;
}

int mfi_find_explain(mf_cmd_ctx *ctx, const bson_t *cmd, bool stats, mfi_find_explained *x,
                     mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    find_args a = {0};
    query_parts q = {0};
    mfi_cursor *cur = NULL;
    memset(x, 0, sizeof *x);
    bson_init(&x->plan);
    bson_init(&x->exec);
    mfi_plans_init(&x->plans);
    int rc = find_prepare(ctx, cmd, x->ns, &a, &q, &x->coll, &cur, err);
    if (rc)
        return rc;
    static const bson_t empty = BSON_INITIALIZER;
    mfi_view(&x->filter, a.has_filter ? &a.filter : &empty);
    mfi_view(&x->sort, &a.sort);
    x->has_sort = q.sort != NULL;
    mfi_view(&x->proj, &a.projection);
    x->has_proj = cur->proj != NULL;
    x->return_key = cur->return_key;
    x->skip = a.skip;
    x->limit = a.limit;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, x->ns);
    if (c) {
        bool running;
        x->found = true;
        mf_coll_lock(c, false);
        /* Planned as find plans it, and, for executionStats, run as find
         * runs it: every batch filled, and dropped. */
        rc = find_start(ctx, NULL, cur, c, &a, &q, x->coll, &x->sorted, &running, err);
        /* queryPlanner alone runs nothing: the plans' trials choose now */
        if (rc == 0 && cur->scan)
            rc = mf_scan_decide(cur->scan, e, c, cur->matcher, err);
        bool exhausted = !stats;
        while (rc == 0 && !exhausted) {
            mfi_batch b = {.max_docs = -1, .count_only = true};
            rc = mfi_cursor_fill(cur, e, c, &b, &cur->deadline, &exhausted, err);
            x->n_returned += b.n;
            mfi_batch_free(&b);
        }
        if (rc == 0) {
            const mf_scan_stats *st = mf_scan_get_stats(cur->scan);
            x->keys = st->keys_examined;
            x->docs = st->docs_examined;
            rc = mf_scan_explain(cur->scan, false, &x->plan);
            if (rc == 0 && stats)
                rc = mf_scan_explain(cur->scan, true, &x->exec);
            if (rc == 0)
                rc = mfi_plans_explain(cur->scan, &x->plans);
            if (rc)
                rc = mf_error_set(err, MF_InternalError, "explain: out of memory");
        }
        mf_coll_unlock(c);
    }
    mf_engine_catalog_unlock(e);
    parts_free(&q);
    mfi_cursor_free(cur);
    if (rc) {
        mfi_find_explained_free(x);
        memset(x, 0, sizeof *x);
        bson_init(&x->plan);
        bson_init(&x->exec);
        mfi_plans_init(&x->plans);
    }
    return rc;
}

void mfi_find_explained_free(mfi_find_explained *x)
{
    bson_destroy(&x->plan);
    bson_destroy(&x->exec);
    mfi_plans_free(&x->plans);
    mf_collator_unref(x->coll);
    x->coll = NULL;
}

/* --------------------------------------------------------------- distinct */

typedef struct distinct_value {
    mf_buf key;   /* key encoding: order and equality */
    mf_buf value; /* the BSON document {"": value} (bytes: the array of
                     these is moved by realloc and qsort, which a bson_t
                     -- it points into itself -- would not survive) */
    uint64_t seq; /* order of arrival: of equal values the first stays */
} distinct_value;

typedef struct distinct_set {
    distinct_value *v;
    size_t n, cap;
    size_t bytes;
    uint64_t seq;
    const mf_collator *coll; /* values equal under it are one */
} distinct_set;

static int set_add(distinct_set *s, const bson_iter_t *value, mf_error *err)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        distinct_value *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return mf_error_oom(err);
        s->v = v;
        s->cap = cap;
    }
    distinct_value *d = &s->v[s->n];
    memset(d, 0, sizeof *d);
    d->seq = s->seq++;
    if (mf_bsonx_key_append_coll(&d->key, value, false, s->coll) != 0)
        return mf_error_oom(err);
    bson_t one = BSON_INITIALIZER;
    mf_bsonx_append_iter(&one, "", 0, value);
    int rc = mf_buf_append(&d->value, bson_get_data(&one), one.len);
    bson_destroy(&one);
    if (rc != 0) {
        mf_buf_free(&d->key);
        return mf_error_oom(err);
    }
    s->n++;
    return 0;
}

static int cmp_keys(const distinct_value *x, const distinct_value *y)
{
    size_t n = x->key.len < y->key.len ? x->key.len : y->key.len;
    int c = memcmp(x->key.data, y->key.data, n);
    return c ? c : (x->key.len > y->key.len) - (x->key.len < y->key.len);
}

/* By key, then by arrival. */
static int cmp_values(const void *a, const void *b)
{
    const distinct_value *x = a, *y = b;
    int c = cmp_keys(x, y);
    return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/* Sort and drop duplicates: of values equal in MongoDB's sense (1 and 1.0;
 * under a collation, "a" and "A") the first to arrive stays, as in
 * mongod's set. */
static void set_dedup(distinct_set *s)
{
    if (s->n == 0)
        return;
    qsort(s->v, s->n, sizeof *s->v, cmp_values);
    size_t w = 1;
    for (size_t r = 1; r < s->n; r++) {
        if (cmp_keys(&s->v[w - 1], &s->v[r]) == 0) {
            mf_buf_free(&s->v[r].key);
            mf_buf_free(&s->v[r].value);
            continue;
        }
        s->v[w++] = s->v[r];
    }
    s->n = w;
}

static void set_free(distinct_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        mf_buf_free(&s->v[i].key);
        mf_buf_free(&s->v[i].value);
    }
    free(s->v);
}

/* The values at dotted `path` under `container` (mongod's getFieldsDotted:
 * arrays along the way are walked element by element, a numeric component
 * also indexes one; an array at the end contributes its elements). */
static int collect(distinct_set *s, const bson_iter_t *container, const char *path,
                   mf_error *err)
{
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    bson_iter_t child, f;
    int rc = 0;
    if (!bson_iter_recurse(container, &child))
        return 0;
    bool is_array = BSON_ITER_HOLDS_ARRAY(container);
    if (is_array) {
        /* A numeric component names one element; otherwise go into each
         * document element with the same path. */
        bool numeric = n > 0;
        for (size_t i = 0; i < n; i++)
            numeric = numeric && path[i] >= '0' && path[i] <= '9';
        while (rc == 0 && bson_iter_next(&child)) {
            if (numeric && strlen(bson_iter_key(&child)) == n &&
                strncmp(bson_iter_key(&child), path, n) == 0) {
                if (!dot)
                    rc = set_add(s, &child, err);
                else if (BSON_ITER_HOLDS_DOCUMENT(&child) || BSON_ITER_HOLDS_ARRAY(&child))
                    rc = collect(s, &child, dot + 1, err);
            } else if (!numeric && BSON_ITER_HOLDS_DOCUMENT(&child)) {
                rc = collect(s, &child, path, err);
            }
        }
        return rc;
    }
    f = child;
    bool found = false;
    while (bson_iter_next(&f))
        if (strlen(bson_iter_key(&f)) == n && strncmp(bson_iter_key(&f), path, n) == 0) {
            found = true;
            break;
        }
    if (!found)
        return 0;
    if (dot) {
        if (BSON_ITER_HOLDS_DOCUMENT(&f) || BSON_ITER_HOLDS_ARRAY(&f))
            rc = collect(s, &f, dot + 1, err);
        return rc;
    }
    if (BSON_ITER_HOLDS_ARRAY(&f)) {
        bson_iter_t el;
        bson_iter_recurse(&f, &el);
        while (rc == 0 && bson_iter_next(&el))
            rc = set_add(s, &el, err);
        return rc;
    }
    return set_add(s, &f, err);
}

/* The values of a distinct as its reply's `values` (17217 past 16 MB). */
static int values_reply(distinct_set *set, bson_t *reply, mf_error *err)
{
    set_dedup(set);
    bson_t values;
    size_t bytes = 0;
    for (size_t i = 0; i < set->n; i++)
        bytes += set->v[i].value.len;
    if (bytes > MF_MAX_BSON_OBJECT_SIZE)
        return mf_error_set(err, 17217, "distinct too big, 16mb cap");
    BSON_APPEND_ARRAY_BEGIN(reply, "values", &values);
    for (size_t i = 0; i < set->n; i++) {
        char k[16];
        const char *kp;
        bson_iter_t v;
        bson_t one;
        mf_uint32_to_key((uint32_t)i, &kp, k, sizeof k);
        if (bson_init_static(&one, set->v[i].value.data, set->v[i].value.len) &&
            bson_iter_init(&v, &one) && bson_iter_next(&v))
            mf_bsonx_append_iter(&values, kp, -1, &v);
    }
    bson_append_array_end(reply, &values);
    return 0;
}

typedef struct view_distinct_arg {
    distinct_set *set;
    const char *key;
} view_distinct_arg;

static int view_distinct_doc(void *arg, const bson_t *doc, mf_error *err)
{
    view_distinct_arg *a = arg;
    bson_t wrap = BSON_INITIALIZER;
    bson_iter_t root;
    bson_append_document(&wrap, "", 0, doc);
    bson_iter_init(&root, &wrap);
    bson_iter_next(&root);
    int rc = collect(a->set, &root, a->key, err);
    bson_destroy(&wrap);
    return rc;
}

/* distinct on view `ns`: the view's documents (after `query`), under its
 * collation, through the same path semantics as a collection's. */
static int view_distinct(mf_cmd_ctx *ctx, const char *ns, const char *key, const bson_t *query,
                         const bson_iter_t *coll_arg, bson_t *reply, mf_error *err)
{
    mfi_resolved_view v;
    mf_collator *coll = NULL;
    int rc = mfi_view_resolve(ctx->inst, ns, &v, err);
    if (rc)
        return rc;
    rc = mf_collator_new_doc(&v.collation, &coll, err);
    mfi_view_clear(&v);
    bson_t stages = BSON_INITIALIZER, st;
    if (query) {
        BSON_APPEND_DOCUMENT_BEGIN(&stages, "0", &st);
        BSON_APPEND_DOCUMENT(&st, "$match", query);
        bson_append_document_end(&stages, &st);
    }
    distinct_set set = {.coll = coll};
    view_distinct_arg a = {&set, key};
    if (rc == 0)
        rc = mfi_aggregate_each(ctx, ns, &stages, coll_arg, "distinct command", view_distinct_doc,
                                &a, NULL, err);
    if (rc == 0)
        rc = values_reply(&set, reply, err);
    set_free(&set);
    bson_destroy(&stages);
    mf_collator_unref(coll);
    return rc;
}

int mfi_cmd_distinct(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    bson_iter_t it, hint, coll_arg;
    bson_t query;
    bool has_query = false, has_hint = false, has_coll = false;
    const char *key = NULL;
    int rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err);
    if (rc)
        return rc;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "key") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return mfi_type_error(err, "distinct", k, &it, "string");
            key = bson_iter_utf8(&it, NULL);
        } else if (strcmp(k, "query") == 0) {
            if (BSON_ITER_HOLDS_NULL(&it))
                continue;
            if (!(has_query = mfi_doc_arg(&it, &query)))
                return mfi_type_error(err, "distinct", k, &it, "object");
        } else if (strcmp(k, "hint") == 0) {
            if ((rc = mfi_hint_arg(&it, "distinct.hint", err)) != 0)
                return rc;
            hint = it;
            has_hint = true;
        } else if (strcmp(k, "collation") == 0) {
            coll_arg = it; /* parsed below, once every field is known good */
            has_coll = true;
        } else if (strcmp(k, "rawData") == 0 || mfi_is_generic_arg(k)) {
        } else {
            return mf_error_set(err, 40415, "BSON field 'distinct.%s' is an unknown field.", k);
        }
    }
    if (rc)
        return rc;
    if (!key)
        return mf_error_set(err, 40414,
                            "BSON field 'distinct.key' is missing but a required field");
    if (mfi_is_view(ctx->inst, ns))
        return view_distinct(ctx, ns, key, has_query ? &query : NULL,
                             has_coll ? &coll_arg : NULL, reply, err);
    query_parts q = {0};
    mf_expr_ctx *xctx = NULL;
    mf_expr_hooks hooks;
    mf_collator *coll = NULL;
    if ((rc = mfi_collation_of_arg(e, ns, has_coll ? &coll_arg : NULL, "distinct", &coll, err)))
        return rc;
    if ((rc = mf_expr_ctx_new_coll(NULL, mf_clock_wall_ms(), coll, &xctx, err)) != 0) {
        mf_collator_unref(coll);
        return rc;
    }
    mf_expr_ctx_hooks(xctx, &hooks);
    if ((rc = parse_parts(has_query ? &query : NULL, NULL, NULL, &hooks, coll, NULL, &q, err)) != 0) {
        mf_expr_ctx_free(xctx);
        mf_collator_unref(coll);
        return rc;
    }
    distinct_set set = {.coll = coll};
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (c) {
        mf_scan *scan = NULL;
        bool sorted;
        size_t compact_at = 4096;
        mf_coll_lock(c, false);
        mf_cl_indexes ix = {0};
        rc = mf_cl_indexes_load(c, &ix, err);
        if (rc == 0)
            rc = mf_cl_scan_new_ex(mfi_cl(ctx->inst), c, &ix, has_query ? &query : NULL,
                                 has_hint ? &hint : NULL, NULL, coll,
                                 &(mf_scan_extra){.distinct_key = key}, &scan, &sorted, err);
        bool running = rc == 0; /* errors past planning are the executor's */
        if (rc == 0)
            mf_scan_deadline(scan, &ctx->deadline);
        while (rc == 0) {
            mf_scan_row row;
            bool valid;
            bson_iter_t root;
            if ((rc = mf_deadline_check(&ctx->deadline, err)) != 0)
                break;
            if ((rc = mf_scan_next(scan, e, c, q.m, &row, &valid, err)) != 0 || !valid)
                break;
            /* The document as a container element: iterate from a wrapper. */
            bson_t wrap = BSON_INITIALIZER;
            bson_append_document(&wrap, "", 0, &row.doc);
            bson_iter_init(&root, &wrap);
            bson_iter_next(&root);
            rc = collect(&set, &root, key, err);
            bson_destroy(&wrap);
            if (rc == 0 && set.n > compact_at) {
                set_dedup(&set); /* keep the working set small */
                compact_at = set.n * 2 > 4096 ? set.n * 2 : 4096;
            }
        }
        if (rc && running && rc != MF_QueryPlanKilled)
            mfi_executor_error(err, "distinct command");
        mf_scan_stats since = {0};
        mfi_op_debug_scan(ctx->dbg, scan, &since);
        mf_scan_free(scan);
        mf_cl_indexes_free(&ix);
        mf_coll_unlock(c);
    }
    mf_engine_catalog_unlock(e);
    parts_free(&q);
    mf_expr_ctx_free(xctx);
    if (rc == 0)
        rc = values_reply(&set, reply, err);
    set_free(&set);
    mf_collator_unref(coll);
    return rc;
}

/* ------------------------------------------------------- planCacheClear */

/* {planCacheClear: <collection>, query?, sort?, projection?, collation?}
 * (mongod's plan_cache_clear_command.cpp): with a query, the entry of
 * that query shape, if any (the query parsed as find parses it, under the
 * collation given or the collection's); without one, every entry of the
 * collection.  A collection that does not exist has nothing to clear. */
int mfi_cmd_plan_cache_clear(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    int rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err);
    if (rc)
        return rc;
    (void)reply;
    mf_engine_catalog_lock(e, false);
    bool exists = mf_engine_coll(e, ns) != NULL;
    mf_engine_catalog_unlock(e);
    if (!exists || !ctx->inst->cl.plan_cache)
        return 0;
    static const char *const docs[] = {"query", "sort", "projection", "collation"};
    bson_t query, sort, projection, collation;
    bson_t *arg[4] = {&query, &sort, &projection, &collation};
    bool has[4] = {false};
    for (int i = 0; i < 4; i++)
        has[i] = bson_has_field(cmd, docs[i]);
    if (!has[0] && (has[1] || has[2] || has[3]))
        return mf_error_set(err, MF_BadValue,
                            "sort, projection, or collation provided without query");
    bson_iter_t at, coll_arg;
    for (int i = 0; i < 4; i++) { /* in mongod's order */
        if (has[i] && bson_iter_init_find(&at, cmd, docs[i]) && i == 3)
            coll_arg = at;
        if (has[i] && !mfi_doc_arg(&at, arg[i]))
            return mf_error_set(err, MF_BadValue, "%s field %s must be an object",
                                i == 0 ? "required" : "optional", docs[i]);
        if (i == 3 && has[i] && bson_empty(arg[i]))
            return mf_error_set(err, MF_BadValue,
                                "optional field collation cannot be an empty object");
    }
    mf_collator *coll = NULL;
    mf_expr_ctx *xctx = NULL;
    query_parts q = {0};
    if (has[0]) { /* the shape must be a query find would take */
        mf_expr_hooks hooks;
        rc = mfi_collation_of_arg(e, ns, has[3] ? &coll_arg : NULL, "planCacheClear", &coll, err);
        if (rc == 0)
            rc = mf_expr_ctx_new_coll(NULL, mf_clock_wall_ms(), coll, &xctx, err);
        if (rc == 0) {
            mf_expr_ctx_hooks(xctx, &hooks);
            rc = parse_parts(&query, has[2] ? &projection : NULL, has[1] ? &sort : NULL, &hooks,
                             coll, NULL, &q, err);
            parts_free(&q);
        }
    }
    if (rc == 0) {
        mf_engine_catalog_lock(e, false);
        mf_coll *c = mf_engine_coll(e, ns);
        if (c) {
            mf_cl_indexes ix = {0};
            mf_coll_lock(c, false);
            if (!has[0] || (rc = mf_cl_indexes_load(c, &ix, err)) == 0)
                mf_plan_cache_clear(ctx->inst->cl.plan_cache, c, ix.v, ix.n, has[0], &query,
                                    has[1] ? &sort : NULL, has[2] ? &projection : NULL, coll);
            mf_cl_indexes_free(&ix);
            mf_coll_unlock(c);
        }
        mf_engine_catalog_unlock(e);
    }
    mf_expr_ctx_free(xctx);
    mf_collator_unref(coll);
    return rc;
}
