/*
 * cmd_explain.c -- explain for find, count, distinct, update, delete and
 * findAndModify, in mongod's shape:
 *
 *   {explainVersion: "1",
 *    queryPlanner: {namespace, indexFilterSet: false, parsedQuery,
 *                   winningPlan: {stage, ..., inputStage: {...}},
 *                   rejectedPlans: [the plans trial runs turned down]},
 *    executionStats: {executionSuccess, nReturned, executionTimeMillis,
 *                     totalKeysExamined, totalDocsExamined,
 *                     executionStages}          (verbosity permitting)
 *    command, serverInfo, ok}
 *
 * The scan's own stages (COLLSCAN, IDHACK, FETCH over IXSCAN with its
 * bounds) come from query/plan_explain.c; the stages above it (SORT, SKIP, LIMIT,
 * PROJECTION_*, COUNT, DELETE, UPDATE) are added here.  find is planned
 * and run by cmd_find.c, update, delete and findAndModify by cmd_update.c
 * (which writes nothing: DELETE and UPDATE report what would be deleted,
 * matched, modified and upserted, as mongod's do); count and distinct by
 * the loop here.
 */
#include "command_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct what {
    const char *op;       /* "find", "count", ... */
    bson_t filter;        /* the query (may be empty) */
    bson_t sort, proj; /* proj: find's (explain_find) */
    bool has_sort, has_proj, return_key;
    bson_iter_t hint;
    bool has_hint;
    int64_t skip, limit;
    const char *distinct_key;
    bson_iter_t coll;     /* the collation the command gives */
    bool has_coll;
} what;

/* Read the parts of count and distinct that shape their plan. */
static void read_what(const char *op, const bson_t *inner, what *w)
{
    bson_iter_t it;
    static const bson_t empty = BSON_INITIALIZER;
    memset(w, 0, sizeof *w);
    w->op = op;
    bson_init_static(&w->filter, bson_get_data(&empty), empty.len);
    bson_iter_init(&it, inner);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "query") == 0 && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            mfi_doc_arg(&it, &w->filter);
        } else if (strcmp(k, "hint") == 0) {
            w->hint = it;
            w->has_hint = true;
        } else if (strcmp(k, "skip") == 0) {
            mfi_as_int64(&it, &w->skip);
        } else if (strcmp(k, "limit") == 0) {
            mfi_as_int64(&it, &w->limit);
            if (w->limit < 0)
                w->limit = -w->limit;
        } else if (strcmp(k, "key") == 0 && strcmp(op, "distinct") == 0 &&
                   BSON_ITER_HOLDS_UTF8(&it)) {
            w->distinct_key = bson_iter_utf8(&it, NULL);
        } else if (strcmp(k, "collation") == 0) {
            w->coll = it;
            w->has_coll = mfi_collation_given(&it);
        }
    }
}

/* Wrap `inner` (a stage document, consumed) in a stage `name` whose own
 * fields `fill` appends. */
static void wrap(bson_t *inner, const char *name, void (*fill)(bson_t *, const what *, void *),
                 const what *w, void *arg)
{
    bson_t outer = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&outer, "stage", name);
    if (fill)
        fill(&outer, w, arg);
    BSON_APPEND_DOCUMENT(&outer, "inputStage", inner);
    bson_destroy(inner);
    bson_steal(inner, &outer);
}

static void fill_sort(bson_t *s, const what *w, void *arg)
{
    (void)arg;
    BSON_APPEND_DOCUMENT(s, "sortPattern", &w->sort);
    BSON_APPEND_INT32(s, "memLimit", 104857600);
    if (w->limit)
        BSON_APPEND_INT64(s, "limitAmount", w->skip + w->limit);
    BSON_APPEND_UTF8(s, "type", "simple");
}

static void fill_skip(bson_t *s, const what *w, void *arg)
{
    (void)arg;
    BSON_APPEND_INT64(s, "skipAmount", w->skip);
}

static void fill_limit(bson_t *s, const what *w, void *arg)
{
    (void)arg;
    BSON_APPEND_INT64(s, "limitAmount", w->limit);
}

static void fill_proj(bson_t *s, const what *w, void *arg)
{
    (void)arg;
    BSON_APPEND_DOCUMENT(s, "transformBy", &w->proj);
}

static void fill_stats(bson_t *s, const what *w, void *arg)
{
    (void)w;
    const int64_t *n = arg;
    BSON_APPEND_INT64(s, "nReturned", *n);
}

/* COUNT returns no row: it counts them ({counted, skipped}). */
static void fill_count(bson_t *s, const what *w, void *arg)
{
    (void)w;
    const int64_t *n = arg;
    BSON_APPEND_INT64(s, "nReturned", 0);
    BSON_APPEND_INT64(s, "nCounted", n[0]);
    BSON_APPEND_INT64(s, "nSkipped", n[1]);
}

/* UPDATE and DELETE: what they would write, and the document
 * findAndModify would return. */
static void fill_write(bson_t *s, const what *w, void *arg)
{
    (void)w;
    const mfi_write_explained *x = arg;
    BSON_APPEND_INT64(s, "nReturned", x->n_returned);
    if (x->is_delete) {
        BSON_APPEND_INT64(s, "nWouldDelete", x->n_matched);
    } else {
        BSON_APPEND_INT64(s, "nMatched", x->n_matched);
        BSON_APPEND_INT64(s, "nWouldModify", x->n_modified);
        BSON_APPEND_INT64(s, "nWouldUpsert", x->n_upserted);
    }
}

/* wrap(), then, for executionStats (`n` not NULL), the rows the stage
 * returned after its inputStage. */
static void wrap_counted(bson_t *inner, const char *name,
                         void (*fill)(bson_t *, const what *, void *), const what *w, int64_t *n)
{
    wrap(inner, name, fill, w, NULL);
    if (n)
        fill_stats(inner, w, n);
}

/* The plan of a collection that does not exist. */
static void put_eof(bson_t *plan, bson_t *exec, bool stats)
{
    BSON_APPEND_UTF8(plan, "stage", "EOF");
    if (stats) {
        BSON_APPEND_UTF8(exec, "stage", "EOF");
        BSON_APPEND_INT64(exec, "nReturned", 0);
    }
}

/* find's stages above its scan (and SORT, `sorts`): SKIP, LIMIT (a
 * SORT holds the limit instead) and projection; each with the rows it
 * returned when `n` is not NULL: `*n` each, or, with `passed`, the rows
 * below them in `*n`, which SKIP and LIMIT lessen as they pass them up. */
static void put_find_stages(bson_t *s, const what *w, bool sorts, int64_t *n, bool passed)
{
    if (w->skip) {
        if (passed && n)
            *n = *n > w->skip ? *n - w->skip : 0;
        wrap_counted(s, "SKIP", fill_skip, w, n);
    }
    if (w->limit && !sorts) {
        if (passed && n && *n > w->limit)
            *n = w->limit;
        wrap_counted(s, "LIMIT", fill_limit, w, n);
    }
    if (w->has_proj)
        wrap_counted(s, "PROJECTION_SIMPLE", fill_proj, w, n);
    else if (w->return_key)
        wrap_counted(s, "RETURN_KEY", NULL, w, n);
}

/* The stages above the scan's (`plan`, and `exec` with `stats`) for
 * find, count and distinct: SORT when the index does not give the order,
 * then the command's own.  `counted`: count's {counted, skipped}. */
static void put_stages(const char *op, const what *w, bool sorted, bool stats, bson_t *plan,
                       bson_t *exec, int64_t *n_returned, int64_t *counted)
{
    for (int pass = 0; pass < (stats ? 2 : 1); pass++) {
        bson_t *s = pass ? exec : plan;
        int64_t *arg = pass ? n_returned : NULL;
        void (*st)(bson_t *, const what *, void *) = pass ? fill_stats : NULL;
        if (w->has_sort && !sorted)
            wrap_counted(s, "SORT", fill_sort, w, arg);
        if (strcmp(op, "find") == 0) {
            /* Each passes up every row it returns (a LIMIT asks for no
             * more than it returns): nReturned is the find's. */
            put_find_stages(s, w, w->has_sort && !sorted, arg, false);
        } else if (strcmp(op, "count") == 0) {
            wrap(s, "COUNT", pass ? fill_count : NULL, w, counted);
        } else {
            wrap(s, "PROJECTION_DEFAULT", st, w, arg);
        }
    }
}

/* A rejected plan's blocking SORT (its root) with the limit it would
 * keep, as the winner's SORT shows it (fill_sort). */
static void sort_limited(bson_t *plan, const what *w)
{
    bson_t out = BSON_INITIALIZER;
    bson_iter_t it;
    bson_iter_init(&it, plan);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "type") == 0)
            BSON_APPEND_INT64(&out, "limitAmount", w->skip + w->limit);
        mf_bsonx_append_iter(&out, NULL, 0, &it);
    }
    bson_destroy(plan);
    bson_steal(plan, &out);
}

/* find's stages over a candidate plan (`plan`: its scan, or its
 * blocking SORT over it), as mongod's candidate plans of find carry them:
 * SKIP, LIMIT (below a SORT, the SORT's limitAmount instead) and
 * projection; with `rows` (the plan's), each stage's rows passed up. */
static void put_candidate_stages(bson_t *plan, const what *w, int64_t *rows)
{
    bson_iter_t st;
    bool sorts = bson_iter_init_find(&st, plan, "stage") && BSON_ITER_HOLDS_UTF8(&st) &&
                 strcmp(bson_iter_utf8(&st, NULL), "SORT") == 0;
    if (sorts && w->limit)
        sort_limited(plan, w);
    put_find_stages(plan, w, sorts, rows, true);
}

/* A copy of the document `it` is on, into `out` (empty when it holds
 * none). */
static void copy_doc(const bson_iter_t *it, bson_t *out)
{
    uint32_t len;
    const uint8_t *data;
    bson_t view;
    if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_iter_document(it, &len, &data);
        if (bson_init_static(&view, data, len)) {
            bson_copy_to(&view, out);
            return;
        }
    }
    bson_init(out);
}

/* put_candidate_stages over each rejected plan.  count's COUNT and the
 * writes' stages are above the chosen plan only; distinct runs no
 * trials. */
static void put_rejected_stages(const what *w, bson_t *rejected)
{
    bson_t out = BSON_INITIALIZER, plan;
    bson_iter_t it;
    bson_iter_init(&it, rejected);
    while (bson_iter_next(&it)) {
        copy_doc(&it, &plan);
        put_candidate_stages(&plan, w, NULL);
        BSON_APPEND_DOCUMENT(&out, bson_iter_key(&it), &plan);
        bson_destroy(&plan);
    }
    bson_destroy(rejected);
    bson_steal(rejected, &out);
}

/* put_candidate_stages over each trial of allPlansExecution, with the
 * rows each stage passed up (SKIP drops the first `skip`, LIMIT passes
 * at most `limit`); the entry's nReturned becomes its root's, as mongod's
 * trial of the whole plan counts. */
static void put_all_plans_stages(const what *w, bson_t *all)
{
    bson_t out = BSON_INITIALIZER, entry, stages, view;
    bson_iter_t it, f;
    bson_iter_init(&it, all);
    while (bson_iter_next(&it)) {
        uint32_t len;
        const uint8_t *data;
        int64_t rows = 0;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&view, data, len))
            continue;
        if (bson_iter_init_find(&f, &view, "nReturned"))
            rows = bson_iter_as_int64(&f);
        if (bson_iter_init_find(&f, &view, "executionStages"))
            copy_doc(&f, &stages);
        else
            bson_init(&stages);
        put_candidate_stages(&stages, w, &rows);
        bson_init(&entry);
        bson_iter_init(&f, &view);
        while (bson_iter_next(&f)) {
            const char *k = bson_iter_key(&f);
            if (strcmp(k, "nReturned") == 0)
                BSON_APPEND_INT64(&entry, k, rows);
            else if (strcmp(k, "executionStages") == 0)
                BSON_APPEND_DOCUMENT(&entry, k, &stages);
            else
                mf_bsonx_append_iter(&entry, NULL, 0, &f);
        }
        BSON_APPEND_DOCUMENT(&out, bson_iter_key(&it), &entry);
        bson_destroy(&entry);
        bson_destroy(&stages);
    }
    bson_destroy(all);
    bson_steal(all, &out);
}

/* The reply: queryPlanner, executionStats (verbosity permitting), the
 * command and serverInfo. */
static void put_reply(mf_cmd_ctx *ctx, bson_t *reply, const char *ns, const bson_t *filter,
                      const mf_collator *coll, const bson_t *plan,
                      const mfi_plans_explained *plans, const bson_t *exec,
                      const char *verbosity, int64_t n_returned, int64_t t0, uint64_t keys,
                      uint64_t docs, const bson_t *inner)
{
    bool stats = strcmp(verbosity, "queryPlanner") != 0;
    bson_t qp, es, si;
    BSON_APPEND_UTF8(reply, "explainVersion", "1");
    BSON_APPEND_DOCUMENT_BEGIN(reply, "queryPlanner", &qp);
    BSON_APPEND_UTF8(&qp, "namespace", ns);
    BSON_APPEND_BOOL(&qp, "indexFilterSet", false);
    BSON_APPEND_DOCUMENT(&qp, "parsedQuery", filter);
    if (coll) {
        bson_t cs;
        BSON_APPEND_DOCUMENT_BEGIN(&qp, "collation", &cs);
        mf_collator_to_bson(coll, &cs);
        bson_append_document_end(&qp, &cs);
    }
    mfi_put_hashes(&qp, plans->hashed, plans->query_hash, plans->plan_cache_key);
    BSON_APPEND_BOOL(&qp, "maxIndexedOrSolutionsReached", false);
    BSON_APPEND_BOOL(&qp, "maxIndexedAndSolutionsReached", false);
    BSON_APPEND_BOOL(&qp, "maxScansToExplodeReached", false);
    BSON_APPEND_DOCUMENT(&qp, "winningPlan", plan);
    BSON_APPEND_ARRAY(&qp, "rejectedPlans", &plans->rejected);
    bson_append_document_end(reply, &qp);
    if (stats) {
        BSON_APPEND_DOCUMENT_BEGIN(reply, "executionStats", &es);
        BSON_APPEND_BOOL(&es, "executionSuccess", true);
        BSON_APPEND_INT64(&es, "nReturned", n_returned);
        BSON_APPEND_INT64(&es, "executionTimeMillis", (mf_clock_mono_us() - t0) / 1000);
        BSON_APPEND_INT64(&es, "totalKeysExamined", (int64_t)keys);
        BSON_APPEND_INT64(&es, "totalDocsExamined", (int64_t)docs);
        BSON_APPEND_DOCUMENT(&es, "executionStages", exec);
        /* each candidate's trial, the winner's first: none when one plan ran */
        if (strcmp(verbosity, "allPlansExecution") == 0)
            BSON_APPEND_ARRAY(&es, "allPlansExecution", &plans->all);
        bson_append_document_end(reply, &es);
    }
    BSON_APPEND_DOCUMENT(reply, "command", inner);
    BSON_APPEND_DOCUMENT_BEGIN(reply, "serverInfo", &si);
    BSON_APPEND_UTF8(&si, "host", ctx->inst->host);
    BSON_APPEND_UTF8(&si, "version", "7.0.0");
    bson_append_document_end(reply, &si);
}

/* explain of find: planned, and run, by find's own code
 * (mfi_find_explain), so that the two never differ. */
static int explain_find(mf_cmd_ctx *ctx, const bson_t *inner, const char *verbosity,
                        bson_t *reply, mf_error *err)
{
    bool stats = strcmp(verbosity, "queryPlanner") != 0;
    int64_t t0 = mf_clock_mono_us();
    mfi_find_explained x;
    int rc = mfi_find_explain(ctx, inner, stats, &x, err);
    if (rc)
        return rc;
    what w = {.op = "find", .has_sort = x.has_sort, .has_proj = x.has_proj,
              .return_key = x.return_key, .skip = x.skip, .limit = x.limit};
    mfi_view(&w.filter, &x.filter);
    mfi_view(&w.sort, &x.sort);
    mfi_view(&w.proj, &x.proj);
    if (!x.found)
        put_eof(&x.plan, &x.exec, stats);
    else
        put_stages("find", &w, x.sorted, stats, &x.plan, &x.exec, &x.n_returned, NULL);
    put_rejected_stages(&w, &x.plans.rejected);
    put_all_plans_stages(&w, &x.plans.all);
    put_reply(ctx, reply, x.ns, &w.filter, x.coll, &x.plan, &x.plans, &x.exec, verbosity,
              x.n_returned, t0, x.keys, x.docs, inner);
    mfi_find_explained_free(&x);
    return 0;
}

/* explain of update, delete and findAndModify: planned, and run without
 * writing, by their own code (mfi_write_explain).  findAndModify sorts
 * for the first document when the index does not give its order. */
static int explain_write(mf_cmd_ctx *ctx, const char *op, const bson_t *inner,
                         const char *verbosity, bson_t *reply, mf_error *err)
{
    bool stats = strcmp(verbosity, "queryPlanner") != 0;
    int64_t t0 = mf_clock_mono_us();
    mfi_write_explained x;
    int rc = mfi_write_explain(ctx, op, inner, stats, &x, err);
    if (rc)
        return rc;
    what w = {.op = op, .has_sort = x.has_sort, .limit = 1};
    mfi_view(&w.filter, &x.filter);
    mfi_view(&w.sort, &x.sort);
    int64_t first = x.n_matched > 0;
    if (!x.found)
        put_eof(&x.plan, &x.exec, stats);
    if (x.has_sort && !x.sorted) {
        wrap(&x.plan, "SORT", fill_sort, &w, NULL);
        if (stats)
            wrap_counted(&x.exec, "SORT", fill_sort, &w, &first);
    }
    const char *name = x.is_delete ? "DELETE" : "UPDATE";
    wrap(&x.plan, name, NULL, &w, NULL);
    if (stats)
        wrap(&x.exec, name, fill_write, &w, &x);
    put_reply(ctx, reply, x.ns, &x.filter, x.coll, &x.plan, &x.plans, &x.exec, verbosity,
              x.n_returned, t0, x.keys, x.docs, inner);
    mfi_write_explained_free(&x);
    return 0;
}

int mfi_cmd_explain(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    bson_iter_t it;
    bson_t inner;
    const char *verbosity = "allPlansExecution";
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if (!mfi_doc_arg(&it, &inner))
        return mfi_type_error(err, "explain", "explain", &it, "object");
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "verbosity") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                return mfi_type_error(err, "explain", k, &it, "string");
            verbosity = bson_iter_utf8(&it, NULL);
            if (strcmp(verbosity, "queryPlanner") != 0 &&
                strcmp(verbosity, "executionStats") != 0 &&
                strcmp(verbosity, "allPlansExecution") != 0)
                return mf_error_set(err, MF_BadValue,
                                    "verbosity string must be one of {'queryPlanner', "
                                    "'executionStats', 'allPlansExecution'}");
        } else if (!mfi_is_generic_arg(k)) {
            return mf_error_set(err, 40415, "BSON field 'explain.%s' is an unknown field.", k);
        }
    }
    bson_iter_t first;
    if (!bson_iter_init(&first, &inner) || !bson_iter_next(&first))
        return mf_error_set(err, MF_FailedToParse, "explain command requires a nested object");
    const char *op = bson_iter_key(&first);
    if (strcmp(op, "findandmodify") == 0)
        op = "findAndModify";
    /* maxTimeMS: the explain's own (the dispatcher's, in ctx) and the
     * explained command's; the smaller applies, as in mongod.  aggregate
     * reads its own (cmd_aggregate.c). */
    bson_iter_t mt;
    if (strcmp(op, "aggregate") != 0 && bson_iter_init_find(&mt, &inner, "maxTimeMS")) {
        int64_t ms;
        int r = mfi_max_time_arg(&mt, &ms, err);
        if (r)
            return r;
        /* the operation's first deadline: the check the dispatcher makes
         * for one of the explain's own (maxTimeAlwaysTimeOut) */
        if (ms && !ctx->deadline.at_us && (r = mfi_max_time_check(ctx->inst, err)) != 0)
            return r;
        if (ms)
            ctx->deadline.at_us =
                mfi_deadline_min(ctx->deadline.at_us, mf_clock_mono_us() + ms * 1000);
    }
    if (strcmp(op, "find") != 0 && strcmp(op, "count") != 0 && strcmp(op, "distinct") != 0 &&
        strcmp(op, "update") != 0 && strcmp(op, "delete") != 0 &&
        strcmp(op, "findAndModify") != 0) {
        if (strcmp(op, "aggregate") == 0) {
            int level = strcmp(verbosity, "queryPlanner") == 0     ? 1
                        : strcmp(verbosity, "executionStats") == 0 ? 2
                                                                    : 3;
            return mfi_aggregate_run(ctx, &inner, level, reply, err);
        }
        return mf_error_set(err, MF_CommandNotFound, "Explain failed due to unknown command: %s",
                            op);
    }
    bool stats = strcmp(verbosity, "queryPlanner") != 0;
    int level = strcmp(verbosity, "queryPlanner") == 0 ? 1 : stats && strcmp(verbosity,
                                                                "executionStats") == 0 ? 2 : 3;
    bool view = false;
    if (strcmp(op, "find") == 0) {
        /* a view's: the explain of the aggregate it runs as */
        int vrc = mfi_view_find(ctx, &inner, level, reply, &view, err);
        if (view)
            return vrc;
        return explain_find(ctx, &inner, verbosity, reply, err);
    }
    if ((strcmp(op, "count") == 0 || strcmp(op, "distinct") == 0)) {
        int vrc = mfi_view_count_distinct_explain(ctx, op, &inner, level, reply, &view, err);
        if (view)
            return vrc;
    }
    if (strcmp(op, "count") != 0 && strcmp(op, "distinct") != 0)
        return explain_write(ctx, op, &inner, verbosity, reply, err);
    /* The explained command must itself be valid: its namespace first. */
    mf_cmd_ctx ictx = *ctx;
    char ns[MF_MAX_NS_LEN + 1];
    int rc = mfi_coll_arg(&ictx, &inner, ns, sizeof ns, err);
    what w;
    if (rc == 0)
        read_what(op, &inner, &w);
    mf_matcher *m = NULL;
    mf_expr_ctx *xctx = NULL;
    mf_expr_hooks hooks;
    bson_iter_t let_it;
    bson_t let;
    mf_collator *given = NULL, *coll = NULL;
    bool has_let = bson_iter_init_find(&let_it, &inner, "let") && mfi_doc_arg(&let_it, &let);
    if (rc == 0 && w.has_coll)
        rc = mfi_collation_arg(&w.coll, op, "collation", &given, err);
    if (rc == 0)
        rc = mf_cl_collation_of_ns(e, ns, w.has_coll, given, &coll, err);
    mf_collator_unref(given);
    if (rc == 0)
        rc = mf_expr_ctx_new_coll(has_let ? &let : NULL, mf_clock_wall_ms(), coll, &xctx, err);
    if (rc == 0) {
        mf_expr_ctx_hooks(xctx, &hooks);
        rc = mf_matcher_parse_coll(&w.filter, &hooks, coll, &m, err);
    }
    if (rc) {
        mf_expr_ctx_free(xctx);
        mf_collator_unref(coll);
        return rc;
    }

    bson_t plan = BSON_INITIALIZER, exec = BSON_INITIALIZER;
    mfi_plans_explained plans;
    mfi_plans_init(&plans);
    int64_t n_returned = 0, counted[2] = {0, 0}, t0 = mf_clock_mono_us();
    uint64_t keys = 0, docs = 0;
    bool sorted = false;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c) {
        put_eof(&plan, &exec, stats);
    } else {
        mf_cl_indexes ix = {0};
        mf_scan *scan = NULL;
        mf_coll_lock(c, false);
        rc = mf_cl_indexes_load(c, &ix, err);
        if (rc == 0)
            rc = mf_cl_scan_new_ex(NULL, c, &ix, &w.filter, w.has_hint ? &w.hint : NULL,
                                 NULL, coll,
                                 &(mf_scan_extra){.distinct_key = w.distinct_key,
                                                  .explain = true},
                                 &scan, &sorted, err);
        if (rc == 0) {
            mf_scan_deadline(scan, &ctx->deadline);
            mf_scan_timed(scan, true);
            mf_scan_count_only(scan, strcmp(op, "count") == 0);
        }
        if (rc == 0 && !stats) /* the plans' trials choose, as a run's would */
            rc = mf_scan_decide(scan, e, c, m, err);
        if (rc == 0 && stats) {
            int64_t seen = 0;
            while (rc == 0) {
                mf_scan_row row;
                bool valid;
                if ((rc = mf_scan_next(scan, e, c, m, &row, &valid, err)) != 0 || !valid)
                    break;
                seen++;
                if (seen > w.skip)
                    n_returned++;
                if (w.limit && n_returned >= w.limit) /* count's */
                    break;
            }
            counted[1] = seen - n_returned;
        }
        if (rc == 0) {
            const mf_scan_stats *st = mf_scan_get_stats(scan);
            keys = st->keys_examined;
            docs = st->docs_examined;
            rc = mf_scan_explain(scan, false, &plan);
            if (rc == 0 && stats)
                rc = mf_scan_explain(scan, true, &exec);
            if (rc == 0)
                rc = mfi_plans_explain(scan, &plans);
            if (rc)
                rc = mf_error_set(err, MF_InternalError, "explain: out of memory");
        }
        mf_scan_free(scan);
        mf_cl_indexes_free(&ix);
        mf_coll_unlock(c);
        counted[0] = n_returned;
        if (strcmp(op, "count") == 0)
            n_returned = 0; /* COUNT returns no row */
        if (rc == 0)
            put_stages(op, &w, sorted, stats, &plan, &exec, &n_returned, counted);
    }
    mf_engine_catalog_unlock(e);
    mf_matcher_free(m);
    mf_expr_ctx_free(xctx);
    if (rc == 0)
        put_reply(ctx, reply, ns, &w.filter, coll, &plan, &plans, &exec, verbosity, n_returned,
                  t0, keys, docs, &inner);
    bson_destroy(&plan);
    bson_destroy(&exec);
    mfi_plans_free(&plans);
    mf_collator_unref(coll);
    return rc;
}
