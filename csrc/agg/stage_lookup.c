/*
 * stage_lookup.c -- the stages that read another collection: $lookup,
 * $graphLookup and $unionWith.
 *
 * All three read through sub-pipelines (pipeline.c, mfi_pipeline_sub),
 * so the foreign side is planned like any pipeline: a leading $match --
 * the equality join's, or the user's -- becomes the read's filter and may
 * use an index.  A collection that does not exist reads as empty.
 *
 * $lookup.  Per input document: evaluate `let` against it (those values
 * join the variables the sub-pipeline sees), turn the localField values
 * into a filter on foreignField (mongod's makeMatchStageFromInput: one
 * value is {$eq}, several are {$in}, several with a regex are an $or of
 * {$eq}s, none is null), parse the sub-pipeline afresh and collect its
 * output into the `as` array.  The sub-pipeline is also parsed once at
 * parse time, for its errors.
 *
 * $graphLookup.  A breadth-first search: the frontier starts as the
 * startWith value(s); each round reads the documents whose connectToField
 * is $in the frontier, keeps those whose _id is new (with their depth),
 * and makes their connectFromField values the next frontier, until a
 * round finds nothing new or maxDepth is reached.  The results come in the
 * order they were found (mongod's order is a hash table's, unspecified).
 *
 * $unionWith.  The input, then the sub-pipeline's output.
 *
 * Collation.  All three read under the aggregate's collation (mongod's
 * sub-pipelines share the ExpressionContext's collator; a foreign
 * collection's own default does not apply): the join's equality, the
 * user's $match, and $graphLookup's frontier and visited _ids, which are
 * sets of values equal under it.
 */
#include "pipeline_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* mongod's internalLookupStageIntermediateDocumentMaxSizeBytes and
 * $graphLookup's maxMemoryUsageBytes. */
#define LOOKUP_MAX_BYTES (100 * 1024 * 1024)
#define GRAPH_MAX_BYTES (100 * 1024 * 1024)

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

/* Check a plain field path ("a.b") as mongod's FieldPath; the owned copy
 * into *out. */
static int plain_path(const char *s, char **out, mf_error *err)
{
    char *d = bson_strdup_printf("$%s", s);
    if (!d)
        return oom(err);
    int rc = mfi_agg_field_path(d, out, err);
    bson_free(d);
    return rc;
}

/* ------------------------------------------------------ values at a path */

/* An array being built, "0", "1", ... */
typedef struct {
    bson_t arr;
    uint32_t n;
    size_t bytes;
    bool has_regex;
} value_list;

static void list_add(value_list *l, const bson_value_t *v)
{
    char key[16];
    snprintf(key, sizeof key, "%u", l->n++);
    mf_bsonx_append_value(&l->arr, key, -1, v);
    if (v->value_type == BSON_TYPE_REGEX)
        l->has_regex = true;
}

/* A trailing value: an array's elements, or the value itself. */
static void add_trailing(const bson_iter_t *v, value_list *l)
{
    if (BSON_ITER_HOLDS_ARRAY(v)) {
        bson_iter_t e;
        bson_iter_recurse(v, &e);
        while (bson_iter_next(&e))
            list_add(l, bson_iter_value(&e));
    } else {
        list_add(l, bson_iter_value((bson_iter_t *)v));
    }
}

static bool all_digits(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* Every value at dotted `path` of `doc`, as mongod's
 * document_path_support::visitAllValuesAtPath: arrays along the path are
 * entered (their documents searched; arrays in arrays are not), numeric
 * components right after an array index it, and a trailing array gives
 * its elements. */
static void values_at(const bson_t *doc, const char *path, value_list *l)
{
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return;
    bool found = false;
    while (bson_iter_next(&it)) {
        if (bson_iter_key_len(&it) == n && memcmp(bson_iter_key(&it), path, n) == 0) {
            found = true;
            break;
        }
    }
    if (!found)
        return;
    if (!dot) {
        add_trailing(&it, l);
        return;
    }
    const char *rest = dot + 1;
    /* positional components into arrays */
    while (rest && BSON_ITER_HOLDS_ARRAY(&it)) {
        const char *d2 = strchr(rest, '.');
        size_t m = d2 ? (size_t)(d2 - rest) : strlen(rest);
        if (!all_digits(rest, m))
            break;
        char idx[24];
        if (m >= sizeof idx)
            return;
        memcpy(idx, rest, m);
        idx[m] = '\0';
        bson_iter_t arr;
        bson_iter_recurse(&it, &arr);
        /* "01" indexes element 1, as a parsed number */
        unsigned long want = strtoul(idx, NULL, 10), i = 0;
        bool hit = false;
        while (bson_iter_next(&arr)) {
            if (i++ == want) {
                hit = true;
                break;
            }
        }
        if (!hit)
            return;
        it = arr;
        rest = d2 ? d2 + 1 : NULL;
    }
    if (!rest) {
        add_trailing(&it, l);
        return;
    }
    uint32_t len;
    const uint8_t *data;
    bson_t sub;
    if (BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_t e;
        bson_iter_recurse(&it, &e);
        while (bson_iter_next(&e)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&e))
                continue;
            bson_iter_document(&e, &len, &data);
            if (bson_init_static(&sub, data, len))
                values_at(&sub, rest, l);
        }
    } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_iter_document(&it, &len, &data);
        if (bson_init_static(&sub, data, len))
            values_at(&sub, rest, l);
    }
}

/* ------------------------------------------------------- variable names */

/* mongod's variableValidation::validateNameForUserWrite. */
static int check_var_name(const char *k, mf_error *err)
{
    if (!*k)
        return mf_error_set(err, 16866, "empty variable names are not allowed");
    if (!((k[0] >= 'a' && k[0] <= 'z') || (unsigned char)k[0] >= 0x80))
        return mf_error_set(err, 16867,
                            "'%s' starts with an invalid character for a user variable name", k);
    for (const char *c = k + 1; *c; c++) {
        unsigned char u = (unsigned char)*c;
        if (!((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') ||
              u == '_' || u >= 0x80))
            return mf_error_set(err, 16868,
                                "'%s' contains an invalid character for a variable name: '%c'", k,
                                *c);
    }
    return 0;
}

/* A copy of the document `sub` at `it` (an array or document value). */
static void iter_doc(const bson_iter_t *it, bson_t *out)
{
    uint32_t len = 0;
    const uint8_t *data = NULL;
    if (BSON_ITER_HOLDS_ARRAY(it))
        bson_iter_array(it, &len, &data);
    else
        bson_iter_document(it, &len, &data);
    bson_t tmp;
    bson_init(out);
    if (data && bson_init_static(&tmp, data, len))
        bson_concat(out, &tmp);
}

/* The `pipeline` argument of $lookup: an array of objects (mongod's
 * parsePipelineFromBSON). */
static int pipeline_arg(const bson_iter_t *it, bson_t *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_ARRAY(it))
        return mf_error_set(err, MF_TypeMismatch, "'pipeline' option must be specified as an array");
    bson_iter_t e;
    bson_iter_recurse(it, &e);
    while (bson_iter_next(&e))
        if (!BSON_ITER_HOLDS_DOCUMENT(&e))
            return mf_error_set(err, MF_TypeMismatch,
                                "Each element of the 'pipeline' array must be an object");
    bson_destroy(out);
    iter_doc(it, out);
    return 0;
}

/* Whether the first stage of `stages` is $documents. */
static bool starts_with_documents(const bson_t *stages)
{
    bson_iter_t it, st;
    if (!bson_iter_init(&it, stages) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_recurse(&it, &st);
    return bson_iter_next(&st) && strcmp(bson_iter_key(&st), "$documents") == 0;
}

/* The stages $lookup and $unionWith refuse inside them. */
static const char *const refused_in_sub[] = {"$out", "$merge", "$changeStream", NULL};

/* ============================================================== $lookup */

typedef struct {
    mfi_stage base;
    char *from;              /* NULL: no collection (the pipeline has $documents) */
    char *as;
    char *local, *foreign;   /* the equality join, or NULL */
    bool has_pipeline;
    bson_t pipeline;         /* the user's stages (an array) */
    char **let_names;
    mf_expr **let_exprs;
    size_t nlet;
    bson_t let_spec;         /* for explain */
} lookup_stage;

/* The variables the sub-pipeline sees for `doc`: the parent's, with the
 * stage's `let` (evaluated against `doc`) over them, into `out`. */
static int lookup_vars(lookup_stage *l, const bson_t *doc, bson_t *out, mf_error *err)
{
    mfi_agg *a = l->base.agg;
    bson_iter_t it;
    bson_init(out);
    bson_iter_init(&it, &a->let_values);
    while (bson_iter_next(&it)) {
        bool shadowed = false;
        for (size_t i = 0; i < l->nlet && !shadowed; i++)
            shadowed = strcmp(bson_iter_key(&it), l->let_names[i]) == 0;
        if (!shadowed)
            mf_bsonx_append_iter(out, NULL, 0, &it);
    }
    for (size_t i = 0; i < l->nlet; i++) {
        bson_value_t v;
        int rc = mfi_agg_eval(a, l->let_exprs[i], doc, &v, err);
        if (rc) {
            bson_destroy(out);
            return rc;
        }
        /* a later `let` of the same name wins, as mongod's redefinition */
        bool later = false;
        for (size_t j = i + 1; j < l->nlet && !later; j++)
            later = strcmp(l->let_names[i], l->let_names[j]) == 0;
        if (v.value_type != BSON_TYPE_EOD && !later)
            mf_bsonx_append_value(out, l->let_names[i], -1, &v);
        mf_value_free(&v);
    }
    return 0;
}

/* The equality join's filter for `doc`, into `out` (mongod's
 * makeMatchStageFromInput). */
static void lookup_filter(const lookup_stage *l, const bson_t *doc, bson_t *out)
{
    value_list vl = {.n = 0};
    bson_init(&vl.arr);
    values_at(doc, l->local, &vl);
    if (vl.n == 0) {
        bson_value_t null = {.value_type = BSON_TYPE_NULL};
        list_add(&vl, &null);
    }
    bson_t cond, arr;
    bson_iter_t it;
    bson_init(out);
    if (vl.n == 1) {
        bson_iter_init(&it, &vl.arr);
        bson_iter_next(&it);
        BSON_APPEND_DOCUMENT_BEGIN(out, l->foreign, &cond);
        mf_bsonx_append_value(&cond, "$eq", 3, bson_iter_value(&it));
        bson_append_document_end(out, &cond);
    } else if (!vl.has_regex) {
        /* $in gives the element-wise match over the local values */
        BSON_APPEND_DOCUMENT_BEGIN(out, l->foreign, &cond);
        BSON_APPEND_ARRAY(&cond, "$in", &vl.arr);
        bson_append_document_end(out, &cond);
    } else {
        /* a regex in $in would match strings: only {$eq: /re/} matches
         * the regex itself */
        BSON_APPEND_ARRAY_BEGIN(out, "$or", &arr);
        bson_iter_init(&it, &vl.arr);
        uint32_t i = 0;
        while (bson_iter_next(&it)) {
            char key[16];
            bson_t alt;
            snprintf(key, sizeof key, "%u", i++);
            BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &alt);
            BSON_APPEND_DOCUMENT_BEGIN(&alt, l->foreign, &cond);
            mf_bsonx_append_value(&cond, "$eq", 3, bson_iter_value(&it));
            bson_append_document_end(&alt, &cond);
            bson_append_document_end(&arr, &alt);
        }
        bson_append_array_end(out, &arr);
    }
    bson_destroy(&vl.arr);
}

/* Open the sub-pipeline for `doc` (vars: its variables; filter: the join's
 * or NULL). */
static int lookup_open(lookup_stage *l, const bson_t *vars, const bson_t *filter,
                       mf_pipeline **out, mf_error *err)
{
    mfi_sub_opts o = {
        .coll = l->from,
        .filter = filter,
        .names = (const char *const *)l->let_names,
        .nnames = l->nlet,
        .let_values = vars,
        .nested = true,
    };
    return mfi_pipeline_sub(l->base.agg, &l->pipeline, &o, out, err);
}

static int lookup_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    lookup_stage *l = (lookup_stage *)s;
    bson_t doc, vars, filter = BSON_INITIALIZER;
    int rc = mfi_stage_pull(s, &doc, eof, err);
    if (rc || *eof)
        return rc;
    if ((rc = lookup_vars(l, &doc, &vars, err)) != 0) {
        bson_destroy(&doc);
        return rc;
    }
    if (l->local) {
        bson_destroy(&filter);
        lookup_filter(l, &doc, &filter);
    }
    mf_pipeline *sub = NULL;
    value_list res = {.n = 0};
    bson_init(&res.arr);
    rc = lookup_open(l, &vars, l->local ? &filter : NULL, &sub, err);
    while (rc == 0) {
        bson_t d;
        bool end;
        if ((rc = mfi_agg_check_time(s->agg, err)) != 0 ||
            (rc = mf_pipeline_next(sub, &d, &end, err)) != 0 || end)
            break;
        res.bytes += d.len;
        if (res.bytes > LOOKUP_MAX_BYTES) {
            rc = mf_error_set(err, 4568,
                              "Total size of documents in %s matching pipeline's $lookup stage "
                              "exceeds %d bytes",
                              l->from ? l->from : "", LOOKUP_MAX_BYTES);
        } else {
            char key[16];
            snprintf(key, sizeof key, "%u", res.n++);
            BSON_APPEND_DOCUMENT(&res.arr, key, &d);
        }
        bson_destroy(&d);
    }
    mf_pipeline_free(sub);
    if (rc == 0) {
        bson_value_t v = {.value_type = BSON_TYPE_ARRAY};
        v.value.v_doc.data = (uint8_t *)bson_get_data(&res.arr);
        v.value.v_doc.data_len = res.arr.len;
        bson_init(out);
        mfi_doc_set_path(&doc, l->as, &v, out);
    }
    bson_destroy(&res.arr);
    bson_destroy(&filter);
    bson_destroy(&vars);
    bson_destroy(&doc);
    return rc;
}

/* mongod's serialization: from, as, localField/foreignField, and let +
 * pipeline when a pipeline was given. */
static void lookup_explain(const mfi_stage *s, bson_t *out)
{
    const lookup_stage *l = (const lookup_stage *)s;
    if (l->from)
        BSON_APPEND_UTF8(out, "from", l->from);
    BSON_APPEND_UTF8(out, "as", l->as);
    if (l->local) {
        BSON_APPEND_UTF8(out, "localField", l->local);
        BSON_APPEND_UTF8(out, "foreignField", l->foreign);
    }
    if (l->has_pipeline) {
        BSON_APPEND_DOCUMENT(out, "let", &l->let_spec);
        BSON_APPEND_ARRAY(out, "pipeline", &l->pipeline);
    }
}

static void lookup_free(mfi_stage *s)
{
    lookup_stage *l = (lookup_stage *)s;
    free(l->from);
    free(l->as);
    free(l->local);
    free(l->foreign);
    bson_destroy(&l->pipeline);
    bson_destroy(&l->let_spec);
    for (size_t i = 0; i < l->nlet; i++) {
        free(l->let_names[i]);
        mf_expr_free(l->let_exprs[i]);
    }
    free(l->let_names);
    free(l->let_exprs);
}

static const mfi_stage_ops lookup_ops = {"$lookup", lookup_next, lookup_explain, lookup_free,
                                         true, MFI_DEPS_SEE_NEXT};

/* `from` as mongod's parseLookupFromAndResolveNamespace (the object form
 * is only for internal namespaces). */
static int from_arg(const bson_iter_t *f, const char *stage, const char *db, char **out,
                    mf_error *err)
{
    if (BSON_ITER_HOLDS_DOCUMENT(f)) {
        bson_iter_t d;
        const char *sdb = "", *scoll = "";
        bson_iter_recurse(f, &d);
        while (bson_iter_next(&d)) {
            if (strcmp(bson_iter_key(&d), "db") == 0 && BSON_ITER_HOLDS_UTF8(&d))
                sdb = bson_iter_utf8(&d, NULL);
            else if (strcmp(bson_iter_key(&d), "coll") == 0 && BSON_ITER_HOLDS_UTF8(&d))
                scoll = bson_iter_utf8(&d, NULL);
        }
        return mf_error_set(err, MF_FailedToParse,
                            "%s with syntax {from: {db:<>, coll:<>},..} is not supported for db: "
                            "%s and coll: %s",
                            stage, sdb, scoll);
    }
    if (!BSON_ITER_HOLDS_UTF8(f))
        return mf_error_set(err, MF_FailedToParse,
                            "%s 'from' field must be a string, but found %s", stage,
                            mf_bsonx_type_alias(bson_iter_type(f)));
    const char *c = bson_iter_utf8(f, NULL);
    if (!*c)
        return mf_error_set(err, MF_InvalidNamespace, "invalid %s namespace: %s.", stage, db);
    if (!(*out = bson_strdup(c)))
        return oom(err);
    return 0;
}

/* Parse the `let` variables (names checked, expressions in the parent's
 * scope). */
static int lookup_let(lookup_stage *l, const bson_iter_t *let_it, mfi_agg *agg, mf_error *err)
{
    bson_iter_t v;
    size_t n = 0;
    bson_iter_recurse(let_it, &v);
    while (bson_iter_next(&v))
        n++;
    if (n && (!(l->let_names = calloc(n, sizeof *l->let_names)) ||
              !(l->let_exprs = calloc(n, sizeof *l->let_exprs))))
        return oom(err);
    bson_iter_recurse(let_it, &v);
    while (bson_iter_next(&v)) {
        int rc = check_var_name(bson_iter_key(&v), err);
        if (rc)
            return rc;
        if (!(l->let_names[l->nlet] = bson_strdup(bson_iter_key(&v))))
            return oom(err);
        l->nlet++;
        if ((rc = mfi_agg_expr(agg, &v, &l->let_exprs[l->nlet - 1], err)) != 0)
            return rc;
    }
    return 0;
}

int mfi_parse_lookup(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_FailedToParse,
                            "the $lookup stage specification must be an object, but found %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    lookup_stage *l = mfi_stage_new(out, &lookup_ops, sizeof *l, it, agg, err);
    if (!l)
        return MF_InternalError;
    bson_init(&l->pipeline);
    bson_init(&l->let_spec);
    bson_iter_t f, let_it, pipe_it;
    bool has_from = false, has_let = false;
    const char *as = "", *local = "", *foreign = "";
    int rc;
    char shown[256];

    /* mongod's lite parse first: `from`, or else a pipeline that begins
     * with $documents; the pipeline's shape */
    bson_iter_recurse(it, &f);
    if (bson_iter_find(&f, "pipeline")) {
        pipe_it = f;
        l->has_pipeline = true;
    }
    bson_iter_recurse(it, &f);
    if (bson_iter_find(&f, "from")) {
        has_from = true;
        if ((rc = from_arg(&f, "$lookup", agg->db, &l->from, err)) != 0)
            return rc;
    } else if (!l->has_pipeline) {
        return mf_error_set(err, MF_FailedToParse, "must specify 'pipeline' when 'from' is empty");
    }
    if (l->has_pipeline && (rc = pipeline_arg(&pipe_it, &l->pipeline, err)) != 0)
        return rc;
    if (!has_from && !starts_with_documents(&l->pipeline))
        return mf_error_set(err, MF_FailedToParse,
                            "$lookup stage without explicit collection must have a pipeline with "
                            "$documents as first stage");

    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "pipeline") == 0 || strcmp(k, "from") == 0 ||
            strcmp(k, "_internalCollation") == 0)
            continue;
        if (strcmp(k, "let") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f)) {
                mf_bsonx_elem_to_string(&f, true, shown, sizeof shown);
                return mf_error_set(err, MF_FailedToParse,
                                    "$lookup argument '%s' must be an object, is type %s", shown,
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            }
            let_it = f;
            has_let = true;
            continue;
        }
        if (!BSON_ITER_HOLDS_UTF8(&f)) {
            mf_bsonx_elem_to_string(&f, true, shown, sizeof shown);
            return mf_error_set(err, MF_FailedToParse,
                                "$lookup argument '%s' must be a string, found %s: %s", k, shown,
                                mf_bsonx_type_alias(bson_iter_type(&f)));
        }
        if (strcmp(k, "as") == 0)
            as = bson_iter_utf8(&f, NULL);
        else if (strcmp(k, "localField") == 0)
            local = bson_iter_utf8(&f, NULL);
        else if (strcmp(k, "foreignField") == 0)
            foreign = bson_iter_utf8(&f, NULL);
        else
            return mf_error_set(err, MF_FailedToParse, "unknown argument to $lookup: %s", k);
    }
    if (!*as)
        return mf_error_set(err, MF_FailedToParse, "must specify 'as' field for a $lookup");
    if (l->has_pipeline) {
        if ((*local || *foreign) && !(*local && *foreign))
            return mf_error_set(err, MF_FailedToParse,
                                "$lookup requires both or neither of 'localField' and "
                                "'foreignField' to be specified");
    } else {
        if (!*local || !*foreign)
            return mf_error_set(err, MF_FailedToParse,
                                "$lookup requires either 'pipeline' or both 'localField' and "
                                "'foreignField' to be specified");
        if (has_let)
            return mf_error_set(err, MF_FailedToParse,
                                "$lookup with a 'let' argument must also specify 'pipeline'");
    }
    if ((rc = plain_path(as, &l->as, err)) != 0)
        return rc;
    if (*local && ((rc = plain_path(local, &l->local, err)) != 0 ||
                   (rc = plain_path(foreign, &l->foreign, err)) != 0))
        return rc;
    if (has_let) {
        bson_destroy(&l->let_spec);
        iter_doc(&let_it, &l->let_spec);
        if ((rc = lookup_let(l, &let_it, agg, err)) != 0)
            return rc;
    }
    /* the sub-pipeline, parsed once for its errors */
    if (l->has_pipeline) {
        const char *bad = mfi_pipeline_find_stage(&l->pipeline, refused_in_sub);
        if (bad)
            return mf_error_set(err, 51047, "%s is not allowed within a $lookup's sub-pipeline",
                                bad);
        mf_pipeline *sub = NULL;
        bson_t vars = BSON_INITIALIZER;
        rc = lookup_open(l, &vars, NULL, &sub, err);
        mf_pipeline_free(sub); /* (its metadata is checked when it reads) */
        bson_destroy(&vars);
        if (rc)
            return rc;
    } else if (agg->depth + 1 > MFI_AGG_MAX_DEPTH) {
        return mf_error_set(err, MF_MaxSubPipelineDepthExceeded, "Maximum number of nested sub-pipelines exceeded. Limit is %d",
                            MFI_AGG_MAX_DEPTH);
    }
    return 0;
}

/* ========================================================== $unionWith */

typedef struct {
    mfi_stage base;
    char *coll;              /* NULL: the pipeline begins with $documents */
    bson_t pipeline;
    mf_pipeline *sub;
    bool in_sub;
} union_stage;

static int union_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    union_stage *u = (union_stage *)s;
    if (!u->in_sub) {
        int rc = mfi_stage_pull(s, out, eof, err);
        s->meta = s->in_meta;
        if (rc || !*eof)
            return rc;
        u->in_sub = true;
    }
    /* the other collection's documents, with what its pipeline gave them */
    int rc = mf_pipeline_next(u->sub, out, eof, err);
    s->meta = rc == 0 && !*eof ? mfi_pipeline_meta(u->sub) : NULL;
    return rc;
}

static void union_explain(const mfi_stage *s, bson_t *out)
{
    const union_stage *u = (const union_stage *)s;
    if (u->coll)
        BSON_APPEND_UTF8(out, "coll", u->coll);
    BSON_APPEND_ARRAY(out, "pipeline", &u->pipeline);
}

static void union_free(mfi_stage *s)
{
    union_stage *u = (union_stage *)s;
    free(u->coll);
    bson_destroy(&u->pipeline);
    mf_pipeline_free(u->sub);
}

/* mongod's dependency analysis stops at $unionWith (NOT_SUPPORTED); its
 * sub-pipeline is checked when it reads */
static const mfi_stage_ops union_ops = {"$unionWith", union_next, union_explain, union_free,
                                        false, MFI_DEPS_NOT_SUPPORTED};

int mfi_parse_union_with(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                         mf_error *err)
{
    static const char *const collectionless =
        "$unionWith stage without explicit collection must have a pipeline with $documents as "
        "first stage";
    if (!BSON_ITER_HOLDS_DOCUMENT(it) && !BSON_ITER_HOLDS_UTF8(it))
        return mf_error_set(err, MF_FailedToParse,
                            "the $unionWith stage specification must be an object or string, but "
                            "found %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    union_stage *u = mfi_stage_new(out, &union_ops, sizeof *u, it, agg, err);
    if (!u)
        return MF_InternalError;
    bson_init(&u->pipeline);
    const char *coll = NULL;
    bool has_pipeline = false;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        coll = bson_iter_utf8(it, NULL);
    } else {
        bson_iter_t f;
        bson_iter_recurse(it, &f);
        while (bson_iter_next(&f)) {
            const char *k = bson_iter_key(&f);
            if (strcmp(k, "coll") == 0) {
                if (!BSON_ITER_HOLDS_UTF8(&f))
                    return mf_error_set(err, MF_TypeMismatch,
                                        "BSON field '$unionWith.coll' is the wrong type '%s', "
                                        "expected type 'string'",
                                        mf_bsonx_type_alias(bson_iter_type(&f)));
                coll = bson_iter_utf8(&f, NULL);
            } else if (strcmp(k, "pipeline") == 0) {
                if (!BSON_ITER_HOLDS_ARRAY(&f))
                    return mf_error_set(err, MF_TypeMismatch,
                                        "BSON field '$unionWith.pipeline' is the wrong type '%s', "
                                        "expected type 'array'",
                                        mf_bsonx_type_alias(bson_iter_type(&f)));
                bson_iter_t e;
                bson_iter_recurse(&f, &e);
                for (int i = 0; bson_iter_next(&e); i++)
                    if (!BSON_ITER_HOLDS_DOCUMENT(&e))
                        return mf_error_set(err, MF_TypeMismatch,
                                            "BSON field '$unionWith.pipeline.%d' is the wrong "
                                            "type '%s', expected type 'object'",
                                            i, mf_bsonx_type_alias(bson_iter_type(&e)));
                bson_destroy(&u->pipeline);
                iter_doc(&f, &u->pipeline);
                has_pipeline = true;
            } else {
                return mf_error_set(err, 40415, "BSON field '$unionWith.%s' is an unknown field.",
                                    k);
            }
        }
        if (!coll && (!has_pipeline || !starts_with_documents(&u->pipeline)))
            return mf_error_set(err, MF_FailedToParse, "%s", collectionless);
    }
    if (coll && !*coll)
        return mf_error_set(err, MF_InvalidNamespace, "Invalid namespace specified '%s.'",
                            agg->db);
    if (coll && !(u->coll = bson_strdup(coll)))
        return oom(err);
    const char *bad = mfi_pipeline_find_stage(&u->pipeline, refused_in_sub);
    if (bad)
        return mf_error_set(err, 31441, "%s is not allowed within a $unionWith's sub-pipeline",
                            bad);
    mfi_sub_opts o = {.coll = u->coll, .nested = true};
    return mfi_pipeline_sub(agg, &u->pipeline, &o, &u->sub, err);
}

/* ========================================================= $graphLookup */

/* A set of values by their order-preserving encoding (equal values -- 1
 * and 1.0 -- encode alike), open addressing. */
typedef struct {
    mf_buf *keys;
    size_t n, cap;
    size_t bytes;
} key_set;

static void set_clear(key_set *s)
{
    for (size_t i = 0; i < s->cap; i++)
        mf_buf_free(&s->keys[i]);
    free(s->keys);
    memset(s, 0, sizeof *s);
}

/* Add the encoding of `v` under `coll` (values equal under it are one, as
 * in mongod's sets from the expression context's comparator); *added
 * tells whether it was new. */
static int set_add(key_set *s, const bson_value_t *v, const mf_collator *coll, bool *added,
                   mf_error *err)
{
    mf_buf k = {0};
    int rc = mf_bsonx_key_append_value_coll(&k, v, false, coll);
    if (rc) {
        mf_buf_free(&k);
        return oom(err);
    }
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        mf_buf *nk = calloc(cap, sizeof *nk);
        if (!nk) {
            mf_buf_free(&k);
            return oom(err);
        }
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->keys[i].data)
                continue;
            size_t j = XXH3_64bits(s->keys[i].data, s->keys[i].len) & (cap - 1);
            while (nk[j].data)
                j = (j + 1) & (cap - 1);
            nk[j] = s->keys[i];
        }
        free(s->keys);
        s->keys = nk;
        s->cap = cap;
    }
    size_t j = XXH3_64bits(k.data, k.len) & (s->cap - 1);
    while (s->keys[j].data) {
        if (s->keys[j].len == k.len && memcmp(s->keys[j].data, k.data, k.len) == 0) {
            mf_buf_free(&k);
            *added = false;
            return 0;
        }
        j = (j + 1) & (s->cap - 1);
    }
    s->bytes += k.len;
    s->keys[j] = k;
    s->n++;
    *added = true;
    return 0;
}

typedef struct {
    mfi_stage base;
    char *from, *as, *connect_from, *connect_to, *depth_field;
    mf_expr *start;
    int64_t max_depth;       /* -1: none */
    bson_t restrict_filter;
    bool has_restrict;
} graph_stage;

/* One search's state. */
typedef struct {
    value_list frontier;     /* values to look for next */
    key_set in_frontier;
    key_set visited;         /* _ids found */
    bson_t found;            /* the results, an array being built */
    uint32_t nfound;
    size_t bytes;
} graph_search;

static int frontier_add(const graph_stage *gs, graph_search *g, const bson_value_t *v,
                        mf_error *err)
{
    bool added;
    if (v->value_type == BSON_TYPE_EOD)
        return 0;
    int rc = set_add(&g->in_frontier, v, gs->base.agg->collator, &added, err);
    if (rc == 0 && added)
        list_add(&g->frontier, v);
    return rc;
}

/* The read's filter for the frontier, into `out` (mongod's
 * makeMatchStageFromFrontier: null and undefined are told apart, and a
 * missing connectToField never matches). */
static void graph_filter(const graph_stage *gs, const graph_search *g, bson_t *out)
{
    bool null = false, undef = false;
    bson_iter_t it;
    bson_iter_init(&it, &g->frontier.arr);
    while (bson_iter_next(&it)) {
        null |= BSON_ITER_HOLDS_NULL(&it);
        undef |= BSON_ITER_HOLDS_UNDEFINED(&it);
    }
    bson_t and, c, cond, neg;
    uint32_t i = 0;
    char key[16];
    bson_init(out);
    BSON_APPEND_ARRAY_BEGIN(out, "$and", &and);
    if (gs->has_restrict) {
        snprintf(key, sizeof key, "%u", i++);
        BSON_APPEND_DOCUMENT(&and, key, &gs->restrict_filter);
    }
    snprintf(key, sizeof key, "%u", i++);
    BSON_APPEND_DOCUMENT_BEGIN(&and, key, &c);
    BSON_APPEND_DOCUMENT_BEGIN(&c, gs->connect_to, &cond);
    BSON_APPEND_ARRAY(&cond, "$in", &g->frontier.arr);
    bson_append_document_end(&c, &cond);
    bson_append_document_end(&and, &c);
    if (null || undef) {
        snprintf(key, sizeof key, "%u", i++);
        BSON_APPEND_DOCUMENT_BEGIN(&and, key, &c);
        BSON_APPEND_DOCUMENT_BEGIN(&c, gs->connect_to, &cond);
        BSON_APPEND_BOOL(&cond, "$exists", true);
        bson_append_document_end(&c, &cond);
        bson_append_document_end(&and, &c);
        if (null != undef) {
            snprintf(key, sizeof key, "%u", i++);
            BSON_APPEND_DOCUMENT_BEGIN(&and, key, &c);
            BSON_APPEND_DOCUMENT_BEGIN(&c, gs->connect_to, &cond);
            BSON_APPEND_DOCUMENT_BEGIN(&cond, "$not", &neg);
            BSON_APPEND_UTF8(&neg, "$type", null ? "undefined" : "null");
            bson_append_document_end(&cond, &neg);
            bson_append_document_end(&c, &cond);
            bson_append_document_end(&and, &c);
        }
    }
    bson_append_array_end(out, &and);
}

/* A document the round found: kept (with its depth) when its _id is new,
 * its connectFromField values into `next`. */
static int graph_visit(graph_stage *gs, graph_search *g, const bson_t *d, int64_t depth,
                       graph_search *next, bool *added, mf_error *err)
{
    bson_iter_t id;
    *added = false;
    if (!bson_iter_init_find(&id, d, "_id"))
        return mf_error_set(err, 40271,
                            "Documents in the '%s.%s' namespace must contain an _id for "
                            "de-duplication in $graphLookup",
                            gs->base.agg->db, gs->from);
    int rc = set_add(&g->visited, bson_iter_value(&id), gs->base.agg->collator, added, err);
    if (rc || !*added)
        return rc;
    bson_t with_depth = BSON_INITIALIZER;
    const bson_t *res = d;
    if (gs->depth_field) {
        bson_value_t dv = {.value_type = BSON_TYPE_INT64};
        dv.value.v_int64 = depth;
        mfi_doc_set_path(d, gs->depth_field, &dv, &with_depth);
        res = &with_depth;
    }
    value_list vl = {.n = 0};
    bson_init(&vl.arr);
    values_at(res, gs->connect_from, &vl);
    bson_iter_t v;
    bson_iter_init(&v, &vl.arr);
    while (rc == 0 && bson_iter_next(&v))
        rc = frontier_add(gs, next, bson_iter_value(&v), err);
    bson_destroy(&vl.arr);
    char key[16];
    snprintf(key, sizeof key, "%u", g->nfound++);
    BSON_APPEND_DOCUMENT(&g->found, key, res);
    g->bytes += res->len;
    bson_destroy(&with_depth);
    if (rc == 0 && g->bytes + g->visited.bytes + next->in_frontier.bytes + next->frontier.arr.len >=
                       GRAPH_MAX_BYTES)
        rc = mf_error_set(err, 40099, "$graphLookup reached maximum memory consumption");
    return rc;
}

static void search_init(graph_search *g)
{
    memset(g, 0, sizeof *g);
    bson_init(&g->frontier.arr);
    bson_init(&g->found);
}

static void frontier_reset(graph_search *g)
{
    bson_destroy(&g->frontier.arr);
    set_clear(&g->in_frontier);
    memset(&g->frontier, 0, sizeof g->frontier);
    bson_init(&g->frontier.arr);
}

static void search_free(graph_search *g)
{
    bson_destroy(&g->frontier.arr);
    bson_destroy(&g->found);
    set_clear(&g->in_frontier);
    set_clear(&g->visited);
}

/* The breadth-first search from `doc`'s startWith; results into g->found. */
static int graph_search_run(graph_stage *gs, const bson_t *doc, graph_search *g, mf_error *err)
{
    bson_value_t start;
    int rc = mfi_agg_eval(gs->base.agg, gs->start, doc, &start, err);
    if (rc)
        return rc;
    if (start.value_type == BSON_TYPE_ARRAY) {
        bson_t arr;
        bson_iter_t e;
        if (bson_init_static(&arr, start.value.v_doc.data, start.value.v_doc.data_len) &&
            bson_iter_init(&e, &arr))
            while (rc == 0 && bson_iter_next(&e))
                rc = frontier_add(gs, g, bson_iter_value(&e), err);
    } else {
        rc = frontier_add(gs, g, &start, err);
    }
    mf_value_free(&start);
    for (int64_t depth = 0; rc == 0 && g->frontier.n > 0; depth++) {
        if (gs->max_depth >= 0 && depth > gs->max_depth)
            break;
        bson_t filter, none = BSON_INITIALIZER;
        graph_filter(gs, g, &filter);
        graph_search next;
        search_init(&next);
        mf_pipeline *sub = NULL;
        mfi_sub_opts o = {.coll = gs->from, .filter = &filter, .nested = true};
        rc = mfi_pipeline_sub(gs->base.agg, &none, &o, &sub, err);
        bool any = false;
        while (rc == 0) {
            bson_t d;
            bool end, added;
            if ((rc = mfi_agg_check_time(gs->base.agg, err)) != 0 ||
                (rc = mf_pipeline_next(sub, &d, &end, err)) != 0 || end)
                break;
            rc = graph_visit(gs, g, &d, depth, &next, &added, err);
            any |= added;
            bson_destroy(&d);
        }
        mf_pipeline_free(sub);
        bson_destroy(&filter);
        bson_destroy(&none);
        /* the next round looks for the new documents' values */
        frontier_reset(g);
        if (rc == 0 && any) {
            bson_destroy(&g->frontier.arr);
            g->frontier = next.frontier;
            g->in_frontier = next.in_frontier;
            bson_init(&next.frontier.arr);
            memset(&next.in_frontier, 0, sizeof next.in_frontier);
        }
        search_free(&next);
    }
    return rc;
}

static int graph_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    graph_stage *gs = (graph_stage *)s;
    bson_t doc;
    int rc = mfi_stage_pull(s, &doc, eof, err);
    if (rc || *eof)
        return rc;
    graph_search g;
    search_init(&g);
    rc = graph_search_run(gs, &doc, &g, err);
    if (rc == 0) {
        bson_value_t v = {.value_type = BSON_TYPE_ARRAY};
        v.value.v_doc.data = (uint8_t *)bson_get_data(&g.found);
        v.value.v_doc.data_len = g.found.len;
        bson_init(out);
        mfi_doc_set_path(&doc, gs->as, &v, out);
    }
    search_free(&g);
    bson_destroy(&doc);
    return rc;
}

static void graph_free(mfi_stage *s)
{
    graph_stage *gs = (graph_stage *)s;
    free(gs->from);
    free(gs->as);
    free(gs->connect_from);
    free(gs->connect_to);
    free(gs->depth_field);
    mf_expr_free(gs->start);
    bson_destroy(&gs->restrict_filter);
}

static const mfi_stage_ops graph_ops = {"$graphLookup", graph_next, NULL, graph_free, true,
                                        MFI_DEPS_SEE_NEXT};

/* A string argument of $graphLookup (40103), or NULL with an error. */
static int graph_string(const bson_iter_t *f, const char **out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_UTF8(f))
        return mf_error_set(err, 40103, "expected string as argument for %s, found: %s",
                            bson_iter_key(f), mf_bsonx_type_alias(bson_iter_type(f)));
    *out = bson_iter_utf8(f, NULL);
    return 0;
}

static int graph_max_depth(const bson_iter_t *f, int64_t *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_NUMBER(f) && !BSON_ITER_HOLDS_DECIMAL128(f))
        return mf_error_set(err, 40100, "maxDepth must be numeric, found type: %s",
                            mf_bsonx_type_alias(bson_iter_type(f)));
    int64_t n;
    bool whole = true;
    if (BSON_ITER_HOLDS_DOUBLE(f)) {
        double d = bson_iter_double(f);
        if (d != d)
            n = 0;
        else if (d >= 9.2233720368547758e18)
            n = INT64_MAX;
        else if (d <= -9.2233720368547758e18)
            n = INT64_MIN;
        else
            n = (int64_t)d;
        whole = (double)n == d;
    } else if (BSON_ITER_HOLDS_DECIMAL128(f)) {
        return mf_error_set(err, MF_NotImplemented, "a decimal maxDepth is not supported");
    } else {
        n = bson_iter_as_int64(f);
    }
    if (n < 0)
        return mf_error_set(err, 40101, "maxDepth requires a nonnegative argument, found: %lld",
                            (long long)n);
    if (!whole)
        return mf_error_set(err, 40102, "maxDepth could not be represented as a long long: %lld",
                            (long long)n);
    *out = n;
    return 0;
}

int mfi_parse_graph_lookup(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out,
                           mf_error *err)
{
    char shown[512];
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_FailedToParse,
                            "the $graphLookup stage specification must be an object, but found %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    graph_stage *gs = mfi_stage_new(out, &graph_ops, sizeof *gs, it, agg, err);
    if (!gs)
        return MF_InternalError;
    bson_init(&gs->restrict_filter);
    gs->max_depth = -1;
    bson_iter_t f;
    int rc;
    /* mongod's lite parse: `from` first */
    bson_iter_recurse(it, &f);
    if (!bson_iter_find(&f, "from")) {
        bson_t spec;
        iter_doc(it, &spec);
        mf_bsonx_to_string(&spec, shown, sizeof shown);
        bson_destroy(&spec);
        return mf_error_set(err, MF_FailedToParse,
                            "missing 'from' option to $graphLookup stage specification: %s", shown);
    }
    if ((rc = from_arg(&f, "$graphLookup", agg->db, &gs->from, err)) != 0)
        return rc;

    const char *as = "", *cfrom = "", *cto = "";
    bool has_start = false;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "startWith") == 0) {
            mf_expr_free(gs->start);
            gs->start = NULL;
            if ((rc = mfi_agg_expr(agg, &f, &gs->start, err)) != 0)
                return rc;
            has_start = true;
        } else if (strcmp(k, "maxDepth") == 0) {
            if ((rc = graph_max_depth(&f, &gs->max_depth, err)) != 0)
                return rc;
        } else if (strcmp(k, "restrictSearchWithMatch") == 0) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                return mf_error_set(err, 40185, "restrictSearchWithMatch must be an object, found %s",
                                    mf_bsonx_type_alias(bson_iter_type(&f)));
            bson_destroy(&gs->restrict_filter);
            iter_doc(&f, &gs->restrict_filter);
            gs->has_restrict = true;
            mf_matcher *m = NULL;
            if ((rc = mf_matcher_parse_coll(&gs->restrict_filter, NULL, agg->collator, &m, err)) !=
                0) {
                char msg[sizeof err->msg];
                snprintf(msg, sizeof msg, "%s", err->msg);
                return mf_error_set(err, rc,
                                    "Failed to parse 'restrictSearchWithMatch' option to "
                                    "$graphLookup :: caused by :: %s",
                                    msg);
            }
            mf_matcher_free(m);
        } else if (strcmp(k, "from") == 0) {
            continue;
        } else if (strcmp(k, "as") == 0) {
            if ((rc = graph_string(&f, &as, err)) != 0)
                return rc;
        } else if (strcmp(k, "connectFromField") == 0) {
            if ((rc = graph_string(&f, &cfrom, err)) != 0)
                return rc;
        } else if (strcmp(k, "connectToField") == 0) {
            if ((rc = graph_string(&f, &cto, err)) != 0)
                return rc;
        } else if (strcmp(k, "depthField") == 0) {
            const char *d;
            if ((rc = graph_string(&f, &d, err)) != 0)
                return rc;
            free(gs->depth_field);
            gs->depth_field = NULL;
            if ((rc = plain_path(d, &gs->depth_field, err)) != 0)
                return rc;
        } else {
            return mf_error_set(err, 40104, "Unknown argument to $graphLookup: %s", k);
        }
    }
    if (!*as || !has_start || !*cfrom || !*cto)
        return mf_error_set(err, 40105,
                            "$graphLookup requires 'from', 'as', 'startWith', 'connectFromField', "
                            "and 'connectToField' to be specified.");
    if ((rc = plain_path(as, &gs->as, err)) != 0 ||
        (rc = plain_path(cfrom, &gs->connect_from, err)) != 0 ||
        (rc = plain_path(cto, &gs->connect_to, err)) != 0)
        return rc;
    if (agg->depth + 1 > MFI_AGG_MAX_DEPTH)
        return mf_error_set(err, MF_MaxSubPipelineDepthExceeded, "Maximum number of nested sub-pipelines exceeded. Limit is %d",
                            MFI_AGG_MAX_DEPTH);
    return 0;
}
