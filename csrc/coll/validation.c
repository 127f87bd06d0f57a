/*
 * validation.c -- a collection's validator (create / collMod `validator`,
 * `validationLevel`, `validationAction`), applied to each document a user
 * write is about to store, as mongod's CollectionImpl::checkValidation.
 *
 *   level    strict (default)  every insert and every update's new document
 *            moderate          inserts; an update only when the document it
 *                              replaces satisfied the validator (good -> bad
 *                              is refused, bad -> bad goes through)
 *            off               nothing
 *   action   error (default)   DocumentValidationFailure (121), "Document
 *                              failed validation", with errInfo
 *                              {failingDocumentId, details}
 *            warn              the write goes through; log 20294
 *                              "Document would fail validation"
 *
 * The validator is a filter (query operators, $expr, $jsonSchema) under
 * the collection's default collation; a document that makes it fail to
 * evaluate ($expr dividing by zero) fails it.  A write with
 * bypassDocumentValidation loads none.
 */
#include "coll.h"
#include "../agg/agg.h"

#include <stdlib.h>
#include <string.h>

struct mf_cl_validator {
    mf_matcher *m;
    mf_expr_ctx *x;
    bool moderate, warn;
    char ns[256];
    bson_t info; /* the last failure's errInfo */
};

/* The validation options of `opts` (a collection's catalog options). */
static void read_options(const bson_t *opts, bson_t *validator, const char **level,
                         const char **action)
{
    bson_iter_t it;
    bson_init(validator);
    *level = "strict";
    *action = "error";
    if (bson_iter_init_find(&it, opts, "validator") && BSON_ITER_HOLDS_DOCUMENT(&it))
        mf_bsonx_doc_view(&it, validator);
    if (bson_iter_init_find(&it, opts, "validationLevel") && BSON_ITER_HOLDS_UTF8(&it))
        *level = bson_iter_utf8(&it, NULL);
    if (bson_iter_init_find(&it, opts, "validationAction") && BSON_ITER_HOLDS_UTF8(&it))
        *action = bson_iter_utf8(&it, NULL);
}

int mf_cl_validator_parse(const bson_t *validator, const mf_collator *coll, mf_matcher **m,
                          mf_expr_ctx **x, mf_error *err)
{
    mf_expr_hooks hooks;
    *m = NULL;
    *x = NULL;
    int rc = mf_expr_ctx_new_coll(NULL, mf_clock_wall_ms(), coll, x, err);
    if (rc)
        return rc;
    mf_expr_ctx_hooks(*x, &hooks);
    rc = mf_matcher_parse_validator(validator, &hooks, coll, m, err);
    if (rc) {
        mf_expr_ctx_free(*x);
        *x = NULL;
    }
    return rc;
}

int mf_cl_validator_load(mf_coll *c, mf_cl_validator **out, mf_error *err)
{
    bson_t opts, validator;
    const char *level, *action;
    *out = NULL;
    if (!mf_cl_options_of(c, &opts))
        return 0;
    read_options(&opts, &validator, &level, &action);
    if (bson_empty(&validator) || strcmp(level, "off") == 0)
        return 0;
    mf_cl_validator *v = calloc(1, sizeof *v);
    if (!v)
        return mf_error_oom(err);
    v->moderate = strcmp(level, "moderate") == 0;
    v->warn = strcmp(action, "warn") == 0;
    snprintf(v->ns, sizeof v->ns, "%s", mf_coll_name(c));
    bson_init(&v->info);
    mf_collator *coll = NULL;
    int rc = mf_cl_default_collation(c, &coll, err);
    if (rc == 0)
        rc = mf_cl_validator_parse(&validator, coll, &v->m, &v->x, err);
    mf_collator_unref(coll);
    if (rc) {
        mf_cl_validator_free(v);
        return rc;
    }
    *out = v;
    return 0;
}

void mf_cl_validator_free(mf_cl_validator *v)
{
    if (!v)
        return;
    mf_matcher_free(v->m);
    mf_expr_ctx_free(v->x);
    bson_destroy(&v->info);
    free(v);
}

const bson_t *mf_cl_validator_info(const mf_cl_validator *v)
{
    return v ? &v->info : NULL;
}

static bool satisfies(const mf_cl_validator *v, const bson_t *doc)
{
    bool ok = false;
    mf_error err;
    /* an evaluation error fails the document, as in mongod */
    return mf_matcher_eval(v->m, doc, NULL, &ok, &err) == 0 && ok;
}

int mf_cl_validator_check(mf_cl_validator *v, const bson_t *old_doc, const bson_t *doc,
                          mf_error *err)
{
    if (!v || satisfies(v, doc))
        return 0;
    /* moderate: an update of a document that did not satisfy it either */
    if (old_doc && v->moderate && !v->warn && !satisfies(v, old_doc))
        return 0;
    bson_t details;
    bson_iter_t id;
    bson_reinit(&v->info);
    if (bson_iter_init_find(&id, doc, "_id"))
        mf_bsonx_append_iter(&v->info, "failingDocumentId", 17, &id);
    BSON_APPEND_DOCUMENT_BEGIN(&v->info, "details", &details);
    mf_matcher_explain(v->m, doc, &details);
    bson_append_document_end(&v->info, &details);
    if (!v->warn)
        return mf_error_set(err, MF_DocumentValidationFailure, "Document failed validation");
    /* warn: logged, and the write goes on */
    char *d = bson_as_relaxed_extended_json(doc, NULL);
    char *i = bson_as_relaxed_extended_json(&v->info, NULL);
    size_t cap = strlen(v->ns) + (d ? strlen(d) : 0) + (i ? strlen(i) : 0) + 64;
    char *attr = malloc(cap);
    if (attr && d && i) {
        snprintf(attr, cap, "{\"namespace\":\"%s\",\"document\":%s,\"errInfo\":%s}", v->ns, d, i);
        mf_log_attr(MF_LOG_WARNING, "STORAGE", 20294, "conn", "Document would fail validation",
                    attr);
    }
    free(attr);
    bson_free(d);
    bson_free(i);
    return 0;
}
