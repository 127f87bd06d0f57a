/*
 * options.c -- what the catalog keeps of a collection beyond its trees:
 * its uuid, its default collation, its clustered index, its change-stream
 * images option.
 *
 * An operation's collation, as mongod: the command's own `collation` when
 * it gives one (even {locale: "simple"}, which overrides a collection's
 * default), else the collection's default collation -- the full spec
 * `create` stored in its catalog options -- else the simple binary order
 * (a NULL collator).
 */
#include "coll.h"

#include <string.h>

#define CLUSTERED_DEFAULT_NAME "_id_"

bool mf_cl_options_of(const mf_coll *c, bson_t *out)
{
    const uint8_t *opt;
    size_t len;
    bson_t meta;
    bson_iter_t it;
    mf_coll_options(c, &opt, &len);
    return opt && bson_init_static(&meta, opt, len) && bson_iter_init_find(&it, &meta, "options") &&
           mf_bsonx_doc_view(&it, out);
}

bool mf_cl_uuid(mf_coll *c, uint8_t out[16])
{
    const uint8_t *opt;
    size_t len;
    bson_t meta;
    bson_iter_t it;
    mf_coll_options(c, &opt, &len);
    if (!opt || !bson_init_static(&meta, opt, len) || !bson_iter_init_find(&it, &meta, "uuid") ||
        !BSON_ITER_HOLDS_BINARY(&it))
        return false;
    bson_subtype_t st;
    uint32_t blen;
    const uint8_t *b;
    bson_iter_binary(&it, &st, &blen, &b);
    if (blen != 16)
        return false;
    memcpy(out, b, 16);
    return true;
}

int mf_cl_default_collation(const mf_coll *c, mf_collator **out, mf_error *err)
{
    const uint8_t *ob;
    size_t olen;
    bson_t meta;
    bson_iter_t it, sub;
    *out = NULL;
    if (!c)
        return 0;
    mf_coll_options(c, &ob, &olen);
    if (!ob || !olen || !bson_init_static(&meta, ob, olen) ||
        !bson_iter_init_find(&it, &meta, "options") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &sub) || !bson_iter_find(&sub, "collation"))
        return 0;
    int rc = mf_collator_new_iter(&sub, out, err);
    if (rc)
        return mf_error_set(err, MF_DataCorruption,
                            "collection %s: its default collation cannot be used: %s",
                            mf_coll_name(c), err->msg);
    return 0;
}

int mf_cl_collation_for(const mf_coll *c, bool has_given, const mf_collator *given,
                      mf_collator **out, mf_error *err)
{
    if (has_given) {
        *out = mf_collator_ref(given);
        return 0;
    }
    return mf_cl_default_collation(c, out, err);
}

int mf_cl_collation_of_ns(mf_engine *e, const char *ns, bool has_given, const mf_collator *given,
                        mf_collator **out, mf_error *err)
{
    if (has_given) {
        *out = mf_collator_ref(given);
        return 0;
    }
    mf_engine_catalog_lock(e, false);
    int rc = mf_cl_default_collation(mf_engine_coll(e, ns), out, err);
    mf_engine_catalog_unlock(e);
    return rc;
}

bool mf_cl_clustered(const mf_coll *c, bson_t *spec)
{
    const uint8_t *ob;
    size_t olen;
    bson_t meta;
    bson_iter_t it, sub;
    if (!c)
        return false;
    mf_coll_options(c, &ob, &olen);
    if (!ob || !olen || !bson_init_static(&meta, ob, olen) ||
        !bson_iter_init_find(&it, &meta, "options") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &sub) || !bson_iter_find(&sub, "clusteredIndex"))
        return false;
    if (spec && !mf_bsonx_doc_view(&sub, spec))
        bson_init(spec); /* damaged: still clustered */
    return true;
}

const char *mf_cl_clustered_name(const bson_t *spec)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, spec, "name") && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return CLUSTERED_DEFAULT_NAME;
}

void mf_cl_clustered_list_spec(const mf_coll *c, const bson_t *spec, bson_t *out)
{
    /* formatClusterKeyForListIndexes: the spec, the collection's
     * collation, clustered: true */
    mf_collator *dflt = NULL;
    mf_error cerr;
    bson_init(out);
    bson_concat(out, spec);
    if (mf_cl_default_collation(c, &dflt, &cerr) == 0 && dflt) {
        bson_t sub;
        BSON_APPEND_DOCUMENT_BEGIN(out, "collation", &sub);
        mf_collator_to_bson(dflt, &sub);
        bson_append_document_end(out, &sub);
    }
    mf_collator_unref(dflt);
    BSON_APPEND_BOOL(out, "clustered", true);
}

/* Write `c`'s catalog entry again with `newopts` as its options (the
 * rest -- the uuid -- kept).  Exclusive catalog lock. */
static int set_options(mf_engine *e, mf_coll *c, const bson_t *newopts, mf_lsn *lsn,
                       mf_error *err)
{
    const uint8_t *ob;
    size_t olen;
    bson_t meta, out = BSON_INITIALIZER;
    bson_iter_t it;
    mf_coll_options(c, &ob, &olen);
    if (!ob || !bson_init_static(&meta, ob, olen))
        return mf_error_set(err, MF_DataCorruption, "collection %s: damaged catalog entry",
                            mf_coll_name(c));
    bson_iter_init(&it, &meta);
    while (bson_iter_next(&it)) {
        if (strcmp(bson_iter_key(&it), "options") == 0)
            BSON_APPEND_DOCUMENT(&out, "options", newopts);
        else
            mf_bsonx_append_iter(&out, NULL, 0, &it);
    }
    int rc = mf_coll_set_options(e, c, bson_get_data(&out), out.len, NULL, lsn, err);
    bson_destroy(&out);
    return rc;
}

int mf_cl_set_pre_post_images(mf_engine *e, mf_coll *c, bool enabled, mf_lsn *lsn,
                                 mf_error *err)
{
    bson_t opts, newopts = BSON_INITIALIZER;
    /* The option goes first (appendBSON's order), or goes away. */
    if (enabled) {
        bson_t sub;
        BSON_APPEND_DOCUMENT_BEGIN(&newopts, "changeStreamPreAndPostImages", &sub);
        BSON_APPEND_BOOL(&sub, "enabled", true);
        bson_append_document_end(&newopts, &sub);
    }
    if (mf_cl_options_of(c, &opts))
        bson_copy_to_excluding_noinit(&opts, &newopts, "changeStreamPreAndPostImages", NULL);
    int rc = set_options(e, c, &newopts, lsn, err);
    bson_destroy(&newopts);
    return rc;
}

bool mf_cl_temp(const mf_coll *c)
{
    bson_t opts;
    bson_iter_t it;
    return mf_cl_options_of(c, &opts) && bson_iter_init_find(&it, &opts, "temp") &&
           bson_iter_as_bool(&it);
}

int mf_cl_clear_temp(mf_engine *e, mf_coll *c, mf_lsn *lsn, mf_error *err)
{
    bson_t opts, newopts = BSON_INITIALIZER;
    if (!mf_cl_options_of(c, &opts))
        return 0;
    bson_copy_to_excluding_noinit(&opts, &newopts, "temp", NULL);
    int rc = set_options(e, c, &newopts, lsn, err);
    bson_destroy(&newopts);
    return rc;
}

/* CollectionOptions::appendBSON's order, which listCollections shows. */
static const char *const option_order[] = {
    "capped", "size", "max", "autoIndexId", "temp", "recordPreImages",
    "changeStreamPreAndPostImages", "storageEngine", "indexOptionDefaults", "validator",
    "validationLevel", "validationAction", "collation", "clusteredIndex", "expireAfterSeconds",
    "viewOn", "pipeline", "idIndex", "timeseries", "encryptedFields"};
#define NOPTIONS (sizeof option_order / sizeof option_order[0])

void mf_cl_options_merge(const bson_t *old, const bson_t *changes, bson_t *out)
{
    bson_iter_t it;
    bson_init(out);
    for (size_t i = 0; i < NOPTIONS; i++) {
        const char *k = option_order[i];
        if (bson_iter_init_find(&it, changes, k)) {
            if (!BSON_ITER_HOLDS_NULL(&it)) /* null: removed */
                mf_bsonx_append_iter(out, k, (int)strlen(k), &it);
        } else if (old && bson_iter_init_find(&it, old, k)) {
            mf_bsonx_append_iter(out, k, (int)strlen(k), &it);
        }
    }
    /* anything else the catalog holds, after */
    if (old && bson_iter_init(&it, old))
        while (bson_iter_next(&it)) {
            bool known = false;
            for (size_t i = 0; i < NOPTIONS && !known; i++)
                known = strcmp(option_order[i], bson_iter_key(&it)) == 0;
            if (!known)
                mf_bsonx_append_iter(out, bson_iter_key(&it), (int)bson_iter_key_len(&it), &it);
        }
}

int mf_cl_change_options(mf_engine *e, mf_coll *c, const bson_t *changes, mf_lsn *lsn,
                         mf_error *err)
{
    bson_t opts, merged;
    mf_cl_options_merge(mf_cl_options_of(c, &opts) ? &opts : NULL, changes, &merged);
    int rc = set_options(e, c, &merged, lsn, err);
    bson_destroy(&merged);
    return rc;
}
