/*
 * cmd_index.c -- createIndexes, listIndexes, dropIndexes, collMod (index
 * options).  The builds, the cleanup of interrupted builds and the TTL
 * pass are the collection layer's (coll/index_build.c, coll/ttl.c); the
 * thread that runs the TTL pass is monitor.c's.
 */
#include "command_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---------------------------------------------------------- createIndexes */

/* The hangIndexBuildBeforeCommit fail point's moment (cmd_failpoint.c). */
static int hang_before_commit(void *arg, mf_error *err)
{
    return mfi_hang_index_build(arg, err);
}

int mfi_cmd_create_indexes(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    bson_iter_t it, specs;
    bool has_specs = false;
    int rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err);
    if (rc == 0)
        rc = mfi_view_refuse(ctx->inst, ns, err);
    if (rc)
        return rc;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "indexes") == 0) {
            if (!BSON_ITER_HOLDS_ARRAY(&it))
                return mfi_type_error(err, "createIndexes", k, &it, "array");
            specs = it;
            has_specs = true;
        } else if (strcmp(k, "commitQuorum") != 0 && strcmp(k, "ignoreUnknownIndexOptions") != 0 &&
                   strcmp(k, "isTimeseriesNamespace") != 0 && !mfi_is_generic_arg(k)) {
            return mf_error_set(err, 40415, "BSON field 'createIndexes.%s' is an unknown field.",
                                k);
        }
    }
    if (!has_specs)
        return mf_error_set(err, 40414,
                            "BSON field 'createIndexes.indexes' is missing but a required field");

    /* Every spec checked before anything is built. */
    bson_t *norm = NULL;
    size_t nspec = 0;
    bson_iter_t el;
    bson_iter_recurse(&specs, &el);
    while (bson_iter_next(&el))
        nspec++;
    if (nspec == 0)
        return mf_error_set(err, MF_BadValue, "Must specify at least one index to create");
    /* The collection's default collation, given to specs without one (a
     * collection created here implicitly has none). */
    mf_collator *dflt = NULL;
    if ((rc = mf_cl_collation_of_ns(e, ns, false, NULL, &dflt, err)) != 0)
        return rc;
    if (posix_memalign((void **)&norm, 128, nspec * sizeof *norm) != 0) {
        mf_collator_unref(dflt);
        return mf_error_oom(err);
    }
    size_t ok = 0;
    bson_iter_recurse(&specs, &el);
    while (rc == 0 && bson_iter_next(&el)) {
        bson_t in;
        if (!mfi_doc_arg(&el, &in)) {
            rc = mf_error_set(err, MF_TypeMismatch,
                              "The elements of the 'indexes' array must be objects, but got %s",
                              mf_bsonx_type_alias(bson_iter_type(&el)));
            break;
        }
        rc = mf_index_spec_normalize_coll(&in, dflt, &norm[ok], err);
        if (rc == 0)
            ok++;
        else
            bson_destroy(&norm[ok]);
    }
    mf_collator_unref(dflt);

    mf_coll *c = NULL;
    bool created = false;
    if (rc == 0) {
        mf_engine_catalog_lock(e, false);
        created = mf_engine_coll(e, ns) == NULL;
        mf_engine_catalog_unlock(e);
        /* in a transaction, only on a collection it creates */
        if (!created && !mfi_txn_created(ctx, ns))
            rc = mf_error_set(err, MF_OperationNotSupportedInTransaction,
                              "Cannot create new indexes on existing collection %s in a "
                              "multi-document transaction.",
                              ns);
        if (rc == 0)
            rc = mfi_coll_for_write(ctx, ns, &c, err);
    }
    if (rc) {
        for (size_t i = 0; i < ok; i++)
            bson_destroy(&norm[i]);
        free(norm);
        return rc;
    }
    mf_coll_lock(c, true);
    size_t before = mf_coll_index_count(c), fresh = 0;
    mf_lsn lsn = 0;
    char tmp[4096];
    mfi_tmpdir_of(ctx->inst, tmp, sizeof tmp);
    mf_cl_build o = {
        .sort_bytes = (size_t)atomic_load(&ctx->inst->index_build_max_mb) << 20,
        .tmpdir = tmp,
        .deadline = &ctx->deadline,
        .before_commit = hang_before_commit,
        .arg = ctx,
    };
    rc = mf_cl_index_build(mfi_cl(ctx->inst), &ctx->log, c, ns, norm, nspec, &o, &fresh, &lsn,
                           err);
    size_t after = mf_coll_index_count(c);
    mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    for (size_t i = 0; i < ok; i++)
        bson_destroy(&norm[i]);
    free(norm);
    mfi_ctx_wrote(ctx, lsn); /* the dispatcher syncs before the reply */
    if (rc)
        return rc;
    BSON_APPEND_INT32(reply, "numIndexesBefore", (int32_t)before);
    BSON_APPEND_INT32(reply, "numIndexesAfter", (int32_t)after);
    if (fresh == 0)
        BSON_APPEND_UTF8(reply, "note", "all indexes already exist");
    else
        BSON_APPEND_BOOL(reply, "createdCollectionAutomatically", created);
    return 0;
}

/* ------------------------------------------------------------ listIndexes */

int mfi_cmd_list_indexes(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    bson_iter_t it, cit;
    int64_t batch_size = -1;
    int rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err);
    if (rc == 0)
        rc = mfi_view_refuse(ctx->inst, ns, err);
    if (rc)
        return rc;
    if (bson_iter_init_find(&it, cmd, "cursor")) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&it))
            return mfi_type_error(err, "listIndexes", "cursor", &it, "object");
        bson_iter_recurse(&it, &cit);
        if (bson_iter_find(&cit, "batchSize") &&
            (!mfi_as_int64(&cit, &batch_size) || batch_size < 0))
            return mf_error_set(err, MF_BadValue, "batchSize must be a non-negative number");
    }
    bson_t *docs = bson_new();
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c) {
        mf_engine_catalog_unlock(e);
        bson_destroy(docs);
        return mf_error_set(err, MF_NamespaceNotFound, "ns does not exist: %s", ns);
    }
    mf_coll_lock(c, false);
    uint32_t n = 0;
    bson_t clustered;
    bool is_clustered = mf_cl_clustered(c, &clustered);
    for (size_t i = 0; i < mf_coll_index_count(c); i++) {
        const mf_index_info *info = mf_coll_index(c, i);
        bson_t pub;
        char key[16];
        const char *k;
        /* A clustered collection shows its clustered index for "_id_"
         * (coll_options.c). */
        if (is_clustered && strcmp(info->name, "_id_") == 0)
            mf_cl_clustered_list_spec(c, &clustered, &pub);
        else
            mf_cl_index_public_spec(info->spec, info->spec_len, &pub);
        mf_uint32_to_key(n++, &k, key, sizeof key);
        bson_append_document(docs, k, -1, &pub);
        bson_destroy(&pub);
    }
    mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    /* The cursor is the collection's, as mongod 5.0 and later register it
     * (list_indexes.cpp): its reply's ns is "db.coll", and getMore names
     * the collection. */
    return mfi_cursor_reply_from_docs(ctx, ns, docs, batch_size, reply, err);
}

/* ------------------------------------------------------------ dropIndexes */

/* The name of the index of `c` whose key pattern is `key`, or NULL;
 * `*count`: how many have it (indexes that differ only in collation
 * share a key pattern), `first`/`second` (may be NULL): the first two
 * matches' specs as listIndexes shows them (initialised here when given;
 * the caller destroys them). */
static const char *index_by_key(mf_coll *c, const bson_t *key, int *count, bson_t *first,
                                bson_t *second)
{
    const char *found = NULL;
    *count = 0;
    if (first)
        bson_init(first);
    if (second)
        bson_init(second);
    for (size_t i = 0; i < mf_coll_index_count(c); i++) {
        const mf_index_info *info = mf_coll_index(c, i);
        bson_t s, k;
        bson_iter_t it;
        if (bson_init_static(&s, info->spec, info->spec_len) &&
            bson_iter_init_find(&it, &s, "key") && mfi_doc_arg(&it, &k) &&
            k.len == key->len && memcmp(bson_get_data(&k), bson_get_data(key), k.len) == 0) {
            bson_t *keep = *count == 0 ? first : *count == 1 ? second : NULL;
            if (keep) {
                bson_destroy(keep);
                mf_cl_index_public_spec(info->spec, info->spec_len, keep);
            }
            if (!found)
                found = info->name;
            (*count)++;
        }
    }
    return found;
}

int mfi_cmd_drop_indexes(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    bson_iter_t it, which;
    bool has_which = false;
    int rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err);
    if (rc == 0)
        rc = mfi_view_refuse(ctx->inst, ns, err);
    if (rc)
        return rc;
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "index") == 0) {
            which = it;
            has_which = true;
        } else if (!mfi_is_generic_arg(k)) {
            return mf_error_set(err, 40415, "BSON field 'dropIndexes.%s' is an unknown field.", k);
        }
    }
    if (!has_which)
        return mf_error_set(err, 40414,
                            "BSON field 'dropIndexes.index' is missing but a required field");
    if (!BSON_ITER_HOLDS_UTF8(&which) && !BSON_ITER_HOLDS_DOCUMENT(&which) &&
        !BSON_ITER_HOLDS_ARRAY(&which))
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field 'dropIndexes.index' is the wrong type '%s', expected "
                            "types '[string, object, array]'",
                            mf_bsonx_type_alias(bson_iter_type(&which)));
    mf_engine_catalog_lock(e, false);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c) {
        mf_engine_catalog_unlock(e);
        return mf_error_set(err, MF_NamespaceNotFound, "ns not found %s", ns);
    }
    mf_coll_lock(c, true);
    size_t was = mf_coll_index_count(c);
    mf_lsn lsn = 0;
    bson_t clustered;
    const char *cname = mf_cl_clustered(c, &clustered) ? mf_cl_clustered_name(&clustered) : NULL;
    /* The names to drop, checked before any is dropped. */
    char **names = calloc(was + 1, sizeof *names);
    size_t nn = 0;
    bool all = false;
    if (!names) {
        rc = mf_error_oom(err);
    } else if (BSON_ITER_HOLDS_UTF8(&which) && strcmp(bson_iter_utf8(&which, NULL), "*") == 0) {
        all = true;
        for (size_t i = 0; i < was; i++)
            if (strcmp(mf_coll_index(c, i)->name, "_id_") != 0)
                names[nn++] = strdup(mf_coll_index(c, i)->name);
    } else if (BSON_ITER_HOLDS_DOCUMENT(&which)) {
        bson_t key, one, two;
        int count;
        mfi_doc_arg(&which, &key);
        const char *name = index_by_key(c, &key, &count, &one, &two);
        char shown[512], s1[512], s2[512];
        mf_bsonx_to_string(&key, shown, sizeof shown);
        mf_bsonx_to_string(&one, s1, sizeof s1);
        mf_bsonx_to_string(&two, s2, sizeof s2);
        bson_destroy(&one);
        bson_destroy(&two);
        if (!name)
            rc = mf_error_set(err, MF_IndexNotFound, "can't find index with key: %s", shown);
        else if (count > 1)
            rc = mf_error_set(err, MF_AmbiguousIndexKeyPattern,
                              "%d indexes found for key: %s, identify by name instead. "
                              "Conflicting indexes: %s, %s",
                              count, shown, s1, s2);
        else if (cname && strcmp(name, "_id_") == 0)
            rc = mf_error_set(err, 5979800, "It is illegal to drop the clusteredIndex");
        else if (strcmp(name, "_id_") == 0)
            rc = mf_error_set(err, MF_InvalidOptions, "cannot drop _id index");
        else
            names[nn++] = strdup(name);
    } else {
        bson_iter_t el;
        bool single = BSON_ITER_HOLDS_UTF8(&which);
        if (!single)
            bson_iter_recurse(&which, &el);
        while (rc == 0 && (single || bson_iter_next(&el))) {
            const bson_iter_t *v = single ? &which : &el;
            single = false;
            if (!BSON_ITER_HOLDS_UTF8(v)) {
                rc = mf_error_set(err, MF_TypeMismatch,
                                  "dropIndexes 'index' elements must be strings");
                break;
            }
            const char *name = bson_iter_utf8(v, NULL);
            bool exists = false;
            for (size_t i = 0; i < was; i++)
                exists |= strcmp(mf_coll_index(c, i)->name, name) == 0;
            if (cname && strcmp(name, "*") != 0 && strcmp(name, cname) == 0)
                rc = mf_error_set(err, 5979800, "It is illegal to drop the clusteredIndex");
            else if (cname && strcmp(name, "_id_") == 0) /* the internal _id index */
                rc = mf_error_set(err, MF_IndexNotFound, "index not found with name [%s]", name);
            else if (strcmp(name, "_id_") == 0)
                rc = mf_error_set(err, MF_InvalidOptions, "cannot drop _id index");
            else if (!exists)
                rc = mf_error_set(err, MF_IndexNotFound, "index not found with name [%s]", name);
            else if (nn < was)
                names[nn++] = strdup(name);
            if (!BSON_ITER_HOLDS_ARRAY(&which))
                break;
        }
    }
    for (size_t i = 0; rc == 0 && i < nn; i++) {
        rc = mf_cl_index_drop(e, &ctx->log, c, names[i], &lsn, err);
        if (rc == 0)
            mf_cl_usage_forget(mfi_cl(ctx->inst), ns, names[i]);
    }
    mf_coll_unlock(c);
    mf_engine_catalog_unlock(e);
    for (size_t i = 0; names && i < nn; i++)
        free(names[i]);
    free(names);
    mfi_ctx_wrote(ctx, lsn);
    if (rc)
        return rc;
    BSON_APPEND_INT32(reply, "nIndexesWas", (int32_t)was);
    if (all)
        BSON_APPEND_UTF8(reply, "msg", "non-_id indexes dropped for collection");
    return 0;
}

/* ---------------------------------------------------------------- collMod */

/* What collMod's `index` asks of one index. */
typedef struct index_mod {
    const char *name;
    bool has_ttl, has_hidden, has_prepare_unique, has_unique;
    bool hidden, prepare_unique, unique;
    int64_t ttl;
} index_mod;

/* mongod's safeBool: a bool or a number, read as its truth. */
static int safe_bool_opt(const bson_iter_t *it, const char *field, bool *out, mf_error *err)
{
    if (!BSON_ITER_HOLDS_BOOL(it) && !mfi_is_number(it))
        return mf_error_set(err, MF_TypeMismatch,
                            "BSON field 'collMod.index.%s' is the wrong type '%s', expected types "
                            "'[bool, long, int, decimal, double]'",
                            field, mf_bsonx_type_alias(bson_iter_type(it)));
    *out = bson_iter_as_bool(it);
    return 0;
}

/* Parse collMod's `index` document and find its index in `c` (catalog
 * lock held), in mongod's order of checks. */
static int parse_index_mod(mf_coll *c, const char *ns, const bson_t *index, index_mod *m,
                           mf_error *err)
{
    bson_iter_t opt;
    bson_t key;
    bool has_key = false;
    int rc = 0;
    memset(m, 0, sizeof *m);
    bson_iter_init(&opt, index);
    while (rc == 0 && bson_iter_next(&opt)) {
        const char *k = bson_iter_key(&opt);
        if (strcmp(k, "keyPattern") == 0) {
            if (!mfi_doc_arg(&opt, &key))
                return mfi_type_error(err, "collMod.index", k, &opt, "object");
            has_key = true;
        } else if (strcmp(k, "name") == 0) {
            if (!BSON_ITER_HOLDS_UTF8(&opt))
                return mfi_type_error(err, "collMod.index", k, &opt, "string");
            m->name = bson_iter_utf8(&opt, NULL);
        } else if (strcmp(k, "expireAfterSeconds") == 0) {
            /* mongod's collMod: any number, truncated (a safeInt64), then
             * validateExpireAfterSeconds, its failures as InvalidOptions
             * (coll_mod.cpp). */
            int conv = mf_bsonx_number_to_int64(&opt, &m->ttl);
            if (conv == 1 && !mfi_is_number(&opt))
                return mfi_type_error(err, "collMod.index", k, &opt, "long");
            if (conv == 0 && m->ttl < 0)
                rc = mf_error_set(err, MF_InvalidOptions,
                                  "TTL index 'expireAfterSeconds' option cannot be less than 0.");
            else if (conv != 0 || m->ttl > INT32_MAX)
                rc = mf_error_set(err, MF_InvalidOptions,
                                  "TTL index 'expireAfterSeconds' option must be within an "
                                  "acceptable range, try a lower number");
            m->has_ttl = true;
        } else if (strcmp(k, "hidden") == 0) {
            rc = safe_bool_opt(&opt, k, &m->hidden, err); /* a safeBool, as prepareUnique */
            m->has_hidden = true;
        } else if (strcmp(k, "prepareUnique") == 0) {
            rc = safe_bool_opt(&opt, k, &m->prepare_unique, err);
            m->has_prepare_unique = true;
        } else if (strcmp(k, "unique") == 0) {
            rc = safe_bool_opt(&opt, k, &m->unique, err);
            m->has_unique = true;
        } else {
            rc = mf_error_set(err, 40415, "BSON field 'collMod.index.%s' is an unknown field.", k);
        }
    }
    if (rc)
        return rc;
    if (m->name && has_key)
        return mf_error_set(err, MF_InvalidOptions, "Cannot specify both key pattern and name.");
    if (!m->name && !has_key)
        return mf_error_set(err, MF_InvalidOptions,
                            "Must specify either index name or key pattern.");
    if (!m->has_ttl && !m->has_hidden && !m->has_unique && !m->has_prepare_unique)
        return mf_error_set(err, MF_InvalidOptions,
                            "no expireAfterSeconds, hidden, unique, or prepareUnique field");
    bson_t clustered;
    if (m->has_hidden && mf_cl_clustered(c, &clustered)) {
        const char *cname = mf_cl_clustered_name(&clustered);
        bson_iter_t ck;
        bson_t ckey;
        bool same_key = has_key && bson_iter_init_find(&ck, &clustered, "key") &&
                        mfi_doc_arg(&ck, &ckey) && ckey.len == key.len &&
                        memcmp(bson_get_data(&ckey), bson_get_data(&key), key.len) == 0;
        if ((m->name && strcmp(m->name, cname) == 0) || same_key)
            return mf_error_set(err, 6011800,
                                "The 'hidden' option is not supported for a clusteredIndex");
    }
    mf_coll_lock(c, false);
    if (m->name) {
        bool exists = false;
        for (size_t i = 0; i < mf_coll_index_count(c); i++)
            exists |= strcmp(mf_coll_index(c, i)->name, m->name) == 0;
        if (!exists)
            rc = mf_error_set(err, MF_IndexNotFound, "cannot find index %s for ns %s", m->name,
                              ns);
    } else {
        bson_t one, two;
        char shown[512], s1[512], s2[512];
        int count;
        m->name = index_by_key(c, &key, &count, &one, &two);
        mf_bsonx_to_string(&key, shown, sizeof shown);
        mf_bsonx_to_string(&one, s1, sizeof s1);
        mf_bsonx_to_string(&two, s2, sizeof s2);
        bson_destroy(&one);
        bson_destroy(&two);
        if (!m->name)
            rc = mf_error_set(err, MF_IndexNotFound, "cannot find index %s for ns %s", shown, ns);
        else if (count > 1)
            rc = mf_error_set(err, MF_AmbiguousIndexKeyPattern,
                              "index keyPattern %s matches %d indexes, must use index name. "
                              "Conflicting indexes:%s, %s",
                              shown, count, s1, s2);
    }
    mf_coll_unlock(c);
    return rc;
}

/* The _id of the record `rid` of `c`, appended to `ids` under `key`. */
static int append_record_id(mf_engine *e, mf_coll *c, const uint8_t rid[8], bson_t *ids,
                            const char *key, mf_error *err)
{
    bool found;
    bson_t doc;
    bson_iter_t id;
    int rc = mf_cl_record_doc(e, c, rid, &doc, &found, err);
    if (rc)
        return rc;
    if (!found || !bson_iter_init_find(&id, &doc, "_id"))
        return mf_error_set(err, MF_DataCorruption,
                            "index entry of %s names a record without an _id", mf_coll_name(c));
    mf_bsonx_append_iter(ids, key, -1, &id);
    return 0;
}

/* Every group of records sharing a key in the non-unique index `x`, as
 * mongod's scanIndexForDuplicates reports them: `violations` gets
 * [{ids: [<_id>, ...]}, ...] in key order.  Entries are key + RecordId, so
 * a group is a run of entries whose keys agree but for the last 8 bytes. */
static int find_duplicates(mf_engine *e, mf_coll *c, const mf_index_desc *x, bson_t *violations,
                           uint32_t *nviolations, mf_error *err)
{
    mf_cursor cur;
    bool valid;
    mf_buf prev = {0};
    uint8_t prev_rid[8];
    bool has_prev = false, in_group = false;
    bson_t group, ids;
    uint32_t nids = 0;
    int rc;
    *nviolations = 0;
    mf_cursor_init(&cur, mf_engine_tree(e, x->tree));
    rc = mf_cursor_first(&cur, &valid, err);
    while (rc == 0 && valid) {
        const uint8_t *k;
        size_t kl;
        mf_cursor_key(&cur, &k, &kl);
        if (kl < 8) {
            rc = mf_error_set(err, MF_DataCorruption, "index %s has a short key", x->name);
            break;
        }
        bool same = has_prev && prev.len == kl - 8 && memcmp(prev.data, k, kl - 8) == 0;
        char idx[16];
        const char *ik;
        if (same && !in_group) {
            mf_uint32_to_key((*nviolations)++, &ik, idx, sizeof idx);
            bson_append_document_begin(violations, ik, -1, &group);
            bson_append_array_begin(&group, "ids", -1, &ids);
            nids = 0;
            mf_uint32_to_key(nids++, &ik, idx, sizeof idx);
            rc = append_record_id(e, c, prev_rid, &ids, ik, err);
            in_group = true;
        } else if (!same && in_group) {
            bson_append_array_end(&group, &ids);
            bson_append_document_end(violations, &group);
            in_group = false;
        }
        if (rc == 0 && same) {
            mf_uint32_to_key(nids++, &ik, idx, sizeof idx);
            rc = append_record_id(e, c, k + kl - 8, &ids, ik, err);
        }
        if (rc)
            break;
        prev.len = 0;
        if (mf_buf_append(&prev, k, kl - 8) != 0) {
            rc = mf_error_oom(err);
            break;
        }
        memcpy(prev_rid, k + kl - 8, 8);
        has_prev = true;
        rc = mf_cursor_next(&cur, &valid, err);
    }
    if (in_group) {
        bson_append_array_end(&group, &ids);
        bson_append_document_end(violations, &group);
    }
    mf_buf_free(&prev);
    return rc;
}

/* Make the non-unique index `name` of `c` unique (collection lock held
 * exclusively): refused with CannotConvertIndexToUnique (359) and the
 * violations in `ctx->err_info` when records share a key; else the index is
 * rebuilt in the unique layout (key -> RecordId) under the same name, its
 * spec with unique: true and without prepareUnique. */
static int convert_to_unique(mf_cmd_ctx *ctx, mf_coll *c, const char *name, mf_lsn *lsn,
                             mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    mf_cl_indexes ix;
    int rc = mf_cl_indexes_load(c, &ix, err);
    if (rc)
        return rc;
    mf_index_desc *x = mf_cl_indexes_find(&ix, name);
    bson_t violations = BSON_INITIALIZER, spec = BSON_INITIALIZER, s;
    uint32_t nviol = 0;
    if (!x)
        rc = mf_error_set(err, MF_IndexNotFound, "index %s vanished", name);
    else
        rc = find_duplicates(e, c, x, &violations, &nviol, err);
    if (rc == 0 && nviol > 0) {
        if (ctx->err_info)
            BSON_APPEND_ARRAY(ctx->err_info, "violations", &violations);
        rc = mf_error_set(err, MF_CannotConvertIndexToUnique,
                          "Cannot convert the index to unique. Please resolve conflicting "
                          "documents before running collMod again.");
    }
    const mf_index_info *info = NULL;
    for (size_t i = 0; rc == 0 && i < mf_coll_index_count(c); i++)
        if (strcmp(mf_coll_index(c, i)->name, name) == 0)
            info = mf_coll_index(c, i);
    if (rc == 0 && (!info || !bson_init_static(&s, info->spec, info->spec_len)))
        rc = mf_error_set(err, MF_IndexNotFound, "index %s vanished", name);
    if (rc == 0) {
        /* durable_catalog's unique update: the spec's fields, then unique */
        bson_copy_to_excluding_noinit(&s, &spec, "unique", "prepareUnique", "building", NULL);
        BSON_APPEND_BOOL(&spec, "unique", true);
        BSON_APPEND_BOOL(&spec, "building", true);
    }
    char *keep = rc == 0 ? strdup(name) : NULL;
    if (rc == 0 && !keep)
        rc = mf_error_oom(err);
    mf_cl_indexes_free(&ix);
    /* Drop and build again, both under the exclusive lock: no write sees
     * the index missing. */
    char tmp[4096];
    mfi_tmpdir_of(ctx->inst, tmp, sizeof tmp);
    mf_cl_build o = {.sort_bytes = (size_t)atomic_load(&ctx->inst->index_build_max_mb) << 20,
                     .tmpdir = tmp};
    if (rc == 0)
        rc = mf_cl_index_rebuild(e, c, keep, &spec, &o, lsn, err);
    free(keep);
    bson_destroy(&spec);
    bson_destroy(&violations);
    return rc;
}

/* Apply `m` to its index (collection lock held exclusively); the reply
 * gets mongod's *_old / *_new fields for what changed. */
static int apply_index_mod(mf_cmd_ctx *ctx, mf_coll *c, const char *ns, const index_mod *m,
                           bson_t *reply, mf_lsn *lsn, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    const mf_index_info *info = NULL;
    bson_t s, out = BSON_INITIALIZER;
    bson_iter_t old;
    int rc = 0;
    for (size_t i = 0; i < mf_coll_index_count(c); i++)
        if (strcmp(mf_coll_index(c, i)->name, m->name) == 0)
            info = mf_coll_index(c, i);
    if (!info || !bson_init_static(&s, info->spec, info->spec_len))
        return mf_error_set(err, MF_IndexNotFound, "cannot find index %s for ns %s", m->name, ns);
    bool is_id = strcmp(m->name, "_id_") == 0;
    bool old_hidden = bson_iter_init_find(&old, &s, "hidden") && bson_iter_as_bool(&old);
    bool had_ttl = bson_iter_init_find(&old, &s, "expireAfterSeconds");
    int64_t old_ttl = had_ttl ? bson_iter_as_int64(&old) : 0;
    bool old_unique = is_id || (bson_iter_init_find(&old, &s, "unique") && bson_iter_as_bool(&old));
    bool old_prepare = bson_iter_init_find(&old, &s, "prepareUnique") && bson_iter_as_bool(&old);
    if (m->has_ttl && is_id)
        return mf_error_set(err, MF_InvalidOptions, "the _id field does not support TTL indexes");
    bson_t key;
    if (m->has_ttl && !had_ttl && bson_iter_init_find(&old, &s, "key") && mfi_doc_arg(&old, &key) &&
        bson_count_keys(&key) > 1) /* a conversion: as createIndexes, one field (coll_mod.cpp) */
        return mf_error_set(err, MF_InvalidOptions,
                            "TTL indexes are single-field indexes, compound indexes do not "
                            "support TTL. Index: %s",
                            m->name);
    if (m->has_unique && !m->unique)
        return mf_error_set(err, MF_BadValue, "Cannot make index non-unique");
    bool make_unique = m->has_unique && !old_unique;
    if (make_unique && !old_prepare)
        return mf_error_set(err, MF_InvalidOptions,
                            "Cannot make index unique with 'prepareUnique=false'. Run collMod to "
                            "set it first.");
    if (m->has_hidden && is_id)
        return mf_error_set(err, MF_BadValue, "can't hide _id index");
    bool new_hidden = m->has_hidden && m->hidden != old_hidden;
    bool new_prepare = m->has_prepare_unique && m->prepare_unique != old_prepare && !old_unique;
    bson_copy_to_excluding_noinit(&s, &out, m->has_ttl ? "expireAfterSeconds" : "",
                                  new_hidden ? "hidden" : "",
                                  new_prepare ? "prepareUnique" : "", NULL);
    if (m->has_ttl)
        BSON_APPEND_INT64(&out, "expireAfterSeconds", m->ttl);
    if (new_hidden && m->hidden)
        BSON_APPEND_BOOL(&out, "hidden", true);
    if (new_prepare && m->prepare_unique)
        BSON_APPEND_BOOL(&out, "prepareUnique", true);
    if (m->has_ttl || new_hidden || new_prepare)
        rc = mf_coll_index_set_spec(e, c, m->name, bson_get_data(&out), out.len, NULL, lsn, err);
    bson_destroy(&out);
    if (rc == 0 && make_unique)
        rc = convert_to_unique(ctx, c, m->name, lsn, err);
    if (rc)
        return rc;
    if (m->has_ttl) {
        if (had_ttl)
            BSON_APPEND_INT64(reply, "expireAfterSeconds_old", old_ttl);
        BSON_APPEND_INT64(reply, "expireAfterSeconds_new", m->ttl);
    }
    if (new_hidden) {
        BSON_APPEND_BOOL(reply, "hidden_old", old_hidden);
        BSON_APPEND_BOOL(reply, "hidden_new", m->hidden);
    }
    if (make_unique)
        BSON_APPEND_BOOL(reply, "unique_new", true);
    if (new_prepare) {
        BSON_APPEND_BOOL(reply, "prepareUnique_old", old_prepare);
        BSON_APPEND_BOOL(reply, "prepareUnique_new", m->prepare_unique);
    }
    return 0;
}

/* collectionOptions_old of collMod's entry: {uuid, <options>} of `c`. */
static void options_before(mf_coll *c, bson_t *out)
{
    uint8_t ui[16];
    bson_t opts;
    bson_init(out);
    if (mf_cl_uuid(c, ui))
        bson_append_binary(out, "uuid", 4, BSON_SUBTYPE_UUID, ui, 16);
    if (mf_cl_options_of(c, &opts))
        bson_concat(out, &opts);
}

/* Copy reply field `from` (apply_index_mod's *_old / *_new) to `out` as
 * `to`, if the reply has it. */
static void mod_field(const bson_t *reply, const char *from, bson_t *out, const char *to)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, reply, from))
        mf_bsonx_append_iter(out, to, (int)strlen(to), &it);
}

/* Log collMod as mongod does, {collMod: <coll>, <its fields>, index:
 * {name, <what changed>}} with o2 {collectionOptions_old,
 * indexOptions_old}, once its changes are made: an engine write of its own
 * (catalog lock held). */
static int log_coll_mod(mf_cmd_ctx *ctx, mf_coll *c, const char *ns, const bson_t *cmd,
                        const char *index_name, const bson_t *before, const bson_t *reply,
                        mf_lsn *lsn, mf_error *err)
{
    mf_cl_ddl d;
    mf_cl_ddl_init(&d, &ctx->log, ns);
    if (!d.logged)
        return 0;
    bson_t o = BSON_INITIALIZER, o2 = BSON_INITIALIZER, x;
    bson_iter_t it;
    uint8_t ui[16];
    BSON_APPEND_UTF8(&o, "collMod", strchr(ns, '.') + 1);
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (mfi_is_generic_arg(k))
            continue;
        if (strcmp(k, "index") != 0) {
            mf_bsonx_append_iter(&o, NULL, 0, &it);
            continue;
        }
        BSON_APPEND_DOCUMENT_BEGIN(&o, "index", &x);
        BSON_APPEND_UTF8(&x, "name", index_name);
        mod_field(reply, "expireAfterSeconds_new", &x, "expireAfterSeconds");
        mod_field(reply, "hidden_new", &x, "hidden");
        mod_field(reply, "unique_new", &x, "unique");
        mod_field(reply, "prepareUnique_new", &x, "prepareUnique");
        bson_append_document_end(&o, &x);
    }
    BSON_APPEND_DOCUMENT(&o2, "collectionOptions_old", before);
    if (index_name) {
        BSON_APPEND_DOCUMENT_BEGIN(&o2, "indexOptions_old", &x);
        mod_field(reply, "expireAfterSeconds_old", &x, "expireAfterSeconds");
        mod_field(reply, "hidden_old", &x, "hidden");
        mod_field(reply, "prepareUnique_old", &x, "prepareUnique");
        bson_append_document_end(&o2, &x);
    }
    int rc = mf_cl_ddl_add(&d, ns, mf_cl_uuid(c, ui) ? ui : NULL, &o, &o2, err);
    if (rc == 0)
        rc = mf_cl_ddl_write(&d, ctx->inst->engine, lsn, err);
    mf_cl_ddl_end(&d, false); /* (after the write, nothing is left) */
    bson_destroy(&o);
    bson_destroy(&o2);
    return rc;
}

/* collMod's validator, validationLevel, validationAction (exclusive
 * catalog lock).  mongod's setValidator, setValidationLevel and
 * setValidationAction each store a level and an action, the defaults
 * where none was set; a new validator is parsed under the collection's
 * default collation, its errors prefixed as mongod prefixes them. */
static int coll_mod_validation(mf_engine *e, mf_coll *c, const char *ns, mfi_validation_opts *val,
                               mf_lsn *lsn, mf_error *err)
{
    bson_t opts, changes = BSON_INITIALIZER;
    bson_iter_t it;
    /* what is not given stays as it was */
    if (mf_cl_options_of(c, &opts)) {
        if (!val->level && bson_iter_init_find(&it, &opts, "validationLevel") &&
            BSON_ITER_HOLDS_UTF8(&it))
            val->level = strcmp(bson_iter_utf8(&it, NULL), "off") == 0        ? "off"
                         : strcmp(bson_iter_utf8(&it, NULL), "moderate") == 0 ? "moderate"
                                                                              : "strict";
        if (!val->action && bson_iter_init_find(&it, &opts, "validationAction") &&
            BSON_ITER_HOLDS_UTF8(&it))
            val->action = strcmp(bson_iter_utf8(&it, NULL), "warn") == 0 ? "warn" : "error";
    }
    int rc = 0;
    if (val->has_validator) {
        mf_collator *coll = NULL;
        rc = mf_cl_default_collation(c, &coll, err);
        if (rc == 0 && (rc = mfi_check_validator(ns, &val->validator, coll, err)) != 0) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            mf_error_set(err, rc, "Parsing of collection validator failed :: caused by :: %s",
                         msg);
        }
        mf_collator_unref(coll);
    }
    if (rc == 0) {
        mfi_append_validation(val, true, &changes);
        rc = mf_cl_change_options(e, c, &changes, lsn, err);
    }
    bson_destroy(&changes);
    return rc;
}

int mfi_cmd_coll_mod(mf_cmd_ctx *ctx, const bson_t *cmd, bson_t *reply, mf_error *err)
{
    mf_engine *e = ctx->inst->engine;
    char ns[MF_MAX_NS_LEN + 1];
    bson_iter_t it;
    bson_t index;
    bool has_index = false, has_images = false, images = false;
    mfi_validation_opts val = {0};
    bool has_val = false;
    int rc = mfi_coll_arg(ctx, cmd, ns, sizeof ns, err);
    if (rc)
        return rc;
    if (mfi_is_view(ctx->inst, ns))
        return mfi_view_modify(ctx, ns, cmd, err);
    /* a view's options on a collection (pipeline checked first, as mongod) */
    bson_iter_t probe;
    if (bson_iter_init_find(&probe, cmd, "pipeline") || bson_iter_init_find(&probe, cmd, "viewOn"))
        return mf_error_set(err, MF_InvalidOptions, "option only supported on a view: %s",
                            bson_iter_key(&probe));
    bson_iter_init(&it, cmd);
    bson_iter_next(&it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "index") == 0) {
            if (!(has_index = mfi_doc_arg(&it, &index)))
                return mfi_type_error(err, "collMod", k, &it, "object");
        } else if (strcmp(k, "changeStreamPreAndPostImages") == 0) {
            if ((rc = mfi_parse_pre_post_images(&it, "collMod", &images, err)) != 0)
                return rc;
            has_images = true;
        } else if (mfi_is_generic_arg(k)) {
        } else if (strcmp(k, "validator") == 0 || strcmp(k, "validationLevel") == 0 ||
                   strcmp(k, "validationAction") == 0) {
            if ((rc = mfi_parse_validation_opt(&it, "collMod", &val, err)) != 0)
                return rc;
            has_val = true;
        } else if (strcmp(k, "expireAfterSeconds") == 0 ||
                   strcmp(k, "timeseries") == 0 || strcmp(k, "cappedSize") == 0 ||
                   strcmp(k, "cappedMax") == 0) {
            return mf_error_set(err, MF_NotImplemented,
                                "collMod option '%s' is not supported by MultiforaDB yet", k);
        } else {
            return mf_error_set(err, 40415, "BSON field 'collMod.%s' is an unknown field.", k);
        }
    }
    /* Changing the collection's options needs the catalog to itself:
     * listCollections reads them under the shared lock. */
    mf_engine_catalog_lock(e, has_images || has_val);
    mf_coll *c = mf_engine_coll(e, ns);
    if (!c) {
        mf_engine_catalog_unlock(e);
        return mf_error_set(err, MF_NamespaceNotFound, "ns does not exist: %s", ns);
    }
    index_mod m;
    char index_name[256] = "";
    bson_t before;
    options_before(c, &before);
    if (has_index && (rc = parse_index_mod(c, ns, &index, &m, err)) == 0)
        snprintf(index_name, sizeof index_name, "%s", m.name);
    mf_lsn lsn = 0;
    if (rc == 0 && has_index) {
        mf_coll_lock(c, true);
        rc = apply_index_mod(ctx, c, ns, &m, reply, &lsn, err);
        mf_coll_unlock(c);
    }
    if (rc == 0 && has_images)
        rc = mf_cl_set_pre_post_images(e, c, images, &lsn, err);
    if (rc == 0 && has_val)
        rc = coll_mod_validation(e, c, ns, &val, &lsn, err);
    if (rc == 0)
        rc = log_coll_mod(ctx, c, ns, cmd, has_index ? index_name : NULL, &before, reply, &lsn,
                          err);
    bson_destroy(&before);
    mf_engine_catalog_unlock(e);
    mfi_ctx_wrote(ctx, lsn);
    return rc;
}

/* ------------------------------------------------------- the TTL monitor */
