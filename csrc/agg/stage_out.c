/*
 * stage_out.c -- the stages that write the pipeline's results into a
 * collection: $out and $merge (mongod 7.0's DocumentSourceOut and
 * DocumentSourceMerge).  Both must end the pipeline (pipeline.c checks it)
 * and return no documents: their first pull consumes the whole input.
 *
 * Storage is reached only through the environment's sinks (pipeline.h):
 *
 *   $out    out_open creates a temporary collection "tmp.agg_out.<uuid>"
 *           with the target's indexes; every document is inserted there;
 *           commit renames it over the target (dropping the old one) under
 *           the catalog's exclusive lock, so a reader sees the old target
 *           or the new one, never a half-written one.  An error drops the
 *           temporary collection and leaves the target as it was.
 *
 *   $merge  documents are gathered in batches (mongod's writer batch:
 *           100,000 documents or 16 MB).  A document's `on` values are
 *           checked as it joins the batch (51185 array, 51132 missing or
 *           null), so a bad document stops the stage before its batch is
 *           written.  A batch is then written one document at a time:
 *           the sink looks up the target's document with the same `on`
 *           values and calls merge_decide under the target's lock, which
 *           applies the whenMatched / whenNotMatched modes with
 *           query/update.c -- the same update semantics mongod's $merge
 *           gets from the update command it sends:
 *
 *             whenMatched      matched               not matched + insert
 *             replace          replacement of d      upsert of d
 *             merge            {$set: d}             upsert {$set: d}
 *             keepExisting     nothing               upsert {$setOnInsert: d}
 *             [pipeline]       pipeline on target    insert d itself
 *             fail             (plain insert of d: a DuplicateKey on the
 *                               `on` index is the "match")
 *
 *           As mongod's unordered batch, the writes of a batch go on after
 *           a failed one and the batch then reports its first error; with
 *           whenNotMatched: fail, a batch in which some document matched
 *           nothing fails with 13113 after its other documents are written.
 */
#include "pipeline_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WRITE_BATCH_DOCS 100000             /* write_ops::kMaxWriteBatchSize */
#define WRITE_BATCH_BYTES (16 * 1024 * 1024) /* BSONObjMaxUserSize */
#define MAX_ON_FIELDS 32

static int oom(mf_error *err)
{
    return mf_error_oom(err);
}

/* Prefix err's message with mongod's context ("ctx :: caused by :: msg"). */
static void add_context(mf_error *err, const char *ctx)
{
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    mf_error_set(err, err->code, "%s :: caused by :: %s", ctx, msg);
}

/* An engine failure: stop writing rather than go on with the batch. */
static bool fatal(int rc)
{
    return rc == MF_InternalError || rc == MF_DataCorruption || rc == MF_OutOfDiskSpace ||
           rc == MF_InterruptedAtShutdown || rc == MF_MaxTimeMSExpired;
}

/* ----------------------------------------------------- target namespaces */

/* NamespaceString::validDBName (its "normal" rules). */
static bool valid_db_name(const char *db)
{
    size_t n = strlen(db);
    if (n == 0 || n >= 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strchr("/\\. \"$", db[i]))
            return false;
    return true;
}

/* NamespaceString::isOnInternalDb. */
static bool internal_db(const char *db)
{
    return strcmp(db, "admin") == 0 || strcmp(db, "local") == 0 || strcmp(db, "config") == 0;
}

static bool system_coll(const char *coll)
{
    return strncmp(coll, "system.", 7) == 0;
}

/* A collection name the catalog accepts (cmd_catalog.c's rules). */
static bool valid_coll_name(const char *coll)
{
    return coll[0] != '\0' && coll[0] != '.' && !strchr(coll, '$');
}

/* The IDL's string field of a sub-document spec (`what`: "$out.db"). */
static int string_field(const bson_iter_t *it, const char *what, const char **out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field '%s' is the wrong type '%s', expected type 'string'", what,
                            mf_bsonx_type_alias(bson_iter_type(it)));
    *out = bson_iter_utf8(it, NULL);
    return 0;
}

/* Append {db, coll} under `key`. */
static void append_ns(bson_t *out, const char *key, const char *db, const char *coll)
{
    bson_t ns;
    BSON_APPEND_DOCUMENT_BEGIN(out, key, &ns);
    BSON_APPEND_UTF8(&ns, "db", db);
    BSON_APPEND_UTF8(&ns, "coll", coll);
    bson_append_document_end(out, &ns);
}

/* ----------------------------------------------------------------- $out */

typedef struct {
    mfi_stage base;
    char *db, *coll;
    bool done;
} out_stage;

static int out_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    out_stage *o = (out_stage *)s;
    mfi_agg *a = s->agg;
    mf_agg_sink *sink = NULL;
    (void)out;
    *eof = true;
    if (o->done)
        return 0;
    o->done = true;
    /* As mongod's initialize(): the temporary collection exists before
     * the first document is read. */
    int rc = a->env->out_open(a->env->arg, o->db, o->coll, &sink, err);
    while (rc == 0) {
        bson_t d;
        bool end;
        if ((rc = mfi_stage_pull(s, &d, &end, err)) != 0 || end)
            break;
        rc = sink->insert(sink, &d, &a->err_info, err);
        bson_destroy(&d);
    }
    if (rc == 0)
        rc = sink->commit(sink, err);
    if (sink)
        sink->free(sink); /* drops the temporary collection unless renamed */
    return rc;
}

static void out_explain(const mfi_stage *s, bson_t *out)
{
    const out_stage *o = (const out_stage *)s;
    BSON_APPEND_UTF8(out, "db", o->db);
    BSON_APPEND_UTF8(out, "coll", o->coll);
}

static void out_free(mfi_stage *s)
{
    out_stage *o = (out_stage *)s;
    free(o->db);
    free(o->coll);
}

static const mfi_stage_ops out_ops = {"$out", out_next, out_explain, out_free};

int mfi_parse_out(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    const char *db = agg->db, *coll = NULL;
    int rc;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        coll = bson_iter_utf8(it, NULL);
    } else if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_iter_t f;
        bool has_db = false, has_ts = false;
        bson_iter_recurse(it, &f);
        while (bson_iter_next(&f)) {
            const char *k = bson_iter_key(&f);
            if (strcmp(k, "db") == 0) {
                if ((rc = string_field(&f, "$out.db", &db, err)) != 0)
                    return rc;
                has_db = true;
            } else if (strcmp(k, "coll") == 0) {
                if ((rc = string_field(&f, "$out.coll", &coll, err)) != 0)
                    return rc;
            } else if (strcmp(k, "timeseries") == 0) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                    return mf_error_set(err, MF_TypeMismatch,
                                        "BSON field '$out.timeseries' is the wrong type '%s', "
                                        "expected type 'object'",
                                        mf_bsonx_type_alias(bson_iter_type(&f)));
                has_ts = true;
            } else {
                return mf_error_set(err, 40415, "BSON field '$out.%s' is an unknown field.", k);
            }
        }
        if (!has_db)
            return mf_error_set(err, 40414, "BSON field '$out.db' is missing but a required field");
        if (!coll)
            return mf_error_set(err, 40414,
                                "BSON field '$out.coll' is missing but a required field");
        if (has_ts)
            return mf_error_set(err, 7406100,
                                "$out to time-series collections is only supported on FCV "
                                "greater than or equal to 7.1");
    } else {
        return mf_error_set(err, 16990, "$out only supports a string or object argument, but "
                                        "found %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    }
    if (!valid_db_name(db) || !valid_coll_name(coll))
        return mf_error_set(err, MF_InvalidNamespace, "Invalid $out target namespace, %s.%s", db,
                            coll);
    if (system_coll(coll))
        return mf_error_set(err, 17385, "Can't $out to special collection: %s", coll);
    if (internal_db(db))
        return mf_error_set(err, 31321, "Can't $out to internal database: %s", db);
    out_stage *o = mfi_stage_new(out, &out_ops, sizeof *o, it, agg, err);
    if (!o)
        return MF_InternalError;
    /* explain shows {db, coll} whatever form the spec had */
    o->base.spec_type = BSON_TYPE_DOCUMENT;
    if (!(o->db = bson_strdup(db)) || !(o->coll = bson_strdup(coll)))
        return oom(err);
    return 0;
}

/* --------------------------------------------------------------- $merge */

typedef enum { WM_REPLACE, WM_KEEP_EXISTING, WM_MERGE, WM_FAIL, WM_PIPELINE } when_matched;
typedef enum { WNM_INSERT, WNM_DISCARD, WNM_FAIL } when_not_matched;

static const char *const wm_names[] = {"replace", "keepExisting", "merge", "fail", "pipeline"};
static const char *const wnm_names[] = {"insert", "discard", "fail"};

/* The first stage of the whenMatched pipeline: the target's document. */
typedef struct {
    mfi_stage base;
    const bson_t *doc;
    bool given;
} feed_stage;

static int feed_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    feed_stage *f = (feed_stage *)s;
    (void)err;
    *eof = f->given || !f->doc;
    if (*eof)
        return 0;
    f->given = true;
    bson_init(out);
    bson_concat(out, f->doc);
    return 0;
}

static const mfi_stage_ops feed_ops = {"$feed", feed_next, NULL, NULL};

typedef struct {
    mfi_stage base;
    char *db, *coll;
    char *on[MAX_ON_FIELDS];  /* sorted, distinct (mongod's std::set<FieldPath>) */
    size_t non;
    bool on_has_id;
    when_matched wm;
    when_not_matched wnm;
    /* the $merge `let`: names, expressions (over the source document) */
    bson_t let_spec;
    char **let_names;
    mf_expr **let_exprs;
    size_t nlet;
    /* the whenMatched pipeline, run with its own variables */
    bson_t pipeline_spec;     /* {"v": [...]} */
    mfi_agg sub;              /* let_names: the command's and the $merge's */
    mfi_stage_list subs;      /* subs.v[0] is the feed */
    /* the batch being gathered: documents back to back */
    mf_buf batch;
    size_t nbatch;
    bool done;
} merge_stage;

/* One document's merge: what merge_decide needs. */
typedef struct {
    merge_stage *m;
    const bson_t *doc;        /* the source document */
    const bson_t *match;      /* its `on` equalities */
    bool missed;              /* matched nothing under whenNotMatched: fail */
} merge_call;

/* The update mongod's $merge sends for `d` in mode `wm`. */
static int make_update(when_matched wm, const bson_t *d, mf_update **out, mf_error *err)
{
    if (wm == WM_REPLACE || wm == WM_PIPELINE)
        return mf_update_parse(d, NULL, out, err);
    bson_t u = BSON_INITIALIZER;
    BSON_APPEND_DOCUMENT(&u, wm == WM_MERGE ? "$set" : "$setOnInsert", d);
    int rc = mf_update_parse(&u, NULL, out, err);
    bson_destroy(&u);
    return rc;
}

/* Apply update `wm` of `d` to `base` into `out`: *changed is false when
 * the document stays the same (nothing to write). */
static int apply_update(merge_stage *m, when_matched wm, const bson_t *d, const bson_t *base,
                        bool is_insert, bson_t *out, bool *changed, mf_error *err)
{
    mf_update *u = NULL;
    int rc = make_update(wm, d, &u, err);
    if (rc == 0) {
        rc = mf_update_apply(u, base, is_insert, -1, m->base.agg->vars.now_ms, out, changed, err);
        if (rc)
            bson_destroy(out);
    }
    mf_update_free(u);
    return rc;
}

static int set_sub_vars(merge_stage *m, const bson_t *doc, mf_error *err);

/* Run the whenMatched pipeline over `existing` into `out`. */
static int run_pipeline(merge_stage *m, const bson_t *existing, bson_t *out, mf_error *err)
{
    feed_stage *f = (feed_stage *)m->subs.v[0];
    f->doc = existing;
    f->given = false;
    mfi_stage *last = m->subs.v[m->subs.n - 1];
    bool eof;
    int rc = last->ops->next(last, out, &eof, err);
    if (rc == 0 && eof) /* every allowed stage maps one document to one */
        rc = mf_error_set(err, MF_InternalError, "the whenMatched pipeline returned nothing");
    return rc;
}

static int merge_decide(void *arg, const bson_t *existing, bson_t *out,
                        mf_agg_merge_action *action, mf_error *err)
{
    merge_call *c = arg;
    merge_stage *m = c->m;
    bool changed = true;
    int rc = 0;
    *action = MF_AGG_MERGE_NONE;
    if (!existing) {
        if (m->wnm == WNM_FAIL)
            c->missed = true;
        if (m->wnm != WNM_INSERT)
            return 0;
        if (m->wm == WM_PIPELINE) {
            /* kInsertSuppliedDoc: the source document itself */
            bson_init(out);
            bson_concat(out, c->doc);
            *action = MF_AGG_MERGE_INSERT;
            return 0;
        }
        /* an upsert: the `on` equalities, then the update */
        bson_t seed;
        rc = mf_update_upsert_seed(c->match, &seed, err);
        if (rc == 0)
            rc = apply_update(m, m->wm, c->doc, &seed, true, out, &changed, err);
        bson_destroy(&seed);
        if (rc == 0)
            *action = MF_AGG_MERGE_INSERT;
        return rc;
    }
    switch (m->wm) {
    case WM_KEEP_EXISTING:
    case WM_FAIL:
        return 0;
    case WM_REPLACE:
    case WM_MERGE:
        rc = apply_update(m, m->wm, c->doc, existing, false, out, &changed, err);
        break;
    case WM_PIPELINE: {
        bson_t r;
        rc = set_sub_vars(m, c->doc, err);
        if (rc == 0)
            rc = run_pipeline(m, existing, &r, err);
        if (rc == 0) {
            /* the result replaces the document, keeping its _id */
            rc = apply_update(m, WM_PIPELINE, &r, existing, false, out, &changed, err);
            bson_destroy(&r);
        }
        break;
    }
    }
    if (rc == 0 && changed)
        *action = MF_AGG_MERGE_REPLACE;
    else if (rc == 0)
        bson_destroy(out);
    return rc;
}

/* The `on` equalities of `doc`: {f: {$eq: v}, ...}; errors as mongod's
 * extractMergeOnFieldsFromDoc. */
static int on_match(const merge_stage *m, const bson_t *doc, bson_t *match, mf_error *err)
{
    bson_init(match);
    for (size_t i = 0; i < m->non; i++) {
        bson_iter_t v;
        bool has = mfi_doc_get_path(doc, m->on[i], &v);
        if (has && BSON_ITER_HOLDS_ARRAY(&v))
            return mf_error_set(err, 51185, "$merge write error: 'on' field '%s' is an array",
                                m->on[i]);
        if (!has || BSON_ITER_HOLDS_NULL(&v) || BSON_ITER_HOLDS_UNDEFINED(&v))
            return mf_error_set(err, 51132,
                                "$merge write error: 'on' field '%s' cannot be missing, null, "
                                "undefined or an array",
                                m->on[i]);
        bson_t eq;
        BSON_APPEND_DOCUMENT_BEGIN(match, m->on[i], &eq);
        mf_bsonx_append_iter(&eq, "$eq", 3, &v);
        bson_append_document_end(match, &eq);
    }
    return 0;
}

/* Whether a DuplicateKey's key pattern (in `info`) is exactly the `on`
 * fields. */
static bool dup_on_fields(const merge_stage *m, const bson_t *info)
{
    bson_iter_t it, k;
    bson_t kp;
    size_t n = 0;
    if (!bson_iter_init_find(&it, info, "keyPattern") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    uint32_t len;
    const uint8_t *data;
    bson_iter_document(&it, &len, &data);
    bson_init_static(&kp, data, len);
    bson_iter_init(&k, &kp);
    while (bson_iter_next(&k)) {
        bool found = false;
        for (size_t i = 0; i < m->non && !found; i++)
            found = strcmp(bson_iter_key(&k), m->on[i]) == 0;
        if (!found)
            return false;
        n++;
    }
    return n == m->non;
}

/* mongod's DocumentSourceMerge::spill contexts. */
static void merge_error_context(const merge_stage *m, int rc, const bson_t *info, mf_error *err)
{
    if (rc == MF_ImmutableField) /* ImmutableField */
        add_context(err, "$merge failed to update the matching document, did you attempt to "
                         "modify the _id or the shard key?");
    else if (rc == MF_DuplicateKey && m->wm == WM_FAIL && dup_on_fields(m, info))
        add_context(err, "$merge with whenMatched: fail found an existing document with the "
                         "same values for the 'on' fields");
    else if (rc == MF_DuplicateKey)
        add_context(err, "$merge failed due to a DuplicateKey error");
}

/* Write the gathered batch; its first error, if any, after all of it. */
static int merge_flush(merge_stage *m, mf_agg_sink *sink, mf_error *err)
{
    mfi_agg *a = m->base.agg;
    int first = 0;
    size_t missed = 0;
    size_t pos = 0;
    for (size_t i = 0; i < m->nbatch; i++) {
        bson_t d, match, info = BSON_INITIALIZER;
        uint32_t len;
        mf_error e;
        memcpy(&len, m->batch.data + pos, 4);
        len = BSON_UINT32_FROM_LE(len);
        bson_init_static(&d, m->batch.data + pos, len);
        pos += len;
        int rc;
        if (m->wm == WM_FAIL) {
            /* mongod's insert strategy: a match is a DuplicateKey */
            rc = sink->insert(sink, &d, &info, &e);
        } else {
            merge_call c = {.m = m, .doc = &d, .match = &match};
            rc = on_match(m, &d, &match, &e);
            if (rc == 0)
                rc = sink->merge(sink, &match, merge_decide, &c, &info, &e);
            bson_destroy(&match);
            missed += c.missed;
        }
        if (rc && !first) {
            merge_error_context(m, rc, &info, &e);
            *err = e;
            first = rc;
            bson_reinit(&a->err_info);
            bson_concat(&a->err_info, &info);
        }
        bson_destroy(&info);
        if (rc && fatal(rc))
            break;
    }
    m->batch.len = 0;
    m->nbatch = 0;
    if (first)
        return first;
    if (missed)
        return mf_error_set(err, MF_MergeStageNoMatchingDocument,
                            "$merge could not find a matching document in the target collection "
                            "for at least one document in the source collection");
    return 0;
}

/* Add `d` to the batch: an _id first if the `on` fields include it and it
 * has none (mongod generates one here), and its `on` values checked. */
static int merge_add(merge_stage *m, const bson_t *d, mf_error *err)
{
    bson_t with_id, match;
    const bson_t *doc = d;
    bson_iter_t it;
    if (m->on_has_id && !bson_iter_init_find(&it, d, "_id")) {
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        bson_init(&with_id);
        bson_concat(&with_id, d);
        BSON_APPEND_OID(&with_id, "_id", &oid);
        doc = &with_id;
    }
    int rc = on_match(m, doc, &match, err);
    bson_destroy(&match);
    if (rc == 0 && mf_buf_append(&m->batch, bson_get_data(doc), doc->len) != 0)
        rc = oom(err);
    if (rc == 0)
        m->nbatch++;
    if (doc == &with_id)
        bson_destroy(&with_id);
    return rc;
}

static int merge_next(mfi_stage *s, bson_t *out, bool *eof, mf_error *err)
{
    merge_stage *m = (merge_stage *)s;
    mfi_agg *a = s->agg;
    mf_agg_sink *sink = NULL;
    (void)out;
    *eof = true;
    if (m->done)
        return 0;
    m->done = true;
    int rc = a->env->merge_open(a->env->arg, m->db, m->coll, a->deadline, &sink, err);
    while (rc == 0) {
        bson_t d;
        bool end;
        if ((rc = mfi_stage_pull(s, &d, &end, err)) != 0)
            break;
        if (end) {
            if (m->nbatch)
                rc = merge_flush(m, sink, err);
            break;
        }
        rc = merge_add(m, &d, err);
        bson_destroy(&d);
        if (rc == 0 && (m->nbatch >= WRITE_BATCH_DOCS || m->batch.len >= WRITE_BATCH_BYTES))
            rc = merge_flush(m, sink, err);
    }
    if (rc == 0)
        rc = sink->commit(sink, err);
    if (sink)
        sink->free(sink);
    return rc;
}

static void merge_explain(const mfi_stage *s, bson_t *out)
{
    const merge_stage *m = (const merge_stage *)s;
    append_ns(out, "into", m->db, m->coll);
    if (m->non == 1) {
        BSON_APPEND_UTF8(out, "on", m->on[0]);
    } else {
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(out, "on", &arr);
        for (size_t i = 0; i < m->non; i++) {
            char key[16];
            const char *k;
            mf_uint32_to_key((uint32_t)i, &k, key, sizeof key);
            bson_append_utf8(&arr, k, -1, m->on[i], -1);
        }
        bson_append_array_end(out, &arr);
    }
    if (m->nlet)
        BSON_APPEND_DOCUMENT(out, "let", &m->let_spec);
    if (m->wm == WM_PIPELINE) {
        bson_iter_t v;
        bson_iter_init(&v, &m->pipeline_spec);
        bson_iter_next(&v);
        mf_bsonx_append_iter(out, "whenMatched", -1, &v);
    } else {
        BSON_APPEND_UTF8(out, "whenMatched", wm_names[m->wm]);
    }
    BSON_APPEND_UTF8(out, "whenNotMatched", wnm_names[m->wnm]);
}

static void merge_free(mfi_stage *s)
{
    merge_stage *m = (merge_stage *)s;
    free(m->db);
    free(m->coll);
    for (size_t i = 0; i < m->non; i++)
        free(m->on[i]);
    for (size_t i = 0; i < m->nlet; i++) {
        free(m->let_names[i]);
        mf_expr_free(m->let_exprs[i]);
    }
    free(m->let_names);
    free(m->let_exprs);
    bson_destroy(&m->let_spec);
    bson_destroy(&m->pipeline_spec);
    for (size_t i = 0; i < m->subs.n; i++) {
        mfi_stage *st = m->subs.v[i];
        bson_destroy(&st->spec);
        if (st->ops->free)
            st->ops->free(st);
        free(st);
    }
    free(m->subs.v);
    /* the sub-context borrows db and coll; it owns its names and values */
    for (size_t i = 0; i < m->sub.nlet; i++)
        free(m->sub.let_names[i]);
    free(m->sub.let_names);
    bson_destroy(&m->sub.let_values);
    bson_destroy(&m->sub.err_info);
    mf_buf_free(&m->batch);
}

static const mfi_stage_ops merge_ops = {"$merge", merge_next, merge_explain, merge_free};

/* ------------------------------------------------------ $merge: parsing */

/* mongod's mergeTargetNssParseFromBSON: `into` as a string or {db, coll}. */
static int parse_into(const bson_iter_t *it, const char **db, const char **coll, mf_error *err)
{
    if (BSON_ITER_HOLDS_UTF8(it)) {
        *coll = bson_iter_utf8(it, NULL);
        if (!**coll)
            return mf_error_set(err, 5786800, "$merge 'into' field cannot be an empty string");
        return 0;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, 51178,
                            "$merge 'into' field  must be either a string or an object, but "
                            "found %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    bson_iter_t f;
    int rc;
    *coll = NULL;
    bson_iter_recurse(it, &f);
    while (bson_iter_next(&f)) {
        const char *k = bson_iter_key(&f);
        if (strcmp(k, "db") == 0) {
            if ((rc = string_field(&f, "into.db", db, err)) != 0)
                return rc;
        } else if (strcmp(k, "coll") == 0) {
            if ((rc = string_field(&f, "into.coll", coll, err)) != 0)
                return rc;
        } else {
            return mf_error_set(err, 40415, "BSON field 'into.%s' is an unknown field.", k);
        }
    }
    if (!*coll || !**coll)
        return mf_error_set(err, 5786801,
                            "$merge 'into' field must specify a 'coll' that is not empty, null or "
                            "undefined");
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* mongod's mergeOnFieldsParseFromBSON, then FieldPath and duplicate
 * checks; the fields end sorted. */
static int parse_on(const bson_iter_t *it, merge_stage *m, mf_error *err)
{
    const char *names[MAX_ON_FIELDS];
    size_t n = 0;
    if (BSON_ITER_HOLDS_UTF8(it)) {
        names[n++] = bson_iter_utf8(it, NULL);
    } else if (BSON_ITER_HOLDS_ARRAY(it)) {
        bson_iter_t el;
        bson_iter_recurse(it, &el);
        while (bson_iter_next(&el)) {
            if (!BSON_ITER_HOLDS_UTF8(&el))
                return mf_error_set(err, 51134,
                                    "$merge 'on' array elements must be strings, but found %s",
                                    mf_bsonx_type_alias(bson_iter_type(&el)));
            if (n == MAX_ON_FIELDS)
                return mf_error_set(err, MF_BadValue, "$merge 'on' has more than %d fields",
                                    MAX_ON_FIELDS);
            names[n++] = bson_iter_utf8(&el, NULL);
        }
    } else {
        return mf_error_set(err, 51186,
                            "$merge 'on' field  must be either a string or an array of strings, "
                            "but found %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    }
    if (n == 0)
        return mf_error_set(err, 51187,
                            "If explicitly specifying $merge 'on', must include at least one field");
    for (size_t i = 0; i < n; i++) {
        char dollar[1024], *path = NULL;
        snprintf(dollar, sizeof dollar, "$%s", names[i]);
        int rc = mfi_agg_field_path(dollar, &path, err);
        if (rc)
            return rc;
        for (size_t j = 0; j < m->non; j++)
            if (strcmp(m->on[j], path) == 0) {
                bson_free(path);
                return mf_error_set(err, 31465, "Found a duplicate field '%s'", names[i]);
            }
        m->on[m->non++] = path;
    }
    qsort(m->on, m->non, sizeof m->on[0], cmp_str);
    return 0;
}

static int parse_when_matched(const bson_iter_t *it, merge_stage *m, mf_error *err)
{
    if (BSON_ITER_HOLDS_ARRAY(it)) {
        m->wm = WM_PIPELINE;
        mf_bsonx_append_iter(&m->pipeline_spec, "v", 1, it);
        return 0;
    }
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mf_error_set(err, 51191,
                            "$merge 'whenMatched' field  must be either a string or an array, but "
                            "found %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    const char *v = bson_iter_utf8(it, NULL);
    for (int i = 0; i < WM_PIPELINE; i++)
        if (strcmp(v, wm_names[i]) == 0) {
            m->wm = (when_matched)i;
            return 0;
        }
    return mf_error_set(err, MF_BadValue,
                        "Enumeration value '%s' for field 'whenMatched' is not a valid value.", v);
}

static int parse_when_not_matched(const bson_iter_t *it, merge_stage *m, mf_error *err)
{
    const char *v;
    int rc = string_field(it, "$merge.whenNotMatched", &v, err);
    if (rc)
        return rc;
    for (int i = 0; i <= WNM_FAIL; i++)
        if (strcmp(v, wnm_names[i]) == 0) {
            m->wnm = (when_not_matched)i;
            return 0;
        }
    return mf_error_set(err, MF_BadValue,
                        "Enumeration value '%s' for field '$merge.whenNotMatched' is not a valid "
                        "value.",
                        v);
}

/* variableValidation::validateNameForUserWrite. */
static int check_var_name(const char *k, mf_error *err)
{
    if (!*k)
        return mf_error_set(err, 16866, "empty variable names are not allowed");
    unsigned char c0 = (unsigned char)k[0];
    if (!((c0 >= 'a' && c0 <= 'z') || c0 >= 0x80))
        return mf_error_set(err, 16867,
                            "'%s' starts with an invalid character for a user variable name", k);
    for (const unsigned char *p = (const unsigned char *)k + 1; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p >= 0x80))
            return mf_error_set(err, 16868, "'%s' contains an invalid character for a variable "
                                            "name: '%c'",
                                k, *p);
    return 0;
}

/* The $merge `let` (pipeline mode only): each variable an expression over
 * the source document; `new` may only be "$$ROOT" and is added (as mongod
 * does) when absent and whenNotMatched is insert. */
static int parse_let(merge_stage *m, const bson_t *let, mfi_agg *agg, mf_error *err)
{
    bson_iter_t it;
    bool has_new = false;
    if (let && bson_iter_init_find(&it, let, "new")) {
        if (!BSON_ITER_HOLDS_UTF8(&it) || strcmp(bson_iter_utf8(&it, NULL), "$$ROOT") != 0)
            return mf_error_set(err, 51273, "'let' may not define a value for the reserved 'new' "
                                            "variable other than '$$ROOT'");
        has_new = true;
    }
    if (let)
        bson_concat(&m->let_spec, let);
    if (!has_new && (!let || m->wnm == WNM_INSERT))
        BSON_APPEND_UTF8(&m->let_spec, "new", "$$ROOT");
    size_t n = bson_count_keys(&m->let_spec);
    if (!(m->let_names = calloc(n, sizeof *m->let_names)) ||
        !(m->let_exprs = calloc(n, sizeof *m->let_exprs)))
        return oom(err);
    bson_iter_init(&it, &m->let_spec);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        int rc = check_var_name(k, err);
        if (rc)
            return rc;
        if (!(m->let_names[m->nlet] = bson_strdup(k)))
            return oom(err);
        m->nlet++;
        if ((rc = mfi_agg_expr(agg, &it, &m->let_exprs[m->nlet - 1], err)) != 0)
            return rc;
    }
    return 0;
}

/* The whenMatched pipeline: only the stages an update pipeline allows. */
static int parse_sub_pipeline(merge_stage *m, mf_error *err)
{
    static const struct {
        const char *name;
        mfi_stage_parse_fn parse;
    } allowed[] = {
        {"$addFields", mfi_parse_add_fields}, {"$project", mfi_parse_project},
        {"$replaceRoot", mfi_parse_replace_root}, {"$replaceWith", mfi_parse_replace_with},
        {"$set", mfi_parse_set}, {"$unset", mfi_parse_unset},
    };
    mfi_agg *outer = m->base.agg;
    mfi_agg *sub = &m->sub;
    /* its variables: the command's `let` and the $merge's, by name */
    size_t n = outer->nlet + m->nlet;
    if (n && !(sub->let_names = calloc(n, sizeof *sub->let_names)))
        return oom(err);
    for (size_t i = 0; i < m->nlet + outer->nlet; i++) {
        const char *k = i < m->nlet ? m->let_names[i] : outer->let_names[i - m->nlet];
        bool dup = false;
        for (size_t j = 0; j < sub->nlet && !dup; j++)
            dup = strcmp(sub->let_names[j], k) == 0;
        if (dup)
            continue;
        if (!(sub->let_names[sub->nlet] = bson_strdup(k)))
            return oom(err);
        sub->nlet++;
    }
    sub->db = m->db;
    sub->coll = m->coll;
    sub->env = outer->env;
    sub->deadline = outer->deadline;
    sub->vars = outer->vars;
    sub->vars.let = &sub->let_values;

    if (!mfi_stage_new(&m->subs, &feed_ops, sizeof(feed_stage), NULL, sub, err))
        return MF_InternalError;
    bson_iter_t v, el;
    bson_iter_init(&v, &m->pipeline_spec);
    bson_iter_next(&v);
    bson_iter_recurse(&v, &el);
    while (bson_iter_next(&el)) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&el))
            return mf_error_set(err, MF_TypeMismatch,
                                "Each element of the 'pipeline' array must be an object");
        bson_iter_t st, more;
        bson_iter_recurse(&el, &st);
        if (!bson_iter_next(&st) || (more = st, bson_iter_next(&more)))
            return mf_error_set(err, 40323,
                                "A pipeline stage specification object must contain exactly one "
                                "field.");
        const char *name = bson_iter_key(&st);
        mfi_stage_parse_fn parse = NULL;
        for (size_t i = 0; i < sizeof allowed / sizeof allowed[0] && !parse; i++)
            if (strcmp(allowed[i].name, name) == 0)
                parse = allowed[i].parse;
        if (!parse && !mfi_stage_known(name))
            return mf_error_set(err, 40324, "Unrecognized pipeline stage name: '%s'", name);
        if (!parse)
            return mf_error_set(err, MF_InvalidOptions,
                                "%s is not allowed to be used within an update", name);
        int rc = parse(&st, sub, &m->subs, err);
        if (rc)
            return rc;
    }
    for (size_t i = 1; i < m->subs.n; i++)
        m->subs.v[i]->src = m->subs.v[i - 1];
    return 0;
}

/* Evaluate the $merge `let` over the source document `doc` into the
 * whenMatched pipeline's variables, with the command's after them. */
static int set_sub_vars(merge_stage *m, const bson_t *doc, mf_error *err)
{
    mfi_agg *outer = m->base.agg;
    bson_reinit(&m->sub.let_values);
    for (size_t i = 0; i < m->nlet; i++) {
        bson_value_t v;
        int rc = mfi_agg_eval(outer, m->let_exprs[i], doc, &v, err);
        if (rc)
            return rc;
        if (v.value_type != BSON_TYPE_EOD)
            mf_bsonx_append_value(&m->sub.let_values, m->let_names[i], -1, &v);
        mf_value_free(&v);
    }
    bson_iter_t it;
    bson_iter_init(&it, &outer->let_values);
    while (bson_iter_next(&it)) {
        bool shadowed = false;
        for (size_t i = 0; i < m->nlet && !shadowed; i++)
            shadowed = strcmp(m->let_names[i], bson_iter_key(&it)) == 0;
        if (!shadowed)
            mf_bsonx_append_iter(&m->sub.let_values, NULL, 0, &it);
    }
    return 0;
}

int mfi_parse_merge(const bson_iter_t *it, mfi_agg *agg, mfi_stage_list *out, mf_error *err)
{
    const char *db = agg->db, *coll = NULL;
    bson_iter_t on_it, let_it, wm_it, wnm_it;
    bool has_on = false, has_let = false, has_wm = false, has_wnm = false;
    int rc;
    if (!BSON_ITER_HOLDS_UTF8(it) && !BSON_ITER_HOLDS_DOCUMENT(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "$merge requires a string or object argument, but found %s",
                            mf_bsonx_type_alias(bson_iter_type(it)));
    if (BSON_ITER_HOLDS_UTF8(it)) {
        coll = bson_iter_utf8(it, NULL);
    } else {
        bson_iter_t f;
        bool has_into = false;
        bson_iter_recurse(it, &f);
        while (bson_iter_next(&f)) {
            const char *k = bson_iter_key(&f);
            if (strcmp(k, "into") == 0) {
                if ((rc = parse_into(&f, &db, &coll, err)) != 0)
                    return rc;
                has_into = true;
            } else if (strcmp(k, "on") == 0) {
                on_it = f;
                has_on = true;
            } else if (strcmp(k, "let") == 0) {
                if (!BSON_ITER_HOLDS_DOCUMENT(&f))
                    return mf_error_set(err, MF_TypeMismatch,
                                        "BSON field '$merge.let' is the wrong type '%s', expected "
                                        "type 'object'",
                                        mf_bsonx_type_alias(bson_iter_type(&f)));
                let_it = f;
                has_let = true;
            } else if (strcmp(k, "whenMatched") == 0) {
                wm_it = f;
                has_wm = true;
            } else if (strcmp(k, "whenNotMatched") == 0) {
                wnm_it = f;
                has_wnm = true;
            } else if (strcmp(k, "targetCollectionVersion") != 0) {
                return mf_error_set(err, 40415, "BSON field '$merge.%s' is an unknown field.", k);
            }
        }
        if (!has_into)
            return mf_error_set(err, 40414,
                                "BSON field '$merge.into' is missing but a required field");
    }
    merge_stage *m = mfi_stage_new(out, &merge_ops, sizeof *m, it, agg, err);
    if (!m)
        return MF_InternalError;
    bson_init(&m->let_spec);
    bson_init(&m->pipeline_spec);
    bson_init(&m->sub.let_values);
    bson_init(&m->sub.err_info);
    m->base.spec_type = BSON_TYPE_DOCUMENT;
    m->wm = WM_MERGE;
    m->wnm = WNM_INSERT;
    if (!(m->db = bson_strdup(db)) || !(m->coll = bson_strdup(coll)))
        return oom(err);
    if (has_on && (rc = parse_on(&on_it, m, err)) != 0)
        return rc;
    if (has_wm && (rc = parse_when_matched(&wm_it, m, err)) != 0)
        return rc;
    if (has_wnm && (rc = parse_when_not_matched(&wnm_it, m, err)) != 0)
        return rc;

    /* LiteParsed: the namespace, then the modes */
    if (!valid_db_name(db) || !coll[0])
        return mf_error_set(err, MF_InvalidNamespace, "Invalid $merge target namespace: '%s.%s'",
                            db, coll);
    bool supported = m->wnm == WNM_INSERT || (m->wm != WM_KEEP_EXISTING && m->wm != WM_FAIL);
    if (!supported)
        return mf_error_set(err, 51181,
                            "Combination of $merge modes 'whenMatched: %s' and 'whenNotMatched: "
                            "%s' is not supported",
                            wm_names[m->wm], wnm_names[m->wnm]);

    /* createFromBson: the `on` fields need a unique index */
    if (!has_on) {
        if (!(m->on[0] = bson_strdup("_id")))
            return oom(err);
        m->non = 1;
    } else {
        bool ok = false;
        rc = agg->env->has_unique_index(agg->env->arg, db, coll, (const char *const *)m->on,
                                        m->non, &ok, err);
        if (rc)
            return rc;
        if (!ok)
            return mf_error_set(err, 51183,
                                "Cannot find index to verify that join fields will be unique");
    }
    for (size_t i = 0; i < m->non; i++)
        m->on_has_id |= strcmp(m->on[i], "_id") == 0;

    /* create */
    if (!valid_coll_name(coll))
        return mf_error_set(err, MF_InvalidNamespace, "Invalid $merge target namespace: '%s.%s'",
                            db, coll);
    if (system_coll(coll))
        return mf_error_set(err, 31319, "Cannot $merge to special collection: %s", coll);
    if (internal_db(db))
        return mf_error_set(err, 31320, "Cannot $merge to internal database: %s", db);
    bson_t let;
    if (has_let) {
        uint32_t len;
        const uint8_t *data;
        bson_iter_document(&let_it, &len, &data);
        bson_init_static(&let, data, len);
    }
    if (m->wm == WM_PIPELINE) {
        if ((rc = parse_let(m, has_let ? &let : NULL, agg, err)) != 0)
            return rc;
        return parse_sub_pipeline(m, err);
    }
    if (has_let)
        return mf_error_set(err, 51199, "Cannot use 'let' variables with 'whenMatched: %s' mode",
                            wm_names[m->wm]);
    return 0;
}
