/*
 * cmd_update.c -- update, delete and findAndModify.
 *
 * Every statement runs under the collection's exclusive lock in two steps:
 * first the matching records are found (query/plan.c), then each is
 * rewritten or removed, one engine write per document (the record, and
 * for a delete its _id index entry, together).  Finding first means a
 * write never moves a scan's tree position under it; an update keeps the
 * RecordId and the _id (immutable), so no document is seen twice.
 *
 * An update that changes nothing writes nothing and counts in n but not in
 * nModified.  An upsert that matches nothing inserts the seed built from
 * the filter's equalities with the update applied ($setOnInsert too).
 * The command syncs once, after its last write, before replying.
 *
 * An update is operators, a replacement, or an aggregation pipeline (an
 * array of $set / $project / $replaceWith ... stages) run over each
 * matched document, whose result then replaces it as a replacement would.
 * The command's `let` is evaluated once (with $$NOW fixed for the command)
 * and serves the filters' $expr, the pipelines and findAndModify's
 * projection.
 */
#include "command_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ID_INDEX "_id_"

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

/* ----------------------------------------------------------- the matches */

typedef struct hit {
    uint64_t rid;
    int64_t pos;
} hit;

typedef struct hits {
    hit *v;
    size_t n, cap;
    /* the scan's work, for the profiler */
    int64_t keys_examined, docs_examined;
    char plan_summary[256];
} hits;

static int hits_add(hits *h, uint64_t rid, int64_t pos, mf_error *err)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        hit *v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return oom(err);
        h->v = v;
        h->cap = cap;
    }
    h->v[h->n++] = (hit){rid, pos};
    return 0;
}

/* What explain takes from find_hits' scan: its stages (`exec` NULL:
 * queryPlanner's only), what it examined, and whether its order is the
 * sort's.  Without `run` the scan is planned and not run. */
typedef struct scan_report {
    bool run;
    bson_t *plan, *exec;
    mfi_plans_explained *plans;
    uint64_t keys, docs;
    bool sorted;
} scan_report;

static int report_scan(const mf_scan *scan, scan_report *rep, mf_error *err)
{
    const mf_scan_stats *st = mf_scan_get_stats(scan);
    rep->keys = st->keys_examined;
    rep->docs = st->docs_examined;
    if (mf_scan_explain(scan, false, rep->plan) != 0 ||
        (rep->exec && mf_scan_explain(scan, true, rep->exec) != 0) ||
        mfi_plans_explain(scan, rep->plans) != 0)
        return oom(err);
    return 0;
}

/* The records of `c` that `m` matches: all, or the first -- in `sort`
 * order when there is a sort (findAndModify).  `rep` (explain's, else
 * NULL) receives the scan's report.  `deadline` (may be NULL): the
 * command's maxTimeMS, for the scan (mf_scan_deadline). */
static int find_hits(mf_instance *inst, mf_engine *e, mf_coll *c, const mf_cl_indexes *ix,
                     const bson_t *filter,
                     const mf_matcher *m,
                     const bson_iter_t *hint, const mf_sort *sort, const bson_t *sort_spec,
                     bool all, bool want_pos, mf_deadline *deadline, hits *out,
                     scan_report *rep, mf_error *err)
{
    mf_scan *scan;
    bool sorted;
    int rc = mf_cl_scan_new_ex(mfi_cl(inst), c, ix, filter, hint, sort ? sort_spec : NULL,
                             m ? mf_matcher_collation(m) : NULL,
                             &(mf_scan_extra){.sort_trials = sort != NULL, .explain = rep != NULL},
                             &scan, &sorted, err);
    if (rc)
        return rc;
    mf_scan_deadline(scan, deadline);
    mf_scan_want_pos(scan, want_pos);
    /* Trials that differ in giving the sort choose now: whether to sort
     * depends on the winner.  The first row is findAndModify's. */
    if (sort && mf_scan_sort_undecided(scan)) {
        if (!all)
            mf_scan_trial_results(scan, 1);
        if ((rc = mf_scan_decide(scan, e, c, m, err)) != 0) {
            mf_scan_free(scan);
            return rc;
        }
        sorted = mf_scan_sorted(scan);
    }
    if (rep) {
        mf_scan_timed(scan, true);
        rep->sorted = sorted;
    }
    if (sorted)
        sort = NULL; /* the scan's order is the sort's */
    mf_buf best = {0}, key = {0};
    while (rc == 0 && (!rep || rep->run)) {
        mf_scan_row row;
        bool valid;
        if ((rc = mf_scan_next(scan, e, c, m, &row, &valid, err)) != 0 || !valid)
            break;
        if (!sort) {
            rc = hits_add(out, row.rid, row.pos, err);
            if (!all)
                break;
            continue;
        }
        key.len = 0;
        if ((rc = mf_sort_key(sort, &row.doc, &key, err)) != 0)
            break;
        size_t n = key.len < best.len ? key.len : best.len;
        int cmp = n ? memcmp(key.data, best.data, n) : 0; /* best.data is NULL at first */
        if (out->n == 0 || cmp < 0 || (cmp == 0 && key.len < best.len)) {
            best.len = 0;
            if (mf_buf_append(&best, key.data, key.len) != 0) {
                rc = oom(err);
                break;
            }
            out->n = 0;
            rc = hits_add(out, row.rid, row.pos, err);
        }
    }
    if (rc == 0 && rep && !rep->run) /* the plans' trials choose, as a run's would */
        rc = mf_scan_decide(scan, e, c, m, err);
    if (rc == 0 && rep)
        rc = report_scan(scan, rep, err);
    const mf_scan_stats *st = mf_scan_get_stats(scan);
    out->keys_examined = (int64_t)st->keys_examined;
    out->docs_examined = (int64_t)st->docs_examined;
    mf_scan_plan_summary(scan, out->plan_summary, sizeof out->plan_summary);
    mf_buf_free(&best);
    mf_buf_free(&key);
    mf_scan_free(scan);
    return rc;
}

/* The stored document `rid` (exclusive lock held), as the operation sees
 * it (a transaction's own version): a view, not a copy. */
static int read_record(mf_engine *e, mf_coll *c, uint64_t rid, bson_t *doc, bool *found,
                       mf_error *err)
{
    return mf_cl_read_record(e, c, rid, doc, found, err);
}

/* ------------------------------------------------------------ the updates */

/* An update of any form: an mf_update (operators or a replacement), or an
 * update pipeline. */
typedef struct upd {
    mf_update *u;
    mf_pipeline *pl;
} upd;

/* What the command's expressions see: its let and $$NOW, and where. */
typedef struct xenv {
    mf_expr_ctx *xctx;
    mf_expr_hooks hooks;
    const bson_t *let; /* unevaluated (pipelines evaluate it themselves) */
    char db[MF_MAX_NS_LEN + 1];
    const char *coll;
    int64_t now;
    mf_deadline *deadline; /* the command's maxTimeMS (mf_cmd_ctx) */
} xenv;

/* The command's `let` (checked: a document) and the context built from
 * it.  Errors: TypeMismatch for a `let` that is not an object, the let's
 * own evaluation errors. */
static int xenv_open(xenv *x, mf_cmd_ctx *ctx, const bson_t *cmd, const char *cmdname,
                     const char *ns, const mf_collator *coll, bson_t *let_buf, mf_error *err)
{
    bson_iter_t it;
    memset(x, 0, sizeof *x);
    x->deadline = &ctx->deadline;
    x->now = mf_clock_wall_ms();
    snprintf(x->db, sizeof x->db, "%s", ns);
    char *dot = strchr(x->db, '.');
    if (dot) {
        *dot = 0;
        x->coll = dot + 1;
    }
    if (bson_iter_init_find(&it, cmd, "let")) {
        if (!mfi_doc_arg(&it, let_buf))
            return mfi_type_error(err, cmdname, "let", &it, "object");
        x->let = let_buf;
    }
    int rc = mf_expr_ctx_new_coll(x->let, x->now, coll, &x->xctx, err);
    if (rc == 0)
        mf_expr_ctx_hooks(x->xctx, &x->hooks);
    return rc;
}

/* The expressions of one statement: the command's, unless the statement
 * runs under a collation, which its $expr must compare under (a context
 * of its own in `*own`, freed by the caller after its matcher). */
static int stmt_exprs(const xenv *x, const mf_collator *coll, mf_expr_ctx **own,
                      mf_expr_hooks *hooks, mf_error *err)
{
    *own = NULL;
    if (!coll) {
        *hooks = x->hooks;
        return 0;
    }
    int rc = mf_expr_ctx_new_coll(x->let, x->now, coll, own, err);
    if (rc == 0)
        mf_expr_ctx_hooks(*own, hooks);
    return rc;
}

/* maxTimeMS between the records a statement writes (the scan that found
 * them counts its own work): each counts into the command's deadline. */
static int write_time_check(const xenv *x, mf_error *err)
{
    return mf_deadline_check(x->deadline, err);
}

static void xenv_close(xenv *x)
{
    mf_expr_ctx_free(x->xctx);
    x->xctx = NULL;
}

/* Parse an update: `spec` is the operator or replacement document, or
 * (`is_pipeline`) the stages.  `constants` is update's `c` (may be NULL). */
static int upd_parse(const xenv *x, const bson_t *spec, bool is_pipeline,
                     const bson_t *array_filters, const bson_t *constants,
                     const mf_collator *coll, upd *out, mf_error *err)
{
    memset(out, 0, sizeof *out);
    if (!is_pipeline) {
        if (constants)
            return mf_error_set(err, 51198,
                                "Constant values may only be specified for pipeline updates");
        return mf_update_parse_coll(spec, array_filters, coll, &out->u, err);
    }
    if (array_filters)
        return mf_error_set(err, MF_FailedToParse,
                            "arrayFilters may not be specified for pipeline-syle updates");
    mf_agg_opts o = {.db = x->db, .coll = x->coll, .let = x->let, .now_ms = x->now,
                     .collation = coll};
    return mf_pipeline_parse_update(spec, &o, constants, &out->pl, err);
}

static void upd_free(upd *w)
{
    mf_update_free(w->u);
    mf_pipeline_free(w->pl);
    memset(w, 0, sizeof *w);
}

static bool upd_needs_pos(const upd *w)
{
    return w->u && mf_update_needs_pos(w->u);
}

/* As mf_update_apply, for either form: `out` is initialised here, and
 * the caller destroys it, on error too. */
static int upd_apply(const upd *w, const bson_t *doc, bool is_insert, int64_t pos, int64_t now,
                     bson_t *out, bool *changed, mf_error *err)
{
    if (w->u)
        return mf_update_apply(w->u, doc, is_insert, pos, now, out, changed, err);
    bson_t made;
    *changed = false;
    int rc = mf_pipeline_run_one(w->pl, doc, &made, err);
    if (rc) {
        bson_init(out);
        return rc;
    }
    rc = mf_update_apply_doc(doc, &made, out, changed, err);
    bson_destroy(&made);
    return rc;
}

/* Where a command writes: the collection (exclusive lock held), its
 * parsed indexes, and what a unique index last refused. */
typedef struct wtarget {
    mf_instance *inst;       /* counts the index accesses of the scans */
    mf_engine *e;
    mf_coll *c;
    mf_cl_indexes ix;
    mf_cl_dup dup;
    mf_cl_log *lg; /* how writes are logged (replica set), or NULL */
    int image;     /* a retryable findAndModify keeps the document it
                      returns: 1 the one before, 2 the one after */
    bool validate; /* the collection's validator applies (no
                      bypassDocumentValidation, not a delete) */
    mf_cl_validator *val; /* ... and is this (NULL: none) */
} wtarget;

static int target_open(wtarget *w, mf_cmd_ctx *ctx, mf_engine *e, mf_coll *c, bool validate,
                       mf_error *err)
{
    memset(w, 0, sizeof *w);
    w->inst = ctx->inst;
    w->lg = mfi_ctx_log(ctx);
    w->e = e;
    w->c = c;
    w->validate = validate;
    int rc = c ? mf_cl_indexes_load(c, &w->ix, err) : 0;
    if (rc == 0 && c && validate)
        rc = mf_cl_validator_load(c, &w->val, err);
    w->ix.val = w->val;
    return rc;
}

static void target_close(wtarget *w)
{
    mf_cl_indexes_free(&w->ix);
    mf_cl_dup_clear(&w->dup);
    mf_cl_validator_free(w->val);
    w->val = NULL;
}

/* A statement met what transaction `holder` holds: close `w`, wait with
 * the collection let go (mfi_write_wait), open `w` again on `*c` as it is
 * now, so the statement runs again. */
static int target_wait(wtarget *w, mf_cmd_ctx *ctx, mf_engine *e, const char *ns,
                       uint64_t holder, bool create, mf_coll **c, mf_error *err)
{
    bool validate = w->validate;
    target_close(w);
    int rc = mfi_write_wait(ctx, ns, holder, create, c, err);
    return rc ? rc : target_open(w, ctx, e, *c, validate, err);
}

/* Apply `u` to record `rid`.  `before`/`after` (if not NULL) receive
 * copies of the document as it was and as it is. */
/* Record `rid` as stored (`*doc`, a view into the map) and with `u`
 * applied.  `*found`: the record was read, and `*out` is initialised
 * (on error too: the caller destroys it).  The update's and the
 * explain's one step. */
static int record_updated(mf_engine *e, mf_coll *c, uint64_t rid, const upd *u, int64_t pos,
                          int64_t now, bson_t *doc, bson_t *out, bool *found, bool *changed,
                          mf_error *err)
{
    *found = *changed = false;
    int rc = read_record(e, c, rid, doc, found, err);
    if (rc || !*found) {
        *found = false;
        return rc;
    }
    return upd_apply(u, doc, false, pos, now, out, changed, err);
}

static int update_record(wtarget *w, uint64_t rid, const upd *u, int64_t pos, int64_t now,
                         bool *modified, bson_t *before, bson_t *after, mf_lsn *lsn,
                         mf_error *err)
{
    bson_t doc, out;
    bool found, changed;
    *modified = false;
    int rc = record_updated(w->e, w->c, rid, u, pos, now, &doc, &out, &found, &changed, err);
    if (!found)
        return rc;
    if (rc == 0 && before)
        bson_copy_to(&doc, before);
    if (rc == 0 && after)
        bson_copy_to(changed ? &out : &doc, after);
    if (rc == 0 && changed)
        rc = mf_cl_validator_check(w->val, &doc, &out, err);
    if (rc == 0 && changed) {
        /* `doc` points into the record tree: it is read (for its old
         * index keys) before the write replaces it. */
        if (w->lg) {
            w->lg->replaced = u->u && mf_update_is_replacement(u->u);
            if (w->lg->stmt && w->image) {
                w->lg->stmt->image = w->image == 2 ? &out : &doc;
                w->lg->stmt->post_image = w->image == 2;
            }
        }
        rc = mf_cl_write_doc_log(w->e, w->c, &w->ix, rid, &doc, &out, lsn, &w->dup, w->lg, err);
        *modified = rc == 0;
    }
    bson_destroy(&out);
    return rc;
}

/* Remove record `rid` and its index entries; `before` gets a copy. */
static int delete_record(wtarget *w, uint64_t rid, bson_t *before, bool *deleted, mf_lsn *lsn,
                         mf_error *err)
{
    bson_t doc;
    bool found;
    *deleted = false;
    int rc = read_record(w->e, w->c, rid, &doc, &found, err);
    if (rc || !found)
        return rc;
    if (before)
        bson_copy_to(&doc, before);
    if (w->lg && w->lg->stmt && w->image) {
        w->lg->stmt->image = &doc;
        w->lg->stmt->post_image = false;
    }
    rc = mf_cl_write_doc_log(w->e, w->c, &w->ix, rid, &doc, NULL, lsn, NULL, w->lg, err);
    *deleted = rc == 0;
    return rc;
}

/* The document an upsert inserts: the filter's seed with the update
 * applied as an insert, into `*doc` (initialised here, on error too). */
static int upsert_doc(const bson_t *filter, const upd *u, int64_t now, bson_t *doc,
                      mf_error *err)
{
    bson_t seed;
    bool changed;
    static const bson_t empty = BSON_INITIALIZER;
    int rc = mf_update_upsert_seed(filter ? filter : &empty, &seed, err);
    if (rc == 0)
        rc = upd_apply(u, &seed, true, -1, now, doc, &changed, err);
    else
        bson_init(doc);
    bson_destroy(&seed);
    return rc;
}

/* Insert the upsert's document (upsert_doc).  `*id_out` (initialised
 * here) gets {"": _id}. */
static int upsert_insert(wtarget *w, const bson_t *filter, const upd *u, int64_t now,
                         bson_t *stored, bson_t *id_out, mf_lsn *lsn, mf_error *err)
{
    bson_t doc;
    bson_iter_t id;
    uint64_t next_id;
    bson_init(id_out);
    bson_init(stored);
    int rc = upsert_doc(filter, u, now, &doc, err);
    if (rc == 0)
        rc = mf_cl_next_record_id(w->e, w->c, &next_id, err);
    if (rc == 0) {
        rc = mf_cl_insert_doc(w->e, w->c, &w->ix, &next_id, &doc, stored, &id, lsn, &w->dup,
                              w->lg, err);
        if (rc == 0 || rc == MF_DuplicateKey)
            mf_bsonx_append_iter(id_out, "", 0, &id);
    }
    bson_destroy(&doc);
    return rc;
}

/* --------------------------------------------------------------- update */

typedef struct update_stmt {
    bson_t q, u;
    bool has_q, has_u, upsert, multi;
    bool is_pipeline;          /* `u` is an array of stages */
    const bson_t *array_filters;
    bson_t af;
    const bson_t *constants;   /* `c`, or NULL */
    bson_t c;
    bson_iter_t hint;
    bool has_hint;
    bson_iter_t coll; /* collation, parsed when the statement runs */
    bool has_coll;
} update_stmt;

/* A statement of update.updates.  Errors end the whole command (mongod
 * parses the batch before running it). */
static int parse_update_stmt(const bson_iter_t *el, update_stmt *s, mf_error *err)
{
    bson_iter_t it;
    memset(s, 0, sizeof *s);
    if (!BSON_ITER_HOLDS_DOCUMENT(el))
        return mfi_type_error(err, "update", "updates", el, "object");
    bson_iter_recurse(el, &it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "q") == 0) {
            if (!(s->has_q = mfi_doc_arg(&it, &s->q)))
                return mfi_type_error(err, "update.updates", k, &it, "object");
        } else if (strcmp(k, "u") == 0) {
            if (BSON_ITER_HOLDS_ARRAY(&it)) {
                uint32_t len;
                const uint8_t *data;
                bson_iter_t stage;
                bson_iter_array(&it, &len, &data);
                s->has_u = s->is_pipeline = bson_init_static(&s->u, data, len);
                /* parsePipelineFromBSON, part of the command's parse */
                bson_iter_recurse(&it, &stage);
                while (bson_iter_next(&stage))
                    if (!BSON_ITER_HOLDS_DOCUMENT(&stage))
                        return mf_error_set(err, MF_TypeMismatch, "Each element of the "
                                            "'pipeline' array must be an object");
            } else if (!(s->has_u = mfi_doc_arg(&it, &s->u)))
                return mf_error_set(err, MF_TypeMismatch,
                                    "BSON field 'update.updates.u' is the wrong type '%s', "
                                    "expected types '[object, array]'",
                                    mf_bsonx_type_alias(bson_iter_type(&it)));
        } else if (strcmp(k, "upsert") == 0) {
            s->upsert = bson_iter_as_bool(&it);
        } else if (strcmp(k, "multi") == 0) {
            s->multi = bson_iter_as_bool(&it);
        } else if (strcmp(k, "arrayFilters") == 0) {
            uint32_t len;
            const uint8_t *data;
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return mfi_type_error(err, "update.updates", k, &it, "array");
            bson_iter_array(&it, &len, &data);
            bson_init_static(&s->af, data, len);
            s->array_filters = &s->af;
        } else if (strcmp(k, "hint") == 0) {
            if (mfi_hint_arg(&it, "update.updates.hint", err) != 0)
                return err->code;
            s->hint = it;
            s->has_hint = true;
        } else if (strcmp(k, "collation") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return mfi_type_error(err, "update.updates", k, &it, "object");
            s->coll = it;
            s->has_coll = mfi_collation_given(&it);
        } else if (strcmp(k, "c") == 0) {
            if (!mfi_doc_arg(&it, &s->c))
                return mfi_type_error(err, "update.updates", k, &it, "object");
            s->constants = &s->c;
        } else if (strcmp(k, "upsertSupplied") == 0) {
        } else {
            return mf_error_set(err, 40415, "BSON field 'update.updates.%s' is an unknown field.",
                                k);
        }
    }
    if (!s->has_q)
        return mf_error_set(err, 40414,
                            "BSON field 'update.updates.q' is missing but a required field");
    if (!s->has_u)
        return mf_error_set(err, 40414,
                            "BSON field 'update.updates.u' is missing but a required field");
    return 0;
}

/* The records a multi update went through before it waited for a
 * transaction: skipped when it goes on (as mongod's scan would not come
 * back to them), found by binary search among the first `sorted`. */
typedef struct progress {
    hits done; /* (their pos unused) */
    size_t sorted;
} progress;

static int cmp_rid(const void *a, const void *b)
{
    uint64_t x = ((const hit *)a)->rid, y = ((const hit *)b)->rid;
    return x < y ? -1 : x > y;
}

static bool progress_has(const progress *p, uint64_t rid)
{
    hit key = {rid, 0};
    return p->sorted && bsearch(&key, p->done.v, p->sorted, sizeof key, cmp_rid);
}

/* Before the statement goes on: everything done so far is skipped. */
static void progress_resume(progress *p)
{
    qsort(p->done.v, p->done.n, sizeof *p->done.v, cmp_rid);
    p->sorted = p->done.n;
}

static void progress_clear(progress *p)
{
    free(p->done.v);
    *p = (progress){0};
}

/* A retried update statement's counts, from its oplog entry: an update
 * matched and modified one document, an insert was its upsert. */
static void retried_update(const bson_t *entry, int64_t *n, int64_t *nmod, bson_t *id,
                           bool *was_upsert)
{
    bson_iter_t it, o;
    (*n)++;
    if (bson_iter_init_find(&it, entry, "op") && BSON_ITER_HOLDS_UTF8(&it) &&
        strcmp(bson_iter_utf8(&it, NULL), "i") == 0) {
        *was_upsert = true;
        if (bson_iter_init_find(&it, entry, "o") && bson_iter_recurse(&it, &o) &&
            bson_iter_find(&o, "_id"))
            mf_bsonx_append_iter(id, "", 0, &o);
    } else {
        (*nmod)++;
    }
}

/* Run one update statement on `c` (exclusive lock held); a multi one
 * notes its records in `done`, and skips those it has. */
static int run_update(wtarget *w, const xenv *x, update_stmt *s, progress *done, int64_t *n,
                      int64_t *nmod, bson_t *upserted_id, bool *upserted, mf_lsn *lsn,
                      mfi_op_debug *d, mf_error *err)
{
    mf_engine *e = w->e;
    mf_coll *c = w->c;
    mf_matcher *m = NULL;
    upd u = {0};
    hits h = {0};
    int64_t now = x->now;
    mf_collator *given = NULL, *coll = NULL;
    int rc = s->has_coll ? mfi_collation_arg(&s->coll, "update.updates", "collation", &given, err)
                         : 0;
    if (rc == 0)
        rc = mf_cl_collation_for(c, s->has_coll, given, &coll, err);
    mf_collator_unref(given);
    mf_expr_ctx *own = NULL;
    mf_expr_hooks hooks;
    if (rc == 0)
        rc = stmt_exprs(x, coll, &own, &hooks, err);
    if (rc == 0)
        rc = mf_matcher_parse_coll(&s->q, &hooks, coll, &m, err);
    if (rc == 0)
        rc = upd_parse(x, &s->u, s->is_pipeline, s->array_filters, s->constants, coll, &u, err);
    if (rc == 0 && s->multi && u.u && mf_update_is_replacement(u.u))
        rc = mf_error_set(err, MF_FailedToParse,
                          "multi update is not supported for replacement-style update");
    /* No collection (and no upsert to create one): nothing matches, but
     * the statement was still parsed and its errors reported. */
    if (rc == 0 && c)
        rc = find_hits(w->inst, e, c, &w->ix, &s->q, m, s->has_hint ? &s->hint : NULL, NULL,
                       NULL, s->multi, upd_needs_pos(&u), x->deadline, &h, NULL, err);
    for (size_t i = 0; rc == 0 && i < h.n; i++) {
        bool modified;
        if (progress_has(done, h.v[i].rid))
            continue;
        if ((rc = write_time_check(x, err)) != 0)
            break;
        rc = update_record(w, h.v[i].rid, &u, h.v[i].pos, now, &modified, NULL, NULL, lsn, err);
        if (rc == 0) {
            (*n)++;
            *nmod += modified;
            if (s->multi)
                rc = hits_add(&done->done, h.v[i].rid, 0, err);
        }
    }
    /* (a statement going on after a wait matched before) */
    if (rc == 0 && h.n == 0 && done->done.n == 0 && s->upsert && c) {
        bson_t stored;
        rc = upsert_insert(w, &s->q, &u, now, &stored, upserted_id, lsn, err);
        bson_destroy(&stored);
        if (rc == 0) {
            (*n)++;
            *upserted = true;
        }
    }
    d->keys_examined = h.keys_examined;
    d->docs_examined = h.docs_examined;
    memcpy(d->plan_summary, h.plan_summary, sizeof d->plan_summary);
    free(h.v);
    upd_free(&u);
    mf_matcher_free(m);
    mf_expr_ctx_free(own);
    mf_collator_unref(coll);
    return rc;
}

/* ------------------------------------------------ statements profiled */

/* An update statement as mongod's CurOp describes it (UpdateOpEntry):
 * q, u, c, arrayFilters, multi, upsert, collation, hint. */
static void update_desc(const update_stmt *s, bson_t *out)
{
    bson_init(out);
    BSON_APPEND_DOCUMENT(out, "q", &s->q);
    if (s->is_pipeline)
        BSON_APPEND_ARRAY(out, "u", &s->u);
    else
        BSON_APPEND_DOCUMENT(out, "u", &s->u);
    if (s->constants)
        BSON_APPEND_DOCUMENT(out, "c", s->constants);
    if (s->array_filters)
        BSON_APPEND_ARRAY(out, "arrayFilters", s->array_filters);
    BSON_APPEND_BOOL(out, "multi", s->multi);
    BSON_APPEND_BOOL(out, "upsert", s->upsert);
    if (s->has_coll)
        mf_bsonx_append_iter(out, "collation", -1, &s->coll);
    if (s->has_hint)
        mf_bsonx_append_iter(out, "hint", -1, &s->hint);
}

/* A statement's counts into the command's (mongod adds each nested
 * operation's metrics to its parent's). */
static void debug_sum(mfi_op_debug *to, const mfi_op_debug *d)
{
    if (!to)
        return;
    const int64_t *from[] = {&d->keys_examined, &d->docs_examined, &d->n_matched,
                             &d->n_modified, &d->ndeleted, &d->n_upserted, &d->keys_inserted,
                             &d->keys_deleted};
    int64_t *into[] = {&to->keys_examined, &to->docs_examined, &to->n_matched,
                       &to->n_modified, &to->ndeleted, &to->n_upserted, &to->keys_inserted,
                       &to->keys_deleted};
    for (size_t i = 0; i < sizeof from / sizeof from[0]; i++)
        if (*from[i] >= 0)
            mfi_op_debug_add(into[i], *from[i]);
    if (d->plan_summary[0])
        memcpy(to->plan_summary, d->plan_summary, sizeof to->plan_summary);
}

/* The command's statements array, checked for size. */
static int stmts_arg(const bson_t *cmd, const char *cmdname, const char *field, bson_iter_t *out,
                     uint32_t *count, mf_error *err)
{
    if (!bson_iter_init_find(out, cmd, field))
        return mf_error_set(err, 40414, "BSON field '%s.%s' is missing but a required field",
                            cmdname, field);
    if (!BSON_ITER_HOLDS_ARRAY(out))
        return mfi_type_error(err, cmdname, field, out, "array");
    bson_iter_t d;
    *count = 0;
    bson_iter_recurse(out, &d);
    while (bson_iter_next(&d))
        (*count)++;
    if (*count == 0 || *count > MF_MAX_WRITE_BATCH_SIZE)
        return mf_error_set(err, MF_InvalidLength,
                            "Write batch sizes must be between 1 and %d. Got %u operations.",
                            MF_MAX_WRITE_BATCH_SIZE, *count);
    return 0;
}

/* Top-level fields every write command accepts; others are unknown. */
static int check_write_fields(const bson_t *cmd, const char *cmdname, const char *stmts,
                              bool *ordered, mf_error *err)
{
    bson_iter_t it;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    *ordered = true;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, stmts) == 0 || mfi_is_generic_arg(k) ||
            strcmp(k, "bypassDocumentValidation") == 0 || strcmp(k, "let") == 0 ||
            strcmp(k, "rawData") == 0)
            continue;
        if (strcmp(k, "ordered") == 0)
            *ordered = bson_iter_as_bool(&it);
        else
            return mf_error_set(err, 40415, "BSON field '%s.%s' is an unknown field.", cmdname,
                                k);
    }
    return 0;
}

static void add_write_error(bson_t *werrs, uint32_t *nerr, uint32_t index, int rc,
                            const mf_error *err, const char *ns, const wtarget *w)
{
    const mf_cl_dup *dup = w ? &w->dup : NULL;
    char key[16];
    const char *k;
    bson_t we;
    mf_uint32_to_key((*nerr)++, &k, key, sizeof key);
    bson_append_document_begin(werrs, k, -1, &we);
    if (rc == MF_DuplicateKey && dup && dup->has)
        mfi_duplicate_error(&we, index, ns, dup);
    else
        mfi_write_error(&we, index, err);
    if (rc == MF_DocumentValidationFailure && w && w->val)
        BSON_APPEND_DOCUMENT(&we, "errInfo", mf_cl_validator_info(w->val));
    bson_append_document_end(werrs, &we);
}

int mfi_cmd_update(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    bson_iter_t stmts, el;
    uint32_t count;
    bool ordered;
    int rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err);
    if (rc == 0)
        rc = stmts_arg(cmd, "update", "updates", &stmts, &count, err);
    if (rc == 0)
        rc = check_write_fields(cmd, "update", "updates", &ordered, err);
    if (rc)
        return rc;
    update_stmt *st = calloc(count, sizeof *st);
    if (!st)
        return oom(err);
    uint32_t i = 0;
    bool any_upsert = false;
    bson_iter_recurse(&stmts, &el);
    while (rc == 0 && bson_iter_next(&el)) {
        rc = parse_update_stmt(&el, &st[i], err);
        any_upsert |= st[i++].upsert;
    }
    /* mongod counts each pipeline's stages (incrementUpdateMetrics, through
     * a LiteParsedPipeline) before any statement runs: an unknown stage in
     * any statement fails the whole command and nothing is written. */
    for (i = 0; rc == 0 && i < count; i++)
        if (st[i].is_pipeline)
            rc = mf_pipeline_lite_parse(&st[i].u, err);
    if (rc == 0)
        rc = mfi_user_write_ns(ctx->inst, ns, err);
    xenv x = {0};
    bson_t let;
    if (rc == 0)
        rc = xenv_open(&x, ctx, cmd, "update", ns, NULL, &let, err);
    if (rc) {
        xenv_close(&x);
        free(st);
        return rc;
    }

    /* Without an upsert, a missing collection matches nothing. */
    mf_coll *c = NULL;
    if (any_upsert) {
        rc = mfi_coll_for_write(ctx, ns, &c, err);
    } else {
        mf_engine_catalog_lock(e, false);
        c = mf_engine_coll(e, ns);
    }
    if (rc) {
        xenv_close(&x);
        free(st);
        return rc;
    }
    int64_t n = 0, nmod = 0;
    bson_t werrs = BSON_INITIALIZER, upserted = BSON_INITIALIZER;
    uint32_t nerr = 0, nups = 0;
    mf_lsn lsn = 0;
    wtarget w;
    if (c)
        mf_coll_lock(c, true);
    rc = target_open(&w, ctx, e, c, !mfi_bypass_validation(cmd), err);
    /* a statement's start: its counts then, and what a multi one did
     * before it waited for a transaction (it goes on after) */
    int64_t t0 = 0, n0 = 0, m0 = 0, ki = 0, kd = 0;
    progress done = {0};
    bool going_on = false;
    for (i = 0; rc == 0 && i < count; i++) {
        bson_t id = BSON_INITIALIZER;
        bool was_upsert = false;
        mf_error serr;
        mfi_op_debug sd;
        if (!going_on) {
            t0 = mf_clock_mono_us();
            n0 = n;
            m0 = nmod;
            ki = w.ix.keys_inserted;
            kd = w.ix.keys_deleted;
            progress_clear(&done);
        }
        going_on = false;
        mfi_op_debug_init(&sd, "update");
        snprintf(sd.ns, sizeof sd.ns, "%s", ns);
        /* a retryable write's statement runs once (retry.c); multi
         * updates are not retryable */
        bool retry = ctx->retry && !st[i].multi, before = false;
        int32_t sid = retry ? mfi_retry_stmt_id(ctx->retry, i) : 0;
        bson_t entry = BSON_INITIALIZER;
        int r = retry ? mfi_retry_check(ctx, sid, &before, &entry, &serr) : 0;
        if (r == 0 && before) {
            retried_update(&entry, &n, &nmod, &id, &was_upsert);
        } else if (r == 0) {
            if (retry)
                mfi_retry_log(ctx);
            mf_cl_op_statement(st[i].multi);
            r = run_update(&w, &x, &st[i], &done, &n, &nmod, &id, &was_upsert, &lsn, &sd,
                           &serr);
            int dr = mfi_retry_done(ctx, sid, &serr);
            if (r == 0)
                r = dr;
        }
        bson_destroy(&entry);
        /* a transaction holds what it needs (coll/txn.c): wait for it with
         * the collection let go, then run the statement again */
        uint64_t holder = r == MF_WriteConflict ? mf_cl_op_take_wait() : 0;
        if (holder) {
            bson_destroy(&id);
            if (st[i].multi) { /* it goes on from where it stopped */
                progress_resume(&done);
                going_on = true;
            } else {
                n = n0;
                nmod = m0;
            }
            r = target_wait(&w, ctx, e, ns, holder, any_upsert, &c, &serr);
            if (r == 0) {
                i--;
                continue;
            }
            going_on = false;
            bson_init(&id);
        }
        atomic_fetch_add_explicit(&ctx->inst->counters.op_update, 1, memory_order_relaxed);
        /* the statement's own entry, as mongod's nested CurOp makes one */
        sd.n_matched = n - n0 - (was_upsert ? 1 : 0);
        sd.n_modified = nmod - m0;
        sd.n_upserted = was_upsert;
        sd.keys_inserted = w.ix.keys_inserted - ki;
        sd.keys_deleted = w.ix.keys_deleted - kd;
        debug_sum(ctx->dbg, &sd);
        if (mfi_profile_statement_wanted(ctx, t0)) {
            bson_t desc;
            update_desc(&st[i], &desc);
            mfi_profile_statement(ctx, &sd, &desc, t0, r, &serr);
            bson_destroy(&desc);
        }
        if (r == 0 && was_upsert) {
            char key[16];
            const char *k;
            bson_t up;
            bson_iter_t idit;
            mf_uint32_to_key(nups++, &k, key, sizeof key);
            bson_append_document_begin(&upserted, k, -1, &up);
            BSON_APPEND_INT32(&up, "index", (int32_t)i);
            if (bson_iter_init(&idit, &id) && bson_iter_next(&idit))
                mf_bsonx_append_iter(&up, "_id", 3, &idit);
            bson_append_document_end(&upserted, &up);
        }
        if (r != 0) {
            add_write_error(&werrs, &nerr, i, r, &serr, ns, &w);
            if (mfi_write_fatal(r) && !mfi_retry_injected(ctx)) {
                *err = serr;
                rc = r;
            }
        }
        bson_destroy(&id);
        if (r != 0 && (ordered || rc))
            break;
    }
    progress_clear(&done);
    target_close(&w);
    if (c)
        mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    xenv_close(&x);
    free(st);
    mfi_ctx_wrote(ctx, lsn); /* the dispatcher syncs before the reply */
    if (rc == 0) { /* UpdateCommandReply: the base's fields, upserted, nModified */
        BSON_APPEND_INT32(reply, "n", (int32_t)n);
        mfi_write_reply_base(ctx, reply, nerr, &werrs);
        if (nups)
            BSON_APPEND_ARRAY(reply, "upserted", &upserted);
        BSON_APPEND_INT32(reply, "nModified", (int32_t)nmod);
    }
    bson_destroy(&werrs);
    bson_destroy(&upserted);
    return rc;
}

/* --------------------------------------------------------------- delete */

typedef struct delete_stmt {
    bson_t q;
    bool has_q;
    int64_t limit;
    bson_iter_t hint;
    bool has_hint;
    bson_iter_t coll; /* collation, parsed when the statement runs */
    bool has_coll;
} delete_stmt;

static int parse_delete_stmt(const bson_iter_t *el, delete_stmt *s, mf_error *err)
{
    bson_iter_t it;
    bool has_limit = false;
    memset(s, 0, sizeof *s);
    if (!BSON_ITER_HOLDS_DOCUMENT(el))
        return mfi_type_error(err, "delete", "deletes", el, "object");
    bson_iter_recurse(el, &it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "q") == 0) {
            if (!(s->has_q = mfi_doc_arg(&it, &s->q)))
                return mfi_type_error(err, "delete.deletes", k, &it, "object");
        } else if (strcmp(k, "limit") == 0) {
            if (!mfi_as_int64(&it, &s->limit))
                return mfi_type_error(err, "delete.deletes", k, &it, "long");
            has_limit = true;
        } else if (strcmp(k, "hint") == 0) {
            if (mfi_hint_arg(&it, "delete.deletes.hint", err) != 0)
                return err->code;
            s->hint = it;
            s->has_hint = true;
        } else if (strcmp(k, "collation") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                return mfi_type_error(err, "delete.deletes", k, &it, "object");
            s->coll = it;
            s->has_coll = mfi_collation_given(&it);
        } else {
            return mf_error_set(err, 40415, "BSON field 'delete.deletes.%s' is an unknown field.",
                                k);
        }
    }
    if (!s->has_q)
        return mf_error_set(err, 40414,
                            "BSON field 'delete.deletes.q' is missing but a required field");
    if (!has_limit)
        return mf_error_set(err, 40414,
                            "BSON field 'delete.deletes.limit' is missing but a required field");
    if (s->limit != 0 && s->limit != 1)
        return mf_error_set(err, MF_FailedToParse,
                            "The limit field in delete objects must be 0 or 1. Got %lld",
                            (long long)s->limit);
    return 0;
}

int mfi_cmd_delete(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    bson_iter_t stmts, el;
    uint32_t count;
    bool ordered;
    int rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err);
    if (rc == 0)
        rc = stmts_arg(cmd, "delete", "deletes", &stmts, &count, err);
    if (rc == 0)
        rc = check_write_fields(cmd, "delete", "deletes", &ordered, err);
    if (rc)
        return rc;
    delete_stmt *st = calloc(count, sizeof *st);
    if (!st)
        return oom(err);
    uint32_t i = 0;
    bson_iter_recurse(&stmts, &el);
    while (rc == 0 && bson_iter_next(&el))
        rc = parse_delete_stmt(&el, &st[i++], err);
    if (rc == 0)
        rc = mfi_user_write_ns(ctx->inst, ns, err);
    xenv x = {0};
    bson_t let;
    if (rc == 0)
        rc = xenv_open(&x, ctx, cmd, "delete", ns, NULL, &let, err);
    if (rc) {
        xenv_close(&x);
        free(st);
        return rc;
    }
    int64_t n = 0;
    bson_t werrs = BSON_INITIALIZER;
    uint32_t nerr = 0;
    mf_lsn lsn = 0;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    wtarget w;
    if (c)
        mf_coll_lock(c, true);
    rc = target_open(&w, ctx, e, c, false, err);
    /* a statement's start: its counts then (a delete of every match goes
     * on after it waited for a transaction: what it deleted stays) */
    int64_t t0 = 0, n0 = 0, kd = 0;
    bool going_on = false;
    for (i = 0; rc == 0 && i < count; i++) {
        mf_error serr;
        mf_matcher *m = NULL;
        hits h = {0};
        mf_collator *given = NULL, *coll = NULL;
        mfi_op_debug sd;
        if (!going_on) {
            t0 = mf_clock_mono_us();
            n0 = n;
            kd = w.ix.keys_deleted;
        }
        going_on = false;
        mfi_op_debug_init(&sd, "remove");
        snprintf(sd.ns, sizeof sd.ns, "%s", ns);
        int r = st[i].has_coll ? mfi_collation_arg(&st[i].coll, "delete.deletes", "collation",
                                                   &given, &serr)
                               : 0;
        if (r == 0)
            r = mf_cl_collation_for(c, st[i].has_coll, given, &coll, &serr);
        mf_collator_unref(given);
        mf_expr_ctx *own = NULL;
        mf_expr_hooks hooks;
        if (r == 0)
            r = stmt_exprs(&x, coll, &own, &hooks, &serr);
        if (r == 0)
            r = mf_matcher_parse_coll(&st[i].q, &hooks, coll, &m, &serr);
        mf_collator_unref(coll); /* the matcher holds its own */
        /* a retryable write's statement runs once (retry.c); a delete of
         * every match (limit 0) is not retryable */
        bool retry = ctx->retry && st[i].limit != 0, before = false;
        int32_t sid = retry ? mfi_retry_stmt_id(ctx->retry, i) : 0;
        if (r == 0 && retry) {
            bson_t entry;
            r = mfi_retry_check(ctx, sid, &before, &entry, &serr);
            bson_destroy(&entry);
            if (r == 0 && before)
                n++;
            else if (r == 0)
                mfi_retry_log(ctx);
        }
        if (r == 0 && c && !before) {
            mf_cl_op_statement(st[i].limit == 0);
            r = find_hits(w.inst, e, c, &w.ix, &st[i].q, m,
                          st[i].has_hint ? &st[i].hint : NULL, NULL, NULL, st[i].limit == 0,
                          false, x.deadline, &h, NULL, &serr);
        }
        for (size_t j = 0; r == 0 && j < h.n; j++) {
            bool deleted;
            if ((r = write_time_check(&x, &serr)) != 0)
                break;
            r = delete_record(&w, h.v[j].rid, NULL, &deleted, &lsn, &serr);
            n += deleted;
        }
        if (retry && !before) {
            int dr = mfi_retry_done(ctx, sid, &serr);
            if (r == 0)
                r = dr;
        }
        /* a transaction holds a document it deletes (coll/txn.c): wait for
         * it with the collection let go, then run the statement again */
        uint64_t holder = r == MF_WriteConflict ? mf_cl_op_take_wait() : 0;
        if (holder) {
            free(h.v);
            mf_matcher_free(m);
            mf_expr_ctx_free(own);
            if (st[i].limit == 0)
                going_on = true;
            else
                n = n0;
            r = target_wait(&w, ctx, e, ns, holder, false, &c, &serr);
            if (r == 0) {
                i--;
                continue;
            }
            going_on = false;
            h = (hits){0};
            m = NULL;
            own = NULL;
        }
        atomic_fetch_add_explicit(&ctx->inst->counters.op_delete, 1, memory_order_relaxed);
        sd.keys_examined = h.keys_examined;
        sd.docs_examined = h.docs_examined;
        memcpy(sd.plan_summary, h.plan_summary, sizeof sd.plan_summary);
        sd.ndeleted = n - n0;
        sd.keys_deleted = w.ix.keys_deleted - kd;
        debug_sum(ctx->dbg, &sd);
        if (mfi_profile_statement_wanted(ctx, t0)) {
            bson_t desc = BSON_INITIALIZER;
            BSON_APPEND_DOCUMENT(&desc, "q", &st[i].q);
            BSON_APPEND_INT64(&desc, "limit", st[i].limit);
            if (st[i].has_hint)
                mf_bsonx_append_iter(&desc, "hint", -1, &st[i].hint);
            if (st[i].has_coll)
                mf_bsonx_append_iter(&desc, "collation", -1, &st[i].coll);
            mfi_profile_statement(ctx, &sd, &desc, t0, r, &serr);
            bson_destroy(&desc);
        }
        free(h.v);
        mf_matcher_free(m);
        mf_expr_ctx_free(own);
        if (r != 0) {
            add_write_error(&werrs, &nerr, i, r, &serr, ns, NULL);
            if (mfi_write_fatal(r) && !mfi_retry_injected(ctx)) {
                *err = serr;
                rc = r;
            }
            if (ordered || rc)
                break;
        }
    }
    target_close(&w);
    if (c)
        mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    xenv_close(&x);
    free(st);
    mfi_ctx_wrote(ctx, lsn); /* the dispatcher syncs before the reply */
    if (rc == 0) {
        BSON_APPEND_INT32(reply, "n", (int32_t)n);
        mfi_write_reply_base(ctx, reply, nerr, &werrs);
    }
    bson_destroy(&werrs);
    return rc;
}

/* --------------------------------------------------------- findAndModify */

typedef struct fam_args {
    bson_t query, sort, fields, update;
    bool has_query, has_sort, has_fields, has_update;
    bool is_pipeline; /* `update` is an array of stages */
    bool remove, return_new, upsert;
    bson_t af;
    const bson_t *array_filters;
    bson_iter_t hint;
    bool has_hint;
    mf_collator *coll; /* the command's collation (one reference), if has_coll */
    bool has_coll;
} fam_args;

static int parse_fam(const bson_t *cmd, fam_args *a, mf_error *err)
{
    bson_iter_t it;
    memset(a, 0, sizeof *a);
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "query") == 0) {
            if (BSON_ITER_HOLDS_NULL(&it))
                continue;
            if (!(a->has_query = mfi_doc_arg(&it, &a->query)))
                return mfi_type_error(err, "findAndModify", k, &it, "object");
        } else if (strcmp(k, "sort") == 0) {
            if (BSON_ITER_HOLDS_NULL(&it))
                continue;
            if (!(a->has_sort = mfi_doc_arg(&it, &a->sort)))
                return mfi_type_error(err, "findAndModify", k, &it, "object");
        } else if (strcmp(k, "fields") == 0) {
            if (BSON_ITER_HOLDS_NULL(&it))
                continue;
            if (!(a->has_fields = mfi_doc_arg(&it, &a->fields)))
                return mfi_type_error(err, "findAndModify", k, &it, "object");
        } else if (strcmp(k, "update") == 0) {
            if (BSON_ITER_HOLDS_NULL(&it))
                continue;
            if (BSON_ITER_HOLDS_ARRAY(&it)) {
                uint32_t len;
                const uint8_t *data;
                bson_iter_t stage;
                bson_iter_array(&it, &len, &data);
                a->has_update = a->is_pipeline = bson_init_static(&a->update, data, len);
                bson_iter_recurse(&it, &stage); /* parsePipelineFromBSON */
                while (bson_iter_next(&stage))
                    if (!BSON_ITER_HOLDS_DOCUMENT(&stage))
                        return mf_error_set(err, MF_TypeMismatch, "Each element of the "
                                            "'pipeline' array must be an object");
            } else if (!(a->has_update = mfi_doc_arg(&it, &a->update)))
                return mf_error_set(err, MF_FailedToParse,
                                    "Update argument must be either an object or an array");
        } else if (strcmp(k, "remove") == 0) {
            a->remove = bson_iter_as_bool(&it);
        } else if (strcmp(k, "new") == 0) {
            a->return_new = bson_iter_as_bool(&it);
        } else if (strcmp(k, "upsert") == 0) {
            a->upsert = bson_iter_as_bool(&it);
        } else if (strcmp(k, "arrayFilters") == 0) {
            uint32_t len;
            const uint8_t *data;
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return mfi_type_error(err, "findAndModify", k, &it, "array");
            bson_iter_array(&it, &len, &data);
            bson_init_static(&a->af, data, len);
            a->array_filters = &a->af;
        } else if (strcmp(k, "hint") == 0) {
            if (mfi_hint_arg(&it, "findAndModify.hint", err) != 0)
                return err->code;
            a->hint = it;
            a->has_hint = true;
        } else if (strcmp(k, "collation") == 0) {
            mf_collator_unref(a->coll);
            a->coll = NULL;
            a->has_coll = mfi_collation_given(&it);
            if (a->has_coll && mfi_collation_arg(&it, "findAndModify", k, &a->coll, err) != 0)
                return err->code;
        } else if (strcmp(k, "bypassDocumentValidation") == 0 || strcmp(k, "let") == 0 ||
                   strcmp(k, "rawData") == 0 || mfi_is_generic_arg(k)) {
        } else {
            return mf_error_set(err, 40415, "BSON field 'findAndModify.%s' is an unknown field.",
                                k);
        }
    }
    if (mfi_natural_sort(&a->sort, &a->has_sort, &a->hint, &a->has_hint, err) != 0)
        return err->code;
    if (a->remove && a->has_update)
        return mf_error_set(err, MF_FailedToParse, "Cannot specify both an update and remove=true");
    if (!a->remove && !a->has_update)
        return mf_error_set(err, MF_FailedToParse,
                            "Either an update or remove=true must be specified");
    if (a->remove && a->upsert)
        return mf_error_set(err, MF_FailedToParse, "Cannot specify both upsert=true and remove=true");
    if (a->remove && a->return_new)
        return mf_error_set(err, MF_FailedToParse,
                            "Cannot specify both new=true and remove=true; 'remove' always returns "
                            "the deleted document");
    return 0;
}

/* A retried findAndModify's answer, from its oplog entry and the image
 * its first run kept (config.image_collection): the document it returned,
 * whether it matched or upserted.  Catalog lock held. */
static int retried_fam(mf_cmd_ctx *ctx, const bson_t *entry, bool return_new, bson_t *value,
                       bool *has_value, bool *matched, bool *upserted, bson_t *upserted_id,
                       mf_error *err)
{
    bson_iter_t it, o;
    const char *op = bson_iter_init_find(&it, entry, "op") && BSON_ITER_HOLDS_UTF8(&it)
                         ? bson_iter_utf8(&it, NULL)
                         : "";
    if (strcmp(op, "i") == 0) { /* an upsert: the entry has the document */
        *upserted = true;
        if (bson_iter_init_find(&it, entry, "o") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
            uint32_t len;
            const uint8_t *data;
            bson_t doc;
            bson_iter_document(&it, &len, &data);
            bson_init_static(&doc, data, len);
            bson_reinit(upserted_id);
            if (bson_iter_recurse(&it, &o) && bson_iter_find(&o, "_id"))
                mf_bsonx_append_iter(upserted_id, "", 0, &o);
            if (return_new) {
                bson_copy_to(&doc, value);
                *has_value = true;
            }
        }
        return 0;
    }
    bson_t key = BSON_INITIALIZER, rec;
    bool found;
    BSON_APPEND_DOCUMENT(&key, "_id", &ctx->retry->lsid);
    int rc = mf_cl_read_by_id(ctx->inst->engine, "config.image_collection", &key, &rec, &found,
                              err);
    bson_destroy(&key);
    if (rc == 0 && (!found || !bson_iter_init_find(&it, &rec, "image") ||
                    !BSON_ITER_HOLDS_DOCUMENT(&it)))
        rc = mf_error_set(err, MF_IncompleteTransactionHistory,
                          "Incomplete history detected for transaction %lld: the image of the "
                          "findAndModify is gone",
                          (long long)ctx->retry->txn_number);
    if (rc == 0) {
        uint32_t len;
        const uint8_t *data;
        bson_t doc;
        bson_iter_document(&it, &len, &data);
        bson_init_static(&doc, data, len);
        bson_copy_to(&doc, value);
        *has_value = *matched = true;
    }
    bson_destroy(&rec);
    return rc;
}

int mfi_cmd_find_and_modify(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    fam_args a;
    mf_matcher *m = NULL;
    upd u = {0};
    mf_projection *proj = NULL;
    mf_sort *sort = NULL;
    xenv x = {0};
    bson_t let;
    mf_collator *coll = NULL;
    static const bson_t empty = BSON_INITIALIZER;
    memset(&a, 0, sizeof a);
    int rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err);
    if (rc == 0)
        rc = parse_fam(cmd, &a, err);
    /* the stage names first, as mongod's update metrics read them */
    if (rc == 0 && a.is_pipeline)
        rc = mf_pipeline_lite_parse(&a.update, err);
    if (rc == 0)
        rc = mfi_user_write_ns(ctx->inst, ns, err);
    if (rc == 0)
        rc = mf_cl_collation_of_ns(e, ns, a.has_coll, a.coll, &coll, err);
    mf_collator_unref(a.coll);
    if (rc == 0)
        rc = xenv_open(&x, ctx, cmd, "findAndModify", ns, coll, &let, err);
    if (rc) {
        xenv_close(&x);
        mf_collator_unref(coll);
        return rc;
    }
    const bson_t *query = a.has_query ? &a.query : &empty;
    rc = mf_matcher_parse_coll(query, &x.hooks, coll, &m, err);
    if (rc == 0 && a.has_update)
        rc = upd_parse(&x, &a.update, a.is_pipeline, a.array_filters, NULL, coll, &u, err);
    if (rc == 0 && a.has_fields && a.fields.len > 5)
        rc = mf_projection_parse_coll(&a.fields, query, &x.hooks, MF_PROJ_FIND, coll, &proj,
                                      err);
    if (rc == 0 && a.has_sort && a.sort.len > 5)
        rc = mf_sort_parse_coll(&a.sort, coll, &sort, err);

    mf_coll *c = NULL;
    if (rc == 0 && a.upsert) {
        rc = mfi_coll_for_write(ctx, ns, &c, err);
    } else if (rc == 0) {
        mf_engine_catalog_lock(e, false);
        c = mf_engine_coll(e, ns);
    }
    bool locked = rc == 0;
    hits h = {0};
    bson_t value, upserted_id;
    bool has_value = false, upserted = false, matched = false;
    int64_t pos = -1;
    mf_lsn lsn = 0;
    bson_init(&upserted_id);
    wtarget w = {0};
    bool retry = ctx->retry != NULL, ran_before = false;
    int32_t sid = retry ? mfi_retry_stmt_id(ctx->retry, 0) : 0;
    if (c) {
        mf_coll_lock(c, true);
        rc = target_open(&w, ctx, e, c, !a.remove && !mfi_bypass_validation(cmd), err);
        /* a retryable findAndModify runs once (retry.c): a retry answers
         * from what the first run logged */
        if (rc == 0 && retry) {
            bson_t entry;
            rc = mfi_retry_check(ctx, sid, &ran_before, &entry, err);
            if (rc == 0 && ran_before)
                rc = retried_fam(ctx, &entry, a.return_new, &value, &has_value, &matched,
                                 &upserted, &upserted_id, err);
            bson_destroy(&entry);
            if (rc == 0 && !ran_before) {
                mfi_retry_log(ctx);
                w.image = a.remove || !a.return_new ? 1 : 2;
            }
        }
        if (rc == 0 && !ran_before)
            rc = find_hits(w.inst, e, c, &w.ix, query, m, a.has_hint ? &a.hint : NULL, sort,
                       sort ? &a.sort : NULL, false,
                       upd_needs_pos(&u) || (proj && mf_projection_needs_pos(proj)),
                       x.deadline, &h, NULL, err);
        if (rc == 0 && !ran_before && h.n) {
            matched = true;
            pos = h.v[0].pos;
            if (a.remove) {
                bool deleted;
                rc = delete_record(&w, h.v[0].rid, &value, &deleted, &lsn, err);
                has_value = rc == 0 && deleted;
                matched = has_value;
            } else {
                bool modified;
                bson_t before, after;
                rc = update_record(&w, h.v[0].rid, &u, pos, x.now, &modified,
                                   &before, &after, &lsn, err);
                if (rc == 0) {
                    /* bson_t holds pointers into itself: move, never copy. */
                    bson_steal(&value, a.return_new ? &after : &before);
                    bson_destroy(a.return_new ? &before : &after);
                    has_value = true;
                }
            }
        } else if (rc == 0 && !ran_before && a.upsert) {
            bson_t stored;
            rc = upsert_insert(&w, query, &u, x.now, &stored, &upserted_id, &lsn, err);
            if (rc == 0) {
                upserted = true;
                if (a.return_new) {
                    bson_steal(&value, &stored);
                    has_value = true;
                } else {
                    bson_destroy(&stored);
                }
            } else {
                bson_destroy(&stored);
            }
        }
        if (retry && !ran_before) {
            int dr = mfi_retry_done(ctx, sid, err);
            if (rc == 0)
                rc = dr;
        }
        mfi_op_debug *d = ctx->dbg;
        if (d) { /* findAndModify's own entry: a command with a write's counts */
            d->keys_examined = h.keys_examined;
            d->docs_examined = h.docs_examined;
            memcpy(d->plan_summary, h.plan_summary, sizeof d->plan_summary);
            if (a.remove) {
                d->ndeleted = has_value;
            } else {
                d->n_matched = matched;
                d->n_modified = matched && rc == 0;
                d->n_upserted = upserted;
            }
            d->keys_inserted = w.ix.keys_inserted;
            d->keys_deleted = w.ix.keys_deleted;
        }
        /* mongod's DuplicateKeyErrorInfo rides on the error reply, as
         * does a validation failure's errInfo */
        if (rc == MF_DuplicateKey && w.dup.has && ctx->err_info) {
            BSON_APPEND_DOCUMENT(ctx->err_info, "keyPattern", &w.dup.key_pattern);
            BSON_APPEND_DOCUMENT(ctx->err_info, "keyValue", &w.dup.key_value);
        }
        if (rc == MF_DocumentValidationFailure && w.val && ctx->err_info)
            BSON_APPEND_DOCUMENT(ctx->err_info, "errInfo", mf_cl_validator_info(w.val));
        target_close(&w);
        mf_coll_unlock(c);
    }
    if (locked)
        mf_engine_catalog_unlock(e);
    free(h.v);
    mfi_ctx_wrote(ctx, lsn);
    if (rc == 0 && has_value && proj) {
        bson_t shaped;
        rc = mf_projection_apply(proj, &value, a.return_new ? -1 : pos, &shaped, err);
        bson_destroy(&value);
        bson_steal(&value, &shaped);
    }
    if (rc == 0) {
        bson_t leo;
        BSON_APPEND_DOCUMENT_BEGIN(reply, "lastErrorObject", &leo);
        BSON_APPEND_INT32(&leo, "n", matched || upserted ? 1 : 0);
        if (!a.remove)
            BSON_APPEND_BOOL(&leo, "updatedExisting", matched);
        bson_iter_t id;
        if (upserted && bson_iter_init(&id, &upserted_id) && bson_iter_next(&id))
            mf_bsonx_append_iter(&leo, "upserted", -1, &id);
        bson_append_document_end(reply, &leo);
        if (has_value)
            BSON_APPEND_DOCUMENT(reply, "value", &value);
        else
            BSON_APPEND_NULL(reply, "value");
        if (ran_before)
            BSON_APPEND_INT32(reply, "retriedStmtId", sid);
    }
    if (has_value)
        bson_destroy(&value);
    bson_destroy(&upserted_id);
    mf_matcher_free(m);
    upd_free(&u);
    mf_projection_free(proj);
    mf_sort_free(sort);
    mf_collator_unref(coll);
    xenv_close(&x);
    return rc;
}

/* ---------------------------------------------------------------- explain */

/* The one statement explain runs: its query, and its update (NULL: a
 * delete). */
typedef struct explain_stmt {
    const bson_t *q;
    const mf_matcher *m;
    const bson_iter_t *hint;
    const mf_sort *sort;       /* findAndModify's, or NULL */
    const bson_t *sort_spec;
    bool all;                  /* every match, or the first */
    const upd *u;
    bool upsert;
    int64_t now;
    mf_deadline *deadline;     /* the explain's maxTimeMS (the smaller of
                                  its own and its command's) */
} explain_stmt;

/* Plan the statement and, for executionStats, run it as the command would,
 * writing nothing: each match is updated in memory, to count the documents
 * the update would change, and an upsert that matches nothing builds the
 * document it would insert (so that its errors are the command's). */
static int explain_run(mf_engine *e, const explain_stmt *s, bool stats,
                       mfi_write_explained *x, mf_error *err)
{
    hits h = {0};
    int rc = 0;
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, x->ns);
    if (c) {
        mf_cl_indexes ix = {0};
        scan_report rep = {.run = stats, .plan = &x->plan, .exec = stats ? &x->exec : NULL,
                           .plans = &x->plans};
        x->found = true;
        mf_coll_lock(c, false);
        rc = mf_cl_indexes_load(c, &ix, err);
        if (rc == 0)
            rc = find_hits(NULL, e, c, &ix, s->q, s->m, s->hint, s->sort, s->sort_spec, s->all,
                           s->u && upd_needs_pos(s->u), s->deadline, &h, &rep, err);
        x->keys = rep.keys;
        x->docs = rep.docs;
        x->sorted = rep.sorted;
        for (size_t i = 0; rc == 0 && s->u && i < h.n; i++) {
            bson_t doc, out;
            bool found, changed;
            rc = record_updated(e, c, h.v[i].rid, s->u, h.v[i].pos, s->now, &doc, &out, &found,
                                &changed, err);
            if (found)
                bson_destroy(&out);
            x->n_modified += rc == 0 && changed;
        }
        mf_cl_indexes_free(&ix);
        mf_coll_unlock(c);
    }
    mf_engine_catalog_unlock(e);
    x->n_matched = (int64_t)h.n;
    free(h.v);
    if (rc == 0 && stats && s->upsert && x->n_matched == 0) {
        bson_t doc;
        rc = upsert_doc(s->q, s->u, s->now, &doc, err);
        bson_destroy(&doc);
        x->n_upserted = rc == 0;
    }
    return rc;
}

/* The statement's collation (`coll_it` when it gives one, else the
 * collection's default) and its expressions' context. */
static int explain_env(mf_cmd_ctx *ctx, const bson_t *cmd, const char *cmdname,
                       const bson_iter_t *coll_it, const char *coll_ctx, xenv *xe, bson_t *let,
                       mfi_write_explained *x, mf_error *err)
{
    int rc = mfi_collation_of_arg(ctx->inst->engine, x->ns, coll_it, coll_ctx, &x->coll, err);
    if (rc == 0)
        rc = xenv_open(xe, ctx, cmd, cmdname, x->ns, x->coll, let, err);
    return rc;
}

/* An explained update or delete: its fields checked, and `*stmts` put
 * before its statements, as the command does. */
static int explain_batch(const bson_t *cmd, const char *cmdname, const char *field,
                         bson_iter_t *stmts, uint32_t *count, mf_error *err)
{
    bool ordered;
    bson_iter_t arr;
    int rc = stmts_arg(cmd, cmdname, field, &arr, count, err);
    if (rc == 0)
        rc = check_write_fields(cmd, cmdname, field, &ordered, err);
    if (rc == 0)
        bson_iter_recurse(&arr, stmts);
    return rc;
}

/* mongod explains one statement, once the whole batch has parsed. */
static int explain_one(uint32_t count, mf_error *err)
{
    return count == 1 ? 0
                      : mf_error_set(err, MF_InvalidLength,
                                     "explained write batches must be of size 1");
}

static int explain_update(mf_cmd_ctx *ctx, const bson_t *cmd, bool stats,
                          mfi_write_explained *x, mf_error *err)
{
    bson_iter_t el;
    uint32_t count, i = 0;
    update_stmt s, other;
    int rc = explain_batch(cmd, "update", "updates", &el, &count, err);
    while (rc == 0 && bson_iter_next(&el))
        rc = parse_update_stmt(&el, i++ ? &other : &s, err);
    if (rc == 0)
        rc = explain_one(count, err);
    xenv xe = {0};
    bson_t let;
    mf_matcher *m = NULL;
    upd u = {0};
    if (rc == 0)
        rc = explain_env(ctx, cmd, "update", s.has_coll ? &s.coll : NULL, "update.updates",
                         &xe, &let, x, err);
    if (rc == 0)
        rc = mf_matcher_parse_coll(&s.q, &xe.hooks, x->coll, &m, err);
    if (rc == 0)
        rc = upd_parse(&xe, &s.u, s.is_pipeline, s.array_filters, s.constants, x->coll, &u, err);
    if (rc == 0 && s.multi && u.u && mf_update_is_replacement(u.u))
        rc = mf_error_set(err, MF_FailedToParse,
                          "multi update is not supported for replacement-style update");
    if (rc == 0) {
        mfi_view(&x->filter, &s.q);
        explain_stmt st = {.q = &s.q, .m = m, .hint = s.has_hint ? &s.hint : NULL, .all = s.multi,
                           .u = &u, .upsert = s.upsert, .now = xe.now, .deadline = xe.deadline};
        rc = explain_run(ctx->inst->engine, &st, stats, x, err);
    }
    upd_free(&u);
    mf_matcher_free(m);
    xenv_close(&xe);
    return rc;
}

static int explain_delete(mf_cmd_ctx *ctx, const bson_t *cmd, bool stats,
                          mfi_write_explained *x, mf_error *err)
{
    bson_iter_t el;
    uint32_t count, i = 0;
    delete_stmt s, other;
    int rc = explain_batch(cmd, "delete", "deletes", &el, &count, err);
    while (rc == 0 && bson_iter_next(&el))
        rc = parse_delete_stmt(&el, i++ ? &other : &s, err);
    if (rc == 0)
        rc = explain_one(count, err);
    xenv xe = {0};
    bson_t let;
    mf_matcher *m = NULL;
    if (rc == 0)
        rc = explain_env(ctx, cmd, "delete", s.has_coll ? &s.coll : NULL, "delete.deletes",
                         &xe, &let, x, err);
    if (rc == 0)
        rc = mf_matcher_parse_coll(&s.q, &xe.hooks, x->coll, &m, err);
    if (rc == 0) {
        mfi_view(&x->filter, &s.q);
        x->is_delete = true;
        explain_stmt st = {.q = &s.q, .m = m, .hint = s.has_hint ? &s.hint : NULL,
                           .all = s.limit == 0, .now = xe.now, .deadline = xe.deadline};
        rc = explain_run(ctx->inst->engine, &st, stats, x, err);
    }
    mf_matcher_free(m);
    xenv_close(&xe);
    return rc;
}

static int explain_fam(mf_cmd_ctx *ctx, const bson_t *cmd, bool stats, mfi_write_explained *x,
                       mf_error *err)
{
    fam_args a;
    xenv xe = {0};
    bson_t let;
    mf_matcher *m = NULL;
    upd u = {0};
    mf_projection *proj = NULL;
    mf_sort *sort = NULL;
    static const bson_t empty = BSON_INITIALIZER;
    int rc = parse_fam(cmd, &a, err);
    if (rc == 0)
        rc = mf_cl_collation_of_ns(ctx->inst->engine, x->ns, a.has_coll, a.coll, &x->coll, err);
    mf_collator_unref(a.coll);
    if (rc == 0)
        rc = xenv_open(&xe, ctx, cmd, "findAndModify", x->ns, x->coll, &let, err);
    const bson_t *query = a.has_query ? &a.query : &empty;
    if (rc == 0)
        rc = mf_matcher_parse_coll(query, &xe.hooks, x->coll, &m, err);
    if (rc == 0 && a.has_update)
        rc = upd_parse(&xe, &a.update, a.is_pipeline, a.array_filters, NULL, x->coll, &u, err);
    /* the projection is not run, but refused as the command refuses it */
    if (rc == 0 && a.has_fields && a.fields.len > 5)
        rc = mf_projection_parse_coll(&a.fields, query, &xe.hooks, MF_PROJ_FIND, x->coll, &proj,
                                      err);
    if (rc == 0 && a.has_sort && a.sort.len > 5)
        rc = mf_sort_parse_coll(&a.sort, x->coll, &sort, err);
    if (rc == 0) {
        mfi_view(&x->filter, query);
        x->is_delete = a.remove;
        mfi_view(&x->sort, &a.sort);
        x->has_sort = sort != NULL;
        explain_stmt st = {.q = query, .m = m, .hint = a.has_hint ? &a.hint : NULL,
                           .sort = sort, .sort_spec = &a.sort, .u = a.has_update ? &u : NULL,
                           .upsert = a.upsert, .now = xe.now, .deadline = xe.deadline};
        rc = explain_run(ctx->inst->engine, &st, stats, x, err);
        /* the document findAndModify would return */
        x->n_returned = x->n_matched > 0 || (x->n_upserted && a.return_new);
    }
    mf_projection_free(proj);
    mf_sort_free(sort);
    upd_free(&u);
    mf_matcher_free(m);
    xenv_close(&xe);
    return rc;
}

int mfi_write_explain(mf_cmd_ctx *ctx, const char *op, const bson_t *cmd, bool stats,
                      mfi_write_explained *x, mf_error *err)
{
    memset(x, 0, sizeof *x);
    bson_init(&x->plan);
    bson_init(&x->exec);
    mfi_plans_init(&x->plans);
    int rc = mfi_coll_arg(ctx, cmd, x->ns, sizeof x->ns, err);
    if (rc == 0 && strcmp(op, "update") == 0)
        rc = explain_update(ctx, cmd, stats, x, err);
    else if (rc == 0 && strcmp(op, "delete") == 0)
        rc = explain_delete(ctx, cmd, stats, x, err);
    else if (rc == 0)
        rc = explain_fam(ctx, cmd, stats, x, err);
    if (rc)
        mfi_write_explained_free(x);
    return rc;
}

void mfi_write_explained_free(mfi_write_explained *x)
{
    bson_destroy(&x->plan);
    bson_destroy(&x->exec);
    mfi_plans_free(&x->plans);
    bson_init(&x->plan);
    bson_init(&x->exec);
    mfi_plans_init(&x->plans);
    mf_collator_unref(x->coll);
    x->coll = NULL;
}
