/*
 * catalog.c -- creating a collection (its catalog entry, with a fresh uuid
 * and the options, and its _id index, as one durable step), dropping a
 * collection or a database's, renaming, and listing the namespaces.
 */
#include "coll.h"

#include <stdlib.h>
#include <string.h>
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

bool mf_cl_exists(mf_engine *e, const char *ns)
{
    mf_engine_catalog_lock(e, false);
    bool found = mf_engine_coll(e, ns) != NULL;
    mf_engine_catalog_unlock(e);
    return found;
}

int mf_cl_drop(mf_cl_db *db, const char *ns, int *nindexes, mf_lsn *lsn, mf_error *err)
{
    mf_engine *e = db->engine;
    mf_engine_catalog_lock(e, true);
    mf_coll *c = mf_engine_coll(e, ns);
    int rc;
    if (!c) {
        rc = mf_error_set(err, MF_NamespaceNotFound, "ns not found %s", ns);
    } else {
        if (nindexes)
            *nindexes = (int)mf_coll_index_count(c);
        rc = mf_engine_coll_drop(e, ns, lsn, err);
    }
    mf_engine_catalog_unlock(e);
    if (rc == 0)
        mf_cl_usage_forget(db, ns, NULL);
    return rc;
}

int mf_cl_drop_if_empty(mf_cl_db *db, const char *ns, mf_error *err)
{
    mf_engine *e = db->engine;
    mf_lsn lsn = 0;
    int rc = 0;
    mf_engine_catalog_lock(e, true);
    mf_coll *c = mf_engine_coll(e, ns);
    if (c) {
        mf_cursor cur;
        bool any;
        mf_cursor_init(&cur, mf_engine_tree(e, mf_coll_records(c)));
        rc = mf_cursor_first(&cur, &any, err);
        if (rc == 0 && !any)
            rc = mf_engine_coll_drop(e, ns, &lsn, err);
    }
    mf_engine_catalog_unlock(e);
    if (rc == 0 && lsn) {
        mf_cl_usage_forget(db, ns, NULL);
        rc = mf_engine_sync(e, lsn, err);
    }
    return rc;
}

/* Catalog lock held: gather the names of `db`'s collections. */
typedef struct in_db {
    const char *db;
    size_t dblen;
    mf_cl_names *out;
    int rc;
} in_db;

static int names_add(mf_cl_names *l, const char *ns)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->ns, cap * sizeof *v);
        if (!v)
            return -1;
        l->ns = v;
        l->cap = cap;
    }
    if (!(l->ns[l->n] = strdup(ns)))
        return -1;
    l->n++;
    return 0;
}

static void gather(mf_coll *c, void *arg)
{
    in_db *g = arg;
    const char *ns = mf_coll_name(c);
    if (g->rc == 0 && (!g->db || (strncmp(ns, g->db, g->dblen) == 0 && ns[g->dblen] == '.')))
        g->rc = names_add(g->out, ns);
}

static int names_of(mf_engine *e, const char *db, mf_cl_names *out, mf_error *err)
{
    *out = (mf_cl_names){0};
    in_db g = {.db = db, .dblen = db ? strlen(db) : 0, .out = out};
    mf_engine_coll_each(e, gather, &g);
    if (g.rc) {
        mf_cl_names_free(out);
        return mf_error_oom(err);
    }
    return 0;
}

int mf_cl_names_get(mf_engine *e, mf_cl_names *out, mf_error *err)
{
    mf_engine_catalog_lock(e, false);
    int rc = names_of(e, NULL, out, err);
    mf_engine_catalog_unlock(e);
    return rc;
}

void mf_cl_names_free(mf_cl_names *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->ns[i]);
    free(l->ns);
    *l = (mf_cl_names){0};
}

int mf_cl_drop_db(mf_cl_db *db, const char *name, mf_lsn *lsn, mf_error *err)
{
    mf_engine *e = db->engine;
    mf_cl_names l;
    mf_engine_catalog_lock(e, true);
    int rc = names_of(e, name, &l, err);
    for (size_t i = 0; i < l.n && rc == 0; i++) {
        rc = mf_engine_coll_drop(e, l.ns[i], lsn, err);
        if (rc == 0)
            mf_cl_usage_forget(db, l.ns[i], NULL);
    }
    mf_engine_catalog_unlock(e);
    mf_cl_names_free(&l);
    return rc;
}

int mf_cl_rename(mf_cl_db *db, const char *from, const char *to, bool drop_target, mf_lsn *lsn,
                 mf_error *err)
{
    mf_engine *e = db->engine;
    int rc = 0;
    mf_engine_catalog_lock(e, true);
    if (!mf_engine_coll(e, from)) {
        rc = mf_error_set(err, MF_NamespaceNotFound, "Source collection %s does not exist",
                          from);
    } else if (strcmp(from, to) == 0) {
        rc = mf_error_set(err, MF_IllegalOperation, "Can't rename a collection to itself");
    } else if (mf_engine_coll(e, to)) {
        if (!drop_target)
            rc = mf_error_set(err, MF_NamespaceExists, "target namespace exists");
        else
            rc = mf_engine_coll_drop(e, to, lsn, err);
    }
    if (rc == 0)
        rc = mf_engine_coll_rename(e, from, to, lsn, err);
    mf_engine_catalog_unlock(e);
    if (rc == 0) {
        mf_cl_usage_forget(db, from, NULL);
        mf_cl_usage_forget(db, to, NULL);
    }
    return rc;
}
