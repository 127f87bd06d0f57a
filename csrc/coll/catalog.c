/*
 * catalog.c -- creating a collection: its catalog entry (a fresh uuid and
 * the options) and its _id index, as one durable step.
 */
#include "coll.h"

#include <sys/random.h>

#define ID_INDEX_SPEC_NAME "_id_"

/* Create `ns` (catalog lock held exclusively); durable on return. */
static int create_coll(mf_engine *e, const char *ns, const bson_t *options,
                       const mf_collator *coll, bool id_index, mf_error *err)
{
    uint8_t uuid[16];
    if (getrandom(uuid, sizeof uuid, 0) != (ssize_t)sizeof uuid)
        return mf_error_set(err, MF_InternalError, "no randomness for a collection UUID");
    uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40); /* version 4 */
    uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);
    bson_t meta, spec;
    bson_init(&meta);
    bson_append_binary(&meta, "uuid", 4, BSON_SUBTYPE_UUID, uuid, 16);
    BSON_APPEND_DOCUMENT(&meta, "options", options);
    mf_coll *c;
    mf_lsn lsn;
    int rc = mf_engine_coll_create(e, ns, bson_get_data(&meta), meta.len, &c, &lsn, err);
    bson_destroy(&meta);
    if (rc)
        return rc;
    if (!id_index)
        return mf_engine_sync(e, lsn, err);
    mf_index_id_spec(coll, &spec);
    mf_coll_lock(c, true);
    rc = mf_coll_index_create(e, c, ID_INDEX_SPEC_NAME, bson_get_data(&spec), spec.len, NULL,
                              &lsn, err);
    mf_coll_unlock(c);
    bson_destroy(&spec);
    return rc ? rc : mf_engine_sync(e, lsn, err);
}

int mf_cl_create(mf_engine *e, const char *ns, const bson_t *options, const mf_collator *coll,
                 bool id_index, mf_error *err)
{
    mf_engine_catalog_lock(e, true);
    int rc = mf_engine_coll(e, ns)
                 ? mf_error_set(err, MF_NamespaceExists, "Collection %s already exists.", ns)
                 : create_coll(e, ns, options, coll, id_index, err);
    mf_engine_catalog_unlock(e);
    return rc;
}
