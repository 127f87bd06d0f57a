/*
 * views.c -- read-only views, as mongod 7.0's: a name whose documents are
 * another collection's (or view's) run through a pipeline.
 *
 * A view is a document of its database's system.views collection, as in
 * mongod: {_id: "db.view", viewOn: "coll", pipeline: [...], collation?}.
 * So dropDatabase takes a database's views with it, listCollections lists
 * system.views as a collection, and a view's creation or removal is an
 * insert or delete there -- in the oplog and in change streams too.
 *
 * A read of a view (find, count, distinct, aggregate, and their explain)
 * runs as an aggregate on the collection the chain of views ends at: the
 * views' pipelines, innermost first, then the read's own stages, under the
 * outermost view's collation (mfi_view_resolve).  Its cursor keeps the
 * view's name.  Writes, index commands and the like are refused with
 * CommandNotSupportedOnView (166).
 *
 * A name is a collection or a view, never both; a view may be defined on
 * a name that does not exist (it reads as empty).  Chains hold at most 20
 * views; cycles are refused when a view is created or changed.
 */
#include "command_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VIEW_DEPTH 20

/* "db.system.views" of the database of `ns`. */
static void views_ns(const char *ns, char *out, size_t cap)
{
    const char *dot = strchr(ns, '.');
    int dblen = dot ? (int)(dot - ns) : (int)strlen(ns);
    snprintf(out, cap, "%.*s.system.views", dblen, ns);
}

/* The definition of view `ns` into `def` (initialised here, a copy);
 * false when `ns` is no view.  Catalog lock held (shared). */
static bool lookup_held(mf_engine *e, const char *ns, bson_t *def)
{
    char vns[MF_MAX_NS_LEN + 32];
    bson_t id = BSON_INITIALIZER;
    bool found = false;
    mf_error err;
    views_ns(ns, vns, sizeof vns);
    BSON_APPEND_UTF8(&id, "_id", ns);
    if (mf_cl_read_by_id(e, vns, &id, def, &found, &err) != 0)
        found = false;
    bson_destroy(&id);
    if (!found) {
        bson_destroy(def);
        bson_init(def);
    }
    return found;
}

bool mfi_view_lookup(mf_instance *inst, const char *ns, bson_t *def)
{
    mf_engine *e = inst->engine;
    bson_init(def);
    const char *dot = strchr(ns, '.');
    if (!dot)
        return false;
    mf_engine_catalog_lock(e, false);
    bool found = !mf_engine_coll(e, ns) && lookup_held(e, ns, def);
    mf_engine_catalog_unlock(e);
    return found;
}

bool mfi_is_view(mf_instance *inst, const char *ns)
{
    bson_t def;
    bool is = mfi_view_lookup(inst, ns, &def);
    bson_destroy(&def);
    return is;
}

int mfi_view_refuse(mf_instance *inst, const char *ns, mf_error *err)
{
    if (!mfi_is_view(inst, ns))
        return 0;
    return mf_error_set(err, MF_CommandNotSupportedOnView, "Namespace %s is a view, not a collection",
                        ns);
}

static const char *def_view_on(const bson_t *def)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, def, "viewOn") && BSON_ITER_HOLDS_UTF8(&it)
               ? bson_iter_utf8(&it, NULL)
               : "";
}

static bool def_field(const bson_t *def, const char *name, bson_t *out)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, def, name) && mf_bsonx_container_view(&it, out);
}

/* "db." + coll */
static void sibling(const char *ns, const char *coll, char *out, size_t cap)
{
    const char *dot = strchr(ns, '.');
    int dblen = dot ? (int)(dot - ns) : (int)strlen(ns);
    snprintf(out, cap, "%.*s.%s", dblen, ns, coll);
}

static void append_array_items(bson_t *to, uint32_t *n, const bson_t *arr)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, arr))
        return;
    while (bson_iter_next(&it)) {
        char key[16];
        const char *k;
        mf_uint32_to_key((*n)++, &k, key, sizeof key);
        mf_bsonx_append_iter(to, k, -1, &it);
    }
}

void mfi_view_clear(mfi_resolved_view *v)
{
    bson_destroy(&v->pipeline);
    bson_destroy(&v->collation);
}

int mfi_view_resolve(mf_instance *inst, const char *ns, mfi_resolved_view *v, mf_error *err)
{
    mf_engine *e = inst->engine;
    bson_t *defs[MAX_VIEW_DEPTH + 1];
    size_t n = 0;
    int rc = 0;
    memset(v, 0, sizeof *v);
    bson_init(&v->pipeline);
    bson_init(&v->collation);
    snprintf(v->base, sizeof v->base, "%s", ns);
    mf_engine_catalog_lock(e, false);
    for (;;) {
        if (mf_engine_coll(e, v->base))
            break;
        bson_t def;
        if (!lookup_held(e, v->base, &def)) {
            bson_destroy(&def);
            break;
        }
        if (n == MAX_VIEW_DEPTH) {
            bson_destroy(&def);
            rc = mf_error_set(err, MF_ViewDepthLimitExceeded,
                              "View depth too deep or view cycle detected; maximum depth is %d",
                              MAX_VIEW_DEPTH);
            break;
        }
        defs[n] = bson_copy(&def);
        bson_destroy(&def);
        if (n == 0) {
            bson_t c;
            if (def_field(defs[0], "collation", &c))
                bson_concat(&v->collation, &c);
        }
        char next[MF_MAX_NS_LEN + 1];
        sibling(ns, def_view_on(defs[n]), next, sizeof next);
        snprintf(v->base, sizeof v->base, "%s", next);
        n++;
    }
    mf_engine_catalog_unlock(e);
    v->is_view = n > 0;
    /* innermost view's stages first */
    uint32_t k = 0;
    for (size_t i = n; i-- > 0;) {
        bson_t p;
        if (rc == 0 && def_field(defs[i], "pipeline", &p))
            append_array_items(&v->pipeline, &k, &p);
        bson_destroy(defs[i]);
    }
    if (rc)
        mfi_view_clear(v);
    return rc;
}

/* ------------------------------------------------------ create and change */

/* The stages of `pipeline` a view may not hold: mongod's
 * validatePipeline, for the stages whose refusal does not need a parse. */
static int check_stages(const char *ns, const bson_t *pipeline, mf_error *err)
{
    bson_iter_t it, st;
    uint32_t i = 0;
    bson_iter_init(&it, pipeline);
    while (bson_iter_next(&it)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return mf_error_set(err, MF_TypeMismatch,
                                "BSON field 'create.pipeline.%u' is the wrong type '%s', "
                                "expected type 'object'",
                                i, mf_bsonx_type_alias(bson_iter_type(&it)));
        bson_iter_recurse(&it, &st);
        if (bson_iter_next(&st)) {
            const char *name = bson_iter_key(&st);
            if (strcmp(name, "$out") == 0 || strcmp(name, "$merge") == 0)
                return mf_error_set(err, MF_OptionNotSupportedOnView,
                                    "Invalid pipeline for view %s :: caused by :: The aggregation "
                                    "stage %s in location %u of the pipeline cannot be used in "
                                    "the view definition of %s because it writes to disk",
                                    ns, name, i, ns);
            if (strcmp(name, "$changeStream") == 0)
                return mf_error_set(err, MF_OptionNotSupportedOnView,
                                    "Invalid pipeline for view %s :: caused by :: $changeStream "
                                    "cannot be used in a view definition",
                                    ns);
            if (strcmp(name, "$documents") == 0 || strcmp(name, "$currentOp") == 0 ||
                strcmp(name, "$listLocalSessions") == 0 || strcmp(name, "$listSessions") == 0)
                return mf_error_set(err, MF_InvalidNamespace,
                                    "Invalid pipeline for view %s :: caused by :: '%s' cannot be "
                                    "used in a view definition",
                                    ns, name);
        }
        i++;
    }
    return 0;
}

/* Parse the pipeline as a read of `base` would, for its errors. */
static int parse_pipeline(mf_cmd_ctx *ctx, const char *ns, const char *base,
                          const bson_t *pipeline, const mf_collator *coll, mf_error *err)
{
    const char *dot = strchr(base, '.');
    char db[MF_MAX_NS_LEN + 1];
    snprintf(db, sizeof db, "%.*s", (int)(dot - base), base);
    mf_agg_opts o = {.db = db, .coll = dot + 1, .env = &ctx->inst->agg_env, .collation = coll,
                     .now_ms = mf_clock_wall_ms()};
    mf_pipeline *p = NULL;
    int rc = mf_pipeline_parse(pipeline, &o, &p, err);
    mf_pipeline_free(p);
    if (rc && rc != 40324 && rc != 40323) { /* (mongod's lite parse: unprefixed) */
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        mf_error_set(err, rc, "Invalid pipeline for view %s :: caused by :: %s", ns, msg);
    }
    return rc;
}

/* The chain from `view_on` (a namespace) must not come back to `ns` and
 * must hold at most 20 views with `ns`; a view it names directly must
 * have `ns`'s collation.  Catalog lock held. */
static int check_graph(mf_engine *e, const char *ns, const char *view_on, const bson_t *collation,
                       mf_error *err)
{
    char path[MAX_VIEW_DEPTH + 2][MF_MAX_NS_LEN + 1];
    size_t n = 0;
    snprintf(path[n++], sizeof path[0], "%s", ns);
    char cur[MF_MAX_NS_LEN + 1];
    snprintf(cur, sizeof cur, "%s", view_on);
    bool first = true;
    for (;;) {
        if (strcmp(cur, ns) == 0) {
            /* mongod prints the start, then the path back to it, last
             * first: a => a => a for a view on itself */
            char msg[1024];
            size_t at = (size_t)snprintf(msg, sizeof msg, "View cycle detected: %s => %s", ns,
                                         ns);
            for (size_t i = n; i-- > 0 && at < sizeof msg;)
                at += (size_t)snprintf(msg + at, sizeof msg - at, " => %s", path[i]);
            return mf_error_set(err, MF_GraphContainsCycle, "%s", msg);
        }
        if (mf_engine_coll(e, cur))
            return 0;
        bson_t def;
        if (!lookup_held(e, cur, &def)) {
            bson_destroy(&def);
            return 0;
        }
        if (first) {
            bson_t theirs;
            bool same = def_field(&def, "collation", &theirs)
                            ? mf_bsonx_compare_docs(&theirs, collation) == 0
                            : bson_empty(collation);
            if (!same) {
                bson_destroy(&def);
                return mf_error_set(err, MF_OptionNotSupportedOnView,
                                    "View %s has conflicting collation with view %s", ns, cur);
            }
            first = false;
        }
        if (n > MAX_VIEW_DEPTH - 1) {
            bson_destroy(&def);
            return mf_error_set(err, MF_ViewDepthLimitExceeded,
                                "View depth limit exceeded; maximum depth is %d", MAX_VIEW_DEPTH);
        }
        snprintf(path[n++], sizeof path[0], "%s", cur);
        char next[MF_MAX_NS_LEN + 1];
        sibling(ns, def_view_on(&def), next, sizeof next);
        bson_destroy(&def);
        snprintf(cur, sizeof cur, "%s", next);
    }
}

/* The definition document: {_id, viewOn, pipeline, collation?}. */
static void make_def(const char *ns, const char *view_on, const bson_t *pipeline,
                     const bson_t *collation, bson_t *out)
{
    bson_init(out);
    BSON_APPEND_UTF8(out, "_id", ns);
    BSON_APPEND_UTF8(out, "viewOn", view_on);
    BSON_APPEND_ARRAY(out, "pipeline", pipeline);
    if (!bson_empty(collation))
        BSON_APPEND_DOCUMENT(out, "collation", collation);
}

/* Log the change as mongod's command entry, {create: <view>, viewOn,
 * pipeline, collation?} or {collMod: <view>, viewOn, pipeline}, so that
 * change streams tell it (their create and modify events). */
static int log_ddl(mf_cmd_ctx *ctx, const char *ns, bool created, const char *view_on,
                   const bson_t *pipeline, const bson_t *collation, mf_lsn *lsn, mf_error *err)
{
    mf_cl_ddl d;
    mf_cl_ddl_init(&d, &ctx->log, ns);
    if (!d.logged)
        return 0;
    bson_t o = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&o, created ? "create" : "collMod", strchr(ns, '.') + 1);
    BSON_APPEND_UTF8(&o, "viewOn", view_on);
    BSON_APPEND_ARRAY(&o, "pipeline", pipeline);
    if (created && !bson_empty(collation))
        BSON_APPEND_DOCUMENT(&o, "collation", collation);
    int rc = mf_cl_ddl_add(&d, ns, NULL, &o, NULL, err);
    if (rc == 0)
        rc = mf_cl_ddl_write(&d, ctx->inst->engine, lsn, err);
    mf_cl_ddl_end(&d, false);
    bson_destroy(&o);
    return rc;
}

/* Validate and store a definition (new or changed). */
static int store(mf_cmd_ctx *ctx, const char *ns, const char *view_on, const bson_t *pipeline,
                 const bson_t *collation, const mf_collator *coll, mf_error *err)
{
    bool created = !mfi_is_view(ctx->inst, ns);
    mf_engine *e = ctx->inst->engine;
    char on[MF_MAX_NS_LEN + 1];
    sibling(ns, view_on, on, sizeof on);
    int rc = check_stages(ns, pipeline, err);
    if (rc == 0) {
        mfi_resolved_view base;
        if ((rc = mfi_view_resolve(ctx->inst, on, &base, err)) == 0) {
            rc = parse_pipeline(ctx, ns, base.base, pipeline, coll, err);
            mfi_view_clear(&base);
        } else if (rc == MF_ViewDepthLimitExceeded) {
            mf_error_set(err, rc, "View depth limit exceeded; maximum depth is %d",
                         MAX_VIEW_DEPTH);
        }
    }
    if (rc == 0) {
        mf_engine_catalog_lock(e, false);
        rc = check_graph(e, ns, on, collation, err);
        mf_engine_catalog_unlock(e);
    }
    if (rc)
        return rc;
    bson_t def;
    char vns[MF_MAX_NS_LEN + 32];
    mf_lsn lsn = 0;
    views_ns(ns, vns, sizeof vns);
    make_def(ns, view_on, pipeline, collation, &def);
    rc = mf_cl_put_by_id(e, mfi_ctx_log(ctx), vns, &def, &lsn, err);
    if (rc == 0)
        rc = log_ddl(ctx, ns, created, view_on, pipeline, collation, &lsn, err);
    bson_destroy(&def);
    mfi_ctx_wrote(ctx, lsn);
    return rc;
}

/* viewOn's argument as mongod's IDL takes it. */
static int view_on_arg(const bson_iter_t *it, const char *cmd, const char **out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mfi_type_error(err, cmd, "viewOn", it, "string");
    *out = bson_iter_utf8(it, NULL);
    if (!**out)
        return mf_error_set(err, MF_BadValue, "'viewOn' cannot be empty");
    return 0;
}

int mfi_view_create(mf_cmd_ctx *ctx, const char *ns, const bson_t *cmd, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    bson_iter_t it;
    const char *view_on = NULL;
    bson_t pipeline = BSON_INITIALIZER, collation = BSON_INITIALIZER;
    mf_collator *coll = NULL;
    bool has_pipeline = false;
    int rc = 0;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "viewOn") == 0) {
            rc = view_on_arg(&it, "create", &view_on, err);
        } else if (strcmp(k, "pipeline") == 0) {
            bson_t p;
            if (!BSON_ITER_HOLDS_ARRAY(&it) || !mf_bsonx_container_view(&it, &p)) {
                rc = mfi_type_error(err, "create", k, &it, "array");
            } else {
                bson_destroy(&pipeline);
                bson_copy_to(&p, &pipeline);
                has_pipeline = true;
            }
        } else if (strcmp(k, "collation") == 0) {
            mf_collator_unref(coll);
            coll = NULL;
            if (mfi_collation_given(&it))
                rc = mfi_collation_arg(&it, "create", k, &coll, err);
        } else if (mfi_is_generic_arg(k)) {
        } else if (strcmp(k, "timeseries") == 0) {
            rc = mf_error_set(err, MF_InvalidOptions, "%s: 'timeseries' is not allowed with 'viewOn'",
                              ns);
        } else if (strcmp(k, "clusteredIndex") == 0) {
            rc = mf_error_set(err, 6026500,
                              "The 'clusteredIndex' option is not supported with views");
        } else if (strcmp(k, "idIndex") == 0) {
            rc = mf_error_set(err, MF_InvalidOptions, "'idIndex' is not allowed with 'viewOn'");
        } else {
            /* mongod stores nothing of a view's other options; they are
             * refused here rather than dropped without a word */
            rc = mf_error_set(err, MF_InvalidOptions, "option not supported on a view: %s", k);
        }
    }
    if (rc == 0 && has_pipeline && !view_on)
        rc = mf_error_set(err, MF_InvalidOptions,
                          "'pipeline' requires 'viewOn' to also be specified");
    const char *name = strchr(ns, '.') + 1;
    if (rc == 0 && strcmp(name, "system.views") == 0)
        rc = mf_error_set(err, MF_InvalidNamespace,
                          "Cannot create a view called 'system.views': this is a reserved system "
                          "namespace");
    else if (rc == 0 && strncmp(name, "system.", 7) == 0)
        rc = mf_error_set(err, MF_InvalidNamespace,
                          "View name cannot start with 'system.', which is reserved for system "
                          "namespaces");
    if (rc == 0 && strncmp(view_on, "system.buckets.", 15) == 0)
        rc = mf_error_set(err, MF_InvalidNamespace,
                          "Cannot create view on a system.buckets namespace except by creating a "
                          "time-series collection");
    if (rc == 0 && ctx->txn)
        rc = mf_error_set(err, MF_OperationNotSupportedInTransaction,
                          "Cannot create a view in a multi-document transaction.");
    if (rc == 0 && coll)
        mf_collator_to_bson(coll, &collation);
    /* an existing name: the same view again is no change (7.0) */
    bson_t def;
    if (rc == 0 && mfi_view_lookup(ctx->inst, ns, &def)) {
        char on[MF_MAX_NS_LEN + 1], given[MF_MAX_NS_LEN + 1];
        bson_t p, c;
        sibling(ns, def_view_on(&def), on, sizeof on);
        sibling(ns, view_on, given, sizeof given);
        if (strcmp(on, given) != 0) {
            rc = mf_error_set(err, MF_NamespaceExists,
                              "namespace %s already exists, but is a view on %s rather than %s",
                              ns, on, given);
        } else if (!def_field(&def, "pipeline", &p) || mf_bsonx_compare_docs(&p, &pipeline) != 0) {
            char a[512], b[512];
            mf_bsonx_to_string(&p, a, sizeof a);
            mf_bsonx_to_string(&pipeline, b, sizeof b);
            rc = mf_error_set(err, MF_NamespaceExists,
                              "namespace %s already exists, but with pipeline [%s] rather than "
                              "[%s]",
                              ns, a, b);
        } else if (def_field(&def, "collation", &c) ? mf_bsonx_compare_docs(&c, &collation) != 0
                                                     : !bson_empty(&collation)) {
            rc = mf_error_set(err, MF_NamespaceExists,
                              "namespace %s already exists, but with a different collation", ns);
        } else {
            bson_destroy(&def);
            goto done; /* the same view: ok */
        }
        bson_destroy(&def);
    } else if (rc == 0) {
        bson_destroy(&def);
        if (mf_cl_exists(e, ns))
            rc = mf_error_set(err, MF_NamespaceExists,
                              "namespace %s already exists, but with different options", ns);
    }
    if (rc == 0)
        rc = store(ctx, ns, view_on, &pipeline, &collation, coll, err);
done:
    mf_collator_unref(coll);
    bson_destroy(&pipeline);
    bson_destroy(&collation);
    return rc;
}

int mfi_view_modify(mf_cmd_ctx *ctx, const char *ns, const bson_t *cmd, mf_error *err)
{
    bson_iter_t it;
    bson_t def, pipeline = BSON_INITIALIZER, collation = BSON_INITIALIZER, p;
    const char *view_on = NULL;
    bool has_pipeline = false;
    int rc = 0;
    if (!mfi_view_lookup(ctx->inst, ns, &def)) {
        bson_destroy(&def);
        return mf_error_set(err, MF_NamespaceNotFound, "ns does not exist");
    }
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "viewOn") == 0) {
            rc = view_on_arg(&it, "collMod", &view_on, err);
        } else if (strcmp(k, "pipeline") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it) || !mf_bsonx_container_view(&it, &p)) {
                rc = mfi_type_error(err, "collMod", k, &it, "array");
            } else {
                bson_concat(&pipeline, &p);
                has_pipeline = true;
            }
        } else if (mfi_is_generic_arg(k)) {
        } else if (strcmp(k, "timeseries") == 0) {
            rc = mf_error_set(err, MF_InvalidOptions,
                              "option only supported on a time-series collection: %s", k);
        } else {
            rc = mf_error_set(err, MF_InvalidOptions, "option not supported on a view: %s", k);
        }
    }
    /* under access control mongod asks for both */
    if (rc == 0 && ctx->inst->auth && (!view_on || !has_pipeline))
        rc = mf_error_set(err, MF_InvalidOptions,
                          "Must specify both 'viewOn' and 'pipeline' when modifying a view and "
                          "auth is enabled");
    if (rc == 0) {
        if (!view_on)
            view_on = def_view_on(&def);
        if (!has_pipeline && def_field(&def, "pipeline", &p))
            bson_concat(&pipeline, &p);
        bson_t c;
        mf_collator *coll = NULL;
        if (def_field(&def, "collation", &c)) { /* the view keeps its collation */
            bson_concat(&collation, &c);
            bson_iter_t ci;
            bson_iter_init_find(&ci, &def, "collation");
            rc = mf_collator_new_iter(&ci, &coll, err);
        }
        char vo[MF_MAX_NS_LEN + 1];
        snprintf(vo, sizeof vo, "%s", view_on); /* (def is rewritten) */
        if (rc == 0)
            rc = store(ctx, ns, vo, &pipeline, &collation, coll, err);
        mf_collator_unref(coll);
    }
    bson_destroy(&def);
    bson_destroy(&pipeline);
    bson_destroy(&collation);
    return rc;
}

int mfi_view_drop(mf_cmd_ctx *ctx, const char *ns, bool *dropped, mf_error *err)
{
    char vns[MF_MAX_NS_LEN + 32];
    bson_t id = BSON_INITIALIZER;
    mf_lsn lsn = 0;
    *dropped = false;
    if (!mfi_is_view(ctx->inst, ns))
        return 0;
    views_ns(ns, vns, sizeof vns);
    BSON_APPEND_UTF8(&id, "_id", ns);
    int rc = mf_cl_delete_by_id(ctx->inst->engine, mfi_ctx_log(ctx), vns, &id, dropped, &lsn,
                                err);
    bson_destroy(&id);
    mfi_ctx_wrote(ctx, lsn);
    return rc;
}

/* ---------------------------------------------------------------- listing */

typedef struct list_arg {
    const char *db;
    size_t dblen;
    int (*fn)(void *arg, const char *name, const bson_t *options, mf_error *err);
    void *arg;
} list_arg;

static int list_one(void *arg, const bson_t *def, mf_error *err)
{
    list_arg *l = arg;
    bson_iter_t it;
    if (!bson_iter_init_find(&it, def, "_id") || !BSON_ITER_HOLDS_UTF8(&it))
        return 0;
    const char *id = bson_iter_utf8(&it, NULL);
    if (strncmp(id, l->db, l->dblen) != 0 || id[l->dblen] != '.')
        return 0;
    bson_t opts = BSON_INITIALIZER, p, c;
    BSON_APPEND_UTF8(&opts, "viewOn", def_view_on(def));
    if (def_field(def, "pipeline", &p))
        BSON_APPEND_ARRAY(&opts, "pipeline", &p);
    if (def_field(def, "collation", &c))
        BSON_APPEND_DOCUMENT(&opts, "collation", &c);
    int rc = l->fn(l->arg, id + l->dblen + 1, &opts, err);
    bson_destroy(&opts);
    return rc;
}

int mfi_views_each(mf_instance *inst, const char *db,
                   int (*fn)(void *arg, const char *name, const bson_t *options, mf_error *err),
                   void *arg, mf_error *err)
{
    char vns[MF_MAX_NS_LEN + 32];
    snprintf(vns, sizeof vns, "%s.system.views", db);
    list_arg l = {db, strlen(db), fn, arg};
    mf_engine_catalog_lock(inst->engine, false);
    int rc = mf_cl_each_doc(inst->engine, vns, list_one, &l, err);
    mf_engine_catalog_unlock(inst->engine);
    return rc;
}

/* ------------------------------------------------------------------ find */

static void push_stage(bson_t *pipeline, uint32_t *n, const char *name, const bson_iter_t *v)
{
    char key[16];
    const char *k;
    bson_t st;
    mf_uint32_to_key((*n)++, &k, key, sizeof key);
    bson_append_document_begin(pipeline, k, -1, &st);
    mf_bsonx_append_iter(&st, name, -1, v);
    bson_append_document_end(pipeline, &st);
}

int mfi_view_find(mf_cmd_ctx *ctx, const bson_t *cmd, int explain, bson_t *reply, bool *handled,
                  mf_error *err)
{
    char ns[MF_MAX_NS_LEN + 1];
    *handled = false;
    if (mfi_coll_arg(ctx, cmd, ns, sizeof ns, err) != 0 || !mfi_is_view(ctx->inst, ns))
        return 0; /* (find reports a bad namespace itself) */
    *handled = true;
    static const char *const unsupported[] = {
        "min", "max", "returnKey", "showRecordId", "noCursorTimeout", "allowPartialResults",
        "readOnce", "allowSpeculativeMajorityRead", "$_requestResumeToken", "$_resumeAfter",
        "oplogReplay"};
    bson_iter_t it, filter, sort, proj, skip, limit;
    bool has_filter = false, has_sort = false, has_proj = false, has_skip = false,
         has_limit = false, single = false;
    int64_t limit_n = 0;
    bson_t agg = BSON_INITIALIZER, cursor = BSON_INITIALIZER, extra = BSON_INITIALIZER;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    BSON_APPEND_UTF8(&agg, "aggregate", bson_iter_utf8(&it, NULL));
    int rc = 0;
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        for (size_t i = 0; rc == 0 && i < sizeof unsupported / sizeof unsupported[0]; i++)
            if (strcmp(k, unsupported[i]) == 0 && bson_iter_as_bool(&it))
                rc = mf_error_set(err, MF_InvalidPipelineOperator,
                                  "Option %s not supported in aggregation.", k);
        if (rc)
            break;
        if (strcmp(k, "filter") == 0) {
            filter = it;
            has_filter = BSON_ITER_HOLDS_DOCUMENT(&it);
        } else if (strcmp(k, "sort") == 0) {
            sort = it;
            has_sort = BSON_ITER_HOLDS_DOCUMENT(&it);
            bson_iter_t s;
            if (has_sort && bson_iter_recurse(&it, &s) && bson_iter_find(&s, "$natural"))
                rc = mf_error_set(err, MF_InvalidPipelineOperator,
                                  "Sort option $natural not supported in aggregation.");
        } else if (strcmp(k, "projection") == 0) {
            proj = it;
            has_proj = BSON_ITER_HOLDS_DOCUMENT(&it);
        } else if (strcmp(k, "skip") == 0) {
            skip = it;
            has_skip = mfi_is_number(&it) && bson_iter_as_int64(&it) != 0;
        } else if (strcmp(k, "limit") == 0) {
            limit = it;
            limit_n = mfi_is_number(&it) ? bson_iter_as_int64(&it) : 0;
            has_limit = limit_n != 0;
        } else if (strcmp(k, "singleBatch") == 0) {
            single = bson_iter_as_bool(&it);
        } else if (strcmp(k, "batchSize") == 0) {
            mf_bsonx_append_iter(&cursor, "batchSize", -1, &it);
        } else if (strcmp(k, "tailable") == 0 || strcmp(k, "awaitData") == 0) {
            if (bson_iter_as_bool(&it))
                rc = mf_error_set(err, MF_InvalidPipelineOperator,
                                  "Tailable cursors are not supported in aggregation.");
        } else if (strcmp(k, "collation") == 0 || strcmp(k, "hint") == 0 ||
                   strcmp(k, "maxTimeMS") == 0 || strcmp(k, "let") == 0 ||
                   strcmp(k, "allowDiskUse") == 0 || strcmp(k, "readConcern") == 0) {
            mf_bsonx_append_iter(&extra, k, -1, &it);
        }
        /* other fields: the generic arguments, and find's own that
         * change nothing here (comment, ...) */
    }
    if (rc == 0 && single && !(limit_n == 1 || limit_n == -1))
        rc = mf_error_set(err, MF_InvalidPipelineOperator,
                          "Option singleBatch not supported in aggregation.");
    if (rc == 0) {
        bson_t pipeline;
        uint32_t n = 0;
        BSON_APPEND_ARRAY_BEGIN(&agg, "pipeline", &pipeline);
        if (has_filter)
            push_stage(&pipeline, &n, "$match", &filter);
        if (has_sort)
            push_stage(&pipeline, &n, "$sort", &sort);
        if (has_skip)
            push_stage(&pipeline, &n, "$skip", &skip);
        if (has_limit) {
            bson_t one = BSON_INITIALIZER;
            bson_iter_t l;
            BSON_APPEND_INT64(&one, "l", limit_n < 0 ? -limit_n : limit_n);
            bson_iter_init_find(&l, &one, "l");
            push_stage(&pipeline, &n, "$limit", &l);
            bson_destroy(&one);
            (void)limit;
        }
        if (has_proj)
            push_stage(&pipeline, &n, "$project", &proj);
        bson_append_array_end(&agg, &pipeline);
        BSON_APPEND_DOCUMENT(&agg, "cursor", &cursor);
        bson_concat(&agg, &extra);
        rc = mfi_aggregate_run(ctx, &agg, explain, reply, err);
        if (rc == MF_InvalidPipelineOperator) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            mf_error_set(err, rc, "Unsupported in view pipeline: %s", msg);
        }
    }
    bson_destroy(&agg);
    bson_destroy(&cursor);
    bson_destroy(&extra);
    return rc;
}

/* --------------------------------------------------------- count, explain */

/* count's query, skip and limit as stages ($match, $skip, $limit), the
 * limit's sign dropped (mongod's countParseLimit). */
static int count_stages(const bson_t *cmd, bson_t *stages, uint32_t *n, mf_error *err)
{
    bson_iter_t it;
    bson_init(stages);
    if (bson_iter_init_find(&it, cmd, "query") && !BSON_ITER_HOLDS_NULL(&it)) {
        bson_t q;
        if (!mfi_doc_arg(&it, &q))
            return mfi_type_error(err, "count", "query", &it, "object");
        if (!bson_empty(&q))
            push_stage(stages, n, "$match", &it);
    }
    static const char *const nums[2] = {"skip", "limit"};
    for (int i = 0; i < 2; i++) {
        int64_t v;
        if (!bson_iter_init_find(&it, cmd, nums[i]) || BSON_ITER_HOLDS_NULL(&it))
            continue;
        if (!mfi_as_int64(&it, &v))
            return mfi_type_error(err, "count", nums[i], &it, "long");
        if (i == 0 && v < 0)
            return mf_error_set(err, 51024,
                                "BSON field 'skip' value must be >= 0, actual value '%lld'",
                                (long long)v);
        if (v == 0)
            continue;
        bson_t one = BSON_INITIALIZER;
        bson_iter_t x;
        BSON_APPEND_INT64(&one, "v", v < 0 ? -v : v);
        bson_iter_init_find(&x, &one, "v");
        push_stage(stages, n, i ? "$limit" : "$skip", &x);
        bson_destroy(&one);
    }
    return 0;
}

static int count_doc(void *arg, const bson_t *doc, mf_error *err)
{
    (void)doc, (void)err;
    (*(int64_t *)arg)++;
    return 0;
}

int mfi_view_count(mf_cmd_ctx *ctx, const char *ns, const bson_t *cmd, bson_t *reply,
                   mf_error *err)
{
    bson_t stages;
    uint32_t n = 0;
    int64_t count = 0;
    bson_iter_t coll;
    bool has_coll = bson_iter_init_find(&coll, cmd, "collation");
    int rc = count_stages(cmd, &stages, &n, err);
    if (rc == 0)
        rc = mfi_aggregate_each(ctx, ns, &stages, has_coll ? &coll : NULL, "count command",
                                count_doc, &count, NULL, err);
    bson_destroy(&stages);
    if (rc == 0) {
        if (count <= INT32_MAX)
            BSON_APPEND_INT32(reply, "n", (int32_t)count);
        else
            BSON_APPEND_INT64(reply, "n", count);
    }
    return rc;
}

int mfi_view_count_distinct_explain(mf_cmd_ctx *ctx, const char *op, const bson_t *cmd,
                                    int level, bson_t *reply, bool *handled, mf_error *err)
{
    char ns[MF_MAX_NS_LEN + 1];
    *handled = false;
    if (mfi_coll_arg(ctx, cmd, ns, sizeof ns, err) != 0 || !mfi_is_view(ctx->inst, ns))
        return 0;
    *handled = true;
    bson_t agg = BSON_INITIALIZER, stages, pipeline, cursor = BSON_INITIALIZER;
    bson_iter_t it;
    uint32_t n = 0;
    int rc = 0;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    BSON_APPEND_UTF8(&agg, "aggregate", bson_iter_utf8(&it, NULL));
    if (strcmp(op, "count") == 0) {
        rc = count_stages(cmd, &stages, &n, err);
        bson_t c = BSON_INITIALIZER;
        bson_iter_t v;
        BSON_APPEND_UTF8(&c, "v", "count");
        bson_iter_init_find(&v, &c, "v");
        push_stage(&stages, &n, "$count", &v);
        bson_destroy(&c);
    } else {
        /* distinct as mongod's view pipeline: the values at the key,
         * gathered in one group */
        const char *key = bson_iter_init_find(&it, cmd, "key") && BSON_ITER_HOLDS_UTF8(&it)
                              ? bson_iter_utf8(&it, NULL)
                              : "";
        char path[512];
        snprintf(path, sizeof path, "$%s", key);
        bson_init(&stages);
        if (bson_iter_init_find(&it, cmd, "query") && BSON_ITER_HOLDS_DOCUMENT(&it))
            push_stage(&stages, &n, "$match", &it);
        bson_t s = BSON_INITIALIZER, sub, acc;
        BSON_APPEND_DOCUMENT_BEGIN(&s, "u", &sub);
        BSON_APPEND_UTF8(&sub, "path", path);
        BSON_APPEND_BOOL(&sub, "preserveNullAndEmptyArrays", true);
        bson_append_document_end(&s, &sub);
        BSON_APPEND_DOCUMENT_BEGIN(&s, "g", &sub);
        BSON_APPEND_NULL(&sub, "_id");
        BSON_APPEND_DOCUMENT_BEGIN(&sub, "distinct", &acc);
        BSON_APPEND_UTF8(&acc, "$addToSet", path);
        bson_append_document_end(&sub, &acc);
        bson_append_document_end(&s, &sub);
        bson_iter_t u, g;
        bson_iter_init_find(&u, &s, "u");
        bson_iter_init_find(&g, &s, "g");
        push_stage(&stages, &n, "$unwind", &u);
        push_stage(&stages, &n, "$group", &g);
        bson_destroy(&s);
    }
    if (rc == 0) {
        bson_init_static(&pipeline, bson_get_data(&stages), stages.len);
        BSON_APPEND_ARRAY(&agg, "pipeline", &pipeline);
        BSON_APPEND_DOCUMENT(&agg, "cursor", &cursor);
        if (bson_iter_init_find(&it, cmd, "collation"))
            mf_bsonx_append_iter(&agg, "collation", -1, &it);
        rc = mfi_aggregate_run(ctx, &agg, level, reply, err);
    }
    bson_destroy(&stages);
    bson_destroy(&agg);
    bson_destroy(&cursor);
    return rc;
}

/* ------------------------------------------ the aggregation environment */

static int env_resolve_view(void *arg, const char *db, const char *coll, char *base, size_t cap,
                            bson_t *stages, bson_t *collation, bool *is_view, mf_error *err)
{
    mf_instance *inst = arg;
    char ns[MF_MAX_NS_LEN + 1];
    mfi_resolved_view v;
    snprintf(ns, sizeof ns, "%s.%s", db, coll);
    *is_view = false;
    int rc = mfi_view_resolve(inst, ns, &v, err);
    if (rc)
        return rc;
    if (v.is_view) {
        *is_view = true;
        snprintf(base, cap, "%s", v.base);
        bson_concat(stages, &v.pipeline);
        bson_concat(collation, &v.collation);
    }
    mfi_view_clear(&v);
    return 0;
}

void mfi_views_env_init(mf_instance *inst)
{
    inst->agg_env.resolve_view = env_resolve_view;
}
