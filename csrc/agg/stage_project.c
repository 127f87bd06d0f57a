/*
 * stage_project.c -- $project, $addFields (and its alias $set) and $unset.
 *
 * All three are projections (query/project.c): the specification is parsed
 * by the same parser find uses, in the aggregation's mode, with computed
 * fields compiled by the expression evaluator through mf_expr_hooks.
 * $unset is an exclusion projection of the fields it names.  Errors carry
 * mongod's context: "Invalid $project :: caused by :: ...".
 */
#include "pipeline_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------ expressions for query/ */

static int hook_parse(const bson_iter_t *it, void *arg, void **out, mf_error *err)
{
    return mfi_agg_expr(arg, it, (mf_expr **)out, err);
}

static int hook_eval(const void *x, const bson_t *root, const mf_meta *meta, void *arg,
                     bson_value_t *out, mf_error *err)
{
    mfi_agg *a = arg;
    if (!meta) /* the pipeline's document being evaluated (mfi_stage_pull) */
        return mfi_agg_eval(a, x, root, out, err);
    mf_expr_vars vars = a->vars;
    vars.meta = meta;
    return mf_expr_eval_value(x, root, &vars, out, err);
}

static uint32_t hook_meta_kinds(const void *x)
{
    return mf_expr_meta_kinds(x);
}

static void hook_free(void *x)
{
    mf_expr_free(x);
}

void mfi_agg_hooks(mfi_agg *a, mf_expr_hooks *h)
{
    h->parse = hook_parse;
    h->eval = hook_eval;
    h->meta_kinds = hook_meta_kinds;
    h->free = hook_free;
    h->free_value = mf_value_free;
    h->arg = a;
}

/* ---------------------------------------------------------- the stages */

typedef struct {
    mfi_stage base;
    mf_projection *proj;
} project_stage;

static int project_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    project_stage *p = (project_stage *)s;
    bson_t d;
    int rc = mfi_stage_pull(s, &d, eof, err);
    if (rc || *eof)
        return rc;
    rc = mf_projection_apply_meta(p->proj, &d, -1, s->in_meta, out, err);
    bson_destroy(&d);
    if (rc)
        bson_destroy(out);
    return rc;
}

static void project_free(mfi_stage *s)
{
    mf_projection_free(((project_stage *)s)->proj);
}

/* Their documents keep their metadata (mongod's projections copy it); an
 * inclusion $project needs no field past those it names. */
static const mfi_stage_ops project_ops = {"$project", project_next, NULL, project_free, true,
                                          MFI_DEPS_SEE_NEXT};
static const mfi_stage_ops add_fields_ops = {"$addFields", project_next, NULL, project_free,
                                             true, MFI_DEPS_SEE_NEXT};
static const mfi_stage_ops set_ops = {"$set", project_next, NULL, project_free, true,
                                      MFI_DEPS_SEE_NEXT};
static const mfi_stage_ops unset_ops = {"$unset", project_next, NULL, project_free, true,
                                        MFI_DEPS_SEE_NEXT};

/* mongod's context for a stage's parse error. */
static int with_context(int rc, const char *stage, mf_error *err)
{
    if (rc && rc != MF_InternalError) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        mf_error_set(err, rc, "Invalid %s :: caused by :: %s", stage, msg);
    }
    return rc;
}

static int parse_projection(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                            const mfi_stage_ops *ops, mf_proj_mode mode, const bson_t *spec,
                            mf_error *err)
{
    project_stage *p = mfi_stage_new(out, ops, sizeof *p, it, agg, err);
    if (!p)
        return MF_InternalError;
    mf_expr_hooks h;
    mfi_agg_hooks(agg, &h);
    int rc = mf_projection_parse_ex(spec, NULL, &h, mode, &p->proj, err);
    if (rc == 0 && mode == MF_PROJ_AGG && mf_projection_is_inclusion(p->proj))
        p->base.deps = MFI_DEPS_EXHAUSTIVE_FIELDS;
    if (rc == 0) /* its $meta fields, and its expressions' (mfi_agg_expr) */
        agg->parse_needs |= mf_projection_meta_needs(p->proj);
    return rc;
}

int mfi_parse_project(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 15969, "$project specification must be an object");
    bson_t spec;
    uint32_t len;
    const uint8_t *data;
    bson_iter_document(it, &len, &data);
    bson_init_static(&spec, data, len);
    if (bson_empty(&spec))
        return mf_error_set(err, 51272,
                            "Invalid $project :: caused by :: projection specification must "
                            "have at least one field");
    return with_context(parse_projection(it, agg, out, &project_ops, MF_PROJ_AGG, &spec, err),
                        "$project", err);
}

static int parse_add(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                     const mfi_stage_ops *ops, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 40272, "%s specification stage must be an object, got %s",
                            ops->name, mf_bsonx_type_alias(bson_iter_type(it)));
    bson_t spec;
    uint32_t len;
    const uint8_t *data;
    bson_iter_document(it, &len, &data);
    bson_init_static(&spec, data, len);
    return with_context(parse_projection(it, agg, out, ops, MF_PROJ_ADD_FIELDS, &spec, err),
                        ops->name, err);
}

int mfi_parse_add_fields(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                         mf_error *err)
{
    return parse_add(it, agg, out, &add_fields_ops, err);
}

int mfi_parse_set(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    return parse_add(it, agg, out, &set_ops, err);
}

int mfi_parse_unset(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    bson_t spec = BSON_INITIALIZER;
    int rc = 0;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        BSON_APPEND_INT32(&spec, bson_iter_utf8(it, NULL), 0);
    } else if (BSON_ITER_HOLDS_ARRAY(it)) {
        bson_iter_t el;
        bson_iter_recurse(it, &el);
        while (bson_iter_next(&el)) {
            if (!BSON_ITER_HOLDS_UTF8(&el)) {
                rc = mf_error_set(err, 31120,
                                  "$unset specification must be a string or an array containing "
                                  "only string values");
                break;
            }
            BSON_APPEND_INT32(&spec, bson_iter_utf8(&el, NULL), 0);
        }
        if (rc == 0 && bson_empty(&spec))
            rc = mf_error_set(err, 31119,
                              "$unset specification must be a string or an array with at least "
                              "one field");
    } else {
        rc = mf_error_set(err, 31002, "$unset specification must be a string or an array");
    }
    if (rc == 0)
        rc = with_context(parse_projection(it, agg, out, &unset_ops, MF_PROJ_AGG, &spec, err),
                          "$unset", err);
    bson_destroy(&spec);
    return rc;
}
