/*
 * cmd_catalog.c -- databases and collections: create, drop, dropDatabase,
 * renameCollection, listCollections, listDatabases, convertToCapped,
 * cloneCollectionAsCapped, with mongod's namespace rules and errors.
 *
 * A collection's catalog entry keeps the caller's bytes: here a BSON
 * document {uuid: <UUID>, options: {...}} that listCollections reports.
 * Every collection is created with its _id index ("_id_"), an index tree
 * like any other.  Each change is acknowledged only after group commit
 * has synced it.
 */
#include "command_int.h"
#include "authz_int.h"
#include "../query/query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define NS_MAX 255
#define ID_INDEX_SPEC_NAME "_id_"


int mfi_cmd_create(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)reply;
    char ns[NS_MAX + 64];
    int rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err);
    if (rc)
        return rc;
    bson_iter_t probe;
    if (bson_iter_init_find(&probe, cmd, "viewOn") || bson_iter_init_find(&probe, cmd, "pipeline"))
        return mfi_view_create(ctx, ns, cmd, err);
    if (mfi_is_view(ctx->inst, ns))
        return mf_error_set(err, MF_NamespaceExists,
                            "namespace %s already exists, but is a view on %s", ns, ns);
    /* Options MultiforaDB does not implement yet are refused by name,
     * rather than stored and silently ignored. */
    bson_t options = BSON_INITIALIZER, sub, clustered;
    bson_iter_t it;
    mf_collator *coll = NULL;
    bool has_clustered = false, pre_post_images = false;
    bool capped = false, has_size = false, has_max = false;
    int64_t size = 0, max = 0;
    mfi_validation_opts val = {0};
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (rc == 0 && bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "capped") == 0) { /* safeBool */
            if (!BSON_ITER_HOLDS_BOOL(&it) && !mfi_is_number(&it))
                rc = mf_error_set(err, MF_TypeMismatch,
                                  "BSON field 'create.capped' is the wrong type '%s', expected "
                                  "types '[bool, long, int, decimal, double]'",
                                  mf_bsonx_type_alias(bson_iter_type(&it)));
            capped = bson_iter_as_bool(&it);
            continue;
        }
        if (strcmp(k, "size") == 0 || strcmp(k, "max") == 0) { /* safeInt64 */
            if (!mfi_is_number(&it)) {
                rc = mf_error_set(err, MF_TypeMismatch,
                                  "BSON field 'create.%s' is the wrong type '%s', expected "
                                  "types '[long, int, decimal, double]'",
                                  k, mf_bsonx_type_alias(bson_iter_type(&it)));
            } else if (k[0] == 's') {
                has_size = true;
                size = mfi_safe_number_long(&it);
                if (size < 1) /* the IDL's validator */
                    rc = mf_error_set(err, 51024,
                                      "BSON field 'size' value must be >= 1, actual value '%lld'",
                                      (long long)size);
            } else {
                has_max = true;
                max = mfi_safe_number_long(&it);
            }
            continue;
        }
        if (mfi_is_generic_arg(k))
            continue;
        if (strcmp(k, "clusteredIndex") == 0) {
            if (has_clustered)
                bson_destroy(&clustered);
            has_clustered = false;
            if ((rc = mfi_parse_clustered_index(&it, "create", &clustered, err)) == 0)
                has_clustered = true;
            continue;
        }
        if (strcmp(k, "changeStreamPreAndPostImages") == 0) {
            rc = mfi_parse_pre_post_images(&it, "create", &pre_post_images, err);
            continue;
        }
        if (strcmp(k, "validator") == 0 || strcmp(k, "validationLevel") == 0 ||
            strcmp(k, "validationAction") == 0) {
            rc = mfi_parse_validation_opt(&it, "create", &val, err);
            continue;
        }
        if (strcmp(k, "collation") == 0) {
            /* Kept as the full spec; the simple collation is no default. */
            mf_collator_unref(coll);
            coll = NULL;
            if (mfi_collation_given(&it) &&
                (rc = mfi_collation_arg(&it, "create", k, &coll, err)) != 0)
                break;
            continue;
        }
        rc = mf_error_set(err, MF_CommandNotSupported,
                          "create option '%s' is not supported by MultiforaDB yet", k);
    }
    /* CmdCreate's checks of the capped options */
    if (rc == 0 && !capped && (has_size || has_max))
        rc = mf_error_set(err, MF_InvalidOptions,
                          "the 'capped' field needs to be true when either the 'size' or 'max' "
                          "fields are present");
    if (rc == 0 && capped && !has_size)
        rc = mf_error_set(err, MF_InvalidOptions,
                          "the 'size' field is required when 'capped' is true");
    if (rc == 0 && capped && size > (1LL << 50))
        rc = mf_error_set(err, MF_BadValue, "size cannot exceed 1 PB");
    if (rc == 0 && capped && max >= (1LL << 31))
        rc = mf_error_set(err, MF_BadValue,
                          "max in a capped collection has to be < 2^31 or not set");
    /* CollectionOptions::appendBSON's order (coll_options.c): the size
     * rounded up to 256 bytes (adjustCappedSize); max only when it limits */
    if (rc == 0 && capped) {
        BSON_APPEND_BOOL(&options, "capped", true);
        mfi_append_number(&options, "size", (size + 255) & ~(int64_t)255);
        if (max > 0)
            mfi_append_number(&options, "max", max);
    }
    if (rc == 0 && pre_post_images) {
        BSON_APPEND_DOCUMENT_BEGIN(&options, "changeStreamPreAndPostImages", &sub);
        BSON_APPEND_BOOL(&sub, "enabled", true);
        bson_append_document_end(&options, &sub);
    }
    /* as given: an empty validator is none, and no level or action is
     * assumed (CollectionOptions::fromCreateCommand) */
    if (rc == 0 && val.has_validator)
        rc = mfi_check_validator(ns, &val.validator, coll, err);
    if (rc == 0) {
        if (val.has_validator && bson_empty(&val.validator))
            val.has_validator = false;
        mfi_append_validation(&val, false, &options);
    }
    if (rc == 0 && coll) {
        BSON_APPEND_DOCUMENT_BEGIN(&options, "collation", &sub);
        mf_collator_to_bson(coll, &sub);
        bson_append_document_end(&options, &sub);
    }
    if (rc == 0 && has_clustered)
        BSON_APPEND_DOCUMENT(&options, "clusteredIndex", &clustered);
    if (has_clustered)
        bson_destroy(&clustered);
    if (rc == 0)
        rc = mf_cl_create(ctx->inst->engine, &ctx->log, ns, &options, coll, true, err);
    if (rc == 0)
        mfi_txn_note_created(ctx, ns); /* dropped again if it aborts */
    mf_collator_unref(coll);
    bson_destroy(&options);
    return rc;
}

int mfi_cmd_drop(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    char ns[NS_MAX + 64];
    int rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err);
    if (rc)
        return rc;
    mf_lsn lsn = 0;
    int nidx = 0;
    bool view = false;
    if ((rc = mfi_view_drop(ctx, ns, &view, err)) != 0)
        return rc;
    if (view) { /* mongod's reply for a view: no nIndexesWas */
        BSON_APPEND_UTF8(reply, "ns", ns);
        return 0;
    }
    /* mongod 7.0: dropping a collection that does not exist succeeds. */
    if (!mf_cl_exists(ctx->inst->engine, ns))
        return 0;
    if ((strcmp(ns + strlen(ctx->db) + 1, "system.profile") == 0 &&
         (rc = mfi_profile_check_drop(ctx->inst, ctx->db, err)) != 0) ||
        (rc = mfi_repl_check_drop(ctx->inst, ns, err)) != 0)
        return rc;
    rc = mf_cl_drop(mfi_cl(ctx->inst), &ctx->log, ns, &nidx, &lsn, err);
    if (rc == MF_NamespaceNotFound) /* dropped meanwhile */
        return 0;
    mfi_ctx_wrote(ctx, lsn);
    if (rc == 0) {
        BSON_APPEND_INT32(reply, "nIndexesWas", nidx);
        BSON_APPEND_UTF8(reply, "ns", ns);
    }
    return rc;
}

/* ------------------------------------------------------------ listing */

typedef struct coll_list {
    const char *db;
    size_t dblen;
    mf_coll **v;
    size_t n, cap;
} coll_list;

static void collect(mf_coll *c, void *arg)
{
    coll_list *l = arg;
    const char *name = mf_coll_name(c);
    if (l->db && (strncmp(name, l->db, l->dblen) != 0 || name[l->dblen] != '.'))
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        mf_coll **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = c;
}

/* The parsed filter of a list command, or NULL for none. */
static int list_filter(const bson_t *cmd, const char *cmdname, mf_matcher **out, mf_error *err)
{
    bson_iter_t it;
    *out = NULL;
    if (!bson_iter_init_find(&it, cmd, "filter") || BSON_ITER_HOLDS_NULL(&it))
        return 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
        return mfi_type_error(err, cmdname, "filter", &it, "object");
    uint32_t len;
    const uint8_t *data;
    bson_t f;
    bson_iter_document(&it, &len, &data);
    bson_init_static(&f, data, len);
    return mf_matcher_parse(&f, out, err);
}

static bool flag_arg(const bson_t *cmd, const char *name)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, cmd, name) && bson_iter_as_bool(&it);
}

typedef struct view_list {
    mf_cmd_ctx *ctx;
    mf_matcher *m;
    bson_t *batch;
    uint32_t *out_i;
    bool name_only, authorized_only;
} view_list;

/* A view's entry: {name, type: "view", options: {viewOn, pipeline,
 * collation?}, info: {readOnly: true}}. */
static int list_view(void *arg, const char *name, const bson_t *options, mf_error *err)
{
    (void)err;
    view_list *l = arg;
    if (l->authorized_only && !mfi_authz_any_on_ns(l->ctx, l->ctx->db, name))
        return 0;
    bson_t entry = BSON_INITIALIZER, sub;
    BSON_APPEND_UTF8(&entry, "name", name);
    BSON_APPEND_UTF8(&entry, "type", "view");
    if (!l->name_only) {
        BSON_APPEND_DOCUMENT(&entry, "options", options);
        BSON_APPEND_DOCUMENT_BEGIN(&entry, "info", &sub);
        BSON_APPEND_BOOL(&sub, "readOnly", true);
        bson_append_document_end(&entry, &sub);
    }
    if (!l->m || mf_matcher_match(l->m, &entry)) {
        char key[16];
        const char *k;
        mf_uint32_to_key((*l->out_i)++, &k, key, sizeof key);
        bson_append_document(l->batch, k, -1, &entry);
    }
    bson_destroy(&entry);
    return 0;
}

int mfi_cmd_list_collections(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                             mf_error *err)
{
    mf_matcher *m;
    int rc = list_filter(cmd, "listCollections", &m, err);
    if (rc)
        return rc;
    bool name_only = flag_arg(cmd, "nameOnly");
    /* with access control, authorizedCollections shows only those the
     * user may do something on */
    bool authorized_only = ctx->inst->auth && flag_arg(cmd, "authorizedCollections");
    mf_engine *e = ctx->inst->engine;
    coll_list l = {.db = ctx->db, .dblen = strlen(ctx->db)};
    char ns[NS_MAX + 64];
    snprintf(ns, sizeof ns, "%s.$cmd.listCollections", ctx->db);
    int64_t batch_size = -1;
    bson_iter_t it, cit;
    if (bson_iter_init_find(&it, cmd, "cursor")) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
            mf_matcher_free(m);
            return mfi_type_error(err, "listCollections", "cursor", &it, "object");
        }
        bson_iter_recurse(&it, &cit);
        if (bson_iter_find(&cit, "batchSize") &&
            (!mfi_as_int64(&cit, &batch_size) || batch_size < 0)) {
            mf_matcher_free(m);
            return mf_error_set(err, MF_BadValue, "batchSize must be a non-negative number");
        }
    }
    bson_t *batch = bson_new();

    mf_engine_catalog_lock(e, false);
    mf_engine_coll_each(e, collect, &l);
    uint32_t out_i = 0;
    for (size_t i = 0; i < l.n; i++) {
        mf_coll *c = l.v[i];
        const char *coll = mf_coll_name(c) + l.dblen + 1;
        if (mfi_txn_pending(ctx, mf_coll_name(c)))
            continue; /* another transaction's, not yet committed */
        if (authorized_only && !mfi_authz_any_on_ns(ctx, ctx->db, coll))
            continue;
        const uint8_t *ob;
        size_t olen;
        bson_t meta, entry, sub, idx;
        bson_iter_t mit;
        mf_coll_options(c, &ob, &olen);
        bson_init(&entry);
        BSON_APPEND_UTF8(&entry, "name", coll);
        BSON_APPEND_UTF8(&entry, "type", "collection");
        if (!name_only && bson_init_static(&meta, ob, olen)) {
            if (bson_iter_init_find(&mit, &meta, "options"))
                mf_bsonx_append_iter(&entry, "options", -1, &mit);
            BSON_APPEND_DOCUMENT_BEGIN(&entry, "info", &sub);
            BSON_APPEND_BOOL(&sub, "readOnly", false);
            if (bson_iter_init_find(&mit, &meta, "uuid"))
                mf_bsonx_append_iter(&sub, "uuid", -1, &mit);
            bson_append_document_end(&entry, &sub);
            mf_collator *dflt = NULL;
            mf_error cerr;
            /* a clustered collection has no _id index to show, nor has
             * system.profile */
            bool has_id = false;
            for (size_t k = 0; k < mf_coll_index_count(c); k++)
                has_id |= strcmp(mf_coll_index(c, k)->name, ID_INDEX_SPEC_NAME) == 0;
            if (has_id && !mf_cl_clustered(c, NULL)) {
                (void)mf_cl_default_collation(c, &dflt, &cerr); /* damage: shown without */
                mf_index_id_spec(dflt, &idx);
                mf_collator_unref(dflt);
                BSON_APPEND_DOCUMENT(&entry, "idIndex", &idx);
                bson_destroy(&idx);
            }
        }
        if (!m || mf_matcher_match(m, &entry)) {
            char key[16];
            const char *k;
            mf_uint32_to_key(out_i++, &k, key, sizeof key);
            bson_append_document(batch, k, -1, &entry);
        }
        bson_destroy(&entry);
    }
    mf_engine_catalog_unlock(e);
    free(l.v);
    /* then the views, as mongod lists them */
    view_list vl = {ctx, m, batch, &out_i, name_only, authorized_only};
    int rc2 = mfi_views_each(ctx->inst, ctx->db, list_view, &vl, err);
    mf_matcher_free(m);
    if (rc2) {
        bson_destroy(batch);
        return rc2;
    }
    return mfi_cursor_reply_from_docs(ctx, ns, batch, batch_size, reply, err);
}

int mfi_cmd_list_databases(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_matcher *m;
    int rc = list_filter(cmd, "listDatabases", &m, err);
    if (rc)
        return rc;
    bool name_only = flag_arg(cmd, "nameOnly");
    /* With access control, a user without listDatabases on the cluster
     * sees the databases it holds something on (mongod's
     * authorizedDatabases, by default then true). */
    bool may_all = mfi_authz_may_action(ctx, MFA_listDatabases, NULL, NULL);
    bool authorized_only = !may_all;
    bson_iter_t ait;
    if (bson_iter_init_find(&ait, cmd, "authorizedDatabases")) {
        authorized_only = bson_iter_as_bool(&ait);
        if (!authorized_only && !may_all) {
            mf_matcher_free(m);
            return mf_error_set(err, MF_Unauthorized,
                                "Insufficient permissions to list all databases");
        }
    }
    mf_engine *e = ctx->inst->engine;
    coll_list l = {0};
    bson_t dbs;
    mf_engine_catalog_lock(e, false);
    mf_engine_coll_each(e, collect, &l); /* in name order: one run per database */
    l.n = mfi_txn_unhidden(ctx->inst, l.v, l.n); /* less transactions' pending ones */
    BSON_APPEND_ARRAY_BEGIN(reply, "databases", &dbs);
    uint32_t out_i = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < l.n && rc == 0;) {
        const char *name = mf_coll_name(l.v[i]);
        size_t dl = strcspn(name, ".");
        size_t j = i;
        uint64_t size = 0, bytes;
        char dbname[128];
        snprintf(dbname, sizeof dbname, "%.*s", (int)dl, name);
        /* a database the user may not see is not measured either */
        bool shown = !authorized_only || mfi_authz_any_in_db(ctx, dbname);
        while (j < l.n && strncmp(mf_coll_name(l.v[j]), name, dl) == 0 &&
               mf_coll_name(l.v[j])[dl] == '.') {
            /* The pages of its trees (a walk of each: cmd_stats.c). */
            if (shown && !name_only && (rc = mf_cl_storage_bytes(e, l.v[j], &bytes, err)) == 0)
                size += bytes;
            j++;
        }
        if (!shown) {
            i = j;
            continue;
        }
        bson_t entry;
        bson_init(&entry);
        bson_append_utf8(&entry, "name", 4, name, (int)dl);
        if (!name_only) {
            BSON_APPEND_INT64(&entry, "sizeOnDisk", (int64_t)size);
            BSON_APPEND_BOOL(&entry, "empty", size == 0); /* mongod's rule */
        }
        if (!m || mf_matcher_match(m, &entry)) {
            char key[16];
            const char *k;
            mf_uint32_to_key(out_i++, &k, key, sizeof key);
            bson_append_document(&dbs, k, -1, &entry);
            total += size; /* as mongod: only the databases the filter keeps */
        }
        bson_destroy(&entry);
        i = j;
    }
    mf_engine_catalog_unlock(e);
    bson_append_array_end(reply, &dbs);
    if (!name_only) {
        BSON_APPEND_INT64(reply, "totalSize", (int64_t)total);
        BSON_APPEND_INT64(reply, "totalSizeMb", (int64_t)(total / (1024 * 1024)));
    }
    free(l.v);
    mf_matcher_free(m);
    return rc;
}

int mfi_cmd_drop_database(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    (void)cmd;
    mf_lsn lsn = 0;
    int rc = mfi_repl_check_drop_db(ctx->inst, ctx->db, err);
    if (rc)
        return rc;
    rc = mf_cl_drop_db(mfi_cl(ctx->inst), &ctx->log, ctx->db, &lsn, err);
    mfi_ctx_wrote(ctx, lsn);
    if (rc == 0) {
        /* its profiling settings go with it, as mongod's */
        mfi_profile_forget_db(ctx->inst, ctx->db);
        BSON_APPEND_UTF8(reply, "dropped", ctx->db);
    }
    return rc;
}

/* "db.coll" from a renameCollection argument, checked. */
static int full_ns(const bson_iter_t *it, const char *field, char *out, size_t cap,
                   mf_error *err)
{
    if (!BSON_ITER_HOLDS_UTF8(it))
        return mfi_type_error(err, "renameCollection", field, it, "string");
    const char *ns = bson_iter_utf8(it, NULL);
    const char *dot = strchr(ns, '.');
    if (!dot || dot == ns)
        return mf_error_set(err, MF_InvalidNamespace, "Invalid %s namespace: %s",
                            strcmp(field, "to") == 0 ? "target" : "source", ns);
    char db[128];
    snprintf(db, sizeof db, "%.*s", (int)(dot - ns), ns);
    int rc = mfi_coll_name_check(db, dot + 1, true, err);
    if (rc)
        return rc;
    snprintf(out, cap, "%s", ns);
    return 0;
}

int mfi_cmd_rename_collection(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                              mf_error *err)
{
    (void)reply;
    char from[NS_MAX + 64], to[NS_MAX + 64];
    bson_iter_t it;
    int rc;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    if ((rc = full_ns(&it, "renameCollection", from, sizeof from, err)) != 0)
        return rc;
    if (!bson_iter_init_find(&it, cmd, "to"))
        return mf_error_set(err, 40414,
                            "BSON field 'renameCollection.to' is missing but a required field");
    if ((rc = full_ns(&it, "to", to, sizeof to, err)) != 0)
        return rc;
    bool drop_target = flag_arg(cmd, "dropTarget");
    if (mfi_is_view(ctx->inst, from))
        return mf_error_set(err, MF_CommandNotSupportedOnView, "cannot rename view: %s", from);
    if (mfi_is_view(ctx->inst, to))
        return mf_error_set(err, MF_NamespaceExists, "a view already exists with that name: %s",
                            to);
    if ((rc = mfi_repl_check_write(ctx->inst, from, err)) != 0 ||
        (rc = mfi_repl_check_write(ctx->inst, to, err)) != 0)
        return rc;
    mf_lsn lsn = 0;
    rc = mf_cl_rename(mfi_cl(ctx->inst), &ctx->log, from, to, drop_target, &lsn, err);
    mfi_ctx_wrote(ctx, lsn);
    return rc;
}

/* ------------------------------- convertToCapped, cloneCollectionAsCapped */

/* The `size` of both commands, as 7.0's collection_to_capped.cpp reads it:
 * safeNumberLong (0 for a missing or non-numeric one), and 0 refused.  A
 * negative or too large one is refused later, as creating the collection
 * refuses it (mf_cl_capped_clone). */
static int capped_size_arg(const bson_t *cmd, int64_t *size, mf_error *err)
{
    bson_iter_t it;
    *size = bson_iter_init_find(&it, cmd, "size") ? mfi_safe_number_long(&it) : 0;
    return *size == 0 ? mf_error_set(err, MF_InvalidOptions, "invalid command spec") : 0;
}

int mfi_cmd_convert_to_capped(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                              mf_error *err)
{
    (void)reply;
    char ns[NS_MAX + 64], tmp[NS_MAX + 64];
    int64_t size;
    int rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err);
    if (rc == 0)
        rc = mfi_view_refuse(ctx->inst, ns, err);
    if (rc == 0)
        rc = capped_size_arg(cmd, &size, err);
    if (rc)
        return rc;
    const char *coll = ns + strlen(ctx->db) + 1;
    /* the temporary collection's name must be one too (its length) */
    snprintf(tmp, sizeof tmp, "tmpXXXXX.convertToCapped.%s", coll);
    if ((rc = mfi_coll_name_check(ctx->db, tmp, false, err)) != 0 ||
        (rc = mfi_repl_check_write(ctx->inst, ns, err)) != 0)
        return rc;
    /* the rename onto it would refuse it, after the copy (mongod's
     * renameCollection check): refused before anything is made */
    if (strcmp(coll, "system.views") == 0)
        return mf_error_set(err, MF_IllegalOperation,
                            "renaming system.views collection or renaming to system.views is "
                            "not allowed");
    mf_lsn lsn = 0;
    rc = mf_cl_capped_convert(mfi_cl(ctx->inst), &ctx->log, ns, size, &lsn, err);
    mfi_ctx_wrote(ctx, lsn);
    return rc;
}

/* NamespaceString::validCollectionName: not empty, no leading '.', no '$'. */
static bool valid_collection_name(const char *coll)
{
    return coll[0] != '\0' && coll[0] != '.' && !strchr(coll, '$');
}

int mfi_cmd_clone_collection_as_capped(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply,
                                       mf_error *err)
{
    (void)reply;
    bson_iter_t it, to_it;
    int64_t size;
    int rc;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    bool has_to = bson_iter_init_find(&to_it, cmd, "toCollection");
    /* as mongod checks them: the target (its auth check), then the source */
    if (!has_to || !BSON_ITER_HOLDS_UTF8(&to_it))
        return mf_error_set(err, MF_TypeMismatch, "'toCollection' must be of type String");
    const char *to = bson_iter_utf8(&to_it, NULL);
    if (to[0] == '\0')
        return mf_error_set(err, MF_InvalidNamespace, "Invalid target namespace: %s.", ctx->db);
    if (!BSON_ITER_HOLDS_UTF8(&it))
        return mf_error_set(err, MF_TypeMismatch,
                            "'cloneCollectionAsCapped' must be of type String");
    const char *from = bson_iter_utf8(&it, NULL);
    if (!valid_collection_name(from))
        return mf_error_set(err, MF_InvalidNamespace, "Invalid source collection name: %s",
                            from);
    if (!valid_collection_name(to))
        return mf_error_set(err, MF_InvalidNamespace, "Invalid target collection name: %s", to);
    if ((rc = capped_size_arg(cmd, &size, err)) != 0)
        return rc;
    bool temp = bson_iter_init_find(&it, cmd, "temp") && bson_iter_as_bool(&it);
    char from_ns[NS_MAX + 64], to_ns[NS_MAX + 64];
    snprintf(from_ns, sizeof from_ns, "%s.%s", ctx->db, from);
    snprintf(to_ns, sizeof to_ns, "%s.%s", ctx->db, to);
    if (mfi_is_view(ctx->inst, from_ns))
        return mf_error_set(err, MF_CommandNotSupportedOnView,
                            "cloneCollectionAsCapped not supported for views: %s", from_ns);
    if (ctx->dbg)
        snprintf(ctx->dbg->ns, sizeof ctx->dbg->ns, "%s", from_ns);
    /* what creating the target checks (userAllowedCreateNS) */
    if ((rc = mfi_coll_name_check(ctx->db, to, true, err)) != 0 ||
        (rc = mfi_repl_check_write(ctx->inst, to_ns, err)) != 0)
        return rc;
    mf_lsn lsn = 0;
    rc = mf_cl_capped_clone(mfi_cl(ctx->inst), &ctx->log, from_ns, to_ns, size, temp, &lsn,
                            err);
    mfi_ctx_wrote(ctx, lsn);
    return rc;
}
